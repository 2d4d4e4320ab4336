//! The analysis engine and the verdicts on synthetic archives with known truth
//! (connector_tax::synth), through the same pipeline as `ctax analyze`. Each test states the
//! truth it injects and what the engine must conclude.

use connector_tax::analysis::AnalyzeOptions;
use connector_tax::analysis::model::{AaTax, AnalysisResult, Detection, TaxContext};
use connector_tax::pipeline::evaluate;
use connector_tax::synth::{SynthConfig, SynthSpec, generate};
use connector_tax::verdicts::{VerdictKind, Verdicts};
use ctax_schema::Phase;

/// The analysis and its verdicts.
struct R {
    summary: connector_tax::analysis::model::AnalysisSummary,
    step_ecdf: std::collections::BTreeMap<String, Vec<f64>>,
    verdicts: Verdicts,
}

/// Ingest and evaluate a results root as `ctax analyze` does (ITL skipped).
fn analyze(root: &std::path::Path) -> (AnalysisResult, Verdicts) {
    let ds = connector_tax::ingest::load(root).unwrap();
    evaluate(
        &ds,
        &AnalyzeOptions {
            skip_itl: true,
            ..Default::default()
        },
    )
    .unwrap()
}

fn run(spec: &SynthSpec) -> R {
    let dir = tempfile::tempdir().unwrap();
    generate(spec, dir.path()).unwrap();
    let (a, verdicts) = analyze(dir.path());
    R {
        summary: a.summary,
        step_ecdf: a.step_ecdf,
        verdicts,
    }
}

/// Two launches per config (with one, no tax can be detected: launch noise unknown).
fn spec(configs: Vec<SynthConfig>) -> SynthSpec {
    SynthSpec {
        configs,
        launches: 2,
        phase_a_rates: vec![1.0, 2.0, 4.0],
        requests_per_cell: 400,
        ..Default::default()
    }
}

/// The reason text of verdict `id` (a hypothesis or a success criterion).
fn reason_of(v: &Verdicts, id: &str) -> String {
    v.hypotheses
        .iter()
        .chain(&v.success_criteria)
        .find(|x| x.id == id)
        .unwrap_or_else(|| panic!("no verdict {id}"))
        .reason
        .clone()
}

/// plain, noop_connector whose launch 1 alone ran 60% slower (a degraded server), and
/// mooncake_both, two launches each ([`spec`]).
fn slow_noop_spec() -> SynthSpec {
    spec(vec![
        SynthConfig::new("plain", 1.0, 1.0),
        SynthConfig {
            slow_launch: Some((1, 1.6)),
            ..SynthConfig::new("noop_connector", 1.0, 1.0)
        },
        SynthConfig::new("mooncake_both", 1.0, 1.0),
    ])
}

/// `config`'s A/A tax at ref_safe.
fn ref_safe_aa<'a>(r: &'a R, config: &str) -> &'a AaTax {
    r.summary
        .aa_taxes
        .iter()
        .find(|a| a.config == config && a.context == TaxContext::RefSafe)
        .unwrap_or_else(|| panic!("A/A of {config} at ref_safe"))
}

fn ref_safe_tax<'a>(r: &'a R, config: &str) -> &'a connector_tax::analysis::model::Tax {
    r.summary
        .taxes
        .iter()
        .find(|t| t.config == config && t.context == TaxContext::RefSafe)
        .expect("tax at ref_safe")
}

/// Truth: mooncake_both's TTFT is plain's × 1.20 (a 20% tax) at every rate, no queueing.
#[test]
fn injected_20_percent_ttft_tax_is_recovered() {
    let r = run(&spec(vec![
        SynthConfig::new("plain", 1.0, 1.0),
        SynthConfig::new("mooncake_both", 1.20, 1.0),
    ]));
    assert_eq!(r.summary.reference_rates.ref_safe, Some(4.0));
    let t = ref_safe_tax(&r, "mooncake_both").ttft_p90.as_ref().unwrap();
    let (lo, hi) = (t.value.lo.unwrap(), t.value.hi.unwrap());
    assert!(
        lo <= 0.20 && 0.20 <= hi,
        "CI [{lo}, {hi}] must cover the injected 20%"
    );
    assert!(
        (t.value.est - 0.20).abs() < 0.06,
        "estimate {}",
        t.value.est
    );
    assert_eq!(t.detection, Detection::Tax);
    // TPOT was not taxed: its CI must not claim a tax.
    let tp = ref_safe_tax(&r, "mooncake_both").tpot_p90.as_ref().unwrap();
    assert_ne!(tp.detection, Detection::Tax, "TPOT tax {:?}", tp.value);
    let h1 = r.verdicts.hypotheses.iter().find(|v| v.id == "h1").unwrap();
    assert_eq!(h1.verdict, VerdictKind::Supported, "{}", h1.reason);
}

/// Truth: noop_connector is identical to plain (0% tax) — only sampling noise differs.
#[test]
fn zero_tax_with_noise_is_inconclusive_not_a_false_tax() {
    let r = run(&spec(vec![
        SynthConfig::new("plain", 1.0, 1.0),
        SynthConfig::new("noop_connector", 1.0, 1.0),
    ]));
    let t = ref_safe_tax(&r, "noop_connector");
    assert_eq!(
        t.ttft_p90.as_ref().unwrap().detection,
        Detection::Inconclusive
    );
    assert_eq!(
        t.tpot_p90.as_ref().unwrap().detection,
        Detection::Inconclusive
    );
}

/// Over many seeds, a 0% tax is called a tax at about the CI's error rate (2.5% per side), not
/// more. 40 seeds: expected ~1 false "tax"; allow up to 4 (binomial(40, 0.025) exceeds 4 with
/// probability < 0.5%).
#[test]
fn zero_tax_false_positive_rate_is_bounded() {
    let mut false_taxes = 0;
    for seed in 0..40u64 {
        let mut s = spec(vec![
            SynthConfig::new("plain", 1.0, 1.0),
            SynthConfig::new("noop_connector", 1.0, 1.0),
        ]);
        s.seed = 1000 + seed;
        s.phase_a_rates = vec![2.0];
        s.requests_per_cell = 200;
        s.with_steps = false;
        let r = run(&s);
        if ref_safe_tax(&r, "noop_connector")
            .ttft_p90
            .as_ref()
            .unwrap()
            .detection
            == Detection::Tax
        {
            false_taxes += 1;
        }
    }
    assert!(false_taxes <= 4, "{false_taxes}/40 false taxes");
}

/// Truth: nixl_both was skipped by the pre-flight, lmcache/multi never ran.
#[test]
fn skipped_config_makes_dependent_hypotheses_not_testable() {
    let mut s = spec(vec![
        SynthConfig::new("plain", 1.0, 1.0),
        SynthConfig::new("mooncake_both", 1.3, 1.1),
    ]);
    s.skipped = vec![(
        "nixl_both".into(),
        "RuntimeError: NIXL is not available".into(),
    )];
    let r = run(&s);
    let v = |id: &str| {
        r.verdicts
            .hypotheses
            .iter()
            .chain(&r.verdicts.success_criteria)
            .find(|v| v.id == id)
            .unwrap()
            .clone()
    };
    let h2 = v("h2");
    assert_eq!(h2.verdict, VerdictKind::NotTestable);
    assert!(
        h2.reason.contains("nixl_both") && h2.reason.contains("NIXL is not available"),
        "{}",
        h2.reason
    );
    let h4 = v("h4");
    assert_eq!(h4.verdict, VerdictKind::NotTestable);
    assert!(h4.reason.contains("lmcache_only"), "{}", h4.reason);
    assert_eq!(v("sc2").verdict, VerdictKind::NotTestable);
    assert_eq!(v("h5").verdict, VerdictKind::NotTestable, "no Phase B ran");
    assert_eq!(
        r.summary.dataset.skipped["nixl_both"],
        "pre-flight SKIP: RuntimeError: NIXL is not available"
    );
    // SC6 fails: lmcache_only has no data and no SKIP reason in preflight_status.json.
    let sc6 = v("sc6");
    assert_eq!(sc6.verdict, VerdictKind::Refuted);
    assert!(
        sc6.reason.contains("no SKIP reason for lmcache_only"),
        "{}",
        sc6.reason
    );
}

/// Truth: a healthy server (capacity far above the rate) with long outputs: each request
/// takes ~20 s (2000 tokens × 10 ms), far longer than the 2-request warm-up. A drain tail
/// this long must not make any rate look saturated.
#[test]
fn long_drain_tail_is_not_saturation() {
    let mut s = spec(vec![SynthConfig::new("plain", 1.0, 1.0)]);
    s.phase_a_shape = (512, 2000);
    s.max_events = Some(50);
    s.warmup_requests = 2;
    s.requests_per_cell = 120;
    s.sigma = 0.1;
    let r = run(&s);
    for c in r.summary.cells.iter().filter(|c| c.launch.is_none()) {
        let sat = c.saturation.as_ref().unwrap();
        assert!(!sat.any, "rate {} flagged: {:?}", c.rate, sat);
        let ratio = c.effective_rps.unwrap() / c.offered_rps;
        assert!(ratio > 0.97, "rate {}: effective/offered = {ratio}", c.rate);
    }
    assert_eq!(r.summary.reference_rates.ref_safe, Some(4.0));
}

/// Truth: plain can start 3 requests/s. At 4 and 8 req/s the queue grows without bound.
#[test]
fn overload_is_flagged_with_the_criteria_that_fired() {
    let mut s = spec(vec![SynthConfig {
        capacity_rps: 3.0,
        ..SynthConfig::new("plain", 1.0, 1.0)
    }]);
    s.phase_a_rates = vec![1.0, 2.0, 4.0, 8.0];
    s.requests_per_cell = 200;
    let r = run(&s);
    let cell = |rate: f64| {
        r.summary
            .cells
            .iter()
            .find(|c| c.launch.is_none() && c.rate == rate)
            .unwrap()
    };
    let s4 = cell(4.0).saturation.clone().unwrap();
    assert!(
        s4.throughput.fired,
        "throughput criterion: {:?}",
        s4.throughput
    );
    assert!(
        (s4.throughput.value.unwrap() - 0.75).abs() < 0.05,
        "effective/offered ≈ 3/4: {:?}",
        s4.throughput.value
    );
    assert!(s4.queue.fired, "queue criterion: {:?}", s4.queue);
    assert!(
        s4.ttft_growth.fired,
        "ttft growth criterion: {:?}",
        s4.ttft_growth
    );
    assert!(s4.saturated && cell(8.0).saturation.as_ref().unwrap().saturated);
    assert!(!cell(2.0).saturation.as_ref().unwrap().any);
    let refs = &r.summary.reference_rates;
    assert_eq!(refs.saturation_rate["plain"], Some(4.0));
    assert_eq!((refs.ref_safe, refs.ref_load), (Some(2.0), Some(2.0)));
}

/// Truth (queue arithmetic): mooncake_both l2 alone starts 3.98 requests/s. At 4 req/s each
/// request waits 1/3.98 − 1/4 s ≈ 1.26 ms longer than the one before, ~0.26 s by the 210th,
/// against a TTFT of 200 ms × lognormal(σ 0.25) (p90 ≈ 276 ms): its own TTFT p90 there is
/// roughly 276 + 0.8 × 264 ms ≈ 1.6–1.7× its p90 at 2 req/s, so G fires, while its completion
/// pace 3.98/4 keeps T quiet. Its five other launches and plain keep up. Pooled over six
/// launches fewer than 10% of the requests (l2's late ones) lie above the others' p90, so the
/// pooled p90 grows well under 1.5× and the cell is not saturated: 4 req/s is ref_safe and the
/// taxes there pool l2. The analysis names l2's own saturation rate and warns.
#[test]
fn a_launch_saturated_on_its_own_is_named_where_the_pool_is_not() {
    let mut mb = SynthConfig::new("mooncake_both", 1.0, 1.0);
    mb.launch_capacity = Some((2, 3.98));
    let mut s = spec(vec![SynthConfig::new("plain", 1.0, 1.0), mb]);
    s.launches = 6;
    s.requests_per_cell = 200;
    let r = run(&s);
    let refs = &r.summary.reference_rates;
    assert_eq!(
        refs.saturation_rate["mooncake_both"], None,
        "{:?}",
        refs.notes
    );
    assert_eq!(refs.ref_safe, Some(4.0), "{:?}", refs.notes);
    let own: Vec<_> = r
        .summary
        .launch_saturation
        .iter()
        .filter(|l| l.config == "mooncake_both")
        .collect();
    assert_eq!(own.len(), 6);
    for l in &own {
        if l.launch == 2 {
            assert_eq!(l.rate, Some(4.0), "{l:?}");
            assert!(
                l.criteria.contains('G') && !l.criteria.contains('T'),
                "{l:?}"
            );
            assert_eq!(l.cell, "r4_i4096_o256");
            assert_eq!(l.rates, vec![1.0, 2.0, 4.0]);
        } else {
            assert_eq!(l.rate, None, "{l:?}");
        }
    }
    assert!(
        r.summary
            .launch_saturation
            .iter()
            .filter(|l| l.config == "plain")
            .all(|l| l.rate.is_none())
    );
    // The launch's own rows carry its own criteria; the pooled row does not fire.
    let row = |launch: Option<u32>, rate: f64| {
        r.summary
            .cells
            .iter()
            .chain(&r.summary.per_launch)
            .find(|c| c.key.config == "mooncake_both" && c.launch == launch && c.rate == rate)
            .and_then(|c| c.saturation.clone())
            .unwrap()
    };
    let l2_at_4 = row(Some(2), 4.0);
    let growth = l2_at_4.ttft_growth.value.unwrap();
    assert!(
        l2_at_4.saturated && growth > 1.5 && growth < 1.9,
        "{l2_at_4:?}"
    );
    let pooled = row(None, 4.0).ttft_growth.value.unwrap();
    assert!(pooled < 1.4, "pooled G {pooled}");
    assert!(!row(Some(2), 2.0).saturated);
    assert!(!row(Some(0), 4.0).saturated);
    assert!(!row(None, 4.0).any, "{:?}", row(None, 4.0));
    let warned: Vec<&String> = r
        .summary
        .warnings
        .iter()
        .filter(|w| w.contains("saturated on its own"))
        .collect();
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].starts_with("mooncake_both l2 is saturated on its own from 4 req/s")
            && warned[0].contains("at no rate measured")
            && warned[0].contains("ref_safe and ref_load (4 req/s)"),
        "{}",
        warned[0]
    );
}

/// Truth (queue arithmetic): lmcache_only starts 1.8 requests/s; Phase B runs every shape at
/// 2 req/s, so its queue grows by 0.2 requests/s in every Phase B cell: completion pace
/// 1.8/2 = 0.90 < 0.95 (T) and, over a 100-s window, a waiting p50 of ~10 (Q). G is not
/// evaluated (one rate per shape). Phase A at 0.5 and 1 req/s is below its capacity, and plain
/// keeps up everywhere. Its Phase B cells are flagged and warned, its Phase A and plain's are
/// not.
#[test]
fn a_phase_b_cell_that_queues_is_flagged_by_throughput_and_queue() {
    let mut lm = SynthConfig::new("lmcache_only", 1.0, 1.0);
    lm.capacity_rps = 1.8;
    let mut s = spec(vec![SynthConfig::new("plain", 1.0, 1.0), lm]);
    s.phase_a_rates = vec![0.5, 1.0];
    s.phase_b_shapes = vec![(512, 64), (4096, 256)];
    s.phase_b_rate = 2.0;
    s.requests_per_cell = 200;
    let r = run(&s);
    for c in r.summary.cells.iter().chain(&r.summary.per_launch) {
        let sat = c.saturation.as_ref().unwrap_or_else(|| panic!("{c:?}"));
        let queued = c.key.config == "lmcache_only" && c.key.phase == Phase::B;
        assert_eq!(
            sat.saturated, queued,
            "{} {} {}: {sat:?}",
            c.key.config, c.key.phase, c.key.cell
        );
        if queued {
            assert!(sat.throughput.fired && sat.queue.fired, "{sat:?}");
            let pace = sat.throughput.value.unwrap();
            assert!((pace - 0.9).abs() < 0.03, "{sat:?}");
        }
        if c.key.phase == Phase::B {
            assert!(!sat.ttft_growth.fired && sat.ttft_growth.value.is_none());
        }
    }
    let warned: Vec<&String> = r
        .summary
        .warnings
        .iter()
        .filter(|w| w.contains("fired at the phase's one rate"))
        .collect();
    assert_eq!(warned.len(), 2, "{warned:?}");
    assert!(
        warned
            .iter()
            .all(|w| w.starts_with("lmcache_only Phase B r2_i")
                && w.contains("criteria TQ fired at the phase's one rate (2 req/s)"))
    );
}

/// Truth: plain saturates above 6 req/s, mooncake_both above 3 req/s.
#[test]
fn reference_rates_follow_the_seed_definitions() {
    let mut s = spec(vec![
        SynthConfig {
            capacity_rps: 6.0,
            ..SynthConfig::new("plain", 1.0, 1.0)
        },
        SynthConfig {
            capacity_rps: 3.0,
            ..SynthConfig::new("mooncake_both", 1.1, 1.0)
        },
    ]);
    s.phase_a_rates = vec![1.0, 2.0, 4.0, 8.0];
    s.requests_per_cell = 200;
    let r = run(&s);
    let refs = &r.summary.reference_rates;
    assert_eq!(refs.ref_safe, Some(2.0), "{:?}", refs.notes);
    assert_eq!(refs.ref_load, Some(4.0), "{:?}", refs.notes);
    // Only mooncake_both's knee (4 req/s) keeps ref_safe below plain's unsaturated 4 req/s.
    assert!(
        refs.notes.iter().any(|n| n
            == "ref_safe is held at 2 req/s by mooncake_both (saturated at 4 req/s): every other config is unsaturated at 4 req/s"),
        "{:?}",
        refs.notes
    );
    assert!(
        r.summary
            .taxes
            .iter()
            .any(|t| t.context == TaxContext::RefLoad && t.rate == 4.0)
    );
}

/// Truth: every step of mooncake_both is 150 µs longer than plain's, of which 100 µs are
/// instrumented callbacks (50 µs unexplained).
#[test]
fn step_taxes_are_recovered() {
    let mut s = spec(vec![
        SynthConfig {
            callback_us: None,
            ..SynthConfig::new("plain", 1.0, 1.0)
        },
        SynthConfig {
            step_extra_us: 150.0,
            callback_us: Some(100.0),
            ..SynthConfig::new("mooncake_both", 1.0, 1.0)
        },
    ]);
    s.phase_a_rates = vec![1.0];
    let r = run(&s);
    let t = ref_safe_tax(&r, "mooncake_both");
    let covers = |v: &connector_tax::analysis::model::TaxValue, truth: f64, tol: f64| {
        assert!(
            (v.value.est - truth).abs() < tol,
            "estimate {} vs {truth}",
            v.value.est
        );
        assert!(
            v.value.lo.unwrap() <= truth + tol && v.value.hi.unwrap() >= truth - tol,
            "{:?}",
            v.value
        );
    };
    // Medians: callbacks are lognormal(σ=0.1) around 100 → median 100; step 2000·LN(0.2)+150
    // around the same base for both → difference of medians ≈ 150.
    covers(t.step_p50_us.as_ref().unwrap(), 150.0, 60.0);
    covers(t.callback_p50_us.as_ref().unwrap(), 100.0, 5.0);
    covers(t.step_minus_callback_us.as_ref().unwrap(), 50.0, 60.0);
    assert_eq!(
        t.callback_p50_us.as_ref().unwrap().detection,
        Detection::Tax
    );
    assert!(r.summary.dataset.step_timing_available);
    assert!(r.step_ecdf.contains_key("plain") && r.step_ecdf.contains_key("mooncake_both"));
}

/// Same input, same seed → byte-identical summary and verdicts.
#[test]
fn analysis_is_deterministic() {
    let s = spec(vec![
        SynthConfig::new("plain", 1.0, 1.0),
        SynthConfig::new("noop_connector", 1.05, 1.0),
    ]);
    let dir = tempfile::tempdir().unwrap();
    generate(&s, dir.path()).unwrap();
    let ds = connector_tax::ingest::load(dir.path()).unwrap();
    let (a, va) = evaluate(&ds, &AnalyzeOptions::default()).unwrap();
    let (b, vb) = evaluate(&ds, &AnalyzeOptions::default()).unwrap();
    assert_eq!(
        serde_json::to_string(&a.summary).unwrap(),
        serde_json::to_string(&b.summary).unwrap()
    );
    assert_eq!(
        serde_json::to_string(&va).unwrap(),
        serde_json::to_string(&vb).unwrap()
    );
}

/// Truth: every config ran ONE launch, with a real 20% tax. The launch-to-launch variance is then
/// unknown: the tax is not called detected (whatever its request-level CI says) and H1 is
/// inconclusive with the reason, not supported.
#[test]
fn one_launch_per_config_detects_nothing_and_says_why() {
    let mut s = spec(vec![
        SynthConfig::new("plain", 1.0, 1.0),
        SynthConfig::new("mooncake_both", 1.20, 1.0),
    ]);
    s.launches = 1;
    let r = run(&s);
    assert!(!r.summary.launch_noise.ttft_known());
    let t = ref_safe_tax(&r, "mooncake_both").ttft_p90.clone().unwrap();
    assert!(
        t.value.lo.unwrap() > 0.0,
        "the request-level CI alone excludes 0: {:?}",
        t.value
    );
    assert_eq!(t.detection, Detection::NoLaunchNoise);
    let h1 = r.verdicts.hypotheses.iter().find(|v| v.id == "h1").unwrap();
    assert_eq!(h1.verdict, VerdictKind::Inconclusive, "{}", h1.reason);
    assert!(
        h1.reason
            .contains("launch-to-launch variance unknown (one launch per config)"),
        "{}",
        h1.reason
    );
    assert!(
        r.summary
            .warnings
            .iter()
            .any(|w| w.contains("launch-to-launch variance unknown"))
    );
}

/// Truth: a 20% tax, launch-level sd 10% on every latency, three launches per config. The pooled
/// launch noise is estimated near 10% and the tax CI is wider than the request-level CI of the
/// same data with one launch's worth of noise left out (it carries the launch variance).
#[test]
fn launch_noise_is_estimated_and_widens_the_tax_ci() {
    let mut s = spec(vec![
        SynthConfig::new("plain", 1.0, 1.0),
        SynthConfig::new("mooncake_both", 1.20, 1.0),
    ]);
    s.launches = 3;
    s.launch_sigma = 0.10;
    let r = run(&s);
    let pv = r.summary.launch_noise.metrics["ttft_p90"];
    // 2 configs x 3 unsaturated cells with 3 launches each: 12 within-cell df, but a launch's
    // level is shared by its 3 cells, so the independent contrasts are 2 x (3 - 1) = 4.
    assert_eq!(pv.df, 4);
    // Launch sd 0.10 plus each launch's own p90 sampling sd (~0.25 * 1.7 / sqrt(400) ~ 0.02):
    // sqrt(0.10^2 + 0.02^2) ~ 0.102 on the log scale; with 4 independent contrasts the estimate
    // lies within [0.03, 0.20] with probability > 99% (chi-square(4) quantiles 0.207 and 14.86:
    // 0.102 * sqrt(0.207/4) = 0.023, 0.102 * sqrt(14.86/4) = 0.197).
    let sd = pv.var.sqrt();
    assert!((0.023..0.197).contains(&sd), "pooled launch sd {sd}");
    // ref_safe (4 req/s) has 2 x (3 - 1) = 4 contrasts of its own (MIN_CELL_DF): its tax
    // carries that cell's variance, with the same df.
    let own = r.summary.launch_noise.cells["A/r4_i4096_o256"]["ttft_p90"];
    assert_eq!(own.df, 4);
    let sd = own.var.sqrt();
    let t = ref_safe_tax(&r, "mooncake_both").ttft_p90.clone().unwrap();
    let width = t.value.hi.unwrap() - t.value.lo.unwrap();
    // A t(4) interval of a difference of two 3-launch means: 2 * 2.776 * sd * sqrt(2/3) * 1.2
    // (t table), on the ratio scale near 1.2.
    let expect = 2.0 * 2.776 * sd * (2.0f64 / 3.0).sqrt() * 1.2;
    assert!(
        width > 0.7 * expect && width < 1.6 * expect,
        "CI width {width} vs t-interval {expect}"
    );
    assert!(t.value.lo.unwrap() <= 0.20 && 0.20 <= t.value.hi.unwrap());
}

/// Per config, by hand from the summary's per-launch estimates in Phase A cell `cell`: the sum
/// of squares of its launches' log TTFT p90s about their mean, and its df (launches - 1).
fn ttft_p90_ss_df(r: &R, cell: &str) -> std::collections::BTreeMap<String, (f64, usize)> {
    let mut by: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for c in &r.summary.per_launch {
        if c.key.cell == cell && c.key.phase == ctax_schema::Phase::A {
            by.entry(c.key.config.clone())
                .or_default()
                .push(c.ttft_ms.p90.as_ref().unwrap().est.ln());
        }
    }
    by.into_iter()
        .map(|(config, v)| {
            let m = v.iter().sum::<f64>() / v.len() as f64;
            let ss = v.iter().map(|y| (y - m).powi(2)).sum::<f64>();
            (config, (ss, v.len() - 1))
        })
        .collect()
}

/// Truth: plain, mooncake_both (a 20% TTFT tax) and nixl_both (none), 3 launches each; every
/// launch has a 3% level shared by its cells, and at 2 req/s alone an extra level of sd 30%
/// (a cell whose launches spread more than the others', as near a knee; here it is not the
/// ref_safe cell, so the test shows the quiet cell keeping its own narrow noise). The launch noise is
/// estimated per cell: at 2 req/s it is the one-way ANOVA of the per-launch log p90s there
/// (computed here by hand from the summary's per-launch estimates), df 3 x (3 - 1) = 6, far
/// above 4 req/s's; the ref_safe tax (4 req/s) carries the quiet cell's noise — a t(6)
/// interval from that cell's sd — and detects the 20% tax, which the variance pooled over the
/// three cells (inflated by 2 req/s) would blur.
#[test]
fn launch_noise_is_estimated_per_cell() {
    let mut s = spec(vec![
        SynthConfig::new("plain", 1.0, 1.0),
        SynthConfig::new("mooncake_both", 1.20, 1.0),
        SynthConfig::new("nixl_both", 1.0, 1.0),
    ]);
    s.launches = 3;
    s.launch_sigma = 0.03;
    s.launch_sigma_at = vec![(2.0, 0.30)];
    let r = run(&s);
    assert_eq!(r.summary.reference_rates.ref_safe, Some(4.0));
    let noise = &r.summary.launch_noise;
    // One-way ANOVA by hand: per config, the log p90s of its launches in the cell; SS about
    // the config's mean, summed, over df = sum of (launches - 1).
    let anova = |cell: &str| {
        let (ss, df) = ttft_p90_ss_df(&r, cell)
            .into_values()
            .fold((0.0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        (ss / df as f64, df)
    };
    let (noisy, quiet) = ("A/r2_i4096_o256", "A/r4_i4096_o256");
    for (tag, cell) in [(noisy, "r2_i4096_o256"), (quiet, "r4_i4096_o256")] {
        let pv = noise.cells[tag]["ttft_p90"];
        let (var, df) = anova(cell);
        assert_eq!(pv.df as usize, df, "{tag}");
        assert_eq!(df, 6);
        assert!((pv.var - var).abs() < 1e-12, "{tag}: {} vs {var}", pv.var);
    }
    let (v2, v4) = (
        noise.cells[noisy]["ttft_p90"].var,
        noise.cells[quiet]["ttft_p90"].var,
    );
    let pooled = noise.metrics["ttft_p90"].var;
    assert!(v2 > 4.0 * v4, "2 req/s {v2} vs 4 req/s {v4}");
    assert!(pooled > v4 && pooled < v2, "pooled {pooled}");
    assert_eq!(
        noise
            .variance_of(
                "ttft_p90",
                ctax_schema::Phase::A,
                "r4_i4096_o256",
                "mooncake_both"
            )
            .map(|p| p.var),
        Some(v4)
    );
    let t = ref_safe_tax(&r, "mooncake_both").ttft_p90.clone().unwrap();
    let width = t.value.hi.unwrap() - t.value.lo.unwrap();
    // t(6, 0.975) = 2.447 (t table); two 3-launch means; ratio scale near 1.2.
    let expect = 2.0 * 2.447 * v4.sqrt() * (2.0f64 / 3.0).sqrt() * 1.2;
    assert!(
        width > 0.7 * expect && width < 1.6 * expect,
        "CI width {width} vs t-interval {expect}"
    );
    assert!(t.value.lo.unwrap() <= 0.20 && 0.20 <= t.value.hi.unwrap());
    assert_eq!(t.detection, Detection::Tax, "{:?}", t.value);
}

/// Truth: three launches each; mooncake_both is a 20% TTFT tax, lmcache_only a 100% one whose
/// launches alone spread widely (an extra per-launch lognormal level, sigma 0.4, against 0.03 for
/// every config). The screen gives lmcache_only its own variance in the ref_safe cell (its F
/// against the other three configs' pool, by hand, with a Holm-adjusted p below 1%) and no other
/// config one; the cell's pool is the one-way ANOVA of plain, mooncake_both and nixl_both alone
/// (by hand, df 6). So mooncake_both's CI is the t(6) interval of the quiet pool — at least 2.5x
/// narrower than the pool with lmcache_only in it would give — and still detects the 20% tax;
/// lmcache_only's own CI (df 2) is wider than the quiet pool allows and covers its 100%.
#[test]
fn a_config_whose_launches_spread_more_carries_its_own_noise() {
    let mut s = spec(vec![
        SynthConfig::new("plain", 1.0, 1.0),
        SynthConfig::new("mooncake_both", 1.20, 1.0),
        SynthConfig::new("nixl_both", 1.0, 1.0),
        SynthConfig {
            launch_sigma_extra: 0.4,
            ..SynthConfig::new("lmcache_only", 2.0, 1.0)
        },
    ]);
    s.launches = 3;
    s.launch_sigma = 0.03;
    let r = run(&s);
    assert_eq!(r.summary.reference_rates.ref_safe, Some(4.0));
    let noise = &r.summary.launch_noise;
    let (cell, tag) = ("r4_i4096_o256", "A/r4_i4096_o256");
    let by_config = ttft_p90_ss_df(&r, cell);
    let ss_df = |config: &str| by_config[config];
    let quiet = ["plain", "mooncake_both", "nixl_both"];
    let (ss_q, df_q) = quiet
        .iter()
        .map(|c| ss_df(c))
        .fold((0.0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    let (ss_l, df_l) = ss_df("lmcache_only");
    assert_eq!((df_q, df_l), (6, 2));
    let (v_quiet, v_loud) = (ss_q / df_q as f64, ss_l / df_l as f64);
    let v_all = (ss_q + ss_l) / (df_q + df_l) as f64;
    let own: Vec<_> = noise
        .own
        .iter()
        .filter(|o| o.metric == "ttft_p90" && o.cell.as_deref() == Some(tag))
        .collect();
    assert_eq!(own.len(), 1, "{:?}", noise.own);
    assert_eq!(own[0].config, "lmcache_only");
    assert!((own[0].variance.var - v_loud).abs() < 1e-12);
    assert!((own[0].f - v_loud / v_quiet).abs() < 1e-9 * own[0].f);
    assert_eq!((own[0].variance.df, own[0].rest_df), (2, 6));
    // F survival for d1 = 2 in closed form: (1 + 2F/d2)^(-d2/2); Holm x 4 configs tested.
    let p = (1.0 + 2.0 * own[0].f / 6.0).powf(-3.0) * 4.0;
    assert!(
        (own[0].p_adjusted - p).abs() < 1e-9,
        "{} vs {p}",
        own[0].p_adjusted
    );
    assert!(p < 0.01);
    let pool = noise.cells[tag]["ttft_p90"];
    assert_eq!(pool.df, 6);
    assert!(
        (pool.var - v_quiet).abs() < 1e-12,
        "{} vs {v_quiet}",
        pool.var
    );
    // (The variances come from a least-squares fit: equal to the hand ANOVA to rounding.)
    let var_of = |config: &str| {
        noise
            .variance_of("ttft_p90", ctax_schema::Phase::A, cell, config)
            .map(|p| p.var)
            .unwrap()
    };
    assert!((var_of("lmcache_only") - v_loud).abs() < 1e-12 * v_loud);
    assert!((var_of("nixl_both") - v_quiet).abs() < 1e-12 * v_quiet);
    let mb = ref_safe_tax(&r, "mooncake_both").ttft_p90.clone().unwrap();
    let width = mb.value.hi.unwrap() - mb.value.lo.unwrap();
    // t(6, 0.975) = 2.447, t(8, 0.975) = 2.306 (t table); two 3-launch means; ratio near 1.2.
    let expect = 2.0 * 2.447 * v_quiet.sqrt() * (2.0f64 / 3.0).sqrt() * 1.2;
    let with_loud = 2.0 * 2.306 * v_all.sqrt() * (2.0f64 / 3.0).sqrt() * 1.2;
    assert!(
        width > 0.7 * expect && width < 1.6 * expect,
        "CI width {width} vs t-interval {expect}"
    );
    assert!(with_loud > 2.5 * width, "{with_loud} vs {width}");
    assert!(mb.value.lo.unwrap() <= 0.20 && 0.20 <= mb.value.hi.unwrap());
    assert_eq!(mb.detection, Detection::Tax, "{:?}", mb.value);
    let lm = ref_safe_tax(&r, "lmcache_only").ttft_p90.clone().unwrap();
    let (lo, hi) = (lm.value.lo.unwrap(), lm.value.hi.unwrap());
    assert!(lo <= 1.0 && 1.0 <= hi, "{:?}", lm.value);
    assert!(hi - lo > 3.0 * expect / 1.2 * 2.0, "{:?}", lm.value);
}

/// Truth: plain, mooncake_both and nixl_both ran two launches each, then nixl_both's second
/// launch is removed. Its taxes still get CIs (the launch noise pooled from plain and
/// mooncake_both), and every verdict resting on it says it rests on a single launch of
/// nixl_both (H2, SC2); those on plain and mooncake_both alone (H1, SC1) do not.
#[test]
fn verdicts_resting_on_a_single_launch_say_so() {
    let s = spec(vec![
        SynthConfig::new("plain", 1.0, 1.0),
        SynthConfig::new("mooncake_both", 1.20, 1.0),
        SynthConfig::new("nixl_both", 1.10, 1.0),
    ]);
    let dir = tempfile::tempdir().unwrap();
    generate(&s, dir.path()).unwrap();
    let l1: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .ends_with("_nixl_both_l1")
        })
        .collect();
    assert_eq!(l1.len(), 1, "{l1:?}");
    std::fs::remove_dir_all(&l1[0]).unwrap();
    let (a, v) = analyze(dir.path());
    assert_eq!(
        a.summary
            .launch_noise
            .launches_of(ctax_schema::Phase::A, "nixl_both"),
        Some(1)
    );
    let note = "rests on a single launch of nixl_both";
    let reason = |id: &str| reason_of(&v, id);
    for id in ["h2", "sc2"] {
        assert!(reason(id).contains(note), "{id}: {}", reason(id));
    }
    for id in ["h1", "sc1", "sc6", "sc7"] {
        assert!(
            !reason(id).contains("single launch"),
            "{id}: {}",
            reason(id)
        );
    }
}

/// Truth: plain and mooncake_both ran Phase A in two launches each and Phase B (a 2×2 shape
/// grid) in ONE launch each, both with launch index 0 (Phase B launches its own servers: its
/// `l0` is not Phase A's `l0`). Launches are counted per phase (A: 2, B: 1), so H5, H6 and SC5,
/// which read the Phase B grid, say they rest on a single Phase B launch of plain and
/// mooncake_both, while H1 and SC1 (Phase A cells) do not.
#[test]
fn launches_are_counted_per_phase() {
    let both = || {
        vec![
            SynthConfig::new("plain", 1.0, 1.0),
            SynthConfig::new("mooncake_both", 1.20, 1.0),
        ]
    };
    let dir = tempfile::tempdir().unwrap();
    generate(&spec(both()), dir.path()).unwrap();
    let b_root = tempfile::tempdir().unwrap();
    let b_spec = SynthSpec {
        configs: both(),
        launches: 1,
        phase_a_rates: vec![],
        phase_b_shapes: vec![(512, 64), (512, 256), (4096, 64), (4096, 256)],
        phase_b_rate: 2.0,
        requests_per_cell: 400,
        seed: 99,
        ..Default::default()
    };
    generate(&b_spec, b_root.path()).unwrap();
    let mut moved = 0;
    for e in std::fs::read_dir(b_root.path()).unwrap().flatten() {
        let name = e.file_name().into_string().unwrap();
        if name.starts_with("20260101-") {
            // A later stamp: the Phase B launches ran after Phase A, as `ctax run` does.
            let new = name.replacen("20260101-", "20260102-", 1);
            let to = dir.path().join(&new);
            std::fs::rename(e.path(), &to).unwrap();
            // config.json names its run directory (ingest refuses a renamed run) ...
            let cfg = to.join("config.json");
            let mut j: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&cfg).unwrap()).unwrap();
            j["run_dir"] = serde_json::Value::String(new);
            // ... and the stage it was launched for, as `ctax run` writes it.
            j["extra"]["stage"] = serde_json::Value::String("B".into());
            std::fs::write(&cfg, serde_json::to_vec(&j).unwrap()).unwrap();
            moved += 1;
        }
    }
    assert_eq!(moved, 2);
    let (a, v) = analyze(dir.path());
    let n = &a.summary.launch_noise;
    for c in ["plain", "mooncake_both"] {
        assert_eq!(n.launches_of(ctax_schema::Phase::A, c), Some(2), "{c}");
        assert_eq!(n.launches_of(ctax_schema::Phase::B, c), Some(1), "{c}");
    }
    let reason = |id: &str| reason_of(&v, id);
    let note = "rests on a single launch in Phase B of plain and mooncake_both";
    for id in ["h5", "h6", "sc5"] {
        assert!(reason(id).contains(note), "{id}: {}", reason(id));
    }
    for id in ["h1", "sc1"] {
        assert!(
            !reason(id).contains("single launch"),
            "{id}: {}",
            reason(id)
        );
    }
}

/// Truth: plain and noop are identical except that noop's launch 1 ran 60% slower (a degraded
/// server). The A/A tax of noop (launch 0 vs 1) excludes 0: the dataset is marked unstable, a
/// loud warning names it, and every tax verdict says so; plain's A/A straddles 0.
#[test]
fn a_detectable_aa_tax_marks_the_dataset_unstable() {
    let mut s = slow_noop_spec();
    s.phase_a_rates = vec![1.0, 1.5, 2.0, 3.0, 4.0];
    let r = run(&s);
    let aa = |c: &str| ref_safe_aa(&r, c);
    assert!(aa("noop_connector").unstable, "{:?}", aa("noop_connector"));
    // Two launches: leaving one out leaves no A/A, so none is named.
    assert_eq!(aa("noop_connector").without_one, None);
    assert!(!aa("plain").unstable, "{:?}", aa("plain"));
    assert_eq!(aa("plain").launches_a, vec![0]);
    assert_eq!(aa("plain").launches_b, vec![1]);
    assert!(r.verdicts.unstable);
    assert!(
        r.summary
            .warnings
            .iter()
            .any(|w| w.starts_with("UNSTABLE DATASET") && w.contains("noop_connector"))
    );
    let h1 = r.verdicts.hypotheses.iter().find(|v| v.id == "h1").unwrap();
    assert!(h1.reason.starts_with("UNSTABLE DATASET"), "{}", h1.reason);
}

/// Truth: four launches of each config on one machine; noop_connector's l1 alone ran 60%
/// slower. Its A/A (l0, l2 vs l1, l3) excludes 0. Left out one at a time, only l1's absence
/// leaves launches that agree (l0, l3 vs l2: the same truth), so the leave-one-out names l1
/// alone, its A/A straddles 0 in TTFT and TPOT, and the warning says so while the dataset stays
/// marked unstable.
#[test]
fn an_unstable_aa_names_the_one_launch_that_makes_it() {
    let mut s = slow_noop_spec();
    s.launches = 4;
    let r = run(&s);
    let aa = ref_safe_aa(&r, "noop_connector");
    assert!(aa.unstable, "{aa:?}");
    assert_eq!(
        (aa.launches_a.clone(), aa.launches_b.clone()),
        (vec![0, 2], vec![1, 3])
    );
    let w = aa.without_one.as_ref().expect("leave-one-out worked out");
    assert_eq!(w.tried, vec![0, 1, 2, 3]);
    let named: Vec<u32> = w.straddling.iter().map(|x| x.launch).collect();
    assert_eq!(named, vec![1], "{w:?}");
    assert_eq!(
        (
            w.straddling[0].launches_a.clone(),
            w.straddling[0].launches_b.clone()
        ),
        (vec![0, 3], vec![2])
    );
    for v in [&w.straddling[0].ttft_p90, &w.straddling[0].tpot_p90] {
        let v = v.as_ref().unwrap().value;
        assert!(v.lo.unwrap() < 0.0 && v.hi.unwrap() > 0.0, "{v:?}");
    }
    assert!(r.verdicts.unstable);
    assert!(
        r.summary
            .warnings
            .iter()
            .any(|x| x.starts_with("UNSTABLE DATASET")
                && x.contains("noop_connector")
                && x.contains(
                ". Without noop_connector l1 alone (the rest: l0, l3 vs l2) it straddles 0 (TTFT p90 "
            )),
        "{:?}",
        r.summary.warnings
    );
}

/// Truth: plain and mooncake_both ran l0 on machine 0 and l1, l2 on machine 1; noop_connector
/// ran l0, l1 on machine 0 and l2 on machine 1, where it alone ran 2x slower (its tax changes
/// between machines). Its A/A (l0 against l1, machine 0) compares two launches that differ by
/// the launch noise and their p90s' request-level error alone: per launch sqrt(0.02^2 +
/// 0.0214^2) = 0.029 in logs (0.0214: a p90 of 400 requests at sigma 0.25), so against the
/// others' pool (df 3) the interval is about +-t(3) * sqrt(2) * 0.029 = +-0.13, ~0.26 wide
/// (by hand). Without noop's own spread (its launches per machine as their mean) the noise
/// model still sees its lack of fit across machines, one degree of freedom that the screen
/// sets apart; an A/A judged against that (a 1-df variance: t quantiles without bound) read
/// [-99.9%, +66384%]. The A/A reads the others' noise instead: required < 0.5 wide.
#[test]
fn an_aa_is_judged_against_the_others_noise_not_its_own_lack_of_fit() {
    let on = |machines: Vec<u32>, c: SynthConfig| SynthConfig { machines, ..c };
    let mut s = spec(vec![
        on(vec![0, 1, 1], SynthConfig::new("plain", 1.0, 1.0)),
        on(vec![0, 1, 1], SynthConfig::new("mooncake_both", 1.0, 1.0)),
        on(
            vec![0, 0, 1],
            SynthConfig {
                slow_launch: Some((2, 2.0)),
                ..SynthConfig::new("noop_connector", 1.0, 1.0)
            },
        ),
    ]);
    s.launches = 3;
    s.launch_sigma = 0.02;
    s.machine_levels = vec![1.0, 0.9];
    let r = run(&s);
    let aa = ref_safe_aa(&r, "noop_connector");
    assert_eq!(
        (aa.launches_a.clone(), aa.launches_b.clone()),
        (vec![0], vec![1])
    );
    let v = aa.ttft_p90.as_ref().expect("TTFT A/A").value;
    let (lo, hi) = (v.lo.unwrap(), v.hi.unwrap());
    assert!(lo < 0.0 && hi > 0.0, "{v:?}");
    assert!(hi - lo < 0.5, "the A/A carries a 1-df variance: {v:?}");
    assert!(!aa.unstable, "{aa:?}");
}

/// Truth: plain, mooncake_both and nixl_both, four launches each, l0 and l1 on machine 0 and l2
/// and l3 on machine 1; mooncake_both's l1 (machine 0) ran 60% slower. The screen sets
/// mooncake_both apart (its launches on machine 0 differ by log 1.6 against a 3% launch noise),
/// and it does so only with machine 0: without machine 0's launches mooncake_both's two
/// remaining launches are as quiet as the others', so machine 0 is listed as a flip that sets
/// apart mooncake_both's TTFT and TPOT in every cell and no other config's, nothing of those
/// only without it, and a warning names it (in one line with any machine whose absence flips
/// the screen the same way).
#[test]
fn a_screen_decision_resting_on_one_machine_is_named() {
    let on_two = |c: SynthConfig| SynthConfig {
        machines: vec![0, 0, 1, 1],
        ..c
    };
    let mut s = spec(vec![
        on_two(SynthConfig::new("plain", 1.0, 1.0)),
        on_two(SynthConfig {
            slow_launch: Some((1, 1.6)),
            ..SynthConfig::new("mooncake_both", 1.0, 1.0)
        }),
        on_two(SynthConfig::new("nixl_both", 1.0, 1.0)),
    ]);
    s.launches = 4;
    s.launch_sigma = 0.03;
    s.machine_levels = vec![1.0, 0.9];
    let r = run(&s);
    let noise = &r.summary.launch_noise;
    assert!(
        noise.own.iter().any(|o| o.config == "mooncake_both"),
        "mooncake_both set apart with every machine: {:?}",
        noise.own
    );
    let flip = noise
        .screen_flips
        .iter()
        .find(|f| f.machine == "boot synth-machine-0")
        .unwrap_or_else(|| panic!("machine 0 decides the screen: {:?}", noise.screen_flips));
    // TTFT and TPOT: mooncake_both only, in every cell (the slow launch is slow everywhere).
    // (The step statistics carry no launch level in the synthetic data: a chance flag there
    // is not the slow launch's.)
    let latency = |l: &&String| l.contains(" TTFT p90 ") || l.contains(" TPOT p90 ");
    for rate in [1, 2, 4] {
        let label = format!("mooncake_both TTFT p90 in A/r{rate}_i4096_o256");
        assert!(flip.only_with.contains(&label), "{label}: {flip:?}");
    }
    assert!(
        flip.only_with
            .iter()
            .filter(latency)
            .all(|l| l.starts_with("mooncake_both ")),
        "{flip:?}"
    );
    assert!(!flip.only_without.iter().any(|l| latency(&l)), "{flip:?}");
    // Machine 0 holds mooncake_both's launches (its slow one among them): it moves the screen
    // through them, not only through the pool.
    assert!(!flip.through_pool_only, "{flip:?}");
    // One warning names machine 0 with that call. Leaving machine 1 out undoes the same call
    // in this data (the screen then reads machine 0's launches alone), so both share the line:
    // one line per distinct change to the screen (what it would set apart only with, and only
    // without, the machine), however many machines make it.
    let screen: Vec<&String> = r
        .summary
        .warnings
        .iter()
        .filter(|w| w.starts_with("the launch-noise screen rests on "))
        .collect();
    assert!(
        screen.iter().any(|w| w.contains("boot synth-machine-0")
            && w.contains(
                " it would no longer set apart mooncake_both TPOT p90 in A/r1_i4096_o256"
            )),
        "{screen:?}"
    );
    let changes: std::collections::BTreeSet<(&Vec<String>, &Vec<String>)> = noise
        .screen_flips
        .iter()
        .map(|f| (&f.only_with, &f.only_without))
        .collect();
    assert!(
        changes.len() < noise.screen_flips.len(),
        "machines 0 and 1 make one change: {:?}",
        noise.screen_flips
    );
    assert_eq!(
        screen.len(),
        changes.len(),
        "machines that flip the screen alike share one line: {screen:?}"
    );
}

/// Truth: Poisson arrivals at 1-16 req/s, capacity far above (no queue), cells as the GPU
/// profiles run them (40 s of sends, at least 80 measured requests). Criterion 1 judges the
/// requests actually scheduled in the window (their ok share × their completion pace), so it
/// never fires over 40 seeds — while the seed's nominal ratio (effective / offered rate), kept
/// in the note, falls below 0.95 in some cells by the Poisson draw alone. An overloaded cell
/// (capacity 4 req/s, offered 8) still fires.
#[test]
fn poisson_cells_below_capacity_never_fire_criterion_1() {
    use connector_tax::synth::Arrival;
    let mut nominal_low = 0;
    let mut cells = 0;
    for seed in 0..40u64 {
        for rate in [1.0, 2.0, 4.0, 8.0, 16.0] {
            let mut s = spec(vec![SynthConfig::new("plain", 1.0, 1.0)]);
            s.launches = 1;
            s.arrival = Arrival::Poisson;
            s.seed = 7000 + seed;
            s.phase_a_rates = vec![rate];
            s.requests_per_cell = ((40.0 * rate) as usize).max(80);
            s.with_steps = false;
            let r = run(&s);
            for c in r.summary.cells.iter().filter(|c| c.launch.is_none()) {
                let sat = c.saturation.as_ref().unwrap();
                cells += 1;
                assert!(
                    !sat.throughput.fired,
                    "seed {seed} {}: {:?}",
                    c.key.cell, sat.throughput
                );
                if c.effective_rps.unwrap() / c.offered_rps < 0.95 {
                    nominal_low += 1;
                }
            }
        }
    }
    assert_eq!(cells, 200);
    assert!(
        nominal_low > 0,
        "the nominal ratio never dipped: the test would not catch the old rule"
    );
    let mut s = spec(vec![SynthConfig {
        capacity_rps: 4.0,
        ..SynthConfig::new("plain", 1.0, 1.0)
    }]);
    s.launches = 1;
    s.arrival = Arrival::Poisson;
    s.phase_a_rates = vec![2.0, 8.0];
    s.requests_per_cell = 200;
    let r = run(&s);
    let c8 = r
        .summary
        .cells
        .iter()
        .find(|c| c.launch.is_none() && c.rate == 8.0)
        .unwrap();
    let t = &c8.saturation.as_ref().unwrap().throughput;
    assert!(t.fired, "{t:?}");
    assert!((t.value.unwrap() - 0.5).abs() < 0.1, "{t:?}");
}

/// Truth: the seed's multi_mooncake_lmcache could not run (skipped with its exception, as its
/// engine died on the H200), and the named NHD variants ran: mooncake_both_nhd +20%,
/// lmcache_only +20%, multi_mooncake_lmcache_nhd +40% TTFT: exactly additive, relative deviation
/// |0.40 − (0.20 + 0.20)| / 0.40 = 0 (by hand). H4 and SC4 must be computed on the variants and
/// say so (naming why the seed's config is out); with the seed's MultiConnector present
/// (mooncake_both +30%, multi +90%: deviation |0.9 − 0.5| / 0.9 = 0.44 by hand) the seed's
/// configs are compared, whatever the variants say.
#[test]
fn h4_uses_the_nhd_variants_only_when_the_seed_multiconnector_has_no_data() {
    let variants = || {
        vec![
            SynthConfig::new("plain", 1.0, 1.0),
            SynthConfig::new("mooncake_both_nhd", 1.2, 1.0),
            SynthConfig::new("lmcache_only", 1.2, 1.0),
            SynthConfig::new("multi_mooncake_lmcache_nhd", 1.4, 1.0),
        ]
    };
    let h4 = |v: &Verdicts| v.hypotheses.iter().find(|x| x.id == "h4").unwrap().clone();
    let mut s = spec(variants());
    s.skipped = vec![(
        "multi_mooncake_lmcache".into(),
        "NotImplementedError: HND layouts are not supported".into(),
    )];
    let r = run(&s);
    let v = h4(&r.verdicts);
    assert_ne!(v.verdict, VerdictKind::NotTestable, "{}", v.reason);
    let e = v.estimate.expect("an estimate");
    // |·| makes the estimate of a zero deviation positive; its CI must reach down to ~0.
    assert!(
        e.est < 0.25 && e.lo.unwrap() < 0.05,
        "deviation {e:?} (truth 0)"
    );
    for reason in [v.reason.clone(), reason_of(&r.verdicts, "sc4")] {
        assert!(
            reason.contains(
                "on the NHD variants (mooncake_both_nhd, lmcache_only, multi_mooncake_lmcache_nhd"
            ) && reason
                .contains("multi_mooncake_lmcache: pre-flight SKIP: NotImplementedError: HND"),
            "{reason}"
        );
    }

    let mut configs = variants();
    configs.push(SynthConfig::new("mooncake_both", 1.3, 1.0));
    configs.push(SynthConfig::new("multi_mooncake_lmcache", 1.9, 1.0));
    let r = run(&spec(configs));
    let v = h4(&r.verdicts);
    assert!(!v.reason.contains("NHD"), "{}", v.reason);
    let e = v.estimate.expect("an estimate");
    assert!(
        (e.est - 0.44).abs() < 0.12,
        "deviation {} (truth 0.44)",
        e.est
    );
}

/// Truth: two machines, the second 25% faster for every config (a machine level shared by all
/// configs, as the H200's GPU sessions differed by ~20% in TTFT p90). plain ran two launches on
/// each; mooncake_both (a 20% TTFT tax) ran only on the fast machine, noop_connector (0%) only on
/// the slow one. Pooled over machines, mooncake_both's fast launches meet plain's average and the
/// 20% tax looks like ~0%, noop's 0% like +7%; within machines both are recovered.
#[test]
fn taxes_compare_launches_on_the_same_machine() {
    let mut s = spec(vec![
        SynthConfig {
            machines: vec![0, 0, 1, 1],
            ..SynthConfig::new("plain", 1.0, 1.0)
        },
        SynthConfig {
            machines: vec![1, 1, 1, 1],
            ..SynthConfig::new("mooncake_both", 1.20, 1.0)
        },
        SynthConfig {
            machines: vec![0, 0, 0, 0],
            ..SynthConfig::new("noop_connector", 1.0, 1.0)
        },
    ]);
    s.launches = 4;
    s.machine_levels = vec![1.0, 0.75];
    s.launch_sigma = 0.03;
    s.phase_a_rates = vec![1.0, 2.0];
    let r = run(&s);
    let rate = r.summary.reference_rates.ref_safe.expect("ref_safe");
    let pooled_p90 = |config: &str| {
        r.summary
            .cells
            .iter()
            .find(|c| c.launch.is_none() && c.key.config == config && c.rate == rate)
            .and_then(|c| c.ttft_ms.p90.as_ref())
            .map(|e| e.est)
            .unwrap()
    };
    // What pooling over machines would say (the truth is 20% and 0%; a pooled p90 of two
    // machines sits near the slow machine's tail: here -2% and +7%).
    let naive_mc = pooled_p90("mooncake_both") / pooled_p90("plain") - 1.0;
    let naive_noop = pooled_p90("noop_connector") / pooled_p90("plain") - 1.0;
    assert!(
        naive_mc < 0.10 && naive_noop > 0.05,
        "{naive_mc} {naive_noop}"
    );

    let mc = ref_safe_tax(&r, "mooncake_both");
    assert_eq!(
        mc.machines,
        vec!["boot synth-machine-1".to_owned()],
        "{:?}",
        mc.machines
    );
    assert!(mc.unpaired_launches.is_empty());
    let t = mc.ttft_p90.as_ref().unwrap();
    assert!((t.value.est - 0.20).abs() < 0.05, "{:?}", t.value);
    assert!(t.value.lo.unwrap() <= 0.20 && 0.20 <= t.value.hi.unwrap());
    assert_eq!(t.detection, Detection::Tax);
    let noop = ref_safe_tax(&r, "noop_connector")
        .ttft_p90
        .as_ref()
        .unwrap();
    assert!(
        noop.value.lo.unwrap() <= 0.0 && 0.0 <= noop.value.hi.unwrap(),
        "{:?}",
        noop.value
    );

    // The launch noise is the within-machine spread, not the machines' 25%.
    let cell = r
        .summary
        .cells
        .iter()
        .find(|c| c.launch.is_none() && c.key.config == "plain" && c.rate == rate)
        .unwrap()
        .key
        .cell
        .clone();
    let pv = r
        .summary
        .launch_noise
        .variance_of("ttft_p90", ctax_schema::Phase::A, &cell, "plain")
        .expect("noise");
    assert!(pv.var.sqrt().exp_m1() < 0.07, "{pv:?}");
    // plain's A/A compares launches on one machine: it straddles 0 although the machines
    // differ by 25%.
    let aa = ref_safe_aa(&r, "plain");
    assert!(!aa.unstable, "{aa:?}");
    assert_eq!(aa.machines.len(), 2);
    // Its noise leaves plain's own spread out but keeps the machines plain links (its launches
    // on each machine enter as their mean): without plain, mooncake_both's and noop's machines
    // would share nothing and the noise would rest on nothing. Launch sd 3%: the A/A of two
    // launches against two is a few percent wide, not the +-50% of an unlinked pool.
    let v = aa.ttft_p90.as_ref().unwrap().value;
    assert!(v.hi.unwrap() - v.lo.unwrap() < 0.25, "{v:?}");
    // The machine effect is reported, and detected.
    let e = r
        .summary
        .machines
        .effects
        .iter()
        .find(|e| e.cell == cell && e.metric == "ttft_p90")
        .expect("machine effect");
    assert_eq!(e.machines, 2);
    assert!(e.p < 0.001, "{e:?}");
}

/// Truth: mooncake_both ran only on a machine where plain never ran. Its tax cannot be told
/// from the machine's level, so it has none: H1 is not testable and says why, and a warning
/// names the launches.
#[test]
fn a_config_without_plain_on_its_machine_has_no_tax() {
    let mut s = spec(vec![
        SynthConfig {
            machines: vec![0, 0],
            ..SynthConfig::new("plain", 1.0, 1.0)
        },
        SynthConfig {
            machines: vec![1, 1],
            ..SynthConfig::new("mooncake_both", 1.20, 1.0)
        },
        SynthConfig {
            machines: vec![0, 0],
            ..SynthConfig::new("noop_connector", 1.0, 1.0)
        },
    ]);
    s.machine_levels = vec![1.0, 0.8];
    let r = run(&s);
    let mc = ref_safe_tax(&r, "mooncake_both");
    assert!(mc.ttft_p90.is_none() && mc.tpot_p90.is_none() && mc.machines.is_empty());
    assert_eq!(mc.unpaired_launches, vec![0, 1]);
    assert!(ref_safe_tax(&r, "noop_connector").ttft_p90.is_some());
    let h1 = r.verdicts.hypotheses.iter().find(|v| v.id == "h1").unwrap();
    assert_eq!(h1.verdict, VerdictKind::NotTestable, "{}", h1.reason);
    assert!(
        h1.reason
            .contains("no plain launch of Phase A ran on the machine"),
        "{}",
        h1.reason
    );
    assert!(
        r.summary.warnings.iter().any(|w| w.starts_with(
            "mooncake_both: no plain launch of Phase A ran on its machines (launches l0, l1)"
        )),
        "{:?}",
        r.summary.warnings
    );
}

/// Truth: every config ran each launch on its own machine (plain and mooncake_both on machines
/// 0 and 1, one launch each): the taxes pair them per machine and the noise comes from the lack
/// of fit, but no config ran two launches on one machine, so there is no A/A, and the analysis
/// says so instead of showing an empty noise floor.
#[test]
fn without_a_repeat_on_one_machine_there_is_no_aa_and_a_warning_says_so() {
    let mut s = spec(vec![
        SynthConfig {
            machines: vec![0, 1],
            ..SynthConfig::new("plain", 1.0, 1.0)
        },
        SynthConfig {
            machines: vec![0, 1],
            ..SynthConfig::new("mooncake_both", 1.2, 1.0)
        },
    ]);
    s.machine_levels = vec![1.0, 0.8];
    s.launch_sigma = 0.03;
    let r = run(&s);
    assert!(r.summary.aa_taxes.is_empty());
    assert!(r.summary.launch_noise.ttft_known());
    assert_eq!(ref_safe_tax(&r, "mooncake_both").machines.len(), 2);
    assert!(
        r.summary
            .warnings
            .iter()
            .any(|w| w.starts_with("no A/A noise floor")),
        "{:?}",
        r.summary.warnings
    );
}

/// Three copies of one synthetic root (20% TTFT tax, callbacks 80 µs a step, Phase B at 1
/// req/s): whole; mooncake_both's last launch killed during its Phase B cell 512/256 (as on the
/// H200 on 2026-12-05, B' 4096/256: the requests file holds the cell's first 100 records, and
/// `summary.json` has no entry for the cell); and that cell's files removed. Returns the three
/// analyses, the cell's name and the roots' directory (kept alive).
fn cut_and_gone(launches: u32) -> ([(AnalysisResult, Verdicts); 3], String, tempfile::TempDir) {
    let mut s = spec(vec![
        SynthConfig::new("plain", 1.0, 1.0),
        SynthConfig {
            callback_us: Some(80.0),
            ..SynthConfig::new("mooncake_both", 1.20, 1.0)
        },
    ]);
    s.launches = launches;
    s.launch_sigma = 0.03;
    s.phase_b_shapes = vec![(512, 256), (4096, 256)];
    s.phase_b_rate = 1.0;
    let dir = tempfile::tempdir().unwrap();
    let roots = ["whole", "cut", "gone"].map(|n| dir.path().join(n));
    for r in &roots {
        generate(&s, r).unwrap();
    }
    let cell = "r1_i512_o256".to_owned();
    let last = format!("_mooncake_both_l{}", launches - 1);
    let run_of = |root: &std::path::Path| {
        std::fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().ends_with(&last))
            .expect("mooncake_both's last run directory")
    };
    let drop_summary_entry = |run: &std::path::Path| {
        let p = run.join("summary.json");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        let cells = v["cells"].as_object_mut().unwrap();
        assert!(cells.remove(&format!("B/{cell}")).is_some(), "{cells:?}");
        std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
    };
    let cut = run_of(&roots[1]);
    let requests = cut.join(format!("requests_B_{cell}.jsonl"));
    let text = std::fs::read_to_string(&requests).unwrap();
    assert!(text.lines().count() > 300);
    let head: Vec<&str> = text.lines().take(100).collect();
    std::fs::write(&requests, head.join("\n") + "\n").unwrap();
    drop_summary_entry(&cut);
    let gone = run_of(&roots[2]);
    for f in std::fs::read_dir(&gone).unwrap() {
        let p = f.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_string_lossy()
            .ends_with(&format!("_B_{cell}.jsonl"))
        {
            std::fs::remove_file(p).unwrap();
        }
    }
    drop_summary_entry(&gone);
    (roots.map(|r| analyze(&r)), cell, dir)
}

/// Truth: [`cut_and_gone`] with three launches. The cut launch's p90 is of the window's first
/// part, so no comparison may read it: every tax (TTFT, TPOT, step, callbacks, step −
/// callbacks, in every cell), every A/A tax, the launch-noise summary and the machine effects
/// of the cut root equal, to the last bit, those of the root with the cell's files removed;
/// the tax names the launch (`not_whole`), the per-launch row is still there, incomplete, and
/// the pooled row pools the two whole launches only and names the third.
#[test]
fn a_cell_cut_short_by_a_killed_collector_is_left_out_of_the_taxes() {
    let ([(whole, _), (a_cut, _), (a_gone, _)], cell, _dir) = cut_and_gone(3);
    let tax = |a: &AnalysisResult| {
        a.summary
            .taxes
            .iter()
            .find(|t| t.config == "mooncake_both" && t.phase == Phase::B && t.cell == cell)
            .unwrap()
            .clone()
    };
    assert_eq!(tax(&whole).paired_launches, vec![0, 1, 2]);
    let t_cut = tax(&a_cut);
    assert_eq!(t_cut.paired_launches, vec![0, 1], "{t_cut:?}");
    assert_eq!(t_cut.not_whole, vec!["mooncake_both l2".to_owned()]);
    let cb = t_cut.callback_p50_us.as_ref().expect("a callback tax");
    assert!(cb.value.est > 40.0, "{cb:?}");
    let mut taxes = a_cut.summary.taxes.clone();
    for t in &mut taxes {
        t.not_whole.clear();
    }
    assert_eq!(taxes, a_gone.summary.taxes);
    assert_eq!(a_cut.summary.aa_taxes, a_gone.summary.aa_taxes);
    assert_eq!(a_cut.summary.launch_noise, a_gone.summary.launch_noise);
    assert_eq!(
        a_cut.summary.machines.effects,
        a_gone.summary.machines.effects
    );
    assert_eq!(a_cut.step_ecdf, a_gone.step_ecdf);
    // The cut launch's own p90 differs from what it would have been whole: had a comparison
    // read it, the two roots above would disagree.
    let l2 = |a: &AnalysisResult| {
        a.summary
            .per_launch
            .iter()
            .find(|c| c.key.config == "mooncake_both" && c.key.cell == cell && c.launch == Some(2))
            .map(|c| (c.complete, c.ttft_ms.p90.as_ref().unwrap().est))
            .expect("l2's row of the cell")
    };
    let (complete, cut_p90) = l2(&a_cut);
    assert!(!complete);
    assert_ne!(cut_p90, l2(&whole).1);
    // The pooled row pools the whole launches only, as the root without the cell's files
    // does, and names the one it left out; a warning says so.
    let pooled = |a: &AnalysisResult| {
        a.summary
            .cells
            .iter()
            .find(|c| c.key.config == "mooncake_both" && c.key.cell == cell && c.launch.is_none())
            .expect("the pooled row")
            .clone()
    };
    let (p_cut, p_gone) = (pooled(&a_cut), pooled(&a_gone));
    assert_eq!(p_cut.launches, vec![0, 1]);
    assert!(p_cut.complete, "{p_cut:?}");
    assert_eq!(p_cut.not_whole.len(), 1);
    assert!(p_cut.not_whole[0].starts_with("l2 (no entry for this cell in summary.json"));
    assert_eq!(p_cut.ttft_ms, p_gone.ttft_ms);
    assert_eq!(p_cut.counts, p_gone.counts);
    assert!(
        a_cut.summary.warnings.iter().any(|w| w.starts_with(&format!(
            "mooncake_both B {cell}: raw data not whole in l2 (no entry for this cell in summary.json"
        )) && w.ends_with("leave it out (the per-launch table shows it)")),
        "{:?}",
        a_cut.summary.warnings
    );
}

/// Truth: [`cut_and_gone`] with two launches, so one whole launch is left. The rendered
/// report still shows both launches' rows of the cell (the pooled row pools one launch, but
/// the cut one's row says why it is left out), and the shape tax names the cut launch.
#[test]
fn a_cut_launch_keeps_its_row_in_the_report() {
    let ([_, (a_cut, verdicts), _], _, _dir) = cut_and_gone(2);
    let out = tempfile::tempdir().unwrap();
    connector_tax::report::render(&a_cut, &verdicts, out.path()).unwrap();
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(
        md.lines().any(|l| l.contains("| B l1 |")
            && l.contains("incomplete: ")
            && l.contains("no entry for this cell in summary.json")),
        "{md}"
    );
    assert!(
        md.lines().any(|l| l.contains("| B l0 |")),
        "the whole launch's own row: {md}"
    );
    assert!(
        md.contains("left out, raw data not whole: l1 (no entry for this cell in summary.json"),
        "{md}"
    );
    assert!(
        md.lines().any(|l| l.starts_with("| mooncake_both | B | 1 | 512/256 | 1 launch on 1 machine; mooncake_both l1 left out (raw data not whole) |")),
        "{md}"
    );
}

/// Truth: noop_connector 0%, mooncake_both +30% and mooncake_both_nhd (the same connector on
/// the NHD KV layout noop_connector keeps) +5% TTFT. H3's reason must name the NHD variant's
/// tax beside mooncake_both's, since the ratio noop/mooncake_both mixes the layout change into
/// the implementation share; without the variant the clause is absent.
#[test]
fn h3_names_the_nhd_variant_s_tax_when_it_ran() {
    let configs = || {
        vec![
            SynthConfig::new("plain", 1.0, 1.0),
            SynthConfig::new("noop_connector", 1.0, 1.0),
            SynthConfig::new("mooncake_both", 1.3, 1.0),
        ]
    };
    let mut with = configs();
    with.push(SynthConfig::new("mooncake_both_nhd", 1.05, 1.0));
    let reason = reason_of(&run(&spec(with)).verdicts, "h3");
    let at = reason
        .find("mooncake_both_nhd (the same connector on NHD) has tax ")
        .unwrap_or_else(|| panic!("{reason}"));
    let rest = &reason[at..];
    let number = |s: &str| -> f64 {
        let s = &s[s.find(['+', '-']).unwrap()..];
        s[..s.find('%').unwrap()].parse::<f64>().unwrap()
    };
    let nhd = number(&rest["mooncake_both_nhd (the same connector on NHD) has tax ".len()..]);
    let moon = number(&rest[rest.find("against mooncake_both's ").unwrap()..]);
    assert!(
        (nhd - 5.0).abs() < 6.0,
        "NHD tax {nhd}% (truth +5%): {reason}"
    );
    assert!(
        (moon - 30.0).abs() < 8.0,
        "mooncake_both {moon}% (truth +30%): {reason}"
    );
    let reason = reason_of(&run(&spec(configs())).verdicts, "h3");
    assert!(!reason.contains("NHD"), "{reason}");
}
