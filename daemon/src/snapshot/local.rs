//! Local snapshots: a copy of the stopped data directory on the same volume, each file
//! cloned with a reflink (FICLONE) where the file system shares extents (XFS made with
//! reflink, btrfs), else copied by several threads; each file's size and sha256 in the
//! manifest. Blocking functions (callers run them on a blocking thread).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use sha2::{Digest as _, Sha256};

use super::key::SnapshotKey;
use super::manifest::{
    compare, Digest, DirEntry, FileEntry, Manifest, CHUNK_BYTES, MANIFEST_FILE,
    MANIFEST_SCHEMA_VERSION,
};

/// Files of the data directory a restore keeps from the directory it replaces: the
/// server's configuration belongs to this machine and this plan, not to the snapshot.
pub(crate) const KEPT_ON_RESTORE: &[&str] = &[
    "postgresql.conf",
    "postgresql.auto.conf",
    "pg_hba.conf",
    "pg_ident.conf",
];

/// Directories and files of the server's own log inside the data directory (PGDG's
/// `log_directory = 'log'` with the logging collector on, as on Rocky 8): a restore moves
/// them over from the directory it replaces, so the run's server log is never swapped for
/// the snapshot's.
pub(crate) const LOGS_KEPT_ON_RESTORE: &[&str] = &["log", "pg_log", "current_logfiles"];

/// Suffix of a snapshot directory still being written (never used).
pub(crate) const PARTIAL: &str = ".partial";

const BUF: usize = 4 << 20;

/// A snapshot that does not match its manifest.
#[derive(Debug, thiserror::Error)]
#[error("snapshot {id} does not match its manifest: {}", problems.join("; "))]
pub(crate) struct Corrupt {
    pub(crate) id: String,
    pub(crate) problems: Vec<String>,
}

/// Who owns the files written (None: whoever runs the daemon).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

impl Owner {
    /// The owner of `path`.
    pub(crate) fn of(path: &Path) -> Result<Owner> {
        let md = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
        Ok(Owner {
            uid: md.uid(),
            gid: md.gid(),
        })
    }
}

#[allow(unsafe_code)]
mod clone_ioctl {
    /// Clones `src` into the empty `dst` (the whole file): FICLONE shares the source's
    /// extents with the destination. The request number and its C type come from the libc
    /// crate for the target (the ioctl encoding and `ioctl`'s request type are per
    /// architecture and C library), not from a number written here.
    pub(crate) fn clone_file(dst: &std::fs::File, src: &std::fs::File) -> nix::Result<()> {
        use std::os::fd::AsRawFd;
        // SAFETY: both descriptors are open files borrowed for the whole call; FICLONE
        // reads its argument as a file descriptor and touches no caller memory.
        let rc = unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONE, src.as_raw_fd()) };
        nix::errno::Errno::result(rc).map(drop)
    }
}

/// What a copy of many files did.
#[derive(Debug, Default)]
pub struct CopyOutcome {
    /// Path → (size, the chunks' sha256 when the bytes were read).
    pub(crate) seen: BTreeMap<String, (u64, Option<Digest>)>,
    /// Path → the whole file's sha256, where it was computed.
    pub(crate) whole: BTreeMap<String, String>,
    /// Path → its chunks' sha256 (files of several chunks).
    pub(crate) chunks: BTreeMap<String, Vec<String>>,
    pub(crate) reflinked: u64,
    pub(crate) copied: u64,
    pub(crate) bytes: u64,
}

/// When a copy hashes what it copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hashing {
    /// Every file's chunks and each file's whole sha256 too (a snapshot being made: the
    /// manifest lists both).
    Manifest,
    /// Every file's chunks (a reflinked one is read once for it), checked against the
    /// manifest's.
    Always,
    /// The files whose bytes pass through the copy anyway.
    WhenCopying,
    /// None: sizes only (a snapshot already checked in full); copies stay in the kernel
    /// (`copy_file_range`).
    Never,
}

/// How many threads copy: the CPUs, at least 2 (a copy waits on the disk), at most 8.
pub(crate) fn copy_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(2, 8)
}

/// Walks a stopped data directory: its directories and files (path, mode, size), sorted.
/// Refuses what a snapshot cannot hold (symlinks: tablespaces, a separate WAL directory;
/// special files) and a directory a server runs on.
pub(crate) fn scan(dir: &Path) -> Result<(Vec<DirEntry>, Vec<FileEntry>)> {
    if dir.join("postmaster.pid").exists() {
        bail!(
            "{} has a postmaster.pid: a server runs on it (or crashed), so it is not snapshotted",
            dir.display()
        );
    }
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    fn walk(
        root: &Path,
        rel: &str,
        dirs: &mut Vec<DirEntry>,
        files: &mut Vec<FileEntry>,
    ) -> Result<()> {
        let here = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(rel)
        };
        let md = std::fs::symlink_metadata(&here)
            .with_context(|| format!("reading {}", here.display()))?;
        dirs.push(DirEntry {
            path: rel.to_string(),
            mode: md.mode() & 0o7777,
        });
        let mut names: Vec<String> = std::fs::read_dir(&here)
            .with_context(|| format!("listing {}", here.display()))?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<std::io::Result<_>>()
            .with_context(|| format!("listing {}", here.display()))?;
        names.sort();
        for name in names {
            let r = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let p = root.join(&r);
            let md = std::fs::symlink_metadata(&p)
                .with_context(|| format!("reading {}", p.display()))?;
            let ft = md.file_type();
            if ft.is_dir() {
                walk(root, &r, dirs, files)?;
            } else if ft.is_file() {
                files.push(FileEntry {
                    path: r,
                    mode: md.mode() & 0o7777,
                    size: md.len(),
                    sha256: String::new(),
                    chunks: Vec::new(),
                });
            } else if ft.is_symlink() {
                bail!(
                    "{} is a symbolic link (a tablespace or a WAL directory elsewhere): a snapshot holds only a data directory without links",
                    p.display()
                );
            } else {
                bail!("{} is neither a file nor a directory", p.display());
            }
        }
        Ok(())
    }
    walk(dir, "", &mut dirs, &mut files)?;
    Ok((dirs, files))
}

fn chown(path: &Path, owner: Option<Owner>) -> Result<()> {
    if let Some(o) = owner {
        nix::unistd::chown(
            path,
            Some(nix::unistd::Uid::from_raw(o.uid)),
            Some(nix::unistd::Gid::from_raw(o.gid)),
        )
        .with_context(|| format!("giving {} to uid {}", path.display(), o.uid))?;
    }
    Ok(())
}

/// Creates the directories of `dirs` under `root` (which must not exist yet).
pub(crate) fn make_dirs(root: &Path, dirs: &[DirEntry], owner: Option<Owner>) -> Result<()> {
    for d in dirs {
        let p = if d.path.is_empty() {
            root.to_path_buf()
        } else {
            root.join(&d.path)
        };
        std::fs::create_dir(&p).with_context(|| format!("creating {}", p.display()))?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(d.mode))
            .with_context(|| format!("setting the mode of {}", p.display()))?;
        chown(&p, owner)?;
    }
    Ok(())
}

/// Makes `root` the target of a copy of `dirs` and `files`: created when it does not exist,
/// else recycled (the directory a restore replaced, kept by [`retire`], or one an
/// interrupted restore left): whatever `dirs` and `files` do not list is removed, the
/// missing directories are made, every directory gets its mode and owner. The files it
/// keeps are only reused inodes: the copy rewrites each whole (see [`open_target`]).
/// Returns how many files were kept for reuse.
pub(crate) fn prepare_target(
    root: &Path,
    dirs: &[DirEntry],
    files: &[FileEntry],
    owner: Option<Owner>,
) -> Result<usize> {
    match std::fs::symlink_metadata(root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            make_dirs(root, dirs, owner)?;
            return Ok(0);
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", root.display())),
        Ok(md) if !md.is_dir() => {
            std::fs::remove_file(root).with_context(|| format!("removing {}", root.display()))?;
            make_dirs(root, dirs, owner)?;
            return Ok(0);
        }
        Ok(_) => {}
    }
    let want_dirs: std::collections::HashSet<&str> = dirs.iter().map(|d| d.path.as_str()).collect();
    let want_files: std::collections::HashSet<&str> =
        files.iter().map(|f| f.path.as_str()).collect();
    let mut kept = 0usize;
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        let here = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(&rel)
        };
        let entries =
            std::fs::read_dir(&here).with_context(|| format!("listing {}", here.display()))?;
        for e in entries {
            let e = e.with_context(|| format!("listing {}", here.display()))?;
            let name = e.file_name().to_string_lossy().into_owned();
            let r = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let p = e.path();
            let md = std::fs::symlink_metadata(&p)
                .with_context(|| format!("reading {}", p.display()))?;
            if md.is_dir() && want_dirs.contains(r.as_str()) {
                stack.push(r);
            } else if md.is_dir() {
                std::fs::remove_dir_all(&p).with_context(|| format!("removing {}", p.display()))?;
            } else if md.is_file() && md.nlink() == 1 && want_files.contains(r.as_str()) {
                kept += 1;
            } else {
                std::fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
            }
        }
    }
    for d in dirs {
        let p = if d.path.is_empty() {
            root.to_path_buf()
        } else {
            root.join(&d.path)
        };
        if !p.is_dir() {
            std::fs::create_dir(&p).with_context(|| format!("creating {}", p.display()))?;
        }
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(d.mode))
            .with_context(|| format!("setting the mode of {}", p.display()))?;
        chown(&p, owner)?;
    }
    Ok(kept)
}

/// [`prepare_target`], and when the directory to reuse cannot be made right (a stray
/// entry that cannot be removed, say), that directory moved aside (and removed as far as
/// it goes) and a new one made.
pub(crate) fn recycle_or_renew(
    root: &Path,
    dirs: &[DirEntry],
    files: &[FileEntry],
    owner: Option<Owner>,
) -> Result<usize> {
    match prepare_target(root, dirs, files, owner) {
        Ok(n) => Ok(n),
        Err(e) => {
            // Moved aside (a rename, which what blocked the clean-up does not block), a new
            // one made, the old one removed as far as it goes.
            let aside = root.with_file_name(format!(
                "{}.unusable-{}",
                root.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                std::process::id()
            ));
            tracing::warn!(target_dir = %root.display(), aside = %aside.display(), error = %format!("{e:#}"), "the directory to reuse could not be made right: it is moved aside and a new one made");
            std::fs::rename(root, &aside).with_context(|| {
                format!("moving {} aside to {}", root.display(), aside.display())
            })?;
            make_dirs(root, dirs, owner)?;
            if let Err(e) = std::fs::remove_dir_all(&aside) {
                tracing::warn!(dir = %aside.display(), error = %e, "could not remove the unusable directory; remove it by hand");
            }
            Ok(0)
        }
    }
}

/// Gives the open file at `path` its `mode` and, when `owner` says, its owner.
pub(crate) fn set_mode_and_owner(
    file: &File,
    path: &Path,
    mode: u32,
    owner: Option<Owner>,
) -> Result<()> {
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", path.display()))?;
    if let Some(o) = owner {
        nix::unistd::fchown(
            file,
            Some(nix::unistd::Uid::from_raw(o.uid)),
            Some(nix::unistd::Gid::from_raw(o.gid)),
        )
        .with_context(|| format!("giving {} to uid {}", path.display(), o.uid))?;
    }
    Ok(())
}

/// Opens `path` to be written whole: the file [`prepare_target`] kept there (its inode
/// reused, its old bytes all overwritten or cut by the caller), else a new one with `mode`.
/// Whatever else is at `path` (a symbolic link, a directory, a FIFO, a file with another
/// name elsewhere) is removed first and never written through; the open does not follow
/// a link put there meanwhile. Returns the file and whether it held bytes already.
pub(crate) fn open_target(path: &Path, mode: u32) -> Result<(File, bool)> {
    match std::fs::symlink_metadata(path) {
        Ok(md) if md.is_file() && md.nlink() == 1 => {}
        Ok(md) if md.is_dir() => std::fs::remove_dir_all(path)
            .with_context(|| format!("removing the directory {}", path.display()))?,
        // Another name shares this inode (writing it would change that one too), or it is
        // no regular file.
        Ok(_) => {
            std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(mode)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("opening or creating {}", path.display()))?;
    let len = still_a_file_of_one_name(&f, path)?;
    Ok((f, len > 0))
}

/// The file just opened at `path` (with O_NOFOLLOW) is a regular file of one name, as the
/// restore left or made it; its length. Anything else means another writer beside the
/// data directory, and the restore stops rather than write through it.
pub(crate) fn still_a_file_of_one_name(f: &File, path: &Path) -> Result<u64> {
    let md = f
        .metadata()
        .with_context(|| format!("reading {}", path.display()))?;
    if !md.is_file() || md.nlink() != 1 {
        bail!(
            "{} changed while it was restored (it is no longer a file of one name): is something else writing beside the data directory?",
            path.display()
        );
    }
    Ok(md.len())
}

/// The files of a copy that streams in (an unpack from the store) made ahead by a helper
/// thread: [`Ahead::help`] makes them from the list's end while the stream takes them
/// from its start ([`Ahead::take`]), so the two seldom wait on one directory; whichever
/// comes to a file first makes it. Making a file (a new inode, its mode and owner) is the
/// slow part of a restore into a new directory on some file systems (docs/performance.md).
pub(crate) struct Ahead<'a> {
    root: &'a Path,
    files: &'a [FileEntry],
    owner: Option<Owner>,
    /// Per file: 0 not made, 1 being made, 2 made.
    state: Vec<std::sync::atomic::AtomicU8>,
    stop: AtomicBool,
}

impl<'a> Ahead<'a> {
    pub(crate) fn new(root: &'a Path, files: &'a [FileEntry], owner: Option<Owner>) -> Ahead<'a> {
        Ahead {
            root,
            files,
            owner,
            state: files
                .iter()
                .map(|_| std::sync::atomic::AtomicU8::new(0))
                .collect(),
            stop: AtomicBool::new(false),
        }
    }

    fn make(&self, idx: usize) -> Result<(File, bool)> {
        let f = &self.files[idx];
        let path = self.root.join(&f.path);
        let (file, had_bytes) = open_target(&path, f.mode)?;
        set_mode_and_owner(&file, &path, f.mode, self.owner)?;
        Ok((file, had_bytes))
    }

    /// The helper thread's work: makes files from the end of the list until it meets one
    /// the stream took or [`Ahead::stop`] is called. An error leaves the file to the stream.
    pub(crate) fn help(&self) {
        for idx in (0..self.files.len()).rev() {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            if self.state[idx]
                .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                return;
            }
            // Even a panic hands the file back: the stream must never wait on it forever.
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.make(idx))) {
                Ok(Ok(_)) => self.state[idx].store(2, Ordering::Release),
                Ok(Err(e)) => {
                    tracing::debug!(error = %format!("{e:#}"), "making a file ahead failed: the stream makes it");
                    self.state[idx].store(0, Ordering::Release);
                    return;
                }
                Err(_) => {
                    tracing::warn!(file = %self.files[idx].path, "making a file ahead panicked: the stream makes it");
                    self.state[idx].store(0, Ordering::Release);
                    return;
                }
            }
        }
    }

    /// Ends [`Ahead::help`] at its next file.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// File `idx` opened to be written whole (made here unless the helper made it), and
    /// whether it held bytes already (a reused file the caller cuts to its new length).
    pub(crate) fn take(&self, idx: usize) -> Result<(File, bool)> {
        loop {
            match self.state[idx].compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    let r = self.make(idx);
                    self.state[idx].store(2, Ordering::Release);
                    return r;
                }
                Err(2) => {
                    let f = &self.files[idx];
                    return open_target(&self.root.join(&f.path), f.mode);
                }
                Err(_) => std::thread::yield_now(),
            }
        }
    }
}

/// fsyncs every directory of `dirs` under `root`, deepest first.
pub(crate) fn sync_dirs(root: &Path, dirs: &[DirEntry]) -> Result<()> {
    for d in dirs.iter().rev() {
        let p = if d.path.is_empty() {
            root.to_path_buf()
        } else {
            root.join(&d.path)
        };
        File::open(&p)
            .and_then(|f| f.sync_all())
            .with_context(|| format!("syncing {}", p.display()))?;
    }
    Ok(())
}

fn is_unsupported(e: nix::Error) -> bool {
    use nix::errno::Errno;
    matches!(
        e,
        Errno::EOPNOTSUPP | Errno::EXDEV | Errno::EINVAL | Errno::ENOTTY
    )
}

/// One piece of work of the copy threads.
#[derive(Debug, Clone, Copy)]
enum Work {
    /// Bytes `[offset, offset + len)` of file `idx` (its chunk `chunk`): copied when `copy`,
    /// hashed when `hash`.
    Range {
        idx: usize,
        chunk: usize,
        offset: u64,
        len: u64,
        copy: bool,
        hash: bool,
    },
    /// The whole source file's sha256, read in order (a file of several chunks, when the
    /// manifest is being made).
    Whole { idx: usize },
}

/// Copies bytes `[offset, offset + len)` inside the kernel; None when the file system
/// cannot (the caller copies through memory).
fn kernel_copy(from: &File, to: &File, offset: u64, len: u64) -> std::io::Result<Option<u64>> {
    let mut done = 0u64;
    while done < len {
        let (mut off_in, mut off_out) = ((offset + done) as i64, (offset + done) as i64);
        match nix::fcntl::copy_file_range(
            from,
            Some(&mut off_in),
            to,
            Some(&mut off_out),
            (len - done) as usize,
        ) {
            Ok(0) => break,
            Ok(n) => done += n as u64,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) if done == 0 && (is_unsupported(e) || e == nix::errno::Errno::ENOSYS) => {
                return Ok(None)
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Some(done))
}

fn hash_range(
    from: &File,
    to: Option<&File>,
    offset: u64,
    len: u64,
    hash: bool,
    buf: &mut [u8],
) -> std::io::Result<(u64, Option<String>)> {
    use std::os::unix::fs::FileExt;
    let mut h = hash.then(Sha256::new);
    let mut done = 0u64;
    while done < len {
        let want = ((len - done) as usize).min(buf.len());
        let n = from.read_at(&mut buf[..want], offset + done)?;
        if n == 0 {
            break;
        }
        if let Some(h) = h.as_mut() {
            h.update(&buf[..n]);
        }
        if let Some(to) = to {
            to.write_all_at(&buf[..n], offset + done)?;
        }
        done += n as u64;
    }
    Ok((done, h.map(|h| format!("{:x}", h.finalize()))))
}

fn chunks_of(size: u64) -> usize {
    size.div_ceil(CHUNK_BYTES).max(1) as usize
}

/// Per file: the sha256 of each chunk, and of the whole file (where they were computed).
type Hashed = (Vec<Vec<Option<String>>>, Vec<Option<String>>);

/// Runs `work` on several threads; returns per file its chunk hashes and whole hash.
fn run_work(
    src_root: &Path,
    dst_root: Option<&Path>,
    files: &[FileEntry],
    sizes: &[u64],
    mut work: Vec<Work>,
) -> Result<Hashed> {
    let chunk_hashes = Mutex::new(
        sizes
            .iter()
            .map(|s| vec![None; chunks_of(*s)])
            .collect::<Vec<_>>(),
    );
    let whole = Mutex::new(vec![None; files.len()]);
    work.reverse();
    let queue = Mutex::new(work);
    let first_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..copy_threads() {
            s.spawn(|| {
                let mut buf = vec![0u8; BUF];
                loop {
                    if first_error.lock().map(|e| e.is_some()).unwrap_or(true) {
                        return;
                    }
                    let Some(w) = queue.lock().ok().and_then(|mut q| q.pop()) else {
                        return;
                    };
                    let r: Result<()> = (|| match w {
                        Work::Range {
                            idx,
                            chunk,
                            offset,
                            len,
                            copy,
                            hash,
                        } => {
                            let f = &files[idx];
                            let src = src_root.join(&f.path);
                            let from = File::open(&src)
                                .with_context(|| format!("opening {}", src.display()))?;
                            let to = match (copy, dst_root) {
                                (true, Some(root)) => {
                                    let dst = root.join(&f.path);
                                    Some(
                                        OpenOptions::new()
                                            .read(hash)
                                            .write(true)
                                            .open(&dst)
                                            .with_context(|| {
                                                format!("opening {}", dst.display())
                                            })?,
                                    )
                                }
                                _ => None,
                            };
                            // Copied inside the kernel where it can; a hashed copy then
                            // reads the destination back: what is hashed is what was
                            // written (and no thread writes through a buffer while holding
                            // the file's lock).
                            let in_kernel = match &to {
                                Some(to) => kernel_copy(&from, to, offset, len)
                                    .with_context(|| format!("copying {}", f.path))?,
                                None => None,
                            };
                            let (n, sha) = match (in_kernel, &to) {
                                (Some(n), Some(to)) if hash => {
                                    let (m, sha) = hash_range(to, None, offset, n, true, &mut buf)
                                        .with_context(|| format!("reading back {}", f.path))?;
                                    (m, sha)
                                }
                                (Some(n), _) => (n, None),
                                (None, _) => {
                                    hash_range(&from, to.as_ref(), offset, len, hash, &mut buf)
                                        .with_context(|| format!("copying {}", f.path))?
                                }
                            };
                            if n != len {
                                bail!(
                                    "{} shrank while it was read ({} bytes short)",
                                    f.path,
                                    len - n
                                );
                            }
                            if let Ok(mut c) = chunk_hashes.lock() {
                                c[idx][chunk] = sha;
                            }
                            Ok(())
                        }
                        Work::Whole { idx } => {
                            let f = &files[idx];
                            let src = src_root.join(&f.path);
                            let from = File::open(&src)
                                .with_context(|| format!("opening {}", src.display()))?;
                            let (_, sha) = hash_range(&from, None, 0, sizes[idx], true, &mut buf)
                                .with_context(|| format!("reading {}", src.display()))?;
                            if let Ok(mut wh) = whole.lock() {
                                wh[idx] = sha;
                            }
                            Ok(())
                        }
                    })();
                    if let Err(e) = r {
                        if let Ok(mut f) = first_error.lock() {
                            f.get_or_insert(e);
                        }
                        return;
                    }
                }
            });
        }
    });
    if let Some(e) = first_error.into_inner().ok().flatten() {
        return Err(e);
    }
    Ok((
        chunk_hashes.into_inner().unwrap_or_default(),
        whole.into_inner().unwrap_or_default(),
    ))
}

/// fsyncs files under `root` on several threads.
pub(crate) fn sync_files(root: &Path, files: &[FileEntry]) -> Result<()> {
    each_on_copy_threads(files.len(), |i| {
        let p = root.join(&files[i].path);
        File::open(&p)
            .and_then(|f| f.sync_all())
            .with_context(|| format!("syncing {}", p.display()))
    })
}

/// Runs `work` for each index below `count` on [`copy_threads`] threads, each taking the
/// next index; stops at the first error, which it returns (a panicking `work` is one).
pub(crate) fn each_on_copy_threads(
    count: usize,
    work: impl Fn(usize) -> Result<()> + Sync,
) -> Result<()> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..copy_threads() {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count || failed.load(Ordering::Relaxed) {
                    return;
                }
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(i)))
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a copy thread panicked")));
                if let Err(e) = r {
                    failed.store(true, Ordering::Relaxed);
                    if let Ok(mut fe) = first_error.lock() {
                        fe.get_or_insert(e);
                    }
                    return;
                }
            });
        }
    });
    match first_error.into_inner().ok().flatten() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Copies `files` from `src_root` to `dst_root` (its directories made, or recycled by
/// [`prepare_target`]): each destination
/// cloned with a reflink where the file system can, else written by several threads in
/// chunks of [`CHUNK_BYTES`], largest first; hashed as `hashing` says; every file fsynced.
pub(crate) fn copy_files(
    src_root: &Path,
    dst_root: &Path,
    files: &[FileEntry],
    owner: Option<Owner>,
    hashing: Hashing,
) -> Result<CopyOutcome> {
    let t0 = std::time::Instant::now();
    // Each destination created (cloned where reflinks work) by several threads; whether
    // the file system clones is learnt from the first file.
    let reflink = AtomicBool::new(true);
    let create = |i: usize| -> Result<(u64, bool)> {
        let f = &files[i];
        let (src, dst) = (src_root.join(&f.path), dst_root.join(&f.path));
        let from = File::open(&src).with_context(|| format!("opening {}", src.display()))?;
        let size = from
            .metadata()
            .with_context(|| format!("reading {}", src.display()))?
            .len();
        let (to, had_bytes) = open_target(&dst, f.mode)?;
        let mut cloned = false;
        if reflink.load(Ordering::Relaxed) {
            if had_bytes {
                to.set_len(0)
                    .with_context(|| format!("emptying {}", dst.display()))?;
            }
            match clone_ioctl::clone_file(&to, &from) {
                Ok(()) => cloned = true,
                Err(e) if is_unsupported(e) => {
                    tracing::debug!(error = %e, "no reflinks here: copying");
                    reflink.store(false, Ordering::Relaxed);
                }
                Err(e) => {
                    return Err(e)
                        .with_context(|| format!("cloning {} to {}", src.display(), dst.display()))
                }
            }
        }
        if !cloned {
            to.set_len(size)
                .with_context(|| format!("sizing {}", dst.display()))?;
        }
        set_mode_and_owner(&to, &dst, f.mode, owner)?;
        Ok((size, cloned))
    };
    let mut made: Vec<Option<(u64, bool)>> = vec![None; files.len()];
    if !files.is_empty() {
        made[0] = Some(create(0)?);
    }
    // The first file alone (it tells whether the file system clones), then the others.
    let results = Mutex::new(Vec::new());
    each_on_copy_threads(files.len().saturating_sub(1), |k| {
        let r = create(k + 1)?;
        if let Ok(mut v) = results.lock() {
            v.push((k + 1, r));
        }
        Ok(())
    })?;
    for (i, r) in results.into_inner().unwrap_or_default() {
        made[i] = Some(r);
    }
    let mut sizes = vec![0u64; files.len()];
    let mut cloned = vec![false; files.len()];
    for (i, m) in made.into_iter().enumerate() {
        let (size, c) =
            m.with_context(|| format!("internal: {} was not created", files[i].path))?;
        sizes[i] = size;
        cloned[i] = c;
    }
    let mut ranges = Vec::new();
    let mut wholes = Vec::new();
    for (idx, size) in sizes.iter().enumerate() {
        let hash = match hashing {
            Hashing::Manifest | Hashing::Always => true,
            Hashing::WhenCopying => !cloned[idx],
            Hashing::Never => false,
        };
        if cloned[idx] && !hash {
            continue;
        }
        let n = chunks_of(*size);
        for chunk in 0..n {
            let offset = chunk as u64 * CHUNK_BYTES;
            ranges.push(Work::Range {
                idx,
                chunk,
                offset,
                len: (*size - offset.min(*size)).min(CHUNK_BYTES),
                copy: !cloned[idx],
                hash,
            });
        }
        if hashing == Hashing::Manifest && n > 1 {
            wholes.push(Work::Whole { idx });
        }
    }
    // The long sequential reads first, then the largest ranges.
    ranges.sort_by_key(|w| match w {
        Work::Range { len, .. } => std::cmp::Reverse(*len),
        Work::Whole { .. } => std::cmp::Reverse(u64::MAX),
    });
    wholes.extend(ranges);
    let created_s = t0.elapsed().as_secs_f64();
    let (chunk_hashes, whole) = run_work(src_root, Some(dst_root), files, &sizes, wholes)?;
    let copied_s = t0.elapsed().as_secs_f64();
    sync_files(dst_root, files)?;
    tracing::debug!(
        files = files.len(),
        created_s,
        copied_s,
        synced_s = t0.elapsed().as_secs_f64(),
        "copy phases"
    );
    let mut out = CopyOutcome::default();
    for (idx, f) in files.iter().enumerate() {
        let hashes: Option<Vec<String>> = chunk_hashes[idx].iter().cloned().collect();
        let digest = hashes.clone().map(Digest::Chunks);
        out.seen.insert(f.path.clone(), (sizes[idx], digest));
        let whole_sha = match (&whole[idx], &hashes) {
            (Some(w), _) => Some(w.clone()),
            (None, Some(h)) if h.len() == 1 => Some(h[0].clone()),
            _ => None,
        };
        if let Some(w) = whole_sha {
            out.whole.insert(f.path.clone(), w);
        }
        if let Some(h) = hashes.filter(|h| h.len() > 1) {
            out.chunks.insert(f.path.clone(), h);
        }
        if cloned[idx] {
            out.reflinked += 1;
        } else {
            out.copied += 1;
        }
        out.bytes += sizes[idx];
    }
    Ok(out)
}

fn sync_path(p: &Path) -> Result<()> {
    File::open(p)
        .and_then(|f| f.sync_all())
        .with_context(|| format!("syncing {}", p.display()))
}

/// The directory of snapshot `id` under `root` (complete ones only have this name).
pub fn snapshot_dir(root: &Path, id: &str) -> PathBuf {
    root.join(id)
}

/// Takes a snapshot of the cleanly stopped data directory `data` into `root/<id>`:
/// written to `root/<id>.partial`, the manifest fsynced last, then renamed. A snapshot with
/// the same id is replaced. Of `pg_wal`'s segments only `redo_wal` (the one holding the
/// shutdown checkpoint) is kept: the others are recycled segments a cleanly stopped
/// server never reads.
pub fn take(
    data: &Path,
    root: &Path,
    key: &SnapshotKey,
    checksums: bool,
    redo_wal: &str,
) -> Result<(Manifest, CopyOutcome)> {
    let id = key.id();
    crate::fsutil::create_dir_all(root)?;
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("restricting {}", root.display()))?;
    let partial = root.join(format!("{id}{PARTIAL}"));
    if partial.exists() {
        std::fs::remove_dir_all(&partial)
            .with_context(|| format!("removing the half-written {}", partial.display()))?;
    }
    let (dirs, files) = scan(data)?;
    if !files.iter().any(|f| f.path == format!("pg_wal/{redo_wal}")) {
        bail!(
            "{} has no pg_wal/{redo_wal}, the segment of its latest checkpoint",
            data.display()
        );
    }
    let mut files: Vec<FileEntry> = files
        .into_iter()
        .filter(|f| match f.path.strip_prefix("pg_wal/") {
            Some(name) if super::key::is_wal_segment(name) => name == redo_wal,
            _ => true,
        })
        .collect();
    let owner = Owner::of(data)?;
    make_dirs(&partial, &dirs, Some(owner))?;
    let outcome = copy_files(data, &partial, &files, Some(owner), Hashing::Manifest)?;
    crate::faults::point("snapshot-copied");
    for f in &mut files {
        let (size, _) = outcome
            .seen
            .get(&f.path)
            .with_context(|| format!("internal: {} was not copied", f.path))?;
        if *size != f.size {
            bail!(
                "{} changed size while it was snapshotted ({} → {size} bytes): is a server running on {}?",
                f.path,
                f.size,
                data.display()
            );
        }
        f.size = *size;
        f.sha256 = outcome
            .whole
            .get(&f.path)
            .cloned()
            .with_context(|| format!("internal: {} was not hashed", f.path))?;
        f.chunks = outcome.chunks.get(&f.path).cloned().unwrap_or_default();
    }
    let manifest = Manifest {
        schema_version: MANIFEST_SCHEMA_VERSION,
        id: id.clone(),
        key: key.clone(),
        created_at: crate::clock::now(),
        checksums,
        dirs: dirs.clone(),
        files,
        archive: None,
        parts: None,
    };
    sync_dirs(&partial, &dirs)?;
    crate::fsutil::write_json(&partial.join(MANIFEST_FILE), &manifest)?;
    let done = snapshot_dir(root, &id);
    if done.exists() {
        let old = root.join(format!("{id}.old"));
        if old.exists() {
            std::fs::remove_dir_all(&old).with_context(|| format!("removing {}", old.display()))?;
        }
        std::fs::rename(&done, &old).with_context(|| format!("moving {} aside", done.display()))?;
        std::fs::remove_dir_all(&old).with_context(|| format!("removing {}", old.display()))?;
    }
    std::fs::rename(&partial, &done)
        .with_context(|| format!("renaming {} to {}", partial.display(), done.display()))?;
    sync_path(root)?;
    Ok((manifest, outcome))
}

/// Reads each file of a snapshot (several threads): sizes always, sha256 when `full`.
#[cfg(test)]
pub(crate) fn verify(dir: &Path, manifest: &Manifest, full: bool) -> Result<(), Corrupt> {
    let corrupt = |problems: Vec<String>| Corrupt {
        id: manifest.id.clone(),
        problems,
    };
    let (_, files) = scan(dir).map_err(|e| corrupt(vec![format!("{e:#}")]))?;
    let files: Vec<FileEntry> = files
        .into_iter()
        .filter(|f| f.path != MANIFEST_FILE)
        .collect();
    let mut seen: BTreeMap<String, (u64, Option<Digest>)> = files
        .iter()
        .map(|f| (f.path.clone(), (f.size, None)))
        .collect();
    if full {
        // Hash what the manifest lists and the snapshot has, chunk by chunk.
        let present: Vec<FileEntry> = manifest
            .files
            .iter()
            .filter(|f| seen.get(&f.path).is_some_and(|(size, _)| *size == f.size))
            .cloned()
            .collect();
        let sizes: Vec<u64> = present.iter().map(|f| f.size).collect();
        let work = sizes
            .iter()
            .enumerate()
            .flat_map(|(idx, size)| {
                (0..chunks_of(*size)).map(move |chunk| {
                    let offset = chunk as u64 * CHUNK_BYTES;
                    Work::Range {
                        idx,
                        chunk,
                        offset,
                        len: (*size - offset.min(*size)).min(CHUNK_BYTES),
                        copy: false,
                        hash: true,
                    }
                })
            })
            .collect();
        let (hashes, _) = run_work(dir, None, &present, &sizes, work)
            .map_err(|e| corrupt(vec![format!("{e:#}")]))?;
        for (f, h) in present.iter().zip(hashes) {
            let h: Option<Vec<String>> = h.into_iter().collect();
            if let Some(e) = seen.get_mut(&f.path) {
                e.1 = h.map(Digest::Chunks);
            }
        }
    }
    let problems = compare(manifest, &seen);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(corrupt(problems))
    }
}

/// The complete snapshots under `root` (a `.partial` one is never listed), with what is
/// wrong with those whose manifest does not read.
pub(crate) fn list(root: &Path) -> Vec<(PathBuf, Result<Manifest>)> {
    let Ok(rd) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<(PathBuf, Result<Manifest>)> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !n.contains('.'))
        })
        .map(|p| {
            let m = Manifest::load(&p);
            (p, m)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// What a restore did.
#[derive(Debug)]
pub(crate) struct Restored {
    pub(crate) copy: CopyOutcome,
    /// Where the replaced data directory is now ([`restoring_dir`]), for [`retire`].
    pub(crate) replaced: Option<PathBuf>,
}

/// The sibling of `data` a restore is written into before it takes `data`'s place.
pub(crate) fn restoring_dir(data: &Path) -> PathBuf {
    let name = data
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "data".into());
    data.with_file_name(format!("{name}.restoring"))
}

/// Puts the snapshot in `dir` back as the data directory `data` (the server stopped): the
/// files are copied (or cloned) into the sibling [`restoring_dir`] (a new directory, or the
/// one the restore before replaced, reused: [`recycle_or_renew`]), checked against the
/// manifest (a hashed copy is read back), given the configuration files of
/// [`KEPT_ON_RESTORE`] from the directory they replace, fsynced, and exchanged with `data`
/// in one rename; the old directory is then where the sibling was, for the caller to
/// [`retire`]. Interrupted anywhere, `data` is either the old directory or the
/// restored one, and the restore can be done again. `hashing`: [`Hashing::Always`] reads
/// a reflinked file too (a snapshot's first use), [`Hashing::WhenCopying`] trusts clones.
pub(crate) fn restore(
    dir: &Path,
    manifest: &Manifest,
    data: &Path,
    owner: Option<Owner>,
    hashing: Hashing,
) -> Result<Restored> {
    let tmp = restoring_dir(data);
    let reused = recycle_or_renew(&tmp, &manifest.dirs, &manifest.files, owner)?;
    tracing::debug!(reused, "restore target prepared");
    let copy = copy_files(dir, &tmp, &manifest.files, owner, hashing);
    let copy = match copy {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            // A file the manifest lists and the snapshot lacks is corruption, not an I/O error.
            let missing: Vec<String> = manifest
                .files
                .iter()
                .filter(|f| !dir.join(&f.path).exists())
                .map(|f| format!("{} is missing", f.path))
                .collect();
            if !missing.is_empty() {
                return Err(Corrupt {
                    id: manifest.id.clone(),
                    problems: missing,
                }
                .into());
            }
            return Err(e);
        }
    };
    let problems = compare(manifest, &copy.seen);
    if !problems.is_empty() {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(Corrupt {
            id: manifest.id.clone(),
            problems,
        }
        .into());
    }
    let replaced = install(&tmp, data, &manifest.dirs)?;
    Ok(Restored { copy, replaced })
}

/// Puts the complete directory `tmp` (the sibling [`restoring_dir`] of `data`) in place of
/// `data`: the configuration files of [`KEPT_ON_RESTORE`] copied over from `data`, its
/// directories fsynced, the two exchanged in one rename (`data` is never missing), the
/// parent fsynced. Returns where the replaced directory now is (kept for the next restore
/// or removed by [`retire`], which may wait until the server runs again).
pub(crate) fn install(tmp: &Path, data: &Path, dirs: &[DirEntry]) -> Result<Option<PathBuf>> {
    for name in KEPT_ON_RESTORE {
        let current = data.join(name);
        if current.exists() {
            let target = tmp.join(name);
            std::fs::copy(&current, &target)
                .with_context(|| format!("keeping {} over the restore", current.display()))?;
            let md = std::fs::metadata(&current)?;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(md.mode() & 0o7777))?;
            chown(
                &target,
                Some(Owner {
                    uid: md.uid(),
                    gid: md.gid(),
                }),
            )?;
            File::open(&target).and_then(|f| f.sync_all())?;
        }
    }
    for name in LOGS_KEPT_ON_RESTORE {
        let current = data.join(name);
        if current.symlink_metadata().is_ok() {
            let target = tmp.join(name);
            if target.is_dir() {
                std::fs::remove_dir_all(&target)
                    .with_context(|| format!("removing the snapshot's {}", target.display()))?;
            } else if target.symlink_metadata().is_ok() {
                std::fs::remove_file(&target)
                    .with_context(|| format!("removing the snapshot's {}", target.display()))?;
            }
            std::fs::rename(&current, &target)
                .with_context(|| format!("keeping {} over the restore", current.display()))?;
        }
    }
    sync_dirs(tmp, dirs)?;
    let replaced = if data.exists() {
        nix::fcntl::renameat2(
            nix::fcntl::AT_FDCWD,
            tmp,
            nix::fcntl::AT_FDCWD,
            data,
            nix::fcntl::RenameFlags::RENAME_EXCHANGE,
        )
        .with_context(|| format!("exchanging {} and {}", tmp.display(), data.display()))?;
        Some(tmp.to_path_buf())
    } else {
        std::fs::rename(tmp, data)
            .with_context(|| format!("renaming {} to {}", tmp.display(), data.display()))?;
        None
    };
    if let Some(parent) = data.parent() {
        sync_path(parent)?;
    }
    Ok(replaced)
}

/// What becomes of the data directory a restore replaced (at [`restoring_dir`]): kept
/// there as the next restore's target when the file system still has `room` bytes free
/// with it (the next restore reuses its files instead of removing them and creating new
/// ones; on ext4 without a journal a new inode costs about a millisecond of CPU after
/// many were removed, docs/performance.md), else removed. Returns whether it was kept.
pub(crate) fn retire(replaced: Option<&Path>, room: u64) -> Result<bool> {
    let Some(p) = replaced.filter(|p| p.exists()) else {
        return Ok(false);
    };
    let free = nix::sys::statvfs::statvfs(p)
        .map(|s| s.blocks_available() * s.fragment_size())
        .with_context(|| format!("reading the free space around {}", p.display()))?;
    if free >= room {
        tracing::debug!(spare = %p.display(), free, room, "the replaced data directory is kept for the next restore");
        return Ok(true);
    }
    tracing::info!(replaced = %p.display(), free, room, "the replaced data directory is removed: the file system has too little room to keep it");
    discard(Some(p))?;
    Ok(false)
}

/// Removes the data directory a restore replaced.
pub(crate) fn discard(replaced: Option<&Path>) -> Result<()> {
    if let Some(p) = replaced.filter(|p| p.exists()) {
        std::fs::remove_dir_all(p)
            .with_context(|| format!("removing the replaced {}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAL: &str = "000000010000000000000002";

    fn key() -> SnapshotKey {
        SnapshotKey {
            postgres_major: 15,
            controldata: BTreeMap::from([("block_size".to_string(), "8192".to_string())]),
            architecture: std::env::consts::ARCH.into(),
            encoding: "UTF8".into(),
            lc_collate: "C".into(),
            lc_ctype: "C".into(),
            dataset: "test".into(),
        }
    }

    /// A data-directory-like tree: a big file, small ones, nested directories, config.
    fn fill(dir: &Path) {
        std::fs::create_dir_all(dir.join("base/5")).expect("mkdir");
        std::fs::create_dir_all(dir.join("pg_wal/archive_status")).expect("mkdir");
        std::fs::write(dir.join("PG_VERSION"), "15\n").expect("write");
        std::fs::write(dir.join("postgresql.auto.conf"), "work_mem = '4MB'\n").expect("write");
        let big: Vec<u8> = (0..9_000_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.join("base/5/16384"), &big).expect("write");
        for i in 0..40 {
            std::fs::write(
                dir.join(format!("base/5/{}", 20000 + i)),
                vec![i as u8; 8192 * i],
            )
            .expect("write");
        }
        // The segment of the latest checkpoint, and a recycled one left out.
        std::fs::write(dir.join(format!("pg_wal/{WAL}")), vec![7u8; 1 << 20]).expect("write");
        std::fs::write(
            dir.join("pg_wal/000000010000000000000003"),
            vec![8u8; 1 << 20],
        )
        .expect("write");
        // A file of three chunks.
        let large: Vec<u8> = (0..(2 * CHUNK_BYTES + 12345))
            .map(|i| (i % 253) as u8)
            .collect();
        std::fs::write(dir.join("base/5/16385"), &large).expect("write");
    }

    fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
        let (_, files) = scan(dir).expect("scan");
        files
            .into_iter()
            .map(|f| {
                let b = std::fs::read(dir.join(&f.path)).expect("read");
                (f.path, b)
            })
            .collect()
    }

    /// Snapshot, verify, corrupt, restore on the file system under `base`; returns how
    /// many files the snapshot reflinked.
    fn round_trip(base: &Path) -> u64 {
        let data = base.join("data");
        fill(&data);
        let root = base.join("snapshots");
        let (m, outcome) = take(&data, &root, &key(), false, WAL).expect("take");
        let snap = snapshot_dir(&root, &m.id);
        assert!(snap.join(MANIFEST_FILE).exists());
        assert!(!root.join(format!("{}{PARTIAL}", m.id)).exists());
        assert_eq!(m.files.len(), 45, "the recycled WAL segment is left out");
        assert!(!m
            .files
            .iter()
            .any(|f| f.path.ends_with("000000010000000000000003")));
        let large = m
            .files
            .iter()
            .find(|f| f.path == "base/5/16385")
            .expect("large");
        assert_eq!(large.chunks.len(), 3);
        assert_eq!(
            large.sha256,
            format!(
                "{:x}",
                Sha256::digest(std::fs::read(data.join("base/5/16385")).expect("read"))
            )
        );
        assert!(m.files.iter().all(|f| f.sha256.len() == 64));
        verify(&snap, &m, true).expect("verify");
        assert_eq!(list(&root).len(), 1);

        // The data changes (a workload writes, the plan's settings change): a restore
        // brings the data back and keeps the configuration.
        let original = tree(&data);
        std::fs::write(data.join("base/5/16384"), b"changed").expect("write");
        std::fs::write(data.join("base/5/99999"), b"new").expect("write");
        std::fs::write(data.join("postgresql.auto.conf"), "work_mem = '64MB'\n").expect("write");
        let r = restore(&snap, &m, &data, None, Hashing::WhenCopying).expect("restore");
        assert_eq!(r.replaced.as_deref(), Some(restoring_dir(&data).as_path()));
        discard(r.replaced.as_deref()).expect("discard");
        let mut back = tree(&data);
        assert_eq!(
            back.remove("postgresql.auto.conf"),
            Some(b"work_mem = '64MB'\n".to_vec())
        );
        let mut want = original.clone();
        want.remove("postgresql.auto.conf");
        want.remove("pg_wal/000000010000000000000003");
        assert_eq!(back, want);
        assert!(!restoring_dir(&data).exists());
        // Again, sizes only, the copy in the kernel.
        std::fs::write(data.join("base/5/16385"), b"changed").expect("write");
        let r = restore(&snap, &m, &data, None, Hashing::Never).expect("restore");
        assert!(r.copy.seen.values().all(|(_, d)| d.is_none()));
        discard(r.replaced.as_deref()).expect("discard");
        let mut back = tree(&data);
        back.remove("postgresql.auto.conf");
        assert_eq!(back, want);

        // A flipped byte and a missing file are found by the manifest; the data directory
        // is left as it was.
        let victim = snap.join("base/5/20003");
        let mut bytes = std::fs::read(&victim).expect("read");
        bytes[100] ^= 1;
        std::fs::write(&victim, &bytes).expect("write");
        let err = verify(&snap, &m, true).expect_err("flipped byte");
        assert!(
            err.problems[0].starts_with("base/5/20003 has sha256"),
            "{err}"
        );
        assert!(
            verify(&snap, &m, false).is_ok(),
            "same size: only the hash sees it"
        );
        let err = restore(&snap, &m, &data, None, Hashing::Always)
            .expect_err("restore of a corrupt snapshot");
        let c = err.downcast_ref::<Corrupt>().expect("Corrupt");
        assert!(c.problems[0].contains("base/5/20003"), "{c}");
        // A flipped byte in the second chunk of a large file is named with its range.
        let fixed = snap.join("base/5/20003");
        bytes[100] ^= 1;
        std::fs::write(&fixed, &bytes).expect("write");
        let big = snap.join("base/5/16385");
        let mut large = std::fs::read(&big).expect("read");
        large[CHUNK_BYTES as usize + 10] ^= 1;
        std::fs::write(&big, &large).expect("write");
        let err = verify(&snap, &m, true).expect_err("flipped byte in a chunk");
        assert_eq!(err.problems.len(), 1, "{err}");
        assert!(
            err.problems[0].starts_with("base/5/16385 has sha256")
                && err.problems[0].contains("in bytes 67108864–134217728"),
            "{err}"
        );
        std::fs::remove_file(snap.join("base/5/20004")).expect("rm");
        let err = restore(&snap, &m, &data, None, Hashing::WhenCopying).expect_err("missing file");
        let c = err.downcast_ref::<Corrupt>().expect("Corrupt");
        assert!(
            c.problems.iter().any(|p| p == "base/5/20004 is missing"),
            "{c}"
        );
        let mut back = tree(&data);
        back.remove("postgresql.auto.conf");
        assert_eq!(
            back, want,
            "a refused restore leaves the data directory alone"
        );
        outcome.reflinked
    }

    #[test]
    fn snapshot_restore_and_corruption_on_this_file_system() {
        let base = tempfile::tempdir_in("/var/tmp").expect("tempdir");
        round_trip(base.path());
    }

    #[test]
    fn a_restore_reuses_the_directory_the_one_before_replaced() {
        let base = tempfile::tempdir_in("/var/tmp").expect("tempdir");
        recycle(base.path());
    }

    /// Restores into the directory the restore before replaced, on the file system under
    /// `base`, after making it differ from the snapshot in every way it can.
    fn recycle(base: &Path) -> (usize, u64) {
        let data = base.join("data");
        fill(&data);
        let root = base.join("snapshots");
        let (m, _) = take(&data, &root, &key(), false, WAL).expect("take");
        let snap = snapshot_dir(&root, &m.id);
        let mut want = tree(&data);
        want.remove("pg_wal/000000010000000000000003");
        let r = restore(&snap, &m, &data, None, Hashing::Never).expect("restore");
        let spare = restoring_dir(&data);
        assert!(retire(r.replaced.as_deref(), 0).expect("retire"), "kept");
        assert!(spare.join("base/5/16384").exists());

        // The spare is the run's old directory, and more: files the run made, a grown
        // file, a missing one, a file linked from elsewhere, symbolic links in place of a
        // listed file and of a listed directory and beside them, a stray directory, the
        // modes of a directory and of a file changed.
        std::fs::write(spare.join("base/5/99999"), b"new table").expect("write");
        std::fs::write(spare.join("base/5/16384"), vec![1u8; 12_000_000]).expect("write");
        std::fs::remove_file(spare.join("base/5/20003")).expect("rm");
        let outside = base.join("outside");
        std::fs::write(&outside, vec![5u8; 8192 * 4]).expect("write");
        std::fs::remove_file(spare.join("base/5/20004")).expect("rm");
        std::fs::hard_link(&outside, spare.join("base/5/20004")).expect("link");
        let victim = base.join("victim");
        std::fs::write(&victim, b"not to be written").expect("write");
        std::fs::remove_file(spare.join("base/5/20005")).expect("rm");
        std::os::unix::fs::symlink(&victim, spare.join("base/5/20005")).expect("symlink");
        let elsewhere = base.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).expect("mkdir");
        std::fs::remove_dir_all(spare.join("pg_wal/archive_status")).expect("rm");
        std::os::unix::fs::symlink(&elsewhere, spare.join("pg_wal/archive_status"))
            .expect("symlink");
        std::os::unix::fs::symlink("/etc", spare.join("pg_tblspc_link")).expect("symlink");
        std::fs::create_dir_all(spare.join("pgsql_tmp/deeper")).expect("mkdir");
        std::fs::set_permissions(spare.join("base/5"), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        std::fs::set_permissions(
            spare.join("base/5/20001"),
            std::fs::Permissions::from_mode(0o600),
        )
        .expect("chmod");
        assert_ne!(
            layout(&spare)["base/5/20001"],
            layout(&snap)["base/5/20001"]
        );
        assert_ne!(layout(&spare)["base/5"], layout(&snap)["base/5"]);
        let ino = std::fs::metadata(spare.join("base/5/16384"))
            .expect("stat")
            .ino();
        std::fs::write(data.join("base/5/16385"), b"changed").expect("write");

        let r = restore(&snap, &m, &data, None, Hashing::Never).expect("restore");
        let mut back = tree(&data);
        back.remove("postgresql.auto.conf");
        let mut w = want.clone();
        w.remove("postgresql.auto.conf");
        assert_eq!(
            back, w,
            "the restore is the snapshot, nothing of the spare's left"
        );
        // Every directory and file, with its kind and mode, is the snapshot's.
        let mut snap_layout = layout(&snap);
        snap_layout.remove(MANIFEST_FILE);
        assert_eq!(layout(&data), snap_layout);
        assert_eq!(
            std::fs::metadata(data.join("base/5/16384"))
                .expect("stat")
                .ino(),
            ino,
            "the spare's file was reused"
        );
        assert_eq!(
            std::fs::read(&outside).expect("read"),
            vec![5u8; 8192 * 4],
            "a file linked from elsewhere is not written through"
        );
        assert_eq!(
            std::fs::read(&victim).expect("read"),
            b"not to be written",
            "a symbolic link is not written through"
        );
        assert_eq!(
            std::fs::read_dir(&elsewhere).expect("ls").count(),
            0,
            "nor a linked directory"
        );
        // Hashed restores reuse it as well.
        assert!(retire(r.replaced.as_deref(), 0).expect("retire"));
        std::fs::write(data.join("base/5/16385"), b"changed").expect("write");
        let r = restore(&snap, &m, &data, None, Hashing::Always).expect("restore");
        let mut back = tree(&data);
        back.remove("postgresql.auto.conf");
        assert_eq!(back, w);
        assert_eq!(layout(&data), snap_layout);
        let reflinked = r.copy.reflinked;
        // No room to keep it: removed.
        assert!(!retire(r.replaced.as_deref(), u64::MAX).expect("retire"));
        assert!(!spare.exists());
        (m.files.len(), reflinked)
    }

    /// Every entry under `dir`: its kind (d, f, l) and mode.
    fn layout(dir: &Path) -> BTreeMap<String, (char, u32)> {
        let mut out = BTreeMap::new();
        let mut stack = vec![String::new()];
        while let Some(rel) = stack.pop() {
            let here = if rel.is_empty() {
                dir.to_path_buf()
            } else {
                dir.join(&rel)
            };
            for e in std::fs::read_dir(&here).expect("ls") {
                let e = e.expect("entry");
                let name = e.file_name().to_string_lossy().into_owned();
                let r = if rel.is_empty() {
                    name
                } else {
                    format!("{rel}/{name}")
                };
                let md = std::fs::symlink_metadata(e.path()).expect("stat");
                let kind = if md.is_dir() {
                    stack.push(r.clone());
                    'd'
                } else if md.is_symlink() {
                    'l'
                } else {
                    'f'
                };
                out.insert(r, (kind, md.mode() & 0o7777));
            }
        }
        out
    }

    #[test]
    fn a_half_written_snapshot_is_never_listed_and_is_replaced() {
        let base = tempfile::tempdir().expect("tempdir");
        let data = base.path().join("data");
        fill(&data);
        let root = base.path().join("snapshots");
        let id = key().id();
        std::fs::create_dir_all(root.join(format!("{id}{PARTIAL}/base"))).expect("mkdir");
        assert!(list(&root).is_empty());
        take(&data, &root, &key(), false, WAL).expect("take");
        assert_eq!(list(&root).len(), 1);
        assert!(!root.join(format!("{id}{PARTIAL}")).exists());
        std::fs::write(data.join("postmaster.pid"), "1\n").expect("write");
        let err = take(&data, &root, &key(), false, WAL).expect_err("running server");
        assert!(err.to_string().contains("postmaster.pid"), "{err}");
    }

    /// The reflink path, on an XFS file system made with reflink=1 in a loop file (needs
    /// root, mkfs.xfs and a free loop device; where one cannot be made the test says so
    /// and checks nothing).
    #[test]
    fn snapshot_restore_with_reflinks_on_xfs() {
        let Some(xfs) = XfsLoop::make() else { return };
        let reflinked = round_trip(&xfs.mount);
        assert!(
            reflinked >= 44,
            "every file of the snapshot is a reflink: {reflinked}"
        );
        // Cloned over the files of the directory a restore replaced.
        let again = xfs.mount.join("again");
        std::fs::create_dir(&again).expect("mkdir");
        let (files, reflinked) = recycle(&again);
        assert_eq!(reflinked, files as u64, "every reused file is a clone");
    }

    struct XfsLoop {
        dir: tempfile::TempDir,
        mount: PathBuf,
        device: String,
    }

    impl XfsLoop {
        fn make() -> Option<XfsLoop> {
            use std::process::Command;
            let skip = |why: &str| {
                eprintln!("reflink test not run: {why}");
                None
            };
            if !crate::sys::is_root() {
                return skip("not root");
            }
            let dir = tempfile::tempdir_in("/var/tmp").ok()?;
            let img = dir.path().join("xfs.img");
            File::create(&img).ok()?.set_len(1 << 30).ok()?;
            let out = Command::new("losetup")
                .args(["-f", "--show"])
                .arg(&img)
                .output()
                .ok()?;
            if !out.status.success() {
                return skip("no free loop device");
            }
            let device = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let mount = dir.path().join("mnt");
            std::fs::create_dir(&mount).ok()?;
            let this = XfsLoop { dir, mount, device };
            let ok = Command::new("mkfs.xfs")
                .args(["-q", "-m", "reflink=1", &this.device])
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                return skip("mkfs.xfs -m reflink=1 failed or is not installed");
            }
            let ok = Command::new("mount")
                .arg(&this.device)
                .arg(&this.mount)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                return skip("mount of the XFS loop file failed");
            }
            Some(this)
        }
    }

    impl Drop for XfsLoop {
        fn drop(&mut self) {
            use std::process::Command;
            let _ = Command::new("umount").arg(&self.mount).status();
            let _ = Command::new("losetup").args(["-d", &self.device]).status();
            let _ = &self.dir;
        }
    }

    #[test]
    fn a_restore_keeps_the_run_s_server_log_not_the_snapshot_s() {
        let root = tempfile::tempdir().expect("tmp");
        let (tmp, data) = (root.path().join("restoring"), root.path().join("data"));
        for (dir, log) in [(&tmp, "snapshot.log"), (&data, "run.log")] {
            std::fs::create_dir_all(dir.join("log")).expect("mkdir");
            std::fs::write(dir.join("log").join(log), log).expect("write");
            std::fs::write(dir.join("PG_VERSION"), "15\n").expect("write");
        }
        std::fs::write(data.join("current_logfiles"), "stderr log/run.log\n").expect("write");
        install(&tmp, &data, &[]).expect("install");
        assert!(data.join("log/run.log").exists(), "the run's log stays");
        assert!(
            !data.join("log/snapshot.log").exists(),
            "the snapshot's log is not put back"
        );
        assert_eq!(
            std::fs::read_to_string(data.join("current_logfiles")).expect("read"),
            "stderr log/run.log\n"
        );
    }
}
