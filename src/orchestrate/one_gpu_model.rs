//! A results root holds one GPU model (why: `ingest::gpu_model`, DESIGN.md §4.3 "GPU model"):
//! `ctax run` refuses to resume a root on GPUs of another model, `ctax rejoin` to join
//! launches made on one, and `ctax merge` (its own check, over the shards' [`of_root`]) to
//! merge shards of different models.

use std::collections::BTreeMap;
use std::path::Path;

use crate::ingest::gpu_model;

/// model → the run directories of `root` measured on it (from each one's env.txt and
/// placement); run directories without a GPU (CPU, simulated) or without env.txt are not listed.
pub(crate) fn of_root(root: &Path) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (dir, rc) in super::resume::runs(root) {
        // A simulated server's env.txt lists the host's GPUs, which it never used.
        if rc.simulated {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(dir.join("env.txt")) else {
            continue;
        };
        let env = crate::ingest::env::parse_env_txt(&text);
        let name = dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        for m in gpu_model::of_launch(rc.placement.as_ref(), &env) {
            out.entry(m).or_default().push(name.clone());
        }
    }
    out
}

/// model → where it is on this host (`GPU 0`, …): the models of the GPUs the slots use, from
/// `names` ((index, name) as nvidia-smi lists them). A slot without one GPU index (several
/// GPUs, a MIG device, one slot on a host of several GPUs) counts every GPU nvidia-smi lists,
/// as its env.txt will. Empty without nvidia-smi.
pub(crate) fn of_slots(
    gpu_indices: impl IntoIterator<Item = Option<u32>>,
    names: &[(u32, String)],
) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for slot in gpu_indices {
        for (i, name) in names.iter().filter(|(j, _)| slot.is_none_or(|s| s == *j)) {
            if let Some(m) = gpu_model::model_name(name) {
                let at = out.entry(m).or_default();
                let gpu = format!("GPU {i}");
                if !at.contains(&gpu) {
                    at.push(gpu);
                }
            }
        }
    }
    out
}

/// Refuses to add launches on a GPU model `root` holds no launch of, when it holds launches on
/// any GPU: `incoming` is model → where those launches are (run directories, GPUs), `adding`
/// what would add them (`this sweep`, `the rejoin of BACK`). An empty or GPU-less root accepts
/// any model.
pub(crate) fn ensure_same(
    root: &Path,
    incoming: &BTreeMap<String, Vec<String>>,
    adding: &str,
) -> anyhow::Result<()> {
    let have = of_root(root);
    if have.is_empty() {
        return Ok(());
    }
    let foreign: Vec<String> = incoming
        .iter()
        .filter(|(m, _)| !have.contains_key(*m))
        .map(|(m, at)| format!("{m} ({})", list(at)))
        .collect();
    anyhow::ensure!(
        foreign.is_empty(),
        "{} holds launches on {}; {adding} would add launches on {}: a results root holds one GPU \
         model (its reference rates, pooled cells, launch-noise pool and figures would mix GPUs \
         of different capacity). Use another results root for this GPU model, with its own \
         profile (as launch/profiles/h100.toml for results/h100-2026-12-05)",
        root.display(),
        have.iter()
            .map(|(m, runs)| format!("{m} ({})", list(runs)))
            .collect::<Vec<_>>()
            .join(", "),
        foreign.join(", ")
    );
    Ok(())
}

/// `a, b, c and 5 more`.
fn list(v: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut s = v.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if v.len() > SHOWN {
        s.push_str(&format!(" and {} more", v.len() - SHOWN));
    }
    s
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A run directory `name` in `root` whose env.txt lists `gpus` (nvidia-smi -L lines) and
    /// whose placement names GPU `slot_gpu`.
    pub(crate) fn run_on(root: &Path, name: &str, gpus: &[&str], slot_gpu: Option<u32>) {
        let d = root.join(name);
        std::fs::create_dir_all(&d).unwrap();
        let (config, launch) = name.rsplit_once("_l").unwrap();
        let config = config.split_once('_').unwrap().1;
        let rc = ctax_schema::RunConfig {
            schema_version: 1,
            config: config.into(),
            launch: launch.parse().unwrap(),
            run_dir: name.into(),
            phases: vec![ctax_schema::Phase::A],
            cells: Vec::new(),
            model: "m".into(),
            served_model_name: "m".into(),
            port: 8000,
            extra: serde_json::Value::Null,
            simulated: false,
            placement: slot_gpu.map(|i| ctax_schema::Placement {
                gpu_index: Some(i),
                ..Default::default()
            }),
        };
        std::fs::write(d.join("config.json"), serde_json::to_vec(&rc).unwrap()).unwrap();
        let mut env = String::from("# connector-tax env.txt\n\n== gpu\n");
        for (i, g) in gpus.iter().enumerate() {
            env.push_str(&format!("GPU {i}: {g} (UUID: GPU-{i:08x}-0000)\n"));
        }
        std::fs::write(d.join("env.txt"), env).unwrap();
    }

    pub(crate) const H200: &str = "NVIDIA H200";
    pub(crate) const H100: &str = "NVIDIA H100 80GB HBM3";

    #[test]
    fn a_root_of_one_model_refuses_another_and_accepts_its_own() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        run_on(root, "20261130-000000_plain_l0", &[H200, H200], Some(1));
        run_on(
            root,
            "20261130-000100_mooncake_both_l0",
            &[H200, H200],
            Some(0),
        );
        assert_eq!(
            of_root(root),
            BTreeMap::from([(
                H200.to_owned(),
                vec![
                    "20261130-000000_plain_l0".to_owned(),
                    "20261130-000100_mooncake_both_l0".to_owned()
                ]
            )])
        );
        let names = [(0, H100.to_owned()), (1, H100.to_owned())];
        let e = ensure_same(root, &of_slots([Some(0)], &names), "this sweep")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("holds launches on NVIDIA H200 (20261130-000000_plain_l0, 20261130-000100_mooncake_both_l0)")
                && e.contains("this sweep would add launches on NVIDIA H100 80GB HBM3 (GPU 0)"),
            "{e}"
        );
        let same = [(0, H200.to_owned())];
        ensure_same(root, &of_slots([Some(0)], &same), "this sweep").unwrap();
        // Without nvidia-smi (no names) nothing is known: nothing refused.
        ensure_same(root, &of_slots([Some(0)], &[]), "this sweep").unwrap();
        // A slot without one GPU index counts every GPU of the host.
        let e = ensure_same(root, &of_slots([None], &names), "this sweep")
            .unwrap_err()
            .to_string();
        assert!(e.contains("NVIDIA H100 80GB HBM3 (GPU 0, GPU 1)"), "{e}");
        // A simulated launch's env.txt names the host's GPUs, which it never used.
        let sim = root.join("sim");
        run_on(&sim, "20261130-000000_plain_l0", &[H100], Some(0));
        let cfg = sim.join("20261130-000000_plain_l0/config.json");
        let mut rc: ctax_schema::RunConfig =
            serde_json::from_slice(&std::fs::read(&cfg).unwrap()).unwrap();
        rc.simulated = true;
        std::fs::write(&cfg, serde_json::to_vec(&rc).unwrap()).unwrap();
        assert!(of_root(&sim).is_empty());
    }

    #[test]
    fn an_empty_or_gpu_less_root_accepts_any_model() {
        let t = tempfile::tempdir().unwrap();
        let incoming = BTreeMap::from([(H100.to_owned(), vec!["GPU 0".to_owned()])]);
        ensure_same(t.path(), &incoming, "this sweep").unwrap();
        // A CPU run's env.txt lists no GPU.
        run_on(t.path(), "20261130-000000_plain_l0", &[], None);
        assert!(of_root(t.path()).is_empty());
        ensure_same(t.path(), &incoming, "this sweep").unwrap();
    }
}
