//! Snapshots in the object store: `snapshots/<id>/data.tar.zst` (the snapshot's files as
//! one tar stream in manifest order, zstd-compressed, uploaded as a multipart upload whose
//! id and part ETags are journaled so a restart resumes it) and `snapshots/<id>/manifest.json`
//! (the manifest with the archive's size and sha256), written last: a snapshot without its
//! manifest in the store is not there. Both are read back after the upload. A download
//! streams: the object is read, decompressed, unpacked and each file hashed and written
//! while the next bytes arrive, through a bounded channel (memory does not grow with the
//! snapshot).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender};

use anyhow::{anyhow, bail, Context, Result};
use futures::StreamExt;
use object_store::multipart::PartId;
use object_store::{ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::key::SnapshotKey;
use super::local::{self, Corrupt, Owner};
use super::manifest::{compare, Archive, Digest, Manifest, MANIFEST_FILE};
use crate::upload::Store;

/// Where snapshots live under the store's prefix.
pub const STORE_DIR: &str = "snapshots";
pub const ARCHIVE_OBJECT: &str = "data.tar.zst";
/// zstd level of the archive (docs/performance.md: measured against levels 1 and 9 and
/// gzip on a pgbench data directory).
pub const ZSTD_LEVEL: i32 = 3;
/// Size of a multipart part (S3 wants at least 5 MiB but the last).
pub const PART_SIZE: usize = 16 << 20;

/// A multipart upload of a snapshot's archive in progress, as the journal keeps it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UploadProgress {
    pub id: String,
    pub upload_id: String,
    pub part_size: usize,
    /// Part number (0-based) → the store's ETag.
    pub parts: BTreeMap<usize, String>,
}

fn object(store: &Store, id: &str, name: &str) -> object_store::path::Path {
    store.path(&[STORE_DIR, id, name])
}

/// Sends what is written, in `size` chunks, to the uploader.
struct Chunker {
    buf: Vec<u8>,
    size: usize,
    tx: SyncSender<Vec<u8>>,
}

impl Write for Chunker {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let room = self.size - self.buf.len();
        let n = room.min(data.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == self.size {
            let full = std::mem::replace(&mut self.buf, Vec::with_capacity(self.size));
            self.tx
                .send(full)
                .map_err(|_| std::io::Error::other("the uploader stopped"))?;
        }
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Chunker {
    fn finish(self) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            self.tx
                .send(self.buf)
                .map_err(|_| std::io::Error::other("the uploader stopped"))?;
        }
        Ok(())
    }
}

/// Writes the snapshot in `dir` as the archive stream (tar in manifest order, fixed
/// headers, zstd) into `out`: the same bytes every time for the same snapshot.
pub fn write_archive<W: Write>(dir: &Path, manifest: &Manifest, out: W, level: i32) -> Result<W> {
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
        let file =
            std::fs::File::open(&path).with_context(|| format!("reading {}", path.display()))?;
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

/// Uploads the local snapshot in `dir` unless the store has it already; `journal` is
/// called with the multipart progress after each part (None when the upload is over).
/// Returns the store's manifest (with the archive).
pub async fn upload(
    store: &Store,
    dir: &Path,
    manifest: &Manifest,
    resume: Option<UploadProgress>,
    journal: &mut dyn FnMut(Option<&UploadProgress>) -> Result<()>,
) -> Result<Manifest> {
    let id = manifest.id.clone();
    if let Some(there) = read_manifest(store, &id).await? {
        if there.archive.is_some() && there.files == manifest.files {
            tracing::info!(snapshot = %id, "the store has this snapshot already");
            journal(None)?;
            return Ok(there);
        }
    }
    let path = object(store, &id, ARCHIVE_OBJECT);
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(2);
    let (src, m) = (dir.to_path_buf(), manifest.clone());
    let producer = tokio::task::spawn_blocking(move || -> Result<()> {
        let chunker = Chunker {
            buf: Vec::with_capacity(PART_SIZE),
            size: PART_SIZE,
            tx,
        };
        write_archive(&src, &m, chunker, ZSTD_LEVEL)?.finish()?;
        Ok(())
    });
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    let next = |rx: std::sync::Arc<std::sync::Mutex<Receiver<Vec<u8>>>>| async move {
        tokio::task::spawn_blocking(move || rx.lock().ok().and_then(|r| r.recv().ok()))
            .await
            .ok()
            .flatten()
    };
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    let result: Result<()> = async {
        match store.multipart.clone() {
            Some(mp) => {
                let mut progress = match resume.filter(|p| p.id == id && p.part_size == PART_SIZE) {
                    Some(p) => {
                        tracing::info!(snapshot = %id, parts_done = p.parts.len(), "resuming the snapshot's upload");
                        p
                    }
                    None => {
                        let upload_id = mp
                            .create_multipart(&path)
                            .await
                            .with_context(|| format!("starting the multipart upload of {path}"))?;
                        UploadProgress {
                            id: id.clone(),
                            upload_id,
                            part_size: PART_SIZE,
                            parts: BTreeMap::new(),
                        }
                    }
                };
                journal(Some(&progress))?;
                let mut idx = 0usize;
                while let Some(chunk) = next(rx.clone()).await {
                    hasher.update(&chunk);
                    size += chunk.len() as u64;
                    if !progress.parts.contains_key(&idx) {
                        let part = mp
                            .put_part(&path, &progress.upload_id, idx, PutPayload::from(chunk))
                            .await
                            .with_context(|| format!("uploading part {idx} of {path}"))?;
                        progress.parts.insert(idx, part.content_id);
                        journal(Some(&progress))?;
                        crate::faults::point("snapshot-upload-part-journaled");
                        crate::notify::status(&format!("snapshot upload: part {}", idx + 1));
                    }
                    idx += 1;
                }
                let parts: Vec<PartId> = (0..idx)
                    .map(|i| PartId {
                        content_id: progress.parts.get(&i).cloned().unwrap_or_default(),
                    })
                    .collect();
                mp.complete_multipart(&path, &progress.upload_id, parts)
                    .await
                    .with_context(|| format!("completing the multipart upload of {path}"))?;
            }
            None => {
                // Stores without a resumable API (file://): object_store's writer.
                let mut up = store
                    .objects
                    .put_multipart(&path)
                    .await
                    .with_context(|| format!("starting {path}"))?;
                while let Some(chunk) = next(rx.clone()).await {
                    hasher.update(&chunk);
                    size += chunk.len() as u64;
                    up.put_part(PutPayload::from(chunk))
                        .await
                        .with_context(|| format!("uploading {path}"))?;
                }
                up.complete().await.with_context(|| format!("completing {path}"))?;
            }
        }
        Ok(())
    }
    .await;
    // The producer ends once the channel is dropped (on error) or the stream is written.
    drop(rx);
    let produced = producer
        .await
        .map_err(|e| anyhow!("archiving thread: {e}"))?;
    result?;
    produced?;
    let sha256 = format!("{:x}", hasher.finalize());
    // Read back: what the store returns is what was sent.
    let (got_size, got_sha) = read_back(store, &path).await?;
    if (got_size, got_sha.as_str()) != (size, sha256.as_str()) {
        journal(None)?;
        bail!(
            "{path} read back as {got_size} bytes sha256 {got_sha}, uploaded {size} bytes sha256 {sha256}: uploading it again at the next start"
        );
    }
    let mut stored = manifest.clone();
    stored.archive = Some(Archive {
        object: ARCHIVE_OBJECT.into(),
        compression: format!("zstd-{ZSTD_LEVEL}"),
        size,
        sha256,
    });
    let bytes = serde_json::to_vec_pretty(&stored)?;
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
pub async fn read_manifest(store: &Store, id: &str) -> Result<Option<Manifest>> {
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
pub async fn find(store: &Store, key: &SnapshotKey) -> Result<Option<Manifest>> {
    let id = key.id();
    if let Some(m) = read_manifest(store, &id).await? {
        if m.archive.is_some() {
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

/// Unpacks the archive stream into `dest` (made, or recycled by [`local::prepare_target`]), each file checked
/// against the manifest; returns the compressed size and sha256.
fn unpack(
    reader: ChannelReader,
    manifest: &Manifest,
    dest: &Path,
    owner: Option<Owner>,
) -> Result<(u64, String)> {
    local::recycle_or_renew(dest, &manifest.dirs, &manifest.files, owner)?;
    let index: std::collections::HashMap<&str, usize> = manifest
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.path.as_str(), i))
        .collect();
    let ahead = local::Ahead::new(dest, &manifest.files, owner);
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
    local::sync_files(dest, &manifest.files)?;
    local::sync_dirs(dest, &manifest.dirs)?;
    Ok((reader.size, format!("{:x}", reader.hasher.finalize())))
}

/// The archive's files written through `ahead`, each hashed into `seen`.
fn unpack_entries<R: Read>(
    archive: &mut tar::Archive<R>,
    index: &std::collections::HashMap<&str, usize>,
    ahead: &local::Ahead<'_>,
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

/// Downloads the store's snapshot into `dest` (made, or recycled by [`local::prepare_target`]), streaming:
/// decompressed, unpacked and each file hashed and fsynced while the next bytes arrive
/// (a bounded channel between the download and the writer); checked against the manifest
/// and the archive's size and sha256. On error `dest` is removed.
pub async fn download_into(
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
    if checked.is_err() {
        let _ = std::fs::remove_dir_all(dest);
    }
    checked
}

#[cfg(test)]
mod tests {
    use super::*;

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
            postgres_major: 15,
            controldata: BTreeMap::new(),
            architecture: "x86_64".into(),
            encoding: "UTF8".into(),
            lc_collate: "C".into(),
            lc_ctype: "C".into(),
            dataset: "t".into(),
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
}
