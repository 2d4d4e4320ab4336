//! GPU-to-GPU calibration: plain against plain on the GPUs of one host, from the launches of the
//! calibration round (`ctax run` with `slots.plain_on_every_slot`: plain's first launches, on
//! every GPU slot at the same time, so drift over the session cancels; they are pooled into
//! plain's cells like any other launch too). Per Phase A cell and per GPU other than the
//! host's lowest slot (the reference): `p90(GPU b)/p90(GPU a) − 1` of TTFT and TPOT with 95% CIs
//! from independent bootstraps of the two GPUs' requests (the taxes' method). A difference whose
//! CI excludes 0 is *detectable*: the analysis warns, because a tax smaller than the GPU-to-GPU
//! difference is hard to resolve (each config's launches are balanced over the GPUs, so the
//! difference averages out of the taxes but widens their spread).

use std::collections::BTreeMap;

use ctax_schema::Phase;

use super::model::{CalibrationRow, Detection, LaunchGpu};
use super::replicates::{Replicator, combine2};
use super::samples::{CellSamples, LaunchSamples};
use super::taxes::detection;
use crate::ingest::Run;

/// The calibration rows of the calibration launches among `runs` and a warning for each
/// detectable difference.
/// `saturated` says whether plain is saturated in a cell (its rows are kept, never warned about).
pub(crate) fn compare(
    rep: &Replicator,
    runs: &[Run],
    saturated: impl Fn(&CellSamples) -> bool,
) -> (Vec<CalibrationRow>, Vec<String>) {
    let calibration: Vec<&Run> = runs.iter().filter(|r| r.is_calibration()).collect();
    let samples = super::samples::extract_runs(&calibration, false);
    let mut rows = Vec::new();
    let mut warnings = Vec::new();
    for cs in samples.values().filter(|c| c.key.phase == Phase::A) {
        // Launches by (host, GPU): one group per GPU of each host.
        let mut by_gpu: BTreeMap<(String, u32), Vec<&LaunchSamples>> = BTreeMap::new();
        // Only launches whose data in the cell is whole are compared (DESIGN.md §4.1).
        for l in cs.launches.iter().filter(|l| l.whole()) {
            let Some(p) = &l.placement else { continue };
            by_gpu
                .entry((p.host.clone().unwrap_or_default(), p.slot))
                .or_default()
                .push(l);
        }
        let hosts: Vec<String> = {
            let mut h: Vec<String> = by_gpu.keys().map(|(h, _)| h.clone()).collect();
            h.dedup();
            h
        };
        for host in hosts {
            let gpus: Vec<(&(String, u32), &Vec<&LaunchSamples>)> =
                by_gpu.iter().filter(|((h, _), _)| *h == host).collect();
            let Some((_, reference)) = gpus.first() else {
                continue;
            };
            for (_, other) in gpus.iter().skip(1) {
                if let Some(mut row) = row(rep, cs, &host, reference, other) {
                    row.saturated = saturated(cs);
                    if row.detectable && !row.saturated {
                        warnings.push(warning(&row));
                    }
                    rows.push(row);
                }
            }
        }
    }
    rows.sort_by(|a, b| {
        (a.input_len, a.output_len, &a.host)
            .cmp(&(b.input_len, b.output_len, &b.host))
            .then(a.rate.total_cmp(&b.rate))
            .then(a.other[0].slot.cmp(&b.other[0].slot))
    });
    (rows, warnings)
}

fn gpu(l: &LaunchSamples) -> LaunchGpu {
    let p = l.placement.as_ref().expect("grouped by placement");
    LaunchGpu {
        launch: l.launch,
        slot: p.slot,
        device: p.cuda_visible_devices.clone(),
        gpu_index: p.gpu_index,
        gpu_uuid: p.gpu_uuid.clone(),
    }
}

/// (point, replicates) of the p90 of `metric` over `launches`.
fn p90(
    rep: &Replicator,
    cs: &CellSamples,
    host: &str,
    launches: &[&LaunchSamples],
    metric: &str,
    f: fn(&LaunchSamples) -> &Vec<f64>,
) -> Option<(f64, Vec<f64>)> {
    let groups: Vec<&[f64]> = launches
        .iter()
        .map(|l| f(l).as_slice())
        .filter(|s| !s.is_empty())
        .collect();
    let pooled: Vec<f64> = groups.iter().flat_map(|g| g.iter().copied()).collect();
    let est = crate::stats::quantile(&pooled, 0.9)?;
    let slot = launches.first()?.placement.as_ref()?.slot;
    let key = format!(
        "calibration|{}|{}|{}|{host}|slot{slot}|{metric}",
        cs.key.config, cs.key.phase, cs.key.cell
    );
    let reps = rep.quantile(&key, &groups, 0.9)?;
    Some((est, reps.to_vec()))
}

fn row(
    rep: &Replicator,
    cs: &CellSamples,
    host: &str,
    a: &[&LaunchSamples],
    b: &[&LaunchSamples],
) -> Option<CalibrationRow> {
    let diff = |metric: &str, f: fn(&LaunchSamples) -> &Vec<f64>| {
        let (pa, ra) = p90(rep, cs, host, a, metric, f)?;
        let (pb, rb) = p90(rep, cs, host, b, metric, f)?;
        if pa <= 0.0 {
            return None;
        }
        let reps = combine2(&rb, &ra, |x, y| x / y - 1.0);
        let value = rep.estimate(pb / pa - 1.0, &reps);
        Some(super::model::TaxValue {
            value,
            unit: "fraction".into(),
            detection: detection(&value),
        })
    };
    let ttft = diff("ttft_ms", |l| &l.ttft_ms)?;
    let tpot = diff("tpot_ms", |l| &l.tpot_ms)?;
    let detectable = [&ttft, &tpot]
        .iter()
        .any(|t| matches!(t.detection, Detection::Tax | Detection::Negative));
    Some(CalibrationRow {
        phase: cs.key.phase,
        cell: cs.key.cell.clone(),
        rate: cs.shape.rate,
        input_len: cs.shape.input_len,
        output_len: cs.shape.output_len,
        host: (!host.is_empty()).then(|| host.to_owned()),
        reference: a.iter().map(|l| gpu(l)).collect(),
        other: b.iter().map(|l| gpu(l)).collect(),
        n_reference: a.iter().map(|l| l.ttft_ms.len() as u64).sum(),
        n_other: b.iter().map(|l| l.ttft_ms.len() as u64).sum(),
        ttft_p90: ttft,
        tpot_p90: tpot,
        detectable,
        saturated: false,
    })
}

fn warning(r: &CalibrationRow) -> String {
    let name = |g: &[LaunchGpu]| g.first().map_or_else(|| "?".to_owned(), |g| g.to_string());
    format!(
        "GPU-to-GPU calibration (plain on every GPU at once): at {} req/s ({}/{}) plain on {} differs from plain on {}{}: TTFT p90 {}, TPOT p90 {} (95% CIs). The difference is detectable: taxes smaller than it are hard to resolve on these GPUs; each config's launches are balanced over the GPUs, so it averages out of the taxes but widens their spread",
        ctax_schema::fmt_rate(r.rate),
        r.input_len,
        r.output_len,
        name(&r.other),
        name(&r.reference),
        r.host
            .as_ref()
            .map_or_else(String::new, |h| format!(" on host {h}")),
        r.ttft_p90.value.pct_ci(),
        r.tpot_p90.value.pct_ci(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::{Run, RunCell};
    use crate::stats::BootstrapConfig;
    use ctax_schema::{Placement, RequestRecord, RunConfig, Status};
    use rand::rngs::Xoshiro256PlusPlus;
    use rand::{RngExt, SeedableRng};

    /// A calibration launch of plain on `slot`: 600 requests in one Phase A cell whose TTFT and
    /// TPOT are lognormal (σ = 0.3) around 100 ms and 10 ms, times `scale`.
    fn run(slot: u32, scale: f64, seed: u64) -> Run {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut normal = || {
            // Box-Muller.
            let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-12), rng.random::<f64>());
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        };
        let cell = "r4_i64_o17";
        let launch = 1000 + slot;
        let requests: Vec<RequestRecord> = (0..600u64)
            .map(|i| {
                let send = 1_000_000_000 + i * 250_000_000;
                let ttft = (100e6 * scale * (0.3 * normal()).exp()) as u64;
                let tpot = (10e6 * scale * (0.3 * normal()).exp()) as u64;
                RequestRecord {
                    request_id: ctax_schema::request_id("plain", launch, Phase::A, cell, i),
                    config: "plain".into(),
                    launch,
                    phase: Phase::A,
                    cell: cell.into(),
                    rate: 4.0,
                    input_len: 64,
                    output_len: 17,
                    seq: i,
                    t_intended_ns: send,
                    t_send_ns: Some(send),
                    t_first_token_ns: Some(send + ttft),
                    t_last_token_ns: Some(send + ttft + 16 * tpot),
                    t_end_ns: Some(send + ttft + 16 * tpot),
                    events: vec![],
                    prompt_tokens: Some(64),
                    completion_tokens: Some(17),
                    inflight_at_send: 0,
                    warmup: false,
                    status: Status::Ok,
                    http_status: Some(200),
                    error: None,
                }
            })
            .collect();
        let placement = Placement {
            slot,
            slots: 2,
            cuda_visible_devices: Some(slot.to_string()),
            gpu_index: Some(slot),
            gpu_uuid: Some(format!("GPU-{slot}{slot}{slot}{slot}aaaa-0000")),
            calibration: true,
            host: Some("h".into()),
            ..Default::default()
        };
        let mut cells = BTreeMap::new();
        cells.insert(
            (Phase::A, cell.to_owned()),
            RunCell {
                requests,
                has_requests: true,
                placement: Some(placement.clone()),
                ..Default::default()
            },
        );
        Run {
            dir_name: format!("x_plain_l{launch}"),
            path: std::path::PathBuf::from("/nonexistent"),
            config: "plain".into(),
            launch,
            run_config: Some(RunConfig {
                schema_version: 1,
                config: "plain".into(),
                launch,
                run_dir: format!("x_plain_l{launch}"),
                phases: vec![Phase::A],
                cells: vec![],
                model: "m".into(),
                served_model_name: "m".into(),
                port: 1,
                extra: serde_json::json!({"stage": "A"}),
                simulated: true,
                placement: Some(placement),
            }),
            summary: None,
            env: BTreeMap::new(),
            cells,
            artifacts: BTreeMap::new(),
        }
    }

    fn rep() -> Replicator {
        Replicator::new(BootstrapConfig {
            resamples: 2000,
            ..Default::default()
        })
    }

    #[test]
    fn a_slower_gpu_is_detected_with_a_ci_around_the_truth() {
        // GPU 1 is 25% slower in both TTFT and TPOT (truth: +0.25 for both p90 ratios).
        // The same rows when plain is saturated there: kept, marked, never warned about.
        let (sat, sat_warnings) = compare(&rep(), &[run(0, 1.0, 1), run(1, 1.25, 2)], |_| true);
        assert!(sat.iter().all(|r| r.saturated) && !sat.is_empty());
        assert!(sat_warnings.is_empty(), "{sat_warnings:?}");
        let (rows, warnings) = compare(&rep(), &[run(0, 1.0, 1), run(1, 1.25, 2)], |_| false);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!((r.reference[0].slot, r.other[0].slot), (0, 1));
        assert_eq!((r.n_reference, r.n_other), (600, 600));
        assert!(r.detectable);
        for t in [&r.ttft_p90, &r.tpot_p90] {
            let (lo, hi) = (t.value.lo.unwrap(), t.value.hi.unwrap());
            assert!(lo > 0.0 && lo < 0.25 && hi > 0.25, "{:?}", t.value);
            assert_eq!(t.detection, Detection::Tax);
        }
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0]
                .contains("plain on GPU 1 (1111aaaa) differs from plain on GPU 0 (0000aaaa)")
                && warnings[0].contains("detectable"),
            "{}",
            warnings[0]
        );
    }

    #[test]
    fn identical_gpus_give_a_ci_around_zero_and_no_warning() {
        let (rows, warnings) = compare(&rep(), &[run(0, 1.0, 3), run(1, 1.0, 4)], |_| false);
        assert_eq!(rows.len(), 1);
        let t = &rows[0].ttft_p90.value;
        assert!(t.lo.unwrap() < 0.0 && t.hi.unwrap() > 0.0, "{t:?}");
        assert!(!rows[0].detectable || !warnings.is_empty());
        assert_eq!(rows[0].detectable, !warnings.is_empty());
        // No calibration launches: nothing to report.
        assert_eq!(compare(&rep(), &[], |_| false).0.len(), 0);
        // One GPU only: nothing to compare.
        assert_eq!(compare(&rep(), &[run(0, 1.0, 5)], |_| false).0.len(), 0);
    }
}
