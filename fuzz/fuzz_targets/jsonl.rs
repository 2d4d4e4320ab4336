//! The raw JSONL reader of the contract (`ctax_schema::jsonl`): the per-line parse of
//! `RequestRecord`, `MetricsSample` and `StepRecord` with file:line:field errors, the
//! truncated-last-line rule and the bounded line reader.
//!
//! Input: byte 0 picks the record type (and the read size); the rest is the file.
//! Checks, beyond "no panic":
//! - the result (rows, warnings, or the error text) is the same whether the file arrives in
//!   one read or in reads of 1..=16 bytes, with a small line limit (so the over-long-line path
//!   and its boundary are exercised) and with the default one;
//! - an error names the file and a line number within the file; a too-long line is only
//!   reported when some line really is longer than the limit;
//! - every row parsed re-serialises to a line that parses again.
#![no_main]

use ctax_schema::jsonl::{IngestError, Lines, parse_line, parse_reader_limited};
use ctax_schema::{MetricsSample, RequestRecord, StepRecord};
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io::BufReader;
use std::path::Path;

const SMALL_LIMIT: usize = 200;

fn render<T: std::fmt::Debug>(r: &Result<Lines<T>, IngestError>) -> String {
    match r {
        Ok(l) => format!("{:?} {:?}", l.rows, l.warnings),
        Err(e) => format!("ERR {e}"),
    }
}

fn check<T: DeserializeOwned + Serialize + std::fmt::Debug>(file: &[u8], read: usize) {
    let path = Path::new("requests_A_r1_i8_o8.jsonl");
    let lines_in_file = file.split(|&b| b == b'\n').count();
    let longest = file
        .split(|&b| b == b'\n')
        .map(<[u8]>::len)
        .max()
        .unwrap_or(0);
    for limit in [SMALL_LIMIT, ctax_schema::jsonl::MAX_LINE_BYTES] {
        let whole = parse_reader_limited::<T>(path, file, limit);
        let chunked = parse_reader_limited::<T>(path, BufReader::with_capacity(read, file), limit);
        assert_eq!(render(&whole), render(&chunked));
        match &whole {
            Ok(l) => {
                for row in &l.rows {
                    let line = serde_json::to_vec(row).expect("serialises");
                    parse_line::<T>(&line)
                        .unwrap_or_else(|e| panic!("row does not parse back: {e:?}"))
                        .expect("not blank");
                }
            }
            Err(IngestError::Malformed { line, .. }) => {
                assert!(*line >= 1 && *line <= lines_in_file)
            }
            Err(IngestError::LineTooLong { line, limit: l, .. }) => {
                assert!(*line >= 1 && *line <= lines_in_file);
                assert!(
                    longest > *l,
                    "too long reported, longest line {longest} <= {l}"
                );
            }
            Err(e) => panic!("unexpected error from an in-memory reader: {e}"),
        }
        if let Err(e) = &whole {
            assert!(
                e.to_string().starts_with("requests_A_r1_i8_o8.jsonl:"),
                "{e}"
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&k, file)) = data.split_first() else {
        return;
    };
    let read = usize::from(k >> 2) % 16 + 1;
    match k % 3 {
        0 => check::<RequestRecord>(file, read),
        1 => check::<MetricsSample>(file, read),
        _ => check::<StepRecord>(file, read),
    }
});
