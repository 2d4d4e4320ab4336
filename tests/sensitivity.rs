//! The verdicts' sensitivity line ([`connector_tax::verdicts::sensitivity`]): H1–H6 once more
//! without the launch-cells that slow episodes name.
//!
//! The reference is independent of the leave-out mechanism: the same synthetic archive with
//! the named launch's request files deleted from disk, analysed from scratch. Its verdicts
//! must be the sensitivity pass's, to the bit.

mod common;

use std::path::Path;

use connector_tax::analysis::AnalyzeOptions;
use connector_tax::synth::{Stall, SynthConfig, SynthSpec};
use connector_tax::verdicts::Verdicts;
use ctax_schema::Phase;

/// The report of an analysis and its verdicts, rendered in a temporary directory:
/// (`report.md`, `index.html`).
fn rendered(
    analysis: connector_tax::analysis::model::AnalysisResult,
    verdicts: Verdicts,
) -> (String, String) {
    let out = tempfile::tempdir().unwrap();
    common::Fixture { analysis, verdicts }.render(out.path());
    let read = |name: &str| std::fs::read_to_string(out.path().join(name)).unwrap();
    (read("report.md"), read("index.html"))
}

/// A verdict's estimate as the report's Markdown prints it.
fn est_md(v: &connector_tax::verdicts::Verdict) -> String {
    connector_tax::report::fmt::md(&connector_tax::report::fmt::opt_estimate(
        v.estimate.as_ref(),
        &v.unit,
    ))
}

fn evaluate(root: &Path) -> (connector_tax::analysis::model::AnalysisResult, Verdicts) {
    let ds = connector_tax::ingest::load(root).unwrap();
    connector_tax::pipeline::evaluate(
        &ds,
        &AnalyzeOptions {
            skip_itl: true,
            ..Default::default()
        },
    )
    .unwrap()
}

/// mooncake_both (a 40% TTFT tax) with a 5× stall over 30 of the 200 measured requests of its
/// launch 1 in every Phase A cell (not in Phase B: launch 1 keeps cells that are not named);
/// plain, noop_connector, nixl_both, lmcache_only and multi_mooncake_lmcache as they are, so
/// every hypothesis is testable (H4 reads lmcache_only and the multi config, H5 and H6 Phase B).
/// Four launches each, so each config has an A/A split.
fn spec() -> SynthSpec {
    SynthSpec {
        configs: vec![
            SynthConfig::new("plain", 1.0, 1.0),
            SynthConfig {
                stall: Some(Stall {
                    launch: 1,
                    first: 60,
                    len: 30,
                    factor: 5.0,
                }),
                ..SynthConfig::new("mooncake_both", 1.4, 1.15)
            },
            SynthConfig::new("nixl_both", 1.33, 1.1),
            SynthConfig::new("noop_connector", 1.03, 1.0),
            SynthConfig::new("lmcache_only", 1.1, 1.05),
            SynthConfig::new("multi_mooncake_lmcache", 1.6, 1.2),
        ],
        launches: 4,
        phase_a_rates: vec![1.0, 2.0],
        phase_b_shapes: vec![(512, 64), (512, 256), (4096, 64), (4096, 256)],
        phase_b_rate: 2.0,
        requests_per_cell: 200,
        max_events: Some(8),
        ..Default::default()
    }
}

#[test]
fn without_episodes_is_the_archive_without_those_request_files() {
    let dir = tempfile::tempdir().unwrap();
    connector_tax::synth::generate(&spec(), dir.path()).unwrap();
    let (a, v) = evaluate(dir.path());

    // What is named: launch 1 of mooncake_both, in both Phase A cells, and nothing else.
    let named: Vec<(String, u32, Phase, String)> = a
        .summary
        .episodes
        .iter()
        .map(|e| (e.config.clone(), e.launch, e.phase, e.cell.clone()))
        .collect();
    let expected: Vec<(String, u32, Phase, String)> = ["r1_i4096_o256", "r2_i4096_o256"]
        .iter()
        .map(|c| ("mooncake_both".to_owned(), 1, Phase::A, (*c).to_owned()))
        .collect();
    assert_eq!(named, expected);
    // Every hypothesis has an estimate, so the comparison below covers all six.
    for h in &v.hypotheses {
        assert!(
            h.verdict != connector_tax::verdicts::VerdictKind::NotTestable,
            "{}: {}",
            h.id,
            h.reason
        );
    }
    let w = v
        .without_episodes
        .as_ref()
        .expect("episodes named: the sensitivity pass ran");
    let left: Vec<(String, u32, Phase, String)> = w
        .left_out
        .iter()
        .map(|l| {
            (
                l.config.clone(),
                l.launch,
                l.cell.phase,
                l.cell.cell.clone(),
            )
        })
        .collect();
    assert_eq!(left, expected);

    // The reference: the same archive with those request files gone.
    let run_dir = &a.summary.episodes[0].run_dir;
    let mut removed = 0;
    for entry in std::fs::read_dir(dir.path().join(run_dir)).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if expected
            .iter()
            .any(|(_, _, _, cell)| name.starts_with(&format!("requests_A_{cell}.jsonl")))
        {
            std::fs::remove_file(&p).unwrap();
            removed += 1;
        }
    }
    assert_eq!(removed, 2, "one request file per named cell");
    // Launch 1's Phase B cells stay in both: a filter that dropped the whole launch would
    // change H5 and H6.
    assert!(
        std::fs::read_dir(dir.path().join(run_dir))
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("requests_B_")),
        "launch 1 keeps Phase B cells"
    );
    let (a2, v2) = evaluate(dir.path());
    assert!(a2.summary.episodes.is_empty(), "{:#?}", a2.summary.episodes);
    assert!(v2.without_episodes.is_none());
    assert_eq!(w.hypotheses, v2.hypotheses);
    assert_eq!(w.unstable, v2.unstable);
    assert_eq!(w.reference_rates, a2.summary.reference_rates);
    // The left-out config's taxes in the named cells that are tax cells (ref_safe / ref_load),
    // and nothing else; each equals the reference's.
    assert!(!w.taxes.is_empty());
    for t in &w.taxes {
        assert_eq!(t.config, "mooncake_both");
        assert!(
            expected
                .iter()
                .any(|(_, _, p, c)| *p == t.phase && *c == t.cell),
            "{t:?}"
        );
        let reference = a2
            .summary
            .taxes
            .iter()
            .find(|x| x.config == t.config && x.context == t.context && x.cell == t.cell)
            .expect("the reference has the tax");
        assert_eq!(t, reference);
    }

    // The stall raised mooncake_both's TTFT p90 at ref_safe, so H1 (its TTFT tax) reads lower
    // without it; the reported verdicts are the first pass's, untouched.
    let h1 = |v: &[connector_tax::verdicts::Verdict]| {
        v.iter()
            .find(|x| x.id == "h1")
            .unwrap()
            .estimate
            .unwrap()
            .est
    };
    assert!(
        h1(&v.hypotheses) > h1(&w.hypotheses) + 0.05,
        "{} vs {}",
        h1(&v.hypotheses),
        h1(&w.hypotheses)
    );
    // Reported: the stalled launch's p90 is ~5× its median, which the A/A of mooncake_both in
    // those cells (launches 0, 2 against 1, 3) cannot miss; without it, no A/A of mooncake_both
    // excludes 0. Both are 95% CIs, so the second is a chance event at this synth seed (a
    // reviewer found mooncake_both's own A/A excluding 0 without the stall at 1 of 30 seeds);
    // other configs' A/A may exclude 0 by chance too, and the wording follows either way.
    let aa_mooncake = |a: &connector_tax::analysis::model::AnalysisResult| {
        a.summary
            .aa_taxes
            .iter()
            .filter(|x| x.unstable && x.config == "mooncake_both")
            .count()
    };
    assert!(aa_mooncake(&a) >= 1, "the stalled launch sets an A/A apart");
    assert!(v.unstable);
    assert_eq!(aa_mooncake(&a2), 0);
    assert!(
        !w.aa_detected
            .iter()
            .any(|x| x.starts_with("mooncake_both ")),
        "{:?}",
        w.aa_detected
    );
    assert_eq!(w.unstable, !w.aa_detected.is_empty());
    let unstable_line = if w.unstable {
        format!(
            "UNSTABLE DATASET would hold: without them the A/A taxes of {} exclude 0.",
            w.aa_detected.join(", ")
        )
    } else {
        "UNSTABLE DATASET would clear: no A/A tax excludes 0 without them.".to_owned()
    };

    let (v_hyp, w_hyp) = (v.hypotheses.clone(), w.hypotheses.clone());
    let (v_taxes, w_taxes) = (a.summary.taxes.clone(), w.taxes.clone());
    // The report shows both columns with the verdicts' estimates, and says what the mark would
    // do without them.
    let (md, html) = rendered(a, v);
    assert!(md.contains("H1–H6 without these launch-cells"), "{md}");
    assert!(
        md.contains("Without the 2 launch-cells that slow episodes name (mooncake_both l1 (A 1 req/s, 4096/256), mooncake_both l1 (A 2 req/s, 4096/256))"),
        "{md}"
    );
    assert!(md.contains(&unstable_line), "{unstable_line}\n{md}");
    for (h, x) in v_hyp.iter().zip(&w_hyp) {
        let row = format!(
            "| [{}](#{}) | {} | {} | {} | ",
            h.id.to_uppercase(),
            h.id,
            est_md(h),
            h.verdict.as_str(),
            est_md(x)
        );
        assert!(md.contains(&row), "{row}\n{md}");
    }
    assert!(html.contains("<h4 id=\"taxes-episodes-without\">"));
    assert!(html.contains("id=\"taxes-episodes-without-taxes\""));
    let reported_tax = v_taxes
        .iter()
        .find(|x| x.config == w_taxes[0].config && x.context == w_taxes[0].context)
        .unwrap();
    let pct = |t: &connector_tax::analysis::model::TaxValue| {
        connector_tax::report::fmt::md(&connector_tax::report::fmt::opt_estimate(
            Some(&t.value),
            "fraction",
        ))
    };
    let tax_row = format!(
        "| {} | {} |",
        pct(reported_tax.ttft_p90.as_ref().unwrap()),
        pct(w_taxes[0].ttft_p90.as_ref().unwrap())
    );
    assert!(md.contains(&tax_row), "{tax_row}\n{md}");
    assert!(html.contains("id=\"verdicts-sensitivity\""));
    // Without episodes, no section.
    let (md2, _) = rendered(a2, v2);
    assert!(!md2.contains("without these launch-cells"));
}

/// lmcache_only saturates at 4 req/s (capacity 3), every other config only above 8 (capacity
/// 12), with Phase A at 1, 2, 4 and 8 req/s: ref_safe is 2 req/s, held there by lmcache_only
/// alone; without it, ref_safe is 8 (= ref_load). mooncake_both carries a 30% TTFT tax;
/// multi_mooncake_lmcache makes H4 testable as reported (it needs lmcache_only at ref_safe).
fn holders_spec() -> SynthSpec {
    let cap = |c: SynthConfig, capacity_rps: f64| SynthConfig { capacity_rps, ..c };
    SynthSpec {
        configs: vec![
            cap(SynthConfig::new("plain", 1.0, 1.0), 12.0),
            cap(SynthConfig::new("mooncake_both", 1.3, 1.1), 12.0),
            cap(SynthConfig::new("nixl_both", 1.2, 1.05), 12.0),
            cap(SynthConfig::new("noop_connector", 1.02, 1.0), 12.0),
            cap(SynthConfig::new("lmcache_only", 1.1, 1.05), 3.0),
            cap(SynthConfig::new("multi_mooncake_lmcache", 1.4, 1.15), 12.0),
        ],
        launches: 2,
        phase_a_rates: vec![1.0, 2.0, 4.0, 8.0],
        phase_b_shapes: vec![(512, 64), (4096, 256)],
        phase_b_rate: 2.0,
        requests_per_cell: 200,
        ..Default::default()
    }
}

/// The reference is independent of the leave-out: the same archive with lmcache_only's Phase
/// A request files deleted, analysed from scratch; the rerun's hypotheses and reference rates
/// must be its, to the bit (H4, which reads lmcache_only at ref_safe, is not testable both ways).
#[test]
fn without_holders_is_the_archive_without_their_phase_a_request_files() {
    let dir = tempfile::tempdir().unwrap();
    connector_tax::synth::generate(&holders_spec(), dir.path()).unwrap();
    let (a, v) = evaluate(dir.path());
    let refs = &a.summary.reference_rates;
    assert_eq!((refs.ref_safe, refs.ref_load), (Some(2.0), Some(8.0)));
    assert!(
        refs.notes.iter().any(|n| n
            == "ref_safe is held at 2 req/s by lmcache_only (saturated at 4 req/s): every other config is unsaturated at 4 req/s"),
        "{:?}",
        refs.notes
    );
    let w = v
        .without_holders
        .as_ref()
        .expect("lmcache_only holds ref_safe: the rerun ran");
    assert_eq!(w.left_out, ["lmcache_only"]);
    assert_eq!(w.configs, ["lmcache_only (saturated at 4 req/s)"]);
    assert_eq!((w.ref_safe, w.next), (2.0, 4.0));
    assert_eq!(w.reference_rates.ref_safe, Some(8.0));
    let h4 =
        |v: &[connector_tax::verdicts::Verdict]| v.iter().find(|x| x.id == "h4").unwrap().verdict;
    assert_ne!(
        h4(&v.hypotheses),
        connector_tax::verdicts::VerdictKind::NotTestable
    );
    assert_eq!(
        h4(&w.hypotheses),
        connector_tax::verdicts::VerdictKind::NotTestable
    );
    assert!(w.taxes.iter().all(|t| t.rate == 8.0 && t.phase == Phase::A));
    assert!(w.taxes.iter().any(|t| t.config == "mooncake_both"));

    // The reference: lmcache_only's Phase A request files gone (its Phase B files stay).
    let mut removed = 0;
    for run in std::fs::read_dir(dir.path()).unwrap().flatten() {
        let name = run.file_name().to_string_lossy().into_owned();
        if !name.contains("_lmcache_only_l") {
            continue;
        }
        for f in std::fs::read_dir(run.path()).unwrap().flatten() {
            if f.file_name().to_string_lossy().starts_with("requests_A_") {
                std::fs::remove_file(f.path()).unwrap();
                removed += 1;
            }
        }
    }
    assert_eq!(removed, 2 * 4, "two launches, four Phase A cells each");
    assert!(
        std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|r| r.file_name().to_string_lossy().contains("_lmcache_only_l"))
            .flat_map(|r| std::fs::read_dir(r.path()).unwrap().flatten())
            .any(|f| f.file_name().to_string_lossy().starts_with("requests_B_")),
        "lmcache_only keeps its Phase B cells"
    );
    let (a2, v2) = evaluate(dir.path());
    assert!(v2.without_holders.is_none(), "nothing holds ref_safe now");
    assert_eq!(a2.summary.reference_rates.ref_safe, Some(8.0));
    assert_eq!(a2.summary.reference_rates.ref_load, Some(8.0));
    assert_eq!(w.hypotheses.len(), v2.hypotheses.len());
    for (x, y) in w.hypotheses.iter().zip(&v2.hypotheses) {
        assert_eq!(x.id, y.id);
        if x.id == "h4" {
            assert_eq!(x.verdict, connector_tax::verdicts::VerdictKind::NotTestable);
            assert_eq!(y.verdict, connector_tax::verdicts::VerdictKind::NotTestable);
        } else {
            assert_eq!(x, y);
        }
    }
    assert_eq!(w.unstable, v2.unstable);
    for t in &w.taxes {
        let reference = a2
            .summary
            .taxes
            .iter()
            .find(|x| x.config == t.config && x.context == t.context)
            .expect("the reference has the tax");
        assert_eq!(t, reference);
    }
    // H1 reads mooncake_both at 2 req/s as reported and at 8 in the rerun.
    let h1 = |v: &[connector_tax::verdicts::Verdict]| {
        v.iter().find(|x| x.id == "h1").unwrap().reason.clone()
    };
    assert!(
        h1(&v.hypotheses).contains("r2_i4096_o256"),
        "{}",
        h1(&v.hypotheses)
    );
    assert!(
        h1(&w.hypotheses).contains("r8_i4096_o256"),
        "{}",
        h1(&w.hypotheses)
    );

    // The report's subsection names the holder and both rates, with a row per hypothesis.
    let (v_hyp, w_hyp) = (v.hypotheses.clone(), w.hypotheses.clone());
    let (md, html) = rendered(a, v);
    assert!(
        md.contains("H1–H6 at the rate the other configs allow"),
        "{md}"
    );
    assert!(
        md.contains("ref_safe is 2 req/s, held there by lmcache_only (saturated at 4 req/s): every other config is unsaturated at 4 req/s, the next rate measured"),
        "{md}"
    );
    assert!(
        md.contains(
            "Without the Phase A cells of lmcache_only, ref_safe rises to 8 req/s, the reported ref_load"
        ),
        "{md}"
    );
    assert!(
        md.contains("| ID | At 2 req/s | Verdict | At 8 req/s | Verdict |"),
        "{md}"
    );
    assert_eq!(v_hyp.len(), w_hyp.len());
    for (h, x) in v_hyp.iter().zip(&w_hyp) {
        // H4 needs lmcache_only: not testable by construction, named so and not bold.
        let without = if x.id == "h4" {
            "not testable (needs lmcache_only)".to_owned()
        } else if x.verdict != h.verdict {
            format!("**{}**", x.verdict.as_str())
        } else {
            x.verdict.as_str().to_owned()
        };
        let row = format!(
            "| [{}](#{}) | {} | {} | {} | {without} |",
            h.id.to_uppercase(),
            h.id,
            est_md(h),
            h.verdict.as_str(),
            est_md(x)
        );
        assert!(md.contains(&row), "{row}\n{md}");
    }
    assert!(html.contains("<h3 id=\"verdicts-without-holders\">"));
    assert!(html.contains("id=\"verdicts-without-holders-taxes\""));
    // Nothing holds ref_safe: no subsection.
    let (md2, _) = rendered(a2, v2);
    assert!(!md2.contains("at the rate the other configs allow"));
}
