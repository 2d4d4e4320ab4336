//! The same cell measured twice: Phase B at ref_safe runs the Phase A shape too (4096/256 at
//! ref_safe in the seed's grid), in other launches and at another position in the launch (Phase
//! A's ref_safe cell is a launch's first cell, right after its warm-up; in Phase B it follows
//! other shapes). Both measure the same tax, so their difference is a replication check of the
//! design itself: a difference whose CI excludes 0 says the tax depends on something the design
//! holds fixed within a phase (the cell's position in the launch, the machines), and the report
//! says so next to the verdicts that read one of the two (H1–H4 read Phase A).

use std::collections::BTreeMap;

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
    /// The machines of `by_machine` whose launches ran the cell at different places, split by
    /// place: one term per place where both the config and plain ran it there
    /// ([`TaxEngine::relative_by_machine_and_place`]), labelled by the machine. The place
    /// groups and the test read these instead of such a machine's term ([`place_terms`]), and
    /// they are the one comparison of places that no machine difference enters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub split_by_place: Vec<MachineTax>,
    /// [`place_terms`] grouped by where the cell ran in the machines' launches, both phases
    /// together ([`by_place`]): whether the phases' disagreement follows the place instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_place: Vec<PlaceGroup>,
    /// The machines that ran the cell 1st against those that ran it later ([`place_test`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place_test: Option<PlaceTest>,
}

/// The machines (of both phases) whose launches of the config and of plain all ran the cell at
/// one place among their cells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlaceGroup {
    /// The cell's 1-based place in those launches; 0: the launches ran it at different places,
    /// or a place is unknown.
    pub place: u32,
    /// Machines per phase.
    pub machines: BTreeMap<Phase, u32>,
    /// How many of them have a tax above 0.
    pub above_zero: u32,
    /// The median of their taxes (numpy's `median`: the mean of the middle two for an even
    /// count).
    pub median: f64,
}

/// The taxes of the machines that ran the cell 1st in every launch against those that ran it
/// later in every launch, both phases pooled: the exact two-sided rank-sum test
/// ([`crate::stats::rank_test::rank_sum_p`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlaceTest {
    pub first: u32,
    pub later: u32,
    pub p: f64,
    /// The same comparison within each phase ([`WithinPhase`]); `None` when no phase has
    /// machines on both sides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_phase: Option<WithinPhase>,
}

/// 1st against later within each phase, the phases as strata
/// ([`crate::stats::rank_test::stratified_rank_sum_p`]): the pooled test cannot tell a place
/// effect from a phase effect where one phase ran the cell only 1st (Phase A always does), this
/// one can, since it only shuffles machines within a phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WithinPhase {
    /// `[1st, later]` machines of each phase that has both (the phases the test reads).
    pub phases: BTreeMap<Phase, [u32; 2]>,
    pub p: f64,
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

/// The one place at which `t`'s launches ran the cell; 0 when they differ or one is unknown.
fn place_of(t: &MachineTax) -> u32 {
    match t.positions.split_first() {
        Some((&p, rest)) if p > 0 && rest.iter().all(|&q| q == p) => p,
        _ => 0,
    }
}

/// The terms the place groups and test read: `by_machine` with each machine that `split`
/// splits by place replaced by its per-place terms (a machine that ran the cell at two places
/// counts at each, with the tax of its launches there).
pub(crate) fn place_terms(by_machine: &[MachineTax], split: &[MachineTax]) -> Vec<MachineTax> {
    let is_split = |t: &MachineTax| {
        split
            .iter()
            .any(|s| s.phase == t.phase && s.machine == t.machine)
    };
    by_machine
        .iter()
        .filter(|t| !is_split(t))
        .chain(split)
        .cloned()
        .collect()
}

/// `terms` ([`place_terms`]) grouped by [`place_of`], in order of place (0, mixed or unknown,
/// last).
pub(crate) fn by_place(by_machine: &[MachineTax]) -> Vec<PlaceGroup> {
    let mut groups: BTreeMap<(bool, u32), Vec<&MachineTax>> = BTreeMap::new();
    for t in by_machine {
        let p = place_of(t);
        groups.entry((p == 0, p)).or_default().push(t);
    }
    groups
        .into_iter()
        .map(|((_, place), ts)| {
            let mut machines = BTreeMap::new();
            for t in &ts {
                *machines.entry(t.phase).or_insert(0) += 1;
            }
            let taxes: Vec<f64> = ts.iter().map(|t| t.tax).collect();
            PlaceGroup {
                place,
                machines,
                above_zero: taxes.iter().filter(|&&x| x > 0.0).count() as u32,
                median: crate::stats::quantile(&taxes, 0.5).unwrap_or(f64::NAN),
            }
        })
        .collect()
}

/// Machines that ran the cell 1st against those that ran it later (each at one place in all
/// its launches; `terms` from [`place_terms`], so a split machine's places are two units),
/// pooled and within phases; `None` unless both sides have a machine.
pub(crate) fn place_test(by_machine: &[MachineTax]) -> Option<PlaceTest> {
    // Per phase: (1st, later) taxes.
    let mut strata: BTreeMap<Phase, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for t in by_machine {
        let side = strata.entry(t.phase).or_default();
        match place_of(t) {
            0 => {}
            1 => side.0.push(t.tax),
            _ => side.1.push(t.tax),
        }
    }
    let first: Vec<f64> = strata.values().flat_map(|s| s.0.clone()).collect();
    let later: Vec<f64> = strata.values().flat_map(|s| s.1.clone()).collect();
    let p = crate::stats::rank_test::rank_sum_p(&first, &later)?;
    strata.retain(|_, (f, l)| !f.is_empty() && !l.is_empty());
    let within_phase = crate::stats::rank_test::stratified_rank_sum_p(
        &strata.values().cloned().collect::<Vec<_>>(),
    )
    .map(|p| WithinPhase {
        phases: strata
            .iter()
            .map(|(ph, (f, l))| (*ph, [f.len() as u32, l.len() as u32]))
            .collect(),
        p,
    });
    Some(PlaceTest {
        first: first.len() as u32,
        later: later.len() as u32,
        p,
        within_phase,
    })
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

    /// `1st on 3 machines (A 2, B 1), tax above 0 on 3, median +14.0%; 5th on 4 (B 4), above 0
    /// on 0, median -15.7%; 1st against later: exact rank-sum p 0.057 (3 vs 4 machines); within
    /// a phase (B 1 vs 4): stratified p 0.400`: the machines by the
    /// cell's place in their launches ([`by_place`], [`place_test`]); `None` when every machine
    /// ran it at one place (nothing to compare).
    pub fn place_summary(&self) -> Option<String> {
        if self.by_place.len() < 2 {
            return None;
        }
        let groups: Vec<String> = self
            .by_place
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let n: u32 = g.machines.values().sum();
                let phases = g
                    .machines
                    .iter()
                    .map(|(ph, k)| format!("{} {k}", ph.label()))
                    .collect::<Vec<_>>()
                    .join(", ");
                let place = match g.place {
                    0 => "at mixed or unknown places".to_owned(),
                    p => super::words::ordinal(p),
                };
                let (tax, machines) = match (i, n) {
                    (0, 1) => ("tax above 0", "machine"),
                    (0, _) => ("tax above 0", "machines"),
                    _ => ("above 0", ""),
                };
                format!(
                    "{place} on {n}{}{machines} ({phases}), {tax} on {}, median {}%",
                    if machines.is_empty() { "" } else { " " },
                    g.above_zero,
                    super::words::signed(g.median * 100.0, 1)
                )
            })
            .collect();
        let test = self.place_test.as_ref().map_or(String::new(), |t| {
            let within = t.within_phase.as_ref().map_or(String::new(), |w| {
                let phases = w
                    .phases
                    .iter()
                    .map(|(ph, [f, l])| format!("{} {f} vs {l}", ph.label()))
                    .collect::<Vec<_>>()
                    .join(", ");
                format!("; within a phase ({phases}): stratified p {:.3}", w.p)
            });
            format!(
                "; 1st against later: exact rank-sum p {:.3} ({} vs {} machines){within}",
                t.p, t.first, t.later
            )
        });
        Some(format!(
            "{}{test}{}",
            groups.join("; "),
            self.within_machines()
        ))
    }

    /// `; on the machine that ran it at several places (A boot 549fc66c): 1st +8.3%, 4th
    /// +27.8%`: the split machines' terms, place by place (empty without one).
    fn within_machines(&self) -> String {
        let mut by: BTreeMap<(Phase, &str), Vec<&MachineTax>> = BTreeMap::new();
        for t in &self.split_by_place {
            by.entry((t.phase, t.machine.as_str())).or_default().push(t);
        }
        if by.is_empty() {
            return String::new();
        }
        let items: Vec<String> = by
            .iter()
            .map(|((ph, m), ts)| {
                let mut ts = ts.clone();
                // Known places in order, an unknown one last (as `by_place` lists them).
                ts.sort_by_key(|t| (place_of(t) == 0, place_of(t)));
                let taxes: Vec<String> = ts
                    .iter()
                    .map(|t| {
                        let place = match place_of(t) {
                            0 => "unknown place".to_owned(),
                            p => super::words::ordinal(p),
                        };
                        format!("{place} {}%", super::words::signed(t.tax * 100.0, 1))
                    })
                    .collect();
                format!("{} {m}: {}", ph.label(), taxes.join(", "))
            })
            .collect();
        let (one, what) = if items.len() == 1 {
            ("the machine", "its launches")
        } else {
            ("the machines", "their launches")
        };
        format!(
            "; on {one} that ran it at several places, {what} at each place (no machine difference in these): {}",
            items.join("; ")
        )
    }

    /// The two measurements disagree beyond their CIs.
    pub fn disagrees(&self) -> bool {
        matches!(
            self.difference.detection,
            super::model::Detection::Tax | super::model::Detection::Negative
        )
    }
}

/// Every (config, cell, metric) with a tax in both Phase A and Phase B; the cells' places are
/// the engine's ([`TaxEngine::with_places`]; none known without them), so the per-place terms
/// and the places listed come from one map.
pub(crate) fn checks(engine: &TaxEngine) -> Vec<SameCell> {
    let none = BTreeMap::new();
    let positions = engine.places.unwrap_or(&none);
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
            let split = [Phase::A, Phase::B].map(|ph| {
                (
                    ph,
                    engine.relative_by_machine_and_place(config, ph, cell, m),
                )
            });
            let [by_machine, split_by_place]: [Vec<MachineTax>; 2] =
                [[(Phase::A, a_terms), (Phase::B, b_terms)], split].map(|terms| {
                    terms
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
                        .collect()
                });
            let terms = place_terms(&by_machine, &split_by_place);
            out.push(SameCell {
                by_place: by_place(&terms),
                place_test: place_test(&terms),
                by_machine,
                split_by_place,
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

    fn machine(phase: Phase, tax: f64, positions: &[u32]) -> MachineTax {
        MachineTax {
            phase,
            machine: format!("{tax}"),
            tax,
            launches: vec![0],
            plain_launches: vec![0],
            positions: positions.to_vec(),
        }
    }

    /// The archive's mooncake_both TTFT p90 terms at 4096/256 after the sixteenth stretch, by
    /// hand from the per-machine table: 1st in every launch on Phase A's two machines (+12.4,
    /// +14.0%) and on Phase B's new one (+14.1%), 5th on Phase B's four others (−16.4, −16.3,
    /// −9.5, −15.2%); plus a machine whose launches ran it 1st and 5th (mixed) and one with an
    /// unknown place, which join no side of the test. Medians by numpy's definition: +14.0%
    /// and (−16.3 − 15.2)/2 = −15.75%; the rank test is 3 against 4 with every 1st above every
    /// later, p = 2/35 (the rank-sum test's own test shows why). Within a phase only Phase B has
    /// both sides (Phase A's are all 1st or unknown): its one 1st, +14.1%, tops its four 5th,
    /// rank 5 of 5 against a mean of 3; of the 5 splits, ranks 1 and 5 lie 2 from it: p = 2/5.
    #[test]
    fn machines_are_grouped_and_tested_by_the_cell_s_place() {
        let ms = vec![
            machine(Phase::A, 0.124, &[1, 1, 1, 1]),
            machine(Phase::A, 0.140, &[1, 1, 1]),
            machine(Phase::B, -0.164, &[5, 5]),
            machine(Phase::B, -0.163, &[5, 5]),
            machine(Phase::B, 0.141, &[1, 1]),
            machine(Phase::B, -0.095, &[5, 5]),
            machine(Phase::B, -0.152, &[5, 5]),
            machine(Phase::B, 0.30, &[1, 5]),
            machine(Phase::A, -0.40, &[0, 1]),
        ];
        let g = by_place(&ms);
        assert_eq!(g.iter().map(|g| g.place).collect::<Vec<_>>(), [1, 5, 0]);
        assert_eq!(
            g[0].machines,
            BTreeMap::from([(Phase::A, 2), (Phase::B, 1)])
        );
        assert_eq!(
            (g[0].above_zero, g[1].above_zero, g[2].above_zero),
            (3, 0, 1)
        );
        assert!((g[0].median - 0.140).abs() < 1e-12);
        assert!((g[1].median + 0.1575).abs() < 1e-12);
        assert!((g[2].median + 0.05).abs() < 1e-12, "mean of the middle two");
        let t = place_test(&ms).unwrap();
        assert_eq!((t.first, t.later), (3, 4));
        assert!((t.p - 2.0 / 35.0).abs() < 1e-12);
        let w = t.within_phase.unwrap();
        assert_eq!(w.phases, BTreeMap::from([(Phase::B, [1, 4])]));
        assert!((w.p - 0.4).abs() < 1e-12, "{}", w.p);
        // Phase A's two 1st against one Phase B 5th: pooled they split, within a phase nothing
        // does.
        let t = place_test(&ms[..3]).unwrap();
        assert_eq!((t.first, t.later, t.within_phase), (2, 1, None));
        // Every machine at one place: nothing to group or test.
        let one = &ms[2..4];
        assert_eq!(by_place(one).len(), 1);
        assert_eq!(place_test(one), None);
    }

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
