//! What of the seed design's plan a dataset measured: the Phase A rate ladder and shape, the
//! Phase B shape grid and the configs it ran for, Phase B' when ref_load differs from the
//! rate Phase B ran at (ref_safe, or the profile's `phase_b.rate_override`), and the requests a
//! launch's cell measured against the seed's `min_completed`. The
//! plan is `launch/profiles/seed.toml`, compiled in, so the report and `ctax run --profile seed`
//! read the same numbers. Each gap is one line of the report's Degradation list: a verdict or a
//! figure built on part of the plan says which part is missing.

use std::collections::BTreeSet;

use ctax_schema::Phase;
use serde::Deserialize;

use crate::analysis::model::{AnalysisResult, CellStats};
use crate::report::fmt;

const SEED_PROFILE: &str = include_str!("../../../launch/profiles/seed.toml");

/// The parts of the seed profile the coverage check reads (other keys are ignored).
#[derive(Debug, Deserialize)]
struct SeedPlan {
    phase_a: SeedA,
    phase_b: SeedB,
    phase_bp: SeedBp,
}

#[derive(Debug, Deserialize)]
struct SeedA {
    rates: Vec<f64>,
    shape: (u32, u32),
    min_completed: u64,
}

#[derive(Debug, Deserialize)]
struct SeedB {
    shapes: Vec<(u32, u32)>,
    min_completed: u64,
}

#[derive(Debug, Deserialize)]
struct SeedBp {
    configs: Vec<String>,
    shapes: Vec<(u32, u32)>,
    min_completed: u64,
}

fn seed_plan() -> SeedPlan {
    toml::from_str(SEED_PROFILE).expect("launch/profiles/seed.toml parses (unit-tested)")
}

fn shape(s: (u32, u32)) -> String {
    format!("{}/{}", s.0, s.1)
}

fn list<T>(items: &[T], f: impl Fn(&T) -> String) -> String {
    items.iter().map(f).collect::<Vec<_>>().join(", ")
}

/// The complete pooled cells of `phase`.
fn measured(r: &AnalysisResult, phase: Phase) -> impl Iterator<Item = &CellStats> {
    r.summary
        .cells
        .iter()
        .filter(move |c| c.launch.is_none() && c.complete && c.key.phase == phase)
}

/// One line per part of the seed's plan this dataset did not measure (empty: all of it).
pub(super) fn gaps(r: &AnalysisResult) -> Vec<String> {
    let seed = seed_plan();
    let mut out = Vec::new();

    // Phase A: the rate ladder and the shape.
    let mut rates: Vec<f64> = measured(r, Phase::A).map(|c| c.rate).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    if !rates.is_empty() {
        let missing: Vec<f64> = seed
            .phase_a
            .rates
            .iter()
            .copied()
            .filter(|s| !rates.iter().any(|m| (m - s).abs() < 1e-9))
            .collect();
        // The seed skips the rates above a config's saturation: a missing rate above every
        // config's saturation rate is not a gap (each config with Phase A data saturated, at a
        // measured rate below it).
        let sat = &r.summary.reference_rates.saturation_rate;
        let top = (!sat.is_empty() && sat.values().all(Option::is_some))
            .then(|| sat.values().flatten().copied().fold(f64::MIN, f64::max));
        let (above, below): (Vec<f64>, Vec<f64>) =
            missing.iter().partition(|&&x| top.is_some_and(|t| x > t));
        if !below.is_empty() {
            let beyond = match top.filter(|_| !above.is_empty()) {
                Some(t) => format!(
                    "; {} req/s {} above every config's saturation rate (at most {} req/s), \
                     which the seed's plan skips",
                    list(&above, |x| fmt::rate(*x)),
                    if above.len() == 1 { "lies" } else { "lie" },
                    fmt::rate(t)
                ),
                None => String::new(),
            };
            out.push(format!(
                "Phase A measured {} req/s of the seed's ladder {} req/s (not {} req/s{beyond}): \
                 the saturation rates, ref_safe, ref_load and figures 1-3 rest on the measured \
                 rates only.",
                list(&rates, |x| fmt::rate(*x)),
                list(&seed.phase_a.rates, |x| fmt::rate(*x)),
                list(&below, |x| fmt::rate(*x)),
            ));
        }
        let shapes: BTreeSet<(u32, u32)> = measured(r, Phase::A)
            .map(|c| (c.input_len, c.output_len))
            .collect();
        if !shapes.contains(&seed.phase_a.shape) {
            out.push(format!(
                "Phase A ran at {} (input/output tokens), not at the seed's {}.",
                list(&shapes.iter().copied().collect::<Vec<_>>(), |s| shape(*s)),
                shape(seed.phase_a.shape)
            ));
        }
    }

    // Phase B: the shape grid, and the configs it ran for.
    let b_shapes: BTreeSet<(u32, u32)> = measured(r, Phase::B)
        .map(|c| (c.input_len, c.output_len))
        .collect();
    if b_shapes.is_empty() {
        out.push(format!(
            "Phase B (the seed's {} shapes at ref_safe) did not run: H5, H6 and figure 5 have no data.",
            seed.phase_b.shapes.len()
        ));
    } else {
        let missing: Vec<(u32, u32)> = seed
            .phase_b
            .shapes
            .iter()
            .copied()
            .filter(|s| !b_shapes.contains(s))
            .collect();
        if !missing.is_empty() {
            out.push(format!(
                "Phase B measured {} of the seed's {} shapes (not {}): H5 and H6 compare the \
                 measured lengths only.",
                b_shapes.len(),
                seed.phase_b.shapes.len(),
                list(&missing, |s| shape(*s))
            ));
        }
        let with_b: BTreeSet<&str> = measured(r, Phase::B)
            .map(|c| c.key.config.as_str())
            .collect();
        let mut without: Vec<&str> = measured(r, Phase::A)
            .map(|c| c.key.config.as_str())
            .filter(|c| !with_b.contains(c))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        without.sort_by_key(|c| crate::report::config_rank(c));
        if !without.is_empty() {
            let mut with: Vec<&str> = with_b.into_iter().collect();
            with.sort_by_key(|c| crate::report::config_rank(c));
            out.push(format!(
                "Phase B ran for {} only; the seed runs it for every config (not for {}): \
                 figure 5 and the shape taxes leave those out.",
                with.join(", "),
                without.join(", ")
            ));
        }
    }

    // Phase B': the seed adds it when ref_load differs from Phase B's rate (ref_safe, or the
    // profile's `phase_b.rate_override`: the rate Phase B's cells ran at), as `ctax run`
    // plans it (`plan::bp_rate`).
    let refs = &r.summary.reference_rates;
    // Any pooled Phase B row's rate, complete or not (one rate per root's Phase B).
    let b_rate = r
        .summary
        .cells
        .iter()
        .find(|c| c.launch.is_none() && c.key.phase == Phase::B)
        .map(|c| c.rate)
        .or(refs.ref_safe);
    if let (Some(b_rate), Some(load)) = (b_rate, refs.ref_load)
        && (b_rate - load).abs() > 1e-9
    {
        if measured(r, Phase::Bp).next().is_none() {
            let whose = if refs.ref_safe.is_some_and(|s| (s - b_rate).abs() < 1e-9) {
                "ref_safe"
            } else {
                "Phase B's rate"
            };
            out.push(format!(
                "Phase B' (the seed's shapes {} at ref_load for {}) did not run, although \
                 ref_load ({} req/s) differs from {whose} ({} req/s).",
                list(&seed.phase_bp.shapes, |s| shape(*s)),
                seed.phase_bp.configs.join(", "),
                fmt::rate(load),
                fmt::rate(b_rate)
            ));
        } else {
            out.extend(bp_gaps(r, &seed.phase_bp, load));
        }
    }
    out.extend(sample_size_gap(r, &seed));
    out
}

/// One line when some launch's complete cell measured fewer requests than the seed's
/// `min_completed` for its phase: per phase, the range over the launch-cells (`per_launch`).
fn sample_size_gap(r: &AnalysisResult, seed: &SeedPlan) -> Option<String> {
    let phases = [
        (Phase::A, seed.phase_a.min_completed),
        (Phase::B, seed.phase_b.min_completed),
        (Phase::Bp, seed.phase_bp.min_completed),
    ];
    let parts: Vec<String> = phases
        .into_iter()
        .filter_map(|(phase, min)| {
            let n: Vec<u64> = r
                .summary
                .per_launch
                .iter()
                .filter(|c| c.complete && c.key.phase == phase)
                .map(|c| c.counts.measured_ok)
                .collect();
            let (lo, hi) = (*n.iter().min()?, *n.iter().max()?);
            let range = if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}-{hi}")
            };
            (lo < min).then(|| format!("Phase {} {range} (the seed: {min})", phase.label()))
        })
        .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "A launch's cell measured fewer requests than the seed's minimum completed per cell \
             ({}; measured requests ok per launch-cell): each launch's p90 rests on that many, its \
             request-level CI widens with it, and a cell's tax pools its launches.",
            parts.join(", ")
        )
    })
}

/// Where Phase B' ran: the seed's B' configs with Phase A data but no B' cell (those that
/// saturate at or below ref_load get none, by rule:
/// [`ctax_schema::ReferenceRates::saturated_at_ref_load`]), and its shapes no config measured.
fn bp_gaps(r: &AnalysisResult, seed: &SeedBp, load: f64) -> Vec<String> {
    let mut out = Vec::new();
    let with_bp: BTreeSet<&str> = measured(r, Phase::Bp)
        .map(|c| c.key.config.as_str())
        .collect();
    let with_a: BTreeSet<&str> = measured(r, Phase::A)
        .map(|c| c.key.config.as_str())
        .collect();
    let saturation = |c: &str| r.summary.reference_rates.saturated_at_ref_load(c);
    let (saturated, missing): (Vec<&str>, Vec<&str>) = seed
        .configs
        .iter()
        .map(String::as_str)
        .filter(|c| with_a.contains(c) && !with_bp.contains(c))
        .partition(|c| saturation(c).is_some());
    if !saturated.is_empty() {
        out.push(format!(
            "Phase B' has no cell of {} by rule: {} at or below ref_load ({} req/s), where a \
             cell measures a queue, not a tax.",
            saturated.join(", "),
            list(&saturated, |c| format!(
                "{c} saturates at {} req/s",
                fmt::rate(saturation(c).unwrap_or_default())
            )),
            fmt::rate(load)
        ));
    }
    if !missing.is_empty() {
        out.push(format!(
            "Phase B' ran for {} only; the seed runs it for {} too: they have no B' shape \
             taxes at ref_load ({} req/s).",
            {
                let mut with: Vec<&str> = with_bp.iter().copied().collect();
                with.sort_by_key(|c| crate::report::config_rank(c));
                with.join(", ")
            },
            missing.join(", "),
            fmt::rate(load)
        ));
    }
    let shapes: BTreeSet<(u32, u32)> = measured(r, Phase::Bp)
        .map(|c| (c.input_len, c.output_len))
        .collect();
    let absent: Vec<(u32, u32)> = seed
        .shapes
        .iter()
        .copied()
        .filter(|s| !shapes.contains(s))
        .collect();
    if !absent.is_empty() {
        out.push(format!(
            "Phase B' measured {} of the seed's {} shapes (not {}).",
            shapes.len(),
            seed.shapes.len(),
            list(&absent, |s| shape(*s))
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The compiled-in plan is the seed design's (its DESIGN numbers, by hand).
    #[test]
    fn the_seed_plan_is_the_seed_designs() {
        let s = seed_plan();
        assert_eq!(s.phase_a.rates, vec![0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0]);
        assert_eq!(s.phase_a.shape, (4096, 256));
        assert_eq!(
            (
                s.phase_a.min_completed,
                s.phase_b.min_completed,
                s.phase_bp.min_completed
            ),
            (200, 200, 200)
        );
        let mut grid = Vec::new();
        for i in [512, 4096, 32768] {
            for o in [64, 256, 1024] {
                grid.push((i, o));
            }
        }
        assert_eq!(s.phase_b.shapes, grid);
        assert_eq!(
            s.phase_bp.configs,
            ["plain", "mooncake_both", "nixl_both", "lmcache_only"]
        );
        assert_eq!(
            s.phase_bp.shapes,
            vec![(512, 256), (4096, 256), (32768, 256)]
        );
    }
}
