//! A realistic synthetic [`AnalysisResult`] for tests, screenshots and `ctax report --demo`-style
//! previews, plus degraded and hostile variants.
//!
//! The numbers follow a small queueing model (prefill cost × (1 + tax), a queue factor that grows
//! with load, throughput capped at a per-config capacity), and the saturation criteria, reference
//! rates and taxes are *computed* from those numbers with the seed's rules, so the figures agree
//! with the tables. Everything is deterministic (a fixed-seed splitmix64, no clock).

use std::collections::BTreeMap;

use ctax_schema::{Cell, ManifestRow, Phase, PreflightEntry, PreflightStatus, ReferenceRates};

use crate::analysis::model::{
    AnalysisResult, AnalysisSummary, CANONICAL_CONFIGS, CellKey, CellStats, Conventions, Counts,
    Criterion, DatasetInfo, Detection, Estimate, Quantiles, Saturation, StepStats, Tax, TaxContext,
    TaxValue, Verdict, VerdictKind, Verdicts,
};
use crate::stats::BootstrapConfig;

/// Phase A rates of the seed.
pub const RATES_A: [f64; 7] = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0];
/// Phase B input and output lengths.
pub const INPUTS_B: [u32; 3] = [512, 4096, 32768];
pub const OUTPUTS_B: [u32; 3] = [64, 256, 1024];
/// Phase B' priority configs of the seed.
pub const PRIORITY_BP: [&str; 4] = ["plain", "mooncake_both", "nixl_both", "lmcache_only"];

/// Per-config model parameters: (TTFT tax, TPOT tax, capacity req/s, step overhead µs).
fn params(config: &str) -> (f64, f64, f64, f64) {
    match config {
        "plain" => (0.0, 0.0, 22.0, 0.0),
        "noop_connector" => (0.03, 0.015, 21.5, 35.0),
        "mooncake_producer" => (0.19, 0.10, 19.0, 420.0),
        "mooncake_consumer" => (0.21, 0.11, 18.5, 450.0),
        "mooncake_both" => (0.42, 0.24, 15.0, 780.0),
        "nixl_both" => (0.36, 0.20, 15.5, 640.0),
        "lmcache_only" => (0.15, 0.08, 18.0, 300.0),
        _ => (0.95, 0.40, 7.0, 1300.0), // multi_mooncake_lmcache and anything else
    }
}

/// splitmix64: tiny, fixed, portable.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed)
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in (0, 1).
    fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.unit(), self.unit());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

fn seed_of(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

fn est(x: f64, rel_half_width: f64) -> Estimate {
    Estimate {
        est: x,
        lo: Some(x * (1.0 - rel_half_width)),
        hi: Some(x * (1.0 + rel_half_width)),
    }
}

fn quantiles(n: u64, p50: f64, p90: f64, p99: f64, rel: f64) -> Quantiles {
    Quantiles {
        n,
        mean: Some(p50 * 1.08),
        p50: Some(est(p50, rel * 0.6)),
        p90: Some(est(p90, rel)),
        p99: Some(est(p99, rel * 1.8)),
    }
}

/// TTFT p90 (ms) base of a prompt length (prefill cost of a 30B-A3B MoE on one GPU).
fn ttft_base_ms(input: u32) -> f64 {
    match input {
        512 => 62.0,
        4096 => 318.0,
        _ => 2950.0 * (input as f64 / 32768.0),
    }
}

/// Queue inflation of TTFT at utilisation `rho` (overload grows linearly).
fn queue_factor(rho: f64) -> f64 {
    if rho < 0.95 {
        1.0 + 0.2 * rho / (1.0 - rho)
    } else {
        8.0 + 30.0 * (rho - 1.0).max(0.0)
    }
}

struct CellSpec<'a> {
    config: &'a str,
    phase: Phase,
    rate: f64,
    input: u32,
    output: u32,
    /// Extra TTFT tax from the shape (H5) and TPOT tax from the output length (H6).
    shape_ttft: f64,
    shape_tpot: f64,
}

fn make_cell(s: &CellSpec<'_>, with_steps: bool) -> CellStats {
    let (ttft_tax, tpot_tax, cap, step_over) = params(s.config);
    let cap = cap * (4096.0 / s.input as f64).powf(0.35) * (256.0 / s.output as f64).powf(0.15);
    let rho = s.rate / cap;
    let mut rng = Rng::new(seed_of(&format!(
        "{}/{:?}/{}/{}/{}",
        s.config, s.phase, s.rate, s.input, s.output
    )));
    let jitter = 1.0 + 0.015 * rng.normal();
    let ttft90 =
        ttft_base_ms(s.input) * (1.0 + ttft_tax + s.shape_ttft) * queue_factor(rho) * jitter;
    let tpot90 = 27.5
        * (1.0 + tpot_tax + s.shape_tpot)
        * (1.0 + 0.45 * rho.min(1.25))
        * (1.0 + 0.01 * rng.normal());
    let duration = (200.0 / s.rate).max(60.0);
    let effective = s.rate.min(cap) * (1.0 - 0.004 * rng.unit());
    let n_ok = (effective * duration).round() as u64;
    let rel = 0.09 * (200.0 / n_ok.max(1) as f64).sqrt() * if rho > 0.95 { 2.0 } else { 1.0 };
    let overloaded = rho >= 1.0;
    let dropped = if overloaded {
        ((s.rate - cap) * duration * 0.2).round() as u64
    } else {
        0
    };
    let waiting = if rho < 0.8 {
        0.0
    } else if rho < 1.0 {
        (rho * 3.0 - 2.4).max(0.0)
    } else {
        40.0 * (rho - 1.0) + 3.0
    };
    let name = Cell {
        rate: s.rate,
        input_len: s.input,
        output_len: s.output,
    }
    .name();
    let step = with_steps.then(|| {
        let base = 11_800.0 * (1.0 + 0.3 * rho.min(1.2));
        StepStats {
            n_steps: (duration * 70.0) as u64,
            step_duration_us: quantiles(
                (duration * 70.0) as u64,
                base + step_over,
                (base + step_over) * 1.45,
                (base + step_over) * 2.1,
                0.02,
            ),
            schedule_us: quantiles((duration * 70.0) as u64, 420.0, 610.0, 980.0, 0.03),
            build_meta_us: quantiles(
                (duration * 70.0) as u64,
                step_over * 0.2,
                step_over * 0.3,
                step_over * 0.5,
                0.05,
            ),
            get_finished_us: quantiles(
                (duration * 70.0) as u64,
                step_over * 0.1,
                step_over * 0.2,
                step_over * 0.3,
                0.05,
            ),
            start_load_kv_us: quantiles(
                (duration * 70.0) as u64,
                step_over * 0.3,
                step_over * 0.4,
                step_over * 0.6,
                0.05,
            ),
            connector_total_us: quantiles(
                (duration * 70.0) as u64,
                step_over * 0.6,
                step_over * 0.9,
                step_over * 1.4,
                0.05,
            ),
        }
    });
    CellStats {
        key: CellKey {
            config: s.config.to_owned(),
            phase: s.phase,
            cell: name,
        },
        launch: None,
        launches: vec![if s.phase == Phase::A { 0 } else { 1 }],
        rate: s.rate,
        input_len: s.input,
        output_len: s.output,
        counts: Counts {
            scheduled: n_ok + dropped + (s.rate * 10.0) as u64,
            warmup: (s.rate * 10.0) as u64,
            measured_ok: n_ok,
            dropped,
            errors: 0,
            cancelled: 0,
        },
        complete: true,
        incomplete_reasons: vec![],
        ttft_ms: quantiles(n_ok, ttft90 * 0.72, ttft90, ttft90 * 1.35, rel),
        tpot_ms: quantiles(n_ok, tpot90 * 0.86, tpot90, tpot90 * 1.12, rel * 0.5),
        e2e_ms: quantiles(
            n_ok,
            ttft90 * 0.72 + s.output as f64 * tpot90 * 0.86,
            ttft90 + s.output as f64 * tpot90,
            (ttft90 + s.output as f64 * tpot90) * 1.2,
            rel,
        ),
        itl_ms: quantiles(
            n_ok * s.output as u64,
            tpot90 * 0.8,
            tpot90 * 1.05,
            tpot90 * 1.9,
            0.02,
        ),
        offered_rps: s.rate,
        effective_rps: Some(effective),
        achieved_send_rps: Some(s.rate * (1.0 - 0.0005 * rng.unit())),
        waiting_p50: Some((waiting * 10.0_f64).round() / 10.0),
        running_p50: Some((s.rate.min(cap) * 4.2).round()),
        lateness_us_p99: Some(38.0 + 10.0 * rng.unit()),
        lateness_us_max: Some(410.0 + 200.0 * rng.unit()),
        client_cpu_pct: Some(3.0 + s.rate * 0.4),
        step,
        saturation: None,
        gpus: Vec::new(),
    }
}

/// Fills `saturation` of the Phase A cells of one config with the seed's three criteria.
fn apply_saturation(cells: &mut [CellStats]) -> Option<f64> {
    let p90s: Vec<(f64, f64)> = cells
        .iter()
        .map(|c| (c.rate, c.ttft_ms.p90.map(|e| e.est).unwrap_or(f64::NAN)))
        .collect();
    let mut sat_rate = None;
    for c in cells.iter_mut() {
        let ratio = c.effective_rps.unwrap_or(0.0) / c.offered_rps;
        let throughput = Criterion {
            value: Some(ratio),
            threshold: 0.95,
            fired: ratio < 0.95,
            note: None,
        };
        let w = c.waiting_p50.unwrap_or(0.0);
        let queue = Criterion {
            value: Some(w),
            threshold: 1.0,
            fired: w > 1.0,
            note: None,
        };
        let half = p90s.iter().find(|(r, _)| (*r - c.rate / 2.0).abs() < 1e-9);
        let ttft_growth = match half {
            Some((r, lower)) => {
                let g = c.ttft_ms.p90.map(|e| e.est).unwrap_or(f64::NAN) / lower;
                Criterion {
                    value: Some(g),
                    threshold: 1.5,
                    fired: g > 1.5,
                    note: Some(format!("vs {} req/s", super::fmt::rate(*r))),
                }
            }
            None => Criterion {
                value: None,
                threshold: 1.5,
                fired: false,
                note: Some("no Phase A cell at half this rate".to_owned()),
            },
        };
        let any = throughput.fired || queue.fired || ttft_growth.fired;
        if any && sat_rate.is_none() {
            sat_rate = Some(c.rate);
        }
        c.saturation = Some(Saturation {
            throughput,
            queue,
            ttft_growth,
            any,
            saturated: false,
        });
    }
    if let Some(s) = sat_rate {
        for c in cells.iter_mut() {
            if let Some(sat) = c.saturation.as_mut() {
                sat.saturated = c.rate >= s;
            }
        }
    }
    sat_rate
}

fn ratio_tax(x: Option<&Estimate>, plain: Option<&Estimate>, unit_rel: f64) -> Option<TaxValue> {
    let (x, p) = (x?, plain?);
    let t = x.est / p.est - 1.0;
    // A CI that widens with the two inputs' relative widths.
    let w = unit_rel.max(0.005)
        + ((x.hi.unwrap_or(x.est) - x.lo.unwrap_or(x.est)) / x.est).abs() * 0.35
        + ((p.hi.unwrap_or(p.est) - p.lo.unwrap_or(p.est)) / p.est).abs() * 0.35;
    let value = Estimate {
        est: t,
        lo: Some(t - w),
        hi: Some(t + w),
    };
    Some(TaxValue {
        value,
        unit: "fraction".to_owned(),
        detection: detection(&value),
    })
}

fn detection(e: &Estimate) -> Detection {
    match (e.lo, e.hi) {
        (Some(lo), _) if lo > 0.0 => Detection::Tax,
        (_, Some(hi)) if hi < 0.0 => Detection::Negative,
        (Some(_), Some(_)) => Detection::Inconclusive,
        _ => Detection::Unknown,
    }
}

fn us_tax(v: f64, half: f64) -> TaxValue {
    let value = Estimate {
        est: v,
        lo: Some(v - half),
        hi: Some(v + half),
    };
    TaxValue {
        value,
        unit: "us".to_owned(),
        detection: detection(&value),
    }
}

fn make_tax(x: &CellStats, plain: &CellStats, context: TaxContext) -> Tax {
    let step = match (&x.step, &plain.step) {
        (Some(sx), Some(sp)) => Some((sx, sp)),
        _ => None,
    };
    let step_tax =
        step.and_then(|(sx, sp)| Some(sx.step_duration_us.p50?.est - sp.step_duration_us.p50?.est));
    let cb = step.and_then(|(sx, _)| sx.connector_total_us.p50.map(|e| e.est));
    Tax {
        config: x.key.config.clone(),
        context,
        phase: x.key.phase,
        cell: x.key.cell.clone(),
        rate: x.rate,
        input_len: x.input_len,
        output_len: x.output_len,
        ttft_p90: ratio_tax(x.ttft_ms.p90.as_ref(), plain.ttft_ms.p90.as_ref(), 0.05),
        tpot_p90: ratio_tax(x.tpot_ms.p90.as_ref(), plain.tpot_ms.p90.as_ref(), 0.02),
        step_p50_us: step_tax.map(|v| us_tax(v, 60.0)),
        callback_p50_us: cb.map(|v| us_tax(v, 0.08 * v + 1.0)),
        step_minus_callback_us: match (step_tax, cb) {
            (Some(s), Some(c)) => Some(us_tax(s - c, 70.0)),
            _ => None,
        },
    }
}

fn conventions() -> Conventions {
    Conventions {
        percentile_estimator: "numpy default `linear` (Hyndman-Fan type 7)".to_owned(),
        bootstrap: BootstrapConfig::default(),
        ci_method: "95% percentile bootstrap, 10,000 resamples, seeded; iid via the order-statistic identity, \
                    hierarchical (launches, then requests) when a config has several launches"
            .to_owned(),
        ttft: "first token-carrying SSE event - actual send".to_owned(),
        tpot: "(last - first token-carrying event) / (completion_tokens - 1), per request".to_owned(),
        itl: "gaps between consecutive token-carrying events, pooled over requests".to_owned(),
        e2e: "last token-carrying event - actual send".to_owned(),
        warmup: "requests sent in the first 10 s of a cell are excluded".to_owned(),
        token_source: "completion_tokens from the server's final usage chunk".to_owned(),
        effective_throughput: "completions inside the measurement window / window length".to_owned(),
        saturation: "throughput ratio < 0.95, or waiting p50 > 1, or TTFT p90(r)/TTFT p90(r/2) > 1.5".to_owned(),
    }
}

#[allow(clippy::too_many_arguments)]
fn verdict(
    id: &str,
    title: &str,
    statement: &str,
    estimate: Option<Estimate>,
    unit: &str,
    threshold: &str,
    verdict: VerdictKind,
    reason: &str,
    label: Option<&str>,
) -> Verdict {
    Verdict {
        id: id.to_owned(),
        title: title.to_owned(),
        statement: statement.to_owned(),
        estimate,
        unit: unit.to_owned(),
        threshold: threshold.to_owned(),
        verdict,
        reason: reason.to_owned(),
        label: label.map(str::to_owned),
    }
}

fn tax_est(taxes: &[Tax], config: &str) -> Option<Estimate> {
    taxes
        .iter()
        .find(|t| t.config == config && t.context == TaxContext::RefSafe)
        .and_then(|t| t.ttft_p90.as_ref())
        .map(|v| v.value)
}

fn verdicts(taxes: &[Tax], simulated: bool) -> Verdicts {
    let mb = tax_est(taxes, "mooncake_both");
    let nx = tax_est(taxes, "nixl_both");
    let noop = tax_est(taxes, "noop_connector");
    let lm = tax_est(taxes, "lmcache_only");
    let multi = tax_est(taxes, "multi_mooncake_lmcache");
    let gap = match (nx, mb) {
        (Some(n), Some(m)) => Some(Estimate {
            est: n.est - m.est,
            lo: Some(n.est - m.est - 0.09),
            hi: Some(n.est - m.est + 0.08),
        }),
        _ => None,
    };
    let share = match (noop, mb) {
        (Some(n), Some(m)) => Some(Estimate {
            est: n.est / m.est,
            lo: Some(n.est / m.est - 0.12),
            hi: Some(n.est / m.est + 0.13),
        }),
        _ => None,
    };
    let add = match (multi, mb, lm) {
        (Some(x), Some(a), Some(b)) => {
            let d = (x.est - (a.est + b.est)).abs() / x.est;
            Some(Estimate {
                est: d,
                lo: Some(d - 0.05),
                hi: Some(d + 0.06),
            })
        }
        _ => None,
    };
    let nt = |what: &str| format!("needs {what}, which has no data");
    let hypotheses = vec![
        verdict(
            "h1",
            "Substrate tax persists at single instance / synthetic load",
            "Single-instance mooncake_both TTFT p90 is >= 10% higher than plain at ref_safe",
            mb,
            "fraction",
            "tax >= 0.10",
            if mb.is_some() {
                VerdictKind::Supported
            } else {
                VerdictKind::NotTestable
            },
            if mb.is_some() {
                "the whole CI lies above +10%"
            } else {
                "needs mooncake_both"
            },
            None,
        ),
        verdict(
            "h2",
            "NIXL-vs-Mooncake gap is mechanism-side",
            "NIXL tax < Mooncake tax by 5-10 pp at ref_safe",
            gap,
            "pp",
            "gap in [-10, -5] pp",
            if gap.is_some() {
                VerdictKind::Inconclusive
            } else {
                VerdictKind::NotTestable
            },
            if gap.is_some() {
                "the CI straddles both ends of the [-10, -5] pp band"
            } else {
                "needs nixl_both and mooncake_both"
            },
            None,
        ),
        match share {
            Some(s) => verdict(
                "h3",
                "Framework-vs-implementation split",
                "noop_connector tax is < 50% of mooncake_both tax",
                Some(s),
                "ratio",
                "tax(noop) / tax(mooncake_both) < 0.50",
                VerdictKind::Supported,
                "the whole CI lies below 0.50",
                Some("implementation-cost-dominated"),
            ),
            None => verdict(
                "h3",
                "Framework-vs-implementation split",
                "noop_connector tax is < 50% of mooncake_both tax",
                None,
                "ratio",
                "tax(noop) / tax(mooncake_both) < 0.50",
                VerdictKind::NotTestable,
                &nt("noop_connector"),
                None,
            ),
        },
        verdict(
            "h4",
            "MultiConnector tax is additive",
            "tax(Mooncake+LMCache) = tax(Mooncake) + tax(LMCache), within 30%",
            add,
            "ratio",
            "|multi - sum| / multi <= 0.30",
            if add.is_some() {
                VerdictKind::Refuted
            } else {
                VerdictKind::NotTestable
            },
            if add.is_some() {
                "the whole CI lies above 0.30; multi exceeds the sum"
            } else {
                "needs multi_mooncake_lmcache, mooncake_both and lmcache_only"
            },
            add.map(|_| "super-additive"),
        ),
        verdict(
            "h5",
            "Tax is shape-dependent (input)",
            "tax_TTFT_p90 grows monotonically with input length for mooncake_both",
            Some(Estimate {
                est: 0.24,
                lo: Some(0.15),
                hi: Some(0.33),
            }),
            "pp",
            "monotone increase over 512 -> 4096 -> 32768",
            VerdictKind::Supported,
            "tax rises at each input step for every output length; 32768 vs 512 difference CI excludes 0",
            None,
        ),
        verdict(
            "h6",
            "Tax compounds in decode",
            "tax_TPOT_p90 grows with output length",
            Some(Estimate {
                est: 0.05,
                lo: Some(-0.01),
                hi: Some(0.11),
            }),
            "pp",
            "monotone increase over 64 -> 256 -> 1024",
            VerdictKind::Inconclusive,
            "point estimates rise but the 1024 vs 64 difference CI includes 0",
            None,
        ),
    ];
    let success_criteria = vec![
        verdict(
            "sc1",
            "H1 falsifiable",
            "tax_TTFT_p90(mooncake_both, ref_safe) reported; prior accepted if in [25%, 60%]",
            mb,
            "fraction",
            "0.25 <= tax <= 0.60",
            if mb.is_some() {
                VerdictKind::Supported
            } else {
                VerdictKind::NotTestable
            },
            if mb.is_some() {
                "the CI lies inside [25%, 60%]: prior accepted"
            } else {
                "needs mooncake_both"
            },
            None,
        ),
        verdict(
            "sc2",
            "H2 testable",
            "NIXL-vs-Mooncake gap at ref_safe reported and compared with ~7 pp",
            gap,
            "pp",
            "reported; agreement if the CI contains -7 pp",
            if gap.is_some() {
                VerdictKind::Supported
            } else {
                VerdictKind::NotTestable
            },
            if gap.is_some() {
                "reported; the CI contains -7 pp (agreement)"
            } else {
                "needs nixl_both and mooncake_both"
            },
            None,
        ),
        verdict(
            "sc3",
            "H3 disambiguated",
            "tax(noop_connector) at ref_safe reported and the cost labelled",
            share,
            "ratio",
            ">= 0.50 framework-dominated; < 0.30 implementation-dominated",
            if share.is_some() {
                VerdictKind::Supported
            } else {
                VerdictKind::NotTestable
            },
            if share.is_some() {
                "the CI lies below 0.30"
            } else {
                "noop_connector has no data"
            },
            share.map(|_| "implementation-cost-dominated"),
        ),
        verdict(
            "sc4",
            "H4 additivity",
            "|tax(multi) - (tax(mooncake_both) + tax(lmcache_only))| / tax(multi) <= 0.30",
            add,
            "ratio",
            "<= 0.30 -> linear",
            if add.is_some() {
                VerdictKind::Refuted
            } else {
                VerdictKind::NotTestable
            },
            if add.is_some() {
                "the whole CI lies above 0.30: not linear"
            } else {
                "needs the three H4 configs"
            },
            add.map(|_| "super-additive"),
        ),
        verdict(
            "sc5",
            "H5 + H6 directional",
            "report whether tax_TTFT_p90 grows with input and tax_TPOT_p90 grows with output",
            None,
            "",
            "sign + magnitude reported",
            VerdictKind::Supported,
            "TTFT tax grows with input (+24 pp); TPOT tax direction inconclusive (+5 pp, CI includes 0)",
            None,
        ),
        verdict(
            "sc6",
            "All artifacts present",
            "every config that ran has the 6 file types; every SKIP config has a reason",
            Some(Estimate {
                est: 0.0,
                lo: None,
                hi: None,
            }),
            "count",
            "0 missing files, 0 unexplained skips",
            VerdictKind::Supported,
            "all run directories hold the six file types",
            None,
        ),
        verdict(
            "sc7",
            "Bench finishes < 6 h",
            "Phase A + B + B' wall clock < 6 h on an idle machine",
            None,
            "hours",
            "< 6 h",
            VerdictKind::NotTestable,
            "the sweep was resumed after an interruption; wall clock of one uninterrupted run is unknown",
            None,
        ),
    ];
    Verdicts {
        schema_version: 1,
        simulated,
        hypotheses,
        success_criteria,
    }
}

fn step_samples(config: &str, n: usize) -> Vec<f64> {
    let (_, _, _, over) = params(config);
    let mut rng = Rng::new(seed_of(config) ^ 0x5157);
    let mut v: Vec<f64> = (0..n)
        .map(|_| {
            // Mostly decode steps (~11 ms), some prefill-heavy steps (~30 ms), lognormal spread.
            let base = if rng.unit() < 0.18 {
                31_000.0
            } else {
                11_500.0
            };
            base * (0.22 * rng.normal()).exp() + over * (0.5 + rng.unit())
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The full demo dataset: all eight configs, step timing on, every verdict kind.
pub fn demo_result() -> AnalysisResult {
    let configs: Vec<&str> = CANONICAL_CONFIGS.to_vec();
    build(&configs, true, BTreeMap::new())
}

/// Builds a dataset for `configs` (canonical names or not), with or without step timing.
pub fn build(
    configs: &[&str],
    step_timing: bool,
    skipped: BTreeMap<String, String>,
) -> AnalysisResult {
    let mut cells: Vec<CellStats> = Vec::new();
    let mut sat_rates: BTreeMap<String, Option<f64>> = BTreeMap::new();
    for &c in configs {
        let mut a: Vec<CellStats> = RATES_A
            .iter()
            .map(|&r| {
                make_cell(
                    &CellSpec {
                        config: c,
                        phase: Phase::A,
                        rate: r,
                        input: 4096,
                        output: 256,
                        shape_ttft: 0.0,
                        shape_tpot: 0.0,
                    },
                    step_timing,
                )
            })
            .collect();
        let s = apply_saturation(&mut a);
        sat_rates.insert(c.to_owned(), s);
        cells.extend(a);
    }
    let all_sat = |r: f64| configs.iter().all(|c| sat_rates[*c].is_none_or(|s| r < s));
    let ref_safe = RATES_A
        .iter()
        .copied()
        .filter(|&r| all_sat(r))
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
    let plain_sat = sat_rates.get("plain").copied().flatten();
    let ref_load = RATES_A
        .iter()
        .copied()
        .filter(|&r| plain_sat.is_none_or(|s| r < s))
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
    let rs = ref_safe.unwrap_or(4.0);
    let rl = ref_load.unwrap_or(rs);
    let shape_tax = |c: &str, input: u32, output: u32| -> (f64, f64) {
        let (tt, tp, _, _) = params(c);
        let li = (input as f64 / 4096.0).log2() / 3.0; // -1 .. +1
        let lo = (output as f64 / 256.0).log2() / 2.0; // -1 .. +1
        let k = if c == "mooncake_both" { 0.30 } else { 0.12 };
        (tt * k * li, tp * 0.12 * lo)
    };
    for &c in configs {
        for &i in &INPUTS_B {
            for &o in &OUTPUTS_B {
                let (st, sp) = shape_tax(c, i, o);
                cells.push(make_cell(
                    &CellSpec {
                        config: c,
                        phase: Phase::B,
                        rate: rs,
                        input: i,
                        output: o,
                        shape_ttft: st,
                        shape_tpot: sp,
                    },
                    step_timing,
                ));
            }
        }
        if (rl - rs).abs() > 1e-9 && PRIORITY_BP.contains(&c) {
            for &i in &INPUTS_B {
                let (st, sp) = shape_tax(c, i, 256);
                cells.push(make_cell(
                    &CellSpec {
                        config: c,
                        phase: Phase::Bp,
                        rate: rl,
                        input: i,
                        output: 256,
                        shape_ttft: st,
                        shape_tpot: sp,
                    },
                    step_timing,
                ));
            }
        }
    }
    cells.sort_by(|a, b| {
        (
            super::config_rank(&a.key.config),
            a.key.phase,
            a.rate,
            a.input_len,
            a.output_len,
        )
            .partial_cmp(&(
                super::config_rank(&b.key.config),
                b.key.phase,
                b.rate,
                b.input_len,
                b.output_len,
            ))
            .unwrap_or(std::cmp::Ordering::Equal)
    });

    // Taxes.
    let find = |config: &str, phase: Phase, rate: f64, i: u32, o: u32| {
        cells.iter().find(|c| {
            c.key.config == config
                && c.key.phase == phase
                && (c.rate - rate).abs() < 1e-9
                && c.input_len == i
                && c.output_len == o
        })
    };
    let mut taxes = Vec::new();
    if configs.contains(&"plain") {
        for &c in configs.iter().filter(|c| **c != "plain") {
            for (ctx, r) in [(TaxContext::RefSafe, rs), (TaxContext::RefLoad, rl)] {
                if let (Some(x), Some(p)) = (
                    find(c, Phase::A, r, 4096, 256),
                    find("plain", Phase::A, r, 4096, 256),
                ) {
                    taxes.push(make_tax(x, p, ctx));
                }
            }
            for &i in &INPUTS_B {
                for &o in &OUTPUTS_B {
                    if let (Some(x), Some(p)) = (
                        find(c, Phase::B, rs, i, o),
                        find("plain", Phase::B, rs, i, o),
                    ) {
                        taxes.push(make_tax(x, p, TaxContext::ShapeB));
                    }
                }
                if let (Some(x), Some(p)) = (
                    find(c, Phase::Bp, rl, i, 256),
                    find("plain", Phase::Bp, rl, i, 256),
                ) {
                    taxes.push(make_tax(x, p, TaxContext::ShapeBp));
                }
            }
        }
    }

    // Provenance.
    let t0: u64 = 1_763_633_700_000; // 2025-11-20 10:15:00 UTC
    let mut manifest = Vec::new();
    let mut environments = BTreeMap::new();
    let mut run_configs = BTreeMap::new();
    let mut preflight = PreflightStatus {
        schema_version: 1,
        configs: BTreeMap::new(),
        step_timing_available: Some(step_timing),
        step_timing_reason: (!step_timing).then(|| {
            "patch did not apply: vLLM 0.11.2 moved Scheduler.update_from_output (marker not found)".to_owned()
        }),
    };
    for (k, c) in [
        "mooncake_consumer",
        "multi_mooncake_lmcache",
        "noop_connector",
    ]
    .into_iter()
    .enumerate()
    {
        let k = k as u64;
        let skip = skipped.get(c);
        manifest.push(ManifestRow {
            date_utc: super::fmt::unix_ms(t0 + k * 60_000)
                .replace(" UTC", "Z")
                .replace(' ', "T"),
            stage: "preflight".to_owned(),
            config: c.to_owned(),
            launch: 0,
            run_dir: None,
            status: if skip.is_some() { "skip" } else { "ok" }.to_owned(),
            reason: skip.cloned(),
            vllm_version: Some("0.11.2".to_owned()),
            vllm_git_sha: Some("9c3fe1d2a7".to_owned()),
            connector_versions: BTreeMap::new(),
            gpu: Some("NVIDIA H20 96GB (GPU 0)".to_owned()),
            launch_command: Some(format!("bash tools/verify_{c}.sh")),
            step_timing_active: None,
            started_unix_ms: t0 + k * 60_000,
            duration_s: 240.0,
            host: Some("dash0".to_owned()),
            placement: None,
        });
        preflight.configs.insert(
            c.to_owned(),
            PreflightEntry {
                decision: if skip.is_some() { "skip" } else { "include" }.to_owned(),
                reason: skip
                    .cloned()
                    .or_else(|| Some("all checks passed".to_owned())),
                log: Some(format!("preflight/verify_{c}.log")),
                checked_unix_ms: Some(t0 + k * 60_000),
            },
        );
    }
    let mut start = t0 + 15 * 60_000;
    for (stage, launch) in [("A", 0u32), ("B", 1u32)] {
        for &c in configs {
            let run_dir = format!(
                "{}_{}_l{}",
                super::fmt::unix_ms(start)
                    .replace(['-', ':'], "")
                    .replace(' ', "-")
                    .trim_end_matches("-UTC")
                    .to_owned(),
                c,
                launch
            );
            let dur = if stage == "A" { 1_160.0 } else { 820.0 };
            let mut cv = BTreeMap::new();
            if c.contains("mooncake") {
                cv.insert(
                    "mooncake-transfer-engine".to_owned(),
                    "0.3.7.post2".to_owned(),
                );
            }
            if c.contains("lmcache") {
                cv.insert("lmcache".to_owned(), "0.3.9".to_owned());
            }
            if c.contains("nixl") {
                cv.insert("nixl".to_owned(), "0.6.1".to_owned());
            }
            manifest.push(ManifestRow {
                date_utc: super::fmt::unix_ms(start)
                    .replace(" UTC", "Z")
                    .replace(' ', "T"),
                stage: stage.to_owned(),
                config: c.to_owned(),
                launch,
                run_dir: Some(run_dir.clone()),
                status: "ok".to_owned(),
                reason: None,
                vllm_version: Some("0.11.2".to_owned()),
                vllm_git_sha: Some("9c3fe1d2a7".to_owned()),
                connector_versions: cv.clone(),
                gpu: Some("NVIDIA H20 96GB (GPU 0)".to_owned()),
                launch_command: Some(format!("bash launch/launch_{c}.sh --port 8100")),
                step_timing_active: Some(step_timing),
                started_unix_ms: start,
                duration_s: dur,
                host: Some("dash0".to_owned()),
                placement: None,
            });
            let mut env = BTreeMap::new();
            env.insert("vllm_version".to_owned(), "0.11.2".to_owned());
            env.insert("vllm_git_sha".to_owned(), "9c3fe1d2a7".to_owned());
            env.insert("gpu".to_owned(), "NVIDIA H20 96GB".to_owned());
            env.insert("driver".to_owned(), "570.124.06".to_owned());
            env.insert("cuda".to_owned(), "12.8".to_owned());
            env.insert("python".to_owned(), "3.12.3".to_owned());
            env.insert("torch".to_owned(), "2.8.0+cu128".to_owned());
            environments.insert(run_dir.clone(), env);
            let kv = match c {
                "plain" => serde_json::Value::Null,
                _ => serde_json::json!({ "kv_connector": c, "kv_role": "kv_both" }),
            };
            run_configs.insert(
                run_dir,
                serde_json::json!({
                    "model": "Qwen/Qwen3-Coder-30B-A3B-Instruct",
                    "tensor_parallel_size": 1,
                    "max_model_len": 200000,
                    "enable_prefix_caching": true,
                    "enable_chunked_prefill": true,
                    "max_num_batched_tokens": 8192,
                    "gpu_memory_utilization": 0.9,
                    "kv_transfer_config": kv,
                }),
            );
            start += (dur * 1000.0) as u64 + 60_000;
        }
    }
    let step_ecdf: BTreeMap<String, Vec<f64>> = if step_timing {
        configs
            .iter()
            .map(|c| ((*c).to_owned(), step_samples(c, 1_500)))
            .collect()
    } else {
        BTreeMap::new()
    };
    let mut sorted_configs: Vec<String> = configs.iter().map(|c| (*c).to_owned()).collect();
    sorted_configs.sort_by_key(|c| super::config_rank(c));
    let mut notes = vec![format!(
        "ref_safe = {}: the highest Phase A rate at which none of the {} configs is saturated",
        super::fmt::rate(rs),
        configs.len()
    )];
    notes.push(format!(
        "ref_load = {}: the highest Phase A rate at which plain is not saturated",
        super::fmt::rate(rl)
    ));
    let tax_list = taxes;
    let summary = AnalysisSummary {
        schema_version: 1,
        tool_version: "ctax 0.1.0 (fixture)".to_owned(),
        conventions: conventions(),
        dataset: DatasetInfo {
            root: "results/demo".to_owned(),
            simulated: false,
            configs: sorted_configs,
            skipped,
            step_timing_available: step_timing,
            preflight: Some(preflight),
            manifest,
            environments,
            profile: Some(
                "# profile: full sweep of the seed\nname = \"full\"\nrates_a = [0.5, 1, 2, 4, 8, 16, 32]\nshape_a = [4096, 256]\n\
                 inputs_b = [512, 4096, 32768]\noutputs_b = [64, 256, 1024]\nduration_s = 60\nwarmup_s = 10\n\
                 min_completed = 200\ninflight_cap = 256\nlaunches = 1\n"
                    .to_owned(),
            ),
            run_configs,
        },
        cells,
        per_launch: Vec::new(),
        reference_rates: ReferenceRates {
            schema_version: 1,
            ref_safe,
            ref_load,
            configs_considered: configs.iter().map(|c| (*c).to_owned()).collect(),
            saturation_rate: sat_rates,
            notes,
        },
        taxes: tax_list,
        calibration: Vec::new(),
        warnings: vec![
            "nixl_both/A/r32_i4096_o256: 212 requests dropped at the in-flight cap (256)".to_owned(),
            "plain/B/r4_i32768_o1024: cell extended to 118 s to reach 200 completed requests".to_owned(),
        ],
    };
    let verdicts = verdicts(&summary.taxes, false);
    AnalysisResult {
        summary,
        verdicts,
        step_ecdf,
    }
}

/// Step timing unavailable (figures 6 and 7 become notes).
pub fn without_step_timing(mut r: AnalysisResult) -> AnalysisResult {
    r.summary.dataset.step_timing_available = false;
    r.step_ecdf.clear();
    for c in r.summary.cells.iter_mut() {
        c.step = None;
    }
    for t in r.summary.taxes.iter_mut() {
        t.step_p50_us = None;
        t.callback_p50_us = None;
        t.step_minus_callback_us = None;
    }
    if let Some(p) = r.summary.dataset.preflight.as_mut() {
        p.step_timing_available = Some(false);
        p.step_timing_reason = Some(
            "patch did not apply: Scheduler.update_from_output moved (marker not found)".to_owned(),
        );
    }
    r
}

/// Drops a config everywhere and records it as skipped with `reason`.
pub fn without_config(mut r: AnalysisResult, config: &str, reason: &str) -> AnalysisResult {
    let s = &mut r.summary;
    s.cells.retain(|c| c.key.config != config);
    s.taxes.retain(|t| t.config != config);
    s.dataset.configs.retain(|c| c != config);
    s.dataset
        .skipped
        .insert(config.to_owned(), reason.to_owned());
    s.dataset
        .manifest
        .retain(|m| m.config != config || m.stage == "preflight");
    for m in s.dataset.manifest.iter_mut().filter(|m| m.config == config) {
        m.status = "skip".to_owned();
        m.reason = Some(reason.to_owned());
    }
    if let Some(p) = s.dataset.preflight.as_mut() {
        p.configs.insert(
            config.to_owned(),
            PreflightEntry {
                decision: "skip".to_owned(),
                reason: Some(reason.to_owned()),
                log: Some(format!("preflight/verify_{config}.log")),
                checked_unix_ms: Some(1_763_633_700_000),
            },
        );
    }
    s.reference_rates.saturation_rate.remove(config);
    s.reference_rates.configs_considered.retain(|c| c != config);
    r.step_ecdf.remove(config);
    let taxes = r.summary.taxes.clone();
    r.verdicts = verdicts(&taxes, r.verdicts.simulated);
    r
}

/// The degraded dataset the seed plans for: no step timing, noop_connector and mooncake_consumer
/// skipped by the pre-flight, one incomplete cell whose server error text contains HTML.
pub fn degraded_result() -> AnalysisResult {
    let r = demo_result();
    let r = without_step_timing(r);
    let r = without_config(
        r,
        "noop_connector",
        "verify_noop_connector: ImportError: cannot import name 'KVConnectorBase_V1' (<module 'vllm.distributed'>)",
    );
    let mut r = without_config(
        r,
        "mooncake_consumer",
        "verify_kv_consumer: /v1/models did not answer 200 within 300 s",
    );
    if let Some(c) = r
        .summary
        .cells
        .iter_mut()
        .find(|c| c.key.config == "nixl_both" && c.key.phase == Phase::B)
    {
        c.complete = false;
        c.counts.errors = 17;
        c.incomplete_reasons.push(
            "17 requests failed: HTTP 500 <html><body>Internal Server Error</body></html>"
                .to_owned(),
        );
    }
    r.summary.warnings.push(
        "nixl_both/B/r4_i512_o64: server error text: <html><body><h1>500 Internal Server Error</h1></body></html>"
            .to_owned(),
    );
    r
}

/// A config name and error texts built to break naive escaping.
pub const HOSTILE_NAME: &str = "<script>alert(1)</script>&\"x|y";

/// The demo dataset with `lmcache_only` renamed to [`HOSTILE_NAME`] everywhere, HTML in error
/// texts and Markdown control characters in reasons.
pub fn hostile_result() -> AnalysisResult {
    let mut r = demo_result();
    let old = "lmcache_only";
    let s = &mut r.summary;
    for c in s.cells.iter_mut().filter(|c| c.key.config == old) {
        c.key.config = HOSTILE_NAME.to_owned();
        c.complete = false;
        c.incomplete_reasons
            .push("<img src=x onerror=alert(2)> | **bold** `tick`".to_owned());
    }
    for t in s.taxes.iter_mut().filter(|t| t.config == old) {
        t.config = HOSTILE_NAME.to_owned();
    }
    for c in s.dataset.configs.iter_mut().filter(|c| *c == old) {
        *c = HOSTILE_NAME.to_owned();
    }
    for m in s.dataset.manifest.iter_mut().filter(|m| m.config == old) {
        m.config = HOSTILE_NAME.to_owned();
        m.launch_command = Some(format!("bash launch/x.sh '{HOSTILE_NAME}' ``` </pre>"));
        m.reason = Some("</td><script>alert(3)</script>".to_owned());
    }
    if let Some(v) = s.reference_rates.saturation_rate.remove(old) {
        s.reference_rates
            .saturation_rate
            .insert(HOSTILE_NAME.to_owned(), v);
    }
    s.dataset.skipped.insert(
        "nixl_both<b>".to_owned(),
        "HTTP 502 <html><script>alert(4)</script></html> | [link](javascript:alert(5))".to_owned(),
    );
    s.dataset.profile = Some(format!(
        "name = \"{HOSTILE_NAME}\"\n```\n</pre><script>alert(6)</script>\n"
    ));
    s.warnings.push(format!(
        "server said: <script>alert(7)</script> for {HOSTILE_NAME}"
    ));
    if let Some(v) = r.step_ecdf.remove(old) {
        r.step_ecdf.insert(HOSTILE_NAME.to_owned(), v);
    }
    for v in r
        .verdicts
        .hypotheses
        .iter_mut()
        .chain(r.verdicts.success_criteria.iter_mut())
    {
        if v.id == "h4" {
            v.reason = format!("{} <script>alert(8)</script>", v.reason);
        }
    }
    r
}

/// Marks the dataset as served by the simulator.
pub fn simulated(mut r: AnalysisResult) -> AnalysisResult {
    r.summary.dataset.simulated = true;
    r.verdicts.simulated = true;
    r
}
