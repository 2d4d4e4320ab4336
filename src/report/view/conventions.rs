//! The Conventions section: how every number is defined (percentiles, CIs, TTFT/TPOT/ITL/E2E,
//! warm-up, throughput, saturation), as the analysis stated them.

use crate::analysis::model::Conventions;
use crate::report::fmt;

/// (name, definition) rows, in the order the page shows them.
pub(super) fn rows(c: &Conventions) -> Vec<(String, String)> {
    vec![
        (
            "Percentile estimator".to_owned(),
            c.percentile_estimator.clone(),
        ),
        ("CI method".to_owned(), c.ci_method.clone()),
        (
            "Bootstrap settings".to_owned(),
            format!(
                "{} resamples, {} confidence, seed {}, {}",
                c.bootstrap.resamples,
                fmt::share(c.bootstrap.confidence),
                c.bootstrap.seed,
                bootstrap_method(&c.bootstrap)
            ),
        ),
        ("TTFT".to_owned(), c.ttft.clone()),
        ("TPOT".to_owned(), c.tpot.clone()),
        ("ITL".to_owned(), c.itl.clone()),
        ("E2E".to_owned(), c.e2e.clone()),
        ("Warm-up".to_owned(), c.warmup.clone()),
        ("Token source".to_owned(), c.token_source.clone()),
        (
            "Effective throughput".to_owned(),
            c.effective_throughput.clone(),
        ),
        ("Saturation".to_owned(), c.saturation.clone()),
    ]
}

fn bootstrap_method(b: &crate::stats::BootstrapConfig) -> String {
    // Serialised through serde so this view does not depend on the enum's variants.
    match serde_json::to_value(b.method) {
        Ok(serde_json::Value::Object(m)) => {
            let kind = m
                .get("kind")
                .and_then(|k| k.as_str())
                .unwrap_or("?")
                .replace('_', " ");
            let rest: Vec<String> = m
                .iter()
                .filter(|(k, _)| *k != "kind")
                .map(|(k, v)| {
                    format!(
                        "{} = {}",
                        k.replace('_', " "),
                        if v.is_null() {
                            "auto".to_owned()
                        } else {
                            v.to_string()
                        }
                    )
                })
                .collect();
            if rest.is_empty() {
                kind
            } else {
                format!("{kind} ({})", rest.join(", "))
            }
        }
        Ok(v) => v.to_string(),
        Err(_) => "?".to_owned(),
    }
}
