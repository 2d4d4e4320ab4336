//! Substrate taxes, as the seed defines them, each with a bootstrap CI:
//!
//! ```text
//! tax_TTFT_p90(X)  = TTFT_p90(X) / TTFT_p90(plain) − 1
//! tax_TPOT_p90(X)  = TPOT_p90(X) / TPOT_p90(plain) − 1
//! tax_step_p50(X)  = step_duration p50(X) − step_duration p50(plain)          [µs]
//! tax_callback_p50 = connector_total p50(X)                                   [µs]
//! step − callback  = tax_step_p50 − tax_callback_p50                           [µs]
//! ```
//!
//! X and plain are resampled independently (different servers); the replicate vector of a
//! statistic is shared by every tax that uses it (see [`super::replicates`]).

use std::collections::BTreeMap;

use ctax_schema::{Phase, ReferenceRates};

use super::cells::rep_key;
use super::launch_noise::{NoiseModel, detection_without_noise};
use super::model::{
    AaTax, CellKey, CellStats, Detection, Estimate, Tax, TaxContext, TaxValue, config_order,
};
use super::replicates::{Replicator, Reps, combine2, combine3};
use super::samples::{CellSamples, LaunchSamples};

const BASELINE: &str = "plain";

/// Picks one metric's samples out of a launch.
type Getter = fn(&LaunchSamples) -> &Vec<f64>;

/// Which latency statistic a tax is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Metric {
    TtftP90,
    TpotP90,
    StepP50,
    CallbackP50,
}

impl Metric {
    /// The cell's point estimate of this statistic.
    pub(crate) fn point(self, c: &CellStats) -> Option<f64> {
        match self {
            Metric::TtftP90 => c.ttft_ms.p90,
            Metric::TpotP90 => c.tpot_ms.p90,
            Metric::StepP50 => c.step.as_ref().and_then(|s| s.step_duration_us.p50),
            Metric::CallbackP50 => c.step.as_ref().and_then(|s| s.connector_total_us.p50),
        }
        .map(|e| e.est)
    }

    fn spec(self) -> (&'static str, f64, Getter) {
        match self {
            Metric::TtftP90 => ("ttft_ms", 0.9, |l| &l.ttft_ms),
            Metric::TpotP90 => ("tpot_ms", 0.9, |l| &l.tpot_ms),
            Metric::StepP50 => ("step_duration_us", 0.5, |l| &l.step_duration_us),
            Metric::CallbackP50 => ("connector_total_us", 0.5, |l| &l.connector_total_us),
        }
    }
}

/// Everything needed to compute taxes and their replicates.
#[derive(Clone)]
pub(crate) struct TaxEngine<'a> {
    pub rep: &'a Replicator,
    pub samples: &'a BTreeMap<CellKey, CellSamples>,
    pub stats: BTreeMap<CellKey, &'a CellStats>,
    /// Launch-to-launch noise carried by every statistic's replicates.
    pub noise: &'a NoiseModel,
}

impl<'a> TaxEngine<'a> {
    pub(crate) fn new(
        rep: &'a Replicator,
        samples: &'a BTreeMap<CellKey, CellSamples>,
        pooled: &'a [CellStats],
        noise: &'a NoiseModel,
    ) -> Self {
        let stats = pooled
            .iter()
            .filter(|c| c.launch.is_none())
            .map(|c| (c.key.clone(), c))
            .collect();
        TaxEngine {
            rep,
            samples,
            stats,
            noise,
        }
    }

    /// Replicates of the linear `q`-quantile of `groups` (launches) carrying the launch noise of
    /// `m` (request-level alone when it is unknown).
    fn replicates(
        &self,
        m: Metric,
        (phase, cell): (Phase, &str),
        config: &str,
        est: f64,
        key: &str,
        groups: &[&[f64]],
    ) -> Option<Reps> {
        let (_, q, _) = m.spec();
        let request = self.rep.quantile(key, groups, q)?;
        let k = groups.iter().filter(|g| !g.is_empty()).count() as u32;
        Some(
            match self.noise.widen(
                m,
                (phase, cell),
                config,
                est,
                k,
                &request,
                &format!("{key}|launch"),
            ) {
                Some(w) => std::sync::Arc::new(w),
                None => request,
            },
        )
    }

    /// Detection of a value whose CI comes from metric(s) `ms`.
    fn detect(&self, e: &Estimate, ms: &[Metric]) -> Detection {
        let d = detection(e);
        if ms.iter().all(|m| self.noise.known(*m)) {
            d
        } else {
            detection_without_noise(d)
        }
    }

    /// Point estimate and replicates of one statistic of one (config, phase, cell).
    fn stat(&self, config: &str, phase: Phase, cell: &str, m: Metric) -> Option<(f64, Reps)> {
        let key = CellKey {
            config: config.to_owned(),
            phase,
            cell: cell.to_owned(),
        };
        let cs = self.samples.get(&key)?;
        let st = self.stats.get(&key)?;
        let (name, _, f) = m.spec();
        let est = m.point(st)?;
        let groups = cs.groups(f);
        let reps = self.replicates(
            m,
            (phase, cell),
            config,
            est,
            &rep_key(cs, None, name),
            &groups,
        )?;
        Some((est, reps))
    }

    /// Relative tax `X/plain − 1` of a latency quantile: estimate and replicates.
    pub(crate) fn relative(
        &self,
        config: &str,
        phase: Phase,
        cell: &str,
        m: Metric,
    ) -> Option<(f64, Vec<f64>)> {
        let (x, xr) = self.stat(config, phase, cell, m)?;
        let (p, pr) = self.stat(BASELINE, phase, cell, m)?;
        if p <= 0.0 {
            return None;
        }
        Some((x / p - 1.0, combine2(&xr, &pr, |a, b| a / b - 1.0)))
    }

    /// Absolute step tax `p50(X) − p50(plain)` (µs).
    fn step_diff(&self, config: &str, phase: Phase, cell: &str) -> Option<(f64, Vec<f64>)> {
        let (x, xr) = self.stat(config, phase, cell, Metric::StepP50)?;
        let (p, pr) = self.stat(BASELINE, phase, cell, Metric::StepP50)?;
        Some((x - p, combine2(&xr, &pr, |a, b| a - b)))
    }

    /// A tax value from `ms`' replicates: its CI and whether the CI detects anything.
    fn value(&self, est: f64, reps: &[f64], unit: &str, ms: &[Metric]) -> TaxValue {
        let value = self.rep.estimate(est, reps);
        TaxValue {
            value,
            unit: unit.into(),
            detection: self.detect(&value, ms),
        }
    }

    /// All taxes of `config` in one cell.
    fn tax(&self, config: &str, context: TaxContext, phase: Phase, cell: &str) -> Option<Tax> {
        let key = CellKey {
            config: config.to_owned(),
            phase,
            cell: cell.to_owned(),
        };
        let st = self.stats.get(&key)?;
        let rel = |m| {
            self.relative(config, phase, cell, m)
                .map(|(e, r)| self.value(e, &r, "fraction", &[m]))
        };
        let step = self.step_diff(config, phase, cell);
        let cb = self.stat(config, phase, cell, Metric::CallbackP50);
        let both = [Metric::StepP50, Metric::CallbackP50];
        let rest = match (&step, &cb) {
            (Some((s, sr)), Some((c, cr))) => {
                Some(self.value(s - c, &combine2(sr, cr, |a, b| a - b), "us", &both))
            }
            _ => None,
        };
        Some(Tax {
            config: config.to_owned(),
            context,
            phase,
            cell: cell.to_owned(),
            rate: st.rate,
            input_len: st.input_len,
            output_len: st.output_len,
            ttft_p90: rel(Metric::TtftP90),
            tpot_p90: rel(Metric::TpotP90),
            step_p50_us: step
                .as_ref()
                .map(|(e, r)| self.value(*e, r, "us", &[Metric::StepP50])),
            callback_p50_us: cb
                .as_ref()
                .map(|(e, r)| self.value(*e, r, "us", &[Metric::CallbackP50])),
            step_minus_callback_us: rest,
        })
    }

    /// Phase A cells of `config` at `rate` (one per Phase A shape).
    fn phase_a_cells_at(&self, config: &str, rate: f64) -> Vec<String> {
        self.stats
            .iter()
            .filter(|(k, s)| {
                k.config == config && k.phase == Phase::A && (s.rate - rate).abs() < 1e-9
            })
            .map(|(k, _)| k.cell.clone())
            .collect()
    }

    /// Configs with data, in canonical order (plain included or not).
    fn configs(&self, with_plain: bool) -> Vec<&str> {
        let mut configs: Vec<&str> = self
            .stats
            .keys()
            .map(|k| k.config.as_str())
            .filter(|c| with_plain || *c != BASELINE)
            .collect();
        configs.sort_by_key(|c| config_order(c));
        configs.dedup();
        configs
    }

    /// The cells a tax of `config` is reported in: Phase A at ref_safe and ref_load (a cell
    /// twice when the two rates are equal) and every Phase B / B' shape.
    fn tax_cells(&self, config: &str, refs: &ReferenceRates) -> Vec<(TaxContext, Phase, String)> {
        let mut out = Vec::new();
        for (ctx, rate) in [
            (TaxContext::RefSafe, refs.ref_safe),
            (TaxContext::RefLoad, refs.ref_load),
        ] {
            let Some(rate) = rate else { continue };
            for cell in self.phase_a_cells_at(config, rate) {
                out.push((ctx, Phase::A, cell));
            }
        }
        for (ctx, phase) in [
            (TaxContext::ShapeB, Phase::B),
            (TaxContext::ShapeBp, Phase::Bp),
        ] {
            for k in self
                .stats
                .keys()
                .filter(|k| k.config == config && k.phase == phase)
            {
                out.push((ctx, phase, k.cell.clone()));
            }
        }
        out
    }

    /// Every tax the seed asks for: at ref_safe and ref_load (Phase A) and per Phase B / B'
    /// shape, for every non-plain config that has the cell (plain must have it too).
    pub(crate) fn all(&self, refs: &ReferenceRates) -> Vec<Tax> {
        let mut out = Vec::new();
        for config in self.configs(false) {
            for (ctx, phase, cell) in self.tax_cells(config, refs) {
                out.extend(self.tax(config, ctx, phase, &cell));
            }
        }
        out
    }
}

impl TaxEngine<'_> {
    /// The A/A tax of `config` in one cell: its launches at even positions (A) against those at
    /// odd positions (B), `p90(A)/p90(B) − 1`, with the replicates a tax gets. `None` with fewer
    /// than two launches.
    fn aa(&self, config: &str, context: TaxContext, phase: Phase, cell: &str) -> Option<AaTax> {
        let key = CellKey {
            config: config.to_owned(),
            phase,
            cell: cell.to_owned(),
        };
        let cs = self.samples.get(&key)?;
        let mut launches: Vec<&LaunchSamples> = cs.launches.iter().collect();
        launches.sort_by_key(|l| l.launch);
        if launches.len() < 2 {
            return None;
        }
        type Half<'l> = Vec<(usize, &'l LaunchSamples)>;
        let (a, b): (Half, Half) = launches
            .iter()
            .copied()
            .enumerate()
            .partition(|(i, _)| i % 2 == 0);
        let side =
            |half: &[(usize, &LaunchSamples)], m: Metric, tag: &str| -> Option<(f64, Reps)> {
                let (name, q, f) = m.spec();
                let groups: Vec<&[f64]> = half
                    .iter()
                    .map(|(_, l)| f(l).as_slice())
                    .filter(|g| !g.is_empty())
                    .collect();
                let pooled: Vec<f64> = groups.iter().flat_map(|g| g.iter().copied()).collect();
                let est = crate::stats::quantile(&pooled, q)?;
                let k = format!("{}|aa-{tag}|{name}", rep_key(cs, None, name));
                Some((
                    est,
                    self.replicates(m, (phase, cell), config, est, &k, &groups)?,
                ))
            };
        let rel = |m: Metric| -> Option<TaxValue> {
            let (x, xr) = side(&a, m, "a")?;
            let (y, yr) = side(&b, m, "b")?;
            (y > 0.0).then(|| {
                self.value(
                    x / y - 1.0,
                    &combine2(&xr, &yr, |p, q| p / q - 1.0),
                    "fraction",
                    &[m],
                )
            })
        };
        let ttft_p90 = rel(Metric::TtftP90);
        let tpot_p90 = rel(Metric::TpotP90);
        let unstable = [&ttft_p90, &tpot_p90].iter().any(|t| {
            t.as_ref()
                .is_some_and(|t| matches!(t.detection, Detection::Tax | Detection::Negative))
        });
        Some(AaTax {
            config: config.to_owned(),
            context,
            phase,
            cell: cell.to_owned(),
            launches_a: a.iter().map(|(_, l)| l.launch).collect(),
            launches_b: b.iter().map(|(_, l)| l.launch).collect(),
            ttft_p90,
            tpot_p90,
            unstable,
        })
    }

    /// A/A taxes of every config with ≥ 2 launches, in the cells taxes are reported at (Phase A
    /// at ref_safe and ref_load, every Phase B / B' shape).
    ///
    /// The launch noise is the one estimated without `config`'s own cells when the other
    /// configs give one (`leave_out`): a config whose launches disagree would otherwise inflate
    /// the very noise its A/A is judged against.
    pub(crate) fn aa_all(
        &self,
        refs: &ReferenceRates,
        leave_out: &BTreeMap<String, NoiseModel>,
    ) -> Vec<AaTax> {
        let mut out = Vec::new();
        for config in self.configs(true) {
            let own;
            let engine = match leave_out.get(config) {
                Some(noise) => {
                    own = TaxEngine {
                        noise,
                        ..self.clone()
                    };
                    &own
                }
                None => self,
            };
            let mut seen = std::collections::BTreeSet::new();
            for (ctx, phase, cell) in self.tax_cells(config, refs) {
                // ref_safe = ref_load gives the same Phase A cell twice: one A/A is enough.
                if seen.insert((phase, cell.clone())) {
                    out.extend(engine.aa(config, ctx, phase, &cell));
                }
            }
        }
        out
    }
}

/// Whether the CI excludes zero. A CI that does not contain its own estimate (e.g. from a
/// handful of resamples) is no evidence either way: `Unknown`, never a detected tax.
pub fn detection(e: &Estimate) -> Detection {
    if !e.ci_contains_estimate() {
        return Detection::Unknown;
    }
    match (e.lo, e.hi) {
        (Some(lo), _) if lo > 0.0 => Detection::Tax,
        (_, Some(hi)) if hi < 0.0 => Detection::Negative,
        (Some(_), Some(_)) => Detection::Inconclusive,
        _ => Detection::Unknown,
    }
}

/// `a − b` of two (estimate, replicates) pairs.
pub(crate) fn diff(a: &(f64, Vec<f64>), b: &(f64, Vec<f64>)) -> (f64, Vec<f64>) {
    (a.0 - b.0, combine2(&a.1, &b.1, |x, y| x - y))
}

/// `a / b` of two (estimate, replicates) pairs.
pub(crate) fn ratio(a: &(f64, Vec<f64>), b: &(f64, Vec<f64>)) -> (f64, Vec<f64>) {
    (a.0 / b.0, combine2(&a.1, &b.1, |x, y| x / y))
}

/// `f(a, b, c)` of three (estimate, replicates) pairs.
pub(crate) fn map3(
    a: &(f64, Vec<f64>),
    b: &(f64, Vec<f64>),
    c: &(f64, Vec<f64>),
    f: impl Fn(f64, f64, f64) -> f64,
) -> (f64, Vec<f64>) {
    (f(a.0, b.0, c.0), combine3(&a.1, &b.1, &c.1, f))
}
