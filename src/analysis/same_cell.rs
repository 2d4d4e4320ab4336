//! The same cell measured twice: Phase B at ref_safe runs the Phase A shape too (4096/256 at
//! ref_safe in the seed's grid), in other launches and at another position in the launch (Phase
//! A's ref_safe cell is a launch's first cell, right after its warm-up; in Phase B it follows
//! other shapes). Both measure the same tax, so their difference is a replication check of the
//! design itself: a difference whose CI excludes 0 says the tax depends on something the design
//! holds fixed within a phase (the cell's position in the launch, the machines), and the report
//! says so next to the verdicts that read one of the two (H1–H4 read Phase A).

use ctax_schema::Phase;
use serde::{Deserialize, Serialize};

use super::model::TaxValue;
use super::taxes::{Metric, TaxEngine};

/// One config's tax in a cell that both Phase A and Phase B measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SameCell {
    pub config: String,
    /// The cell's name in both phases (`r2_i4096_o256`).
    pub cell: String,
    /// `ttft_p90` or `tpot_p90`.
    pub metric: String,
    pub phase_a: TaxValue,
    pub phase_b: TaxValue,
    /// `(1 + tax_B) / (1 + tax_A) − 1`: how far Phase B's measurement lies from Phase A's.
    pub difference: TaxValue,
    /// The tax on each machine that ran the config and plain, Phase A's then Phase B's (point
    /// estimates, the terms each phase's tax combines): whether a phase's machines agree, so a
    /// disagreement between the phases is seen to be systematic or one machine's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_machine: Vec<MachineTax>,
}

/// One machine's point estimate of a tax: `exp(mean log X − mean log plain) − 1` over its
/// launches of each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineTax {
    pub phase: Phase,
    /// The machine's label (its boot id, else its GPUs).
    pub machine: String,
    pub tax: f64,
    /// The config's launches and plain's on that machine.
    pub launches: Vec<u32>,
    pub plain_launches: Vec<u32>,
}

impl SameCell {
    /// `(positive, machines)` of `phase`'s machines: how many have a tax above 0.
    pub fn signs(&self, phase: Phase) -> (usize, usize) {
        let m: Vec<&MachineTax> = self
            .by_machine
            .iter()
            .filter(|t| t.phase == phase)
            .collect();
        (m.iter().filter(|t| t.tax > 0.0).count(), m.len())
    }
}

impl SameCell {
    /// The two measurements disagree beyond their CIs.
    pub fn disagrees(&self) -> bool {
        matches!(
            self.difference.detection,
            super::model::Detection::Tax | super::model::Detection::Negative
        )
    }
}

/// Every (config, cell, metric) with a tax in both Phase A and Phase B.
pub(crate) fn checks(engine: &TaxEngine) -> Vec<SameCell> {
    let mut out = Vec::new();
    let mut keys: Vec<(&str, &str)> = engine
        .stats
        .keys()
        .filter(|k| k.phase == Phase::B && k.config != "plain")
        .filter(|k| {
            engine
                .stats
                .keys()
                .any(|a| a.phase == Phase::A && a.config == k.config && a.cell == k.cell)
        })
        .map(|k| (k.config.as_str(), k.cell.as_str()))
        .collect();
    keys.sort_by_key(|(c, cell)| (super::model::config_order(c), cell.to_string()));
    for (config, cell) in keys {
        for (m, name) in [(Metric::TtftP90, "ttft_p90"), (Metric::TpotP90, "tpot_p90")] {
            let (Ok(a), Ok(b)) = (
                engine.relative(config, Phase::A, cell, m),
                engine.relative(config, Phase::B, cell, m),
            ) else {
                continue;
            };
            let d = ((1.0 + b.0) / (1.0 + a.0) - 1.0, {
                super::replicates::combine2(&b.1, &a.1, |y, x| (1.0 + y) / (1.0 + x) - 1.0)
            });
            let by_machine = [Phase::A, Phase::B]
                .into_iter()
                .flat_map(|ph| {
                    engine
                        .relative_by_machine(config, ph, cell, m)
                        .unwrap_or_default()
                        .into_iter()
                        .map(move |d| MachineTax {
                            phase: ph,
                            machine: d.machine,
                            tax: d.est,
                            launches: d.a,
                            plain_launches: d.b,
                        })
                })
                .collect();
            out.push(SameCell {
                by_machine,
                config: config.to_owned(),
                cell: cell.to_owned(),
                metric: name.to_owned(),
                phase_a: engine.value(a.0, &a.1, "fraction", &[m]),
                phase_b: engine.value(b.0, &b.1, "fraction", &[m]),
                difference: engine.value(d.0, &d.1, "fraction", &[m]),
            });
        }
    }
    out
}
