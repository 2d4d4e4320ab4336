//! The simulated engine: continuous batching with chunked prefill under a per-step token budget,
//! on its own OS thread with absolute-deadline step timing.
//!
//! Each step: running requests first (a decode costs 1 token of budget, an unfinished prefill
//! takes what budget is left), then waiting requests are admitted FIFO while seats
//! (`max_num_seqs`) and budget remain. Step time =
//! `(base + prefill_tokens × prefill_token_us + decode_seqs × decode_seq_us) × (1 ± jitter)`
//! `+ connector_step_us + connector_request_us × scheduled_requests` — the connector part is
//! exact (never jittered), so an analysis can be checked against the injected value. A request
//! whose prefill completes in a step gets its first token at the end of that step; every later
//! step gives it one token.

use super::metrics::SimMetrics;
use super::{SimRequest, TokenMsg};
use crate::clock::{PreciseWaiter, monotonic_ns, set_thread_timerslack_ns};
use crate::rng::SplitMix64;
use crate::rtq::{Receiver, RecvError, Sender};
use ctax_schema::StepRecord;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct EngineCfg {
    pub max_num_batched_tokens: u32,
    pub max_num_seqs: u32,
    pub base_step_us: f64,
    pub prefill_token_us: f64,
    pub decode_seq_us: f64,
    pub connector_step_us: f64,
    pub connector_request_us: f64,
    pub jitter_pct: f64,
    pub seed: u64,
    pub rt_priority: i32,
}

struct Running {
    req: SimRequest,
    prefilled: u32,
    generated: u32,
    first_token_ns: Option<u64>,
}

/// Step time (µs) and its connector split, from a step's counts and a jitter draw `u ∈ [-1, 1]`.
pub fn step_cost_us(
    cfg: &EngineCfg,
    prefill_tokens: u32,
    decode_seqs: u32,
    scheduled: u32,
    u: f64,
) -> (f64, [f64; 3]) {
    let compute = cfg.base_step_us
        + f64::from(prefill_tokens) * cfg.prefill_token_us
        + f64::from(decode_seqs) * cfg.decode_seq_us;
    let compute = compute * (1.0 + cfg.jitter_pct / 100.0 * u);
    let third = cfg.connector_step_us / 3.0;
    let split = [
        third + cfg.connector_request_us * f64::from(scheduled),
        third,
        third,
    ];
    (compute.max(0.0) + split.iter().sum::<f64>(), split)
}

pub fn spawn(
    cfg: EngineCfg,
    rx: Receiver<SimRequest>,
    metrics: Arc<Mutex<SimMetrics>>,
    step_log: Option<Sender<StepRecord>>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("sim-engine".into())
        .spawn(move || run(cfg, rx, metrics, step_log))
}

fn run(
    cfg: EngineCfg,
    rx: Receiver<SimRequest>,
    metrics: Arc<Mutex<SimMetrics>>,
    step_log: Option<Sender<StepRecord>>,
) {
    set_thread_timerslack_ns(1);
    if cfg.rt_priority > 0 {
        // One above the HTTP threads, so token timing is never queued behind HTTP work.
        let _ = crate::clock::set_thread_realtime((cfg.rt_priority + 1).min(99));
    }
    let mut waiter = PreciseWaiter::new(20_000, 150_000);
    let mut rng = SplitMix64::new(cfg.seed);
    let mut waiting: VecDeque<SimRequest> = VecDeque::new();
    let mut running: Vec<Running> = Vec::new();
    let connector = cfg.connector_step_us > 0.0 || cfg.connector_request_us > 0.0;
    let pid = std::process::id();
    let mut step_id = 0u64;
    let mut intake = Vec::new();
    loop {
        if running.is_empty() && waiting.is_empty() {
            match rx.recv_all_timeout(&mut intake, Duration::from_millis(100)) {
                Ok(_) => {}
                Err(RecvError::Timeout) => continue,
                Err(RecvError::Closed) => return,
            }
        }
        rx.try_recv_all(&mut intake);
        waiting.extend(intake.drain(..));
        let t_step = monotonic_ns();
        // Requests whose client went away are aborted (as vLLM does).
        running.retain(|r| !r.req.tx.is_closed());
        waiting.retain(|r| !r.tx.is_closed());

        // --- schedule ---
        let mut budget = cfg.max_num_batched_tokens;
        let mut prefill_tokens = 0u32;
        let mut decode_seqs = 0u32;
        // (index into running, prefill chunk or 0 for decode)
        let mut plan: Vec<(usize, u32)> = Vec::with_capacity(running.len() + 8);
        for (i, r) in running.iter().enumerate() {
            if budget == 0 {
                break;
            }
            if r.prefilled < r.req.prompt_len {
                let n = (r.req.prompt_len - r.prefilled).min(budget);
                budget -= n;
                prefill_tokens += n;
                plan.push((i, n));
            } else {
                budget -= 1;
                decode_seqs += 1;
                plan.push((i, 0));
            }
        }
        while budget > 0 && (running.len() as u32) < cfg.max_num_seqs {
            let Some(req) = waiting.pop_front() else {
                break;
            };
            let n = req.prompt_len.min(budget);
            budget -= n;
            prefill_tokens += n;
            running.push(Running {
                req,
                prefilled: 0,
                generated: 0,
                first_token_ns: None,
            });
            plan.push((running.len() - 1, n));
        }
        let scheduled = plan.len() as u32;
        let schedule_us = (monotonic_ns() - t_step) as f64 / 1e3;

        // --- "execute": wait out the step time ---
        let u = rng.next_f64() * 2.0 - 1.0;
        let (cost_us, split) = step_cost_us(&cfg, prefill_tokens, decode_seqs, scheduled, u);
        let deadline = t_step + (cost_us * 1e3) as u64;
        waiter.wait_until(deadline, u64::MAX, || true);
        let t_done = monotonic_ns();

        // --- outputs ---
        let mut gen_tokens = 0u64;
        let mut finished: Vec<usize> = Vec::new();
        let mut m = metrics.lock().expect("metrics lock");
        for &(i, chunk) in &plan {
            let r = &mut running[i];
            let emits = if chunk > 0 {
                r.prefilled += chunk;
                r.prefilled >= r.req.prompt_len
            } else {
                true
            };
            if !emits {
                continue;
            }
            let tok = rng.range_u32(100, 30_000);
            r.generated += 1;
            gen_tokens += 1;
            if r.first_token_ns.is_none() {
                r.first_token_ns = Some(t_done);
                m.ttft.observe((t_done - r.req.arrival_ns) as f64 / 1e9);
            }
            let last = r.generated >= r.req.max_tokens;
            if r.req
                .tx
                .send(TokenMsg {
                    token_id: tok,
                    last,
                })
                .is_err()
                || last
            {
                finished.push(i);
                if last {
                    m.success_length += 1;
                    m.e2e.observe((t_done - r.req.arrival_ns) as f64 / 1e9);
                }
            }
        }
        m.prompt_tokens += u64::from(prefill_tokens);
        m.generation_tokens += gen_tokens;
        finished.sort_unstable();
        for i in finished.into_iter().rev() {
            running.swap_remove(i);
        }
        m.running = running.len() as u64;
        m.waiting = waiting.len() as u64;
        drop(m);

        if let Some(log) = &step_log {
            let _ = log.send(StepRecord {
                t_ns: t_step,
                step_id,
                pid,
                step_duration_us: Some((t_done - t_step) as f64 / 1e3),
                schedule_us: Some(schedule_us),
                build_meta_us: connector.then_some(split[0]),
                get_finished_us: connector.then_some(split[1]),
                start_load_kv_us: connector.then_some(split[2]),
                num_running: Some(running.len() as u32),
                num_waiting: Some(waiting.len() as u32),
                prefill_tokens: Some(prefill_tokens),
                decode_tokens: Some(decode_seqs),
            });
        }
        step_id += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_cost_adds_exact_connector_cost() {
        let cfg = EngineCfg {
            max_num_batched_tokens: 8192,
            max_num_seqs: 256,
            base_step_us: 2000.0,
            prefill_token_us: 0.5,
            decode_seq_us: 20.0,
            connector_step_us: 300.0,
            connector_request_us: 2.0,
            jitter_pct: 5.0,
            seed: 0,
            rt_priority: 0,
        };
        let (c, s) = step_cost_us(&cfg, 1000, 10, 12, 0.0);
        assert_eq!(s, [100.0 + 24.0, 100.0, 100.0]);
        assert_eq!(c, 2000.0 + 500.0 + 200.0 + 324.0);
        let (c_hi, s_hi) = step_cost_us(&cfg, 1000, 10, 12, 1.0);
        assert_eq!(s_hi, s);
        assert!((c_hi - (2700.0 * 1.05 + 324.0)).abs() < 1e-9);
    }
}
