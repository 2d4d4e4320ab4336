//! Reading raw JSONL line by line with the contract's error rules (pure: bytes in, records out;
//! opening files, zstd and the regular-file check live in `ctax`'s `ingest::jsonl`):
//! - a truncated LAST line (no trailing newline and unparsable: a writer that was killed) is
//!   skipped and reported as a warning;
//! - any other malformed line is an error naming the file, the 1-based line and the field path;
//! - a line longer than the reader's limit ([`MAX_LINE_BYTES`] by default) is an error naming
//!   the file and line, found after reading at most `limit + 1` bytes of it (bounded memory,
//!   whatever the file holds: a multi-GiB file without a newline never grows a buffer past the
//!   limit);
//! - an I/O error after some lines (a zstd stream cut short) ends the file with a warning;
//!   before any line it is an error.
//!
//! Lives in the schema crate because it is part of the raw-data contract and so that it can be
//! fuzzed without the analysis crate (polars).

use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// Longest raw line accepted: 64 MiB. The longest legitimate line is a `RequestRecord` with
/// one event per output token: ~30 bytes per event, so 64 MiB is over 2 million events (10×
/// the longest output any profile asks for).
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// A raw file that cannot be read as the contract says.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The I/O error is part of the message, not a `source()` as well: an error chain printed
    /// whole (`{:#}`) would say it twice.
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}:{line}: field `{field}`: {message}")]
    Malformed {
        path: PathBuf,
        line: usize,
        field: String,
        message: String,
    },
    #[error(
        "{path}:{line}: line longer than {limit} bytes (not a raw record; stopped reading there)"
    )]
    LineTooLong {
        path: PathBuf,
        line: usize,
        limit: usize,
    },
    #[error("{path}: {what}")]
    NotRegular { path: PathBuf, what: String },
}

/// Parsed lines of one file plus the non-fatal problems met.
#[derive(Debug)]
pub struct Lines<T> {
    pub rows: Vec<T>,
    /// The 1-based line each row came from (same length as `rows`), for messages naming
    /// `file:line`.
    pub line_numbers: Vec<usize>,
    pub warnings: Vec<String>,
    /// Why the file ends before its writer finished it (a zstd stream cut short, a truncated
    /// last line), if it does; the same text is in `warnings`. Ingest makes such a cell
    /// incomplete.
    pub cut_short: Option<String>,
}

/// Parses every line of `bytes` (contents of `path`) as `T`.
pub fn parse_lines<T: DeserializeOwned>(
    path: &Path,
    bytes: &[u8],
) -> Result<Lines<T>, IngestError> {
    parse_reader(path, bytes)
}

/// [`parse_reader_limited`] with [`MAX_LINE_BYTES`].
pub fn parse_reader<T: DeserializeOwned>(
    path: &Path,
    reader: impl BufRead,
) -> Result<Lines<T>, IngestError> {
    parse_reader_limited(path, reader, MAX_LINE_BYTES)
}

/// What [`read_line_limited`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum LineRead {
    /// End of input, nothing read.
    Eof,
    /// A line (with its `\n`, if it had one) is in the buffer.
    Line,
    /// The line exceeds the limit; the buffer holds its first `limit + 1` bytes at most.
    TooLong,
}

/// `read_until(b'\n')` that never puts more than `limit + 1` bytes into `buf`: `limit` bytes
/// of content plus the newline for a line that fits, or the first `limit + 1` content bytes of
/// one that does not ([`LineRead::TooLong`]; the reader is left inside that line).
pub fn read_line_limited(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<LineRead> {
    buf.clear();
    loop {
        let avail = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            return Ok(if buf.is_empty() {
                LineRead::Eof
            } else {
                LineRead::Line
            });
        }
        // Invariant: buf holds at most `limit` content bytes here.
        let nl = avail.iter().position(|&c| c == b'\n');
        let content = nl.unwrap_or(avail.len());
        if buf.len() + content > limit {
            let n = limit + 1 - buf.len();
            buf.extend_from_slice(&avail[..n]);
            reader.consume(n);
            return Ok(LineRead::TooLong);
        }
        match nl {
            Some(i) => {
                buf.extend_from_slice(&avail[..=i]);
                reader.consume(i + 1);
                return Ok(LineRead::Line);
            }
            None => {
                let n = avail.len();
                buf.extend_from_slice(avail);
                reader.consume(n);
            }
        }
    }
}

/// Streams `reader` line by line (one reused buffer of at most `max_line + 1` bytes) and parses
/// each line as `T`, applying the contract's rules (module docs).
pub fn parse_reader_limited<T: DeserializeOwned>(
    path: &Path,
    mut reader: impl BufRead,
    max_line: usize,
) -> Result<Lines<T>, IngestError> {
    let mut rows = Vec::new();
    let mut line_numbers = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    let mut cut_short = None;
    let mut line = Vec::with_capacity((64 * 1024).min(max_line + 1));
    let mut lineno = 0usize;
    loop {
        let got = match read_line_limited(&mut reader, &mut line, max_line) {
            Ok(g) => g,
            // A stream that ends early (a zstd frame cut short: `UnexpectedEof`, even before
            // its first line) keeps what was read; any other read error before the first line
            // is an error.
            Err(e) if lineno > 0 || e.kind() == std::io::ErrorKind::UnexpectedEof => {
                let at = if lineno > 0 {
                    format!("after line {lineno}")
                } else {
                    "before its first line".to_owned()
                };
                let w = format!(
                    "{}: stream ends early {at} ({e}); read what was there",
                    path.display()
                );
                cut_short = Some(w.clone());
                warnings.push(w);
                break;
            }
            Err(source) => {
                return Err(IngestError::Io {
                    path: path.into(),
                    error: source,
                });
            }
        };
        match got {
            LineRead::Eof => break,
            LineRead::TooLong => {
                return Err(IngestError::LineTooLong {
                    path: path.into(),
                    line: lineno + 1,
                    limit: max_line,
                });
            }
            LineRead::Line => {}
        }
        lineno += 1;
        let complete = line.last() == Some(&b'\n');
        match parse_line::<T>(&line) {
            Ok(Some(row)) => {
                rows.push(row);
                line_numbers.push(lineno);
            }
            Ok(None) => {}
            Err(e) if !complete => {
                // No newline after it: the last line, cut off when the writer was killed.
                let w = format!(
                    "{}:{lineno}: truncated last line skipped (the writer was probably killed): {}",
                    path.display(),
                    e.message
                );
                cut_short = Some(w.clone());
                warnings.push(w);
                break;
            }
            Err(e) => {
                return Err(IngestError::Malformed {
                    path: path.into(),
                    line: lineno,
                    field: e.field,
                    message: e.message,
                });
            }
        }
    }
    Ok(Lines {
        rows,
        line_numbers,
        warnings,
        cut_short,
    })
}

/// Why one line did not parse: the field path (`(record)` for the whole line) and serde's
/// message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub field: String,
    pub message: String,
}

/// Parses one line (surrounding ASCII whitespace ignored). `Ok(None)` for a blank line.
pub fn parse_line<T: DeserializeOwned>(line: &[u8]) -> Result<Option<T>, LineError> {
    let trimmed = line.trim_ascii();
    if trimmed.is_empty() {
        return Ok(None);
    }
    // Fast path without field tracking; only a failing line is parsed again to name the field.
    if let Ok(row) = serde_json::from_slice::<T>(trimmed) {
        return Ok(Some(row));
    }
    let de = &mut serde_json::Deserializer::from_slice(trimmed);
    match serde_path_to_error::deserialize::<_, T>(de) {
        Ok(row) => Ok(Some(row)),
        Err(e) => {
            let field = e.path().to_string();
            Err(LineError {
                field: if field == "." {
                    "(record)".into()
                } else {
                    field
                },
                message: e.into_inner().to_string(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use std::io::Read;

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
        assert_eq!(l.cut_short.as_ref(), Some(&l.warnings[0]));
    }

    #[test]
    fn rows_keep_their_line_numbers_and_a_whole_file_is_not_cut_short() {
        let l: Lines<Row> =
            parse_lines(p(), b"\n{\"a\":1,\"b\":null}\n  \n{\"a\":2,\"b\":null}\n").unwrap();
        assert_eq!(l.rows.len(), 2);
        assert_eq!(l.line_numbers, vec![2, 4]);
        assert!(l.cut_short.is_none());
    }

    /// A reader that fails after its data, like a zstd decoder at a stream cut short.
    struct FailsAtEnd<'a>(&'a [u8]);
    impl std::io::Read for FailsAtEnd<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "incomplete frame",
                ));
            }
            let n = self.0.len().min(out.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_stream_that_ends_before_its_first_line_is_cut_short_not_an_error() {
        let r = std::io::BufReader::new(FailsAtEnd(b"{\"a\":1,"));
        let l: Lines<Row> = parse_reader(p(), r).unwrap();
        assert!(l.rows.is_empty());
        let cut = l.cut_short.expect("cut short");
        assert!(
            cut.contains("stream ends early before its first line"),
            "{cut}"
        );
    }

    #[test]
    fn a_stream_that_ends_early_is_cut_short() {
        let r = std::io::BufReader::new(FailsAtEnd(b"{\"a\":1,\"b\":null}\n"));
        let l: Lines<Row> = parse_reader(p(), r).unwrap();
        assert_eq!(l.rows.len(), 1);
        let cut = l.cut_short.expect("cut short");
        assert!(cut.contains("stream ends early after line 1"), "{cut}");
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

    /// A reader that hands out `chunk` bytes per `fill_buf`, so lines straddle reads.
    struct Chunky<'a> {
        data: &'a [u8],
        chunk: usize,
    }
    impl std::io::Read for Chunky<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.chunk.min(self.data.len()).min(out.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }
    impl std::io::BufRead for Chunky<'_> {
        fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
            let n = self.chunk.min(self.data.len());
            Ok(&self.data[..n])
        }
        fn consume(&mut self, n: usize) {
            self.data = &self.data[n..];
        }
    }

    #[test]
    fn line_limit_is_exact_and_bounded_across_reads() {
        // `{"a":1,"b":null}` is 16 bytes: a limit of 16 accepts it (newline not counted),
        // 15 rejects it on line 2, whatever the read size.
        let text = b"{\"a\":0,\"b\":\"\"}\n{\"a\":1,\"b\":null}\n";
        for chunk in [1, 2, 3, 7, 16, 17, 64] {
            let r = Chunky { data: text, chunk };
            let l: Lines<Row> = parse_reader_limited(p(), r, 16).unwrap();
            assert_eq!(l.rows.len(), 2, "chunk {chunk}");
            let r = Chunky { data: text, chunk };
            let e = parse_reader_limited::<Row>(p(), r, 15).unwrap_err();
            assert_eq!(
                e.to_string(),
                "requests_A_r1_i8_o8.jsonl:2: line longer than 15 bytes (not a raw record; \
                 stopped reading there)",
                "chunk {chunk}"
            );
        }
        // The buffer never holds more than limit + 1 bytes of an endless line.
        let endless = std::io::repeat(b'x').take(10 << 20);
        let mut r = std::io::BufReader::with_capacity(1 << 16, endless);
        let mut buf = Vec::new();
        assert_eq!(
            read_line_limited(&mut r, &mut buf, 1000).unwrap(),
            LineRead::TooLong
        );
        assert_eq!(buf.len(), 1001);
    }
}
