//! Cached bootstrap replicates keyed by statistic name. Every key seeds its own replicates, so
//! a statistic's replicate vector is the same wherever it is used (a tax, a ratio of taxes, a
//! verdict): plain's TTFT p90 replicates in `tax(noop)` and `tax(mooncake)` are identical,
//! which keeps derived quantities (tax ratios, gaps) correctly paired.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::stats::{BootstrapConfig, Method, percentile_interval, quantiles_replicates};

/// Statistics resampled iid even when the block bootstrap is selected: pooled ITL gaps
/// (hundreds of thousands per cell, and no verdict uses them) and engine-step timings (tens of
/// thousands per cell). The block option applies to the request-level TTFT/TPOT/E2E.
const IID_ONLY_SUFFIXES: [&str; 7] = [
    "|itl_ms",
    "|step_duration_us",
    "|schedule_us",
    "|build_meta_us",
    "|get_finished_us",
    "|start_load_kv_us",
    "|connector_total_us",
];

use super::model::Estimate;

pub(crate) type Reps = Arc<Vec<f64>>;

pub(crate) struct Replicator {
    pub cfg: BootstrapConfig,
    cache: Mutex<HashMap<String, Reps>>,
}

impl Replicator {
    pub(crate) fn new(cfg: BootstrapConfig) -> Self {
        Replicator {
            cfg,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Replicates of several quantiles of the pooled groups under `key`, with the configured
    /// method. Metrics whose key ends in [`IID_ONLY_SUFFIXES`] always use iid resampling.
    pub(crate) fn quantiles(&self, key: &str, groups: &[&[f64]], qs: &[f64]) -> Option<Vec<Reps>> {
        let keys: Vec<String> = qs.iter().map(|q| format!("{key}@{q}")).collect();
        {
            let cache = self.cache.lock().expect("replicate cache poisoned");
            if let Some(found) = keys
                .iter()
                .map(|k| cache.get(k).cloned())
                .collect::<Option<Vec<_>>>()
            {
                return Some(found);
            }
        }
        let mut cfg = self.cfg;
        if IID_ONLY_SUFFIXES.iter().any(|s| key.ends_with(s)) {
            cfg.method = Method::Iid;
        }
        let reps: Vec<Reps> = quantiles_replicates(groups, qs, &cfg, key)?
            .into_iter()
            .map(Arc::new)
            .collect();
        let mut cache = self.cache.lock().expect("replicate cache poisoned");
        for (k, r) in keys.into_iter().zip(&reps) {
            cache.insert(k, r.clone());
        }
        Some(reps)
    }

    pub(crate) fn quantile(&self, key: &str, groups: &[&[f64]], q: f64) -> Option<Reps> {
        self.quantiles(key, groups, &[q]).map(|mut v| v.remove(0))
    }

    /// `est` with the percentile interval of `reps`.
    pub(crate) fn estimate(&self, est: f64, reps: &[f64]) -> Estimate {
        let ci = percentile_interval(reps, self.cfg.confidence);
        Estimate {
            est,
            lo: ci.map(|c| c.0),
            hi: ci.map(|c| c.1),
        }
    }
}

/// Element-wise combination of replicate vectors of equal length.
pub(crate) fn combine2(a: &[f64], b: &[f64], f: impl Fn(f64, f64) -> f64) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| f(*x, *y)).collect()
}

pub(crate) fn combine3(
    a: &[f64],
    b: &[f64],
    c: &[f64],
    f: impl Fn(f64, f64, f64) -> f64,
) -> Vec<f64> {
    a.iter()
        .zip(b)
        .zip(c)
        .map(|((x, y), z)| f(*x, *y, *z))
        .collect()
}
