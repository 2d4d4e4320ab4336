//! The advisory lock of a results root (`.ctax/run.lock`, `flock`, [`crate::fsutil::try_lock`]):
//! `ctax run` holds it shared for its whole sweep (several sweeps may share a root); `ctax
//! rejoin` and `ctax archive`, which rewrite files a sweep may be writing (a live launch's raw
//! records, its manifest row), hold it exclusive. Each is refused while a conflicting holder has
//! it. `.ctax/` is not merged (`ctax merge`) and never rejoined; a skeleton carries an empty
//! copy of the lock file, harmless.

use std::path::Path;

use anyhow::Context;

use crate::fsutil::FileLock;

pub const ROOT_LOCK: &str = ".ctax/run.lock";

/// Who takes the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// `ctax run`: shared. A filesystem that refuses locks (`ENOLCK` on some NFS mounts a Slurm
    /// shard writes to) only costs the guard: the sweep warns and runs, since refusing would
    /// stop measurements for a check that concerns the other commands.
    Sweep,
    /// `ctax rejoin`: exclusive; a filesystem that refuses locks refuses the rejoin.
    Rejoin,
    /// `ctax archive`: exclusive (its `--finish-killed` would seal a live launch as killed, its
    /// compression would cut a raw file a collector is appending to); a filesystem that refuses
    /// locks warns, as the command ran before the lock existed.
    Archive,
}

impl Holder {
    fn exclusive(self) -> bool {
        self != Holder::Sweep
    }

    /// Why the lock was refused: who holds it and what to do.
    fn refused(self, root: &Path) -> anyhow::Error {
        let (others, then) = match self {
            Holder::Sweep => ("a `ctax rejoin` or `ctax archive`", "run once it has ended"),
            Holder::Rejoin => (
                "a `ctax run` (or a `ctax archive`, or another `ctax rejoin`)",
                "rejoin once it has ended; nothing joined",
            ),
            Holder::Archive => (
                "a `ctax run` (or a `ctax rejoin`, or another `ctax archive`)",
                "archive once it has ended; nothing changed",
            ),
        };
        anyhow::anyhow!(
            "{} is in use: {others} holds {ROOT_LOCK}; {then}",
            root.display()
        )
    }
}

/// Takes `root`'s [`ROOT_LOCK`] for `who`, held until dropped; refused while a conflicting
/// holder has it. `None`: the filesystem refused locks and `who` goes on without (a warning
/// says so).
pub fn lock(root: &Path, who: Holder) -> anyhow::Result<Option<FileLock>> {
    let path = root.join(ROOT_LOCK);
    match crate::fsutil::try_lock(&path, who.exclusive()) {
        Ok(Some(lock)) => Ok(Some(lock)),
        Ok(None) => Err(who.refused(root)),
        Err(e) if who == Holder::Rejoin => {
            Err(e).with_context(|| format!("taking the lock {}", path.display()))
        }
        Err(e) => {
            eprintln!(
                "[ctax] warning: could not lock {} ({e}); a conflicting `ctax run`, `ctax \
                 rejoin` or `ctax archive` on this root would not be refused",
                path.display()
            );
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two sweeps share a root; a sweep shuts out a rejoin and an archive, and an archive shuts
    /// out a sweep and a rejoin, each refusal naming the other side; dropping a lock frees it.
    #[test]
    fn sweeps_share_and_the_others_exclude() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let a = lock(root, Holder::Sweep).unwrap();
        let b = lock(root, Holder::Sweep).unwrap();
        assert!(a.is_some() && b.is_some());
        for who in [Holder::Rejoin, Holder::Archive] {
            let e = lock(root, who).unwrap_err().to_string();
            assert!(
                e.contains("is in use: a `ctax run`") && e.contains(ROOT_LOCK),
                "{e}"
            );
        }
        drop((a, b));
        let archiving = lock(root, Holder::Archive).unwrap();
        let e = lock(root, Holder::Sweep).unwrap_err().to_string();
        assert!(
            e.contains("`ctax archive`") && e.ends_with("run once it has ended"),
            "{e}"
        );
        let e = lock(root, Holder::Archive).unwrap_err().to_string();
        assert!(
            e.ends_with("archive once it has ended; nothing changed"),
            "{e}"
        );
        drop(archiving);
        assert!(lock(root, Holder::Rejoin).unwrap().is_some());
    }
}
