//! A free port for the sim sweeps of the run_sim and run_slots tests.

/// A port in 22000–32099: below the kernel's ephemeral range (Linux: 32768–60999) and above
/// the launch contract's fixed bases (vLLM's 21000–21119 for two slots, Mooncake, NIXL,
/// LMCache), free together with its slot-1 twin (+100, the default `port_stride`). A port
/// from `127.0.0.1:0` is an ephemeral one, which the client connections of concurrently running
/// tests draw from too, so it (or slot 1's) could be taken between this check and the sweep (seen once in run_slots:
/// "port … is already in use … slot 1 (GPU 1) needs it"). Each call tries another candidate
/// (a per-process start, then a stride), so parallel tests do not pick the same one.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(7919);
    let free = |q: u16| std::net::TcpListener::bind(("127.0.0.1", q)).is_ok();
    loop {
        let k = start.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed).wrapping_mul(211));
        let p = 22000 + (k % 10000) as u16;
        if free(p) && free(p + 100) {
            return p;
        }
    }
}
