//! The one atomic write every output of `ctax` goes through (JSON, Markdown, SVG, HTML,
//! Parquet, manifests): a temp file in the same directory, written, fsync'ed, renamed over the
//! target, and the directory fsync'ed so the rename itself survives a crash. A reader never
//! sees a half-written file, and a crash leaves the old file intact.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` atomically (see the module doc).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// Serialises `value` as pretty JSON (with a trailing newline) and writes it atomically.
pub fn write_json_atomic<T: serde::Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let mut s = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    s.push(b'\n');
    write_atomic(path, &s)
}

/// Atomic write through a writer callback (for encoders that stream into a file, e.g. Parquet).
/// The temp file is removed if `fill` fails.
pub(crate) fn write_atomic_with<E>(
    path: &Path,
    fill: impl FnOnce(&mut File) -> Result<(), E>,
) -> Result<(), E>
where
    E: From<std::io::Error>,
{
    let (dir, tmp) = temp_path(path)?;
    std::fs::create_dir_all(&dir)?;
    let result = (|| {
        let mut f = File::create(&tmp)?;
        fill(&mut f)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return result;
    }
    // The rename is durable only once the directory entry is on disk.
    if let Ok(d) = File::open(&dir) {
        d.sync_all()?;
    }
    Ok(())
}

/// An advisory lock (`flock(2)`) held on an open file; released when dropped (or when the
/// process ends, however it ends).
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

/// Takes the advisory lock of `path` (created, with its directory, if absent) without waiting:
/// `exclusive`, or shared with other shared holders. `Ok(None)`: another open file holds a lock
/// that conflicts (in this process too: `flock` locks belong to the open file).
pub fn try_lock(path: &Path, exclusive: bool) -> std::io::Result<Option<FileLock>> {
    use std::os::fd::AsRawFd;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    let op = if exclusive {
        libc::LOCK_EX
    } else {
        libc::LOCK_SH
    };
    // SAFETY: flock(2) on a descriptor we own, open for the whole call.
    if unsafe { libc::flock(f.as_raw_fd(), op | libc::LOCK_NB) } == 0 {
        return Ok(Some(FileLock { _file: f }));
    }
    match std::io::Error::last_os_error() {
        e if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
        e => Err(e),
    }
}

/// Removes the temp files interrupted atomic writes of `path` left (`.<name>.tmp.<pid>`, the
/// names [`temp_path`] gives; another process's write in progress has its own pid).
pub(crate) fn remove_stale_temps(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let prefix = format!(".{}.tmp.", name.to_string_lossy());
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with(&prefix)
            && n[prefix.len()..].bytes().all(|b| b.is_ascii_digit())
            && e.file_type().is_ok_and(|t| t.is_file())
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The directory of `path` and a hidden temp name beside it.
fn temp_path(path: &Path) -> std::io::Result<(PathBuf, PathBuf)> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{}: no file name to write", path.display()),
        )
    })?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    Ok((dir, tmp))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.json");
        write_atomic(&p, b"one").unwrap();
        write_json_atomic(&p, &serde_json::json!({"a": 1})).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\n  \"a\": 1\n}\n");
        assert_eq!(names(d.path()), ["x.json"]);
    }

    #[test]
    fn a_failing_writer_keeps_the_old_file_and_removes_the_temp() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.parquet");
        write_atomic(&p, b"old").unwrap();
        let r: std::io::Result<()> = write_atomic_with(&p, |f| {
            f.write_all(b"half")?;
            Err(std::io::Error::other("encoder failed"))
        });
        assert_eq!(r.unwrap_err().to_string(), "encoder failed");
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(names(d.path()), ["t.parquet"]);
    }

    #[test]
    fn creates_the_directory_and_rejects_a_path_without_a_name() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a/b/c.txt");
        write_atomic(&p, b"x").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"x");
        assert!(write_atomic(Path::new("/"), b"x").is_err());
    }
}
