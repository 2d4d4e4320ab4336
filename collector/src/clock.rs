//! Precise waiting on CLOCK_MONOTONIC (the clock of every record) and process CPU accounting.
//!
//! The pacer and the simulated engine wait for *absolute* deadlines: `clock_nanosleep` with
//! `TIMER_ABSTIME` until shortly before the deadline, then a spin on `clock_gettime`. Relative
//! sleeps accumulate their overshoot and lose 9–52% of the offered rate (see the references);
//! absolute deadlines never drift.

pub use ctax_schema::monotonic_ns;

/// Sets this thread's timer slack to 1 ns so that `clock_nanosleep` wakes as close to the
/// deadline as the kernel allows (the default slack is 50 µs). Best effort.
pub fn set_thread_timerslack_ns(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long and has no memory effects.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0);
    }
}

/// Puts the calling thread in the `SCHED_FIFO` real-time class at `priority` (1–99), so that a
/// busy machine (compilers, the server under test) cannot delay its wake-ups by whole scheduler
/// slices. Needs CAP_SYS_NICE (root, or an `RLIMIT_RTPRIO` grant). The kernel's RT throttling
/// (`sched_rt_runtime_us`) still leaves other work ≥5% of each CPU.
pub fn set_thread_realtime(priority: i32) -> Result<(), String> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pid 0 = the calling thread; `param` is a valid sched_param.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

/// Sleeps until the absolute CLOCK_MONOTONIC time `t_ns` (returns at once if it has passed).
/// Restarts after signal interruptions.
pub fn sleep_until_abs(t_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (t_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (t_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: `ts` is a valid timespec; the remaining-time pointer may be null with
        // TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

/// Spins until `t_ns`; returns the time read when the spin ended.
#[inline]
pub fn spin_until(t_ns: u64) -> u64 {
    loop {
        let now = monotonic_ns();
        if now >= t_ns {
            return now;
        }
        std::hint::spin_loop();
    }
}

/// Adaptive "sleep then spin" waiter. It sleeps (absolute) until `deadline − margin`, then
/// spins. The margin follows the observed wake-up overshoot of `clock_nanosleep` on this
/// machine: the 95th percentile of the last 128 overshoots plus a 5 µs guard, clamped to
/// `[min, max]`. Rare, huge overshoots (the thread was preempted) cannot be fixed by spinning
/// and are deliberately not chased: a decaying maximum would spin for every request after one.
#[derive(Debug, Clone)]
pub struct PreciseWaiter {
    ring: Vec<u64>,
    next: usize,
    filled: usize,
    margin_ns: u64,
    min_margin_ns: u64,
    max_margin_ns: u64,
}

impl Default for PreciseWaiter {
    /// Spin 30–250 µs. The cap matters on a busy machine: wake-ups that are milliseconds late
    /// come from the scheduler, not the timer, and spinning longer would only add to the load.
    fn default() -> Self {
        Self::new(30_000, 250_000)
    }
}

const RING: usize = 128;

impl PreciseWaiter {
    pub fn new(min_margin_ns: u64, max_margin_ns: u64) -> Self {
        PreciseWaiter {
            ring: vec![0; RING],
            next: 0,
            filled: 0,
            margin_ns: (min_margin_ns * 2).min(max_margin_ns),
            min_margin_ns,
            max_margin_ns,
        }
    }

    /// Spin margin used for the next wait, ns.
    pub fn margin_ns(&self) -> u64 {
        self.margin_ns
    }

    fn observe(&mut self, overshoot_ns: u64) {
        self.ring[self.next] = overshoot_ns;
        self.next = (self.next + 1) % RING;
        self.filled = (self.filled + 1).min(RING);
        // Re-estimate every 16 wake-ups (a sort of 128 values is ~1 µs).
        if self.next % 16 == 0 {
            let mut v = self.ring[..self.filled].to_vec();
            v.sort_unstable();
            let p95 = v[(v.len() - 1) * 95 / 100];
            self.margin_ns = (p95 + 5_000).clamp(self.min_margin_ns, self.max_margin_ns);
        }
    }

    /// Waits until `deadline_ns`. `keep_waiting` is polled at least every `slice_ns` while
    /// sleeping; when it returns false the wait is abandoned and `None` is returned. Returns the
    /// time at which the wait ended (≥ deadline).
    pub fn wait_until(
        &mut self,
        deadline_ns: u64,
        slice_ns: u64,
        mut keep_waiting: impl FnMut() -> bool,
    ) -> Option<u64> {
        loop {
            let now = monotonic_ns();
            if now >= deadline_ns {
                return Some(now);
            }
            let margin = self.margin_ns;
            if deadline_ns - now <= margin {
                return Some(spin_until(deadline_ns));
            }
            let wake = (deadline_ns - margin).min(now.saturating_add(slice_ns));
            sleep_until_abs(wake);
            let woke = monotonic_ns();
            if wake == deadline_ns - margin {
                self.observe(woke.saturating_sub(wake));
            }
            if !keep_waiting() {
                return None;
            }
        }
    }
}

/// User + system CPU time of this process (all threads), ns.
pub fn process_cpu_ns() -> u64 {
    // SAFETY: getrusage writes into the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Wall-clock Unix time, ms (for humans only).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_wait_never_returns_early() {
        set_thread_timerslack_ns(1);
        let mut w = PreciseWaiter::default();
        for k in 1..20u64 {
            let d = monotonic_ns() + k * 200_000;
            let t = w.wait_until(d, 10_000_000, || true).unwrap();
            assert!(t >= d);
        }
    }

    #[test]
    fn an_unbounded_slice_still_sleeps() {
        // Regression: `now + u64::MAX` wrapped and turned the sleep into a spin.
        let thread_cpu = || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: writes into our timespec.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
        };
        let mut w = PreciseWaiter::default();
        let c0 = thread_cpu();
        let d = monotonic_ns() + 200_000_000;
        w.wait_until(d, u64::MAX, || true).unwrap();
        assert!(thread_cpu() - c0 < 100_000_000, "spun instead of sleeping");
    }

    #[test]
    fn wait_can_be_abandoned() {
        let mut w = PreciseWaiter::default();
        let d = monotonic_ns() + 5_000_000_000;
        let t0 = monotonic_ns();
        assert_eq!(w.wait_until(d, 1_000_000, || false), None);
        assert!(monotonic_ns() - t0 < 1_000_000_000);
    }

    #[test]
    fn cpu_time_advances() {
        let a = process_cpu_ns();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(process_cpu_ns() > a);
    }
}
