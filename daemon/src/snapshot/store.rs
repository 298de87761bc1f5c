//! Snapshots in the object store: `snapshots/<id>/part-NNNNN.zst` (the snapshot's bytes in
//! parts compressed independently with zstd: a chunk of a large file, or small files
//! together, [`manifest::split`](super::manifest::split)) and `snapshots/<id>/manifest.json`
//! (schema 2: the manifest with each part's pieces, size and sha256), written last: a
//! snapshot without its manifest in the store is not there. Parts are compressed and
//! uploaded by several threads, each read back; the journal keeps which parts are done so a
//! restart resumes the upload. A download fetches, checks, decompresses and writes parts on
//! as many threads ([`transfer_threads`]); a part that arrives short, broken or different
//! from its sha256 is fetched again alone. Memory: each thread holds one compressed part
//! (at most [`PART_BYTES`] of data, compressed) and a 1 MiB buffer.
//!
//! Schema 1 snapshots (`data.tar.zst`, one tar stream of all the files in manifest order)
//! are still read: streamed, decompressed and unpacked by one thread through a bounded
//! channel.

use std::collections::BTreeMap;
use std::io::{Read, Seek as _, Write as _};
use std::os::unix::fs::{FileExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::copy::{self, Owner};
use super::key::SnapshotKey;
use super::local::Corrupt;
use super::manifest::{
    compare, piece_sha256, split, Digest, FileEntry, Manifest, Part, Parts, Piece, MANIFEST_FILE,
    MANIFEST_SCHEMA_VERSION, PART_BYTES,
};
use crate::upload::Store;

/// Where snapshots live under the store's prefix.
pub(crate) const STORE_DIR: &str = "snapshots";
/// The one archive object of a schema 1 snapshot.
#[cfg(test)]
pub(crate) const ARCHIVE_OBJECT: &str = "data.tar.zst";
/// zstd level of the parts (docs/performance.md: measured against levels 1 and 9 and
/// gzip on a pgbench data directory).
pub(crate) const ZSTD_LEVEL: i32 = 3;
/// How often a part is fetched before the download gives up on it.
pub(crate) const FETCH_ATTEMPTS: usize = 3;
/// The most threads a transfer uses, whatever the machine has.
pub(crate) const MAX_TRANSFER_THREADS: usize = 64;

/// A snapshot's upload in progress, as the journal keeps it: the parts uploaded and read
/// back (part number → sha256 of the compressed part). A resumed upload compresses every
/// part again (the same bytes: one zstd frame at a fixed level) and sends only the parts
/// whose sha256 is not here. `upload_id` was the multipart upload of a schema 1 archive;
/// an entry with one is from an older daemon and not resumed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UploadProgress {
    pub(crate) id: String,
    pub(crate) upload_id: String,
    /// [`PART_BYTES`] when the upload began.
    pub(crate) part_size: usize,
    pub(crate) parts: BTreeMap<usize, String>,
}

/// How many threads a transfer (upload or download) uses: the CPUs, at most
/// [`MAX_TRANSFER_THREADS`].
pub(crate) fn transfer_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, MAX_TRANSFER_THREADS)
}

fn object(store: &Store, id: &str, name: &str) -> object_store::path::Path {
    store.path(&[STORE_DIR, id, name])
}

/// The object name of part `i`.
pub(crate) fn part_object(i: usize) -> String {
    format!("part-{i:05}.zst")
}

fn hex_sha256(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// The pieces' bytes from the snapshot in `dir`, one after the other, as one zstd frame:
/// the same bytes every time for the same snapshot.
pub(crate) fn compress_part(dir: &Path, pieces: &[Piece], level: i32) -> Result<Vec<u8>> {
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), level).context("starting zstd")?;
    let total: u64 = pieces.iter().map(|p| p.len).sum();
    enc.set_pledged_src_size(Some(total))
        .context("starting zstd")?;
    for p in pieces {
        let path = dir.join(&p.path);
        let mut f =
            std::fs::File::open(&path).with_context(|| format!("reading {}", path.display()))?;
        f.seek(std::io::SeekFrom::Start(p.offset))
            .with_context(|| format!("reading {}", path.display()))?;
        let n = std::io::copy(&mut f.take(p.len), &mut enc)
            .with_context(|| format!("compressing {}", path.display()))?;
        if n != p.len {
            bail!(
                "{} has {n} bytes from offset {}, the manifest {}: the snapshot changed",
                path.display(),
                p.offset,
                p.len
            );
        }
    }
    enc.finish().context("finishing zstd")
}

/// Compresses part `i` and uploads it unless `done` (the journal's sha256 of it) says the
/// store has these bytes; what is sent is read back. Returns the part and whether it was sent.
async fn upload_part(
    store: &Store,
    id: &str,
    dir: &Path,
    i: usize,
    pieces: Vec<Piece>,
    done: Option<String>,
) -> Result<(Part, bool)> {
    let (d, p) = (dir.to_path_buf(), pieces.clone());
    let (bytes, sha256) = tokio::task::spawn_blocking(move || {
        compress_part(&d, &p, ZSTD_LEVEL).map(|b| {
            let sha = hex_sha256(&b);
            (b, sha)
        })
    })
    .await
    .map_err(|e| anyhow!("compressing thread: {e}"))??;
    let name = part_object(i);
    let path = object(store, id, &name);
    let size = bytes.len() as u64;
    let there = match done.as_deref() == Some(sha256.as_str()) {
        // Journaled as sent and read back: still there with its size?
        true => store
            .objects
            .head(&path)
            .await
            .is_ok_and(|m| m.size == size),
        false => false,
    };
    if !there {
        store
            .objects
            .put(&path, PutPayload::from(bytes))
            .await
            .with_context(|| format!("uploading {path}"))?;
        let (got_size, got_sha) = read_back(store, &path).await?;
        if (got_size, got_sha.as_str()) != (size, sha256.as_str()) {
            bail!(
                "{path} read back as {got_size} bytes sha256 {got_sha}, uploaded {size} bytes sha256 {sha256}"
            );
        }
    }
    Ok((
        Part {
            object: name,
            pieces,
            size,
            sha256,
        },
        !there,
    ))
}

/// Uploads the local snapshot in `dir` unless the store has it already: its parts
/// compressed and uploaded by `threads` at once, each read back, then the manifest.
/// `journal` is called with the progress after each part (None when the upload is over).
/// Returns the store's manifest (with the parts).
pub async fn upload(
    store: &Store,
    dir: &Path,
    manifest: &Manifest,
    resume: Option<UploadProgress>,
    threads: usize,
    journal: &mut dyn FnMut(Option<&UploadProgress>) -> Result<()>,
) -> Result<Manifest> {
    let id = manifest.id.clone();
    if let Some(there) = read_manifest(store, &id).await? {
        if there.is_stored() && there.files == manifest.files {
            tracing::info!(snapshot = %id, "the store has this snapshot already");
            journal(None)?;
            return Ok(there);
        }
    }
    let plan = split(&manifest.files, PART_BYTES);
    let total = plan.len();
    let mut progress = match resume
        .filter(|p| p.id == id && p.part_size as u64 == PART_BYTES && p.upload_id.is_empty())
    {
        Some(p) => {
            tracing::info!(snapshot = %id, parts_done = p.parts.len(), parts = total, "resuming the snapshot's upload");
            p
        }
        None => UploadProgress {
            id: id.clone(),
            upload_id: String::new(),
            part_size: PART_BYTES as usize,
            parts: BTreeMap::new(),
        },
    };
    journal(Some(&progress))?;
    let done = progress.parts.clone();
    let mut list: Vec<Option<Part>> = vec![None; total];
    {
        let id = id.as_str();
        let mut sent = futures::stream::iter(plan.into_iter().enumerate())
            .map(|(i, pieces)| {
                let done = done.get(&i).cloned();
                async move {
                    upload_part(store, id, dir, i, pieces, done)
                        .await
                        .map(|r| (i, r))
                }
            })
            .buffer_unordered(threads.max(1));
        let mut finished = 0usize;
        while let Some(r) = sent.next().await {
            let (i, (part, was_sent)) = r?;
            progress.parts.insert(i, part.sha256.clone());
            journal(Some(&progress))?;
            finished += 1;
            if was_sent {
                crate::faults::point("snapshot-upload-part-journaled");
            }
            crate::notify::status(&format!("snapshot upload: part {finished} of {total}"));
            list[i] = Some(part);
        }
    }
    let list: Vec<Part> = list
        .into_iter()
        .enumerate()
        .map(|(i, p)| p.with_context(|| format!("internal: part {i} was not uploaded")))
        .collect::<Result<_>>()?;
    let mut stored = manifest.clone();
    stored.schema_version = MANIFEST_SCHEMA_VERSION;
    stored.archive = None;
    stored.parts = Some(Parts {
        compression: format!("zstd-{ZSTD_LEVEL}"),
        part_bytes: PART_BYTES,
        list,
    });
    let bytes = serde_json::to_vec_pretty(&stored)?;
    // What readers get must parse: checked before it is published.
    Manifest::parse(&String::from_utf8_lossy(&bytes), "about to be uploaded")?;
    let mpath = object(store, &id, MANIFEST_FILE);
    store
        .objects
        .put(&mpath, PutPayload::from(bytes.clone()))
        .await
        .with_context(|| format!("uploading {mpath}"))?;
    let back = store
        .objects
        .get(&mpath)
        .await
        .with_context(|| format!("reading back {mpath}"))?
        .bytes()
        .await
        .with_context(|| format!("reading back {mpath}"))?;
    if back.as_ref() != bytes.as_slice() {
        bail!("{mpath} read back different from what was uploaded");
    }
    journal(None)?;
    Ok(stored)
}

async fn read_back(store: &Store, path: &object_store::path::Path) -> Result<(u64, String)> {
    let mut stream = store
        .objects
        .get(path)
        .await
        .with_context(|| format!("reading back {path}"))?
        .into_stream();
    let mut h = Sha256::new();
    let mut size = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.with_context(|| format!("reading back {path}"))?;
        size += chunk.len() as u64;
        h.update(&chunk);
    }
    Ok((size, format!("{:x}", h.finalize())))
}

/// The store's manifest of snapshot `id`, if it has one.
pub(crate) async fn read_manifest(store: &Store, id: &str) -> Result<Option<Manifest>> {
    let path = object(store, id, MANIFEST_FILE);
    let got = match store.objects.get(&path).await {
        Ok(g) => g,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {path}")),
    };
    let bytes = got
        .bytes()
        .await
        .with_context(|| format!("reading {path}"))?;
    let text = String::from_utf8_lossy(&bytes);
    Manifest::parse(&text, path.as_ref()).map(Some)
}

/// The store's snapshot with `key`, or None, logging how each snapshot of the store that
/// is not it differs from `key`.
pub(crate) async fn find(store: &Store, key: &SnapshotKey) -> Result<Option<Manifest>> {
    let id = key.id();
    if let Some(m) = read_manifest(store, &id).await? {
        if m.is_stored() {
            return Ok(Some(m));
        }
    }
    let listed = store
        .objects
        .list_with_delimiter(Some(&store.path(&[STORE_DIR])))
        .await
        .with_context(|| format!("listing {}", store.path(&[STORE_DIR])))?;
    for prefix in listed.common_prefixes {
        let Some(other) = prefix.filename().map(str::to_string) else {
            continue;
        };
        if other == id {
            continue;
        }
        match read_manifest(store, &other).await {
            Ok(Some(m)) => tracing::info!(
                snapshot = %other,
                differences = %key.differences(&m.key).join("; "),
                "a snapshot in the store with another key is not used"
            ),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(snapshot = %other, error = %format!("{e:#}"), "unreadable snapshot manifest in the store")
            }
        }
    }
    Ok(None)
}

/// Reads what the download sends, hashing the compressed bytes.
struct ChannelReader {
    rx: tokio::sync::mpsc::Receiver<bytes::Bytes>,
    cur: bytes::Bytes,
    hasher: Sha256,
    size: u64,
}

impl Read for ChannelReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.cur.is_empty() {
            match self.rx.blocking_recv() {
                Some(b) => {
                    self.hasher.update(&b);
                    self.size += b.len() as u64;
                    self.cur = b;
                }
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.cur.len());
        out[..n].copy_from_slice(&self.cur[..n]);
        self.cur = self.cur.slice(n..);
        Ok(n)
    }
}

/// Unpacks the archive stream into `dest` (made, or recycled by [`copy::prepare_target`]), each file checked
/// against the manifest; returns the compressed size and sha256.
fn unpack(
    reader: ChannelReader,
    manifest: &Manifest,
    dest: &Path,
    owner: Option<Owner>,
) -> Result<(u64, String)> {
    copy::recycle_or_renew(dest, &manifest.dirs, &manifest.files, owner)?;
    let index: std::collections::HashMap<&str, usize> = manifest
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.path.as_str(), i))
        .collect();
    let ahead = copy::Ahead::new(dest, &manifest.files, owner);
    let mut seen: BTreeMap<String, (u64, Option<Digest>)> = BTreeMap::new();
    let dec = zstd::stream::read::Decoder::new(reader).context("starting zstd")?;
    let mut archive = tar::Archive::new(dec);
    let streamed: Result<()> = std::thread::scope(|s| {
        s.spawn(|| ahead.help());
        let r = unpack_entries(&mut archive, &index, &ahead, dest, &mut seen);
        ahead.stop();
        r
    });
    streamed?;
    // Whatever follows the tar's end (zstd's frame end) is read so the hash covers it all.
    let mut rest = archive.into_inner();
    std::io::copy(&mut rest, &mut std::io::sink()).context("reading the archive's end")?;
    let mut reader = rest.finish().into_inner();
    while let Some(b) = reader.rx.blocking_recv() {
        reader.hasher.update(&b);
        reader.size += b.len() as u64;
    }
    let problems = compare(manifest, &seen);
    if !problems.is_empty() {
        return Err(Corrupt {
            id: manifest.id.clone(),
            problems,
        }
        .into());
    }
    copy::sync_files(dest, &manifest.files)?;
    copy::sync_dirs(dest, &manifest.dirs)?;
    Ok((reader.size, format!("{:x}", reader.hasher.finalize())))
}

/// The archive's files written through `ahead`, each hashed into `seen`.
fn unpack_entries<R: Read>(
    archive: &mut tar::Archive<R>,
    index: &std::collections::HashMap<&str, usize>,
    ahead: &copy::Ahead<'_>,
    dest: &Path,
    seen: &mut BTreeMap<String, (u64, Option<Digest>)>,
) -> Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    let mut entries = archive.entries().context("reading the archive")?;
    for entry in &mut entries {
        let mut entry = entry.context("reading the archive")?;
        let path = entry
            .path()
            .context("an archive path")?
            .to_string_lossy()
            .into_owned();
        match entry.header().entry_type() {
            tar::EntryType::Directory => continue,
            tar::EntryType::Regular => {}
            other => bail!("the archive holds {path} of type {other:?}, not a file"),
        }
        let Some(&idx) = index.get(path.as_str()) else {
            bail!("the archive holds {path}, which the manifest does not list");
        };
        if seen.contains_key(&path) {
            bail!("the archive holds {path} twice");
        }
        let target = dest.join(&path);
        let (mut out, had_bytes) = ahead.take(idx)?;
        let mut h = Sha256::new();
        let mut size = 0u64;
        loop {
            let n = entry
                .read(&mut buf)
                .with_context(|| format!("reading {path} from the archive"))?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
            out.write_all(&buf[..n])
                .with_context(|| format!("writing {}", target.display()))?;
            size += n as u64;
        }
        if had_bytes {
            // A reused file: whatever lay past the new end goes.
            out.set_len(size)
                .with_context(|| format!("cutting {} to {size} bytes", target.display()))?;
        }
        // Written back by the kernel meanwhile; fsynced together at the end.
        seen.insert(
            path,
            (size, Some(Digest::Whole(format!("{:x}", h.finalize())))),
        );
    }
    Ok(())
}

/// What a download did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fetched {
    /// Objects fetched whole and written (1 for a schema 1 archive).
    pub parts: usize,
    /// Each fetch that was done again: the part's object and why.
    pub refetched: Vec<(String, String)>,
}

/// Downloads the store's snapshot into `dest` (made, or recycled by
/// [`copy::prepare_target`]): a schema 2 snapshot's parts on `threads` threads at once
/// (fetched, checked against their sha256, fetched again alone when they arrive wrong,
/// decompressed and written at their place, each piece hashed against the manifest; the
/// files made as the parts reach them and ahead of them by a helper thread, the file system
/// synced at the end), a schema 1 snapshot's archive streamed by one (every file fsynced).
/// On error `dest` is removed.
pub async fn download_into(
    store: &Store,
    manifest: &Manifest,
    dest: &Path,
    owner: Option<Owner>,
    threads: usize,
) -> Result<Fetched> {
    let r = match &manifest.parts {
        Some(parts) => download_parts(store, manifest, parts, dest, owner, threads).await,
        None => download_stream(store, manifest, dest, owner)
            .await
            .map(|()| Fetched {
                parts: 1,
                refetched: Vec::new(),
            }),
    };
    if r.is_err() {
        let _ = std::fs::remove_dir_all(dest);
    }
    r
}

/// The files a download writes into: each made once, by the first part that reaches it or
/// by the helper thread that makes them from the end of the list ([`Targets::help`]).
struct Targets {
    root: PathBuf,
    files: Vec<FileEntry>,
    index: std::collections::HashMap<String, usize>,
    owner: Option<Owner>,
    made: Vec<Mutex<bool>>,
    stop: AtomicBool,
}

impl Targets {
    fn new(root: &Path, files: &[FileEntry], owner: Option<Owner>) -> Targets {
        Targets {
            root: root.to_path_buf(),
            files: files.to_vec(),
            index: files
                .iter()
                .enumerate()
                .map(|(i, f)| (f.path.clone(), i))
                .collect(),
            owner,
            made: files.iter().map(|_| Mutex::new(false)).collect(),
            stop: AtomicBool::new(false),
        }
    }

    /// Makes file `idx` (a reused one emptied, then sized): [`copy::open_target`].
    fn make(&self, idx: usize) -> Result<std::fs::File> {
        let f = &self.files[idx];
        let path = self.root.join(&f.path);
        let (file, had_bytes) = copy::open_target(&path, f.mode)?;
        copy::set_mode_and_owner(&file, &path, f.mode, self.owner)?;
        if had_bytes {
            // A reused file's blocks go before it is written: on XFS with reflinks they are
            // often the clones a local restore made, and writing over a shared extent is a
            // copy-on-write of every block (measured in docs/performance.md); the inode is
            // still reused, which is what a new directory pays for.
            file.set_len(0)
                .with_context(|| format!("emptying {}", path.display()))?;
        }
        if f.size > 0 {
            file.set_len(f.size)
                .with_context(|| format!("sizing {} to {} bytes", path.display(), f.size))?;
        }
        Ok(file)
    }

    /// File `idx` opened to be written at any offset, made first unless it was.
    fn open(&self, idx: usize) -> Result<std::fs::File> {
        let mut made = self.made[idx].lock().unwrap_or_else(|e| e.into_inner());
        if !*made {
            let file = self.make(idx)?;
            *made = true;
            return Ok(file);
        }
        drop(made);
        let path = self.root.join(&self.files[idx].path);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        super::copy::still_a_file_of_one_name(&file, &path)?;
        Ok(file)
    }

    /// The helper thread: makes files from the end of the list until it meets one made
    /// already (the parts got there) or [`Targets::stop`]; an error leaves the file to its part.
    fn help(&self) {
        for idx in (0..self.files.len()).rev() {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let Ok(mut made) = self.made[idx].try_lock() else {
                return;
            };
            if *made {
                return;
            }
            match self.make(idx) {
                Ok(_) => *made = true,
                Err(e) => {
                    tracing::debug!(error = %format!("{e:#}"), "making a file ahead failed: its part makes it");
                    return;
                }
            }
        }
    }

    fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Why a fetched part is not written: it arrived other than the manifest says (fetched
/// again), or it matches its sha256 and still disagrees with the manifest (the snapshot is
/// corrupt).
enum Unwritten {
    Arrived(String),
    Corrupt(String),
}

/// Checks a fetched part and writes its pieces at their place, each hashed against the
/// manifest.
fn write_part(bytes: &[u8], part: &Part, targets: &Targets) -> Result<Result<(), Unwritten>> {
    let sha = hex_sha256(bytes);
    if (bytes.len() as u64, sha.as_str()) != (part.size, part.sha256.as_str()) {
        return Ok(Err(Unwritten::Arrived(format!(
            "it arrived as {} bytes sha256 {sha}, the manifest says {} bytes sha256 {}",
            bytes.len(),
            part.size,
            part.sha256
        ))));
    }
    let corrupt = |what: String| {
        Ok(Err(Unwritten::Corrupt(format!(
            "part {}: {what}",
            part.object
        ))))
    };
    let mut dec = match zstd::stream::read::Decoder::with_buffer(bytes) {
        Ok(d) => d,
        Err(e) => return corrupt(format!("not zstd: {e}")),
    };
    let mut buf = vec![0u8; 1 << 20];
    for piece in &part.pieces {
        let Some(&idx) = targets.index.get(&piece.path) else {
            return corrupt(format!(
                "holds {}, which the manifest does not list",
                piece.path
            ));
        };
        let entry = &targets.files[idx];
        let file = targets.open(idx)?;
        let target = targets.root.join(&piece.path);
        let mut h = Sha256::new();
        let mut done = 0u64;
        while done < piece.len {
            let want = ((piece.len - done) as usize).min(buf.len());
            if let Err(e) = dec.read_exact(&mut buf[..want]) {
                return corrupt(format!(
                    "ends inside bytes {}–{} of {}: {e}",
                    piece.offset,
                    piece.offset + piece.len,
                    piece.path
                ));
            }
            h.update(&buf[..want]);
            file.write_all_at(&buf[..want], piece.offset + done)
                .with_context(|| format!("writing {}", target.display()))?;
            done += want as u64;
        }
        let got = format!("{:x}", h.finalize());
        let want = piece_sha256(entry, piece).unwrap_or_default();
        if got != want {
            return corrupt(format!(
                "bytes {}–{} of {} have sha256 {got}, the manifest {want}",
                piece.offset,
                piece.offset + piece.len,
                piece.path
            ));
        }
    }
    match dec.read(&mut buf[..1]) {
        Ok(0) => Ok(Ok(())),
        Ok(_) => corrupt("holds more bytes than its pieces".into()),
        Err(e) => corrupt(format!("broken after its pieces: {e}")),
    }
}

/// Fetches part `part` (again, alone, when it arrives wrong or the fetch fails; at most
/// [`FETCH_ATTEMPTS`] times) and writes it. Returns the refetches' reasons.
async fn fetch_part(
    store: &Store,
    id: &str,
    part: &Part,
    targets: &Arc<Targets>,
) -> Result<Vec<(String, String)>> {
    let path = object(store, id, &part.object);
    let mut refetched = Vec::new();
    for attempt in 1..=FETCH_ATTEMPTS {
        let (why, arrived_wrong) = match fetch(store, &path).await {
            Err(e) => (format!("{e:#}"), false),
            Ok(bytes) => {
                let (p, t) = (part.clone(), targets.clone());
                let written = tokio::task::spawn_blocking(move || write_part(&bytes, &p, &t))
                    .await
                    .map_err(|e| anyhow!("unpacking thread: {e}"))??;
                match written {
                    Ok(()) => return Ok(refetched),
                    Err(Unwritten::Corrupt(problem)) => {
                        return Err(Corrupt {
                            id: id.to_string(),
                            problems: vec![problem],
                        }
                        .into())
                    }
                    Err(Unwritten::Arrived(why)) => (why, true),
                }
            }
        };
        if attempt == FETCH_ATTEMPTS {
            let text = format!("{path}: {why} (fetched {FETCH_ATTEMPTS} times)");
            if arrived_wrong {
                return Err(Corrupt {
                    id: id.to_string(),
                    problems: vec![text],
                }
                .into());
            }
            bail!("downloading {text}");
        }
        tracing::warn!(part = %path, attempt, reason = %why, "a part of the snapshot is fetched again");
        refetched.push((part.object.clone(), why));
    }
    unreachable!("the last attempt returns")
}

async fn fetch(store: &Store, path: &object_store::path::Path) -> Result<bytes::Bytes> {
    store
        .objects
        .get(path)
        .await
        .with_context(|| format!("downloading {path}"))?
        .bytes()
        .await
        .with_context(|| format!("downloading {path}"))
}

async fn download_parts(
    store: &Store,
    manifest: &Manifest,
    parts: &Parts,
    dest: &Path,
    owner: Option<Owner>,
    threads: usize,
) -> Result<Fetched> {
    let (d, m) = (dest.to_path_buf(), manifest.clone());
    tokio::task::spawn_blocking(move || copy::recycle_or_renew(&d, &m.dirs, &m.files, owner))
        .await
        .map_err(|e| anyhow!("preparing thread: {e}"))??;
    let targets = Arc::new(Targets::new(dest, &manifest.files, owner));
    let helper = {
        let t = targets.clone();
        std::thread::spawn(move || t.help())
    };
    let id = manifest.id.as_str();
    // The first error ends the download: the parts still in flight are dropped.
    let fetched: Result<Vec<Vec<(String, String)>>> = futures::stream::iter(parts.list.iter())
        .map(|part| fetch_part(store, id, part, &targets))
        .buffer_unordered(threads.max(1))
        .try_collect()
        .await;
    targets.stop();
    let _ = helper.join();
    let refetched: Vec<(String, String)> = fetched?.into_iter().flatten().collect();
    // Every file is in some part (the manifest's parse checks it): each is made, sized and
    // written. One `syncfs` of the file system makes them and their directories durable: an
    // fsync per file forces XFS's log once per file (on the test machine's XFS loop file,
    // 2026-12-02: 800 new files fsynced one by one 2.9 s, one sync 0.08 s).
    let d = dest.to_path_buf();
    tokio::task::spawn_blocking(move || -> Result<()> {
        let f = std::fs::File::open(&d).with_context(|| format!("opening {}", d.display()))?;
        nix::unistd::syncfs(&f).with_context(|| format!("syncfs on {}", d.display()))
    })
    .await
    .map_err(|e| anyhow!("syncing thread: {e}"))??;
    Ok(Fetched {
        parts: parts.list.len(),
        refetched,
    })
}

/// A schema 1 snapshot downloaded into `dest`, streaming: decompressed, unpacked and each
/// file hashed while the next bytes arrive (a bounded channel between the download and the
/// writer); checked against the manifest and the archive's size and sha256.
async fn download_stream(
    store: &Store,
    manifest: &Manifest,
    dest: &Path,
    owner: Option<Owner>,
) -> Result<()> {
    let archive = manifest
        .archive
        .clone()
        .context("the store's manifest names no archive")?;
    let path = object(store, &manifest.id, &archive.object);
    let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(32);
    let (m, d) = (manifest.clone(), dest.to_path_buf());
    let writer = tokio::task::spawn_blocking(move || {
        let reader = ChannelReader {
            rx,
            cur: bytes::Bytes::new(),
            hasher: Sha256::new(),
            size: 0,
        };
        unpack(reader, &m, &d, owner)
    });
    let fed: Result<()> = async {
        let mut stream = store
            .objects
            .get(&path)
            .await
            .with_context(|| format!("downloading {path}"))?
            .into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.with_context(|| format!("downloading {path}"))?;
            // A full channel waits for the writer: memory stays bounded.
            if tx.send(chunk).await.is_err() {
                break;
            }
        }
        Ok(())
    }
    .await;
    drop(tx);
    let unpacked = writer.await.map_err(|e| anyhow!("unpacking thread: {e}"))?;
    let checked = fed.and(unpacked).and_then(|(size, sha256)| {
        if (size, sha256.as_str()) != (archive.size, archive.sha256.as_str()) {
            return Err(Corrupt {
                id: manifest.id.clone(),
                problems: vec![format!(
                    "{path} is {size} bytes sha256 {sha256}, the manifest says {} bytes sha256 {}",
                    archive.size, archive.sha256
                )],
            }
            .into());
        }
        Ok(())
    });
    checked
}

#[cfg(test)]
mod tests {
    use super::super::local;
    use super::*;

    /// A schema 1 archive (what daemons before schema 2 uploaded): the snapshot in `dir`
    /// as one tar stream in manifest order, fixed headers, zstd.
    fn write_archive<W: std::io::Write>(
        dir: &Path,
        manifest: &Manifest,
        out: W,
        level: i32,
    ) -> Result<W> {
        let enc = zstd::stream::write::Encoder::new(out, level).context("starting zstd")?;
        let mut tar = tar::Builder::new(enc);
        for d in manifest.dirs.iter().filter(|d| !d.path.is_empty()) {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Directory);
            h.set_mode(d.mode);
            h.set_size(0);
            h.set_mtime(0);
            tar.append_data(&mut h, &d.path, std::io::empty())
                .with_context(|| format!("archiving {}", d.path))?;
        }
        for f in &manifest.files {
            let path = dir.join(&f.path);
            let file = std::fs::File::open(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Regular);
            h.set_mode(f.mode);
            h.set_size(f.size);
            h.set_mtime(0);
            tar.append_data(&mut h, &f.path, file.take(f.size))
                .with_context(|| format!("archiving {}", f.path))?;
        }
        let enc = tar.into_inner().context("finishing the archive")?;
        enc.finish().context("finishing zstd")
    }

    #[test]
    fn the_archive_is_the_same_bytes_every_time_and_round_trips() {
        let base = tempfile::tempdir().expect("tempdir");
        let data = base.path().join("data");
        std::fs::create_dir_all(data.join("base/1")).expect("mkdir");
        std::fs::write(data.join("PG_VERSION"), "15\n").expect("write");
        std::fs::create_dir_all(data.join("pg_wal")).expect("mkdir");
        std::fs::write(data.join("pg_wal/000000010000000000000001"), [1u8; 100]).expect("write");
        std::fs::write(data.join("base/1/1259"), vec![3u8; 300_000]).expect("write");
        let key = SnapshotKey {
            dataset: "t".into(),
            ..test_key()
        };
        let root = base.path().join("snapshots");
        let (m, _) =
            local::take(&data, &root, &key, false, "000000010000000000000001").expect("take");
        let dir = local::snapshot_dir(&root, &m.id);
        let a = write_archive(&dir, &m, Vec::new(), ZSTD_LEVEL).expect("archive");
        let b = write_archive(&dir, &m, Vec::new(), ZSTD_LEVEL).expect("archive");
        assert_eq!(a, b);
        assert!(a.len() < 10_000, "compressed: {}", a.len());

        // A channel of 4 cannot hold the whole archive: feed it from a thread.
        let feed = |bytes: Vec<u8>, dest: std::path::PathBuf| {
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            let t = std::thread::spawn(move || {
                for c in bytes.chunks(1000) {
                    if tx.blocking_send(bytes::Bytes::copy_from_slice(c)).is_err() {
                        break;
                    }
                }
            });
            let reader = ChannelReader {
                rx,
                cur: bytes::Bytes::new(),
                hasher: Sha256::new(),
                size: 0,
            };
            let r = unpack(reader, &m, &dest, None);
            let _ = t.join();
            r
        };
        let out = base.path().join("out");
        let (size, sha) = feed(a.clone(), out.clone()).expect("unpack");
        assert_eq!(size, a.len() as u64);
        assert_eq!(sha, format!("{:x}", Sha256::digest(&a)));
        assert_eq!(
            std::fs::read(out.join("base/1/1259")).expect("read"),
            vec![3u8; 300_000]
        );

        // Into a directory to recycle (the one a restore replaced): its files are reused,
        // cut to their new length, what the manifest does not list goes.
        use std::os::unix::fs::MetadataExt;
        std::fs::write(out.join("base/1/1259"), vec![9u8; 900_000]).expect("write");
        std::fs::write(out.join("base/1/99999"), b"a table of the run").expect("write");
        std::fs::create_dir_all(out.join("pgsql_tmp/x")).expect("mkdir");
        std::fs::remove_file(out.join("PG_VERSION")).expect("rm");
        let ino = std::fs::metadata(out.join("base/1/1259"))
            .expect("stat")
            .ino();
        feed(a.clone(), out.clone()).expect("unpack into a recycled directory");
        assert_eq!(
            std::fs::read(out.join("base/1/1259")).expect("read"),
            vec![3u8; 300_000]
        );
        assert_eq!(
            std::fs::metadata(out.join("base/1/1259"))
                .expect("stat")
                .ino(),
            ino,
            "the file was reused, not made again"
        );
        assert_eq!(
            std::fs::read_to_string(out.join("PG_VERSION")).expect("read"),
            "15\n"
        );
        assert!(!out.join("base/1/99999").exists() && !out.join("pgsql_tmp").exists());

        // A manifest that does not match the archive's contents is corruption.
        let mut other = m.clone();
        other.files[0].sha256 = "0".repeat(64);
        let (tx, rx) = tokio::sync::mpsc::channel(1024);
        for c in a.chunks(1000) {
            tx.blocking_send(bytes::Bytes::copy_from_slice(c))
                .expect("send");
        }
        drop(tx);
        let reader = ChannelReader {
            rx,
            cur: bytes::Bytes::new(),
            hasher: Sha256::new(),
            size: 0,
        };
        let err = unpack(reader, &other, &base.path().join("out2"), None).expect_err("corrupt");
        assert!(err.downcast_ref::<Corrupt>().is_some(), "{err:#}");
    }

    fn file_store(root: &Path) -> Store {
        Store::open(&crate::upload::StoreConfig::environment(
            format!("file://{}", root.display()),
            "us-east-1",
        ))
        .expect("store")
    }

    fn test_key() -> SnapshotKey {
        SnapshotKey {
            postgres_major: 15,
            controldata: BTreeMap::new(),
            architecture: "x86_64".into(),
            encoding: "UTF8".into(),
            lc_collate: "C".into(),
            lc_ctype: "C".into(),
            dataset: "parts".into(),
        }
    }

    /// A stopped data directory's stand-in with small files and one of two chunks, and
    /// its local snapshot: (manifest, snapshot directory).
    fn snapshot_of_two_chunks(base: &Path) -> (Manifest, PathBuf) {
        let data = base.join("data");
        std::fs::create_dir_all(data.join("base/1")).expect("mkdir");
        std::fs::create_dir_all(data.join("pg_wal")).expect("mkdir");
        std::fs::write(data.join("PG_VERSION"), "15\n").expect("write");
        std::fs::write(data.join("pg_wal/000000010000000000000001"), [1u8; 100]).expect("write");
        std::fs::write(data.join("base/1/empty"), b"").expect("write");
        let big: Vec<u8> = (0..super::super::manifest::CHUNK_BYTES as usize + 5000)
            .map(|i| (i / 8192 % 251) as u8)
            .collect();
        std::fs::write(data.join("base/1/16384"), &big).expect("write");
        std::fs::write(data.join("base/1/1259"), vec![3u8; 300_000]).expect("write");
        let root = base.join("snapshots");
        let (m, _) = local::take(&data, &root, &test_key(), false, "000000010000000000000001")
            .expect("take");
        let dir = local::snapshot_dir(&root, &m.id);
        (m, dir)
    }

    fn same_files(a: &Path, b: &Path, m: &Manifest) {
        for f in &m.files {
            let (x, y) = (
                std::fs::read(a.join(&f.path)).expect("read"),
                std::fs::read(b.join(&f.path)).expect("read"),
            );
            assert!(
                x == y,
                "{} differs ({} vs {} bytes)",
                f.path,
                x.len(),
                y.len()
            );
        }
    }

    fn part_path(store_root: &Path, id: &str, i: usize) -> PathBuf {
        store_root.join(STORE_DIR).join(id).join(part_object(i))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn parts_go_up_and_down_on_several_threads_and_a_corrupt_part_is_named() {
        let base = tempfile::tempdir().expect("tempdir");
        let (m, snap) = snapshot_of_two_chunks(base.path());
        let store_root = base.path().join("store");
        std::fs::create_dir_all(&store_root).expect("mkdir");
        let store = file_store(&store_root);
        let mut journaled = Vec::new();
        let stored = upload(&store, &snap, &m, None, 2, &mut |p| {
            journaled.push(p.map(|p| p.parts.len()));
            Ok(())
        })
        .await
        .expect("upload");
        assert_eq!(stored.schema_version, MANIFEST_SCHEMA_VERSION);
        let parts = stored.parts.clone().expect("parts");
        // In manifest order: PG_VERSION and base/1/1259, the large file's two chunks in
        // one each, then base/1/empty and the WAL segment.
        assert_eq!(parts.list.len(), 4, "{parts:?}");
        assert_eq!(
            journaled,
            [Some(0), Some(1), Some(2), Some(3), Some(4), None],
            "each part journaled once it is read back"
        );
        for (i, p) in parts.list.iter().enumerate() {
            let bytes = std::fs::read(part_path(&store_root, &m.id, i)).expect("part object");
            assert_eq!(
                (bytes.len() as u64, hex_sha256(&bytes)),
                (p.size, p.sha256.clone())
            );
        }
        assert_eq!(
            find(&store, &test_key()).await.expect("find"),
            Some(stored.clone())
        );

        // Down on two threads into a new directory, then into it again as a recycled one.
        let out = base.path().join("out");
        let got = download_into(&store, &stored, &out, None, 2)
            .await
            .expect("download");
        assert_eq!(
            got,
            Fetched {
                parts: 4,
                refetched: vec![]
            }
        );
        same_files(&snap, &out, &m);
        std::fs::write(out.join("base/1/1259"), vec![9u8; 900_000]).expect("write");
        std::fs::write(out.join("base/1/16384"), b"short").expect("write");
        std::fs::write(out.join("base/1/99999"), b"a table of the run").expect("write");
        download_into(&store, &stored, &out, None, 1)
            .await
            .expect("download into a recycled directory");
        same_files(&snap, &out, &m);
        assert!(!out.join("base/1/99999").exists());

        // A resumed upload sends no part the journal says is there.
        std::fs::remove_file(store_root.join(STORE_DIR).join(&m.id).join(MANIFEST_FILE))
            .expect("rm manifest");
        let mtimes = || {
            (0..4)
                .map(|i| {
                    std::fs::metadata(part_path(&store_root, &m.id, i))
                        .and_then(|md| md.modified())
                        .expect("mtime")
                })
                .collect::<Vec<_>>()
        };
        let before = mtimes();
        let progress = UploadProgress {
            id: m.id.clone(),
            upload_id: String::new(),
            part_size: PART_BYTES as usize,
            parts: parts
                .list
                .iter()
                .enumerate()
                .map(|(i, p)| (i, p.sha256.clone()))
                .collect(),
        };
        let again = upload(&store, &snap, &m, Some(progress), 2, &mut |_| Ok(()))
            .await
            .expect("resumed upload");
        assert_eq!(again, stored);
        assert_eq!(mtimes(), before, "no part was uploaded again");

        // A part that is wrong in the store: fetched again alone, then named as corrupt.
        let p1 = part_path(&store_root, &m.id, 1);
        let mut bytes = std::fs::read(&p1).expect("read");
        bytes[10] ^= 0xff;
        std::fs::write(&p1, &bytes).expect("write");
        let dest = base.path().join("out-corrupt");
        let err = download_into(&store, &stored, &dest, None, 2)
            .await
            .expect_err("corrupt part");
        let corrupt = err.downcast_ref::<Corrupt>().expect("corrupt");
        assert_eq!(corrupt.problems.len(), 1, "{corrupt:?}");
        assert!(
            corrupt.problems[0].contains("part-00001.zst: it arrived as")
                && corrupt.problems[0].ends_with(&format!("(fetched {FETCH_ATTEMPTS} times)")),
            "{}",
            corrupt.problems[0]
        );
        assert!(!dest.exists(), "a failed download leaves nothing");

        // A part that matches its sha256 while its bytes disagree with the file's: the
        // snapshot is corrupt, and fetching it again would not help.
        bytes[10] ^= 0xff;
        std::fs::write(&p1, &bytes).expect("restore the part");
        let mut lying = stored.clone();
        lying
            .files
            .iter_mut()
            .find(|f| f.path == "base/1/16384")
            .expect("big")
            .chunks[1] = "0".repeat(64);
        let err = download_into(&store, &lying, &dest, None, 2)
            .await
            .expect_err("manifest and part disagree");
        let corrupt = err.downcast_ref::<Corrupt>().expect("corrupt");
        assert!(
            corrupt.problems[0].starts_with(
                "part part-00002.zst: bytes 67108864–67113864 of base/1/16384 have sha256"
            ),
            "{corrupt:?}"
        );
    }

    #[tokio::test]
    async fn a_schema_1_snapshot_in_the_store_is_still_read() {
        let base = tempfile::tempdir().expect("tempdir");
        let (m, snap) = snapshot_of_two_chunks(base.path());
        let store_root = base.path().join("store");
        std::fs::create_dir_all(&store_root).expect("mkdir");
        let store = file_store(&store_root);
        // What a daemon before schema 2 put in the store: one archive, a schema 1 manifest.
        let archive = write_archive(&snap, &m, Vec::new(), ZSTD_LEVEL).expect("archive");
        let mut old = m.clone();
        old.schema_version = 1;
        old.archive = Some(super::super::manifest::Archive {
            object: ARCHIVE_OBJECT.into(),
            compression: "zstd-3".into(),
            size: archive.len() as u64,
            sha256: hex_sha256(&archive),
        });
        store
            .objects
            .put(
                &object(&store, &m.id, ARCHIVE_OBJECT),
                PutPayload::from(archive),
            )
            .await
            .expect("put archive");
        store
            .objects
            .put(
                &object(&store, &m.id, MANIFEST_FILE),
                PutPayload::from(serde_json::to_vec_pretty(&old).expect("json")),
            )
            .await
            .expect("put manifest");
        let found = find(&store, &test_key())
            .await
            .expect("find")
            .expect("the old snapshot is found");
        assert_eq!(found, old);
        let out = base.path().join("out");
        let got = download_into(&store, &found, &out, None, 2)
            .await
            .expect("download");
        assert_eq!(got.parts, 1);
        same_files(&snap, &out, &m);
        // The upload of the same snapshot sees it there and leaves it.
        let again = upload(&store, &snap, &m, None, 2, &mut |_| Ok(()))
            .await
            .expect("upload");
        assert_eq!(again, old);
    }
}
