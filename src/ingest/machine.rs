//! Which machine a launch ran on: the block of the analysis' within-machine comparisons
//! (DESIGN.md §4.3 "Machines"). On the H200 every GPU session was a different leased machine,
//! and TTFT p90 at the same load differed by ~20% between machines while launches of one config
//! on one machine differed by ~5%, so a tax compares a config with plain on the same machine.
//!
//! The key, first found wins:
//! 1. `placement.machine_id` (config.json / summary.json, the kernel's boot id since it was
//!    recorded): `boot 1a2b3c4d` (a UUID's first 8 hex digits; another id whole);
//! 2. env.txt's `boot_id` line of its host section: the same id, for runs whose placement lacks it;
//! 3. env.txt's GPU list (`GPU 0: NVIDIA H200 (UUID: GPU-13eae37f-…)`, every GPU of the host):
//!    `GPUs 13eae37f+49be2d53` — each GPU session of the archived H200 data was a fresh machine
//!    with its own GPUs, so the set of the host's GPU UUIDs names it;
//! 4. otherwise [`UNRECORDED`]: one machine for every such launch (a CPU run, a simulation),
//!    which is what the analysis assumed before machines were recorded.

use std::collections::BTreeMap;

use ctax_schema::Placement;

/// The machine of launches that recorded none.
pub(crate) const UNRECORDED: &str = "unrecorded";

/// The first 8 characters of a random hex id (short enough to read, 32 random bits: enough to
/// tell a dataset's machines apart).
fn short(id: &str) -> String {
    id.chars().take(8).collect()
}

/// A boot id as a key: its first 8 hex digits when it is a UUID (as the kernel writes it), else
/// the whole id (an id set by hand need not be random in its first characters).
pub(crate) fn boot_key(id: &str) -> String {
    let uuid = id.len() == 36
        && id.chars().enumerate().all(|(i, c)| {
            matches!(i, 8 | 13 | 18 | 23) == (c == '-') && (c == '-' || c.is_ascii_hexdigit())
        });
    if uuid {
        format!("boot {}", short(id))
    } else {
        format!("boot {id}")
    }
}

/// The machine key of one cell of one launch (see the module docs).
pub(crate) fn machine_key(placement: Option<&Placement>, env: &BTreeMap<String, String>) -> String {
    if let Some(id) = placement
        .and_then(|p| p.machine_id.as_deref())
        .filter(|s| !s.trim().is_empty())
    {
        return boot_key(id.trim());
    }
    if let Some(id) = env.get("host.boot_id").filter(|s| !s.trim().is_empty()) {
        return boot_key(id.trim());
    }
    let mut gpus: Vec<String> = env
        .iter()
        .filter(|(k, _)| k.starts_with("gpu.gpu_"))
        .filter_map(|(_, v)| {
            let uuid = v.split("UUID:").nth(1)?.trim().trim_end_matches(')').trim();
            let hex = uuid.strip_prefix("GPU-").unwrap_or(uuid);
            (!hex.is_empty()).then(|| short(hex))
        })
        .collect();
    gpus.sort();
    gpus.dedup();
    // A cell measured on a GPU that env.txt does not list ran on another machine than the one
    // that wrote env.txt (a launch resumed elsewhere rewrites env.txt and config.json, while
    // summary.json keeps each cell's own placement): that GPU alone names its machine, which
    // then pairs with nothing rather than with the wrong machine's plain.
    if let Some(own) = placement
        .and_then(|p| p.gpu_uuid.as_deref())
        .map(|u| short(u.strip_prefix("GPU-").unwrap_or(u)))
        .filter(|u| !u.is_empty() && !gpus.is_empty() && !gpus.contains(u))
    {
        return format!("GPU {own}");
    }
    if gpus.is_empty() {
        UNRECORDED.to_owned()
    } else {
        format!("GPUs {}", gpus.join("+"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::env::parse_env_txt;

    /// The `== gpu` section as tools/capture_env.sh wrote it on the 2-GPU H200 machine of
    /// 2026-11-30 (results/h200x2-2026-11-30/20261130-205621_plain_l1/env.txt).
    const H200X2_ENV: &str = "# connector-tax env.txt\n\n== host\nvm\n\n== gpu\n\
        GPU 0: NVIDIA H200 (UUID: GPU-13eae37f-8099-b03a-c45f-13729ad30e2f)\n\
        GPU 1: NVIDIA H200 (UUID: GPU-49be2d53-8ded-fc3b-fe63-a1ac43205b07)\n\
        driver: 580.159.04\n";

    #[test]
    fn gpu_uuids_of_the_host_name_an_archived_machine() {
        let env = parse_env_txt(H200X2_ENV);
        assert_eq!(machine_key(None, &env), "GPUs 13eae37f+49be2d53");
        // The GPU list is the host's, whatever the slot: a launch on GPU 1 is the same machine.
        let p = Placement {
            slot: 1,
            gpu_uuid: Some("GPU-49be2d53-8ded-fc3b-fe63-a1ac43205b07".into()),
            ..Default::default()
        };
        assert_eq!(machine_key(Some(&p), &env), "GPUs 13eae37f+49be2d53");
        // A cell whose own placement names a GPU this env.txt does not list was measured on
        // another machine (a launch resumed elsewhere rewrote env.txt): its GPU names it.
        let elsewhere = Placement {
            gpu_uuid: Some("GPU-7f02f1c6-ad97-a486-b656-d81d7b518b92".into()),
            ..Default::default()
        };
        assert_eq!(machine_key(Some(&elsewhere), &env), "GPU 7f02f1c6");
    }

    #[test]
    fn the_recorded_boot_id_wins_then_env_then_unrecorded() {
        let env = parse_env_txt(&format!(
            "{H200X2_ENV}\n== host\nboot_id: 0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\n"
        ));
        // `== host` appears twice here; the second block's boot_id is read as host.boot_id.
        assert_eq!(machine_key(None, &env), "boot 0f1e2d3c");
        let p = Placement {
            machine_id: Some("aabbccdd-0000-1111-2222-333344445555\n".into()),
            ..Default::default()
        };
        assert_eq!(machine_key(Some(&p), &env), "boot aabbccdd");
        assert_eq!(machine_key(None, &BTreeMap::new()), UNRECORDED);
        let blank = Placement {
            machine_id: Some("  ".into()),
            ..Default::default()
        };
        assert_eq!(machine_key(Some(&blank), &BTreeMap::new()), UNRECORDED);
        // An id that is no UUID is kept whole: two such ids never collide in a prefix.
        let named = |id: &str| Placement {
            machine_id: Some(id.into()),
            ..Default::default()
        };
        assert_eq!(
            machine_key(Some(&named("synth-machine-1")), &BTreeMap::new()),
            "boot synth-machine-1"
        );
    }
}
