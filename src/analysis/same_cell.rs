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
    /// Where the cell ran in each of those launches ([`cell_positions`]; 0: unknown), in the
    /// order of `launches` then `plain_launches`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub positions: Vec<u32>,
}

/// `(config, phase, launch, cell)` of a launch's cell.
pub(crate) type CellAt = (String, Phase, u32, String);

/// A cell that started this long after the previous cell of its run directory ended had a
/// server start between them ([`cell_positions`]).
const NEW_SERVER_GAP_S: f64 = 60.0;

/// Where each cell ran in its launch: its 1-based place among the cells its server attempt
/// ran, in start order (`wall_start_unix_ms`). A resume starts a new server, so the count
/// starts again at 1 on a cell whose warm-up window is longer than its planned one by more than
/// 0.5 s (the launch warm-up covers the first cell a fresh server measures; a plan without a
/// warm-up in seconds, as `ctax synth` writes, is not read) or that started more than
/// [`NEW_SERVER_GAP_S`] after the previous cell ended (a server start lies between).
pub(crate) fn cell_positions(
    runs: &[crate::ingest::Run],
) -> std::collections::BTreeMap<CellAt, u32> {
    let mut out = std::collections::BTreeMap::new();
    for run in runs {
        let Some(summary) = &run.summary else {
            continue;
        };
        let planned_warmup = |h: &ctax_schema::CellHealth| {
            run.run_config.as_ref().and_then(|c| {
                c.cells
                    .iter()
                    .find(|p| p.phase == h.phase && p.cell.name() == h.cell)
                    .map(|p| p.warmup_s)
            })
        };
        let mut cells: Vec<&ctax_schema::CellHealth> = summary.cells.values().collect();
        cells.sort_by_key(|h| (h.wall_start_unix_ms, h.t_start_ns));
        let mut pos = 0;
        let mut prev_end_ms: Option<f64> = None;
        for h in cells {
            let span = |a: u64, b: u64| b.saturating_sub(a) as f64 / 1e9;
            let warm = span(h.t_start_ns, h.t_warmup_end_ns);
            let longer_warmup = planned_warmup(h).is_some_and(|w| w > 0.0 && warm > w + 0.5);
            let start_ms = h.wall_start_unix_ms as f64;
            let gap = prev_end_ms.is_some_and(|e| (start_ms - e) / 1e3 > NEW_SERVER_GAP_S);
            pos = if prev_end_ms.is_none() || longer_warmup || gap {
                1
            } else {
                pos + 1
            };
            prev_end_ms = Some(start_ms + span(h.t_start_ns, h.t_end_ns) * 1e3);
            out.insert(
                (run.config.clone(), h.phase, run.launch, h.cell.clone()),
                pos,
            );
        }
    }
    out
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

    /// The two measurements disagree beyond their CIs.
    pub fn disagrees(&self) -> bool {
        matches!(
            self.difference.detection,
            super::model::Detection::Tax | super::model::Detection::Negative
        )
    }
}

/// Every (config, cell, metric) with a tax in both Phase A and Phase B.
pub(crate) fn checks(
    engine: &TaxEngine,
    positions: &std::collections::BTreeMap<CellAt, u32>,
) -> Vec<SameCell> {
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
            let (Ok((a, a_terms)), Ok((b, b_terms))) = (
                engine.relative_by_machine(config, Phase::A, cell, m),
                engine.relative_by_machine(config, Phase::B, cell, m),
            ) else {
                continue;
            };
            let d = ((1.0 + b.0) / (1.0 + a.0) - 1.0, {
                super::replicates::combine2(&b.1, &a.1, |y, x| (1.0 + y) / (1.0 + x) - 1.0)
            });
            let by_machine = [(Phase::A, a_terms), (Phase::B, b_terms)]
                .into_iter()
                .flat_map(|(ph, terms)| {
                    terms.into_iter().map(move |d| {
                        let at = |c: &str, l: &u32| {
                            positions
                                .get(&(c.to_owned(), ph, *l, cell.to_owned()))
                                .copied()
                                .unwrap_or(0)
                        };
                        let positions =
                            d.a.iter()
                                .map(|l| at(config, l))
                                .chain(d.b.iter().map(|l| at("plain", l)))
                                .collect();
                        MachineTax {
                            phase: ph,
                            machine: d.machine,
                            tax: d.est,
                            launches: d.a,
                            plain_launches: d.b,
                            positions,
                        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// mooncake_both l2 of the archive (Phase B): five shapes on one machine, then its sixth,
    /// 4096/1024, resumed on another machine (30-s launch warm-up on 512/64 and on 4096/1024,
    /// 5 s on the others, read from its summary.json by hand): places 1–5, then 1 again. The
    /// same launch without its planned warm-ups (as `ctax synth` writes them) finds the resume
    /// by the gap between the cells (10.6 h).
    #[test]
    fn a_cell_s_place_in_its_launch_restarts_with_a_resumed_server() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("results/h200x2-2026-11-30/20261203-022038_mooncake_both_l2");
        let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
        let mut run = crate::ingest::Run {
            dir_name: "20261203-022038_mooncake_both_l2".into(),
            path: dir.clone(),
            config: "mooncake_both".into(),
            launch: 2,
            run_config: Some(serde_json::from_slice(&read("config.json")).unwrap()),
            summary: Some(serde_json::from_slice(&read("summary.json")).unwrap()),
            env: Default::default(),
            cells: Default::default(),
            artifacts: Default::default(),
        };
        let expect = [
            ("r2_i512_o64", 1),
            ("r2_i512_o256", 2),
            ("r2_i512_o1024", 3),
            ("r2_i4096_o64", 4),
            ("r2_i4096_o256", 5),
            ("r2_i4096_o1024", 1),
        ];
        let check = |run: &crate::ingest::Run| {
            let pos = cell_positions(std::slice::from_ref(run));
            for (cell, p) in expect {
                let key = ("mooncake_both".to_owned(), Phase::B, 2, cell.to_owned());
                assert_eq!(pos.get(&key), Some(&p), "{cell}");
            }
        };
        check(&run);
        // Without the gap (the resumed cell moved to 1 s after 4096/256 ended): the longer
        // warm-up alone finds the new server.
        let mut near = run.clone();
        {
            let cells = &mut near.summary.as_mut().unwrap().cells;
            let before = &cells["B/r2_i4096_o256"];
            let end_ms =
                before.wall_start_unix_ms + (before.t_end_ns - before.t_start_ns) / 1_000_000;
            cells
                .get_mut("B/r2_i4096_o1024")
                .unwrap()
                .wall_start_unix_ms = end_ms + 1_000;
        }
        check(&near);
        for c in &mut run.run_config.as_mut().unwrap().cells {
            c.warmup_s = 0.0;
        }
        check(&run);
        // Neither: counted on (6th).
        for c in &mut near.run_config.as_mut().unwrap().cells {
            c.warmup_s = 0.0;
        }
        let pos = cell_positions(std::slice::from_ref(&near));
        let key = (
            "mooncake_both".to_owned(),
            Phase::B,
            2,
            "r2_i4096_o1024".to_owned(),
        );
        assert_eq!(pos.get(&key), Some(&6));
    }
}
