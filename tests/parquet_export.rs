//! `ctax analyze` writes the ingested tables as Parquet that polars and pandas/pyarrow read back
//! with the same rows and values.

use connector_tax::analysis::AnalyzeOptions;
use connector_tax::pipeline::{Outputs, run};
use connector_tax::synth::{SynthConfig, SynthSpec, generate};
use polars_io::SerReader;
use polars_io::parquet::read::ParquetReader;

#[path = "common/venv.rs"]
mod venv;

#[test]
fn parquet_tables_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = SynthSpec {
        configs: vec![
            SynthConfig::new("plain", 1.0, 1.0),
            SynthConfig::new("noop_connector", 1.1, 1.0),
        ],
        phase_a_rates: vec![1.0, 2.0],
        requests_per_cell: 30,
        warmup_requests: 2,
        max_events: Some(16),
        ..Default::default()
    };
    generate(&spec, tmp.path()).unwrap();
    let out = tmp.path().join("analysis");
    run(
        tmp.path(),
        &AnalyzeOptions {
            skip_itl: true,
            ..Default::default()
        },
        &Outputs {
            analysis_dir: Some(out.clone()),
            report_dir: None,
        },
    )
    .unwrap();
    for f in ["summary.json", "verdicts.json"] {
        assert!(out.join(f).is_file(), "{f} written beside the tables");
    }
    let read = |name: &str| {
        ParquetReader::new(std::fs::File::open(out.join(name)).unwrap())
            .finish()
            .unwrap()
    };
    let req = read("requests.parquet");
    // 2 configs × 2 cells × (30 + 2 warm-up) requests.
    assert_eq!(req.height(), 2 * 2 * 32);
    for c in [
        "request_id",
        "config",
        "t_send_ns",
        "ttft_ms",
        "tpot_ms",
        "event_t_ns",
        "event_tokens",
        "warmup",
        "status",
    ] {
        assert!(req.column(c).is_ok(), "column {c} missing");
    }
    let inner = req
        .column("event_tokens")
        .unwrap()
        .list()
        .unwrap()
        .get_inner();
    let tokens: u64 = inner.u32().unwrap().iter().flatten().map(u64::from).sum();
    assert_eq!(
        tokens,
        2 * 2 * 32 * 256,
        "every streamed token is in the event lists"
    );
    assert!(read("metrics.parquet").height() > 0);
    assert!(read("steps.parquet").height() > 0);

    // pandas/pyarrow, with the interpreter tools/setup.sh prepared (pyarrow installed there).
    let Some(py) = venv::python("the pyarrow read-back", "pyarrow") else {
        return;
    };
    let script = "import sys, pyarrow.parquet as pq\n\
                  t = pq.read_table(sys.argv[1])\n\
                  toks = sum(sum(x) for x in t.column('event_tokens').to_pylist())\n\
                  print(t.num_rows, toks, round(sum(v for v in t.column('ttft_ms').to_pylist() if v is not None), 3))";
    let o = std::process::Command::new(py)
        .arg("-c")
        .arg(script)
        .arg(out.join("requests.parquet"))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "pyarrow failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let parts: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(parts[0], (2 * 2 * 32).to_string());
    assert_eq!(parts[1], (2 * 2 * 32 * 256).to_string());
    let ttft_sum: f64 = req
        .column("ttft_ms")
        .unwrap()
        .f64()
        .unwrap()
        .iter()
        .flatten()
        .sum();
    assert!((parts[2].parse::<f64>().unwrap() - ttft_sum).abs() < 1e-3 * ttft_sum.max(1.0));
}
