//! The tree copier under local snapshots and restores: a directory tree scanned into its
//! directories and files, the tree made again elsewhere with modes and owner, and its files
//! copied, each cloned with a reflink (FICLONE) where the file system shares extents (XFS
//! made with reflink, btrfs), else copied by several threads (`copy_file_range`, a file
//! cut into ranges), hashed as they go when asked, and synced. It knows snapshots only as
//! the manifest's entries it copies. Blocking functions (callers run them on a blocking
//! thread).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use sha2::{Digest as _, Sha256};

use super::manifest::{Digest, DirEntry, FileEntry, CHUNK_BYTES};

const BUF: usize = 4 << 20;

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

pub(crate) fn chown(path: &Path, owner: Option<Owner>) -> Result<()> {
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
pub(crate) enum Work {
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

pub(crate) fn chunks_of(size: u64) -> usize {
    size.div_ceil(CHUNK_BYTES).max(1) as usize
}

/// Per file: the sha256 of each chunk, and of the whole file (where they were computed).
type Hashed = (Vec<Vec<Option<String>>>, Vec<Option<String>>);

/// Runs `work` on several threads; returns per file its chunk hashes and whole hash.
pub(crate) fn run_work(
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

pub(crate) fn sync_path(p: &Path) -> Result<()> {
    File::open(p)
        .and_then(|f| f.sync_all())
        .with_context(|| format!("syncing {}", p.display()))
}
