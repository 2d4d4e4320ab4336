//! `ctax run`: the seed's stages with barriers, on one or more GPU slots of this host, or on
//! one shard of the plan (several hosts).
//!
//! | stage | what | where |
//! |---|---|---|
//! | 0 | pre-flight (verify scripts → preflight_status.json) + step-timing plugin install | [`preflight`], [`stage0_plugin`] |
//! | 1 | Phase A over all included configs, seeded random order, launches interleaved | [`plan`], [`runner`] |
//! | 2 | reference rates (the analysis engine's code) → reference_rates.json | [`stages::reference_rates`] |
//! | 3 | Phase B at ref_safe (+ B' at ref_load for the priority configs when they differ, unless a config saturates there; `--phase-b-shapes`: some shapes, or B' alone) | [`plan`], [`runner`] |
//! | 4 | plugin removal, analysis, report | [`stages::analyze_and_report`] |
//!
//! Files, one job each: [`plan`] (which launch runs where: order, shard, slot, calibration),
//! [`anchor`] (a plain launch on every machine that runs a phase), [`slots`] (what a slot
//! owns: GPU, ports, CPUs), [`runner`] (one thread per slot, blocks with barriers), [`launch`]
//! (one launch), [`resume`] (what is left of a launch), [`merge`] (`ctax merge`: shards' roots
//! into one).
//!
//! Resume: run again with the same `--out`. A launch whose cells are all complete is skipped;
//! a launch with incomplete cells is relaunched in the same run directory and reruns only those
//! cells (their old files move to `superseded/<stamp>/`).
//!
//! Length: ~560 lines, over the ~500 guideline on purpose: the stage driver `run` reads top to bottom as the seed's stages and barriers; the per-launch work lives in the files above.

mod anchor;
pub mod archive;
mod end_by;
mod gpu_telemetry;
mod http;
pub mod killed;
mod launch;
mod manifest;
pub mod merge;
mod one_gpu_model;
mod plan;
mod preflight;
mod profile;
pub mod rejoin;
mod resume;
pub mod root_lock;
mod runner;
mod server;
mod signals;
pub mod skeleton;
mod slots;
pub mod stages;
mod steps;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::Context;
use ctax_schema::{Cell, Decision, Exit, Phase, PlannedCell, PreflightStatus, ReferenceRates};

use plan::{Shard, Unit};
use profile::{Profile, Timing};
use slots::Slot;

/// Arguments of `ctax run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Profile name (launch/profiles/<name>.toml) or path to a TOML file.
    #[arg(long, default_value = "seed")]
    pub profile: String,
    /// Results root to write into; running again with the same root resumes.
    #[arg(long)]
    pub out: PathBuf,
    /// Skip a stage (0-4); repeatable.
    #[arg(long = "skip-stage")]
    pub skip_stage: Vec<u8>,
    /// Launches per config and phase (overrides the profile), interleaved across configs.
    #[arg(long)]
    pub launches: Option<u32>,
    /// Only these configs (comma-separated; overrides the profile's list; must include plain).
    #[arg(long, value_delimiter = ',')]
    pub configs: Option<Vec<String>>,
    /// GPU slots: one launch per listed GPU at a time (CUDA_VISIBLE_DEVICES values, e.g.
    /// `0,1`); overrides the profile's slots.gpus. Each slot gets its own ports and CPU set.
    #[arg(long, value_delimiter = ',')]
    pub gpus: Option<Vec<String>>,
    /// Run only the K-th of N disjoint parts of the plan (another host runs the others; join
    /// them with `ctax merge`). Stages 2-4 need all of Phase A: see --reference-rates.
    #[arg(long)]
    pub shard: Option<Shard>,
    /// Stage 2 takes the reference rates from this file (e.g. from `ctax reference-rates` on
    /// the merged Phase A of all shards) instead of computing them from this root.
    #[arg(long)]
    pub reference_rates: Option<PathBuf>,
    /// Added to every port of every slot (several sweeps on one host).
    #[arg(long, default_value_t = 0)]
    pub port_offset: u16,
    /// The checkout holding launch/, tools/, patches/ (default: found from the current
    /// directory or the executable's location).
    #[arg(long)]
    pub repo: Option<PathBuf>,
    /// ctax-collect executable (default: next to this executable).
    #[arg(long)]
    pub collector: Option<PathBuf>,
    /// Use the profile at --profile even if the results root holds a different profile.toml.
    #[arg(long)]
    pub force_profile: bool,
    /// On resume, rerun also the cells that `max_cell_s` stopped (by default they are kept:
    /// they record an overload, which a rerun reproduces at the same GPU cost).
    #[arg(long)]
    pub rerun_capped: bool,
    /// With the plain anchor a machine gets (profile `plain_on_every_machine`), also run a plain
    /// launch after the stage's other launches there, so plain brackets them (machine drift over
    /// the stretch; an A/A on one machine). Costs one plain launch per stage and machine.
    #[arg(long)]
    pub plain_last: bool,
    /// Phase B: run this shape (`IN/OUT`, one of the profile's `phase_b.shapes`) first in every
    /// launch of this sweep, right after the launch's warm-up as Phase A's ref_safe cell runs;
    /// the other shapes keep the profile's order. Tests whether a tax depends on the cell's
    /// place in the launch (DESIGN.md §4.3 "The same cell in both phases"); each launch's
    /// `config.json` lists its cells in the order they ran.
    #[arg(long, value_name = "IN/OUT", conflicts_with = "phase_b_shapes")]
    pub phase_b_first: Option<String>,
    /// Phase B: plan only these of the profile's `phase_b.shapes` in this sweep, in this order
    /// (`512/256,4096/256`), or `none`: no Phase B shape, so the sweep's Phase B launches run
    /// only their B' cells (the profile's `[phase_bp]` at ref_load, for its configs; DESIGN.md
    /// §7 "B' in new launches"). New launches run them alone; a launch that exists keeps the
    /// cells its own `config.json` planned. Adds B' to a root whose Phase B is done: add
    /// `[phase_bp]` to the profile (--force-profile) and run `--phase-b-shapes none` with
    /// --launches one above each config's Phase B launches (a `gpu_run.sh` --then chain when
    /// the counts differ).
    #[arg(long, value_name = "SHAPES", value_delimiter = ',')]
    pub phase_b_shapes: Option<Vec<String>>,
    /// B': run this B' shape (`IN/OUT`, one of the profile's `[phase_bp]` shapes) first among
    /// every launch's B' cells in this sweep (in a B'-only launch, `--phase-b-shapes none`: right
    /// after the launch's warm-up); the other B' shapes keep the profile's order. With the
    /// profile's first shape last it gives B' pairs in the other order, so the report can tell
    /// a B' tax from the cell's place in the launch (DESIGN.md §4.3 "Mixed places").
    #[arg(long, value_name = "IN/OUT")]
    pub phase_bp_first: Option<String>,
    /// Phase A: run the rates in this order in every launch of this sweep (`4,6,8,2`: each of
    /// the profile's `phase_a.rates` once), the first right after the launch's warm-up. With
    /// ref_safe last it mirrors `--phase-b-first`: the cell H1 reads, after the other rates
    /// instead of first (DESIGN.md §4.3 "Mixed places": the report says where a phase's taxes
    /// pool launches run in different orders).
    #[arg(long, value_name = "RATES", value_delimiter = ',')]
    pub phase_a_order: Option<Vec<f64>>,
    /// Phase A: plan only these of the profile's `phase_a.rates` in this sweep, in this order
    /// (`0.5,1`): new launches run them alone. Extends a root's ladder without rerunning it:
    /// add the rates to the profile (`--force-profile`) and run them in new launches. A launch
    /// that exists is never extended by a later plan (only the cells its own `config.json`
    /// planned are resumed), so the root's earlier launches stay as they ran.
    #[arg(
        long,
        value_name = "RATES",
        value_delimiter = ',',
        conflicts_with = "phase_a_order"
    )]
    pub phase_a_rates: Option<Vec<f64>>,
    /// Print the launches this run would start, in order per slot (anchors, closing plains,
    /// launches to resume, complete launches skipped), and exit: no server, no pre-flight, no
    /// file written. Phase B uses the root's reference_rates.json as it is now.
    #[arg(long)]
    pub dry_run: bool,
    /// Start no launch that is not expected to end by WHEN: `+25m`, `+1h30m`, `+1500s` (from
    /// this `ctax run`'s start), `@UNIX_SECONDS`, or `2026-12-05T15:10:00Z`. A launch's time
    /// is estimated, pessimistically, from what the root has measured (its slowest launch
    /// overhead, each cell's longest time); once one launch is held back no later one starts,
    /// and `ctax run` exits 5 after stages 2 and 4 as usual (3 if a launch that ran was
    /// incomplete). Pre-flight verify launches are not weighed. With --dry-run: each launch's
    /// estimate and which would not start. For a lease, an allocation or a device budget that
    /// ends at a known time: a launch cut off there is lost whole (DESIGN.md §7 "--end-by").
    #[arg(long, value_name = "WHEN")]
    pub end_by: Option<String>,
}

/// What happened to one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Done,
    AlreadyDone,
    Incomplete,
    Failed,
    Interrupted,
    /// `--end-by` held it back: it would not have ended in time.
    NotStarted,
}

/// What every launch of the sweep shares.
struct Ctx {
    pub root: PathBuf,
    pub repo: PathBuf,
    pub profile: Profile,
    /// The launch contract's environment (CTAX_* and the profile's env), before slot values.
    pub env: Vec<(String, String)>,
    pub collector: PathBuf,
    pub python: String,
    /// `--rerun-capped`.
    pub rerun_capped: bool,
    /// `--plain-last`.
    pub plain_last: bool,
    /// `--phase-b-first`: the Phase B shape each launch runs first.
    pub phase_b_first: Option<(u32, u32)>,
    /// `--phase-b-shapes`: the Phase B shapes of this sweep's launches, in order (empty: only
    /// their B' cells); `None`: the profile's, `--phase-b-first`'s first.
    pub phase_b_shapes: Option<Vec<(u32, u32)>>,
    /// `--phase-bp-first`: the B' shape each launch runs first among its B' cells.
    pub phase_bp_first: Option<(u32, u32)>,
    /// `--dry-run`: stages print their launches instead of running them.
    pub dry_run: bool,
    /// `--end-by`: the deadline, and the launches it held back.
    pub end_by: end_by::EndBy,
}

impl Ctx {
    /// The environment of a launch on `slot`: the sweep's, then the slot's (its values win).
    fn slot_env(&self, slot: &Slot) -> Vec<(String, String)> {
        let mut env = self.env.clone();
        env.extend(slot.env.iter().cloned());
        env
    }
}

/// An error in `ctax run`'s arguments that clap's parser cannot see (a rule across values, or
/// between the arguments and the kind of root `--out` names):
/// the `ctax` binary reports it as clap reports a misspelt flag (usage, exit 2), so
/// `gpu_run.sh chain`'s dry runs refuse a chain with such a sweep before anything starts.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// `Err(UsageError(msg))` unless `ok`: for the rules between `ctax run`'s arguments and its
/// root that no earlier sweep can change (a skeleton stays a skeleton, a skipped stage stays
/// skipped), so a chain with such a sweep is refused before its first sweep starts.
fn usage_ensure(ok: bool, msg: String) -> anyhow::Result<()> {
    if ok {
        Ok(())
    } else {
        Err(UsageError(msg).into())
    }
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    // Checked first: a usage error comes before anything else is read or started.
    usage_ensure(
        args.configs
            .as_ref()
            .is_none_or(|c| c.iter().any(|x| x == "plain")),
        "--configs must include plain (the baseline)".into(),
    )?;
    let end_by_ms = args
        .end_by
        .as_deref()
        .map(|w| end_by::parse(w, server::unix_ms()))
        .transpose()
        .map_err(|e| UsageError(format!("{e:#}")))?;
    signals::install();
    let repo = resolve_repo(args.repo.as_deref())?;
    let loaded = profile::load(&args.profile, &repo)?;
    let mut p = loaded.profile;
    if let Some(l) = args.launches {
        p.launches = l;
    }
    if let Some(c) = &args.configs {
        p.configs = c.clone();
    }
    // The Phase A rates of this sweep, checked against the profile before the root is touched.
    let phase_a_rates = match (&args.phase_a_order, &args.phase_a_rates) {
        (Some(o), _) => plan::rates_in_order(&p.phase_a.rates, o),
        (None, Some(only)) => plan::rates_subset(&p.phase_a.rates, only),
        (None, None) => Ok(p.phase_a.rates.clone()),
    }
    .map_err(|e| UsageError(format!("{e:#}")))?;
    // The Phase B shapes of this sweep, checked against the profile before the root is touched.
    let phase_b_first = args
        .phase_b_first
        .as_deref()
        .map(|s| plan::parse_first_shape(s, p.phase_b.as_ref().map(|b| &b.shapes[..])))
        .transpose()
        .map_err(|e| UsageError(format!("{e:#}")))?;
    let phase_bp_first = args
        .phase_bp_first
        .as_deref()
        .map(|s| plan::parse_bp_first_shape(s, p.phase_bp.as_ref().map(|bp| &bp.shapes[..])))
        .transpose()
        .map_err(|e| UsageError(format!("{e:#}")))?;
    let phase_b_shapes = args
        .phase_b_shapes
        .as_deref()
        .map(|a| {
            plan::shapes_subset(
                a,
                p.phase_b.as_ref().map(|b| &b.shapes[..]),
                p.phase_bp.as_ref().map(|bp| &bp.configs[..]),
            )
        })
        .transpose()
        .map_err(|e| UsageError(format!("{e:#}")))?;
    let shard = args.shard.unwrap_or(Shard::WHOLE);
    let root = args.out.clone();
    let dry = args.dry_run;
    let skip = |n: u8| args.skip_stage.contains(&n);
    // A skeleton (`ctax skeleton`) lacks the raw records stages 2 and 4 read: refused before
    // anything starts, dry run included.
    if skeleton::is_skeleton(&root) {
        let source = skeleton::source(&root);
        let needs_records =
            shard.is_whole() && ((!skip(2) && args.reference_rates.is_none()) || !skip(4));
        usage_ensure(
            !needs_records,
            format!(
                "{} is a skeleton of {source} (`ctax skeleton`): the raw records of its finished \
                 launches are not here, so stage 2 (reference rates from all of Phase A) and stage \
                 4 (the analysis) cannot run on it. Pass --skip-stage 2 (Phase B then uses the \
                 full root's reference_rates.json, copied with the skeleton) or \
                 --reference-rates FILE, and --skip-stage 4; analyse the full root once the new \
                 runs are back in it",
                root.display()
            ),
        )?;
        // Phase B's rates then predate this sweep's Phase A launches (a full root recomputes
        // them in between): one phase per sweep on a skeleton.
        usage_ensure(
            skip(1) || skip(3) || p.phase_b.is_none(),
            format!(
                "{} is a skeleton of {source}: stage 2 cannot recompute the reference rates after \
                 this sweep's Phase A, so Phase B would run at rates that predate it. Run Phase A \
                 (--skip-stage 3) or Phase B (--skip-stage 1), not both; recompute the rates on \
                 the full root (`ctax reference-rates`) in between",
                root.display()
            ),
        )?;
    }
    // Stage 2 skipped keeps the root's reference rates as they are: Phase A launches of this
    // sweep would have no say in Phase B's rate (stage 3 would refuse them after hours of
    // Phase A; refused here, before anything starts, dry run included).
    usage_ensure(
        skip(1) || !skip(2) || skip(3) || args.reference_rates.is_some() || p.phase_b.is_none(),
        format!(
            "--skip-stage 2 keeps {}'s reference_rates.json as it is, so the Phase A launches of \
             this sweep would have no say in Phase B's rate. Run Phase A (--skip-stage 3) and \
             Phase B (--skip-stage 1) as separate sweeps with `ctax reference-rates ROOT` in \
             between, or let stage 2 run",
            root.display()
        ),
    )?;
    let env = launch_env(&p, &repo);
    let python = p
        .server
        .python
        .as_ref()
        .map(|s| profile::expand(s, &repo))
        .unwrap_or_else(|| shebang_python(&profile::expand(&p.server.vllm, &repo)));
    // The slots, checked before anything starts: GPUs exist, ports are disjoint and free.
    let slots = slots::build(
        &p,
        &slots::SlotOptions {
            gpus: args.gpus.clone(),
            port_offset: args.port_offset,
            shard: (!shard.is_whole()).then(|| shard.to_string()),
        },
        &env,
        &slots::allowed_cpus(),
        &slots::query_gpus(),
    )?;
    // A root holds one GPU model: refused before the root, its lock or its profile.toml is
    // written (a vLLM server on GPUs only: simulated and CPU sweeps record no model).
    if is_vllm(&p) && p.server.device != "cpu" {
        one_gpu_model::ensure_same(
            &root,
            &one_gpu_model::of_slots(slots.iter().map(|s| s.gpu_index), &slots::query_gpu_names()),
            "this sweep",
        )?;
    }
    if !dry {
        std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    }
    // Held (shared: sweeps may share a root) until the sweep ends; `ctax rejoin` and `ctax
    // archive` take it exclusive, so neither writes while a sweep does.
    let _lock = if dry {
        None
    } else {
        root_lock::lock(&root, root_lock::Holder::Sweep)?
    };
    let prof_path = root.join("profile.toml");
    match std::fs::read_to_string(&prof_path) {
        Ok(old) if old != loaded.text && !args.force_profile => anyhow::bail!(
            "{} holds a different profile.toml than {}: resume with the same profile, use another --out, or pass --force-profile",
            root.display(),
            loaded.path.display()
        ),
        Ok(old) if old == loaded.text => {}
        _ if dry => {}
        _ => crate::fsutil::write_atomic(&prof_path, loaded.text.as_bytes())?,
    }
    let collector = match &args.collector {
        Some(c) => c.clone(),
        None => std::env::current_exe()?.with_file_name("ctax-collect"),
    };
    anyhow::ensure!(
        dry || collector.exists(),
        "collector not found at {} (build with `cargo build --release`)",
        collector.display()
    );
    if !dry {
        slots::check_ports_free(&slots, &p.server.host, !is_vllm(&p))?;
    }
    // The slots' IPC directories are ours alone; removed when the sweep ends.
    struct RemoveOnDrop(PathBuf);
    impl Drop for RemoveOnDrop {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _rpc = RemoveOnDrop(slots::rpc_root());
    for s in &slots {
        let pl = s.placement(false);
        eprintln!(
            "[ctax] {}: GPU index {} uuid {}, CPUs {}, ports {}",
            s.label(),
            pl.gpu_index.map_or("-".into(), |i| i.to_string()),
            pl.gpu_uuid.as_deref().unwrap_or("-"),
            pl.cpuset.as_deref().unwrap_or("-"),
            s.ports
                .iter()
                .map(|r| format!("{} {}", r.name, r.first))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !shard.is_whole() {
        eprintln!("[ctax] shard {shard}: this host runs its part of the plan");
    }
    let ctx = Ctx {
        phase_b_first,
        phase_b_shapes,
        phase_bp_first,
        root: root.clone(),
        repo,
        profile: p,
        env,
        collector,
        python,
        rerun_capped: args.rerun_capped,
        plain_last: args.plain_last,
        dry_run: dry,
        end_by: end_by::EndBy::new(end_by_ms),
    };
    if dry {
        eprintln!(
            "[ctax] dry run: nothing starts and nothing is written; launches listed per slot in run order"
        );
    } else {
        ensure_model(&ctx)?;
    }
    let t_sweep = Instant::now();
    let mut worst = Outcome::Done;

    // Stage 0 (one verify launch at a time, on slot 0's GPU and ports).
    let pre_path = root.join("preflight/preflight_status.json");
    let existing: Option<PreflightStatus> = std::fs::read(&pre_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let status = if skip(0) || dry {
        eprintln!(
            "[ctax] stage 0 {}",
            if dry {
                "not run (dry run): the root's pre-flight decisions are used"
            } else {
                "skipped"
            }
        );
        existing
    } else {
        eprintln!("[ctax] stage 0: pre-flight");
        let s = preflight::run(
            &root,
            &ctx.repo,
            &ctx.profile,
            &ctx.slot_env(&slots[0]),
            existing,
        )?;
        if ctx.profile.server.step_timing && is_vllm(&ctx.profile) {
            stage0_plugin(&ctx, "install")?;
        }
        Some(s)
    };
    let included: Vec<String> = ctx
        .profile
        .configs
        .iter()
        .filter(|c| {
            status
                .as_ref()
                .and_then(|s| s.configs.get(*c))
                .is_none_or(|e| e.decision == Decision::Include)
        })
        .cloned()
        .collect();
    eprintln!("[ctax] included configs: {}", included.join(", "));
    if signals::interrupted() {
        return Ok(exit(Exit::Interrupted));
    }

    // Stage 1.
    let mut failed: BTreeSet<String> = BTreeSet::new();
    if !skip(1) {
        match (&args.phase_a_order, &args.phase_a_rates) {
            (Some(_), _) => eprintln!(
                "[ctax] stage 1: Phase A, rates in the order {} in every launch",
                plan::rates_text(&phase_a_rates)
            ),
            (None, Some(_)) => eprintln!(
                "[ctax] stage 1: Phase A, only the rates {} in this sweep's launches",
                plan::rates_text(&phase_a_rates)
            ),
            (None, None) => eprintln!("[ctax] stage 1: Phase A"),
        }
        let a = &ctx.profile.phase_a;
        let cells: Vec<PlannedCell> = phase_a_rates
            .iter()
            .map(|&r| {
                planned(
                    &ctx,
                    Phase::A,
                    Cell {
                        rate: r,
                        input_len: a.shape.0,
                        output_len: a.shape.1,
                    },
                    &a.timing,
                )
            })
            .collect();
        let cells_of = |_: &Unit| cells.clone();
        let mut blocks = plan::stage_plan(&ctx.profile, &included, 1, shard, slots.len());
        anchor::add(&ctx, &mut blocks, "A", &included, shard, &cells_of);
        let res = runner::run_stage(&ctx, &slots, &blocks, "A", &cells_of);
        for (u, o) in &res.outcomes {
            // A failed calibration or anchor launch does not take plain, the baseline, out of
            // Phase B.
            if *o == Outcome::Failed && !u.calibration && u.anchor.is_none() {
                failed.insert(u.config.clone());
            }
            worst = worse(worst, *o);
        }
        if let Some(e) = res.errors.into_iter().next() {
            return Err(e);
        }
        if signals::interrupted() || worst == Outcome::Interrupted {
            return Ok(exit(Exit::Interrupted));
        }
    }

    // Stage 2: needs all of Phase A, which a shard does not have.
    let refs: Option<ReferenceRates> = if let Some(file) = &args.reference_rates {
        let r = if dry {
            stages::read_reference_rates(file)?
        } else {
            stages::adopt_reference_rates(&root, file)?
        };
        eprintln!(
            "[ctax] stage 2: reference rates from {} (ref_safe {:?}, ref_load {:?})",
            file.display(),
            r.ref_safe,
            r.ref_load
        );
        Some(r)
    } else if skip(2) {
        let r: Option<ReferenceRates> = std::fs::read(root.join("reference_rates.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        // Phase B takes its rate from this file: it must have seen all of Phase A.
        if let Some(r) = &r
            && !skip(3)
            && ctx.profile.phase_b.is_some()
        {
            if let Some(w) = stages::check_rates_current(&root, r)? {
                eprintln!("[ctax] warning: {w}");
            }
            // `gpu_run.sh chain` reads this line: on a skeleton, such a sweep after one that
            // adds Phase A launches would find these rates stale at its turn.
            eprintln!(
                "[ctax] stage 2 skipped: Phase B takes its rates from {} as it is (ref_safe \
                 {:?}, ref_load {:?})",
                root.join("reference_rates.json").display(),
                r.ref_safe,
                r.ref_load
            );
        }
        r
    } else if !shard.is_whole() {
        eprintln!(
            "[ctax] stage 2 skipped: shard {shard} holds only part of Phase A. Merge every shard's root (`ctax merge`), run `ctax reference-rates` on it, then run this shard again with --reference-rates <merged>/reference_rates.json for Phase B"
        );
        None
    } else if dry {
        let path = root.join("reference_rates.json");
        eprintln!(
            "[ctax] stage 2 not run (dry run): Phase B below uses {} as it is now (a real run recomputes it after Phase A)",
            path.display()
        );
        std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    } else {
        eprintln!("[ctax] stage 2: reference rates");
        let r = stages::reference_rates(&root)?;
        for n in &r.notes {
            eprintln!("[ctax]   {n}");
        }
        Some(r)
    };

    // Stage 3.
    let stage3_possible = shard.is_whole() || refs.is_some();
    if !skip(3)
        && stage3_possible
        && let Some(b) = &ctx.profile.phase_b
    {
        let rate = b.rate_override.or(refs.as_ref().and_then(|r| r.ref_safe));
        match rate {
            None => eprintln!(
                "[ctax] stage 3 skipped: ref_safe is undefined and no phase_b.rate_override is set"
            ),
            Some(rate) => {
                let shapes: Vec<(u32, u32)> = ctx
                    .phase_b_shapes
                    .clone()
                    .unwrap_or_else(|| plan::shapes_in_order(&b.shapes, ctx.phase_b_first));
                let ref_load = refs.as_ref().and_then(|r| r.ref_load);
                let bp_rate =
                    |c: &str| plan::bp_rate(ctx.profile.phase_bp.as_ref(), c, rate, refs.as_ref());
                // Configs with Phase A data (all shards' when the rates came from a merged root).
                let with_a: Option<&Vec<String>> = refs
                    .as_ref()
                    .map(|r| &r.configs_considered)
                    .filter(|c| !c.is_empty());
                let mut configs: Vec<String> = included
                    .iter()
                    .filter(|c| !failed.contains(*c))
                    .filter(|c| with_a.is_none_or(|w| w.contains(c)))
                    .cloned()
                    .collect();
                eprintln!(
                    "[ctax] stage 3: Phase B at {} req/s{}{}",
                    ctax_schema::fmt_rate(rate),
                    match (&ctx.phase_b_shapes, ctx.phase_b_first) {
                        (Some(s), _) if s.is_empty() =>
                            ", no Phase B shape in this sweep's launches: only their B' cells"
                                .into(),
                        (Some(s), _) => format!(
                            ", only the shapes {} in this sweep's launches",
                            plan::shapes_text(s)
                        ),
                        (None, Some((i, o))) => format!(", {i}/{o} first in every launch"),
                        (None, None) => String::new(),
                    },
                    ctx.phase_bp_first
                        // Only where some config of the sweep has B' cells at all.
                        .filter(|_| configs.iter().any(|c| bp_rate(c).is_ok()))
                        .map(|(i, o)| format!("; B' {i}/{o} first among each launch's B' cells"))
                        .unwrap_or_default()
                );
                let cells_for = |config: &str| -> Vec<PlannedCell> {
                    let mut cells: Vec<PlannedCell> = shapes
                        .iter()
                        .map(|&(i, o)| {
                            planned(
                                &ctx,
                                Phase::B,
                                Cell {
                                    rate,
                                    input_len: i,
                                    output_len: o,
                                },
                                &b.timing,
                            )
                        })
                        .collect();
                    if let (Some(bp), Ok(load)) = (&ctx.profile.phase_bp, bp_rate(config)) {
                        let bp_shapes = plan::shapes_in_order(&bp.shapes, ctx.phase_bp_first);
                        cells.extend(bp_shapes.into_iter().map(|(i, o)| {
                            planned(
                                &ctx,
                                Phase::Bp,
                                Cell {
                                    rate: load,
                                    input_len: i,
                                    output_len: o,
                                },
                                &bp.timing,
                            )
                        }));
                    }
                    cells
                };
                if ctx.phase_b_shapes.as_ref().is_some_and(Vec::is_empty)
                    && bp_rate("plain") == Err(plan::NoBp::NotDue)
                {
                    eprintln!(
                        "[ctax] stage 3: B' is not due: ref_load is {} and Phase B runs at {} \
                         req/s (B' runs at ref_load when the two differ), so with \
                         --phase-b-shapes none this sweep has no cell to run",
                        ref_load.map_or("undefined".into(), |l| format!(
                            "{} req/s",
                            ctax_schema::fmt_rate(l)
                        )),
                        ctax_schema::fmt_rate(rate)
                    );
                }
                for c in &configs {
                    if let Err(plan::NoBp::Saturated(s)) = bp_rate(c) {
                        eprintln!(
                            "[ctax] stage 3: no B' cells for {c}: it saturates at {} req/s, at or \
                             below ref_load ({} req/s), where a cell measures a queue, not a tax",
                            ctax_schema::fmt_rate(s),
                            ctax_schema::fmt_rate(ref_load.unwrap_or_default())
                        );
                    }
                }
                configs.retain(|c| {
                    let some = !cells_for(c).is_empty();
                    if !some {
                        eprintln!(
                            "[ctax] stage 3: {c} left out: no Phase B shape in this sweep and no \
                             B' cells of its own"
                        );
                    }
                    some
                });
                let cells_of = |u: &Unit| cells_for(&u.config);
                let mut blocks = plan::stage_plan(&ctx.profile, &configs, 3, shard, slots.len());
                anchor::add(&ctx, &mut blocks, "B", &configs, shard, &cells_of);
                let res = runner::run_stage(&ctx, &slots, &blocks, "B", &cells_of);
                for (_, o) in &res.outcomes {
                    worst = worse(worst, *o);
                }
                if let Some(e) = res.errors.into_iter().next() {
                    return Err(e);
                }
                if signals::interrupted() || worst == Outcome::Interrupted {
                    return Ok(exit(Exit::Interrupted));
                }
            }
        }
    }

    // Stage 4.
    if dry {
        eprintln!("[ctax] dry run: done");
        return Ok(ExitCode::SUCCESS);
    }
    if !skip(4) && !shard.is_whole() {
        eprintln!(
            "[ctax] stage 4 skipped: shard {shard}; analyse the merged root (`ctax merge`, then `ctax report`)"
        );
    } else if !skip(4) {
        eprintln!("[ctax] stage 4: plugin removal, analysis, report");
        if ctx.profile.server.step_timing && is_vllm(&ctx.profile) {
            stage0_plugin(&ctx, "remove")?;
        }
        let out = stages::analyze_and_report(&root)?;
        eprintln!("[ctax] report: {}", out.join("index.html").display());
    }
    eprintln!(
        "[ctax] sweep finished in {:.1} min",
        t_sweep.elapsed().as_secs_f64() / 60.0
    );
    let held = ctx.end_by.held_back();
    if held > 0 {
        eprintln!(
            "[ctax] --end-by {}: {held} launch(es) not started; the same command later runs them",
            crate::report::fmt::unix_ms(ctx.end_by.unix_ms.unwrap_or_default())
        );
    }
    Ok(match worst {
        Outcome::Done | Outcome::AlreadyDone => ExitCode::SUCCESS,
        Outcome::NotStarted => ExitCode::from(end_by::EXIT_CODE),
        Outcome::Interrupted => exit(Exit::Interrupted),
        Outcome::Incomplete | Outcome::Failed => exit(Exit::Incomplete),
    })
}

fn worse(a: Outcome, b: Outcome) -> Outcome {
    if rank(b) > rank(a) { b } else { a }
}

fn rank(o: Outcome) -> u8 {
    match o {
        Outcome::Done | Outcome::AlreadyDone => 0,
        Outcome::NotStarted => 1,
        Outcome::Incomplete => 2,
        Outcome::Failed => 3,
        Outcome::Interrupted => 4,
    }
}

fn is_vllm(p: &Profile) -> bool {
    p.server.kind == "vllm"
}

/// The checkout: `--repo`, else the current directory or an ancestor of the executable that
/// holds `launch/common.sh`.
fn resolve_repo(arg: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(r) = arg {
        return Ok(r.canonicalize()?);
    }
    let mut candidates = vec![std::env::current_dir()?];
    if let Ok(exe) = std::env::current_exe() {
        candidates.extend(exe.ancestors().map(Path::to_path_buf));
    }
    candidates
        .into_iter()
        .find(|d| d.join("launch/common.sh").exists())
        .ok_or_else(|| anyhow::anyhow!("cannot find the checkout (launch/common.sh); pass --repo"))
}

/// The interpreter named in a script's `#!` line (python scripts installed by pip), else python3.
fn shebang_python(vllm: &str) -> String {
    std::fs::read_to_string(vllm)
        .ok()
        .and_then(|t| {
            t.lines()
                .next()
                .and_then(|l| l.strip_prefix("#!"))
                .map(|s| s.trim().to_owned())
        })
        .filter(|s| s.contains("python") && !s.contains(' '))
        .unwrap_or_else(|| "python3".into())
}

/// Environment for launch and verify scripts: the contract's CTAX_* plus the profile's env.
fn launch_env(p: &Profile, repo: &Path) -> Vec<(String, String)> {
    let mut env = vec![
        ("CTAX_VLLM".into(), profile::expand(&p.server.vllm, repo)),
        ("CTAX_MODEL".into(), profile::expand(&p.server.model, repo)),
        ("CTAX_SERVED_NAME".into(), p.server.served_name.clone()),
        ("CTAX_DEVICE".into(), p.server.device.clone()),
        ("CTAX_HOST".into(), p.server.host.clone()),
        ("CTAX_PORT".into(), p.server.port.to_string()),
    ];
    for (k, v) in &p.server.env {
        env.push((k.clone(), profile::expand(v, repo)));
    }
    env
}

fn ensure_model(ctx: &Ctx) -> anyhow::Result<()> {
    let model = profile::expand(&ctx.profile.server.model, &ctx.repo);
    if !is_vllm(&ctx.profile) || Path::new(&model).join("config.json").exists() {
        return Ok(());
    }
    let Some(make) = &ctx.profile.server.make_model else {
        anyhow::bail!(
            "model directory {model} has no config.json and the profile has no server.make_model"
        );
    };
    let cmd = profile::expand(make, &ctx.repo)
        .replace("{model}", &model)
        .replace("{python}", &ctx.python);
    eprintln!("[ctax] writing the model directory: {cmd}");
    let st = Command::new("bash")
        .arg("-c")
        .arg(&cmd)
        .envs(ctx.env.iter().map(|(k, v)| (k, v)))
        .status()?;
    anyhow::ensure!(st.success(), "`{cmd}` failed ({st})");
    Ok(())
}

fn stage0_plugin(ctx: &Ctx, action: &str) -> anyhow::Result<()> {
    let mut cmd = Command::new("bash");
    cmd.arg(ctx.repo.join("patches/apply.sh"))
        .arg(action)
        .arg(&ctx.python);
    if let Some(t) = &ctx.profile.server.plugin_target {
        cmd.arg("--target").arg(profile::expand(t, &ctx.repo));
    }
    let st = cmd.envs(ctx.env.iter().map(|(k, v)| (k, v))).status()?;
    anyhow::ensure!(st.success(), "patches/apply.sh {action} failed ({st})");
    Ok(())
}

fn planned(ctx: &Ctx, phase: Phase, cell: Cell, t: &Timing) -> PlannedCell {
    let seed = ctx.profile.seed
        ^ ((phase as u64) << 48)
        ^ (cell.rate.to_bits().rotate_left(17))
        ^ (u64::from(cell.input_len) << 20)
        ^ u64::from(cell.output_len);
    PlannedCell {
        phase,
        cell,
        arrival: ctx.profile.collector.arrival,
        duration_s: t.duration_s,
        warmup_s: t.warmup_s,
        min_completed: t.min_completed,
        max_cell_s: t.max_cell_s,
        inflight_cap: ctx.profile.collector.inflight_cap,
        seed,
    }
}

/// `ctax run` exits with the collector's codes for the same outcomes.
fn exit(e: Exit) -> ExitCode {
    ExitCode::from(u8::try_from(e.code()).expect("exit codes fit in a byte"))
}
