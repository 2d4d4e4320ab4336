//! The pacer: a dedicated OS thread that releases requests at absolute deadlines.
//!
//! For each request it sleeps (`clock_nanosleep`, `TIMER_ABSTIME`, 1 ns timer slack) until
//! shortly before the intended time, spins to it, checks the in-flight cap and hands the
//! request to the I/O runtime. The next request's body is rendered right after a hand-off, off
//! the critical path. Requests over the cap are dropped and recorded with their intended time.

use super::io::{CellIo, IoShared, Job, run_request};
use super::writer::{CellCounters, WriterMsg};
use crate::clock::{PreciseWaiter, monotonic_ns, set_thread_timerslack_ns};
use crate::workload::{BodyTemplate, PromptGen, Schedule};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Why the pacer stopped sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacerEnd {
    /// Duration and min-completed were both met.
    Done,
    /// The next send would be past the cell's hard cap.
    HardCap,
    /// Told to stop (interrupt, server death, repeated failures).
    Stopped,
}

#[derive(Debug, Clone)]
pub struct PacerStats {
    pub scheduled: u64,
    pub sent: u64,
    pub dropped: u64,
    pub t_last_intended_ns: Option<u64>,
    pub end: PacerEnd,
}

pub struct PacerCfg {
    pub warmup_end_ns: u64,
    /// warm-up end + duration.
    pub measure_end_ns: u64,
    pub hard_end_ns: u64,
    pub min_completed: u64,
    pub inflight_cap: u32,
    pub input_len: usize,
}

pub struct PacerCtx {
    pub cfg: PacerCfg,
    pub schedule: Schedule,
    pub prompts: PromptGen,
    pub body: BodyTemplate,
    pub handle: tokio::runtime::Handle,
    pub io: Arc<IoShared>,
    pub cell_io: Arc<CellIo>,
    pub counters: Arc<CellCounters>,
    /// Set by the controller: stop sending now.
    pub stop: Arc<AtomicBool>,
    /// SCHED_FIFO priority for this thread (0 = none).
    pub rt_priority: i32,
}

pub fn spawn_pacer(ctx: PacerCtx) -> std::io::Result<std::thread::JoinHandle<PacerStats>> {
    std::thread::Builder::new()
        .name("ctax-pacer".into())
        .spawn(move || run(ctx))
}

fn run(ctx: PacerCtx) -> PacerStats {
    set_thread_timerslack_ns(1);
    if ctx.rt_priority > 0 {
        // One above the I/O threads: the pacer's deadlines preempt I/O work, never the reverse.
        let _ = crate::clock::set_thread_realtime((ctx.rt_priority + 1).min(99));
    }
    let PacerCtx {
        cfg,
        mut schedule,
        prompts,
        body,
        handle,
        io,
        cell_io,
        counters,
        stop,
        ..
    } = ctx;
    let mut waiter = PreciseWaiter::default();
    let mut stats = PacerStats {
        scheduled: 0,
        sent: 0,
        dropped: 0,
        t_last_intended_ns: None,
        end: PacerEnd::Done,
    };
    let (mut seq, mut due) = schedule.next_due();
    let mut next_body = body.render(&prompts.prompt(seq, cfg.input_len));
    let rule_met = |due: u64| {
        due >= cfg.measure_end_ns
            && counters.ok_measured.load(Ordering::Acquire) >= cfg.min_completed
    };
    loop {
        if stop.load(Ordering::Acquire) {
            stats.end = PacerEnd::Stopped;
            break;
        }
        if due >= cfg.hard_end_ns {
            // No further send fits before the cap. If the duration is already covered, the
            // completions still on their way may meet the rule before the cap: wait for them
            // (a cell whose rule is met in time is complete, not capped).
            if due >= cfg.measure_end_ns {
                let _ = waiter.wait_until(cfg.hard_end_ns, 20_000_000, || {
                    !stop.load(Ordering::Relaxed) && !rule_met(due)
                });
            }
            stats.end = if stop.load(Ordering::Acquire) {
                PacerEnd::Stopped
            } else if rule_met(due) && monotonic_ns() < cfg.hard_end_ns {
                PacerEnd::Done
            } else {
                PacerEnd::HardCap
            };
            break;
        }
        if rule_met(due) {
            stats.end = PacerEnd::Done;
            break;
        }
        let waited = waiter.wait_until(due, 20_000_000, || {
            !stop.load(Ordering::Relaxed) && !rule_met(due)
        });
        if waited.is_none() {
            continue; // re-evaluate the rules at the top
        }
        let warmup = due < cfg.warmup_end_ns;
        let inflight = io.inflight.load(Ordering::Acquire);
        if inflight >= cfg.inflight_cap {
            let _ = cell_io.tx.send(WriterMsg::Dropped {
                seq,
                t_intended_ns: due,
                inflight,
                warmup,
            });
            stats.dropped += 1;
        } else {
            io.inflight.fetch_add(1, Ordering::AcqRel);
            let job = Job {
                seq,
                t_intended_ns: due,
                warmup,
                inflight_at_send: inflight,
                body: std::mem::take(&mut next_body),
            };
            handle.spawn(run_request(io.clone(), cell_io.clone(), job));
            stats.sent += 1;
        }
        stats.scheduled += 1;
        stats.t_last_intended_ns = Some(due);
        (seq, due) = schedule.next_due();
        next_body = body.render(&prompts.prompt(seq, cfg.input_len));
        // Behind schedule: the next request is already due. Send it at once, but block for a
        // moment first so that a real-time pacer can never starve the I/O threads it feeds (a
        // pacer that only hands off and never sleeps would livelock an overloaded client).
        if due <= monotonic_ns() {
            crate::clock::sleep_until_abs(monotonic_ns() + 10_000);
        }
    }
    stats
}
