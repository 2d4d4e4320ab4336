//! Reading raw JSONL (plain or zstd) with the contract's error rules:
//! - a truncated LAST line (no trailing newline and unparsable: a run that was killed) is
//!   skipped and reported as a warning;
//! - any other malformed line is an error naming the file, the 1-based line and the field path.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// A malformed raw file.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: field `{field}`: {message}")]
    Malformed {
        path: PathBuf,
        line: usize,
        field: String,
        message: String,
    },
}

/// Parsed lines of one file plus the non-fatal problems met.
#[derive(Debug)]
pub struct Lines<T> {
    pub rows: Vec<T>,
    pub warnings: Vec<String>,
}

/// Parses every line of `bytes` (contents of `path`) as `T`.
pub fn parse_lines<T: DeserializeOwned>(
    path: &Path,
    bytes: &[u8],
) -> Result<Lines<T>, IngestError> {
    parse_reader(path, bytes)
}

/// Streams `reader` line by line (one reused buffer: no whole-file allocation) and parses each
/// line as `T`, applying the contract's truncation rule. An I/O error after some lines (a zstd
/// stream cut short) ends the file with a warning; before any line it is an error.
pub fn parse_reader<T: DeserializeOwned>(
    path: &Path,
    mut reader: impl BufRead,
) -> Result<Lines<T>, IngestError> {
    let mut rows = Vec::new();
    let mut warnings = Vec::new();
    let mut line = Vec::with_capacity(64 * 1024);
    let mut lineno = 0usize;
    loop {
        line.clear();
        let n = match reader.read_until(b'\n', &mut line) {
            Ok(n) => n,
            Err(e) if lineno > 0 => {
                warnings.push(format!(
                    "{}: stream ends early after line {lineno} ({e}); read what was there",
                    path.display()
                ));
                break;
            }
            Err(source) => {
                return Err(IngestError::Io {
                    path: path.into(),
                    source,
                });
            }
        };
        if n == 0 {
            break;
        }
        lineno += 1;
        let complete = line.last() == Some(&b'\n');
        let trimmed = trim_ascii(&line);
        if trimmed.is_empty() {
            continue;
        }
        // Fast path without field tracking; only a failing line is parsed again to name the field.
        if let Ok(row) = serde_json::from_slice::<T>(trimmed) {
            rows.push(row);
            continue;
        }
        let de = &mut serde_json::Deserializer::from_slice(trimmed);
        match serde_path_to_error::deserialize::<_, T>(de) {
            Ok(row) => rows.push(row),
            Err(e) if !complete => {
                // No newline after it: the last line, cut off when the writer was killed.
                warnings.push(format!(
                    "{}:{lineno}: truncated last line skipped (the writer was probably killed): {}",
                    path.display(),
                    e.inner()
                ));
                break;
            }
            Err(e) => {
                let field = e.path().to_string();
                return Err(IngestError::Malformed {
                    path: path.into(),
                    line: lineno,
                    field: if field == "." {
                        "(record)".into()
                    } else {
                        field
                    },
                    message: e.into_inner().to_string(),
                });
            }
        }
    }
    Ok(Lines { rows, warnings })
}

/// Reads a raw JSONL file (plain or `.zst`), streaming.
pub fn read_jsonl<T: DeserializeOwned>(path: &Path) -> Result<Lines<T>, IngestError> {
    let io = |source| IngestError::Io {
        path: path.into(),
        source,
    };
    let f = std::fs::File::open(path).map_err(io)?;
    if path.extension().is_some_and(|e| e == "zst") {
        let dec = zstd::stream::read::Decoder::new(f).map_err(io)?;
        parse_reader(path, BufReader::with_capacity(1 << 20, dec))
    } else {
        parse_reader(path, BufReader::with_capacity(1 << 20, f))
    }
}

fn trim_ascii(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &s[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Row {
        a: u64,
        b: Option<String>,
    }

    fn p() -> &'static Path {
        Path::new("requests_A_r1_i8_o8.jsonl")
    }

    #[test]
    fn good_lines_with_and_without_final_newline() {
        let l: Lines<Row> =
            parse_lines(p(), b"{\"a\":1,\"b\":null}\n{\"a\":2,\"b\":\"x\"}\n").unwrap();
        assert_eq!(l.rows.len(), 2);
        assert!(l.warnings.is_empty());
        let l: Lines<Row> =
            parse_lines(p(), b"{\"a\":1,\"b\":null}\n{\"a\":2,\"b\":\"x\"}").unwrap();
        assert_eq!(l.rows.len(), 2);
        assert!(l.warnings.is_empty());
    }

    #[test]
    fn truncated_last_line_is_a_warning() {
        let l: Lines<Row> = parse_lines(p(), b"{\"a\":1,\"b\":null}\n{\"a\":2,\"b\":\"x").unwrap();
        assert_eq!(l.rows, vec![Row { a: 1, b: None }]);
        assert_eq!(l.warnings.len(), 1);
        assert!(
            l.warnings[0].contains(":2: truncated last line"),
            "{}",
            l.warnings[0]
        );
    }

    #[test]
    fn malformed_middle_line_names_file_line_and_field() {
        let e = parse_lines::<Row>(
            p(),
            b"{\"a\":1,\"b\":null}\n{\"a\":\"oops\",\"b\":null}\n{\"a\":3,\"b\":null}\n",
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("requests_A_r1_i8_o8.jsonl:2: field `a`:"),
            "{msg}"
        );
        let e = parse_lines::<Row>(p(), b"{\"b\":null}\n").unwrap_err();
        assert!(
            e.to_string().contains(":1:") && e.to_string().contains("missing field `a`"),
            "{e}"
        );
    }

    #[test]
    fn a_complete_but_bad_last_line_is_an_error_not_a_truncation() {
        // Ends with a newline: the writer finished the line, so it is corrupt, not truncated.
        let e =
            parse_lines::<Row>(p(), b"{\"a\":1,\"b\":null}\n{\"a\":-1,\"b\":null}\n").unwrap_err();
        assert!(e.to_string().contains(":2: field `a`"), "{e}");
    }

    #[test]
    fn zstd_files_are_read() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("x.jsonl.zst");
        let body = b"{\"a\":7,\"b\":null}\n";
        std::fs::write(&path, zstd::encode_all(&body[..], 3).unwrap()).unwrap();
        let l: Lines<Row> = read_jsonl(&path).unwrap();
        assert_eq!(l.rows, vec![Row { a: 7, b: None }]);
    }
}
