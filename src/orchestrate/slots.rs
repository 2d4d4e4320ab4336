//! GPU slots of one host: what each slot owns. Slot s gets its own `CUDA_VISIBLE_DEVICES`,
//! every port of the launch contract at base + s × `port_stride` (API, vLLM's internal range,
//! Mooncake bootstrap, NIXL side channel, LMCache's internal API), its own vLLM RPC/IPC
//! directory and compile cache, and a CPU set (the host's CPUs split between slots) that its
//! server's process group and its collector are pinned to. Which launch runs on which slot is
//! decided in [`super::plan`]; the threads that run them are in [`super::runner`].
//!
//! Length: 486 lines of code; the rest of the file is its unit tests (kept next to the rules).

use std::path::PathBuf;
use std::process::Command;

use ctax_schema::Placement;

use super::profile::Profile;

/// One port range a slot owns: `count` ports from `first`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PortRange {
    pub name: &'static str,
    pub first: u16,
    pub count: u16,
}

impl PortRange {
    fn last(&self) -> u16 {
        self.first + self.count - 1
    }
    fn overlaps(&self, o: &PortRange) -> bool {
        self.first <= o.last() && o.first <= self.last()
    }
}

/// Everything one slot owns.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    pub index: usize,
    pub slots: usize,
    /// `CUDA_VISIBLE_DEVICES` for the server (`None`: left as it is).
    pub cuda: Option<String>,
    pub gpu_index: Option<u32>,
    pub gpu_uuid: Option<String>,
    /// CPUs this slot's server and collector run on.
    pub cpus: Vec<usize>,
    pub ports: Vec<PortRange>,
    /// Environment for this slot's launch script (on top of the sweep's).
    pub env: Vec<(String, String)>,
    pub shard: Option<String>,
}

impl Slot {
    fn port(&self, name: &str) -> u16 {
        self.ports
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.first)
            .expect("every slot has every port range")
    }

    pub(crate) fn api_port(&self) -> u16 {
        self.port("api")
    }

    /// `slot 1 (GPU 1)` for messages.
    pub(crate) fn label(&self) -> String {
        match &self.cuda {
            Some(g) => format!("slot {} (GPU {g})", self.index),
            None => format!("slot {}", self.index),
        }
    }

    pub(crate) fn placement(&self, calibration: bool) -> Placement {
        Placement {
            slot: self.index as u32,
            slots: self.slots as u32,
            cuda_visible_devices: self.cuda.clone(),
            gpu_index: self.gpu_index,
            gpu_uuid: self.gpu_uuid.clone(),
            cpuset: Some(cpulist(&self.cpus)),
            ports: self
                .ports
                .iter()
                .map(|p| (p.name.to_owned(), p.first))
                .collect(),
            shard: self.shard.clone(),
            calibration,
            host: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|s| s.trim().to_owned()),
            machine_id: machine_id(),
        }
    }
}

/// This machine's identity for the analysis' machine blocks: the kernel's boot id (one boot of
/// one machine; a leased GPU machine is a new boot each time). `None` where it cannot be read.
pub(crate) fn machine_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Inputs that do not come from the profile.
#[derive(Debug, Clone, Default)]
pub(crate) struct SlotOptions {
    /// `--gpus` (overrides the profile's `slots.gpus`).
    pub gpus: Option<Vec<String>>,
    /// Added to every port (`--port-offset`: several sweeps on one host, e.g. two Slurm array
    /// tasks on one node).
    pub port_offset: u16,
    /// `K/N` of `--shard`, recorded in each placement.
    pub shard: Option<String>,
}

/// The slots of this sweep. `env` is the sweep's launch environment (its `CTAX_*` values give
/// the base ports); `gpus_seen` is what nvidia-smi lists (see [`query_gpus`]).
pub(crate) fn build(
    p: &Profile,
    opts: &SlotOptions,
    env: &[(String, String)],
    allowed_cpus: &[usize],
    gpus_seen: &[(u32, String)],
) -> anyhow::Result<Vec<Slot>> {
    let gpus: Vec<String> = opts.gpus.clone().unwrap_or_else(|| p.slots.gpus.clone());
    let n = gpus.len().max(1);
    anyhow::ensure!(n <= 64, "at most 64 slots ({n} GPUs given)");
    for (i, g) in gpus.iter().enumerate() {
        anyhow::ensure!(
            !g.trim().is_empty() && !g.contains(','),
            "--gpus entry {i} ({g:?}): one device per slot (an index or a UUID)"
        );
        if gpus[..i].contains(g) {
            anyhow::bail!("--gpus lists GPU {g} twice: one slot per GPU");
        }
    }
    let env_val = |k: &str| {
        env.iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
    };
    let base = |k: &str, default: u16| -> anyhow::Result<u16> {
        match env_val(k) {
            Some(v) => v
                .parse()
                .map_err(|_| anyhow::anyhow!("{k}={v} in the profile is not a port number")),
            None => Ok(default),
        }
    };
    let tp: u16 = env_val("CTAX_TP")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let stride = p.slots.port_stride;
    // (name, base, count): the launch contract's ports (launch/common.sh).
    let bases = [
        ("api", p.server.port, 1u16),
        ("vllm_port", p.slots.vllm_port, 20),
        (
            "mooncake_bootstrap",
            base("CTAX_MOONCAKE_BOOTSTRAP_PORT", 8998)?,
            1,
        ),
        ("nixl_side_channel", base("CTAX_NIXL_PORT", 5600)?, tp),
        (
            "lmcache_internal_api",
            base("CTAX_LMCACHE_INTERNAL_API_PORT", 6999)?,
            1 + tp,
        ),
    ];
    if n > 1 {
        for (name, _, count) in bases {
            anyhow::ensure!(
                count <= stride,
                "slots.port_stride = {stride} is smaller than the {count} ports of `{name}`"
            );
        }
    }
    let cpusets: Vec<Vec<usize>> = if p.slots.cpusets.is_empty() {
        split_cpus(allowed_cpus, n)?
    } else {
        anyhow::ensure!(
            p.slots.cpusets.len() == n,
            "slots.cpusets has {} entries for {n} slots",
            p.slots.cpusets.len()
        );
        p.slots
            .cpusets
            .iter()
            .map(|s| parse_cpulist(s))
            .collect::<anyhow::Result<_>>()?
    };
    let rpc_root = rpc_root();
    let mut slots = Vec::with_capacity(n);
    for (s, cpus) in cpusets.into_iter().enumerate() {
        let mut ports = Vec::new();
        for (name, b, count) in bases {
            let first = u32::from(b) + u32::from(opts.port_offset) + s as u32 * u32::from(stride);
            anyhow::ensure!(
                first + u32::from(count) - 1 <= u32::from(u16::MAX),
                "slot {s}: port range `{name}` would end above 65535 (base {b}, stride {stride}, offset {})",
                opts.port_offset
            );
            ports.push(PortRange {
                name,
                first: first as u16,
                count,
            });
        }
        let cuda = gpus.get(s).cloned();
        let (gpu_index, gpu_uuid) = match &cuda {
            Some(g) => resolve_gpu(g, gpus_seen)?,
            // One slot without --gpus: the GPU is known only when exactly one is visible.
            None => match (visible_from_env(), gpus_seen) {
                (Some(v), _) if v.split(',').count() == 1 => resolve_gpu(&v, gpus_seen)?,
                (None, [(i, u)]) => (Some(*i), Some(u.clone())),
                _ => (None, None),
            },
        };
        let mut env = vec![
            ("CTAX_PORT".to_owned(), ports[0].first.to_string()),
            (
                "CTAX_MOONCAKE_BOOTSTRAP_PORT".to_owned(),
                ports[2].first.to_string(),
            ),
            ("CTAX_NIXL_PORT".to_owned(), ports[3].first.to_string()),
            (
                "CTAX_LMCACHE_INTERNAL_API_PORT".to_owned(),
                ports[4].first.to_string(),
            ),
            ("CTAX_VLLM_PORT".to_owned(), ports[1].first.to_string()),
        ];
        if let Some(g) = &cuda {
            // Numeric ids in nvidia-smi's (PCI) order, whatever CUDA's default order is.
            env.push(("CUDA_VISIBLE_DEVICES".into(), g.clone()));
            env.push(("CUDA_DEVICE_ORDER".into(), "PCI_BUS_ID".into()));
        }
        if n > 1 {
            // Per-slot IPC directory (vLLM's and LMCache's ZMQ sockets) and compile cache (two
            // servers compiling the same graph must not write one cache file at once).
            env.push((
                "CTAX_RPC_DIR".into(),
                rpc_root.join(format!("s{s}")).display().to_string(),
            ));
            if env_val("VLLM_CACHE_ROOT").is_none() && std::env::var_os("VLLM_CACHE_ROOT").is_none()
            {
                env.push((
                    "VLLM_CACHE_ROOT".into(),
                    vllm_cache_root()
                        .join(format!("ctax-slot{s}"))
                        .display()
                        .to_string(),
                ));
            }
            if p.server.device == "cpu" && env_val("VLLM_CPU_OMP_THREADS_BIND").is_none() {
                env.push(("VLLM_CPU_OMP_THREADS_BIND".into(), cpulist(&cpus)));
            }
        }
        slots.push(Slot {
            index: s,
            slots: n,
            cuda,
            gpu_index,
            gpu_uuid,
            cpus,
            ports,
            env,
            shard: opts.shard.clone(),
        });
    }
    check_disjoint(&slots)?;
    Ok(slots)
}

/// This sweep's IPC directories live under here (`<tmp>/ctax-rpc-<pid>/s<slot>`).
pub(crate) fn rpc_root() -> PathBuf {
    std::env::temp_dir().join(format!("ctax-rpc-{}", std::process::id()))
}

fn vllm_cache_root() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("vllm")
}

fn visible_from_env() -> Option<String> {
    std::env::var("CUDA_VISIBLE_DEVICES")
        .ok()
        .filter(|v| !v.trim().is_empty())
}

/// No two port ranges of any slots overlap (a clear error naming both otherwise).
fn check_disjoint(slots: &[Slot]) -> anyhow::Result<()> {
    let all: Vec<(usize, &PortRange)> = slots
        .iter()
        .flat_map(|s| s.ports.iter().map(move |p| (s.index, p)))
        .collect();
    for (i, (sa, a)) in all.iter().enumerate() {
        for (sb, b) in &all[i + 1..] {
            anyhow::ensure!(
                !a.overlaps(b),
                "port ranges overlap: slot {sa} `{}` {}-{} and slot {sb} `{}` {}-{}; change server.port, slots.port_stride or the connector base ports",
                a.name,
                a.first,
                a.last(),
                b.name,
                b.first,
                b.last()
            );
        }
    }
    Ok(())
}

/// Every port of every slot is free on this host (nothing listens, and it can be bound on all
/// interfaces); the first busy one is a clear error. Called before anything starts. With
/// `api_only` (simulated servers, which open nothing else) only the API ports are checked.
pub(crate) fn check_ports_free(slots: &[Slot], host: &str, api_only: bool) -> anyhow::Result<()> {
    for s in slots {
        for r in s.ports.iter().filter(|r| !api_only || r.name == "api") {
            for port in r.first..=r.last() {
                // The API binds `host`; the connector and internal ports bind all interfaces.
                let free = super::http::port_free(host, port)
                    && (r.name == "api" || std::net::TcpListener::bind(("0.0.0.0", port)).is_ok());
                anyhow::ensure!(
                    free,
                    "port {port} is already in use on {host}: {} needs it for `{}` ({}-{}); stop what holds it, or move the sweep's ports (server.port, slots.port_stride, --port-offset)",
                    s.label(),
                    r.name,
                    r.first,
                    r.last()
                );
            }
        }
    }
    Ok(())
}

/// (index, uuid) of every GPU, from `nvidia-smi --query-gpu=index,uuid --format=csv,noheader`;
/// empty where nvidia-smi is absent or fails (CPU and simulated sweeps).
pub(crate) fn query_gpus() -> Vec<(u32, String)> {
    query_gpu_field("uuid")
}

/// (index, name) of every GPU (`NVIDIA H200`), as [`query_gpus`].
pub(crate) fn query_gpu_names() -> Vec<(u32, String)> {
    query_gpu_field("name")
}

fn query_gpu_field(field: &str) -> Vec<(u32, String)> {
    let Ok(out) = Command::new("nvidia-smi")
        .args([
            &format!("--query-gpu=index,{field}"),
            "--format=csv,noheader",
        ])
        .output()
    else {
        return Vec::new();
    };
    if !out.status.success() {
        return Vec::new();
    }
    parse_gpu_query(&String::from_utf8_lossy(&out.stdout))
}

fn parse_gpu_query(text: &str) -> Vec<(u32, String)> {
    text.lines()
        .filter_map(|l| {
            let (i, u) = l.split_once(',')?;
            Some((i.trim().parse().ok()?, u.trim().to_owned()))
        })
        .collect()
}

/// (index, uuid) of a `CUDA_VISIBLE_DEVICES` entry: an index or a UUID. A GPU that nvidia-smi
/// does not list is an error when nvidia-smi lists any; without nvidia-smi both are `None`.
fn resolve_gpu(id: &str, seen: &[(u32, String)]) -> anyhow::Result<(Option<u32>, Option<String>)> {
    if seen.is_empty() {
        // Without nvidia-smi the index is not known for sure either (what CUDA calls device 1
        // need not be nvidia-smi's 1): record nothing rather than a guess.
        return Ok((None, None));
    }
    let found = seen
        .iter()
        .find(|(i, u)| id.parse::<u32>().ok() == Some(*i) || u == id);
    match found {
        Some((i, u)) => Ok((Some(*i), Some(u.clone()))),
        None if id.starts_with("MIG-") => Ok((None, None)),
        None => anyhow::bail!(
            "GPU {id} is not on this host (nvidia-smi lists {})",
            seen.iter()
                .map(|(i, u)| format!("{i} {u}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The CPUs this process may run on (`sched_getaffinity`).
pub(crate) fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes into the set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// `n` contiguous parts of `cpus` (sorted), sizes differing by at most one (the first parts
/// take the remainder).
fn split_cpus(cpus: &[usize], n: usize) -> anyhow::Result<Vec<Vec<usize>>> {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    anyhow::ensure!(
        v.len() >= n,
        "{n} slots need at least {n} CPUs; this process may use {} ({})",
        v.len(),
        cpulist(&v)
    );
    let (q, r) = (v.len() / n, v.len() % n);
    let mut out = Vec::with_capacity(n);
    let mut at = 0;
    for i in 0..n {
        let take = q + usize::from(i < r);
        out.push(v[at..at + take].to_vec());
        at += take;
    }
    Ok(out)
}

/// `0-3,8,10-11` → [0, 1, 2, 3, 8, 10, 11].
fn parse_cpulist(s: &str) -> anyhow::Result<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || anyhow::anyhow!("bad CPU list {s:?} (expected e.g. `0-7,16-23`)");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                anyhow::ensure!(a <= b, "bad CPU range {part:?} in {s:?}");
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    anyhow::ensure!(!out.is_empty(), "empty CPU list {s:?}");
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// [0, 1, 2, 3, 8, 10, 11] → `0-3,8,10-11`.
fn cpulist(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// A `cpu_set_t` for `sched_setaffinity` (built before fork: the pre-exec hook only calls the
/// syscall).
pub(crate) fn cpu_set(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain data; CPU_SET only writes inside the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            if c < libc::CPU_SETSIZE as usize {
                libc::CPU_SET(c, &mut set);
            }
        }
        set
    }
}

/// Pins the process about to exec (pre-exec hook of `Command`) to `set`; children inherit it.
pub(crate) fn pin_on_exec(cmd: &mut Command, set: libc::cpu_set_t) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook only calls sched_setaffinity, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn profile(gpus: &[&str]) -> Profile {
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut p = super::super::profile::load("sim", repo).unwrap().profile;
        p.server.port = 8000;
        p.slots.gpus = gpus.iter().map(|s| (*s).to_owned()).collect();
        p
    }

    #[test]
    fn cpulists_round_trip() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(cpulist(&[11, 0, 1, 2, 3, 8, 10]), "0-3,8,10-11");
        assert_eq!(cpulist(&[5]), "5");
        assert!(parse_cpulist("3-1").is_err());
        assert!(parse_cpulist("a").is_err());
    }

    #[test]
    fn cpus_split_into_contiguous_near_equal_parts() {
        let cpus: Vec<usize> = (0..10).collect();
        let parts = split_cpus(&cpus, 3).unwrap();
        // 10 = 4 + 3 + 3, in order.
        assert_eq!(parts, vec![vec![0, 1, 2, 3], vec![4, 5, 6], vec![7, 8, 9]]);
        assert!(split_cpus(&[0], 2).is_err());
    }

    #[test]
    fn slots_get_disjoint_ports_and_their_own_gpu_and_cpus() {
        let p = profile(&["0", "1"]);
        let seen = parse_gpu_query("0, GPU-aaa\n1, GPU-bbb\n");
        let cpus: Vec<usize> = (0..16).collect();
        let s = build(&p, &SlotOptions::default(), &[], &cpus, &seen).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].api_port(), 8000);
        assert_eq!(s[1].api_port(), 8100);
        assert_eq!(s[1].port("mooncake_bootstrap"), 9098);
        assert_eq!(s[1].port("nixl_side_channel"), 5700);
        assert_eq!(s[1].port("vllm_port"), 21100);
        assert_eq!(s[1].port("lmcache_internal_api"), 7099);
        assert_eq!(
            (s[1].gpu_index, s[1].gpu_uuid.as_deref()),
            (Some(1), Some("GPU-bbb"))
        );
        assert_eq!(cpulist(&s[0].cpus), "0-7");
        assert_eq!(cpulist(&s[1].cpus), "8-15");
        let env: BTreeMap<_, _> = s[1].env.iter().cloned().collect();
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "1");
        assert_eq!(env["CTAX_PORT"], "8100");
        assert_eq!(env["CTAX_VLLM_PORT"], "21100");
        assert!(env["CTAX_RPC_DIR"].ends_with("/s1"));
        // UUIDs select too; a GPU nvidia-smi does not list is an error before anything starts.
        let s = build(
            &profile(&["GPU-bbb"]),
            &SlotOptions::default(),
            &[],
            &cpus,
            &seen,
        )
        .unwrap();
        assert_eq!(s[0].gpu_index, Some(1));
        let e = build(
            &profile(&["0", "7"]),
            &SlotOptions::default(),
            &[],
            &cpus,
            &seen,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("GPU 7 is not on this host"), "{e}");
        let e = build(
            &profile(&["0", "0"]),
            &SlotOptions::default(),
            &[],
            &cpus,
            &seen,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("twice"), "{e}");
    }

    #[test]
    fn no_nvidia_smi_records_null_and_never_fails() {
        let cpus: Vec<usize> = (0..4).collect();
        let s = build(
            &profile(&["0", "1"]),
            &SlotOptions::default(),
            &[],
            &cpus,
            &[],
        )
        .unwrap();
        assert_eq!((s[1].gpu_index, s[1].gpu_uuid.as_deref()), (None, None));
        assert_eq!(s[1].cuda.as_deref(), Some("1"));
    }

    #[test]
    fn overlapping_ranges_and_offsets() {
        let cpus: Vec<usize> = (0..4).collect();
        // API base 8900 + 100 = 9000 stays clear of Mooncake's 8998/9098; base 8998 collides.
        let mut p = profile(&["0", "1"]);
        p.server.port = 8998;
        let e = build(&p, &SlotOptions::default(), &[], &cpus, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("port ranges overlap"), "{e}");
        let opts = SlotOptions {
            port_offset: 1000,
            ..Default::default()
        };
        let s = build(&profile(&["0", "1"]), &opts, &[], &cpus, &[]).unwrap();
        assert_eq!(s[1].api_port(), 9100);
        // The profile's connector base ports move every slot's range.
        let env = vec![("CTAX_NIXL_PORT".to_owned(), "15600".to_owned())];
        let s = build(
            &profile(&["0", "1"]),
            &SlotOptions::default(),
            &env,
            &cpus,
            &[],
        )
        .unwrap();
        assert_eq!(s[1].port("nixl_side_channel"), 15700);
    }

    #[test]
    fn a_busy_port_of_any_range_is_named() {
        let cpus: Vec<usize> = (0..4).collect();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let busy = l.local_addr().unwrap().port();
        // Put slot 1's vLLM range on the busy port.
        let mut p = profile(&["0", "1"]);
        p.server.port = 1024 + (busy % 500);
        p.slots.vllm_port = busy - p.slots.port_stride;
        let s = build(&p, &SlotOptions::default(), &[], &cpus, &[]).unwrap();
        let e = check_ports_free(&s, "127.0.0.1", false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("port {busy} is already in use")) && e.contains("vllm_port"),
            "{e}"
        );
    }
}
