//! The slot runner: runs a stage's [`Block`]s one after another; inside a block one thread per
//! slot runs that slot's queue, one launch at a time ([`super::launch::run`]). A slot that hits
//! an error stops (the others finish their queues; the error is returned after the block);
//! Ctrl-C makes every slot stop its server, keep its data and return `Interrupted`.

use ctax_schema::PlannedCell;

use super::plan::{Block, Unit};
use super::resume::{self, Todo};
use super::slots::Slot;
use super::{Ctx, Outcome, launch, signals};

/// What a stage did.
#[derive(Default)]
pub(crate) struct StageRun {
    pub outcomes: Vec<(Unit, Outcome)>,
    pub errors: Vec<anyhow::Error>,
}

impl StageRun {
    fn interrupted(&self) -> bool {
        signals::interrupted()
            || self
                .outcomes
                .iter()
                .any(|(_, o)| *o == Outcome::Interrupted)
    }
}

/// Runs `blocks` of `stage` (`A` or `B`) on `slots`; `cells` gives each launch's planned cells.
pub(crate) fn run_stage(
    ctx: &Ctx,
    slots: &[Slot],
    blocks: &[Block],
    stage: &str,
    cells: &(dyn Fn(&Unit) -> Vec<PlannedCell> + Sync),
) -> StageRun {
    if ctx.dry_run {
        print_stage(ctx, slots, blocks, stage, cells);
        return StageRun::default();
    }
    let mut out = StageRun::default();
    // In a skeleton, a launch whose run directory stayed skeletal cannot resume: refused before
    // any launch of the stage starts (the only place it is checked in a real run).
    if super::skeleton::is_skeleton(&ctx.root) {
        let runs = resume::runs(&ctx.root);
        out.errors = blocks
            .iter()
            .flat_map(|b| b.units())
            .filter_map(|u| {
                match resume::todo_in(
                    &runs,
                    &u.config,
                    u.launch,
                    stage,
                    &cells(u),
                    ctx.rerun_capped,
                ) {
                    Todo::Resume(dir, _) => super::skeleton::refuse_resume(&dir).err(),
                    _ => None,
                }
            })
            .collect();
        if !out.errors.is_empty() {
            return out;
        }
    }
    for block in blocks {
        if out.interrupted() || !out.errors.is_empty() {
            break;
        }
        let busy = block.queues.iter().filter(|q| !q.is_empty()).count();
        if busy == 0 {
            continue;
        }
        eprintln!(
            "[ctax] stage {stage}, {}: {} launches on {} slot(s)",
            block.name,
            block.units().count(),
            busy
        );
        let results: Vec<QueueRun> = std::thread::scope(|sc| {
            let handles: Vec<_> = block
                .queues
                .iter()
                .enumerate()
                .filter(|(_, q)| !q.is_empty())
                .map(|(s, q)| {
                    let slot = &slots[s];
                    sc.spawn(move || run_queue(ctx, slot, q, stage, cells))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        (Vec::new(), Some(anyhow::anyhow!("a slot thread panicked")))
                    })
                })
                .collect()
        });
        for (o, e) in results {
            out.outcomes.extend(o);
            out.errors.extend(e);
        }
    }
    out
}

/// `--dry-run`: what [`run_stage`] would do with each launch, per block and slot in run order,
/// from the same resume check as a launch ([`resume::todo`]), with each launch's expected time
/// and end: blocks one after another, a block's slots side by side. With `--end-by` the
/// launches are weighed in the order they would start (across slots, as a real run holds
/// back every launch that starts after the first one held back).
fn print_stage(
    ctx: &Ctx,
    slots: &[Slot],
    blocks: &[Block],
    stage: &str,
    cells: &(dyn Fn(&Unit) -> Vec<PlannedCell> + Sync),
) {
    use super::end_by;
    let times = end_by::LaunchTimes::of_root(&ctx.root);
    let deadline = ctx.end_by.unix_ms;
    let utc = crate::report::fmt::unix_ms;
    let mut block_start = ctx.end_by.dry_clock_ms();
    for block in blocks {
        let queues: Vec<(usize, &Vec<Unit>)> = block
            .queues
            .iter()
            .enumerate()
            .filter(|(_, q)| !q.is_empty())
            .collect();
        let mut lines: Vec<Vec<String>> = queues.iter().map(|_| Vec::new()).collect();
        let mut clock = vec![block_start; queues.len()];
        // The slot whose next launch would start first, until every queue is listed.
        while let Some(k) = (0..queues.len())
            .filter(|&k| lines[k].len() < queues[k].1.len())
            .min_by_key(|&k| (clock[k], k))
        {
            let i = lines[k].len();
            let u = &queues[k].1[i];
            // `, ~7.3 min expected, ends by …` for a launch that would start, or `None` for one
            // --end-by would hold back.
            let mut timed = |c: &[PlannedCell]| -> Option<String> {
                let est = end_by::expected_s_from(&times, ctx, c);
                let end_by::Weighed::Starts(ends) = ctx.end_by.weigh(clock[k], est.0) else {
                    return None;
                };
                clock[k] = ends;
                Some(format!(
                    ", {}, ends by {}",
                    end_by::expected_text(est),
                    utc(ends)
                ))
            };
            let held = || {
                format!(
                    "would not start (--end-by {}: not expected to end by then, or starting after \
                     one that is not)",
                    utc(deadline.unwrap_or_default())
                )
            };
            let what = match resume::todo(
                &ctx.root,
                &u.config,
                u.launch,
                stage,
                &cells(u),
                ctx.rerun_capped,
            ) {
                Todo::Done { .. } => "complete, skipped".to_owned(),
                Todo::Outside => {
                    "skipped: its own plan holds none of this sweep's cells".to_owned()
                }
                Todo::Fresh(c) => match timed(&c) {
                    Some(t) => format!("would launch ({} cells{t})", c.len()),
                    None => held(),
                },
                Todo::Resume(dir, c) => match super::skeleton::refuse_resume(&dir) {
                    Ok(()) => match timed(&c) {
                        Some(t) => format!(
                            "would resume {} cells in {}{t}",
                            c.len(),
                            dir.file_name().unwrap_or_default().to_string_lossy()
                        ),
                        None => held(),
                    },
                    Err(e) => format!("REFUSED, {} cells left: {e}", c.len()),
                },
            };
            let why = u
                .anchor
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            lines[k].push(format!(
                "[ctax] dry run: stage {stage}, {}, {} #{}: {} l{}: {what}{why}",
                block.name,
                slots[queues[k].0].label(),
                i + 1,
                u.config,
                u.launch
            ));
        }
        for line in lines.iter().flatten() {
            eprintln!("{line}");
        }
        block_start = clock.into_iter().fold(block_start, u64::max);
    }
    ctx.end_by.set_dry_clock_ms(block_start);
}

/// What one slot's queue did: the launches it ran and the error that stopped it, if any.
type QueueRun = (Vec<(Unit, Outcome)>, Option<anyhow::Error>);

fn run_queue(
    ctx: &Ctx,
    slot: &Slot,
    queue: &[Unit],
    stage: &str,
    cells: &(dyn Fn(&Unit) -> Vec<PlannedCell> + Sync),
) -> QueueRun {
    let mut done = Vec::new();
    for unit in queue {
        if signals::interrupted() {
            break;
        }
        match launch::run(ctx, slot, unit, stage, &cells(unit)) {
            Ok(o) => {
                done.push((unit.clone(), o));
                if o == Outcome::Interrupted {
                    break;
                }
            }
            Err(e) => {
                eprintln!(
                    "[ctax] {}: {} l{} stopped this slot: {e:#}",
                    slot.label(),
                    unit.config,
                    unit.launch
                );
                return (
                    done,
                    Some(e.context(format!(
                        "{}: {} l{} stage {stage}",
                        slot.label(),
                        unit.config,
                        unit.launch
                    ))),
                );
            }
        }
    }
    (done, None)
}
