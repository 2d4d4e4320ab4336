//! Benchmark (not a test): `ctax analyze` on a generated seed-scale archive — 8 configs × 16
//! cells × 2,000 requests, 256 token events each, 10,000 resamples — printing wall time per
//! stage and peak memory (ru_maxrss). Target: under 10 s on the 2-core development machine.
//!
//!     cargo bench --bench analysis            # generates the archive once under target/
//!     CTAX_BENCH_ROOT=/path cargo bench ...   # or use an existing results root

use std::path::PathBuf;
use std::time::Instant;

use connector_tax::analysis::AnalyzeOptions;

fn peak_rss_mb() -> f64 {
    // SAFETY: getrusage fills the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    ru.ru_maxrss as f64 / 1024.0
}

fn main() {
    let root = std::env::var_os("CTAX_BENCH_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-archive");
            if !p.join("preflight/preflight_status.json").exists() {
                let t = Instant::now();
                let spec = connector_tax::synth::preset(connector_tax::synth::Preset::Bench);
                connector_tax::synth::generate(&spec, &p).unwrap();
                eprintln!(
                    "generated the archive in {:.1} s",
                    t.elapsed().as_secs_f64()
                );
            }
            p
        });
    let threads = rayon::current_num_threads();
    let t0 = Instant::now();
    let ds = connector_tax::ingest::load(&root).unwrap();
    let t_ingest = t0.elapsed().as_secs_f64();
    let requests: usize = ds
        .runs
        .iter()
        .flat_map(|r| r.cells.values())
        .map(|c| c.requests.len())
        .sum();
    let events: usize = ds
        .runs
        .iter()
        .flat_map(|r| r.cells.values())
        .flat_map(|c| &c.requests)
        .map(|r| r.events.len())
        .sum();
    let cells: usize = ds.runs.iter().map(|r| r.cells.len()).sum();
    let t1 = Instant::now();
    let (res, verdicts) =
        connector_tax::pipeline::evaluate(&ds, &AnalyzeOptions::default()).unwrap();
    let t_analyze = t1.elapsed().as_secs_f64();
    let t2 = Instant::now();
    let out = std::env::temp_dir().join("ctax-bench-analysis");
    connector_tax::pipeline::write_data(&res, &verdicts, &out).unwrap();
    let t_json = t2.elapsed().as_secs_f64();
    connector_tax::ingest::frames::export_parquet(&ds, &out).unwrap();
    let t_write = t2.elapsed().as_secs_f64();
    let total = t0.elapsed().as_secs_f64();
    println!("analysis benchmark ({threads} threads)");
    println!(
        "  archive        : {} runs, {cells} cells, {requests} requests, {events} token events",
        ds.runs.len()
    );
    println!(
        "  resamples      : {}",
        res.summary.conventions.bootstrap.resamples
    );
    println!("  ingest         : {t_ingest:.2} s");
    println!("  analyze        : {t_analyze:.2} s  (cells, CIs, saturation, taxes, verdicts)");
    println!(
        "  write          : {t_write:.2} s  (summary json {t_json:.2} s, parquet {:.2} s)",
        t_write - t_json
    );
    println!("  total          : {total:.2} s   (target < 10 s)");
    println!("  peak RSS       : {:.0} MB", peak_rss_mb());
}
