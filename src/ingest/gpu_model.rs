//! Which GPU model a launch ran on (DESIGN.md §4.3 "GPU model"). A results root holds one GPU
//! model: each tax pairs a config with plain on one machine, but the reference rates, the
//! pooled cells, the noise pool and every figure pool the root's launches, and two GPU models
//! differ in capacity (the stand-in's knee is 8 req/s on an H200 and 4 on an H100), so `ctax
//! run`, `ctax rejoin` and `ctax merge` refuse to add another model's launches to a root
//! (`orchestrate::one_gpu_model`), and the report names the model(s) and warns where a root
//! mixes them anyway.

use std::collections::{BTreeMap, BTreeSet};

use ctax_schema::Placement;

/// The model in an nvidia-smi GPU description: `NVIDIA H200 (UUID: GPU-…)` (env.txt's `GPU 0:`
/// line) or a manifest row's `NVIDIA H200 (UUID: GPU-…), driver 580.1` gives `NVIDIA H200`;
/// `None` for an empty one.
pub(crate) fn model_name(desc: &str) -> Option<String> {
    let head = desc.split(" (UUID:").next().unwrap_or(desc);
    let head = head.split(", driver").next().unwrap_or(head).trim();
    (!head.is_empty()).then(|| head.to_owned())
}

/// The GPU model(s) of a launch, from its env.txt (`gpu.gpu_<i>` lines): the GPU its placement
/// names, else every model among the host's GPUs (a launch without a placement on a host of two
/// models counts for both); empty where env.txt lists no GPU (a CPU run, no env.txt).
pub(crate) fn of_launch(
    placement: Option<&Placement>,
    env: &BTreeMap<String, String>,
) -> BTreeSet<String> {
    if let Some(m) = placement
        .and_then(|p| p.gpu_index)
        .and_then(|i| env.get(&format!("gpu.gpu_{i}")))
        .and_then(|d| model_name(d))
    {
        return BTreeSet::from([m]);
    }
    env.iter()
        .filter(|(k, _)| k.starts_with("gpu.gpu_"))
        .filter_map(|(_, v)| model_name(v))
        .collect()
}

/// Where one GPU model ran in a dataset.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GpuUse {
    pub model: String,
    /// Launches (run directories) on it.
    pub launches: usize,
    /// Machines (the analysis' machine key) on it.
    pub machines: usize,
}

/// (models, machine key) of each launch → one row per model, most launches first (then by
/// name); a launch counts for each of its models, and for none without one.
pub(crate) fn tally(launches: impl IntoIterator<Item = (BTreeSet<String>, String)>) -> Vec<GpuUse> {
    let mut by: BTreeMap<String, (usize, BTreeSet<String>)> = BTreeMap::new();
    for (models, machine) in launches {
        for m in models {
            let e = by.entry(m).or_default();
            e.0 += 1;
            e.1.insert(machine.clone());
        }
    }
    let mut out: Vec<GpuUse> = by
        .into_iter()
        .map(|(model, (launches, machines))| GpuUse {
            model,
            launches,
            machines: machines.len(),
        })
        .collect();
    out.sort_by(|a, b| b.launches.cmp(&a.launches).then(a.model.cmp(&b.model)));
    out
}

/// `NVIDIA H200: 78 launches on 22 machines; NVIDIA H100 80GB HBM3: 3 launches on 1 machine`.
pub(crate) fn describe(gpus: &[GpuUse]) -> String {
    let n = |k: usize, one: &str, many: &str| format!("{k} {}", if k == 1 { one } else { many });
    gpus.iter()
        .map(|g| {
            format!(
                "{}: {} on {}",
                g.model,
                n(g.launches, "launch", "launches"),
                n(g.machines, "machine", "machines")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::env::parse_env_txt;

    #[test]
    fn the_model_is_the_description_before_its_uuid() {
        // env.txt's line as nvidia-smi -L wrote it on the H100 of 2026-12-05, and a manifest
        // row's `gpu` field of the same launch.
        assert_eq!(
            model_name("NVIDIA H100 80GB HBM3 (UUID: GPU-8818c3c2-41a2-2428-a37f-65602e189ec8)")
                .as_deref(),
            Some("NVIDIA H100 80GB HBM3")
        );
        assert_eq!(
            model_name(
                "NVIDIA H200 (UUID: GPU-13eae37f-8099-b03a-c45f-13729ad30e2f), driver 580.159.04"
            )
            .as_deref(),
            Some("NVIDIA H200")
        );
        assert_eq!(model_name("  "), None);
    }

    #[test]
    fn a_launch_s_model_is_its_own_gpu_s_else_the_host_s() {
        let env = parse_env_txt(
            "== gpu\nGPU 0: NVIDIA H200 (UUID: GPU-aa)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bb)\ndriver: 580.1\n",
        );
        let on = |i: u32| Placement {
            gpu_index: Some(i),
            ..Default::default()
        };
        let set = |v: &[&str]| v.iter().map(|m| (*m).to_owned()).collect::<BTreeSet<_>>();
        assert_eq!(
            of_launch(Some(&on(1)), &env),
            set(&["NVIDIA H100 80GB HBM3"])
        );
        assert_eq!(of_launch(Some(&on(0)), &env), set(&["NVIDIA H200"]));
        // No placement (runs before slots), or no GPU index (a slot of several GPUs, a MIG
        // device): every model of the host, each by its own name.
        let both = set(&["NVIDIA H100 80GB HBM3", "NVIDIA H200"]);
        assert_eq!(of_launch(None, &env), both);
        assert_eq!(of_launch(Some(&Placement::default()), &env), both);
        // A CPU run's env.txt lists no GPU.
        assert!(of_launch(None, &parse_env_txt("== gpu\nno GPU\n")).is_empty());
    }

    #[test]
    fn the_tally_counts_launches_and_distinct_machines_per_model() {
        let h200 = || vec!["NVIDIA H200"];
        let t = tally(
            [
                (h200(), "boot a"),
                (h200(), "boot a"),
                (h200(), "boot b"),
                (vec!["NVIDIA H100 80GB HBM3"], "boot c"),
                (vec![], "unrecorded"),
            ]
            .map(|(m, k)| (m.into_iter().map(str::to_owned).collect(), k.to_owned())),
        );
        assert_eq!(
            describe(&t),
            "NVIDIA H200: 3 launches on 2 machines; NVIDIA H100 80GB HBM3: 1 launch on 1 machine"
        );
    }
}
