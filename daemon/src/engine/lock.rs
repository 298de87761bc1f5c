//! One daemon per work directory: `run`, `prepare`, `reset` and `upload` hold an exclusive lock on
//! `workdir/lock` (released by the kernel when the process ends, however it ends).

use std::io::{Read, Seek, Write};
use std::path::Path;

use anyhow::{Context as _, Result};
use nix::fcntl::{Flock, FlockArg};

/// The lock file in a work directory.
pub(crate) const LOCK_FILE: &str = "lock";

/// Held while a daemon works in a work directory.
pub(crate) struct WorkdirLock {
    _file: Flock<std::fs::File>,
}

impl WorkdirLock {
    /// Takes the lock, or says which process holds it.
    pub(crate) fn acquire(workdir: &Path) -> Result<Self> {
        let path = workdir.join(LOCK_FILE);
        let file = crate::fsutil::open_own_file(&path, true, false)
            .with_context(|| format!("taking the work directory's lock {}", path.display()))?;
        let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(f) => f,
            Err((mut file, errno)) => {
                // The kernel's record of who holds the lock; the file's text is only what
                // the last holder wrote (a holder that has just taken the lock has not
                // written yet, and an earlier one's pid may still be there).
                let holder = match holder(workdir) {
                    Some(pid) => pid.to_string(),
                    None => {
                        let mut text = String::new();
                        let _ = file.read_to_string(&mut text);
                        text.trim().to_string()
                    }
                };
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

/// The process holding `workdir`'s lock, from the kernel's table of locks (`/proc/locks`);
/// None when nobody holds it. A pid written in the lock file proves nothing: its process may
/// have ended, or be a daemon working in another directory.
pub(crate) fn holder(workdir: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(workdir.join(LOCK_FILE)).ok()?;
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let dev = meta.dev();
    flock_holder(
        &locks,
        (nix::sys::stat::major(dev), nix::sys::stat::minor(dev)),
        meta.ino(),
    )
}

/// The pid holding a `flock` on the file `(major, minor)`/`inode` in `/proc/locks`'s text
/// (`1: FLOCK  ADVISORY  WRITE 17596 fe:00:10010726 0 EOF`; waiters, marked `->`, hold
/// nothing). Pure.
fn flock_holder(locks: &str, (major, minor): (u64, u64), inode: u64) -> Option<u32> {
    locks.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.get(1) != Some(&"FLOCK") {
            return None;
        }
        let pid: u32 = f.get(4)?.parse().ok()?;
        let mut id = f.get(5)?.split(':');
        let ma = u64::from_str_radix(id.next()?, 16).ok()?;
        let mi = u64::from_str_radix(id.next()?, 16).ok()?;
        let ino: u64 = id.next()?.parse().ok()?;
        ((ma, mi, ino) == (major, minor, inode)).then_some(pid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_is_the_kernels_not_the_files() {
        let locks = "1: FLOCK  ADVISORY  WRITE 17596 fe:00:10010726 0 EOF\n\
                     1: -> FLOCK  ADVISORY  WRITE 17600 fe:00:10010726 0 EOF\n\
                     2: POSIX  ADVISORY  WRITE 11 fe:00:5 0 EOF\n\
                     3: FLOCK  ADVISORY  WRITE 12 103:02:5 0 EOF\n";
        assert_eq!(flock_holder(locks, (254, 0), 10010726), Some(17596));
        assert_eq!(flock_holder(locks, (259, 2), 5), Some(12));
        assert_eq!(flock_holder(locks, (254, 0), 5), None);

        let dir = tempfile::tempdir().expect("tempdir");
        // A pid in the file, nobody holding the lock: no holder.
        std::fs::write(dir.path().join(LOCK_FILE), "1").expect("write");
        assert_eq!(holder(dir.path()), None);
        let lock = WorkdirLock::acquire(dir.path()).expect("lock");
        assert_eq!(holder(dir.path()), Some(std::process::id()));
        drop(lock);
        assert_eq!(holder(dir.path()), None);
    }

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

    #[test]
    fn a_refusal_names_the_holder_not_a_stale_pid_in_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let _held = WorkdirLock::acquire(dir.path()).expect("first");
        // What an earlier holder left, as the file reads before the new holder writes.
        std::fs::write(dir.path().join(LOCK_FILE), "4194303").expect("write");
        let msg = WorkdirLock::acquire(dir.path())
            .err()
            .expect("refused")
            .to_string();
        assert!(
            msg.contains(&format!("(pid {})", std::process::id())) && !msg.contains("4194303"),
            "{msg}"
        );
    }
}
