//! Infinite-capacity calibration mode: every request gets its first token exactly `ttft` after it
//! arrived and one more every `itl`, whatever the load (absolute deadlines, no drift). With the
//! true server latency known exactly, whatever a client measures beyond it is the client's own.
//!
//! The timer thread records how late it emitted each token (`emit_lateness`), so a benchmark
//! can check that the server side stayed exact.

use super::metrics::SimMetrics;
use super::{SimRequest, TokenMsg};
use crate::clock::{monotonic_ns, set_thread_timerslack_ns, sleep_until_abs};
use crate::rng::SplitMix64;
use crate::rtq::{Receiver, RecvError};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct FixedCfg {
    pub ttft_ns: u64,
    pub itl_ns: u64,
    pub seed: u64,
    pub rt_priority: i32,
}

struct Active {
    req: SimRequest,
    generated: u32,
}

pub fn spawn(
    cfg: FixedCfg,
    rx: Receiver<SimRequest>,
    metrics: Arc<Mutex<SimMetrics>>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("sim-fixed".into())
        .spawn(move || run(cfg, rx, metrics))
}

fn run(cfg: FixedCfg, rx: Receiver<SimRequest>, metrics: Arc<Mutex<SimMetrics>>) {
    set_thread_timerslack_ns(1);
    if cfg.rt_priority > 0 {
        // One above the HTTP threads, so token timing is never queued behind HTTP work.
        let _ = crate::clock::set_thread_realtime((cfg.rt_priority + 1).min(99));
    }
    let mut rng = SplitMix64::new(cfg.seed);
    let mut heap: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut active: HashMap<u64, Active> = HashMap::new();
    let mut late_sum = 0f64;
    let mut late_n = 0u64;
    let mut late_max = 0f64;
    let add = |r: SimRequest,
               heap: &mut BinaryHeap<Reverse<(u64, u64)>>,
               active: &mut HashMap<u64, Active>| {
        heap.push(Reverse((r.arrival_ns + cfg.ttft_ns, r.id)));
        active.insert(
            r.id,
            Active {
                req: r,
                generated: 0,
            },
        );
    };
    let mut intake = Vec::new();
    loop {
        // Intake.
        rx.try_recv_all(&mut intake);
        for r in intake.drain(..) {
            add(r, &mut heap, &mut active);
        }
        let now = monotonic_ns();
        let mut emitted = 0u64;
        let mut m = None;
        while let Some(&Reverse((due, id))) = heap.peek() {
            if due > now {
                break;
            }
            heap.pop();
            let Some(a) = active.get_mut(&id) else {
                continue;
            };
            a.generated += 1;
            let last = a.generated >= a.req.max_tokens;
            let ok = a
                .req
                .tx
                .send(TokenMsg {
                    token_id: rng.range_u32(100, 30_000),
                    last,
                })
                .is_ok();
            emitted += 1;
            let late = (now - due) as f64 / 1e9;
            late_sum += late;
            late_n += 1;
            late_max = f64::max(late_max, late);
            let mm = m.get_or_insert_with(|| metrics.lock().expect("metrics lock"));
            if a.generated == 1 {
                mm.ttft.observe((now - a.req.arrival_ns) as f64 / 1e9);
            }
            if last || !ok {
                if last {
                    mm.success_length += 1;
                    mm.e2e.observe((now - a.req.arrival_ns) as f64 / 1e9);
                    mm.prompt_tokens += u64::from(a.req.prompt_len);
                }
                active.remove(&id);
            } else {
                heap.push(Reverse((
                    a.req.arrival_ns + cfg.ttft_ns + u64::from(a.generated) * cfg.itl_ns,
                    id,
                )));
            }
        }
        if emitted > 0 || m.is_some() {
            let mm = m.get_or_insert_with(|| metrics.lock().expect("metrics lock"));
            mm.generation_tokens += emitted;
            mm.running = active.len() as u64;
            mm.emit_late_sum_s = late_sum;
            mm.emit_late_count = late_n;
            mm.emit_late_max_s = late_max;
        }
        drop(m);
        // Wait for the next due token or a new request, whichever is first. No spinning: this
        // mode shares a core with the HTTP side; the recorded lateness shows what that costs.
        match heap.peek() {
            None => {
                if rx.recv_all_timeout(&mut intake, Duration::from_millis(100))
                    == Err(RecvError::Closed)
                {
                    return;
                }
            }
            Some(&Reverse((due, _))) => {
                let now = monotonic_ns();
                if due > now + 200_000 {
                    // Long wait: block on the channel so new requests are taken at once.
                    match rx
                        .recv_all_timeout(&mut intake, Duration::from_nanos(due - now - 100_000))
                    {
                        Ok(_) => {}
                        Err(RecvError::Timeout) => sleep_until_abs(due),
                        Err(RecvError::Closed) => return,
                    }
                } else if due > now {
                    sleep_until_abs(due);
                }
            }
        }
    }
}
