//! Plain on every machine (`plain_on_every_machine`, default on): a machine that runs a
//! non-plain launch of a stage also runs a plain launch of that stage.
//!
//! Why: every GPU session is a different (leased) machine, and on the H200 TTFT p90 at the same
//! load differed by ~20–27% between machines while launches of one config on one machine
//! differed by ~5%. The analysis therefore compares each config with plain launches **on the
//! same machine** (`placement.machine_id`, the kernel's boot id), and a config measured on a
//! machine where plain never ran gives no tax.
//!
//! The rule, per stage (Phase A; Phase B, whose launches carry B' too, or only B' with
//! `--phase-b-shapes none`): when this invocation
//! will run a non-plain launch of the stage, the results root holds no plain launch of the stage
//! recorded on this machine whose own plan holds every cell of the sweep's plain plan (a launch
//! without a `machine_id` counts as another machine; one made before rates were added to the
//! profile lacks the new ones, and the taxes pair per machine and cell), and
//! the plan runs no plain launch of the stage here (a calibration round is one), one plain launch
//! is added: the **anchor**. It runs first (at the head of the least busy slot's queue of the
//! stage's launches), so an interrupted stretch still has it.
//!
//! Its index ([`index`]): the smallest k ≥ the launch count that this shard owns by the plan's
//! rule ((k + rank(plain)) mod N = K − 1) and that no plain launch of the stage uses in the
//! root or the plan. Another shard never plans or anchors an index it does not own, so the
//! shards' roots never hold the same launch (`ctax merge` refuses overlaps). A later run with a
//! larger `--launches` that reaches an anchor's index finds it done and counts it as that launch.
//!
//! Resume: the anchor is an ordinary plain launch recorded on this machine, so running again
//! here adds no second one; an incomplete plain launch of this machine that the plan does not
//! hold (an interrupted anchor) is resumed first, like any launch.
//!
//! `ctax run --plain-last` adds a second plain launch with the anchor, the **closing** one, at
//! the end of the anchor's slot queue (the next free index the shard owns): plain then brackets
//! the stage's other launches on this machine, so a drift of the machine over the stretch does
//! not fall on the configs alone, and the two plain launches on one machine give an A/A. It is
//! added only with a new anchor: a run that finds plain here already (e.g. the same command
//! again after the stretch ended before the closing launch started) adds neither.

use std::collections::BTreeSet;

use ctax_schema::{PlannedCell, RunConfig};

use super::Ctx;
use super::plan::{Block, Shard, Unit};
use super::resume::{self, Todo};

/// A plain launch of the stage already in the results root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub launch: u32,
    /// Recorded on this machine (its `placement.machine_id` is ours).
    pub here: bool,
    /// Every planned cell complete (or kept as capped).
    pub done: bool,
    /// Its own plan holds every cell of plain's plan in this sweep. One that does not (made
    /// before rates were added to the profile, or by a `--phase-a-rates` sweep of other rates)
    /// leaves some of the cells this machine's launches will run without a plain launch to pair
    /// with (taxes pair per machine and cell): it is not this machine's plain for this sweep,
    /// but its index stays taken.
    pub measures: bool,
}

/// What the stage's plan does, as far as the rule cares.
#[derive(Debug, Clone, Default)]
pub(crate) struct Planned {
    /// Indices of the plan's plain launches (whatever their state).
    pub plain: BTreeSet<u32>,
    /// A plain launch of the plan has cells left: it runs here.
    pub plain_runs: bool,
    /// A non-plain launch of the plan has cells left.
    pub other_runs: bool,
}

/// What to put at the head of the stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Anchor {
    /// A new plain launch with this index, and (`--plain-last`) the index of the closing plain
    /// launch that goes after the stage's other launches in the anchor's slot.
    New(u32, Option<u32>),
    /// This machine's incomplete plain launch that the plan does not hold (an interrupted
    /// anchor): resumed.
    Resume(u32),
}

/// The anchor launch index of `shard`: the smallest k ≥ `launches` that the shard owns and that
/// `used` (the stage's plain indices in the root and the plan) does not hold.
pub(crate) fn index(shard: Shard, plain_rank: u32, launches: u32, used: &BTreeSet<u32>) -> u32 {
    (launches..)
        .find(|&k| shard.owns(plain_rank, k) && !used.contains(&k))
        .expect("an unused index below u32::MAX")
}

/// The rule (module docs) on what the root holds and what the plan does; `closing`
/// (`--plain-last`): a new anchor comes with a closing plain launch.
pub(crate) fn decide(
    found: &[Found],
    planned: &Planned,
    shard: Shard,
    plain_rank: u32,
    launches: u32,
    closing: bool,
) -> Vec<Anchor> {
    let mut out: Vec<Anchor> = found
        .iter()
        .filter(|f| f.here && f.measures && !f.done && !planned.plain.contains(&f.launch))
        .map(|f| Anchor::Resume(f.launch))
        .collect();
    if planned.other_runs && !planned.plain_runs && !found.iter().any(|f| f.here && f.measures) {
        let mut used: BTreeSet<u32> = found
            .iter()
            .map(|f| f.launch)
            .chain(planned.plain.iter().copied())
            .collect();
        let k = index(shard, plain_rank, launches, &used);
        used.insert(k);
        let last = closing.then(|| index(shard, plain_rank, launches, &used));
        out.push(Anchor::New(k, last));
    }
    out
}

/// Adds the anchor(s) of stage `stage` (`A` or `B`) to `blocks` (its plan over `configs`) when
/// the profile's `plain_on_every_machine` is on, and says so on stderr.
pub(crate) fn add(
    ctx: &Ctx,
    blocks: &mut [Block],
    stage: &str,
    configs: &[String],
    shard: Shard,
    cells: &(dyn Fn(&Unit) -> Vec<PlannedCell> + Sync),
) {
    if !ctx.profile.plain_on_every_machine || !configs.iter().any(|c| c == "plain") {
        return;
    }
    let Some(machine) = super::slots::machine_id() else {
        eprintln!(
            "[ctax] warning: no boot id (/proc/sys/kernel/random/boot_id): plain_on_every_machine \
             cannot tell machines apart, no plain anchor added for stage {stage}"
        );
        return;
    };
    let runs = resume::runs(&ctx.root);
    let left = |u: &Unit| {
        !matches!(
            resume::todo_in(
                &runs,
                &u.config,
                u.launch,
                stage,
                &cells(u),
                ctx.rerun_capped
            ),
            Todo::Done { .. } | Todo::Outside
        )
    };
    let plain_unit = |launch: u32| Unit {
        config: "plain".into(),
        launch,
        slot: 0,
        calibration: false,
        anchor: None,
    };
    // [`Found::measures`].
    let measures_these = |rc: &RunConfig| measures(&rc.cells, &cells(&plain_unit(rc.launch)));
    let found: Vec<Found> = runs
        .iter()
        .filter(|(_, rc)| rc.config == "plain" && resume::run_stage(rc) == stage)
        .map(|(_, rc)| Found {
            measures: measures_these(rc),
            launch: rc.launch,
            here: on_machine(rc, &machine),
            done: !left(&plain_unit(rc.launch)),
        })
        .collect();
    let mut planned = Planned::default();
    for u in blocks.iter().flat_map(|b| b.units()) {
        if u.config == "plain" {
            planned.plain.insert(u.launch);
            planned.plain_runs = planned.plain_runs || left(u);
        } else if !planned.other_runs {
            planned.other_runs = left(u);
        }
    }
    let rank = ctx
        .profile
        .configs
        .iter()
        .position(|c| c == "plain")
        .unwrap_or(0) as u32;
    let anchors = decide(
        &found,
        &planned,
        shard,
        rank,
        ctx.profile.launches,
        ctx.plain_last,
    );
    let Some(block) = blocks.last_mut() else {
        return;
    };
    let phase = format!("Phase {stage}");
    // Named as the analysis names machines (`boot 1a2b3c4d`).
    let boot = crate::ingest::machine::boot_key(&machine);
    // At the head of the queue with the fewest launches left: the stage gets no longer than it
    // must, and the anchor starts with the stage's first launches. A closing launch goes to the
    // end of the same queue.
    let unit = |slot: usize, launch: u32, note: String| {
        eprintln!("[ctax] plain l{launch} stage {stage}: {note}");
        Unit {
            slot,
            anchor: Some(note),
            ..plain_unit(launch)
        }
    };
    for a in anchors.into_iter().rev() {
        let (launch, note, last) = match a {
            Anchor::New(k, last) => (
                k,
                format!(
                    "anchor for this machine ({boot}): no plain launch of {phase} here measured \
                     this sweep's cells yet"
                ),
                last,
            ),
            Anchor::Resume(k) => (
                k,
                format!("anchor for this machine ({boot}): its incomplete plain launch, resumed"),
                None,
            ),
        };
        let slot = (0..block.queues.len())
            .min_by_key(|&s| block.queues[s].iter().filter(|u| left(u)).count())
            .unwrap_or(0);
        block.queues[slot].insert(0, unit(slot, launch, note));
        if let Some(l) = last {
            let note = format!(
                "closing plain for this machine ({boot}): after {phase}'s other launches here (--plain-last)"
            );
            block.queues[slot].push(unit(slot, l, note));
        }
    }
}

/// [`Found::measures`]: a plain launch's own plan `own` holds every cell of `sweep` (plain's
/// plan in this sweep). A plan not recorded (empty) is taken to hold them, as before plans
/// were compared.
fn measures(own: &[PlannedCell], sweep: &[PlannedCell]) -> bool {
    let own: BTreeSet<String> = own.iter().map(resume::key).collect();
    own.is_empty() || sweep.iter().all(|c| own.contains(&resume::key(c)))
}

/// Whether `rc` was recorded on the machine with boot id `machine` (no recorded id: another).
fn on_machine(rc: &RunConfig, machine: &str) -> bool {
    rc.placement
        .as_ref()
        .and_then(|p| p.machine_id.as_deref())
        .is_some_and(|id| id.trim() == machine.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HERE: bool = true;
    const ELSEWHERE: bool = false;
    const DONE: bool = true;
    const LEFT: bool = false;

    fn planned(plain: &[u32], plain_runs: bool, other_runs: bool) -> Planned {
        Planned {
            plain: plain.iter().copied().collect(),
            plain_runs,
            other_runs,
        }
    }

    /// The root's plain launches given as (index, where, state).
    fn found(v: &[(u32, bool, bool)]) -> Vec<Found> {
        v.iter()
            .map(|&(launch, here, done)| Found {
                launch,
                here,
                done,
                measures: true,
            })
            .collect()
    }

    /// [`decide`] unsharded, without `--plain-last`.
    fn d(v: &[(u32, bool, bool)], plan: &Planned, launches: u32) -> Vec<Anchor> {
        decide(&found(v), plan, Shard::WHOLE, 0, launches, false)
    }

    #[test]
    fn an_anchor_only_where_plain_never_ran_on_this_machine() {
        // plain l0 ran elsewhere, noop runs here, the plan's plain l0 is done: anchor l1.
        let plan = planned(&[0], false, true);
        assert_eq!(
            d(&[(0, ELSEWHERE, DONE)], &plan, 1),
            vec![Anchor::New(1, None)]
        );
        // plain ran here (done or not): none.
        assert!(d(&[(0, HERE, DONE)], &plan, 1).is_empty());
        assert!(d(&[(0, HERE, LEFT)], &plan, 1).is_empty());
        // The plan runs a plain launch here (e.g. the calibration round): none.
        let calibrating = planned(&[0, 1], true, true);
        assert!(d(&[(0, ELSEWHERE, DONE)], &calibrating, 2).is_empty());
        // Nothing non-plain runs: none.
        let plain_only = planned(&[0], false, false);
        assert!(d(&[(0, ELSEWHERE, DONE)], &plain_only, 1).is_empty());
        // Earlier anchors elsewhere (l1, l2) keep their indices; an empty root gets one too.
        let root = [
            (0, ELSEWHERE, DONE),
            (1, ELSEWHERE, DONE),
            (2, ELSEWHERE, LEFT),
        ];
        assert_eq!(d(&root, &plan, 1), vec![Anchor::New(3, None)]);
        assert_eq!(
            d(&[], &planned(&[], false, true), 2),
            vec![Anchor::New(2, None)]
        );
    }

    /// By cell keys: a plan holding every cell of the sweep's measures them; one missing a rate
    /// (2-8 against 0.5-8), or holding only some (2 against 2 and 4), does not; an unrecorded
    /// plan does.
    #[test]
    fn a_plain_launch_measures_the_sweep_when_its_plan_holds_every_cell() {
        let cell = |rate: f64| -> PlannedCell {
            serde_json::from_value(serde_json::json!({
                "phase": "A",
                "cell": {"rate": rate, "input_len": 4096, "output_len": 256},
                "arrival": "fixed",
                "duration_s": 40.0,
                "warmup_s": 5.0,
                "min_completed": 80,
                "max_cell_s": 150.0,
                "inflight_cap": 256,
                "seed": 1
            }))
            .expect("a planned cell")
        };
        let cells = |r: &[f64]| r.iter().map(|&x| cell(x)).collect::<Vec<_>>();
        assert!(measures(&cells(&[2.0, 4.0, 6.0, 8.0]), &cells(&[4.0, 2.0])));
        assert!(!measures(
            &cells(&[2.0, 4.0, 6.0, 8.0]),
            &cells(&[0.5, 1.0, 2.0])
        ));
        assert!(!measures(&cells(&[2.0]), &cells(&[2.0, 4.0])));
        assert!(measures(&[], &cells(&[0.5])));
    }

    /// A plain launch here whose own plan lacks some of the sweep's cells (rates 2-8 before a
    /// `--phase-a-rates 0.5,1` sweep, or before the usual sweep of a profile grown to 0.5-8) is
    /// no anchor for them: a new one comes, at an index above every plain launch of the root
    /// (theirs stay taken); an incomplete one of them is not resumed.
    #[test]
    fn a_plain_launch_of_other_cells_is_no_anchor_for_these() {
        let plan = planned(&[0], false, true);
        let other = |launch, done| Found {
            launch,
            here: HERE,
            done,
            measures: false,
        };
        let root = vec![other(0, DONE), other(1, LEFT), other(2, DONE)];
        assert_eq!(
            decide(&root, &plan, Shard::WHOLE, 0, 1, false),
            vec![Anchor::New(3, None)]
        );
        // With one that measures these cells here: none.
        let mut with = root.clone();
        with.push(Found {
            launch: 4,
            here: HERE,
            done: DONE,
            measures: true,
        });
        assert!(decide(&with, &plan, Shard::WHOLE, 0, 1, false).is_empty());
    }

    /// `--plain-last`: a new anchor comes with a closing launch at the next free index (l1 and
    /// l2 above a root whose plain l0 ran elsewhere; l1 and l3 when l2 and l4 are taken); a
    /// resumed anchor or plain already here brings none.
    #[test]
    fn plain_last_adds_a_closing_launch_with_a_new_anchor_only() {
        let plan = planned(&[0], false, true);
        let closing = |v: &[(u32, bool, bool)], p: &Planned, launches: u32| {
            decide(&found(v), p, Shard::WHOLE, 0, launches, true)
        };
        assert_eq!(
            closing(&[(0, ELSEWHERE, DONE)], &plan, 1),
            vec![Anchor::New(1, Some(2))]
        );
        let taken = [
            (0, ELSEWHERE, DONE),
            (2, ELSEWHERE, DONE),
            (4, ELSEWHERE, DONE),
        ];
        assert_eq!(closing(&taken, &plan, 1), vec![Anchor::New(1, Some(3))]);
        assert_eq!(
            closing(&[(0, ELSEWHERE, DONE), (1, HERE, LEFT)], &plan, 1),
            vec![Anchor::Resume(1)]
        );
        assert!(closing(&[(0, HERE, DONE)], &plan, 1).is_empty());
        // Sharded: the closing index is one the shard owns (2/3 of plain owns 1, 4, 7, …).
        let s = Shard { k: 2, n: 3 };
        assert_eq!(
            decide(&found(&[]), &planned(&[1], false, true), s, 0, 2, true),
            vec![Anchor::New(4, Some(7))]
        );
    }

    #[test]
    fn an_interrupted_anchor_here_is_resumed_not_doubled() {
        let plan = planned(&[0], false, true);
        // l1 was this machine's anchor and was interrupted: resumed, no new one.
        let root = [(0, ELSEWHERE, DONE), (1, HERE, LEFT)];
        assert_eq!(d(&root, &plan, 1), vec![Anchor::Resume(1)]);
        // Complete: nothing at all.
        assert!(d(&[(0, ELSEWHERE, DONE), (1, HERE, DONE)], &plan, 1).is_empty());
        // Another machine's interrupted anchor is not resumed here (it would mix machines in
        // one launch): this machine gets its own.
        let root = [(0, ELSEWHERE, DONE), (1, ELSEWHERE, LEFT)];
        assert_eq!(d(&root, &plan, 1), vec![Anchor::New(2, None)]);
        // An incomplete plain launch of the plan is resumed by the plan itself.
        assert!(d(&[(0, HERE, LEFT)], &plan, 1).is_empty());
    }

    #[test]
    fn a_launch_without_a_machine_id_ran_on_another_machine() {
        // A config.json as an older ctax wrote it (no placement), then with placements.
        let old: RunConfig = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "config": "plain", "launch": 0, "run_dir": "d",
            "phases": ["A"], "cells": [], "model": "m", "served_model_name": "m", "port": 1
        }))
        .unwrap();
        let rc = |id: Option<&str>| RunConfig {
            placement: Some(ctax_schema::Placement {
                machine_id: id.map(str::to_owned),
                ..Default::default()
            }),
            ..old.clone()
        };
        assert!(on_machine(&rc(Some("ab-12\n")), "ab-12"));
        assert!(!on_machine(&rc(Some("cd-34")), "ab-12"));
        assert!(!on_machine(&rc(None), "ab-12"));
        assert!(!on_machine(&old, "ab-12"));
    }

    #[test]
    fn shards_never_pick_the_same_anchor_index() {
        for n in 1..=5u32 {
            for rank in 0..3u32 {
                for launches in 1..=4u32 {
                    // Every shard's regular plain indices, as the plan assigns them.
                    let regular = |k: u32| -> BTreeSet<u32> {
                        let s = Shard { k, n };
                        (0..launches).filter(|&i| s.owns(rank, i)).collect()
                    };
                    let mut taken: BTreeSet<u32> = (0..launches).collect();
                    for k in 1..=n {
                        let s = Shard { k, n };
                        // Three machines in a row, each adding an anchor to this shard's root.
                        let mut used = regular(k);
                        for _ in 0..3 {
                            let a = index(s, rank, launches, &used);
                            assert!(a >= launches, "above the launch count");
                            assert!(s.owns(rank, a), "shard {s} owns its anchor {a}");
                            assert!(
                                taken.insert(a),
                                "n={n} rank={rank} launches={launches}: {a} picked twice"
                            );
                            used.insert(a);
                        }
                    }
                }
            }
        }
        // Unsharded: the next index above the launch count that is free.
        let used: BTreeSet<u32> = [0, 1, 2, 4].into_iter().collect();
        assert_eq!(index(Shard::WHOLE, 0, 2, &used), 3);
        // Shard 2/3 of plain (rank 0) owns 1, 4, 7, …
        assert_eq!(index(Shard { k: 2, n: 3 }, 0, 2, &BTreeSet::new()), 4);
        assert_eq!(index(Shard { k: 2, n: 3 }, 0, 2, &[4].into()), 7);
    }
}
