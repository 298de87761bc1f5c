//! Local snapshots: a copy of the stopped data directory on the same volume (made by the
//! tree copier, [`super::copy`]: reflinks where the file system shares extents, else
//! several threads), each file's size and sha256 in the manifest; taking one, checking it,
//! restoring it into the data directory with the server's own configuration and log kept,
//! and retiring the directory it replaced. Blocking functions (callers run them on a
//! blocking thread).

use std::fs::File;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::copy::{
    chown, copy_files, make_dirs, recycle_or_renew, scan, sync_dirs, sync_path, CopyOutcome,
    Hashing, Owner,
};
use super::key::SnapshotKey;
use super::manifest::{
    compare, DirEntry, FileEntry, Manifest, MANIFEST_FILE, MANIFEST_SCHEMA_VERSION,
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

/// A snapshot that does not match its manifest.
#[derive(Debug, thiserror::Error)]
#[error("snapshot {id} does not match its manifest: {}", problems.join("; "))]
pub(crate) struct Corrupt {
    pub(crate) id: String,
    pub(crate) problems: Vec<String>,
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
    use super::copy::{chunks_of, run_work, Work};
    use super::manifest::{Digest, CHUNK_BYTES};
    use std::collections::BTreeMap;
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
    use std::collections::BTreeMap;

    use sha2::{Digest as _, Sha256};

    use super::super::copy::*;
    use super::super::manifest::CHUNK_BYTES;
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
