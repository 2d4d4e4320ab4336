//! The Machines subsection of Taxes: which launches ran on which machine (taxes compare a
//! config with plain on the same machine) and the machine-effect test of each cell.

use crate::analysis::machines::{MachineEffect, MachinesSummary};
use crate::analysis::model::AnalysisResult;

/// One machine as displayed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MachineRow {
    pub machine: String,
    /// `A: plain l0, mooncake_both l1; B: …`.
    pub launches: String,
    /// Whether plain ran there in every phase it has launches of (`yes`, or `no: Phase A`):
    /// without it, the machine's other launches have no tax.
    pub plain: String,
}

/// One machine-effect test as displayed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EffectRow {
    pub cell: String,
    pub metric: String,
    pub machines: String,
    pub launches: String,
    /// `9.77 on (5, 5)`.
    pub f: String,
    pub p: String,
    pub sd_ignoring: String,
    pub sd_within: String,
}

/// One first-launch test as displayed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FirstRow {
    pub cell: String,
    pub metric: String,
    /// `37 (13 first)`.
    pub launches: String,
    pub machines: String,
    /// `+7.5% [-0.9%, +16.6%]`, bold when the interval excludes 0.
    pub effect: String,
    pub detected: bool,
    pub df: String,
    pub p: String,
}

/// Where plain ran relative to one config's launches on the machines the two shared.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OrderRow {
    pub phase: String,
    pub config: String,
    pub before: u32,
    pub after: u32,
    pub around: u32,
    /// `plain before it on every machine` (one-sided: drift reads as tax), else empty.
    pub one_sided: String,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct MachinesView {
    pub rows: Vec<MachineRow>,
    pub effects: Vec<EffectRow>,
    pub first: Vec<FirstRow>,
    pub order: Vec<OrderRow>,
}

pub(super) fn machines(r: &AnalysisResult) -> MachinesView {
    let m = &r.summary.machines;
    let rows = m
        .launches
        .iter()
        .map(|(machine, by_phase)| {
            let missing: Vec<&str> = by_phase
                .iter()
                .filter(|(_, l)| !l.iter().any(|x| x.starts_with("plain l")))
                .map(|(p, _)| p.label())
                .collect();
            MachineRow {
                machine: machine.clone(),
                launches: by_phase
                    .iter()
                    .map(|(p, l)| format!("{}: {}", p.label(), l.join(", ")))
                    .collect::<Vec<_>>()
                    .join("; "),
                plain: if missing.is_empty() {
                    "yes".to_owned()
                } else {
                    format!("no: Phase {}", missing.join(", "))
                },
            }
        })
        .collect();
    let effects = m.effects.iter().map(|e| effect_row(r, e)).collect();
    let first = m
        .first_launch
        .iter()
        .map(|e| FirstRow {
            cell: cell_label(r, e.phase, &e.cell),
            metric: crate::analysis::launch_noise::metric_label(&e.metric).to_owned(),
            launches: format!("{} ({} first)", e.launches, e.first),
            machines: e.machines.to_string(),
            effect: e.estimate().pct_ci(),
            detected: e.detected(),
            df: e.df.to_string(),
            p: p_text(e.p),
        })
        .collect();
    let order = m
        .order
        .iter()
        .map(|o| OrderRow {
            phase: o.phase.label().to_owned(),
            config: o.config.clone(),
            before: o.plain_before,
            after: o.plain_after,
            around: o.plain_around,
            one_sided: o
                .one_sided()
                .map(|side| format!("plain {side} it on every machine"))
                .unwrap_or_default(),
        })
        .collect();
    MachinesView {
        rows,
        effects,
        first,
        order,
    }
}

/// `A 2 req/s, 4096/256` (the cell's name where its shape is unknown).
pub(super) fn cell_label(r: &AnalysisResult, phase: ctax_schema::Phase, cell: &str) -> String {
    r.summary
        .cells
        .iter()
        .find(|c| c.launch.is_none() && c.key.phase == phase && c.key.cell == cell)
        .map(|c| {
            format!(
                "{} {} req/s, {}/{}",
                phase.label(),
                crate::report::fmt::rate(c.rate),
                c.input_len,
                c.output_len
            )
        })
        .unwrap_or_else(|| format!("{} {}", phase.label(), cell))
}

fn effect_row(r: &AnalysisResult, e: &MachineEffect) -> EffectRow {
    EffectRow {
        cell: cell_label(r, e.phase, &e.cell),
        metric: crate::analysis::launch_noise::metric_label(&e.metric).to_owned(),
        machines: e.machines.to_string(),
        launches: e.launches.to_string(),
        f: format!("{:.2} on ({}, {})", e.f, e.df1, e.df2),
        p: p_text(e.p),
        sd_ignoring: format!("±{:.1}%", e.sd_ignoring_machines * 100.0),
        sd_within: format!("±{:.1}%", e.sd_within_machines * 100.0),
    }
}

/// A p-value with the digits it needs (`0.013`, `0.0005`, `< 0.0001`).
fn p_text(p: f64) -> String {
    if !p.is_finite() {
        "n/a".to_owned()
    } else if p < 1e-4 {
        "< 0.0001".to_owned()
    } else if p < 0.01 {
        format!("{p:.4}")
    } else {
        format!("{p:.3}")
    }
}

/// The At a glance line: how many machines, and the machine effect at ref_safe.
pub(super) fn glance_line(
    m: &MachinesSummary,
    ref_safe: Option<f64>,
    r: &AnalysisResult,
) -> String {
    let mut line = format!(
        "{}; a tax compares a config with plain on the same machine",
        m.count()
    );
    let at_ref: Vec<String> = m
        .effects
        .iter()
        .filter(|e| e.phase == ctax_schema::Phase::A && at_ref_safe(r, ref_safe, e.phase, &e.cell))
        .map(|e| {
            format!(
                "{} F {:.1} on ({}, {}), p {} (sd per launch ±{:.1}% ignoring machines, ±{:.1}% within)",
                crate::analysis::launch_noise::metric_label(&e.metric),
                e.f,
                e.df1,
                e.df2,
                p_text(e.p),
                e.sd_ignoring_machines * 100.0,
                e.sd_within_machines * 100.0
            )
        })
        .collect();
    if !at_ref.is_empty() {
        line = format!("{line}; machine effect at ref_safe: {}", at_ref.join("; "));
    }
    let first: Vec<String> = m
        .first_launch
        .iter()
        .filter(|e| e.phase == ctax_schema::Phase::A && at_ref_safe(r, ref_safe, e.phase, &e.cell))
        .map(|e| {
            format!(
                "{} {} (p {})",
                crate::analysis::launch_noise::metric_label(&e.metric),
                e.estimate().pct_ci(),
                p_text(e.p)
            )
        })
        .collect();
    if !first.is_empty() {
        line = format!(
            "{line}; a launch that ran first on its machine against the same config's later ones there, at ref_safe: {}",
            first.join("; ")
        );
    }
    line
}

/// Whether `cell` of `phase` runs at ref_safe.
fn at_ref_safe(
    r: &AnalysisResult,
    ref_safe: Option<f64>,
    phase: ctax_schema::Phase,
    cell: &str,
) -> bool {
    r.summary.cells.iter().any(|c| {
        c.launch.is_none()
            && c.key.phase == phase
            && c.key.cell == cell
            && ref_safe.is_some_and(|x| (c.rate - x).abs() < 1e-9)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p_values_keep_their_digits() {
        assert_eq!(p_text(0.0129), "0.013");
        assert_eq!(p_text(0.000_51), "0.0005");
        assert_eq!(p_text(3e-7), "< 0.0001");
        assert_eq!(p_text(f64::NAN), "n/a");
    }
}
