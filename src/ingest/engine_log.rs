//! What a connector changed in the engine, read from the server's own log
//! (`vllm_stdout.log` + `vllm_stderr.log` of a run directory).
//!
//! A KV connector is not only a pair of callbacks: merely configuring one changes how vLLM
//! builds the engine. These facts are the context of a tax (H3's framework-vs-implementation
//! reading), so the report shows them next to it. Each rule matches a message that vLLM 0.26 /
//! 0.32 or a connector package really prints (the source line is named at each rule); the tests
//! feed real lines from H200 and CPU server logs.
//!
//! | fact | evidence |
//! |---|---|
//! | KV-cache layout | `<Connector> setting KV cache layout to HND …` (Mooncake, NIXL), `Connectors do not specify a kv cache layout, defaulting to NHD.`, `Using HND KV cache layout.` (0.3x); no connector → vLLM's default |
//! | hybrid KV-cache manager off | `Turning off hybrid kv cache manager because …` |
//! | connectors created | `Creating v1 connector with name: X and engine_id: …` |
//! | compiled extensions missing | `… compiled extension not found …` (LMCache's `cuda_ops`) |
//! | JIT compiles while serving | `Triton kernel JIT compilation during inference: <kernel>` (cold-start spikes) |
//! | warnings | every `WARNING` line, grouped by source location, with a count |
//! | engine died | the exception line after `EngineCore encountered a fatal error.` / `EngineCore failed to start.` (vllm/v1/engine/core.py) |
//! | KV stored by LMCache | `Stored N out of total M tokens. size: X GB, cost Y ms, …` (LMCache 0.5.6 cache_engine.py:588): the connector moves KV to its own storage even with no consumer; each store's line time (the server's local clock) goes to the report's slow episodes |
//! | log flood | the source location that wrote the most lines (any level), when ≥ [`LOG_FLOOD_LINES`]: writing them costs the engine's own process time (LMCache 0.5.6 logs `Auto-selected backend [cuda]` ~1 M times in one launch) |
//!
//! The logs are read line by line (plain, or `.log.zst` as `ctax archive` leaves a large one),
//! never whole into memory: one LMCache launch wrote 210 MB.
//!
//! Length: ~400 lines of code (one rule per fact, each citing its source line); the rest of the
//! file is its unit tests on real log lines, kept next to the rules they check.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Engine facts of one launch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineFacts {
    /// `HND` / `NHD` as the log states it; `None` when the log says nothing (no connector on
    /// vLLM 0.26: the attention backend's default, NHD).
    pub kv_cache_layout: Option<String>,
    /// Who set the layout and why, as logged (e.g. `MooncakeConnector setting KV cache layout
    /// to HND for …`).
    pub kv_cache_layout_source: Option<String>,
    /// The hybrid KV-cache manager was turned off because of the connector.
    pub hybrid_kv_cache_manager_off: bool,
    /// Connector classes the engine created (each once, in log order; MultiConnector's children
    /// appear too).
    pub connectors: Vec<String>,
    /// Compiled extensions a package reported missing (it runs on a slower fallback).
    pub missing_extensions: Vec<String>,
    /// Triton kernels JIT-compiled while requests were being served (latency spikes of a cold
    /// server), in log order with duplicates kept.
    pub jit_during_inference: Vec<String>,
    /// WARNING lines grouped by source location (`file.py:line`, or the message head when the
    /// line has none): count and the first message (control characters removed, ≤ 240 chars).
    pub warnings: BTreeMap<String, WarningGroup>,
    /// The exception that killed the engine (`NotImplementedError: …`), if it died.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fatal_error: Option<String>,
    /// KV that LMCache stored (moved out of the GPU), from its per-store log lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_stores: Option<KvStores>,
    /// Lines in the two logs.
    #[serde(default)]
    pub log_lines: u64,
    /// The source location that wrote the most lines, when it wrote ≥ [`LOG_FLOOD_LINES`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_flood: Option<LogSource>,
    /// Each LMCache store with the time its line was logged, for the report's slow episodes
    /// ([`crate::analysis::episodes`]); not written to summary.json (hundreds per launch).
    #[serde(skip)]
    pub store_events: Vec<StoreEvent>,
}

/// One LMCache store line: when it was logged and what it moved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StoreEvent {
    /// The line's timestamp as written (`[2026-12-04 21:06:04,148]`, the server's local time),
    /// in ms since 1970-01-01 00:00 of that clock: subtract the host's UTC offset
    /// ([`super::env::utc_offset_s`]) for Unix time.
    pub local_ms: i64,
    pub gb: f64,
    pub cost_ms: f64,
}

impl StoreEvent {
    /// GB/s of the store.
    pub fn gbps(&self) -> f64 {
        self.gb / self.cost_ms * 1000.0
    }
}

/// A launch whose single source location wrote this many lines is flagged: at that volume the
/// logging itself is work the engine does while serving.
pub(crate) const LOG_FLOOD_LINES: u64 = 100_000;

/// LMCache's stores of one launch: how many, how much, how long each took (numpy-linear
/// percentiles of the logged `cost`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KvStores {
    pub count: u64,
    pub tokens: u64,
    pub gb: f64,
    pub cost_ms_p50: f64,
    pub cost_ms_p90: f64,
}

/// One source location of a log and how many lines it wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogSource {
    pub location: String,
    pub count: u64,
    /// Its first message (control characters removed, ≤ 240 chars).
    pub first: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarningGroup {
    pub count: u32,
    pub first: String,
}

impl EngineFacts {
    /// One line for a table: what differs from a plain engine.
    pub(crate) fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(e) = &self.fatal_error {
            parts.push(format!("ENGINE DIED: {e}"));
        }
        if let Some(l) = &self.kv_cache_layout {
            parts.push(format!("KV layout {l}"));
        }
        if self.hybrid_kv_cache_manager_off {
            parts.push("hybrid KV-cache manager off".into());
        }
        for m in &self.missing_extensions {
            parts.push(format!("missing compiled extension: {m}"));
        }
        if !self.jit_during_inference.is_empty() {
            parts.push(format!(
                "{} Triton JIT compiles while serving",
                self.jit_during_inference.len()
            ));
        }
        if let Some(k) = &self.kv_stores {
            parts.push(format!(
                "KV stored by LMCache: {} stores, {:.1} GB, {:.0} ms p50 / {:.0} ms p90 each",
                k.count, k.gb, k.cost_ms_p50, k.cost_ms_p90
            ));
        }
        if let Some(f) = &self.log_flood {
            parts.push(format!(
                "log flood: {} lines from {} ({})",
                f.count,
                f.location,
                head(&f.first)
            ));
        }
        if parts.is_empty() {
            "no engine change logged".into()
        } else {
            parts.join("; ")
        }
    }
}

impl EngineFacts {
    /// One line for a config over its launches: each fact once, with "(k of n launches)" where
    /// only some launches logged it, and counts as their range over the launches that logged
    /// them (`1645–1770 stores`), so launches that differ only in counts read as one engine.
    /// One launch: [`EngineFacts::summary`].
    pub(crate) fn summary_over(all: &[&EngineFacts]) -> String {
        let n = all.len();
        match n {
            0 => return String::new(),
            1 => return all[0].summary(),
            _ => {}
        }
        let of = |k: usize| {
            if k == n {
                String::new()
            } else {
                format!(" ({k} of {n} launches)")
            }
        };
        let span = |v: &[f64], digits: usize| {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let f = |x: f64| format!("{x:.digits$}");
            if f(lo) == f(hi) {
                f(lo)
            } else {
                format!("{}–{}", f(lo), f(hi))
            }
        };
        // Distinct values in first-seen order, with how many launches logged each.
        fn tally<'a>(items: impl Iterator<Item = &'a str>) -> Vec<(&'a str, usize)> {
            let mut v: Vec<(&str, usize)> = Vec::new();
            for it in items {
                match v.iter_mut().find(|(x, _)| *x == it) {
                    Some((_, k)) => *k += 1,
                    None => v.push((it, 1)),
                }
            }
            v
        }
        let mut parts = Vec::new();
        for (e, k) in tally(all.iter().filter_map(|f| f.fatal_error.as_deref())) {
            parts.push(format!("ENGINE DIED: {e}{}", of(k)));
        }
        for (l, k) in tally(all.iter().filter_map(|f| f.kv_cache_layout.as_deref())) {
            parts.push(format!("KV layout {l}{}", of(k)));
        }
        let off = all.iter().filter(|f| f.hybrid_kv_cache_manager_off).count();
        if off > 0 {
            parts.push(format!("hybrid KV-cache manager off{}", of(off)));
        }
        for (m, k) in tally(
            all.iter()
                .flat_map(|f| f.missing_extensions.iter().map(String::as_str)),
        ) {
            parts.push(format!("missing compiled extension: {m}{}", of(k)));
        }
        let jit: Vec<f64> = all
            .iter()
            .map(|f| f.jit_during_inference.len() as f64)
            .filter(|c| *c > 0.0)
            .collect();
        if !jit.is_empty() {
            parts.push(format!(
                "{} Triton JIT compiles while serving{}",
                span(&jit, 0),
                of(jit.len())
            ));
        }
        let stores: Vec<&KvStores> = all.iter().filter_map(|f| f.kv_stores.as_ref()).collect();
        if !stores.is_empty() {
            let col = |g: fn(&KvStores) -> f64| stores.iter().map(|k| g(k)).collect::<Vec<f64>>();
            parts.push(format!(
                "KV stored by LMCache: {} stores, {} GB, {} ms p50 / {} ms p90 each{}",
                span(&col(|k| k.count as f64), 0),
                span(&col(|k| k.gb), 1),
                span(&col(|k| k.cost_ms_p50), 0),
                span(&col(|k| k.cost_ms_p90), 0),
                of(stores.len())
            ));
        }
        for (loc, k) in tally(
            all.iter()
                .filter_map(|f| f.log_flood.as_ref().map(|l| l.location.as_str())),
        ) {
            let floods: Vec<&LogSource> = all
                .iter()
                .filter_map(|f| f.log_flood.as_ref())
                .filter(|l| l.location == loc)
                .collect();
            let counts: Vec<f64> = floods.iter().map(|l| l.count as f64).collect();
            parts.push(format!(
                "log flood: {} lines from {loc} ({}){}",
                span(&counts, 0),
                head(&floods[0].first),
                of(k)
            ));
        }
        if parts.is_empty() {
            "no engine change logged".into()
        } else {
            parts.join("; ")
        }
    }
}

/// `str::find` of a literal through a searcher built once per call site: a `&str` pattern
/// builds its two-way searcher on every call, and the log scan calls it ~8 times per line on
/// logs of ~1 M lines (LMCache's store lines): ~10% of `ctax report` on the archive. A match of
/// a UTF-8 pattern in UTF-8 text starts on a char boundary, so the byte offset is a `str` one.
macro_rules! find {
    ($hay:expr, $pat:literal) => {{
        static F: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new($pat));
        F.find($hay.as_bytes())
    }};
}

/// Reads the two log files of a run directory, each plain or `.zst` (either may be missing),
/// line by line.
pub(crate) fn read_run(dir: &Path) -> Option<EngineFacts> {
    let mut p = Parser::default();
    let mut any = false;
    for name in ["vllm_stdout.log", "vllm_stderr.log"] {
        // `open_regular`, as for raw data: a FIFO or device named like a log never blocks.
        let reader: Box<dyn std::io::Read> =
            if let Ok(f) = super::jsonl::open_regular(&dir.join(name)) {
                Box::new(f)
            } else if let Ok(f) = super::jsonl::open_regular(&dir.join(format!("{name}.zst"))) {
                match zstd::stream::read::Decoder::new(f) {
                    Ok(d) => Box::new(d),
                    Err(_) => continue,
                }
            } else {
                continue;
            };
        any = true;
        let mut r = std::io::BufReader::with_capacity(1 << 16, reader);
        let mut buf = Vec::new();
        // A damaged archive ends the file where it breaks; the lines before it still count.
        while let Ok(n) = r.read_until(b'\n', &mut buf) {
            if n == 0 {
                break;
            }
            p.line(&String::from_utf8_lossy(&buf));
            buf.clear();
        }
    }
    any.then(|| p.finish())
}

/// Parses server log text (the tests' entry; `read_run` streams the files).
#[cfg(test)]
fn parse(text: &str) -> EngineFacts {
    let mut p = Parser::default();
    for raw in text.lines() {
        p.line(raw);
    }
    p.finish()
}

/// The line-by-line state of one launch's logs.
#[derive(Default)]
struct Parser {
    f: EngineFacts,
    /// `EngineCore encountered a fatal error` seen; the next exception line is the cause.
    after_fatal: bool,
    /// Lines per source location: (count, first message).
    by_source: HashMap<String, (u64, String)>,
    /// LMCache stores: (tokens, GB, cost ms) each.
    stores: Vec<(u64, f64, f64)>,
}

impl Parser {
    fn line(&mut self, raw: &str) {
        let line = clean(raw.trim_end_matches(['\n', '\r']));
        if line.trim().is_empty() {
            return;
        }
        self.f.log_lines += 1;
        // The line's prefix is parsed once: message, source location and warning all read it.
        let vllm = vllm_prefix(&line);
        let prefix = vllm.or_else(|| lmcache_prefix(&line));
        let msg = prefix.map_or(line.trim(), |(_, _, m)| m);
        // vllm/distributed/kv_transfer/kv_connector/v1/{mooncake,nixl}: "<X>Connector setting KV
        // cache layout to HND for better xfer performance." (0.26).
        // vllm/v1/attention/backends/utils.py (0.26): "`VLLM_KV_CACHE_LAYOUT` environment
        // variable detected. Setting KV cache layout to NHD." — the variable wins over any
        // connector's wish (the named `_nhd` variants set it).
        const LAYOUT_TO: usize = " setting KV cache layout to ".len();
        let set_to = find!(msg, " setting KV cache layout to ")
            .or_else(|| find!(msg, " Setting KV cache layout to "))
            .map(|i| &msg[i + LAYOUT_TO..]);
        if let Some(rest) = set_to {
            self.f.kv_cache_layout = Some(first_word(rest));
            self.f.kv_cache_layout_source = Some(msg.to_owned());
        } else if find!(
            msg,
            "Connectors do not specify a kv cache layout, defaulting to NHD"
        )
        .is_some()
        {
            // vllm/distributed/kv_transfer/kv_connector/utils.py (0.26), logged once.
            if self.f.kv_cache_layout.is_none() {
                self.f.kv_cache_layout = Some("NHD".into());
                self.f.kv_cache_layout_source = Some(msg.to_owned());
            }
        } else if let Some(rest) = msg.strip_prefix("Using ")
            && let Some(layout) = rest.strip_suffix(" KV cache layout.")
        {
            // vllm/v1/attention/backends/utils.py (0.3x): the layout actually chosen.
            self.f.kv_cache_layout = Some(layout.to_owned());
            self.f.kv_cache_layout_source = Some(msg.to_owned());
        }
        // vllm/config/vllm.py: "Turning off hybrid kv cache manager because `--kv-transfer-config`
        // selects a KV connector that does not support it. …"
        if msg.starts_with("Turning off hybrid kv cache manager") {
            self.f.hybrid_kv_cache_manager_off = true;
        }
        // vllm/distributed/kv_transfer/kv_connector/factory.py
        if let Some(rest) = msg.strip_prefix("Creating v1 connector with name: ") {
            let name = first_word(rest);
            if !self.f.connectors.contains(&name) {
                self.f.connectors.push(name);
            }
        }
        // LMCache 0.5.6 device_ops.py:129: "lmcache.cuda_ops compiled extension not found;
        // CudaDeviceOps stays on the torch baseline for all ops."
        if let Some(i) = find!(msg, " compiled extension not found") {
            let name = msg[..i]
                .rsplit(|c: char| c.is_whitespace())
                .next()
                .unwrap_or("")
                .to_owned();
            if !name.is_empty() && !self.f.missing_extensions.contains(&name) {
                self.f.missing_extensions.push(name);
            }
        }
        // vllm jit_monitor.py: "Triton kernel JIT compilation during inference: fused_moe_kernel. …"
        if let Some(rest) = msg.strip_prefix("Triton kernel JIT compilation during inference: ") {
            self.f
                .jit_during_inference
                .push(rest.split('.').next().unwrap_or(rest).trim().to_owned());
        }
        // vllm/v1/engine/core.py: "EngineCore encountered a fatal error." / "EngineCore failed
        // to start." followed by the traceback; its last line names the exception.
        if msg.starts_with("EngineCore encountered a fatal error")
            || msg.starts_with("EngineCore failed to start")
        {
            self.after_fatal = true;
        } else if self.after_fatal && self.f.fatal_error.is_none() && is_exception(msg) {
            self.f.fatal_error = Some(msg.chars().take(240).collect());
        }
        // LMCache 0.5.6 cache_engine.py:588: "[req_id=…] Stored 4096 out of total 4096 tokens.
        // size: 0.3750 GB, cost 308.2058 ms, throughput: …"
        if let Some(st) = store(msg) {
            self.stores.push(st);
            if let Some(local_ms) = lmcache_time(&line) {
                self.f.store_events.push(StoreEvent {
                    local_ms,
                    gb: st.1,
                    cost_ms: st.2,
                });
            }
        }
        // The source location: vLLM's `[file.py:N]`, or LMCache's trailing `(file.py:N:module)`.
        if let Some(loc) = prefix.map(|(_, l, _)| l).filter(|l| !l.is_empty()) {
            match self.by_source.get_mut(loc) {
                Some(e) => e.0 += 1,
                None => {
                    self.by_source
                        .insert(loc.to_owned(), (1, msg.chars().take(240).collect()));
                }
            }
        }
        if let Some((loc, text)) = warning(&line, vllm) {
            let g = self.f.warnings.entry(loc).or_default();
            g.count += 1;
            if g.first.is_empty() {
                g.first = text.chars().take(240).collect();
            }
        }
    }

    fn finish(mut self) -> EngineFacts {
        if !self.stores.is_empty() {
            let costs: Vec<f64> = self.stores.iter().map(|s| s.2).collect();
            let q = |p| crate::stats::quantile(&costs, p).unwrap_or(f64::NAN);
            self.f.kv_stores = Some(KvStores {
                count: self.stores.len() as u64,
                tokens: self.stores.iter().map(|s| s.0).sum(),
                gb: self.stores.iter().map(|s| s.1).sum(),
                cost_ms_p50: q(0.5),
                cost_ms_p90: q(0.9),
            });
        }
        self.f.log_flood = self
            .by_source
            .into_iter()
            .filter(|(_, (n, _))| *n >= LOG_FLOOD_LINES)
            .max_by(|a, b| a.1.0.cmp(&b.1.0).then_with(|| b.0.cmp(&a.0)))
            .map(|(location, (count, first))| LogSource {
                location,
                count,
                first,
            });
        self.f
    }
}

/// The timestamp of an LMCache-format line (`[2026-12-04 21:06:04,148] LMCache INFO: …`) as ms
/// since 1970-01-01 of the clock that wrote it.
fn lmcache_time(line: &str) -> Option<i64> {
    let end = find!(line, "] LMCache ")?;
    let open = line[..end].rfind('[')?;
    let t = &line[open + 1..end];
    let (date, time) = t.split_once(' ')?;
    let mut d = date.splitn(3, '-').map(|x| x.parse::<i64>().ok());
    let (y, mo, day) = (d.next()??, d.next()??, d.next()??);
    // Python's logging writes the milliseconds as `,%03d`.
    let (hms, ms) = time.split_once(',')?;
    if ms.len() != 3 || !ms.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs = super::env::seconds_of_day(hms)?;
    let ms: i64 = ms.parse().ok()?;
    if !(1..=12).contains(&mo) || !(1..=31).contains(&day) {
        return None;
    }
    Some((super::civil::days_from_civil(y, mo, day) * 86_400 + secs) * 1000 + ms)
}

/// (tokens stored, GB, cost ms) of an LMCache store line.
fn store(msg: &str) -> Option<(u64, f64, f64)> {
    let rest = &msg[find!(msg, "Stored ")? + "Stored ".len()..];
    let (tokens, rest) = rest.split_once(" out of total ")?;
    let tokens: u64 = tokens.trim().parse().ok()?;
    let gb = rest
        .split_once("size: ")?
        .1
        .split_once(" GB")?
        .0
        .trim()
        .parse()
        .ok()?;
    let cost = rest
        .split_once("cost ")?
        .1
        .split_once(" ms")?
        .0
        .trim()
        .parse()
        .ok()?;
    Some((tokens, gb, cost))
}

/// A Python exception line: `NotImplementedError: …`, `torch.OutOfMemoryError: …`,
/// `KeyboardInterrupt`.
fn is_exception(msg: &str) -> bool {
    let name = msg.split(": ").next().unwrap_or(msg).trim();
    !name.is_empty()
        && !name.contains(' ')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && ["Error", "Exception", "Exit", "Interrupt"]
            .iter()
            .any(|s| name.ends_with(s))
}

/// Control characters (ANSI colour codes included) removed; a log is evidence, not markup.
fn clean(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI sequence: ESC [ params final-byte
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
        } else if !c.is_control() || c == '\t' {
            out.push(c);
        }
    }
    out
}

/// (level, `file.py:N:module`, message) of an LMCache-format line
/// (`[time] LMCache LEVEL: msg (file.py:N:module)`, after colour codes are removed).
fn lmcache_prefix(line: &str) -> Option<(&str, &str, &str)> {
    let i = find!(line, "] LMCache ")? + "] LMCache ".len();
    let (level, rest) = line[i..].split_once(": ")?;
    if !matches!(level, "DEBUG" | "INFO" | "WARNING" | "ERROR" | "CRITICAL") {
        return None;
    }
    let rest = rest.trim_end();
    match rest.rfind(" (") {
        Some(j) if rest.ends_with(')') && rest[j..].contains(".py:") => {
            Some((level, &rest[j + 2..rest.len() - 1], rest[..j].trim()))
        }
        _ => Some((level, "", rest.trim())),
    }
}

/// (level, `file.py:N`, message) of a vLLM-format line
/// (`(Proc pid=N) LEVEL MM-DD HH:MM:SS [file.py:N] msg`).
fn vllm_prefix(line: &str) -> Option<(&str, &str, &str)> {
    let mut s = line.trim_start();
    if s.starts_with('(') {
        s = s[s.find(") ")? + 2..].trim_start();
    }
    let (level, rest) = s.split_once(' ')?;
    if !matches!(level, "DEBUG" | "INFO" | "WARNING" | "ERROR" | "CRITICAL") {
        return None;
    }
    let open = rest.find('[')?;
    let close = open + rest[open..].find("] ")?;
    Some((level, &rest[open + 1..close], rest[close + 2..].trim()))
}

/// A warning line: vLLM's format, Python's `warnings` (`file.py:N: XWarning: msg`), or LMCache's
/// (`[time] LMCache WARNING: msg (file.py:N:func)`). `vllm` is the line's [`vllm_prefix`].
/// Returns (location, message).
fn warning<'a>(
    line: &'a str,
    vllm: Option<(&'a str, &'a str, &'a str)>,
) -> Option<(String, String)> {
    if let Some((level, loc, msg)) = vllm {
        return (level == "WARNING").then(|| (loc.to_owned(), msg.to_owned()));
    }
    if let Some(i) = find!(line, " WARNING: ") {
        let msg = line[i + " WARNING: ".len()..].trim();
        let loc = msg
            .rfind(" (")
            .filter(|_| msg.ends_with(')'))
            .map(|j| msg[j + 2..msg.len() - 1].to_owned())
            .unwrap_or_else(|| head(msg));
        return Some((loc, msg.to_owned()));
    }
    // Python's warnings module: "/path/file.py:N: CategoryWarning: message"
    let mut parts = line.trim().splitn(3, ": ");
    if let (Some(loc), Some(category), Some(_)) = (parts.next(), parts.next(), parts.next())
        && loc.contains(".py:")
        && category.ends_with("Warning")
        && !category.contains(' ')
    {
        let loc = loc.rsplit('/').next().unwrap_or(loc);
        return Some((
            loc.to_owned(),
            line.trim()[line.trim().find(category)?..].to_owned(),
        ));
    }
    None
}

fn head(msg: &str) -> String {
    msg.split_whitespace().take(6).collect::<Vec<_>>().join(" ")
}

fn first_word(s: &str) -> String {
    s.split(|c: char| c.is_whitespace() || c == ',' || c == '.')
        .next()
        .unwrap_or("")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines copied from results/h200-2026-11-29 (vLLM 0.26.0 on the H200, noop_connector l0).
    const NOOP_026: &str = "\
(APIServer pid=1650) WARNING 11-29 16:42:17 [system_utils.py:299] Found ulimit of 20000 and failed to automatically increase with error current limit exceeds maximum limit. This can cause fd limit errors like `OSError: [Errno 24] Too many open files`
(EngineCore pid=1774) INFO 11-29 16:42:45 [utils.py:49] Connectors do not specify a kv cache layout, defaulting to NHD.
(EngineCore pid=1774) INFO 11-29 16:43:45 [factory.py:62] Creating v1 connector with name: NoOpConnector and engine_id: 93bef2ec-abc7-4ac8-8823-77a07d372b0f
(EngineCore pid=1774) WARNING 11-29 16:43:45 [base.py:190] Initializing KVConnectorBase_V1. This API is experimental and subject to change in the future as we iterate the design.
(EngineCore pid=1774) INFO 11-29 16:44:14 [factory.py:62] Creating v1 connector with name: NoOpConnector and engine_id: 93bef2ec-abc7-4ac8-8823-77a07d372b0f
(EngineCore pid=1774) WARNING 11-29 16:44:14 [base.py:190] Initializing KVConnectorBase_V1. This API is experimental and subject to change in the future as we iterate the design.
(EngineCore pid=1774) WARNING 11-29 16:44:16 [jit_monitor.py:135] Triton kernel JIT compilation during inference: _compute_slot_mapping_kernel. This causes a latency spike; consider extending warmup to cover this shape/config.
(EngineCore pid=1774) WARNING 11-29 16:44:17 [jit_monitor.py:135] Triton kernel JIT compilation during inference: fused_moe_kernel. This causes a latency spike; consider extending warmup to cover this shape/config.
/usr/lib/python3.12/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: There appear to be 1 leaked semaphore objects to clean up at shutdown
";

    #[test]
    fn noop_on_vllm_026() {
        let f = parse(NOOP_026);
        assert_eq!(f.kv_cache_layout.as_deref(), Some("NHD"));
        assert!(!f.hybrid_kv_cache_manager_off);
        assert_eq!(f.connectors, vec!["NoOpConnector"]);
        assert_eq!(
            f.jit_during_inference,
            vec!["_compute_slot_mapping_kernel", "fused_moe_kernel"]
        );
        assert_eq!(f.warnings["base.py:190"].count, 2);
        assert_eq!(f.warnings["jit_monitor.py:135"].count, 2);
        assert!(
            f.warnings["resource_tracker.py:254"]
                .first
                .starts_with("UserWarning")
        );
        assert!(f.summary().contains("KV layout NHD"));
        assert!(f.summary().contains("2 Triton JIT compiles while serving"));
    }

    /// vLLM 0.26.0's own messages for the connectors that change the engine (the source strings
    /// of mooncake_connector.py:509 and config/vllm.py:1609 in the 0.26.0 wheel, in vLLM's line
    /// format) and LMCache 0.5.6's warning exactly as its `logging.build_format` writes it,
    /// colour codes included (message from v1/platform/devices/cuda/device_ops.py:129).
    #[test]
    fn connector_changes() {
        let text = "\
(EngineCore pid=9) INFO 11-30 10:00:00 [mooncake_connector.py:509] MooncakeConnector setting KV cache layout to HND for better xfer performance.
(APIServer pid=8) WARNING 11-30 10:00:00 [vllm.py:1609] Turning off hybrid kv cache manager because `--kv-transfer-config` selects a KV connector that does not support it. Impact: hybrid SSM models (e.g. Jamba, Bamba) require HMA and will fail at startup without it.
\u{1b}[33;20m[2026-11-30 10:00:01,000] LMCache WARNING:\u{1b}[0m lmcache.cuda_ops compiled extension not found; CudaDeviceOps stays on the torch baseline for all ops. \u{1b}[3m(device_ops.py:129:lmcache.v1.platform.devices.cuda.device_ops)\u{1b}[0m
";
        let f = parse(text);
        assert_eq!(f.kv_cache_layout.as_deref(), Some("HND"));
        assert!(
            f.kv_cache_layout_source
                .as_deref()
                .unwrap()
                .starts_with("MooncakeConnector")
        );
        assert!(f.hybrid_kv_cache_manager_off);
        assert_eq!(f.missing_extensions, vec!["lmcache.cuda_ops"]);
        assert_eq!(
            f.warnings["device_ops.py:129:lmcache.v1.platform.devices.cuda.device_ops"].count,
            1
        );
        let s = f.summary();
        assert!(
            s.contains("KV layout HND") && s.contains("hybrid KV-cache manager off"),
            "{s}"
        );
    }

    /// The layout forced by `VLLM_KV_CACHE_LAYOUT=NHD` (the named `_nhd` variants; the real
    /// line of results/preflight-nhd-h200-2026-12-01, vLLM 0.26.0).
    #[test]
    fn layout_from_the_environment_variable() {
        let f = parse(
            "(EngineCore pid=1525) INFO 12-01 05:15:55 [utils.py:104] `VLLM_KV_CACHE_LAYOUT` \
             environment variable detected. Setting KV cache layout to NHD.\n",
        );
        assert_eq!(f.kv_cache_layout.as_deref(), Some("NHD"));
        assert!(
            f.kv_cache_layout_source
                .as_deref()
                .is_some_and(|s| s.starts_with("`VLLM_KV_CACHE_LAYOUT` environment variable"))
        );
    }

    /// The engine's death (real lines of multi_mooncake_lmcache l0 on the H200, 2026-12-01:
    /// Mooncake's HND layout meets LMCache's torch fallback) and a log flood (LMCache's
    /// per-call INFO line, ~967 k times in lmcache_only l0), read from a `.zst` log.
    #[test]
    fn engine_death_and_log_flood_from_a_compressed_log() {
        let death = "\
(EngineCore pid=3451) ERROR 12-01 00:28:02 [core.py:1332] EngineCore encountered a fatal error.\r
(EngineCore pid=3451) ERROR 12-01 00:28:02 [core.py:1332] Traceback (most recent call last):\r
(EngineCore pid=3451) ERROR 12-01 00:28:02 [core.py:1332]     raise NotImplementedError(\r
(EngineCore pid=3451) ERROR 12-01 00:28:02 [core.py:1332] NotImplementedError: HND layouts are not supported in the non-CUDA fallback. head_size parameter is required but not implemented in this path.
(APIServer pid=3179) ERROR 12-01 00:28:02 [async_llm.py:704] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
";
        let flood_line = "(EngineCore pid=3473) \u{1b}[32;20m[2026-12-01 00:28:08,930] LMCache INFO:\u{1b}[0m Auto-selected backend [cuda] for accelerator 'cuda' from candidate backends [cuda, rocm]. \u{1b}[3m(__init__.py:77:lmcache.v1.platform)\u{1b}[0m\n";
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("vllm_stdout.log"), death).unwrap();
        let n = LOG_FLOOD_LINES as usize + 5;
        let flood = flood_line.repeat(n);
        std::fs::write(
            d.path().join("vllm_stderr.log.zst"),
            zstd::encode_all(flood.as_bytes(), 3).unwrap(),
        )
        .unwrap();
        let f = read_run(d.path()).unwrap();
        assert_eq!(
            f.fatal_error.as_deref(),
            Some(
                "NotImplementedError: HND layouts are not supported in the non-CUDA fallback. head_size parameter is required but not implemented in this path."
            )
        );
        assert_eq!(f.log_lines, 5 + n as u64);
        let fl = f.log_flood.as_ref().unwrap();
        assert_eq!(fl.location, "__init__.py:77:lmcache.v1.platform");
        assert_eq!(fl.count, n as u64);
        assert!(
            fl.first.starts_with("Auto-selected backend [cuda]"),
            "{}",
            fl.first
        );
        let s = f.summary();
        assert!(
            s.starts_with("ENGINE DIED: NotImplementedError: HND layouts"),
            "{s}"
        );
        assert!(
            s.contains(&format!("log flood: {n} lines from __init__.py:77")),
            "{s}"
        );
        // Below the threshold: no flood; no fatal marker: an exception line is not a death.
        let g = parse(&format!(
            "{}NotImplementedError: not after a fatal marker\n",
            flood_line.repeat(10)
        ));
        assert_eq!((g.log_flood, g.fatal_error), (None, None));
    }

    /// LMCache's store lines (a real one from lmcache_only l0 on the H200, colour codes
    /// included) give count, tokens, GB and numpy-linear cost percentiles.
    #[test]
    fn lmcache_stores() {
        let line = |cost: &str| {
            format!(
                "(EngineCore pid=3473) \u{1b}[32;20m[2026-12-01 00:28:02,750] LMCache INFO:\u{1b}[0m [req_id=cmpl-8e6c85b0f1b7c420-0-a89b8dba] Stored 4096 out of total 4096 tokens. size: 0.3750 GB, cost {cost} ms, throughput: 1.2167 GB/s; offload_time: 307.9792 ms, put_time: 0.1576 ms \u{1b}[3m(cache_engine.py:588:lmcache.v1.cache_engine)\u{1b}[0m\n"
            )
        };
        let text: String = ["100.0", "308.2058", "200.0", "150.0"]
            .iter()
            .map(|c| line(c))
            .collect();
        let k = parse(&text).kv_stores.unwrap();
        assert_eq!((k.count, k.tokens), (4, 4 * 4096));
        assert!((k.gb - 1.5).abs() < 1e-12);
        // numpy.percentile([100, 150, 200, 308.2058], [50, 90], method="linear")
        // = 175.0 and 200 + 0.7 * 108.2058 = 275.74406
        assert!((k.cost_ms_p50 - 175.0).abs() < 1e-9, "{k:?}");
        assert!((k.cost_ms_p90 - 275.744_06).abs() < 1e-6, "{k:?}");
        assert!(
            parse(&text)
                .summary()
                .contains("KV stored by LMCache: 4 stores, 1.5 GB")
        );
        assert_eq!(parse("Stored nothing here\n").kv_stores, None);
        // Each store keeps its line's time: 2026-12-01 00:28:02.750 is 20,788 days after
        // 1970-01-01 (date -u -d 2026-12-01 +%s = 1796083200), so 1796083200000 + 1682750 ms.
        let ev = parse(&text).store_events;
        assert_eq!(ev.len(), 4);
        assert_eq!(ev[0].local_ms, 1_796_083_200_000 + 28 * 60_000 + 2_750);
        assert!(
            (ev[1].gbps() - 0.375 / 0.308_205_8).abs() < 1e-9,
            "{:?}",
            ev[1]
        );
    }

    /// LMCache's timestamps: malformed ones are refused, a good one is read to the millisecond.
    #[test]
    fn lmcache_timestamps() {
        assert_eq!(
            lmcache_time("x [2026-13-01 00:00:00,000] LMCache INFO: y"),
            None
        );
        assert_eq!(lmcache_time("no timestamp LMCache INFO: y"), None);
        assert_eq!(
            lmcache_time("[2026-12-01 00:00:00,5] LMCache INFO: y"),
            None
        );
        assert_eq!(lmcache_time("[2026-12-01 00:00:00] LMCache INFO: y"), None);
        assert_eq!(
            lmcache_time("[1970-01-02 00:00:01,005] LMCache INFO: y"),
            Some(86_401_005)
        );
    }

    /// A FIFO named like a log is skipped, never waited on (the project's `open_regular`);
    /// the other log is still read.
    #[test]
    fn a_fifo_named_like_a_log_does_not_block() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("vllm_stdout.log");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        std::fs::write(
            d.path().join("vllm_stderr.log"),
            "(EngineCore pid=1) INFO 12-01 00:28:08 [utils.py:49] Connectors do not specify a kv cache layout, defaulting to NHD.\n",
        )
        .unwrap();
        let dir = d.path().to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(read_run(&dir));
        });
        let f = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("read_run blocked on a FIFO for 10 s")
            .unwrap();
        assert_eq!(f.kv_cache_layout.as_deref(), Some("NHD"));
        assert_eq!(f.log_lines, 1);
    }

    /// A plain launch logs no layout and no connector; colour codes and control characters in
    /// a line never reach the facts.
    #[test]
    fn plain_and_hostile_lines() {
        let f = parse(
            "\u{1b}[0;33m(EngineCore pid=1) WARNING 11-29 16:42:17 [x.py:1] bell\u{7} here\u{1b}[0m\nINFO 11-29 16:42:17 [api.py:2] ready\n",
        );
        assert_eq!(f.kv_cache_layout, None);
        assert!(f.connectors.is_empty());
        assert_eq!(f.warnings["x.py:1"].first, "bell here");
        assert_eq!(f.summary(), "no engine change logged");
    }

    /// Two LMCache launches that differ only in counts, and a third stopped during startup
    /// (layout and extension logged, nothing served): each fact once, counts as ranges over the
    /// launches that logged them, "(2 of 3 launches)" where the third has none; one launch reads
    /// as its own summary.
    #[test]
    fn summary_over_launches_merges_counts_into_ranges() {
        let served = |count: u64, gb: f64, p50: f64, p90: f64, flood: u64| EngineFacts {
            kv_cache_layout: Some("NHD".into()),
            hybrid_kv_cache_manager_off: true,
            missing_extensions: vec!["lmcache.cuda_ops".into()],
            jit_during_inference: vec!["a".into(), "b".into()],
            kv_stores: Some(KvStores {
                count,
                tokens: 0,
                gb,
                cost_ms_p50: p50,
                cost_ms_p90: p90,
            }),
            log_flood: Some(LogSource {
                location: "__init__.py:154".into(),
                count: flood,
                first: "Auto-selected backend".into(),
            }),
            ..Default::default()
        };
        let a = served(1763, 467.6, 146.2, 262.0, 980_833);
        let b = served(1770, 469.1, 151.0, 265.0, 985_249);
        let startup = EngineFacts {
            kv_cache_layout: Some("NHD".into()),
            hybrid_kv_cache_manager_off: true,
            missing_extensions: vec!["lmcache.cuda_ops".into()],
            ..Default::default()
        };
        assert_eq!(
            EngineFacts::summary_over(&[&a, &startup, &b]),
            "KV layout NHD; hybrid KV-cache manager off; missing compiled extension: \
             lmcache.cuda_ops; 2 Triton JIT compiles while serving (2 of 3 launches); KV stored \
             by LMCache: 1763–1770 stores, 467.6–469.1 GB, 146–151 ms p50 / 262–265 ms p90 each \
             (2 of 3 launches); log flood: 980833–985249 lines from __init__.py:154 \
             (Auto-selected backend) (2 of 3 launches)"
        );
        assert_eq!(EngineFacts::summary_over(&[&a]), a.summary());
        let died = EngineFacts {
            fatal_error: Some("NotImplementedError: HND".into()),
            kv_cache_layout: Some("HND".into()),
            ..Default::default()
        };
        let plain = EngineFacts::default();
        assert_eq!(
            EngineFacts::summary_over(&[&died, &plain]),
            "ENGINE DIED: NotImplementedError: HND (1 of 2 launches); KV layout HND (1 of 2 launches)"
        );
        assert_eq!(
            EngineFacts::summary_over(&[&plain, &plain]),
            "no engine change logged"
        );
    }
}
