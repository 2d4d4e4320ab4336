//! Ingest of a results root whose raw files are not what they claim: FIFOs, devices, sockets,
//! endless lines. Each must be a clear error naming the file, never a hang or an allocation
//! abort (issue 11).

use std::path::{Path, PathBuf};
use std::time::Duration;

fn run_dir(root: &Path) -> PathBuf {
    let run = root.join("20260101-000000_plain_l0");
    std::fs::create_dir_all(&run).unwrap();
    run
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// `ingest::load(root)` on another thread; panics if it has not returned within 20 s.
fn load_within_20s(root: &Path) -> anyhow::Result<connector_tax::ingest::Dataset> {
    let (tx, rx) = std::sync::mpsc::channel();
    let root = root.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(connector_tax::ingest::load(&root));
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("ingest blocked for 20 s")
}

#[test]
fn a_fifo_named_like_a_raw_file_fails_fast_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let p = run_dir(d.path()).join("requests_A_r4_i8_o8.jsonl");
    mkfifo(&p);
    let e = load_within_20s(d.path()).unwrap_err();
    let msg = format!("{e:#}");
    assert!(
        msg.contains(&format!("{}: a FIFO (named pipe)", p.display())),
        "{msg}"
    );
}

#[test]
fn a_fifo_named_config_json_fails_fast_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let run = run_dir(d.path());
    std::fs::write(run.join("requests_A_r4_i8_o8.jsonl"), "").unwrap();
    let p = run.join("config.json");
    mkfifo(&p);
    let e = load_within_20s(d.path()).unwrap_err();
    let msg = format!("{e:#}");
    assert!(
        msg.contains(&p.display().to_string()) && msg.contains("FIFO"),
        "{msg}"
    );
}

#[test]
fn a_symlink_to_dev_zero_is_an_error_not_an_allocation_abort() {
    let d = tempfile::tempdir().unwrap();
    let p = run_dir(d.path()).join("metrics_A_r4_i8_o8.jsonl.zst");
    std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
    let e = load_within_20s(d.path()).unwrap_err();
    let msg = format!("{e:#}");
    assert!(
        msg.contains(&format!("{}: a character device", p.display())),
        "{msg}"
    );
}

#[test]
fn a_70_mib_line_is_an_error_naming_file_and_line() {
    // Sparse: 70 MiB of NUL bytes after one good line, no newline (what /dev/zero would give,
    // but a regular file).
    let d = tempfile::tempdir().unwrap();
    let p = run_dir(d.path()).join("engine_step_A_r4_i8_o8.jsonl");
    std::fs::write(&p, "\n").unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&p)
        .unwrap()
        .set_len(1 + (70 << 20))
        .unwrap();
    let e = load_within_20s(d.path()).unwrap_err();
    let msg = format!("{e:#}");
    assert!(
        msg.contains(&format!(
            "{}:2: line longer than {} bytes",
            p.display(),
            64 << 20
        )),
        "{msg}"
    );
}

/// Columns files (`.cols`, `ctax archive --columns`) that are not what they claim: a JSONL file
/// under that name, a cut file, a header announcing 1 TiB. Each reads as a stream that ends
/// before its first line, as a cut zstd stream does: a warning naming the file and what is
/// wrong, at once and without allocating what the header says, and the cell without records
/// (the rest of the root is read).
#[test]
fn columns_files_that_are_not_what_they_claim_read_as_cut_streams_naming_the_file() {
    let header = |lines: u64, events: u64, raw: u64, sections: [u64; 3]| {
        let mut b = b"CTAXCOL1".to_vec();
        for v in [lines, events, raw].into_iter().chain(sections) {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b
    };
    let huge = header(1, 1, 1 << 40, [0, 0, 0]);
    let cut = {
        let mut b = header(1, 0, 10, [100, 0, 0]);
        b.extend_from_slice(&[0; 40]);
        b
    };
    for (body, want) in [
        (b"{\"events\":[]}\n".to_vec(), "not a columns file"),
        (cut, "do not add up to the file's 96 bytes"),
        (huge, "not plausible"),
    ] {
        let d = tempfile::tempdir().unwrap();
        let p = run_dir(d.path()).join("requests_A_r4_i8_o8.jsonl.cols");
        std::fs::write(&p, body).unwrap();
        let ds = load_within_20s(d.path()).unwrap();
        let w = ds.warnings.join("\n");
        assert!(
            w.contains(&format!(
                "{}: stream ends early before its first line",
                p.display()
            )),
            "{w}"
        );
        assert!(w.contains(want), "{w} (wanted {want})");
        let cell = &ds.runs[0].cells.values().next().unwrap();
        assert!(cell.requests.is_empty());
    }
}
