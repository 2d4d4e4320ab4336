//! Opening raw JSONL files (plain, zstd, or the archive's columns `.cols`, [`decoded`]) for
//! the line reader of the raw-data contract
//! ([`ctax_schema::jsonl`]: truncated last line → warning; malformed line → error naming file,
//! line and field; over-long line → error naming file and line, bounded memory).
//!
//! Only **regular files** are read. A FIFO, a character or block device (a symlink to
//! `/dev/zero`), a socket or a directory named like a raw file is an error naming the file and
//! what it is, found without blocking: the file is opened with `O_NONBLOCK` and checked with
//! `fstat` on the open descriptor (no window between check and read).
//!
//! **Symlinks**: a symlink whose target is a regular file is read through, with a warning naming
//! the link and its target (so a raw file shared between two run directories is visible);
//! a symlink to anything else is refused as above; a dangling one is an I/O error.

use std::io::{BufReader, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use serde::de::DeserializeOwned;

pub(crate) use ctax_schema::jsonl::{IngestError, Lines, MAX_LINE_BYTES, parse_reader_limited};

/// What a non-regular file is, in words.
fn kind_of(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO (named pipe)"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

fn not_regular(ft: std::fs::FileType) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "{} (after following symlinks), not a regular file: refusing to read it (raw data \
             files must be regular files; a FIFO or device can block or never end)",
            kind_of(ft)
        ),
    )
}

/// Opens `path` read-only if it is (or links to) a regular file; never blocks on a FIFO.
pub(crate) fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    // Cheap check first: sockets cannot be opened at all, and this names what the path is.
    let ft = std::fs::metadata(path)?.file_type();
    if !ft.is_file() {
        return Err(not_regular(ft));
    }
    // O_NONBLOCK: if the path was swapped for a FIFO since, open() still returns at once; the
    // fstat below then refuses it. Reads of a regular file ignore O_NONBLOCK.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let ft = f.metadata()?.file_type();
    if !ft.is_file() {
        return Err(not_regular(ft));
    }
    Ok(f)
}

/// Reads a whole small file (`config.json`, `summary.json`, …) if it is a regular file of at
/// most `limit` bytes.
pub(crate) fn read_regular(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    read_at_most(open_regular(path)?, limit)
}

/// All of `f` if it holds at most `limit` bytes; else an `InvalidData` error ("larger than …;
/// not read") after reading `limit + 1` bytes, never more.
fn read_at_most(f: impl Read, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    f.take(limit + 1).read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes; not read"),
        ));
    }
    Ok(out)
}

/// A stream that ends at once, early: what a damaged columns file reads as.
struct EndsEarly(String);

impl EndsEarly {
    fn error(&self) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::UnexpectedEof, self.0.clone())
    }
}

impl Read for EndsEarly {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        Err(self.error())
    }
}

impl std::io::BufRead for EndsEarly {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        Err(self.error())
    }
    fn consume(&mut self, _: usize) {}
}

/// The bytes the collector wrote, read from `f` (the open file `path`) in whichever stored form
/// its name says: as they are, zstd's decoding of a `.zst`, or the decoding of a columns file
/// `.cols` ([`super::columns::decode`]; read whole, at most 128 MiB, as is what it decodes to).
/// A `.cols` that does not decode reads as a stream that ends before its first line, with the
/// reason (`UnexpectedEof`), as a zstd stream cut short does: ingest keeps what it has, says
/// why, and counts the cell's records as missing, rather than refusing the whole root.
pub(crate) fn decoded(path: &Path, f: std::fs::File) -> std::io::Result<Box<dyn std::io::BufRead>> {
    Ok(match path.extension().and_then(|e| e.to_str()) {
        Some("zst") => Box::new(BufReader::with_capacity(
            1 << 20,
            zstd::stream::read::Decoder::new(f)?,
        )),
        Some("cols") => {
            let raw = match read_at_most(f, super::columns::MAX_RAW) {
                Ok(b) => super::columns::decode(&b),
                // Too large (a regular file's reads fail otherwise): read as damaged.
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => Err(e.into()),
                Err(e) => return Err(e),
            };
            match raw {
                Ok(raw) => Box::new(std::io::Cursor::new(raw)),
                Err(e) => Box::new(EndsEarly(format!("{e:#}"))),
            }
        }
        _ => Box::new(BufReader::with_capacity(1 << 20, f)),
    })
}

/// The whole of what the collector wrote to `path`, in whichever stored form ([`decoded`]); a
/// damaged `.zst` or `.cols` is an error (the stream ends early), never a shorter result.
pub(crate) fn read_decoded(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    decoded(path, open_regular(path)?)?.read_to_end(&mut out)?;
    Ok(out)
}

/// Reads a raw JSONL file (plain, `.zst` or `.cols`), streaming, with the rules above.
pub(crate) fn read_jsonl<T: DeserializeOwned>(path: &Path) -> Result<Lines<T>, IngestError> {
    read_jsonl_limited(path, MAX_LINE_BYTES)
}

/// [`read_jsonl`] with a line-length limit other than [`MAX_LINE_BYTES`].
fn read_jsonl_limited<T: DeserializeOwned>(
    path: &Path,
    max_line: usize,
) -> Result<Lines<T>, IngestError> {
    let io = |error| IngestError::Io {
        path: path.into(),
        error,
    };
    let f = open_regular(path).map_err(io)?;
    let link_note = std::fs::symlink_metadata(path)
        .is_ok_and(|m| m.file_type().is_symlink())
        .then(|| {
            let target = std::fs::read_link(path)
                .map(|t| t.display().to_string())
                .unwrap_or_else(|e| format!("? ({e})"));
            format!(
                "{}: a symbolic link to {target}; read through it",
                path.display()
            )
        });
    let mut lines = parse_reader_limited(path, decoded(path, f).map_err(io)?, max_line)?;
    if let Some(n) = link_note {
        lines.warnings.insert(0, n);
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    /// `ctax cat` prints the same JSONL from each stored form (plain, `.zst`, request columns),
    /// and the line reader reads the same records from each.
    #[test]
    fn every_stored_form_reads_as_the_same_jsonl() {
        let d = tempfile::tempdir().unwrap();
        let raw = b"{\"request_id\":\"a/0\",\"t_send_ns\":1000,\"t_first_token_ns\":5000,\"events\":[[5000,1],[9100,4]]}\n\
{\"request_id\":\"a/1\",\"t_send_ns\":null,\"t_first_token_ns\":null,\"events\":[]}\n\
{\"request_id\":\"a/2\",\"t_send_ns\":2000,\"t_first_token_ns\":2500,\"events\":[[2500,300]]}\n";
        let p = d.path().join("requests_A_r4_i8_o8.jsonl");
        std::fs::write(&p, raw).unwrap();
        let z = d.path().join("requests_A_r4_i8_o8.jsonl.zst");
        std::fs::write(&z, zstd::encode_all(&raw[..], 3).unwrap()).unwrap();
        let c = d.path().join("requests_A_r4_i8_o8.jsonl.cols");
        std::fs::write(&c, ctax_schema::request_columns::encode(raw).unwrap()).unwrap();
        let rows = |f: &Path| read_jsonl::<serde_json::Value>(f).unwrap().rows;
        for f in [&p, &z, &c] {
            let mut out = Vec::new();
            super::super::cat(f, &mut out).unwrap();
            assert_eq!(out, raw, "{}", f.display());
            assert_eq!(rows(f), rows(&p), "{}", f.display());
        }
        assert_eq!(rows(&c).len(), 3);
    }

    /// At most `limit` bytes are read whole; one more is an `InvalidData` error (what
    /// `read_regular` and an over-large `.cols` report).
    #[test]
    fn read_at_most_refuses_one_byte_more() {
        assert_eq!(super::read_at_most(&b"abcd"[..], 4).unwrap(), b"abcd");
        let e = super::read_at_most(&b"abcde"[..], 4).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert_eq!(e.to_string(), "larger than 4 bytes; not read");
    }

    use super::*;
    use serde::Deserialize;
    use std::time::Duration;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Row {
        a: u64,
        b: Option<String>,
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

    /// Runs `f` on another thread and fails (instead of hanging the test run) after 10 s.
    fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the reader blocked for 10 s")
    }

    #[test]
    fn a_fifo_named_like_a_raw_file_is_an_error_not_a_hang() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("requests_A_r4_i8_o8.jsonl");
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let p = path.clone();
        let e = within_10s(move || read_jsonl::<Row>(&p).map(|_| ())).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!("{}: a FIFO (named pipe)", path.display())),
            "{msg}"
        );
        let p = path.clone();
        let e = within_10s(move || read_regular(&p, 1 << 20)).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
    }

    #[test]
    fn a_symlink_to_a_device_is_an_error_naming_the_file() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("requests_A_r4_i8_o8.jsonl");
        std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        let p = path.clone();
        let e = within_10s(move || read_jsonl::<Row>(&p).map(|_| ())).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("{}: a character device", path.display())),
            "{e}"
        );
        // A directory is refused the same way.
        let dir = d.path().join("metrics_A_r4_i8_o8.jsonl");
        std::fs::create_dir(&dir).unwrap();
        let e = read_jsonl::<Row>(&dir).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
    }

    #[test]
    fn a_socket_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("requests_A_r4_i8_o8.jsonl");
        let _l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let e = read_jsonl::<Row>(&path).unwrap_err();
        assert!(e.to_string().contains("a socket"), "{e}");
    }

    #[test]
    fn a_symlink_to_a_regular_file_is_read_with_a_warning() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("elsewhere.jsonl");
        std::fs::write(&target, "{\"a\":1,\"b\":null}\n").unwrap();
        let path = d.path().join("requests_A_r4_i8_o8.jsonl");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let l: Lines<Row> = read_jsonl(&path).unwrap();
        assert_eq!(l.rows.len(), 1);
        assert_eq!(
            l.warnings,
            vec![format!(
                "{}: a symbolic link to {}; read through it",
                path.display(),
                target.display()
            )]
        );
    }

    #[test]
    fn an_endless_line_is_an_error_naming_file_and_line() {
        // A sparse file of NUL bytes with no newline, 1 MiB over a 256 KiB limit (the same path
        // is taken at the real 64 MiB limit; a test with a 70 MiB sparse file is in
        // tests/ingest_hostile.rs).
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("requests_A_r4_i8_o8.jsonl");
        std::fs::write(&path, "{\"a\":1,\"b\":null}\n").unwrap();
        let f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.set_len(17 + (1 << 20)).unwrap();
        let e = read_jsonl_limited::<Row>(&path, 256 << 10).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}:2: line longer than 262144 bytes (not a raw record; stopped reading there)",
                path.display()
            )
        );
        // The same inside a zstd stream.
        let zpath = d.path().join("metrics_A_r4_i8_o8.jsonl.zst");
        let raw = std::fs::read(&path).unwrap();
        std::fs::write(&zpath, zstd::encode_all(&raw[..], 1).unwrap()).unwrap();
        let e = read_jsonl_limited::<Row>(&zpath, 256 << 10).unwrap_err();
        assert!(e.to_string().contains(":2: line longer than"), "{e}");
    }

    #[test]
    fn small_files_are_bounded() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("summary.json");
        std::fs::write(&path, "x".repeat(100)).unwrap();
        assert_eq!(read_regular(&path, 100).unwrap().len(), 100);
        let e = read_regular(&path, 99).unwrap_err();
        assert!(e.to_string().contains("larger than 99 bytes"), "{e}");
    }
}
