//! The cells whose launches ran them at different places in the launch. A tax pools its
//! launches, so a cell that some launches ran 1st and others 5th pools the two places, and the
//! same-cell check ([`super::same_cell`]) shows that a cell's place can move its tax. This
//! happens when a sweep reorders a phase (`ctax run --phase-b-first`, which also moves every
//! other shape one place later; `--phase-a-order`, `--phase-bp-first`) or when a cell resumed on
//! a new server (it runs 1st there).
//! The report warns for each phase, and a verdict that reads such a phase says so.

use std::collections::BTreeMap;

use ctax_schema::Phase;
use serde::{Deserialize, Serialize};

use super::same_cell::CellAt;

/// One launch of one config (`mooncake_both l4` when shown).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LaunchRef {
    pub config: String,
    pub launch: u32,
}

impl std::fmt::Display for LaunchRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} l{}", self.config, self.launch)
    }
}

/// One cell whose launches ran it at more than one known place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MixedPlaces {
    pub phase: Phase,
    pub cell: String,
    /// 1-based place → the launches that ran the cell there (by config name, then launch).
    pub places: BTreeMap<u32, Vec<LaunchRef>>,
}

/// The cells of `positions` ([`super::same_cell::cell_positions`]) run at more than one known
/// place (an unknown place, 0, is left out), in order of phase and cell name.
pub(crate) fn mixed(positions: &BTreeMap<CellAt, u32>) -> Vec<MixedPlaces> {
    let mut by_cell: BTreeMap<(Phase, &str), BTreeMap<u32, Vec<LaunchRef>>> = BTreeMap::new();
    for ((config, phase, launch, cell), &place) in positions {
        if place > 0 {
            by_cell
                .entry((*phase, cell.as_str()))
                .or_default()
                .entry(place)
                .or_default()
                .push(LaunchRef {
                    config: config.clone(),
                    launch: *launch,
                });
        }
    }
    by_cell
        .into_iter()
        .filter(|(_, places)| places.len() > 1)
        .map(|((phase, cell), places)| MixedPlaces {
            phase,
            cell: cell.to_owned(),
            places,
        })
        .collect()
}

impl MixedPlaces {
    /// `r2_i4096_o256 5th in 8 launches, 1st in 4 (mooncake_both l4, l5, plain l4, l5)`: the
    /// place most launches ran it at, then the others with their launches.
    pub fn describe(&self) -> String {
        let mut places: Vec<(&u32, &Vec<LaunchRef>)> = self.places.iter().collect();
        // Most launches first; at equal counts, the earlier place.
        places.sort_by_key(|(p, l)| (std::cmp::Reverse(l.len()), **p));
        let parts: Vec<String> = places
            .iter()
            .enumerate()
            .map(|(i, (p, l))| {
                let n = l.len();
                let what = if n == 1 { "launch" } else { "launches" };
                let place = super::words::ordinal(**p);
                if i == 0 {
                    format!("{place} in {n} {what}")
                } else {
                    let l: Vec<String> = l.iter().map(ToString::to_string).collect();
                    format!("{place} in {n} ({})", l.join(", "))
                }
            })
            .collect();
        format!("{} {}", self.cell, parts.join(", "))
    }

    /// Whether a launch of one of `configs` ran the cell at a place other launches did not.
    pub fn involves(&self, configs: &[&str]) -> bool {
        self.places
            .values()
            .flatten()
            .any(|l| configs.contains(&l.config.as_str()))
    }
}

/// One warning per phase with mixed places: the cells and where their launches ran them.
pub(crate) fn warnings(mixed: &[MixedPlaces]) -> Vec<String> {
    let mut by_phase: BTreeMap<Phase, Vec<String>> = BTreeMap::new();
    for m in mixed {
        by_phase.entry(m.phase).or_default().push(m.describe());
    }
    by_phase
        .into_iter()
        .map(|(phase, cells)| {
            format!(
                "Phase {}: launches ran {} of its cells at different places in the launch, and each of those cells' taxes pools the places (a reordered sweep, as ctax run --phase-b-first makes, or a cell resumed on a new server, which runs it 1st; the same-cell check shows that a cell's place can move its tax): {}",
                phase.label(),
                cells.len(),
                cells.join("; ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(config: &str, phase: Phase, launch: u32, cell: &str) -> CellAt {
        (config.to_owned(), phase, launch, cell.to_owned())
    }

    /// Phase B as the archive has it, cut to two shapes: l0–l1 of both configs ran 512/64 1st
    /// and 4096/256 2nd, l2 the other way round (`--phase-b-first 4096/256`); plain l1's
    /// 4096/256 has an unknown place (left out). Phase A's cell ran 1st everywhere: not mixed.
    #[test]
    fn cells_run_at_several_places_are_listed_with_their_launches() {
        let mut pos = BTreeMap::new();
        for c in ["plain", "mooncake_both"] {
            for l in 0..2 {
                pos.insert(at(c, Phase::B, l, "r2_i512_o64"), 1);
                pos.insert(at(c, Phase::B, l, "r2_i4096_o256"), 2);
                pos.insert(at(c, Phase::A, l, "r2_i4096_o256"), 1);
            }
            pos.insert(at(c, Phase::B, 2, "r2_i512_o64"), 2);
            pos.insert(at(c, Phase::B, 2, "r2_i4096_o256"), 1);
        }
        pos.insert(at("plain", Phase::B, 1, "r2_i4096_o256"), 0);
        let m = mixed(&pos);
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(
            (m[0].phase, m[0].cell.as_str(), m[1].cell.as_str()),
            (Phase::B, "r2_i4096_o256", "r2_i512_o64")
        );
        assert_eq!(
            m[0].describe(),
            "r2_i4096_o256 2nd in 3 launches, 1st in 2 (mooncake_both l2, plain l2)"
        );
        assert_eq!(
            m[1].describe(),
            "r2_i512_o64 1st in 4 launches, 2nd in 2 (mooncake_both l2, plain l2)"
        );
        assert!(m[0].involves(&["mooncake_both"]));
        assert!(!m[0].involves(&["nixl_both"]));
        let w = warnings(&m);
        assert_eq!(w.len(), 1);
        assert!(w[0].starts_with("Phase B: launches ran 2 of its cells at different places"));
        assert!(w[0].ends_with(
            "r2_i4096_o256 2nd in 3 launches, 1st in 2 (mooncake_both l2, plain l2); r2_i512_o64 1st in 4 launches, 2nd in 2 (mooncake_both l2, plain l2)"
        ));
        // One place everywhere: nothing.
        pos.retain(|(_, _, l, _), _| *l < 2);
        pos.insert(at("plain", Phase::B, 1, "r2_i4096_o256"), 2);
        assert_eq!(mixed(&pos), vec![]);
    }

    /// A B' cell resumed on a new server (1st there, 2nd in the others) is warned about as
    /// "Phase B'", the name the report's tables give the phase, not its file tag `Bp`.
    #[test]
    fn a_b_prime_warning_names_the_phase_as_the_report_does() {
        let mut pos = BTreeMap::new();
        for (c, l, p) in [("plain", 8, 2), ("plain", 9, 2), ("mooncake_both", 6, 1)] {
            pos.insert(at(c, Phase::Bp, l, "r6_i4096_o256"), p);
        }
        let w = warnings(&mixed(&pos));
        assert_eq!(w.len(), 1);
        assert!(
            w[0].starts_with("Phase B': launches ran 1 of its cells"),
            "{}",
            w[0]
        );
        assert!(
            w[0].ends_with("r6_i4096_o256 2nd in 2 launches, 1st in 1 (mooncake_both l6)"),
            "{}",
            w[0]
        );
    }
}
