//! The Verdicts section: one row per hypothesis and success criterion, every id of the seed
//! present (with its anchor) whatever the verdict data holds.

use crate::report::fmt;
use crate::verdicts::{Verdict, VerdictKind};

/// The anchors every report has, in order, whatever the verdict data holds.
pub(crate) const HYPOTHESES: [&str; 6] = ["h1", "h2", "h3", "h4", "h5", "h6"];
pub(crate) const CRITERIA: [&str; 7] = ["sc1", "sc2", "sc3", "sc4", "sc5", "sc6", "sc7"];

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct VerdictRow {
    /// Anchor, e.g. `h1`.
    pub anchor: String,
    /// Display id, e.g. `H1`.
    pub id: String,
    pub title: String,
    pub statement: String,
    pub estimate: String,
    pub threshold: String,
    pub verdict: String,
    /// CSS class of the badge: `supported`, `refuted`, `inconclusive`, `not-testable`.
    pub badge: String,
    pub reason: String,
    pub label: String,
}

fn anchor_ok(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 16
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

pub(super) fn verdict_rows(vs: &[Verdict], expected: &[&str]) -> Vec<VerdictRow> {
    let mut rows: Vec<VerdictRow> = Vec::new();
    for id in expected {
        match vs.iter().find(|v| v.id.eq_ignore_ascii_case(id)) {
            Some(v) => rows.push(verdict_row(v, id)),
            None => rows.push(VerdictRow {
                anchor: (*id).to_owned(),
                id: id.to_uppercase(),
                title: "(not reported)".to_owned(),
                statement: String::new(),
                estimate: fmt::NA.to_owned(),
                threshold: String::new(),
                verdict: VerdictKind::NotTestable.as_str().to_owned(),
                badge: "not-testable".to_owned(),
                reason: "the analysis produced no verdict for this id".to_owned(),
                label: String::new(),
            }),
        }
    }
    // Anything beyond the seed's ids, with a safe anchor.
    for (i, v) in vs.iter().enumerate() {
        if expected.iter().any(|id| v.id.eq_ignore_ascii_case(id)) {
            continue;
        }
        let anchor = if anchor_ok(&v.id) && !rows.iter().any(|r| r.anchor == v.id) {
            v.id.clone()
        } else {
            format!("extra-{i}")
        };
        rows.push(verdict_row(v, &anchor));
    }
    rows
}

fn verdict_row(v: &Verdict, anchor: &str) -> VerdictRow {
    let id = v.id.to_uppercase();
    // Titles may repeat the id ("H2: ..."); the ID column already shows it.
    let title = match v.title.strip_prefix(&format!("{id}:")).map(str::trim_start) {
        Some(t) => {
            let mut c = t.chars();
            c.next()
                .map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
        }
        None => v.title.clone(),
    };
    VerdictRow {
        anchor: anchor.to_owned(),
        id,
        title,
        statement: v.statement.clone(),
        estimate: fmt::opt_estimate(v.estimate.as_ref(), &v.unit),
        threshold: v.threshold.clone(),
        verdict: v.verdict.as_str().to_owned(),
        badge: v.verdict.as_str().replace(' ', "-"),
        reason: v.reason.clone(),
        label: v.label.clone().unwrap_or_default(),
    }
}
