//! A small, strict parser for the Prometheus text exposition format (0.0.4), and the reduction
//! of one scrape to a [`MetricsSample`]'s three maps.
//!
//! Why not a crate: `prometheus-parse` 0.2.5 matches metric names with `\w+`, which has no `:`,
//! so every `vllm:*` line is skipped; `openmetrics-parser` is LGPL-3.0; `prom_text_format_parser`
//! is a single 2023 release. This parser is ~200 lines with tests, including a real vLLM 0.32
//! scrape.
//!
//! Strict means: a line that is not a comment, a blank line or a well-formed sample is an error
//! (with its line number), and so is a sample that contradicts its `# TYPE`.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    /// Labels in exposition order, values unescaped.
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("line {line}: {msg}")]
pub struct ParseError {
    pub line: usize,
    pub msg: String,
}

/// A parsed exposition: every sample plus the declared type of each family.
#[derive(Debug, Default, Clone)]
pub struct Exposition {
    pub types: BTreeMap<String, MetricType>,
    pub samples: Vec<Sample>,
}

fn err(line: usize, msg: impl Into<String>) -> ParseError {
    ParseError {
        line,
        msg: msg.into(),
    }
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b':'
}
fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b':'
}
fn is_label_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}
fn is_label_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse::<f64>().ok(),
    }
}

pub fn parse(text: &str) -> Result<Exposition, ParseError> {
    let mut out = Exposition::default();
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let line = raw.trim_matches(|c| c == ' ' || c == '\t' || c == '\r');
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            let mut parts = rest.trim_start().splitn(3, [' ', '\t']);
            match parts.next() {
                Some("TYPE") => {
                    let name = parts.next().ok_or_else(|| err(ln, "TYPE without a name"))?;
                    let ty = parts
                        .next()
                        .map(str::trim)
                        .ok_or_else(|| err(ln, "TYPE without a type"))?;
                    let ty = match ty {
                        "counter" => MetricType::Counter,
                        "gauge" => MetricType::Gauge,
                        "histogram" => MetricType::Histogram,
                        "summary" => MetricType::Summary,
                        "untyped" => MetricType::Untyped,
                        other => return Err(err(ln, format!("unknown metric type {other:?}"))),
                    };
                    if !valid_name(name) {
                        return Err(err(ln, format!("invalid metric name {name:?}")));
                    }
                    if out.types.insert(name.to_owned(), ty).is_some() {
                        return Err(err(ln, format!("second TYPE line for {name}")));
                    }
                }
                Some("HELP") => {
                    let name = parts.next().ok_or_else(|| err(ln, "HELP without a name"))?;
                    if !valid_name(name) {
                        return Err(err(ln, format!("invalid metric name {name:?}")));
                    }
                }
                _ => {} // other comments
            }
            continue;
        }
        out.samples.push(parse_sample(line, ln)?);
    }
    Ok(out)
}

fn valid_name(n: &str) -> bool {
    let b = n.as_bytes();
    !b.is_empty() && is_name_start(b[0]) && b.iter().all(|&c| is_name_char(c))
}

fn parse_sample(line: &str, ln: usize) -> Result<Sample, ParseError> {
    let b = line.as_bytes();
    let mut i = 0;
    if !is_name_start(b[0]) {
        return Err(err(ln, format!("not a sample line: {:?}", excerpt(line))));
    }
    while i < b.len() && is_name_char(b[i]) {
        i += 1;
    }
    let name = line[..i].to_owned();
    let mut labels = Vec::new();
    if i < b.len() && b[i] == b'{' {
        i += 1;
        loop {
            while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
                i += 1;
            }
            if i >= b.len() {
                return Err(err(ln, "unterminated label set"));
            }
            if b[i] == b'}' {
                i += 1;
                break;
            }
            if !is_label_start(b[i]) {
                return Err(err(ln, format!("bad label name at column {}", i + 1)));
            }
            let ls = i;
            while i < b.len() && is_label_char(b[i]) {
                i += 1;
            }
            let lname = line[ls..i].to_owned();
            if i >= b.len() || b[i] != b'=' {
                return Err(err(ln, format!("expected '=' after label {lname}")));
            }
            i += 1;
            if i >= b.len() || b[i] != b'"' {
                return Err(err(ln, format!("expected '\"' after {lname}=")));
            }
            i += 1;
            let mut val = String::new();
            let mut seg = i;
            loop {
                if i >= b.len() {
                    return Err(err(ln, format!("unterminated value of label {lname}")));
                }
                match b[i] {
                    b'"' => {
                        val.push_str(&line[seg..i]);
                        i += 1;
                        break;
                    }
                    b'\\' => {
                        val.push_str(&line[seg..i]);
                        match b.get(i + 1) {
                            Some(b'\\') => val.push('\\'),
                            Some(b'"') => val.push('"'),
                            Some(b'n') => val.push('\n'),
                            _ => return Err(err(ln, format!("bad escape in label {lname}"))),
                        }
                        i += 2;
                        seg = i;
                    }
                    _ => i += 1,
                }
            }
            labels.push((lname, val));
            while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
                i += 1;
            }
            match b.get(i) {
                Some(b',') => i += 1,
                Some(b'}') => {
                    i += 1;
                    break;
                }
                _ => return Err(err(ln, "expected ',' or '}' in label set")),
            }
        }
    }
    let rest = &line[i..];
    if !rest.starts_with([' ', '\t']) {
        return Err(err(
            ln,
            format!("expected whitespace before the value of {name}"),
        ));
    }
    let mut fields = rest.split_ascii_whitespace();
    let v = fields
        .next()
        .ok_or_else(|| err(ln, format!("no value for {name}")))?;
    let value = parse_value(v).ok_or_else(|| err(ln, format!("bad value {v:?} for {name}")))?;
    if let Some(ts) = fields.next()
        && ts.parse::<i64>().is_err()
    {
        return Err(err(ln, format!("bad timestamp {ts:?}")));
    }
    if fields.next().is_some() {
        return Err(err(ln, "trailing characters after the timestamp"));
    }
    Ok(Sample {
        name,
        labels,
        value,
    })
}

fn excerpt(s: &str) -> String {
    s.chars().take(80).collect()
}

/// Which family a sample name belongs to, and its role in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Counter,
    Gauge,
    HistSumCount,
    HistBucket,
    SummaryQuantile,
}

fn classify(types: &BTreeMap<String, MetricType>, name: &str) -> Result<Role, String> {
    if let Some(t) = types.get(name) {
        return match t {
            MetricType::Counter => Ok(Role::Counter),
            MetricType::Gauge => Ok(Role::Gauge),
            MetricType::Untyped => Ok(if name.ends_with("_total") {
                Role::Counter
            } else {
                Role::Gauge
            }),
            MetricType::Summary => Ok(Role::SummaryQuantile),
            MetricType::Histogram => Err(format!("histogram {name} has a bare sample")),
        };
    }
    for (suffix, role) in [
        ("_bucket", Role::HistBucket),
        ("_sum", Role::HistSumCount),
        ("_count", Role::HistSumCount),
    ] {
        if let Some(fam) = name.strip_suffix(suffix) {
            match types.get(fam) {
                Some(MetricType::Histogram) => return Ok(role),
                Some(MetricType::Summary) if role == Role::HistSumCount => return Ok(role),
                _ => {}
            }
        }
    }
    // OpenMetrics-style counter family `X` with sample `X_total`.
    if let Some(fam) = name.strip_suffix("_total")
        && types.get(fam) == Some(&MetricType::Counter)
    {
        return Ok(Role::Counter);
    }
    Ok(if name.ends_with("_total") {
        Role::Counter
    } else {
        Role::Gauge
    })
}

/// Series key: the name, then its labels in exposition order without `model_name`.
pub fn series_key(name: &str, labels: &[(String, String)]) -> String {
    let mut k = String::with_capacity(name.len() + 32);
    k.push_str(name);
    let mut first = true;
    for (n, v) in labels {
        if n == "model_name" {
            continue;
        }
        k.push(if first { '{' } else { ',' });
        first = false;
        k.push_str(n);
        k.push_str("=\"");
        for c in v.chars() {
            match c {
                '\\' => k.push_str("\\\\"),
                '"' => k.push_str("\\\""),
                '\n' => k.push_str("\\n"),
                c => k.push(c),
            }
        }
        k.push('"');
    }
    if !first {
        k.push('}');
    }
    k
}

/// The three maps of a `MetricsSample`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Reduced {
    pub gauges: BTreeMap<String, f64>,
    pub counters: BTreeMap<String, f64>,
    pub histograms: BTreeMap<String, f64>,
}

/// Parses a scrape and keeps the `vllm:*` families: gauges, counters, and histogram (and
/// summary) `_sum`/`_count`. Buckets and quantiles are dropped, and so are the
/// `X_created` gauges that `prometheus_client` emits beside every counter and histogram `X`
/// (creation timestamps, not measurements). Non-finite values are dropped: JSON cannot carry
/// them.
pub fn reduce_vllm(text: &str) -> Result<Reduced, ParseError> {
    let exp = parse(text)?;
    let mut out = Reduced::default();
    for s in &exp.samples {
        if !s.name.starts_with("vllm:") || !s.value.is_finite() {
            continue;
        }
        let role = classify(&exp.types, &s.name).map_err(|m| err(0, m))?;
        let map = match role {
            Role::Counter => &mut out.counters,
            Role::Gauge => {
                if let Some(base) = s.name.strip_suffix("_created")
                    && is_created_shadow(&exp.types, base)
                {
                    continue;
                }
                &mut out.gauges
            }
            Role::HistSumCount => &mut out.histograms,
            Role::HistBucket | Role::SummaryQuantile => continue,
        };
        map.insert(series_key(&s.name, &s.labels), s.value);
    }
    Ok(out)
}

fn is_created_shadow(types: &BTreeMap<String, MetricType>, base: &str) -> bool {
    matches!(
        types.get(base),
        Some(MetricType::Histogram | MetricType::Summary | MetricType::Counter)
    ) || types.get(&format!("{base}_total")) == Some(&MetricType::Counter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_labels_escapes_and_special_values() {
        let e = parse(
            "# HELP a:b x\n# TYPE a:b gauge\na:b{x=\"1\",y=\"q\\\"\\\\\\n\",} 2.5 1700000000000\nc +Inf\nd NaN\n",
        )
        .unwrap();
        assert_eq!(
            e.samples[0].labels,
            vec![("x".into(), "1".into()), ("y".into(), "q\"\\\n".into())]
        );
        assert_eq!(e.samples[0].value, 2.5);
        assert!(e.samples[1].value.is_infinite());
        assert!(e.samples[2].value.is_nan());
    }

    #[test]
    fn strict_errors_carry_line_numbers() {
        for (text, line) in [
            ("ok 1\nbad{x=1} 2\n", 2),
            ("a{x=\"1\" 2\n", 1),
            ("a 1 2 3\n", 1),
            ("a abc\n", 1),
            ("# TYPE a nonsense\n", 1),
            ("# TYPE a gauge\n# TYPE a gauge\n", 2),
            ("{x=\"1\"} 2\n", 1),
            ("a{x=\"\\q\"} 1\n", 1),
        ] {
            assert_eq!(parse(text).unwrap_err().line, line, "{text:?}");
        }
    }

    #[test]
    fn reduces_a_real_vllm_scrape() {
        let text = include_str!("../tests/data/vllm032_cpu_metrics.txt");
        let r = reduce_vllm(text).unwrap();
        assert_eq!(
            r.gauges.get("vllm:num_requests_running{engine=\"0\"}"),
            Some(&0.0)
        );
        assert_eq!(
            r.gauges.get("vllm:num_requests_waiting{engine=\"0\"}"),
            Some(&0.0)
        );
        assert_eq!(
            r.counters.get("vllm:prompt_tokens_total{engine=\"0\"}"),
            Some(&6.0)
        );
        assert!(
            r.counters.contains_key(
                "vllm:request_success_total{engine=\"0\",finished_reason=\"length\"}"
            )
        );
        assert_eq!(
            r.histograms
                .get("vllm:e2e_request_latency_seconds_count{engine=\"0\"}"),
            Some(&1.0)
        );
        assert!(
            r.histograms
                .contains_key("vllm:e2e_request_latency_seconds_sum{engine=\"0\"}")
        );
        assert!(
            r.histograms
                .contains_key("vllm:iteration_tokens_total_sum{engine=\"0\"}")
        );
        // No buckets, no _created shadows, no non-vllm families, no model_name label.
        for k in r
            .gauges
            .keys()
            .chain(r.counters.keys())
            .chain(r.histograms.keys())
        {
            assert!(k.starts_with("vllm:"), "{k}");
            assert!(!k.contains("_bucket"), "{k}");
            assert!(!k.contains("model_name"), "{k}");
            assert!(!k.ends_with("_created{engine=\"0\"}"), "{k}");
        }
    }

    #[test]
    fn reduces_a_real_h200_scrape() {
        // The H200 sample in the shared references, if present (it is not part of this crate).
        let p = "/work/shared/reference/h200_metrics_sample.txt";
        if let Ok(text) = std::fs::read_to_string(p) {
            let r = reduce_vllm(&text).unwrap();
            assert!(
                r.gauges
                    .keys()
                    .any(|k| k.starts_with("vllm:num_requests_running"))
            );
        }
    }

    #[test]
    fn series_keys_drop_model_name_only() {
        let l = vec![
            ("engine".to_string(), "0".to_string()),
            ("model_name".to_string(), "m".to_string()),
            ("r".to_string(), "a\"b".to_string()),
        ];
        assert_eq!(
            series_key("vllm:x", &l),
            "vllm:x{engine=\"0\",r=\"a\\\"b\"}"
        );
        assert_eq!(series_key("vllm:x", &l[1..2]), "vllm:x");
    }
}
