//! The named variants of launch/common.sh (`<seed config>_nhd`): each launch script writes
//! exactly its seed config's launch script plus `export VLLM_KV_CACHE_LAYOUT=NHD` (the same
//! vLLM command, connector JSON and environment otherwise), and the seed configs never set the
//! layout. Runs the real scripts with `--dry-run` (no vLLM needed).

use std::process::Command;

fn dry_run(config: &str) -> Vec<String> {
    let repo = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("bash")
        .arg(format!("{repo}/launch/launch_{config}.sh"))
        .arg("--dry-run")
        .env("CTAX_MODEL", "/models/m")
        .env("CTAX_VLLM", "/bin/true")
        .env_remove("CTAX_RUN_DIR")
        .env_remove("VLLM_KV_CACHE_LAYOUT")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{config}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        // The header names the config and the time it was written.
        .filter(|l| !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn nhd_variants_are_their_seed_config_plus_the_layout() {
    for (variant, seed) in [
        ("mooncake_both_nhd", "mooncake_both"),
        ("multi_mooncake_lmcache_nhd", "multi_mooncake_lmcache"),
    ] {
        let base = dry_run(seed);
        assert!(
            base.iter().all(|l| !l.contains("VLLM_KV_CACHE_LAYOUT")),
            "{seed} must not set the layout: {base:?}"
        );
        assert!(
            base.iter().any(|l| l.contains("--kv-transfer-config")),
            "{seed}: {base:?}"
        );
        let mut v = dry_run(variant);
        let i = v
            .iter()
            .position(|l| l == "export VLLM_KV_CACHE_LAYOUT=NHD")
            .unwrap_or_else(|| panic!("{variant} does not set the layout: {v:?}"));
        v.remove(i);
        assert_eq!(v, base, "{variant} differs from {seed} beyond the layout");
    }
}
