//! Infinite-capacity calibration mode: every request gets its first token exactly `ttft` after it
//! arrived and one more every `itl`, whatever the load (absolute deadlines, no drift). With the
//! true server latency known exactly, whatever a client measures beyond it is the client's own.
//!
//! The token clock is a task on the HTTP runtime itself, woken by a `timerfd` armed at the next
//! absolute deadline (nanosecond resolution, unlike tokio's millisecond timers). Keeping timing
//! and HTTP on one thread avoids a cross-thread wake-up and context switch per token, which is
//! what limits a simulator on a small machine. The task records how late it emitted each token
//! (`ctax_sim:emit_lateness_*` in /metrics) so a benchmark can check the server stayed exact.

use super::metrics::SimMetrics;
use super::{SimRequest, TokenMsg};
use crate::clock::monotonic_ns;
use crate::rng::SplitMix64;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc::UnboundedReceiver;

pub struct FixedCfg {
    pub ttft_ns: u64,
    pub itl_ns: u64,
    pub seed: u64,
}

struct Active {
    req: SimRequest,
    generated: u32,
}

/// A non-blocking CLOCK_MONOTONIC timerfd.
struct TimerFd(OwnedFd);

impl TimerFd {
    fn new() -> std::io::Result<TimerFd> {
        // SAFETY: plain syscall; the fd is owned below.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(TimerFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Arms the timer at absolute time `t_ns` (a past time fires at once); 0 disarms it.
    fn arm_abs(&self, t_ns: u64) -> std::io::Result<()> {
        let t_ns = if t_ns == 0 { 0 } else { t_ns.max(1) };
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (t_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (t_ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: valid fd and itimerspec.
        let rc = unsafe {
            libc::timerfd_settime(
                self.0.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Consumes expirations (non-blocking); true if the timer had fired.
    fn drain(&self) -> bool {
        let mut buf = [0u8; 8];
        // SAFETY: reading 8 bytes into our buffer.
        let n = unsafe { libc::read(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
        n == 8
    }
}

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.0.as_raw_fd()
    }
}

/// Runs the token clock until the intake channel closes.
pub async fn run(
    cfg: FixedCfg,
    mut intake: UnboundedReceiver<SimRequest>,
    metrics: Arc<Mutex<SimMetrics>>,
) -> std::io::Result<()> {
    // SAFETY: the TimerFd owns its descriptor for the AsyncFd's whole life and always returns it.
    let timer =
        unsafe { AsyncFd::register_with_interest(TimerFd::new()?, tokio::io::Interest::READABLE) }?;
    let mut rng = SplitMix64::new(cfg.seed);
    let mut heap: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut active: HashMap<u64, Active> = HashMap::new();
    let (mut late_sum, mut late_n, mut late_max) = (0f64, 0u64, 0f64);
    let mut armed_for = 0u64;
    loop {
        // Emit everything due (the metrics guard must not live across the await below).
        {
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
                    let next = a.req.arrival_ns + cfg.ttft_ns + u64::from(a.generated) * cfg.itl_ns;
                    heap.push(Reverse((next, id)));
                }
            }
            if let Some(mm) = m.as_mut() {
                mm.generation_tokens += emitted;
                mm.running = active.len() as u64;
                mm.emit_late_sum_s = late_sum;
                mm.emit_late_count = late_n;
                mm.emit_late_max_s = late_max;
            }
            drop(m);
        }
        let next = heap.peek().map_or(0, |r| r.0.0);
        if next != armed_for {
            timer.get_ref().arm_abs(next)?;
            armed_for = next;
        }
        tokio::select! {
            biased;
            g = timer.readable() => {
                let mut g = g?;
                if !g.get_inner().drain() {
                    g.clear_ready();
                } else {
                    armed_for = 0;
                }
            }
            r = intake.recv() => match r {
                Some(r) => {
                    heap.push(Reverse((r.arrival_ns + cfg.ttft_ns, r.id)));
                    active.insert(r.id, Active { req: r, generated: 0 });
                    // Take whatever else is queued without another wake-up.
                    while let Ok(r) = intake.try_recv() {
                        heap.push(Reverse((r.arrival_ns + cfg.ttft_ns, r.id)));
                        active.insert(r.id, Active { req: r, generated: 0 });
                    }
                }
                None => return Ok(()),
            },
        }
    }
}
