//! One daemon per work directory: `run`, `prepare` and `reset` hold an exclusive lock on
//! `workdir/lock` (released by the kernel when the process ends, however it ends).

use std::io::{Read, Seek, Write};
use std::path::Path;

use anyhow::{Context as _, Result};
use nix::fcntl::{Flock, FlockArg};

/// The lock file in a work directory.
pub const LOCK_FILE: &str = "lock";

/// Held while a daemon works in a work directory.
pub struct WorkdirLock {
    _file: Flock<std::fs::File>,
}

impl WorkdirLock {
    /// Takes the lock, or says which process holds it.
    pub fn acquire(workdir: &Path) -> Result<Self> {
        let path = workdir.join(LOCK_FILE);
        let file = crate::fsutil::open_own_file(&path, true, false)
            .with_context(|| format!("taking the work directory's lock {}", path.display()))?;
        let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(f) => f,
            Err((mut file, errno)) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                anyhow::bail!(
                    "another pgapplianced{} is working in {} ({errno}): wait for it to end, or stop it (systemctl stop pgapplianced on the appliance)",
                    if holder.is_empty() {
                        String::new()
                    } else {
                        format!(" (pid {holder})")
                    },
                    workdir.display()
                );
            }
        };
        file.set_len(0)?;
        file.rewind()?;
        write!(file, "{}", std::process::id())?;
        Ok(WorkdirLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_naming_the_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = WorkdirLock::acquire(dir.path()).expect("first");
        // flock locks belong to the open file description: a second open in the same
        // process conflicts like another process would.
        let err = WorkdirLock::acquire(dir.path()).err().expect("refused");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        drop(first);
        WorkdirLock::acquire(dir.path()).expect("free again");
    }

    #[test]
    fn a_link_planted_as_the_lock_is_refused_and_its_target_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("precious");
        std::fs::write(&victim, "keep me\n").expect("write");
        let work = dir.path().join("work");
        std::fs::create_dir(&work).expect("mkdir");
        std::os::unix::fs::symlink(&victim, work.join(LOCK_FILE)).expect("symlink");
        let err = format!("{:#}", WorkdirLock::acquire(&work).err().expect("refused"));
        assert!(err.contains("symbolic link"), "{err}");
        assert!(
            err.contains(&work.join(LOCK_FILE).display().to_string()),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "keep me\n");
        // A hard link to another file is refused too.
        std::fs::remove_file(work.join(LOCK_FILE)).expect("rm");
        std::fs::hard_link(&victim, work.join(LOCK_FILE)).expect("link");
        let err = format!("{:#}", WorkdirLock::acquire(&work).err().expect("refused"));
        assert!(err.contains("hard links"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "keep me\n");
    }
}
