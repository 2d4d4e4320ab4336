//! The strict Prometheus text parser (`ctax_collector::prom`).
//!
//! Checks, beyond "no panic":
//! - a parsed exposition, written back as text, parses to the same samples (names, labels
//!   after unescaping, values bit for bit) and types;
//! - `reduce_vllm` keeps only finite `vllm:*` values, and the `MetricsSample` the sampler
//!   builds from them serialises to a line that the ingest reader parses back.
#![no_main]

use ctax_collector::prom::{self, MetricType};
use ctax_schema::MetricsSample;
use libfuzzer_sys::fuzz_target;

fn ty(t: MetricType) -> &'static str {
    match t {
        MetricType::Counter => "counter",
        MetricType::Gauge => "gauge",
        MetricType::Histogram => "histogram",
        MetricType::Summary => "summary",
        MetricType::Untyped => "untyped",
    }
}

fn value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v:?}")
    }
}

fn render(e: &prom::Exposition) -> String {
    let mut s = String::new();
    for (n, t) in &e.types {
        s.push_str(&format!("# TYPE {n} {}\n", ty(*t)));
    }
    for smp in &e.samples {
        s.push_str(&smp.name);
        if !smp.labels.is_empty() {
            s.push('{');
            for (i, (k, v)) in smp.labels.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                let v = v
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n");
                s.push_str(&format!("{k}=\"{v}\""));
            }
            s.push('}');
        }
        s.push(' ');
        s.push_str(&value(smp.value));
        s.push('\n');
    }
    s
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(e) = prom::parse(text) {
        let again = prom::parse(&render(&e))
            .unwrap_or_else(|err| panic!("re-rendered exposition does not parse: {err}"));
        assert_eq!(e.types, again.types);
        assert_eq!(e.samples.len(), again.samples.len());
        for (a, b) in e.samples.iter().zip(&again.samples) {
            assert_eq!(a.name, b.name);
            assert_eq!(a.labels, b.labels);
            assert!(
                a.value.to_bits() == b.value.to_bits() || (a.value.is_nan() && b.value.is_nan())
            );
        }
    }
    if let Ok(r) = prom::reduce_vllm(text) {
        for (k, v) in r.gauges.iter().chain(&r.counters).chain(&r.histograms) {
            assert!(k.starts_with("vllm:") && v.is_finite(), "{k} = {v}");
        }
        let s = MetricsSample {
            t_ns: 1,
            scrape_ms: 0.5,
            ok: true,
            error: None,
            gauges: r.gauges,
            counters: r.counters,
            histograms: r.histograms,
        };
        let line = serde_json::to_vec(&s).expect("a sample serialises");
        let back = ctax_schema::jsonl::parse_line::<MetricsSample>(&line)
            .unwrap_or_else(|e| panic!("ingest cannot read what the sampler wrote: {e:?}"))
            .expect("not blank");
        assert_eq!(
            back.gauges.keys().collect::<Vec<_>>(),
            s.gauges.keys().collect::<Vec<_>>()
        );
        assert_eq!(back.counters.len(), s.counters.len());
        assert_eq!(back.histograms.len(), s.histograms.len());
    }
});
