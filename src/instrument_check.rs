//! `ctax instrument-check DIR`: does `ctax-collect` measure the same latencies as
//! `vllm bench serve` on the same server?
//!
//! `tools/instrument_check.sh` runs the two clients alternately on one plain server at one rate
//! and shape (default order A-B-B-A: A = ctax-collect, fixed-rate arrivals; B = vllm bench with
//! `--burstiness 1000`), so a linear drift of the server cancels between instruments. This
//! module reads what it left behind — `p<k>_ctax/requests_*.jsonl[.zst|.cols]` and
//! `p<k>_bench.json[.zst]` (`--save-detailed`) — and puts TTFT and TPOT p50/p90 side by side, per
//! position and pooled per instrument, with 95% percentile-bootstrap CIs and the bench/ctax ratio.
//!
//! Definitions are each tool's own, which are the same by construction: TTFT = first token −
//! send; TPOT = (E2E − TTFT)/(output tokens − 1) per request (vllm bench's `calculate_metrics`;
//! ctax's [`ctax_schema::RequestRecord::tpot_ms`]). Warm-up: requests sent in the first
//! `warmup_s` seconds of a position are excluded on both sides (ctax flags them itself; for
//! vllm bench the cut is on `start_times`). Failed requests are excluded and counted.
//!
//! Length: ~390 lines of code (reading both tools' outputs, the comparison, its Markdown); the
//! rest is unit tests with hand-calculated expectations.

use std::path::Path;

use anyhow::{Context, bail};
use ctax_schema::RequestRecord;
use serde::{Deserialize, Serialize};

use crate::analysis::model::Estimate;
use crate::ingest::jsonl::read_jsonl;
use crate::stats::{BootstrapConfig, percentile_interval, quantile, quantile_replicates};

/// Which client measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Instrument {
    #[serde(rename = "ctax-collect")]
    Ctax,
    #[serde(rename = "vllm bench serve")]
    VllmBench,
}

impl Instrument {
    fn label(self) -> &'static str {
        match self {
            Instrument::Ctax => "ctax-collect",
            Instrument::VllmBench => "vllm bench serve",
        }
    }
}

/// The measured requests of one position of the A-B-B-A sequence.
#[derive(Debug, Clone)]
pub struct Position {
    pub position: u32,
    pub instrument: Instrument,
    pub ttft_ms: Vec<f64>,
    pub tpot_ms: Vec<f64>,
    /// Requests excluded as warm-up / as failed.
    pub warmup: usize,
    pub failed: usize,
}

/// `check.json` written by the script.
#[derive(Debug, Clone, Deserialize)]
struct CheckParams {
    warmup_s: f64,
    order: String,
}

/// The parts of vllm bench's `--save-detailed` result this check reads (seconds).
/// vLLM 0.3x saves `latencies`; vLLM 0.26 does not, and then a request's latency is its TTFT
/// plus the sum of its `itls` — vllm bench's own bookkeeping (`latency = most_recent_timestamp
/// - st`, where every chunk after the first appends `timestamp - most_recent_timestamp` to
/// `itl`), so both give the same TPOT.
#[derive(Debug, Clone, Deserialize)]
struct BenchDetailed {
    ttfts: Vec<f64>,
    #[serde(default)]
    latencies: Option<Vec<f64>>,
    #[serde(default)]
    itls: Option<Vec<Vec<f64>>>,
    output_lens: Vec<u64>,
    start_times: Vec<f64>,
    errors: Vec<Option<String>>,
}

/// Reads every position of a check directory.
pub fn load(dir: &Path) -> anyhow::Result<Vec<Position>> {
    let check_path = dir.join("check.json");
    let params: CheckParams = serde_json::from_slice(
        &std::fs::read(&check_path).with_context(|| format!("reading {}", check_path.display()))?,
    )
    .with_context(|| format!("parsing {}", check_path.display()))?;
    let mut out = Vec::new();
    for (i, c) in params.order.chars().enumerate() {
        let p = i as u32 + 1;
        out.push(match c {
            'A' => ctax_position(&dir.join(format!("p{p}_ctax")), p)?,
            'B' => bench_position(&dir.join(format!("p{p}_bench.json")), p, params.warmup_s)?,
            other => bail!(
                "{}: order letter {other:?} is neither A nor B",
                check_path.display()
            ),
        });
    }
    Ok(out)
}

fn ctax_position(run_dir: &Path, position: u32) -> anyhow::Result<Position> {
    let files: Vec<_> = std::fs::read_dir(run_dir)
        .with_context(|| format!("reading {}", run_dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("requests_") && ctax_schema::plain_name(n).ends_with(".jsonl")
            })
        })
        .collect();
    let [file] = files.as_slice() else {
        bail!(
            "{}: expected exactly one requests_*.jsonl[.zst|.cols], found {}",
            run_dir.display(),
            files.len()
        );
    };
    let lines = read_jsonl::<RequestRecord>(file)?;
    let mut pos = Position {
        position,
        instrument: Instrument::Ctax,
        ttft_ms: Vec::new(),
        tpot_ms: Vec::new(),
        warmup: 0,
        failed: 0,
    };
    let mut recs: Vec<&RequestRecord> = lines.rows.iter().collect();
    recs.sort_by_key(|r| r.seq);
    for r in recs {
        if r.warmup {
            pos.warmup += 1;
        } else if r.status != ctax_schema::Status::Ok {
            pos.failed += 1;
        } else if let (Some(t), Some(p)) = (r.ttft_ms(), r.tpot_ms()) {
            pos.ttft_ms.push(t);
            pos.tpot_ms.push(p);
        } else {
            pos.failed += 1;
        }
    }
    Ok(pos)
}

fn bench_position(path: &Path, position: u32, warmup_s: f64) -> anyhow::Result<Position> {
    // An archived check keeps vllm bench's result as `p<k>_bench.json.zst`.
    let zst = path.with_extension("json.zst");
    let bytes = if !path.exists() && zst.exists() {
        zstd::decode_all(
            std::fs::File::open(&zst).with_context(|| format!("reading {}", zst.display()))?,
        )
        .with_context(|| format!("decoding {}", zst.display()))?
    } else {
        std::fs::read(path).with_context(|| format!("reading {}", path.display()))?
    };
    let b: BenchDetailed = serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "parsing {} (vllm bench --save-detailed result)",
            path.display()
        )
    })?;
    let n = b.ttfts.len();
    // Per request: E2E latency (s), from `latencies` or, without it, TTFT + Σ ITL.
    let latencies: Vec<f64> = match (&b.latencies, &b.itls) {
        (Some(l), _) => l.clone(),
        (None, Some(itls)) => itls
            .iter()
            .zip(&b.ttfts)
            .map(|(itl, t)| t + itl.iter().sum::<f64>())
            .collect(),
        (None, None) => bail!(
            "{}: neither `latencies` nor `itls` present: cannot compute TPOT",
            path.display()
        ),
    };
    let latency_field = if b.latencies.is_some() {
        "latencies"
    } else {
        "itls"
    };
    for (field, len) in [
        (latency_field, latencies.len()),
        ("output_lens", b.output_lens.len()),
        ("start_times", b.start_times.len()),
        ("errors", b.errors.len()),
    ] {
        if len != n {
            bail!(
                "{}: field `{field}` has {len} entries, `ttfts` has {n}",
                path.display()
            );
        }
    }
    let t0 = b.start_times.iter().copied().fold(f64::INFINITY, f64::min);
    let mut pos = Position {
        position,
        instrument: Instrument::VllmBench,
        ttft_ms: Vec::new(),
        tpot_ms: Vec::new(),
        warmup: 0,
        failed: 0,
    };
    // vllm bench lists requests in dispatch order; keep it (send order, as for ctax).
    for (i, latency) in latencies.iter().enumerate() {
        let failed = b.errors[i].as_deref().is_some_and(|e| !e.is_empty()) || b.ttfts[i] <= 0.0;
        if b.start_times[i] - t0 < warmup_s {
            pos.warmup += 1;
        } else if failed || b.output_lens[i] < 2 {
            pos.failed += 1;
        } else {
            pos.ttft_ms.push(b.ttfts[i] * 1e3);
            pos.tpot_ms
                .push((latency - b.ttfts[i]) / (b.output_lens[i] - 1) as f64 * 1e3);
        }
    }
    Ok(pos)
}

/// One row of the comparison table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// `p2 vllm bench serve` or `pooled ctax-collect`.
    pub label: String,
    pub instrument: Instrument,
    pub n: usize,
    pub ttft_p50: Option<Estimate>,
    pub ttft_p90: Option<Estimate>,
    pub tpot_p50: Option<Estimate>,
    pub tpot_p90: Option<Estimate>,
}

/// The whole comparison: per-position rows, pooled rows, and bench/ctax − 1 with CIs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    pub rows: Vec<Row>,
    /// vllm bench / ctax − 1 of the pooled statistics (TTFT p50, p90, TPOT p50, p90).
    pub bench_over_ctax: Vec<(String, Option<Estimate>)>,
    pub conventions: String,
}

const STATS: [(&str, bool, f64); 4] = [
    ("TTFT p50", true, 0.5),
    ("TTFT p90", true, 0.9),
    ("TPOT p50", false, 0.5),
    ("TPOT p90", false, 0.9),
];

fn stat(v: &[f64], q: f64, cfg: &BootstrapConfig, key: &str) -> Option<(f64, Vec<f64>)> {
    Some((quantile(v, q)?, quantile_replicates(&[v], q, cfg, key)?))
}

fn estimate(est: f64, reps: &[f64], cfg: &BootstrapConfig) -> Estimate {
    let ci = percentile_interval(reps, cfg.confidence);
    Estimate {
        est,
        lo: ci.map(|c| c.0),
        hi: ci.map(|c| c.1),
    }
}

/// Compares the instruments (iid bootstrap within each sample; pooled rows pool the positions
/// of one instrument, so position-to-position drift shows in the per-position rows).
pub fn compare(positions: &[Position], cfg: &BootstrapConfig) -> Comparison {
    let pooled = |inst: Instrument, metric: bool| -> Vec<f64> {
        positions
            .iter()
            .filter(|p| p.instrument == inst)
            .flat_map(|p| {
                if metric {
                    p.ttft_ms.iter()
                } else {
                    p.tpot_ms.iter()
                }
            })
            .copied()
            .collect()
    };
    let row = |label: String, inst: Instrument, ttft: &[f64], tpot: &[f64]| -> Row {
        let e = |v: &[f64], q: f64, m: &str| {
            stat(v, q, cfg, &format!("{label}|{m}")).map(|(x, r)| estimate(x, &r, cfg))
        };
        Row {
            instrument: inst,
            n: ttft.len(),
            ttft_p50: e(ttft, 0.5, "ttft"),
            ttft_p90: e(ttft, 0.9, "ttft"),
            tpot_p50: e(tpot, 0.5, "tpot"),
            tpot_p90: e(tpot, 0.9, "tpot"),
            label,
        }
    };
    let mut rows: Vec<Row> = positions
        .iter()
        .map(|p| {
            row(
                format!("p{} {}", p.position, p.instrument.label()),
                p.instrument,
                &p.ttft_ms,
                &p.tpot_ms,
            )
        })
        .collect();
    for inst in [Instrument::Ctax, Instrument::VllmBench] {
        rows.push(row(
            format!("pooled {}", inst.label()),
            inst,
            &pooled(inst, true),
            &pooled(inst, false),
        ));
    }
    let bench_over_ctax = STATS
        .iter()
        .map(|&(name, is_ttft, q)| {
            let a = stat(
                &pooled(Instrument::Ctax, is_ttft),
                q,
                cfg,
                &format!("ratio ctax|{name}"),
            );
            let b = stat(
                &pooled(Instrument::VllmBench, is_ttft),
                q,
                cfg,
                &format!("ratio bench|{name}"),
            );
            let est = match (a, b) {
                (Some((a, ar)), Some((b, br))) if a > 0.0 => {
                    let reps: Vec<f64> = br.iter().zip(&ar).map(|(b, a)| b / a - 1.0).collect();
                    Some(estimate(b / a - 1.0, &reps, cfg))
                }
                _ => None,
            };
            (name.to_owned(), est)
        })
        .collect();
    Comparison {
        rows,
        bench_over_ctax,
        conventions: format!(
            "percentiles: numpy linear; CIs: {:.0}% percentile bootstrap, {} iid resamples within each sample, seed {}; \
             TTFT = first token − send; TPOT = (E2E − TTFT)/(output tokens − 1) per request; warm-up excluded on both sides",
            cfg.confidence * 100.0,
            cfg.resamples,
            cfg.seed
        ),
    }
}

fn fmt_est(e: &Option<Estimate>, scale: f64, unit: &str) -> String {
    match e {
        Some(Estimate {
            est,
            lo: Some(lo),
            hi: Some(hi),
        }) => {
            format!(
                "{:.1}{unit} [{:.1}, {:.1}]",
                est * scale,
                lo * scale,
                hi * scale
            )
        }
        Some(e) => format!("{:.1}{unit}", e.est * scale),
        None => "–".into(),
    }
}

/// The comparison as a Markdown table (the text that goes into DESIGN.md).
pub fn markdown(c: &Comparison) -> String {
    let mut s = String::from(
        "| sample | n | TTFT p50 (ms) | TTFT p90 (ms) | TPOT p50 (ms) | TPOT p90 (ms) |\n|---|---|---|---|---|---|\n",
    );
    for r in &c.rows {
        s += &format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            r.label,
            r.n,
            fmt_est(&r.ttft_p50, 1.0, ""),
            fmt_est(&r.ttft_p90, 1.0, ""),
            fmt_est(&r.tpot_p50, 1.0, ""),
            fmt_est(&r.tpot_p90, 1.0, ""),
        );
    }
    s += "\n| vllm bench / ctax − 1 | estimate [95% CI] |\n|---|---|\n";
    for (name, e) in &c.bench_over_ctax {
        s += &format!("| {name} | {} |\n", fmt_est(e, 100.0, "%"));
    }
    s += &format!("\nConventions: {}.\n", c.conventions);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> BootstrapConfig {
        BootstrapConfig {
            resamples: 2000,
            ..Default::default()
        }
    }

    /// The same latencies seen through both instruments give the same percentiles, and the
    /// bench/ctax ratio's CI covers 0.
    #[test]
    fn identical_samples_agree() {
        let ttft: Vec<f64> = (1..=100).map(|i| 100.0 + i as f64).collect();
        let tpot: Vec<f64> = (1..=100).map(|i| 10.0 + (i % 7) as f64).collect();
        let mk = |position, instrument| Position {
            position,
            instrument,
            ttft_ms: ttft.clone(),
            tpot_ms: tpot.clone(),
            warmup: 0,
            failed: 0,
        };
        let c = compare(
            &[mk(1, Instrument::Ctax), mk(2, Instrument::VllmBench)],
            &cfg(),
        );
        // numpy.percentile(101..=200, 90, method="linear") = 101 + 0.9 * 99 = 190.1
        let p90 = c.rows[0].ttft_p90.unwrap();
        assert!((p90.est - 190.1).abs() < 1e-9, "{p90:?}");
        for (name, e) in &c.bench_over_ctax {
            let e = e.unwrap();
            assert!(e.est.abs() < 1e-12, "{name}: {e:?}");
            assert!(
                e.lo.unwrap() <= 0.0 && e.hi.unwrap() >= 0.0,
                "{name}: {e:?}"
            );
        }
        assert!(markdown(&c).contains("| pooled vllm bench serve | 100 |"));
    }

    /// A vllm bench result file is read with vLLM's own TPOT definition, the warm-up cut on
    /// start_times and failures excluded.
    #[test]
    fn bench_detailed_is_read_with_vllms_definitions() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("p2_bench.json");
        // 4 requests at t = 0, 1, 2, 3 s; warm-up 1.5 s drops the first two; the last failed.
        std::fs::write(
            &p,
            r#"{"ttfts":[0.1,0.2,0.3,0.0],"latencies":[1.0,1.2,2.8,0.0],"output_lens":[11,11,26,0],
                "start_times":[100.0,101.0,102.0,103.0],"errors":["","","","boom"],"itls":[[],[],[],[]]}"#,
        )
        .unwrap();
        let pos = bench_position(&p, 2, 1.5).unwrap();
        assert_eq!((pos.warmup, pos.failed), (2, 1));
        assert_eq!(pos.ttft_ms, vec![300.0]);
        // (2.8 − 0.3) / (26 − 1) s = 0.1 s = 100 ms
        assert!((pos.tpot_ms[0] - 100.0).abs() < 1e-9);
    }

    /// vLLM 0.26 saves no `latencies`: E2E = TTFT + Σ ITL (vllm bench's own bookkeeping).
    #[test]
    fn bench_detailed_without_latencies_uses_itls() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("p2_bench.json");
        std::fs::write(
            &p,
            r#"{"ttfts":[0.1,0.2],"output_lens":[3,5],"start_times":[0.0,1.0],"errors":["",""],
                "itls":[[0.02,0.04],[0.01,0.01,0.01,0.05]]}"#,
        )
        .unwrap();
        let pos = bench_position(&p, 2, 0.0).unwrap();
        assert_eq!((pos.warmup, pos.failed), (0, 0));
        // Hand calculation: (0.02 + 0.04) / (3 − 1) s = 30 ms; (0.08) / (5 − 1) s = 20 ms.
        assert!((pos.tpot_ms[0] - 30.0).abs() < 1e-9, "{:?}", pos.tpot_ms);
        assert!((pos.tpot_ms[1] - 20.0).abs() < 1e-9, "{:?}", pos.tpot_ms);
        // The same file archived as `.json.zst` reads the same.
        let z = d.path().join("p2_bench.json.zst");
        std::fs::write(
            &z,
            zstd::encode_all(&std::fs::read(&p).unwrap()[..], 3).unwrap(),
        )
        .unwrap();
        std::fs::remove_file(&p).unwrap();
        assert_eq!(bench_position(&p, 2, 0.0).unwrap().tpot_ms, pos.tpot_ms);
        std::fs::remove_file(&z).unwrap();
        std::fs::write(
            &p,
            r#"{"ttfts":[0.1],"output_lens":[3],"start_times":[0.0],"errors":[null]}"#,
        )
        .unwrap();
        let e = format!("{:#}", bench_position(&p, 2, 0.0).unwrap_err());
        assert!(e.contains("neither `latencies` nor `itls`"), "{e}");
    }

    #[test]
    fn mismatched_bench_arrays_are_an_error_naming_the_field() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("p2_bench.json");
        std::fs::write(
            &p,
            r#"{"ttfts":[0.1],"latencies":[],"output_lens":[3],"start_times":[0.0],"errors":[null]}"#,
        )
        .unwrap();
        let e = bench_position(&p, 2, 0.0).unwrap_err().to_string();
        assert!(e.contains("latencies"), "{e}");
    }
}
