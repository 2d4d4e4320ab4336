//! H1–H6 without the launch-cells that slow episodes name ([`crate::verdicts::sensitivity`]), beside
//! the reported ones: a table under Slow episodes and one line in Verdicts; and H1–H6 at the
//! rate the other configs allow, without the configs that hold ref_safe down ([`holders`]): a
//! subsection of Verdicts.

use crate::analysis::model::{AnalysisResult, Tax, TaxContext, TaxValue};
use crate::report::fmt;
use crate::verdicts::sensitivity::WithoutHolders;
use crate::verdicts::{Verdict, Verdicts};

/// One hypothesis as reported and without the named launch-cells.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SensitivityRow {
    pub anchor: String,
    pub id: String,
    pub reported: String,
    pub reported_verdict: String,
    pub without: String,
    pub without_verdict: String,
    /// The verdict would read differently.
    pub changed: bool,
}

/// A left-out config's taxes in the cell left out, as reported and without the episodes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TaxSensitivityRow {
    pub config: String,
    /// `A 2 req/s, 4096/256`.
    pub cell: String,
    pub ttft: String,
    pub ttft_without: String,
    pub tpot: String,
    pub tpot_without: String,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SensitivityView {
    /// `mooncake_both l1 (A 6 req/s, 4096/256), …`.
    pub left_out: String,
    /// What the A/A noise floor (the UNSTABLE mark) would say without them.
    pub unstable: String,
    /// Set when the rerun's reference rates differ from the reported ones.
    pub rates: Option<String>,
    pub rows: Vec<SensitivityRow>,
    /// The left-out configs' TTFT and TPOT p90 taxes in those cells, both ways.
    pub taxes: Vec<TaxSensitivityRow>,
    /// One line for the Verdicts section.
    pub summary: String,
}

pub(super) fn view(r: &AnalysisResult, v: &Verdicts) -> Option<SensitivityView> {
    let w = v.without_episodes.as_ref()?;
    let left_out = w
        .left_out
        .iter()
        .map(|l| {
            format!(
                "{} l{} ({})",
                l.config,
                l.launch,
                super::machines::cell_label(r, l.cell.phase, &l.cell.cell)
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let rows: Vec<SensitivityRow> = v
        .hypotheses
        .iter()
        .map(|h| {
            let other = w.hypotheses.iter().find(|x| x.id == h.id);
            row(h, other)
        })
        .collect();
    let refs = &r.summary.reference_rates;
    let rates = (refs.ref_safe != w.reference_rates.ref_safe
        || refs.ref_load != w.reference_rates.ref_load)
        .then(|| {
            format!(
                "Without them the reference rates move (ref_safe {}, ref_load {} instead of {}, {}): the hypotheses below read those cells.",
                opt_rate(w.reference_rates.ref_safe),
                opt_rate(w.reference_rates.ref_load),
                opt_rate(refs.ref_safe),
                opt_rate(refs.ref_load)
            )
        });
    let unstable = unstable_words(v.unstable, w.unstable, &w.aa_detected);
    let changed: Vec<String> = rows
        .iter()
        .filter(|x| x.changed)
        .map(|x| {
            format!(
                "{} would read {} (is {})",
                x.id, x.without_verdict, x.reported_verdict
            )
        })
        .collect();
    let n = w.left_out.len();
    let cells = if n == 1 {
        "the launch-cell".to_owned()
    } else {
        format!("the {n} launch-cells")
    };
    let verdicts = if changed.is_empty() {
        "no hypothesis verdict changes".to_owned()
    } else {
        changed.join("; ")
    };
    let summary =
        format!("Without {cells} that slow episodes name ({left_out}): {verdicts}. {unstable}");
    let taxes = w
        .taxes
        .iter()
        .map(|t| {
            let reported = r.summary.taxes.iter().find(|x| {
                x.config == t.config
                    && x.context == t.context
                    && x.phase == t.phase
                    && x.cell == t.cell
            });
            tax_row(r, reported, t)
        })
        .collect();
    Some(SensitivityView {
        left_out,
        unstable,
        rates,
        rows,
        taxes,
        summary,
    })
}

/// H1–H6 at the rate the other configs allow ([`WithoutHolders`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HoldersView {
    /// `lmcache_only (saturated at 4 req/s), …`.
    pub configs: String,
    /// The reported ref_safe, the next rate measured and the rerun's ref_safe: `2 req/s`,
    /// `4 req/s`, `6 req/s`.
    pub reported_rate: String,
    pub next: String,
    pub rate: String,
    /// What the rerun's rates are, and where the report already shows its taxes.
    pub rates: String,
    pub unstable: String,
    pub rows: Vec<SensitivityRow>,
    /// Each config's TTFT and TPOT p90 tax at the reported ref_safe and at the rerun's.
    pub taxes: Vec<TaxSensitivityRow>,
}

pub(super) fn holders(r: &AnalysisResult, v: &Verdicts) -> Option<HoldersView> {
    let w: &WithoutHolders = v.without_holders.as_ref()?;
    let refs = &r.summary.reference_rates;
    let rows: Vec<SensitivityRow> = v
        .hypotheses
        .iter()
        .map(|h| {
            let other = w.hypotheses.iter().find(|x| x.id == h.id);
            let mut row = row(h, other);
            // A hypothesis that needs a left-out config is not testable by construction: that
            // is the rerun's design, not a change of verdict.
            if let Some(o) = other
                && o.verdict == crate::verdicts::VerdictKind::NotTestable
                && h.verdict != o.verdict
                && let Some(c) = w.left_out.iter().find(|c| o.reason.contains(c.as_str()))
            {
                row.without_verdict = format!("not testable (needs {c})");
                row.changed = false;
            }
            row
        })
        .collect();
    let rate = opt_rate(w.reference_rates.ref_safe);
    let names = w.left_out.join(", ");
    // The rerun's taxes at its ref_safe, where that is the reported ref_load: whether they are
    // the Taxes table's ref_load column (the launch-noise pools leave the holders out, so the
    // CIs may move a little).
    let same_as_ref_load = w.taxes.iter().all(|t| {
        r.summary.taxes.iter().any(|x| {
            x.context == TaxContext::RefLoad
                && x.config == t.config
                && x.cell == t.cell
                && x.ttft_p90 == t.ttft_p90
                && x.tpot_p90 == t.tpot_p90
        })
    });
    let rates = match w.reference_rates.ref_safe {
        Some(x) if Some(x) == refs.ref_load && same_as_ref_load => format!(
            "Without the Phase A cells of {names}, ref_safe rises to {rate}, the reported ref_load: its taxes are the ref_load column of the Taxes table, read by the hypotheses as ref_safe's."
        ),
        Some(x) if Some(x) == refs.ref_load => format!(
            "Without the Phase A cells of {names}, ref_safe rises to {rate}, the reported ref_load; its taxes differ a little from the Taxes table's ref_load column, since the launch-noise pools leave those configs' launches out."
        ),
        Some(_) => format!(
            "Without the Phase A cells of {names}, ref_safe rises to {rate} (ref_load {}).",
            opt_rate(w.reference_rates.ref_load)
        ),
        None => format!("Without the Phase A cells of {names}, ref_safe is undefined."),
    };
    let taxes = w
        .taxes
        .iter()
        .map(|t| {
            let reported = r.summary.taxes.iter().find(|x| {
                x.config == t.config
                    && x.context == TaxContext::RefSafe
                    && (x.input_len, x.output_len) == (t.input_len, t.output_len)
            });
            tax_row(r, reported, t)
        })
        .collect();
    Some(HoldersView {
        configs: w.configs.join(", "),
        reported_rate: opt_rate(Some(w.ref_safe)),
        next: opt_rate(Some(w.next)),
        rate,
        rates,
        unstable: unstable_words(v.unstable, w.unstable, &w.aa_detected),
        rows,
        taxes,
    })
}

/// A rerun's tax `t` beside the reported one it is compared with (TTFT and TPOT p90).
fn tax_row(r: &AnalysisResult, reported: Option<&Tax>, t: &Tax) -> TaxSensitivityRow {
    let est = |v: Option<&TaxValue>| fmt::opt_estimate(v.map(|x| &x.value), "fraction");
    TaxSensitivityRow {
        config: t.config.clone(),
        cell: super::machines::cell_label(r, t.phase, &t.cell),
        ttft: est(reported.and_then(|x| x.ttft_p90.as_ref())),
        ttft_without: est(t.ttft_p90.as_ref()),
        tpot: est(reported.and_then(|x| x.tpot_p90.as_ref())),
        tpot_without: est(t.tpot_p90.as_ref()),
    }
}

fn row(h: &Verdict, other: Option<&Verdict>) -> SensitivityRow {
    let est = |v: &Verdict| fmt::opt_estimate(v.estimate.as_ref(), &v.unit);
    SensitivityRow {
        anchor: h.id.clone(),
        id: h.id.to_uppercase(),
        reported: est(h),
        reported_verdict: h.verdict.as_str().to_owned(),
        without: other.map_or_else(|| fmt::NA.to_owned(), est),
        without_verdict: other.map_or_else(
            || "not reported".to_owned(),
            |o| o.verdict.as_str().to_owned(),
        ),
        changed: other.is_none_or(|o| o.verdict != h.verdict),
    }
}

fn opt_rate(r: Option<f64>) -> String {
    r.map_or_else(|| "none".to_owned(), |x| format!("{} req/s", fmt::rate(x)))
}

/// The UNSTABLE mark as reported against the rerun's A/A taxes (`rerun`: an A/A of the rerun
/// excludes 0; `detected`: which).
fn unstable_words(reported: bool, rerun: bool, detected: &[String]) -> String {
    let detected = detected.join(", ");
    match (reported, rerun) {
        (true, false) => "UNSTABLE DATASET would clear: no A/A tax excludes 0 without them.".into(),
        (true, true) => {
            format!(
                "UNSTABLE DATASET would hold: without them the A/A taxes of {detected} exclude 0."
            )
        }
        (false, true) => format!(
            "Without them an A/A tax would exclude 0 ({detected}): the dataset would read UNSTABLE."
        ),
        (false, false) => "No A/A tax excludes 0, with them or without.".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::model::Estimate;
    use crate::verdicts::VerdictKind;

    fn h(id: &str, est: f64, verdict: VerdictKind) -> Verdict {
        Verdict {
            id: id.into(),
            title: String::new(),
            statement: String::new(),
            estimate: Some(Estimate {
                est,
                lo: Some(est - 0.1),
                hi: Some(est + 0.1),
            }),
            unit: "fraction".into(),
            threshold: String::new(),
            verdict,
            reason: String::new(),
            label: None,
        }
    }

    /// The four cases of the UNSTABLE mark, reported against the rerun.
    #[test]
    fn the_unstable_mark_is_worded_for_each_case() {
        assert_eq!(
            unstable_words(true, false, &[]),
            "UNSTABLE DATASET would clear: no A/A tax excludes 0 without them."
        );
        assert_eq!(
            unstable_words(true, true, &["plain Phase A r2_i4096_o256".to_owned()]),
            "UNSTABLE DATASET would hold: without them the A/A taxes of plain Phase A r2_i4096_o256 exclude 0."
        );
        assert!(unstable_words(false, true, &["x Phase B c".to_owned()]).contains("(x Phase B c)"));
        assert_eq!(
            unstable_words(false, false, &[]),
            "No A/A tax excludes 0, with them or without."
        );
    }

    /// A row is changed when the verdict differs (not the estimate), or when the rerun has no
    /// verdict for the id.
    #[test]
    fn a_row_is_changed_by_its_verdict_only() {
        let a = h("h1", 0.15, VerdictKind::Inconclusive);
        let same = h("h1", 0.02, VerdictKind::Inconclusive);
        let r = row(&a, Some(&same));
        assert!(!r.changed);
        assert_eq!((r.id.as_str(), r.anchor.as_str()), ("H1", "h1"));
        assert_eq!(r.reported, "+15.0% [+5.0%, +25.0%]");
        assert_eq!(r.without, "+2.0% [-8.0%, +12.0%]");
        let other = h("h1", 0.3, VerdictKind::Supported);
        let r = row(&a, Some(&other));
        assert!(r.changed);
        assert_eq!(r.without_verdict, "supported");
        let r = row(&a, None);
        assert!(r.changed);
        assert_eq!(
            (r.without.as_str(), r.without_verdict.as_str()),
            (fmt::NA, "not reported")
        );
    }
}
