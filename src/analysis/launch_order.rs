//! Launch order on each machine: did plain's launches run before, after or around a config's?
//!
//! A tax compares a config with plain on the same machine, but their launches ran minutes apart
//! in one stretch, and a machine can drift over a stretch (the server keeps getting faster for
//! minutes after a launch; the host and GPUs warm; other tenants come and go). Where plain ran
//! on the same side of a config's launches on every machine the two shared, such a drift is
//! read as the config's tax, and the data cannot tell the two apart. This module says, per
//! phase and config, on how many of those machines plain ran before, after or around (before
//! and after, interleaved, or overlapping in time on another GPU) the config's launches; a
//! launch's span in a phase runs from its first cell's start to its last cell's end. Only the
//! configs and launches a tax compares count ([`balance`]'s caller filters). The analysis warns about
//! a config whose every machine puts plain on one side. `ctax run --plain-last` brackets
//! (DESIGN.md §4.3 "Launch order").

use std::collections::BTreeMap;

use ctax_schema::Phase;
use serde::{Deserialize, Serialize};

use super::model::{AaHalvesInTime, AaTax, CellStats};

/// Per phase and non-plain config: where plain's launches ran relative to the config's, over
/// the machines where both ran with recorded start times.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderBalance {
    pub phase: Phase,
    pub config: String,
    /// Machines where every plain launch ended before the config's first started.
    pub plain_before: u32,
    /// Machines where every plain launch started after the config's last ended.
    pub plain_after: u32,
    /// Machines with plain launches on both sides, interleaved, or overlapping in time.
    pub plain_around: u32,
}

impl OrderBalance {
    pub fn machines(&self) -> u32 {
        self.plain_before + self.plain_after + self.plain_around
    }

    /// `Some("before")` / `Some("after")` when plain ran on that side of the config's launches
    /// on every machine the two shared; `None` when some machine brackets or the sides differ.
    pub fn one_sided(&self) -> Option<&'static str> {
        let n = self.machines();
        if n == 0 {
            None
        } else if self.plain_before == n {
            Some("before")
        } else if self.plain_after == n {
            Some("after")
        } else {
            None
        }
    }
}

/// One per-launch row's cell in wall-clock time (ms since the Unix epoch).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CellSpan<'a> {
    pub phase: Phase,
    pub config: &'a str,
    pub launch: u32,
    pub machine: &'a str,
    pub start_ms: u64,
    pub end_ms: u64,
}

/// The spans of the per-launch rows that record a launch, a machine and a start time (a row
/// without an end ends where it starts).
pub(crate) fn cell_spans(per_launch: &[CellStats]) -> Vec<CellSpan<'_>> {
    per_launch.iter().filter_map(span_of).collect()
}

fn span_of(c: &CellStats) -> Option<CellSpan<'_>> {
    let start_ms = c.started_unix_ms?;
    Some(CellSpan {
        phase: c.key.phase,
        config: c.key.config.as_str(),
        launch: c.launch?,
        machine: c.machine.as_deref()?,
        start_ms,
        end_ms: c.ended_unix_ms.unwrap_or(start_ms).max(start_ms),
    })
}

/// Sets each A/A's [`AaTax::in_time`] from the start and end times of its cell in the
/// per-launch rows.
pub(crate) fn aa_halves(per_launch: &[CellStats], aa: &mut [AaTax]) {
    for a in aa.iter_mut() {
        let rows: Vec<CellSpan> = per_launch
            .iter()
            .filter(|c| c.key.config == a.config && c.key.phase == a.phase && c.key.cell == a.cell)
            .filter_map(span_of)
            .collect();
        a.in_time = halves_in_time(&rows, &a.launches_a, &a.launches_b);
    }
}

/// `AFirst`/`BFirst` when, on every machine with launches of both halves (`a`, `b`: launch
/// indices of one config in one cell, whose `rows` are given), one half's launches all ended
/// the cell before the other half's first started it, and that half is the same on every
/// machine; `Mixed` when some machine interleaves or overlaps them, or the machines disagree;
/// `None` when no machine has both (with recorded times: `rows` holds only timed cells).
/// Grouped by the machine itself, not by [`super::taxes::block_by_place`]'s blocks: every
/// pair inside a block is then earlier against later too.
pub(crate) fn halves_in_time(rows: &[CellSpan], a: &[u32], b: &[u32]) -> Option<AaHalvesInTime> {
    let mut by: BTreeMap<&str, [Option<(u64, u64)>; 2]> = BTreeMap::new();
    for r in rows {
        let side = if a.contains(&r.launch) {
            0
        } else if b.contains(&r.launch) {
            1
        } else {
            continue;
        };
        let e = &mut by.entry(r.machine).or_default()[side];
        *e = Some(e.map_or((r.start_ms, r.end_ms), |(s, t)| {
            (s.min(r.start_ms), t.max(r.end_ms))
        }));
    }
    let mut agreed = None;
    for sides in by.values() {
        let [Some(sa), Some(sb)] = *sides else {
            continue;
        };
        let this = if sa.1 < sb.0 {
            AaHalvesInTime::AFirst
        } else if sb.1 < sa.0 {
            AaHalvesInTime::BFirst
        } else {
            return Some(AaHalvesInTime::Mixed);
        };
        if agreed.is_some_and(|v| v != this) {
            return Some(AaHalvesInTime::Mixed);
        }
        agreed = Some(this);
    }
    agreed
}

/// The balance over the launches the taxes compare: a config's paired launches and plain's
/// launches of its phase's taxes (a config without a tax, or a launch a tax left out for lack
/// of plain on its machine, does not count).
pub(crate) fn of_taxes(per_launch: &[CellStats], taxes: &[super::model::Tax]) -> Vec<OrderBalance> {
    use std::collections::BTreeSet;
    let mut taxed: BTreeSet<(Phase, &str, u32)> = BTreeSet::new();
    for t in taxes.iter().filter(|t| !t.machines.is_empty()) {
        taxed.extend(
            t.paired_launches
                .iter()
                .map(|&l| (t.phase, t.config.as_str(), l)),
        );
        taxed.extend(t.plain_launches.iter().map(|&l| (t.phase, "plain", l)));
    }
    let rows: Vec<CellSpan> = cell_spans(per_launch)
        .into_iter()
        .filter(|r| taxed.contains(&(r.phase, r.config, r.launch)))
        .collect();
    balance(&rows)
}

/// Per launch index: its (start, end) in wall-clock ms.
type Spans = BTreeMap<u32, (u64, u64)>;

/// The balance of every (phase, non-plain config) that shared a machine with plain: a launch's
/// span in a phase runs from its cells' earliest start to their latest end there.
pub(crate) fn balance(rows: &[CellSpan]) -> Vec<OrderBalance> {
    // (phase, machine, config) → launch → (start, end).
    let mut spans: BTreeMap<(Phase, &str, &str), Spans> = BTreeMap::new();
    for r in rows {
        let e = spans
            .entry((r.phase, r.machine, r.config))
            .or_default()
            .entry(r.launch)
            .or_insert((r.start_ms, r.end_ms));
        e.0 = e.0.min(r.start_ms);
        e.1 = e.1.max(r.end_ms);
    }
    let mut out: BTreeMap<(Phase, (usize, String)), OrderBalance> = BTreeMap::new();
    for ((phase, machine, config), launches) in &spans {
        if *config == "plain" {
            continue;
        }
        let Some(plain) = spans.get(&(*phase, *machine, "plain")) else {
            continue;
        };
        let b = out
            .entry((*phase, super::model::config_order(config)))
            .or_insert_with(|| OrderBalance {
                phase: *phase,
                config: (*config).to_owned(),
                plain_before: 0,
                plain_after: 0,
                plain_around: 0,
            });
        let first = |m: &Spans| m.values().map(|s| s.0).min().unwrap_or(0);
        let last = |m: &Spans| m.values().map(|s| s.1).max().unwrap_or(0);
        if last(plain) < first(launches) {
            b.plain_before += 1;
        } else if first(plain) > last(launches) {
            b.plain_after += 1;
        } else {
            b.plain_around += 1;
        }
    }
    out.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row<'a>(
        phase: Phase,
        config: &'a str,
        launch: u32,
        machine: &'a str,
        t: u64,
    ) -> CellSpan<'a> {
        CellSpan {
            phase,
            config,
            launch,
            machine,
            start_ms: t,
            end_ms: t + 50,
        }
    }

    /// Every cell lasts 50 ms. Machine m1: plain (two cells, 100 and 140, so 100–190) before x
    /// (200); m2: x (100) before plain (300); m3: plain 100, x 200, plain 400 (bracketed); y
    /// only on m1 after plain; z started with plain at the same moment and w while plain ran
    /// (on another GPU of m1): around.
    #[test]
    fn plain_before_after_and_around() {
        use Phase::A;
        let rows = [
            row(A, "plain", 0, "m1", 140),
            row(A, "plain", 0, "m1", 100),
            row(A, "x", 0, "m1", 200),
            row(A, "x", 1, "m2", 100),
            row(A, "plain", 1, "m2", 300),
            row(A, "plain", 2, "m3", 100),
            row(A, "x", 2, "m3", 200),
            row(A, "plain", 3, "m3", 400),
            row(A, "y", 0, "m1", 500),
            row(A, "z", 0, "m1", 100),
            row(A, "w", 0, "m1", 170),
            row(Phase::B, "x", 0, "m9", 10),
        ];
        let b = balance(&rows);
        let get = |c: &str| b.iter().find(|o| o.config == c).unwrap();
        let x = get("x");
        assert_eq!(
            (x.plain_before, x.plain_after, x.plain_around),
            (1, 1, 1),
            "m1 before, m2 after, m3 around"
        );
        assert_eq!(x.one_sided(), None);
        let y = get("y");
        assert_eq!((y.plain_before, y.machines()), (1, 1));
        assert_eq!(y.one_sided(), Some("before"));
        let z = get("z");
        assert_eq!(
            (z.plain_around, z.one_sided()),
            (1, None),
            "same start: around"
        );
        assert_eq!(get("w").plain_around, 1, "overlapping in time: around");
        assert!(
            b.iter().all(|o| o.config != "plain" && o.phase == A),
            "no plain row; Phase B's x never met plain"
        );
    }

    #[test]
    fn plain_after_on_every_machine_is_one_sided() {
        let rows = [
            row(Phase::B, "x", 0, "m1", 100),
            row(Phase::B, "plain", 0, "m1", 200),
            row(Phase::B, "x", 1, "m2", 100),
            row(Phase::B, "plain", 1, "m2", 200),
        ];
        let b = balance(&rows);
        assert_eq!(b.len(), 1);
        assert_eq!((b[0].plain_after, b[0].one_sided()), (2, Some("after")));
    }

    /// Cells of 50 ms at the given start. m1: A's l0 (two rows: 100 and 140) before B's l1
    /// (300); m2: l2 (100) before l3 (200); l9 belongs to neither half. Both machines put A
    /// first. m2 reversed: the machines disagree. A B launch starting while an A launch still
    /// runs (another GPU of the machine): not one after the other. A machine with one half only
    /// says nothing.
    #[test]
    fn an_aa_s_halves_in_time() {
        use Phase::A;
        let a = [0, 2];
        let b = [1, 3];
        let first = [
            row(A, "plain", 0, "m1", 140),
            row(A, "plain", 0, "m1", 100),
            row(A, "plain", 1, "m1", 300),
            row(A, "plain", 2, "m2", 100),
            row(A, "plain", 3, "m2", 200),
            row(A, "plain", 9, "m2", 50),
        ];
        assert_eq!(halves_in_time(&first, &a, &b), Some(AaHalvesInTime::AFirst));
        assert_eq!(halves_in_time(&first, &b, &a), Some(AaHalvesInTime::BFirst));
        let disagree = [
            row(A, "plain", 0, "m1", 100),
            row(A, "plain", 1, "m1", 300),
            row(A, "plain", 2, "m2", 300),
            row(A, "plain", 3, "m2", 100),
        ];
        assert_eq!(
            halves_in_time(&disagree, &a, &b),
            Some(AaHalvesInTime::Mixed)
        );
        // l1 starts at 120, while l0 (100-150) still runs.
        let overlap = [
            row(A, "plain", 0, "m1", 100),
            row(A, "plain", 1, "m1", 120),
            row(A, "plain", 2, "m2", 100),
            row(A, "plain", 3, "m2", 200),
        ];
        assert_eq!(
            halves_in_time(&overlap, &a, &b),
            Some(AaHalvesInTime::Mixed)
        );
        // l0's second row (140-190) ends after l1 (180) starts: interleaved.
        let interleaved = [
            row(A, "plain", 0, "m1", 100),
            row(A, "plain", 0, "m1", 140),
            row(A, "plain", 1, "m1", 180),
        ];
        assert_eq!(
            halves_in_time(&interleaved, &a, &b),
            Some(AaHalvesInTime::Mixed)
        );
        // No machine holds both halves: their order is unknown, not mixed.
        let one_half = [row(A, "plain", 0, "m1", 100), row(A, "plain", 3, "m2", 100)];
        assert_eq!(halves_in_time(&one_half, &a, &b), None);
        assert_eq!(halves_in_time(&[], &a, &b), None);
    }
}
