//! The simulated engine's `/metrics`, in real Prometheus text format with vLLM's names.

use std::fmt::Write;

#[derive(Debug, Clone)]
pub struct Histogram {
    pub bounds: Vec<f64>,
    pub counts: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

impl Histogram {
    pub fn new(bounds: &[f64]) -> Self {
        Histogram {
            bounds: bounds.to_vec(),
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }
    pub fn observe(&mut self, v: f64) {
        for (b, c) in self.bounds.iter().zip(self.counts.iter_mut()) {
            if v <= *b {
                *c += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }
}

/// vLLM's default buckets (v1/metrics/loggers.py).
const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
const E2E_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

#[derive(Debug, Clone)]
pub struct SimMetrics {
    pub running: u64,
    pub waiting: u64,
    pub success_length: u64,
    pub prompt_tokens: u64,
    pub generation_tokens: u64,
    pub e2e: Histogram,
    pub ttft: Histogram,
    /// Fixed-latency mode: how late the timer thread emitted tokens.
    pub emit_late_sum_s: f64,
    pub emit_late_count: u64,
    pub emit_late_max_s: f64,
    /// Requests received over HTTP.
    pub requests_received: u64,
}

impl Default for SimMetrics {
    fn default() -> Self {
        SimMetrics {
            running: 0,
            waiting: 0,
            success_length: 0,
            prompt_tokens: 0,
            generation_tokens: 0,
            e2e: Histogram::new(E2E_BUCKETS),
            ttft: Histogram::new(TTFT_BUCKETS),
            emit_late_sum_s: 0.0,
            emit_late_count: 0,
            emit_late_max_s: 0.0,
            requests_received: 0,
        }
    }
}

fn fmt_f(v: f64) -> String {
    // Prometheus' Python client writes floats with a decimal point ("1.0").
    if v.is_infinite() {
        return if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let s = format!("{v:?}");
    if s.contains(['.', 'e', 'E']) {
        s
    } else {
        format!("{s}.0")
    }
}

impl SimMetrics {
    pub fn render(&self, model: &str) -> String {
        let mut o = String::with_capacity(8192);
        let l = format!("engine=\"0\",model_name=\"{model}\"");
        let scalar = |o: &mut String, name: &str, ty: &str, help: &str, labels: &str, v: f64| {
            let labels = if labels.is_empty() {
                String::new()
            } else {
                format!("{{{labels}}}")
            };
            let _ = writeln!(
                o,
                "# HELP {name} {help}\n# TYPE {name} {ty}\n{name}{labels} {}",
                fmt_f(v)
            );
        };
        scalar(
            &mut o,
            "ctax_sim_info",
            "gauge",
            "This server is ctax-sim: every number is SIMULATED.",
            "simulated=\"1\"",
            1.0,
        );
        scalar(
            &mut o,
            "vllm:num_requests_running",
            "gauge",
            "Number of requests in model execution batches.",
            &l,
            self.running as f64,
        );
        scalar(
            &mut o,
            "vllm:num_requests_waiting",
            "gauge",
            "Number of requests waiting to be processed.",
            &l,
            self.waiting as f64,
        );
        scalar(
            &mut o,
            "vllm:prompt_tokens_total",
            "counter",
            "Number of prefill tokens processed.",
            &l,
            self.prompt_tokens as f64,
        );
        scalar(
            &mut o,
            "vllm:generation_tokens_total",
            "counter",
            "Number of generation tokens processed.",
            &l,
            self.generation_tokens as f64,
        );
        let _ = writeln!(
            o,
            "# HELP vllm:request_success_total Count of successfully processed requests.\n\
             # TYPE vllm:request_success_total counter"
        );
        for reason in ["stop", "length", "abort", "error"] {
            let v = if reason == "length" {
                self.success_length
            } else {
                0
            };
            let _ = writeln!(
                o,
                "vllm:request_success_total{{engine=\"0\",finished_reason=\"{reason}\",model_name=\"{model}\"}} {}",
                fmt_f(v as f64)
            );
        }
        for (name, help, h) in [
            (
                "vllm:time_to_first_token_seconds",
                "Histogram of time to first token in seconds.",
                &self.ttft,
            ),
            (
                "vllm:e2e_request_latency_seconds",
                "Histogram of e2e request latency in seconds.",
                &self.e2e,
            ),
        ] {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} histogram");
            for (b, c) in h.bounds.iter().zip(&h.counts) {
                let _ = writeln!(
                    o,
                    "{name}_bucket{{engine=\"0\",le=\"{}\",model_name=\"{model}\"}} {}",
                    fmt_f(*b),
                    fmt_f(*c as f64)
                );
            }
            let _ = writeln!(
                o,
                "{name}_bucket{{engine=\"0\",le=\"+Inf\",model_name=\"{model}\"}} {}",
                fmt_f(h.count as f64)
            );
            let _ = writeln!(o, "{name}_count{{{l}}} {}", fmt_f(h.count as f64));
            let _ = writeln!(o, "{name}_sum{{{l}}} {}", fmt_f(h.sum));
        }
        scalar(
            &mut o,
            "ctax_sim:requests_received_total",
            "counter",
            "Completion requests received.",
            "",
            self.requests_received as f64,
        );
        scalar(
            &mut o,
            "ctax_sim:emit_lateness_seconds_sum",
            "gauge",
            "Fixed mode: summed lateness of token emissions.",
            "",
            self.emit_late_sum_s,
        );
        scalar(
            &mut o,
            "ctax_sim:emit_lateness_seconds_count",
            "gauge",
            "Fixed mode: token emissions.",
            "",
            self.emit_late_count as f64,
        );
        scalar(
            &mut o,
            "ctax_sim:emit_lateness_max_seconds",
            "gauge",
            "Fixed mode: largest emission lateness.",
            "",
            self.emit_late_max_s,
        );
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_parseable_vllm_metrics() {
        let mut m = SimMetrics {
            running: 3,
            waiting: 2,
            success_length: 5,
            ..Default::default()
        };
        m.e2e.observe(0.4);
        m.ttft.observe(0.003);
        let text = m.render("sim");
        let r = crate::prom::reduce_vllm(&text).unwrap();
        assert_eq!(r.gauges["vllm:num_requests_running{engine=\"0\"}"], 3.0);
        assert_eq!(r.gauges["vllm:num_requests_waiting{engine=\"0\"}"], 2.0);
        assert_eq!(
            r.counters["vllm:request_success_total{engine=\"0\",finished_reason=\"length\"}"],
            5.0
        );
        assert_eq!(
            r.histograms["vllm:e2e_request_latency_seconds_count{engine=\"0\"}"],
            1.0
        );
        assert_eq!(
            r.histograms["vllm:time_to_first_token_seconds_sum{engine=\"0\"}"],
            0.003
        );
        assert!(
            text.contains("vllm:e2e_request_latency_seconds_bucket{engine=\"0\",le=\"0.5\",model_name=\"sim\"} 1.0")
        );
    }
}
