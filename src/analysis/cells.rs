//! Per-cell statistics: latency quantiles with CIs, counts, throughput, queue depth, client
//! health and engine-step statistics.
//!
//! One sample set per statistic: a quantile's point estimate and its bootstrap CI are computed
//! from the same values (the kept records' samples, numpy-linear percentiles), so an estimate
//! lies inside its own CI.

use rayon::prelude::*;

use super::model::{CellStats, Counts, Quantiles, StepStats};
use super::replicates::Replicator;
use super::samples::{CellSamples, LaunchSamples};
use crate::stats::{mean, quantile};

const QS: [f64; 3] = [0.5, 0.9, 0.99];

/// Replicate key of a metric in a cell; `launch = None` for the pooled cell.
pub(crate) fn rep_key(cs: &CellSamples, launch: Option<u32>, metric: &str) -> String {
    let l = launch.map_or("all".to_owned(), |l| format!("l{l}"));
    format!(
        "{}|{}|{}|{}|{}",
        cs.key.config, cs.key.phase, cs.key.cell, l, metric
    )
}

/// Quantiles of `groups` (one per launch): point estimates (numpy `linear`) and bootstrap CIs
/// of the same pooled values.
fn quantiles(rep: &Replicator, key: &str, groups: &[&[f64]]) -> Quantiles {
    let pooled: Vec<f64> = groups.iter().flat_map(|g| g.iter().copied()).collect();
    if pooled.is_empty() {
        return Quantiles::default();
    }
    let mut sorted = pooled.clone();
    crate::stats::percentile::sort(&mut sorted);
    let own = |q: f64| crate::stats::quantile_sorted(&sorted, q);
    let reps = rep.quantiles(key, groups, &QS);
    let est = |i: usize| -> Option<super::model::Estimate> {
        let e = own(QS[i])?;
        Some(match &reps {
            Some(r) if pooled.len() > 1 => rep.estimate(e, &r[i]),
            _ => super::model::Estimate {
                est: e,
                lo: None,
                hi: None,
            },
        })
    };
    Quantiles {
        n: pooled.len() as u64,
        mean: mean(&pooled),
        p50: est(0),
        p90: est(1),
        p99: est(2),
    }
}

/// Statistics of one cell: pooled over `launches` (several launches → hierarchical CIs).
/// The pooled row (`launch = None`) reads [`CellSamples::pooled_launches`]: it leaves out the
/// launches whose raw data is not whole when another launch's is ([`CellStats::not_whole`]);
/// with none whole it pools them all and is incomplete.
fn cell_stats(rep: &Replicator, cs: &CellSamples, launch: Option<u32>) -> CellStats {
    let launches: Vec<&LaunchSamples> = match launch {
        None => cs.pooled_launches(),
        Some(k) => cs.launches.iter().filter(|l| l.launch == k).collect(),
    };
    let not_whole: Vec<String> = cs
        .launches
        .iter()
        .filter(|l| launch.is_none() && !launches.iter().any(|p| p.launch == l.launch))
        .map(|l| format!("l{} ({})", l.launch, l.data_incomplete.join("; ")))
        .collect();
    let groups = |f: fn(&LaunchSamples) -> &Vec<f64>| -> Vec<&[f64]> {
        launches
            .iter()
            .map(|l| f(l).as_slice())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let q = |metric: &str, f: fn(&LaunchSamples) -> &Vec<f64>| {
        quantiles(rep, &rep_key(cs, launch, metric), &groups(f))
    };

    let mut counts = Counts::default();
    for l in &launches {
        counts.scheduled += l.counts.scheduled;
        counts.warmup += l.counts.warmup;
        counts.measured_ok += l.counts.measured_ok;
        counts.dropped += l.counts.dropped;
        counts.errors += l.counts.errors;
        counts.cancelled += l.counts.cancelled;
        counts.rejected += l.counts.rejected;
    }
    let window_s: f64 = launches
        .iter()
        .filter_map(|l| l.window)
        .map(|w| w.seconds())
        .sum();
    let completions: u64 = launches.iter().map(|l| l.completions_in_window).sum();
    let sends: u64 = launches.iter().map(|l| l.sends_in_window).sum();
    let scheduled: u64 = launches.iter().map(|l| l.scheduled_in_window).sum();
    let ok_of_scheduled: u64 = launches.iter().map(|l| l.ok_of_scheduled).sum();
    let paced: Vec<(f64, f64)> = launches
        .iter()
        .filter_map(|l| l.completion_pace.map(|p| (p, l.scheduled_in_window as f64)))
        .collect();
    let pace_weight: f64 = paced.iter().map(|p| p.1).sum();
    let completion_pace =
        (pace_weight > 0.0).then(|| paced.iter().map(|p| p.0 * p.1).sum::<f64>() / pace_weight);
    let rate_per_window = |n: u64| (window_s > 0.0).then(|| n as f64 / window_s);
    let waiting: Vec<f64> = launches
        .iter()
        .flat_map(|l| l.waiting.iter().copied())
        .collect();
    let running: Vec<f64> = launches
        .iter()
        .flat_map(|l| l.running.iter().copied())
        .collect();
    let health = launches.iter().filter_map(|l| l.health.as_ref());
    let worst = |f: fn(&ctax_schema::CellHealth) -> f64| health.clone().map(f).reduce(f64::max);

    let has_steps = launches.iter().any(|l| !l.step_duration_us.is_empty());
    let step = has_steps.then(|| StepStats {
        n_steps: launches.iter().map(|l| l.n_steps).sum(),
        step_duration_us: q("step_duration_us", |l| &l.step_duration_us),
        schedule_us: q("schedule_us", |l| &l.schedule_us),
        build_meta_us: q("build_meta_us", |l| &l.build_meta_us),
        get_finished_us: q("get_finished_us", |l| &l.get_finished_us),
        start_load_kv_us: q("start_load_kv_us", |l| &l.start_load_kv_us),
        connector_total_us: q("connector_total_us", |l| &l.connector_total_us),
    });
    // A per-launch row's wall-clock span (the launch order reads it).
    let span = launch.and_then(|_| wall_span(launches.first()?));

    CellStats {
        key: cs.key.clone(),
        launch,
        launches: launches.iter().map(|l| l.launch).collect(),
        rate: cs.shape.rate,
        input_len: cs.shape.input_len,
        output_len: cs.shape.output_len,
        counts,
        complete: launches.iter().all(|l| l.complete),
        incomplete_reasons: launches
            .iter()
            .filter_map(|l| {
                l.incomplete_reason
                    .as_ref()
                    .map(|r| format!("{} (l{}): {r}", l.run_dir, l.launch))
            })
            .collect(),
        data_incomplete: launches
            .iter()
            .flat_map(|l| {
                l.data_incomplete
                    .iter()
                    .map(|r| format!("{} (l{}): {r}", l.run_dir, l.launch))
            })
            .collect(),
        not_whole,
        ttft_ms: q("ttft_ms", |l| &l.ttft_ms),
        tpot_ms: q("tpot_ms", |l| &l.tpot_ms),
        e2e_ms: q("e2e_ms", |l| &l.e2e_ms),
        itl_ms: q("itl_ms", |l| &l.itl_ms),
        offered_rps: cs.shape.rate,
        effective_rps: rate_per_window(completions),
        achieved_send_rps: rate_per_window(sends),
        scheduled_in_window: (window_s > 0.0).then_some(scheduled),
        completions_in_window: (window_s > 0.0).then_some(completions),
        ok_of_scheduled: (window_s > 0.0).then_some(ok_of_scheduled),
        completion_pace,
        waiting_p50: quantile(&waiting, 0.5),
        running_p50: quantile(&running, 0.5),
        lateness_us_p99: worst(|h| h.lateness_us_p99),
        lateness_us_max: worst(|h| h.lateness_us_max),
        client_cpu_pct: worst(|h| h.client_cpu_pct),
        step,
        saturation: None,
        gpus: launches
            .iter()
            .filter_map(|l| {
                let p = l.placement.as_ref()?;
                Some(super::model::LaunchGpu {
                    launch: l.launch,
                    slot: p.slot,
                    device: p.cuda_visible_devices.clone(),
                    gpu_index: p.gpu_index,
                    gpu_uuid: p.gpu_uuid.clone(),
                })
            })
            .collect(),
        machine: launch.and_then(|_| launches.first().map(|l| l.machine.clone())),
        started_unix_ms: span.map(|s| s.0),
        ended_unix_ms: span.map(|s| s.1),
    }
}

/// When a launch's cell started and ended (wall clock), where the collector recorded it.
fn wall_span(l: &LaunchSamples) -> Option<(u64, u64)> {
    let h = l.health.as_ref().filter(|h| h.wall_start_unix_ms > 0)?;
    let start = h.wall_start_unix_ms;
    Some((
        start,
        start + h.t_end_ns.saturating_sub(h.t_start_ns) / 1_000_000,
    ))
}

/// Pooled and per-launch statistics of every cell (in parallel over cells).
pub(crate) fn all_cell_stats(
    rep: &Replicator,
    samples: &[&CellSamples],
) -> (Vec<CellStats>, Vec<CellStats>) {
    let pairs: Vec<(CellStats, Vec<CellStats>)> = samples
        .par_iter()
        .map(|cs| {
            let pooled = cell_stats(rep, cs, None);
            let per_launch: Vec<CellStats> = if cs.launches.len() == 1 {
                let mut one = pooled.clone();
                one.launch = Some(cs.launches[0].launch);
                one.machine = Some(cs.launches[0].machine.clone());
                let span = wall_span(&cs.launches[0]);
                one.started_unix_ms = span.map(|s| s.0);
                one.ended_unix_ms = span.map(|s| s.1);
                vec![one]
            } else {
                cs.launches
                    .iter()
                    .map(|l| cell_stats(rep, cs, Some(l.launch)))
                    .collect()
            };
            (pooled, per_launch)
        })
        .collect();
    let mut pooled = Vec::with_capacity(pairs.len());
    let mut per_launch = Vec::new();
    for (p, l) in pairs {
        pooled.push(p);
        per_launch.extend(l);
    }
    (pooled, per_launch)
}
