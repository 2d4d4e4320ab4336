//! The archive's columns encodings (`ctax_schema::columns`: request columns `CTAXCOL1`, number
//! columns `CTAXNUM1`; DESIGN.md §2.7), what `ctax` reads back from `results/`.
//!
//! Input: byte 0 picks the mode, the rest is the file.
//! - Bit 0 clear: the rest, behind the magic bit 1 picks (request or number columns), is a
//!   columns file to decode. Checks, beyond "no panic, no hang, no blow-up" (the harness's
//!   timeout and RSS limit): what decodes is at most `MAX_RAW` bytes, and decoding twice gives
//!   the same result.
//! - Bit 0 set: the rest is a JSONL file to encode (request columns for bit 1 clear, number
//!   columns for bit 1 set). Checks: an encoding the encoder returns decodes to exactly the
//!   input.
#![no_main]

use ctax_schema::{columns, number_columns, request_columns};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let numbers = mode & 2 != 0;
    if mode & 1 == 0 {
        let magic = if numbers {
            number_columns::MAGIC
        } else {
            request_columns::MAGIC
        };
        let file = [&magic[..], rest].concat();
        let first = columns::decode(&file);
        if let Ok(out) = &first {
            assert!(out.len() as u64 <= columns::MAX_RAW);
        }
        let again = columns::decode(&file);
        assert_eq!(
            first.as_ref().map_err(|e| e.to_string()),
            again.as_ref().map_err(|e| e.to_string())
        );
    } else {
        let encoded = if numbers {
            number_columns::encode(rest)
        } else {
            request_columns::encode(rest)
        };
        if let Ok(e) = encoded {
            assert_eq!(columns::decode(&e).unwrap(), rest);
        }
    }
});
