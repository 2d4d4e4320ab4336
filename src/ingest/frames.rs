//! The ingested tables as polars DataFrames, the per-cell point percentiles computed with
//! polars (`QuantileMethod::Linear` = numpy's default; polars' own default is `Nearest`), and
//! the Parquet export that pandas/pyarrow read.
//!
//! Tables (one row per …):
//! - `requests`: request record, with derived `ttft_ms`, `tpot_ms`, `e2e_ms`, the event
//!   arrays as list columns `event_t_ns` / `event_tokens`, and where its cell ran (`slot`,
//!   `gpu_index`, `gpu_uuid`; null before slots existed);
//! - `metrics`: (scrape, series) in long form: `kind` ∈ {gauge, counter, histogram};
//! - `steps`: engine step.

use std::path::Path;

use anyhow::Context as _;

use polars::prelude::*;
use polars_io::parquet::write::{ParquetCompression, ParquetWriter};

use super::Dataset;

fn str_col(name: &str, v: Vec<String>) -> Column {
    Column::new(name.into(), v)
}

/// The identity columns every table starts with: run, config, launch, phase, cell.
#[derive(Default)]
struct IdCols {
    run: Vec<String>,
    config: Vec<String>,
    launch: Vec<u32>,
    phase: Vec<String>,
    cell: Vec<String>,
}

impl IdCols {
    fn push(&mut self, r: &super::Run, phase: ctax_schema::Phase, cell: &str) {
        self.run.push(r.dir_name.clone());
        self.config.push(r.config.clone());
        self.launch.push(r.launch);
        self.phase.push(phase.tag().to_owned());
        self.cell.push(cell.to_owned());
    }

    fn into_columns(self) -> [Column; 5] {
        [
            str_col("run", self.run),
            str_col("config", self.config),
            Column::new("launch".into(), self.launch),
            str_col("phase", self.phase),
            str_col("cell", self.cell),
        ]
    }
}

/// One row per request record of every run and cell. `with_events` adds the per-event arrays
/// as list columns (the Parquet export wants them; the analysis does not).
pub fn requests_frame(ds: &Dataset, with_events: bool) -> PolarsResult<DataFrame> {
    let n: usize = ds
        .runs
        .iter()
        .flat_map(|r| r.cells.values())
        .map(|c| c.requests.len())
        .sum();
    let n_events: usize = if with_events {
        ds.runs
            .iter()
            .flat_map(|r| r.cells.values())
            .flat_map(|c| &c.requests)
            .map(|r| r.events.len())
            .sum()
    } else {
        0
    };
    let mut request_id = Vec::with_capacity(n);
    let mut ids = IdCols::default();
    let mut rate = Vec::with_capacity(n);
    let mut input_len = Vec::with_capacity(n);
    let mut output_len = Vec::with_capacity(n);
    let mut seq = Vec::with_capacity(n);
    let mut t_int = Vec::with_capacity(n);
    let mut t_send = Vec::with_capacity(n);
    let mut t_first = Vec::with_capacity(n);
    let mut t_last = Vec::with_capacity(n);
    let mut t_end = Vec::with_capacity(n);
    let mut prompt = Vec::with_capacity(n);
    let mut completion = Vec::with_capacity(n);
    let mut inflight = Vec::with_capacity(n);
    let mut warmup = Vec::with_capacity(n);
    let mut status = Vec::with_capacity(n);
    let mut http = Vec::with_capacity(n);
    let mut error = Vec::with_capacity(n);
    let mut slot: Vec<Option<u32>> = Vec::with_capacity(n);
    let mut gpu_index: Vec<Option<u32>> = Vec::with_capacity(n);
    let mut gpu_uuid: Vec<Option<String>> = Vec::with_capacity(n);
    let mut ev_t = ListPrimitiveChunkedBuilder::<UInt64Type>::new(
        "event_t_ns".into(),
        n,
        n_events,
        DataType::UInt64,
    );
    let mut ev_k = ListPrimitiveChunkedBuilder::<UInt32Type>::new(
        "event_tokens".into(),
        n,
        n_events,
        DataType::UInt32,
    );
    let mut buf_t: Vec<u64> = Vec::new();
    let mut buf_k: Vec<u32> = Vec::new();
    for r in &ds.runs {
        for ((ph, c), rc) in &r.cells {
            let place = rc.placement.as_ref();
            for q in &rc.requests {
                slot.push(place.map(|p| p.slot));
                gpu_index.push(place.and_then(|p| p.gpu_index));
                gpu_uuid.push(place.and_then(|p| p.gpu_uuid.clone()));
                request_id.push(q.request_id.clone());
                ids.push(r, *ph, c);
                rate.push(q.rate);
                input_len.push(q.input_len);
                output_len.push(q.output_len);
                seq.push(q.seq);
                t_int.push(q.t_intended_ns);
                t_send.push(q.t_send_ns);
                t_first.push(q.t_first_token_ns);
                t_last.push(q.t_last_token_ns);
                t_end.push(q.t_end_ns);
                prompt.push(q.prompt_tokens);
                completion.push(q.completion_tokens);
                inflight.push(q.inflight_at_send);
                warmup.push(q.warmup);
                status.push(q.status.as_str().to_owned());
                http.push(q.http_status.map(u32::from));
                error.push(q.error.clone());
                if with_events {
                    buf_t.clear();
                    buf_k.clear();
                    buf_t.extend(q.events.iter().map(|e| e.t_ns()));
                    buf_k.extend(q.events.iter().map(|e| e.tokens()));
                    ev_t.append_slice(&buf_t);
                    ev_k.append_slice(&buf_k);
                }
            }
        }
    }
    let df = DataFrame::new(
        n,
        std::iter::once(str_col("request_id", request_id))
            .chain(ids.into_columns())
            .chain([
                Column::new("rate".into(), rate),
                Column::new("input_len".into(), input_len),
                Column::new("output_len".into(), output_len),
                Column::new("seq".into(), seq),
                Column::new("t_intended_ns".into(), t_int),
                Column::new("t_send_ns".into(), t_send),
                Column::new("t_first_token_ns".into(), t_first),
                Column::new("t_last_token_ns".into(), t_last),
                Column::new("t_end_ns".into(), t_end),
                Column::new("prompt_tokens".into(), prompt),
                Column::new("completion_tokens".into(), completion),
                Column::new("inflight_at_send".into(), inflight),
                Column::new("warmup".into(), warmup),
                str_col("status", status),
                Column::new("http_status".into(), http),
                Column::new("error".into(), error),
                // Where the request's cell ran (null before slots existed).
                Column::new("slot".into(), slot),
                Column::new("gpu_index".into(), gpu_index),
                Column::new("gpu_uuid".into(), gpu_uuid),
            ])
            .collect(),
    )?;
    let df = if with_events {
        let mut df = df;
        df.with_column(ev_t.finish().into_column())?;
        df.with_column(ev_k.finish().into_column())?;
        df
    } else {
        df
    };
    with_latencies(df)
}

/// Adds `ttft_ms`, `e2e_ms`, `tpot_ms` (the definitions in DESIGN.md §3) as polars expressions.
fn with_latencies(df: DataFrame) -> PolarsResult<DataFrame> {
    let ms = |a: &str, b: &str| {
        (col(a).cast(DataType::Float64) - col(b).cast(DataType::Float64)) / lit(1e6)
    };
    df.lazy()
        .with_columns([
            ms("t_first_token_ns", "t_send_ns").alias("ttft_ms"),
            ms("t_last_token_ns", "t_send_ns").alias("e2e_ms"),
            when(col("completion_tokens").gt_eq(lit(2u32)))
                .then(
                    ms("t_last_token_ns", "t_first_token_ns")
                        / (col("completion_tokens").cast(DataType::Float64) - lit(1.0)),
                )
                .otherwise(lit(NULL).cast(DataType::Float64))
                .alias("tpot_ms"),
        ])
        .collect()
}

/// Per-cell point percentiles of TTFT/TPOT/E2E over measured requests (status ok, not
/// warm-up), computed by polars with linear interpolation. `by_launch`: group by launch too.
/// Columns: config, [launch,] phase, cell, n, then `<metric>_{mean,p50,p90,p99}`. The analysis
/// computes its point estimates from its own samples of the same kept records (one sample set
/// for the estimate and its CI); this independent computation must agree (tests/accounting.rs).
pub fn request_point_estimates(requests: &DataFrame, by_launch: bool) -> PolarsResult<DataFrame> {
    let mut keys = vec![col("config")];
    if by_launch {
        keys.push(col("launch"));
    }
    keys.extend([col("phase"), col("cell")]);
    let mut aggs = vec![len().alias("n")];
    for m in ["ttft_ms", "tpot_ms", "e2e_ms"] {
        aggs.push(col(m).mean().alias(format!("{m}_mean")));
        for (q, name) in [(0.5, "p50"), (0.9, "p90"), (0.99, "p99")] {
            aggs.push(
                col(m)
                    .quantile(lit(q), QuantileMethod::Linear)
                    .alias(format!("{m}_{name}")),
            );
        }
    }
    requests
        .clone()
        .lazy()
        .filter(col("status").eq(lit("ok")).and(col("warmup").not()))
        .group_by(keys.clone())
        .agg(aggs)
        .sort_by_exprs(keys, SortMultipleOptions::default())
        .collect()
}

/// One row per (scrape, series): long form of every metrics sample. A failed scrape keeps one
/// row with null kind/series/value so that failures stay visible.
fn metrics_frame(ds: &Dataset) -> PolarsResult<DataFrame> {
    let mut ids = IdCols::default();
    let mut t_ns = Vec::new();
    let mut scrape_ms = Vec::new();
    let mut ok = Vec::new();
    let mut kind: Vec<Option<&str>> = Vec::new();
    let mut series: Vec<Option<String>> = Vec::new();
    let mut value = Vec::new();
    for r in &ds.runs {
        for ((ph, c), rc) in &r.cells {
            for s in &rc.metrics {
                let maps = [
                    ("gauge", &s.gauges),
                    ("counter", &s.counters),
                    ("histogram", &s.histograms),
                ];
                let mut rows: Vec<(Option<&str>, Option<String>, Option<f64>)> = maps
                    .iter()
                    .flat_map(|(k, m)| {
                        m.iter()
                            .map(move |(name, v)| (Some(*k), Some(name.clone()), Some(*v)))
                    })
                    .collect();
                if rows.is_empty() {
                    rows.push((None, None, None));
                }
                for (k, name, v) in rows {
                    ids.push(r, *ph, c);
                    t_ns.push(s.t_ns);
                    scrape_ms.push(s.scrape_ms);
                    ok.push(s.ok);
                    kind.push(k);
                    series.push(name);
                    value.push(v);
                }
            }
        }
    }
    let n = t_ns.len();
    DataFrame::new(
        n,
        ids.into_columns()
            .into_iter()
            .chain([
                Column::new("t_ns".into(), t_ns),
                Column::new("scrape_ms".into(), scrape_ms),
                Column::new("ok".into(), ok),
                Column::new("kind".into(), kind),
                Column::new("series".into(), series),
                Column::new("value".into(), value),
            ])
            .collect(),
    )
}

/// One row per engine step record.
fn steps_frame(ds: &Dataset) -> PolarsResult<DataFrame> {
    let mut ids = IdCols::default();
    let mut t_ns = Vec::new();
    let mut step_id = Vec::new();
    let mut pid = Vec::new();
    let mut f: [Vec<Option<f64>>; 5] = Default::default();
    let mut c: [Vec<Option<u32>>; 4] = Default::default();
    for r in &ds.runs {
        for ((ph, cl), rc) in &r.cells {
            for s in &rc.steps {
                ids.push(r, *ph, cl);
                t_ns.push(s.t_ns);
                step_id.push(s.step_id);
                pid.push(s.pid);
                for (dst, v) in f.iter_mut().zip([
                    s.step_duration_us,
                    s.schedule_us,
                    s.build_meta_us,
                    s.get_finished_us,
                    s.start_load_kv_us,
                ]) {
                    dst.push(v);
                }
                for (dst, v) in c.iter_mut().zip([
                    s.num_running,
                    s.num_waiting,
                    s.prefill_tokens,
                    s.decode_tokens,
                ]) {
                    dst.push(v);
                }
            }
        }
    }
    let n = t_ns.len();
    let [f0, f1, f2, f3, f4] = f;
    let [c0, c1, c2, c3] = c;
    DataFrame::new(
        n,
        ids.into_columns()
            .into_iter()
            .chain([
                Column::new("t_ns".into(), t_ns),
                Column::new("step_id".into(), step_id),
                Column::new("pid".into(), pid),
                Column::new("step_duration_us".into(), f0),
                Column::new("schedule_us".into(), f1),
                Column::new("build_meta_us".into(), f2),
                Column::new("get_finished_us".into(), f3),
                Column::new("start_load_kv_us".into(), f4),
                Column::new("num_running".into(), c0),
                Column::new("num_waiting".into(), c1),
                Column::new("prefill_tokens".into(), c2),
                Column::new("decode_tokens".into(), c3),
            ])
            .collect(),
    )
}

/// Writes `df` as LZ4-compressed Parquet (fast; read by pyarrow >= 8), atomically
/// ([`crate::fsutil::write_atomic_with`]).
fn write_parquet(df: &mut DataFrame, path: &Path) -> anyhow::Result<()> {
    crate::fsutil::write_atomic_with(path, |f| -> anyhow::Result<()> {
        ParquetWriter::new(f)
            .with_compression(ParquetCompression::Lz4Raw)
            .finish(df)?;
        Ok(())
    })
    .with_context(|| format!("writing {}", path.display()))
}

/// Exports requests, metrics and steps tables as Parquet into `dir`.
pub fn export_parquet(ds: &Dataset, dir: &Path) -> anyhow::Result<()> {
    let (a, (b, c)) = rayon::join(
        || {
            write_parquet(
                &mut requests_frame(ds, true)?,
                &dir.join("requests.parquet"),
            )
        },
        || {
            rayon::join(
                || write_parquet(&mut metrics_frame(ds)?, &dir.join("metrics.parquet")),
                || write_parquet(&mut steps_frame(ds)?, &dir.join("steps.parquet")),
            )
        },
    );
    a?;
    b?;
    c?;
    Ok(())
}
