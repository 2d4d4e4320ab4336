//! The Data accounting section: what ingest did with every request record (kept, rejected by
//! a rule, duplicate, identity mismatch), which cells' data is not whole and why, and which
//! directories that look like runs were not loaded. One sentence when everything is clean.

use crate::analysis::model::AnalysisResult;
use crate::ingest::AccountRow;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AccountingView {
    /// Totals in one sentence.
    pub summary: String,
    /// Only the cells with a problem.
    pub rows: Vec<AccountingRow>,
    /// (directory, reason) of every entry not loaded.
    pub not_loaded: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AccountingRow {
    pub run: String,
    pub cell: String,
    pub file: String,
    pub read: String,
    pub kept: String,
    /// `rule n` per rule, joined.
    pub rejected: String,
    pub duplicates: String,
    pub identity: String,
    /// Why the data is not whole (empty when it is).
    pub incomplete: String,
}

fn count(n: u64) -> String {
    if n == 0 {
        "-".to_owned()
    } else {
        n.to_string()
    }
}

fn row(a: &AccountRow) -> AccountingRow {
    let acc = &a.account;
    AccountingRow {
        run: a.run.clone(),
        cell: format!("{}/{}", a.phase, a.cell),
        file: acc.file.clone().unwrap_or_default(),
        read: acc.read.to_string(),
        kept: acc.kept.to_string(),
        rejected: acc
            .rejected
            .iter()
            .map(|(rule, n)| format!("{} {n}", rule.as_str()))
            .collect::<Vec<_>>()
            .join(", "),
        duplicates: count(acc.duplicates),
        identity: count(acc.identity_mismatches),
        incomplete: acc.incomplete.join("; "),
    }
}

pub(super) fn accounting(r: &AnalysisResult) -> AccountingView {
    let a = &r.summary.accounting;
    let read: u64 = a.cells.iter().map(|c| c.account.read).sum();
    let kept: u64 = a.cells.iter().map(|c| c.account.kept).sum();
    let dropped = read - kept.min(read);
    let rows: Vec<AccountingRow> = a
        .cells
        .iter()
        .filter(|c| !c.account.clean())
        .map(row)
        .collect();
    let files = a.cells.len();
    let mut summary = format!(
        "{} request records read from {} requests file{}: ",
        read,
        files,
        if files == 1 { "" } else { "s" }
    );
    if dropped == 0 {
        summary.push_str("all kept");
    } else {
        summary.push_str(&format!(
            "{} kept, {} not used (rejected, duplicated or mismatched; each one is listed under \
             Warnings)",
            kept, dropped
        ));
    }
    let incomplete = a
        .cells
        .iter()
        .filter(|c| !c.account.incomplete.is_empty())
        .count();
    summary.push_str(&match incomplete {
        0 => "; every cell's data is whole".to_owned(),
        n => format!(
            "; {n} cell{} not whole (below)",
            if n == 1 { "" } else { "s" }
        ),
    });
    if !a.not_loaded.is_empty() {
        summary.push_str(&format!(
            "; {} director{} that look like runs not loaded (below)",
            a.not_loaded.len(),
            if a.not_loaded.len() == 1 { "y" } else { "ies" }
        ));
    }
    summary.push('.');
    AccountingView {
        summary,
        rows,
        not_loaded: a
            .not_loaded
            .iter()
            .map(|n| (n.name.clone(), n.reason.clone()))
            .collect(),
    }
}
