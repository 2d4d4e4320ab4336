//! Which launch runs where: the one place that decides the order of a stage's launches, which
//! shard (`--shard K/N`, a host) runs each, and which GPU slot on that host runs it.
//!
//! - **Order**: for each launch index k, a seeded permutation of the profile's configs, so the
//!   launches of one config are interleaved with the others' (drift spreads over configs).
//! - **Shard** of (config c, launch k) = (k + rank(c)) mod N, rank = c's position in the
//!   profile's list. It depends only on the profile (never on what a host's pre-flight
//!   included), so the same profile and seed give the same disjoint parts on every host, and
//!   each config's launches are spread evenly over the shards.
//! - **Slot** of the j-th launch of c in its shard (j = k div N) = (j + rank(c)) mod S: each
//!   config's launches are balanced over the slots (counts differ by at most one), and in each
//!   round the configs sit on different slots.
//! - **Calibration** (`slots.plain_on_every_slot`, Phase A only): a first block in which plain
//!   runs on every slot at the same time. These are plain's own first launches of the shard
//!   (launch j of them on slot j), so they count as plain launches like any other; when the
//!   profile gives plain fewer launches than there are slots, the round adds the missing ones
//!   (the next indices of this shard), so plain then has one launch per slot.
//!
//! A stage is a list of [`Block`]s run one after another (a barrier between them); inside a
//! block each slot runs its queue in order, one launch at a time.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use super::profile::{PhaseBp, Profile};
use ctax_schema::ReferenceRates;

/// `--shard K/N` (K in 1..=N).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub k: u32,
    pub n: u32,
}

impl Shard {
    pub(crate) const WHOLE: Shard = Shard { k: 1, n: 1 };

    pub(crate) fn is_whole(&self) -> bool {
        self.n == 1
    }

    /// Whether this shard runs launch `k` of the config at position `rank` of the profile's
    /// list: (k + rank) mod N = K − 1. Every index belongs to exactly one shard.
    pub(crate) fn owns(&self, rank: u32, k: u32) -> bool {
        (k + rank) % self.n == self.k - 1
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Shard, String> {
        let (k, n) = s
            .split_once('/')
            .ok_or_else(|| format!("--shard {s:?}: expected K/N, e.g. 1/2"))?;
        let (k, n): (u32, u32) = (
            k.trim()
                .parse()
                .map_err(|_| format!("--shard {s:?}: K is not a number"))?,
            n.trim()
                .parse()
                .map_err(|_| format!("--shard {s:?}: N is not a number"))?,
        );
        if n == 0 || k == 0 || k > n {
            return Err(format!("--shard {s:?}: need 1 <= K <= N"));
        }
        Ok(Shard { k, n })
    }
}

/// One launch of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unit {
    pub config: String,
    pub launch: u32,
    pub slot: usize,
    pub calibration: bool,
    /// A plain launch added so that this machine has one ([`super::anchor`]): why, for the
    /// manifest row's reason.
    pub anchor: Option<String>,
}

/// Launches that run side by side, one queue per slot; the next block starts when every queue
/// is done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Block {
    pub name: &'static str,
    pub queues: Vec<Vec<Unit>>,
}

impl Block {
    pub(crate) fn units(&self) -> impl Iterator<Item = &Unit> {
        self.queues.iter().flatten()
    }
}

/// (config, launch) in run order over `configs`: for each launch index, a seeded permutation,
/// so launches of one config are interleaved with the others'.
fn order(p: &Profile, configs: &[String], stage: u64) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for k in 0..p.launches {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(p.seed ^ (stage << 40) ^ u64::from(k));
        let mut v = configs.to_vec();
        for i in (1..v.len()).rev() {
            let j = rng.random_range(0..=i);
            v.swap(i, j);
        }
        out.extend(v.into_iter().map(|c| (c, k)));
    }
    out
}

/// The plan of one stage (1 = Phase A, 3 = Phase B) for this shard and `slots` slots, over the
/// configs of `run` (a subset of the profile's; shard and slot ranks use the profile's list).
pub(crate) fn stage_plan(
    p: &Profile,
    run: &[String],
    stage: u64,
    shard: Shard,
    slots: usize,
) -> Vec<Block> {
    let slots = slots.max(1);
    let rank = |c: &str| p.configs.iter().position(|x| x == c).unwrap_or(0) as u32;
    let in_shard = |config: &str, k: u32| shard.owns(rank(config), k);
    let calibrate =
        stage == 1 && p.slots.plain_on_every_slot && slots > 1 && run.iter().any(|c| c == "plain");
    // The calibration round: plain's first `slots` launches of this shard, one per slot.
    let calibration: Vec<u32> = if calibrate {
        (0..)
            .filter(|&k| in_shard("plain", k))
            .take(slots)
            .collect()
    } else {
        Vec::new()
    };
    let mut blocks = Vec::new();
    if !calibration.is_empty() {
        blocks.push(Block {
            name: "calibration: plain on every slot at once",
            queues: calibration
                .iter()
                .enumerate()
                .map(|(s, &k)| {
                    vec![Unit {
                        config: "plain".into(),
                        launch: k,
                        slot: s,
                        calibration: true,
                        anchor: None,
                    }]
                })
                .collect(),
        });
    }
    let mut queues = vec![Vec::new(); slots];
    for (config, k) in order(p, &p.configs, stage) {
        let r = rank(&config);
        if !in_shard(&config, k) || !run.contains(&config) {
            continue;
        }
        if config == "plain" && calibration.contains(&k) {
            continue;
        }
        let j = k / shard.n;
        let slot = ((j + r) as usize) % slots;
        queues[slot].push(Unit {
            config,
            launch: k,
            slot,
            calibration: false,
            anchor: None,
        });
    }
    blocks.push(Block {
        name: "launches",
        queues,
    });
    blocks
}

/// `shapes` with `first` moved to the front (`--phase-b-first` for Phase B's shapes,
/// `--phase-bp-first` for B′'s); the others keep their order; a `first` not among them is ignored.
pub(crate) fn shapes_in_order(shapes: &[(u32, u32)], first: Option<(u32, u32)>) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = first.into_iter().filter(|f| shapes.contains(f)).collect();
    out.extend(shapes.iter().filter(|s| Some(**s) != first));
    out
}

/// Why a Phase B launch of a config carries no B' cells (see [`bp_rate`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NoBp {
    /// The profile has no `[phase_bp]`, ref_load is undefined or equals Phase B's rate.
    NotDue,
    /// Not one of `[phase_bp]`'s configs.
    NotListed,
    /// The config saturates at this rate, at or below ref_load.
    Saturated(f64),
}

/// The rate of the B' cells a Phase B launch of `config` at `rate` also runs, or why it runs
/// none. The seed's rule: `[phase_bp]`'s configs, at ref_load, when ref_load differs from
/// Phase B's rate. **[differs]** never for a config that saturates at or below ref_load
/// ([`ReferenceRates::saturated_at_ref_load`]): a saturated cell measures a queue that grows
/// with the cell's length, not a tax, and the Phase A ladder skips such rates too (the seed's
/// "skipping rates above a config's saturation").
pub(crate) fn bp_rate(
    bp: Option<&PhaseBp>,
    config: &str,
    rate: f64,
    refs: Option<&ReferenceRates>,
) -> Result<f64, NoBp> {
    let (Some(bp), Some(load)) = (bp, refs.and_then(|r| r.ref_load)) else {
        return Err(NoBp::NotDue);
    };
    if (load - rate).abs() < 1e-9 {
        return Err(NoBp::NotDue);
    }
    if !bp.configs.iter().any(|c| c == config) {
        return Err(NoBp::NotListed);
    }
    match refs.and_then(|r| r.saturated_at_ref_load(config)) {
        Some(s) => Err(NoBp::Saturated(s)),
        None => Ok(load),
    }
}

/// Shapes as the sweep's lines print them: `512/256, 4096/256`.
pub(crate) fn shapes_text(shapes: &[(u32, u32)]) -> String {
    shapes
        .iter()
        .map(|(i, o)| format!("{i}/{o}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One `IN/OUT` argument of `flag`, which must be one of the profile's Phase B shapes.
fn parse_shape(flag: &str, arg: &str, shapes: Option<&[(u32, u32)]>) -> anyhow::Result<(u32, u32)> {
    parse_shape_of(flag, arg, shapes, ("phase_b", "Phase B"))
}

/// One `IN/OUT` argument of `flag`, which must be one of `shapes`, the shapes of the profile's
/// `section` (`None`: the profile has none), named `what` in the error.
fn parse_shape_of(
    flag: &str,
    arg: &str,
    shapes: Option<&[(u32, u32)]>,
    (section, what): (&str, &str),
) -> anyhow::Result<(u32, u32)> {
    let shape = arg
        .split_once('/')
        .and_then(|(i, o)| Some((i.trim().parse().ok()?, o.trim().parse().ok()?)))
        .ok_or_else(|| {
            anyhow::anyhow!("{flag} {arg:?}: expected IN/OUT token counts, e.g. 4096/256")
        })?;
    let shapes = shapes
        .ok_or_else(|| anyhow::anyhow!("{flag} {arg}: the profile has no {section} section"))?;
    anyhow::ensure!(
        shapes.contains(&shape),
        "{flag} {arg}: not one of the profile's {what} shapes ({})",
        shapes_text(shapes)
    );
    Ok(shape)
}

/// `--phase-b-first IN/OUT`: the shape, which must be one of the profile's Phase B shapes.
pub(crate) fn parse_first_shape(
    arg: &str,
    shapes: Option<&[(u32, u32)]>,
) -> anyhow::Result<(u32, u32)> {
    parse_shape("--phase-b-first", arg, shapes)
}

/// `--phase-bp-first IN/OUT`: the shape, which must be one of the profile's `[phase_bp]` shapes.
pub(crate) fn parse_bp_first_shape(
    arg: &str,
    bp_shapes: Option<&[(u32, u32)]>,
) -> anyhow::Result<(u32, u32)> {
    parse_shape_of("--phase-bp-first", arg, bp_shapes, ("[phase_bp]", "B'"))
}

/// `--phase-b-shapes SHAPES`: some of the profile's Phase B shapes, each once, in the order
/// given; `none` alone: no Phase B shape, so the sweep's Phase B launches run only their B'
/// cells, which needs a `[phase_bp]` section (`bp_configs`) that lists plain, the baseline of
/// every B' tax (without it the machine would get no plain B' launch: the anchor rule adds plain
/// only when plain has cells to run).
pub(crate) fn shapes_subset(
    args: &[String],
    shapes: Option<&[(u32, u32)]>,
    bp_configs: Option<&[String]>,
) -> anyhow::Result<Vec<(u32, u32)>> {
    let all = args.join(",");
    anyhow::ensure!(!args.is_empty(), "--phase-b-shapes names no shape");
    anyhow::ensure!(
        shapes.is_some(),
        "--phase-b-shapes {all}: the profile has no phase_b section, so no Phase B launch runs"
    );
    if args.iter().any(|a| a.trim() == "none") {
        anyhow::ensure!(
            args.len() == 1,
            "--phase-b-shapes {all}: `none` stands alone (no Phase B shape, only the B' cells)"
        );
        let Some(bp) = bp_configs else {
            anyhow::bail!(
                "--phase-b-shapes none: the profile has no [phase_bp] section, so the launches \
                 would have no cell; add one (--force-profile) to run B' alone"
            );
        };
        anyhow::ensure!(
            bp.iter().any(|c| c == "plain"),
            "--phase-b-shapes none: [phase_bp] does not list plain, the baseline of every B' \
             tax, so no machine would get a plain launch of the B' cells"
        );
        return Ok(Vec::new());
    }
    let mut out: Vec<(u32, u32)> = Vec::new();
    for a in args {
        let s = parse_shape("--phase-b-shapes", a.trim(), shapes)?;
        anyhow::ensure!(
            !out.contains(&s),
            "--phase-b-shapes {all}: {a} is named twice"
        );
        out.push(s);
    }
    Ok(out)
}

/// Rates as the sweep's lines print them: `0.5, 1, 2`.
pub(crate) fn rates_text(rates: &[f64]) -> String {
    rates
        .iter()
        .map(|&x| ctax_schema::fmt_rate(x))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `--phase-a-order RATES`: the profile's Phase A rates in the order given, which must name
/// each of them once (a permutation: every launch still runs every rate).
pub(crate) fn rates_in_order(rates: &[f64], order: &[f64]) -> anyhow::Result<Vec<f64>> {
    let mut left: Vec<f64> = rates.to_vec();
    for &r in order {
        let Some(i) = left.iter().position(|&x| (x - r).abs() < 1e-9) else {
            anyhow::bail!(
                "--phase-a-order {}: {} is not one of the profile's Phase A rates ({}) or is named twice; name each once, in the order to run them",
                rates_text(order),
                ctax_schema::fmt_rate(r),
                rates_text(rates)
            );
        };
        left.remove(i);
    }
    anyhow::ensure!(
        left.is_empty(),
        "--phase-a-order {}: leaves out {} of the profile's Phase A rates ({}); name each once, in the order to run them",
        rates_text(order),
        rates_text(&left),
        rates_text(rates)
    );
    Ok(order.to_vec())
}

/// `--phase-a-rates RATES`: some of the profile's Phase A rates, each once, in the order given.
pub(crate) fn rates_subset(rates: &[f64], only: &[f64]) -> anyhow::Result<Vec<f64>> {
    anyhow::ensure!(!only.is_empty(), "--phase-a-rates names no rate");
    for (i, &r) in only.iter().enumerate() {
        anyhow::ensure!(
            rates.iter().any(|&x| (x - r).abs() < 1e-9),
            "--phase-a-rates {}: {} is not one of the profile's Phase A rates ({}); add it to the profile (--force-profile) first",
            rates_text(only),
            ctax_schema::fmt_rate(r),
            rates_text(rates)
        );
        anyhow::ensure!(
            !only[..i].iter().any(|&x| (x - r).abs() < 1e-9),
            "--phase-a-rates {}: {} is named twice",
            rates_text(only),
            ctax_schema::fmt_rate(r)
        );
    }
    Ok(only.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    /// Some of the profile's rates, in the order given; a rate outside the profile, one named
    /// twice and an empty list are refused.
    #[test]
    fn phase_a_rates_name_some_of_the_profiles_rates_once() {
        let rates = [0.5, 1.0, 2.0, 4.0, 6.0, 8.0];
        assert_eq!(rates_subset(&rates, &[1.0, 0.5]).unwrap(), vec![1.0, 0.5]);
        assert_eq!(rates_subset(&rates, &[8.0]).unwrap(), vec![8.0]);
        let e = rates_subset(&rates, &[0.5, 16.0]).unwrap_err().to_string();
        assert!(
            e.contains("16 is not one of the profile's Phase A rates (0.5, 1, 2, 4, 6, 8)"),
            "{e}"
        );
        let e = rates_subset(&rates, &[1.0, 1.0]).unwrap_err().to_string();
        assert!(e.contains("1 is named twice"), "{e}");
        assert!(rates_subset(&rates, &[]).is_err());
    }

    /// Some of the profile's Phase B shapes in the order given, or `none` (only the B' cells,
    /// which needs `[phase_bp]` with plain); a shape outside the profile, one named twice, a
    /// malformed one, `none` beside a shape, `none` without `[phase_bp]` or without plain in it,
    /// any of them without a phase_b section, and an empty list are refused.
    #[test]
    fn phase_b_shapes_name_some_of_the_profiles_shapes_or_none() {
        let shapes = [(512, 64), (512, 256), (4096, 256)];
        let v = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let with_plain = v(&["plain", "mooncake_both"]);
        let without_plain = v(&["mooncake_both"]);
        let ok = |a: &[&str]| shapes_subset(&v(a), Some(&shapes), Some(&with_plain)).unwrap();
        let err_with = |a: &[&str], bp: Option<&[String]>| {
            shapes_subset(&v(a), Some(&shapes), bp)
                .unwrap_err()
                .to_string()
        };
        let err = |a: &[&str], bp: bool| err_with(a, bp.then_some(&with_plain[..]));
        assert_eq!(ok(&["4096/256", "512/64"]), vec![(4096, 256), (512, 64)]);
        assert_eq!(ok(&["none"]), Vec::<(u32, u32)>::new());
        let e = err(&["512/1024"], true);
        assert!(
            e.contains(
                "512/1024: not one of the profile's Phase B shapes (512/64, 512/256, 4096/256)"
            ),
            "{e}"
        );
        assert!(err(&["512/64", "512/64"], true).contains("512/64 is named twice"));
        assert!(err(&["512x64"], true).contains("expected IN/OUT token counts"));
        assert!(err(&["none", "512/64"], true).contains("`none` stands alone"));
        assert!(err(&["none"], false).contains("no [phase_bp] section"));
        assert!(err_with(&["none"], Some(&without_plain)).contains("does not list plain"));
        assert!(err(&[], true).contains("names no shape"));
        for a in [&["512/64"][..], &["none"][..]] {
            let e = shapes_subset(&v(a), None, Some(&with_plain))
                .unwrap_err()
                .to_string();
            assert!(e.contains("no phase_b section"), "{e}");
        }
    }

    /// B' rides on a Phase B launch of `[phase_bp]`'s configs when ref_load differs from
    /// Phase B's rate, and not for a config that saturates at or below ref_load.
    #[test]
    fn bp_cells_are_due_for_the_listed_configs_below_their_saturation() {
        let bp = PhaseBp {
            configs: vec![
                "plain".into(),
                "mooncake_both".into(),
                "lmcache_only".into(),
            ],
            shapes: vec![(512, 256), (4096, 256)],
            timing: super::super::profile::Timing {
                duration_s: 40.0,
                warmup_s: 5.0,
                min_completed: 80,
                max_cell_s: 240.0,
            },
        };
        let b = Some(&bp);
        // Reference rates with ref_load `load` and one config's saturation rate.
        let refs = |load: Option<f64>, config: &str, sat: Option<f64>| ReferenceRates {
            schema_version: 1,
            ref_safe: Some(2.0),
            ref_load: load,
            configs_considered: Vec::new(),
            saturation_rate: [(config.to_owned(), sat)].into(),
            notes: Vec::new(),
            phase_a_launches: None,
        };
        let at = |config: &str, rate: f64, load: Option<f64>, sat: Option<f64>| {
            bp_rate(b, config, rate, Some(&refs(load, config, sat)))
        };
        assert_eq!(at("plain", 2.0, Some(6.0), Some(8.0)), Ok(6.0));
        assert_eq!(at("mooncake_both", 2.0, Some(6.0), None), Ok(6.0));
        // The archive's lmcache_only saturates at 4 req/s, below ref_load 6; at 6 itself too.
        assert_eq!(
            at("lmcache_only", 2.0, Some(6.0), Some(4.0)),
            Err(NoBp::Saturated(4.0))
        );
        assert_eq!(
            at("lmcache_only", 2.0, Some(6.0), Some(6.0)),
            Err(NoBp::Saturated(6.0))
        );
        assert_eq!(at("lmcache_only", 2.0, Some(6.0), Some(8.0)), Ok(6.0));
        assert_eq!(
            at("noop_connector", 2.0, Some(6.0), None),
            Err(NoBp::NotListed)
        );
        assert_eq!(at("plain", 6.0, Some(6.0), None), Err(NoBp::NotDue));
        assert_eq!(at("plain", 2.0, None, None), Err(NoBp::NotDue));
        assert_eq!(bp_rate(b, "plain", 2.0, None), Err(NoBp::NotDue));
        assert_eq!(
            bp_rate(None, "plain", 2.0, Some(&refs(Some(6.0), "plain", None))),
            Err(NoBp::NotDue)
        );
    }

    /// The archive's rates 2, 4, 6, 8 with ref_safe last; a rate not in the profile, one named
    /// twice and one left out are refused with the profile's list.
    #[test]
    fn phase_a_rates_run_in_the_order_given_when_it_names_each_once() {
        let rates = [2.0, 4.0, 6.0, 8.0];
        assert_eq!(
            rates_in_order(&rates, &[4.0, 6.0, 8.0, 2.0]).unwrap(),
            [4.0, 6.0, 8.0, 2.0]
        );
        for (bad, says) in [
            (&[4.0, 6.0, 8.0, 3.0][..], "3 is not one of"),
            (&[4.0, 4.0, 8.0, 2.0][..], "4 is not one of"),
            (&[4.0, 6.0, 8.0][..], "leaves out 2"),
        ] {
            let e = rates_in_order(&rates, bad).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("(2, 4, 6, 8)"), "{e}");
        }
    }

    fn profile(configs: &[&str], launches: u32) -> Profile {
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut p = super::super::profile::load("sim", repo).unwrap().profile;
        p.configs = configs.iter().map(|s| (*s).to_owned()).collect();
        p.launches = launches;
        p
    }

    /// By hand: the seed's order 512/64, 512/256, 4096/64, 4096/256 with 4096/256 first gives
    /// 4096/256, 512/64, 512/256, 4096/64; without `first`, or a shape not listed, unchanged.
    #[test]
    fn a_phase_b_shape_runs_first_and_the_rest_keep_their_order() {
        let shapes = [(512, 64), (512, 256), (4096, 64), (4096, 256)];
        assert_eq!(
            shapes_in_order(&shapes, Some((4096, 256))),
            [(4096, 256), (512, 64), (512, 256), (4096, 64)]
        );
        assert_eq!(shapes_in_order(&shapes, None), shapes);
        assert_eq!(shapes_in_order(&shapes, Some((1, 2))), shapes);
        assert_eq!(
            parse_first_shape(" 4096/256", Some(&shapes)).unwrap(),
            (4096, 256)
        );
        let e = parse_first_shape("4096/1024", Some(&shapes))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not one of") && e.contains("512/64, 512/256"),
            "{e}"
        );
        let e = parse_first_shape("4096x256", Some(&shapes))
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected IN/OUT"), "{e}");
        assert!(parse_first_shape("4096/256", None).is_err());
    }

    fn all(blocks: &[Block]) -> Vec<Unit> {
        blocks.iter().flat_map(|b| b.units().cloned()).collect()
    }

    #[test]
    fn shard_syntax() {
        assert_eq!("2/3".parse::<Shard>(), Ok(Shard { k: 2, n: 3 }));
        assert!("0/3".parse::<Shard>().is_err());
        assert!("4/3".parse::<Shard>().is_err());
        assert!("x".parse::<Shard>().is_err());
    }

    #[test]
    fn one_slot_one_shard_is_the_interleaved_order() {
        let p = profile(&["plain", "noop_connector", "mooncake_both"], 2);
        let cfgs = p.configs.clone();
        let b = stage_plan(&p, &cfgs, 1, Shard::WHOLE, 1);
        assert_eq!(b.len(), 1);
        let got: Vec<(String, u32)> = all(&b).into_iter().map(|u| (u.config, u.launch)).collect();
        assert_eq!(got, order(&p, &cfgs, 1));
        // Launch 0 of every config before any launch 1.
        assert!(got[..3].iter().all(|(_, k)| *k == 0));
    }

    #[test]
    fn shards_partition_the_plan_deterministically() {
        let configs = [
            "plain",
            "noop_connector",
            "mooncake_both",
            "nixl_both",
            "lmcache_only",
        ];
        let p = profile(&configs, 3);
        let cfgs = p.configs.clone();
        for n in 1..=4u32 {
            let mut seen: Vec<(String, u32)> = Vec::new();
            for k in 1..=n {
                let part = all(&stage_plan(&p, &cfgs, 1, Shard { k, n }, 2));
                assert_eq!(
                    part,
                    all(&stage_plan(&p, &cfgs, 1, Shard { k, n }, 2)),
                    "deterministic"
                );
                seen.extend(part.into_iter().map(|u| (u.config, u.launch)));
            }
            let whole: BTreeSet<_> = order(&p, &cfgs, 1).into_iter().collect();
            assert_eq!(seen.len(), whole.len(), "n={n}: disjoint");
            assert_eq!(
                seen.into_iter().collect::<BTreeSet<_>>(),
                whole,
                "n={n}: complete"
            );
        }
        // A config missing on one host (pre-flight skip) does not move the others.
        let fewer: Vec<String> = cfgs.iter().filter(|c| *c != "nixl_both").cloned().collect();
        for k in 1..=2 {
            let s = Shard { k, n: 2 };
            let with: Vec<Unit> = all(&stage_plan(&p, &cfgs, 1, s, 2))
                .into_iter()
                .filter(|u| u.config != "nixl_both")
                .collect();
            assert_eq!(with, all(&stage_plan(&p, &fewer, 1, s, 2)));
        }
    }

    #[test]
    fn every_config_is_balanced_over_slots() {
        let configs = ["plain", "noop_connector", "mooncake_both"];
        for (launches, slots) in [(2u32, 2usize), (4, 2), (3, 2), (4, 4), (5, 3)] {
            let p = profile(&configs, launches);
            let cfgs = p.configs.clone();
            let units = all(&stage_plan(&p, &cfgs, 1, Shard::WHOLE, slots));
            let mut per: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
            for u in &units {
                per.entry(u.config.as_str()).or_insert(vec![0; slots])[u.slot] += 1;
            }
            for (c, counts) in per {
                let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
                assert!(
                    hi - lo <= 1,
                    "{c}: {counts:?} (launches {launches}, slots {slots})"
                );
            }
        }
        // Two configs, two launches, two slots: each config once on each slot, and in each
        // round the two configs run side by side.
        let p = profile(&["plain", "noop_connector"], 2);
        let cfgs = p.configs.clone();
        let b = stage_plan(&p, &cfgs, 1, Shard::WHOLE, 2);
        let q = &b[0].queues;
        assert_eq!(q[0].len(), 2);
        assert_eq!(q[1].len(), 2);
        for (a, b) in q[0].iter().zip(&q[1]) {
            assert_ne!(a.config, b.config);
        }
    }

    #[test]
    fn calibration_block_is_plains_first_launches_on_every_slot() {
        let mut p = profile(&["plain", "noop_connector"], 2);
        p.slots.plain_on_every_slot = true;
        let cfgs = p.configs.clone();
        let b = stage_plan(&p, &cfgs, 1, Shard::WHOLE, 2);
        assert_eq!(b.len(), 2);
        let cal: Vec<&Unit> = b[0].units().collect();
        assert!(cal.iter().all(|u| u.config == "plain" && u.calibration));
        assert_eq!(
            cal.iter().map(|u| (u.slot, u.launch)).collect::<Vec<_>>(),
            vec![(0, 0), (1, 1)]
        );
        // Plain's two launches were the calibration round: the rest is noop, once per slot.
        let rest: Vec<&Unit> = b[1].units().collect();
        assert!(rest.iter().all(|u| u.config == "noop_connector"));
        assert_eq!(
            rest.iter().map(|u| u.slot).collect::<BTreeSet<_>>(),
            [0, 1].into_iter().collect()
        );
        // One launch per config: the round adds plain's second launch (index 1).
        let mut p1 = p.clone();
        p1.launches = 1;
        let b1 = stage_plan(&p1, &cfgs, 1, Shard::WHOLE, 2);
        assert_eq!(
            b1[0].units().map(|u| u.launch).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert!(b1[1].units().all(|u| u.config != "plain"));
        // Three launches: the third plain launch runs with the others.
        let mut p3 = p.clone();
        p3.launches = 3;
        let b3 = stage_plan(&p3, &cfgs, 1, Shard::WHOLE, 2);
        assert_eq!(
            b3[1]
                .units()
                .filter(|u| u.config == "plain")
                .map(|u| u.launch)
                .collect::<Vec<_>>(),
            vec![2]
        );
        // Not in Phase B, not with one slot; shards use their own plain launches.
        assert_eq!(stage_plan(&p, &cfgs, 3, Shard::WHOLE, 2).len(), 1);
        assert_eq!(stage_plan(&p, &cfgs, 1, Shard::WHOLE, 1).len(), 1);
        let s1 = stage_plan(&p, &cfgs, 1, Shard { k: 1, n: 2 }, 2);
        let s2 = stage_plan(&p, &cfgs, 1, Shard { k: 2, n: 2 }, 2);
        let l = |b: &[Block]| b[0].units().map(|u| u.launch).collect::<Vec<_>>();
        assert_eq!(l(&s1), vec![0, 2]);
        assert_eq!(l(&s2), vec![1, 3]);
    }
}
