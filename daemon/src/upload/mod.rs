//! Upload of a finished run to object storage, losing nothing:
//!
//! * every file of the run dir goes to `<prefix>/<appliance>/<machine id>/<run id>/<path>`;
//! * objects already there are never overwritten: identical ones are skipped, different
//!   ones stop the upload with an error naming them (unless a repair, below, found them);
//! * large files go multipart, one part in memory at a time; the upload id and finished
//!   parts are journaled (`upload-state.json` in the work dir) so a restarted daemon
//!   resumes the same multipart upload;
//! * every object is read back and its size and sha256 compared with the local file;
//! * `manifest.json` (every object with size and sha256) is written last and verified, so a
//!   reader never sees half a run;
//! * before an upload says a run is stored (also when the manifest is already there), the
//!   run is verified in the store, not in the local journal: the prefix is listed and every
//!   object read back (those not read back by this process already) and compared with the
//!   local file, and the stored manifest compared with the local one. What is missing or
//!   different is repaired: the manifest is the commit point, so it is deleted first (a
//!   reader then sees no run rather than a wrong one), the objects found different are
//!   replaced and the missing ones uploaded (nothing found correct is written again), and
//!   the manifest is written last again. The objects being repaired are journaled, so a
//!   repair interrupted after the manifest was deleted resumes as a repair;
//! * transient failures (5xx, timeouts, dropped connections, store down) are retried with
//!   backoff, forever, with a bounded interval; permanent ones (refused credentials, a
//!   conflicting object, a missing bucket) end the upload with a clear error. Keys that
//!   expired are the exception among refusals: the log and the STATUS line say "the store
//!   credentials in FILE expired at T; put fresh ones there" and the upload retries, taking
//!   the fresh keys from the file as soon as they are there. Local files are never removed.

pub mod aws_error;
pub mod caller;
pub mod overrides;
pub mod store;
pub mod sts;

pub use overrides::StoreOverrides;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use futures::StreamExt;
use object_store::multipart::PartId;
use object_store::{ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use store::{Store, StoreConfig};

pub const MANIFEST: &str = "manifest.json";
pub(crate) const MANIFEST_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy)]
pub struct UploadOptions {
    /// Part size for multipart uploads (S3 requires at least 5 MiB but for the last part).
    pub part_size: usize,
    /// Files at least this large go multipart.
    pub multipart_threshold: u64,
    /// Longest wait between two attempts while the store is unreachable.
    pub max_retry_interval: Duration,
    /// Parts in flight at once (memory is bounded by this × part_size).
    pub parallel_parts: usize,
    /// How long a store that does not take the run is tried before the upload ends with
    /// [`UploadPostponed`] (a local run: its results are complete where they are, and
    /// `pgapplianced upload` completes the upload); None: until it takes it (the appliance).
    pub give_up_after: Option<Duration>,
}

/// The store did not take the run within [`UploadOptions::give_up_after`]: the run is
/// complete locally and `pgapplianced upload` completes the upload.
#[derive(Debug, thiserror::Error)]
#[error("the store {store} did not take run {run_id} within {}: {cause} (last failure: {last}); the results stay in {}", humantime::format_duration(*.waited), .run_dir.display())]
pub struct UploadPostponed {
    pub store: String,
    pub run_id: String,
    pub run_dir: PathBuf,
    pub waited: Duration,
    /// Why, from one connection tried to the store's endpoint when the upload gave up
    /// ([`store::probe`]): the same whichever way the last attempt ended.
    pub cause: String,
    /// The last failure, in one line: the store client's own, or "no answer" when the
    /// attempt was still waiting at the limit.
    pub last: String,
}

impl Default for UploadOptions {
    fn default() -> Self {
        UploadOptions {
            part_size: 8 << 20,
            multipart_threshold: 16 << 20,
            max_retry_interval: Duration::from_secs(60),
            parallel_parts: 4,
            give_up_after: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    pub path: String,
    pub size: u64,
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema_version: u32,
    pub appliance: String,
    pub machine_id: String,
    pub run_id: String,
    pub created_at: String,
    pub objects: Vec<ManifestEntry>,
}

/// What the upload journal remembers per object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub(crate) struct UploadJournal {
    pub(crate) run_id: String,
    pub(crate) key: String,
    /// Objects known to be in the store with this size and sha256.
    pub(crate) done: BTreeMap<String, ManifestEntry>,
    /// Multipart uploads in flight: object → upload id, part size, finished parts.
    pub(crate) multipart: BTreeMap<String, MultipartProgress>,
    /// Multipart uploads that a restart resumed (evidence for operators and tests).
    pub(crate) resumed: BTreeMap<String, String>,
    pub(crate) manifest_done: bool,
    /// Objects a verification found missing or different in the store, with why; present
    /// from the moment the repair starts (before the stored manifest is deleted) until the
    /// manifest is written again.
    #[serde(default)]
    pub(crate) repairing: BTreeMap<String, String>,
}

/// A run verified in the store, and what had to be repaired for it.
#[derive(Debug, Clone)]
pub struct Stored {
    pub(crate) manifest: Manifest,
    /// Objects (and `manifest.json`) that were missing or different, with why.
    pub(crate) repaired: BTreeMap<String, String>,
}

impl Stored {
    /// One line for operators: what is stored and what was repaired.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} objects and manifest.json verified in the store",
            self.manifest.objects.len()
        );
        if !self.repaired.is_empty() {
            const NAMED: usize = 8;
            let mut what: Vec<String> = self
                .repaired
                .iter()
                .take(NAMED)
                .map(|(k, why)| format!("{k} ({why})"))
                .collect();
            if self.repaired.len() > NAMED {
                what.push(format!("and {} more", self.repaired.len() - NAMED));
            }
            s.push_str(&format!(
                "; repaired {}: {}",
                self.repaired.len(),
                what.join(", ")
            ));
        }
        s
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct MultipartProgress {
    pub(crate) upload_id: String,
    pub(crate) part_size: usize,
    /// Finished parts: part index → the store's id (ETag) for it.
    pub(crate) parts: BTreeMap<usize, String>,
}

/// A failure with whether waiting could fix it.
#[derive(Debug)]
pub(crate) struct UploadError {
    pub(crate) permanent: bool,
    /// The store refused the keys (401, 403, or an S3 token error).
    pub(crate) credentials_refused: bool,
    pub(crate) error: anyhow::Error,
}

impl std::fmt::Display for UploadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

fn classify(e: object_store::Error, what: String) -> UploadError {
    use object_store::Error as E;
    let permanent = matches!(
        e,
        E::PermissionDenied { .. }
            | E::Unauthenticated { .. }
            | E::AlreadyExists { .. }
            | E::Precondition { .. }
            | E::NotSupported { .. }
            | E::InvalidPath { .. }
            | E::NotFound { .. }
    );
    let text = e.to_string();
    let credentials_refused = matches!(e, E::PermissionDenied { .. } | E::Unauthenticated { .. })
        || ["ExpiredToken", "InvalidToken", "InvalidAccessKeyId"]
            .iter()
            .any(|code| text.contains(code));
    UploadError {
        permanent,
        credentials_refused,
        error: anyhow!(e).context(what),
    }
}

fn permanent(e: anyhow::Error) -> UploadError {
    UploadError {
        permanent: true,
        credentials_refused: false,
        error: e,
    }
}

fn local(e: anyhow::Error) -> UploadError {
    // Local I/O problems (disk, permissions) do not heal by waiting for the store.
    permanent(e)
}

/// sha256 and size of a local file, streamed.
pub fn hash_file(path: &Path) -> Result<(u64, String)> {
    let mut f = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        size += n as u64;
    }
    Ok((size, format!("{:x}", h.finalize())))
}

/// Every regular file under `dir`, as sorted relative paths with `/`.
pub fn list_files(dir: &Path) -> Result<Vec<String>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
        for e in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
            let e = e?;
            let ft = e.file_type()?;
            let p = e.path();
            if ft.is_dir() {
                walk(root, &p, out)?;
            } else if ft.is_file() {
                let name = e.file_name();
                // Temp files of an atomic write in progress are not part of the run.
                if name.to_string_lossy().starts_with('.') {
                    continue;
                }
                let rel = p.strip_prefix(root).unwrap_or(&p);
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out)?;
    out.sort();
    Ok(out)
}

/// Where a run goes in the store.
#[derive(Debug, Clone)]
pub struct RunKey {
    pub(crate) appliance: String,
    pub(crate) machine_id: String,
    pub(crate) run_id: String,
}

impl RunKey {
    pub(crate) fn parts(&self) -> [&str; 3] {
        [&self.appliance, &self.machine_id, &self.run_id]
    }
}

/// This machine's id: /etc/machine-id, else the hostname, else `unknown`.
pub fn machine_id() -> String {
    machine_id_from([
        std::fs::read_to_string("/etc/machine-id").ok(),
        std::fs::read_to_string("/proc/sys/kernel/hostname").ok(),
    ])
}

/// The first candidate that is a plain name ([`crate::fsutil::check_path_component`]): the
/// id becomes a level of every key the machine writes, so a file holding `../x` or `a/b`
/// is passed over (and said), not followed.
fn machine_id_from<const N: usize>(candidates: [Option<String>; N]) -> String {
    for c in candidates.into_iter().flatten() {
        let c = c.trim();
        if c.is_empty() {
            continue;
        }
        match crate::fsutil::check_path_component("machine id", c) {
            Ok(()) => return c.to_string(),
            Err(e) => tracing::warn!("{e}: not used"),
        }
    }
    "unknown".to_string()
}

struct Uploader<'a> {
    store: &'a Store,
    key: &'a RunKey,
    run_dir: &'a Path,
    journal_path: PathBuf,
    journal: UploadJournal,
    options: UploadOptions,
    /// Objects this process read back with the local size and sha256.
    read_back_ok: std::collections::BTreeSet<String>,
    /// Everything repaired by this process or the interrupted one before it.
    repaired: BTreeMap<String, String>,
}

impl Uploader<'_> {
    fn save(&self) -> Result<(), UploadError> {
        crate::fsutil::write_json(&self.journal_path, &self.journal)
            .context("saving the upload journal")
            .map_err(local)
    }

    fn object(&self, rel: &str) -> object_store::path::Path {
        let [a, m, r] = self.key.parts();
        self.store.path(&[a, m, r, rel])
    }

    /// Size and sha256 of an object as the store returns it.
    async fn read_back(&self, rel: &str) -> Result<Option<(u64, String)>, UploadError> {
        let path = self.object(rel);
        let got = match self.store.objects.get(&path).await {
            Ok(g) => g,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(classify(e, format!("reading back {path}"))),
        };
        let mut stream = got.into_stream();
        let mut h = Sha256::new();
        let mut size = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| classify(e, format!("reading back {path}")))?;
            size += chunk.len() as u64;
            h.update(&chunk);
        }
        Ok(Some((size, format!("{:x}", h.finalize()))))
    }

    async fn put_small(&self, rel: &str, file: &Path) -> Result<(), UploadError> {
        let bytes = std::fs::read(file)
            .with_context(|| format!("reading {}", file.display()))
            .map_err(local)?;
        let path = self.object(rel);
        self.store
            .objects
            .put(&path, PutPayload::from(bytes))
            .await
            .map_err(|e| classify(e, format!("uploading {path}")))?;
        Ok(())
    }

    async fn put_multipart(
        &mut self,
        rel: &str,
        file: &Path,
        size: u64,
    ) -> Result<(), UploadError> {
        let path = self.object(rel);
        let Some(mp) = self.store.multipart.clone() else {
            // Stores without a resumable API (file://) stream through object_store's writer.
            let mut upload = self
                .store
                .objects
                .put_multipart(&path)
                .await
                .map_err(|e| classify(e, format!("starting {path}")))?;
            let mut f = std::fs::File::open(file)
                .with_context(|| format!("reading {}", file.display()))
                .map_err(local)?;
            let mut buf = vec![0u8; self.options.part_size];
            loop {
                let n = read_full(&mut f, &mut buf).map_err(local)?;
                if n == 0 {
                    break;
                }
                upload
                    .put_part(PutPayload::from(buf[..n].to_vec()))
                    .await
                    .map_err(|e| classify(e, format!("uploading {path}")))?;
            }
            upload
                .complete()
                .await
                .map_err(|e| classify(e, format!("completing {path}")))?;
            return Ok(());
        };
        let progress = match self.journal.multipart.get(rel).cloned() {
            Some(p) => {
                self.journal.resumed.insert(
                    rel.to_string(),
                    format!("{} from part {}", p.upload_id, p.parts.len()),
                );
                tracing::info!(object = rel, upload_id = %p.upload_id, parts_done = p.parts.len(), "resuming multipart upload");
                p
            }
            None => {
                let id = mp
                    .create_multipart(&path)
                    .await
                    .map_err(|e| classify(e, format!("starting multipart upload of {path}")))?;
                let p = MultipartProgress {
                    upload_id: id,
                    part_size: self.options.part_size,
                    parts: BTreeMap::new(),
                };
                self.journal.multipart.insert(rel.to_string(), p.clone());
                self.save()?;
                p
            }
        };
        let part_size = progress.part_size;
        let parts_total = size.div_ceil(part_size as u64) as usize;
        let missing: Vec<usize> = (0..parts_total)
            .filter(|i| !progress.parts.contains_key(i))
            .collect();
        let upload_id = progress.upload_id.clone();
        let mut in_flight = futures::stream::iter(missing)
            .map(|idx| {
                let (mp, path, upload_id) = (mp.clone(), path.clone(), upload_id.clone());
                async move {
                    let data = read_part(file, idx, part_size).map_err(|e| Some(local(e)))?;
                    match mp
                        .put_part(&path, &upload_id, idx, PutPayload::from(data))
                        .await
                    {
                        Ok(part) => Ok((idx, part)),
                        Err(object_store::Error::NotFound { .. }) => Err(None),
                        Err(e) => Err(Some(classify(e, format!("uploading part {idx} of {path}")))),
                    }
                }
            })
            .buffer_unordered(self.options.parallel_parts.max(1));
        while let Some(done) = in_flight.next().await {
            match done {
                Ok((idx, part)) => {
                    if let Some(p) = self.journal.multipart.get_mut(rel) {
                        p.parts.insert(idx, part.content_id);
                    }
                    self.save()?;
                    crate::faults::point("upload-part-journaled");
                    let finished = self.journal.multipart.get(rel).map_or(0, |p| p.parts.len());
                    crate::notify::status(&format!("upload: {rel} part {finished}/{parts_total}"));
                }
                Err(Some(e)) => return Err(e),
                Err(None) => {
                    // The store no longer knows the upload (expired or aborted): start over.
                    drop(in_flight);
                    self.journal.multipart.remove(rel);
                    self.save()?;
                    return Err(UploadError {
                        permanent: false,
                        credentials_refused: false,
                        error: anyhow!(
                            "multipart upload of {path} was forgotten by the store; restarting it"
                        ),
                    });
                }
            }
        }
        drop(in_flight);
        let parts: Vec<PartId> = self
            .journal
            .multipart
            .get(rel)
            .map(|p| {
                p.parts
                    .values()
                    .map(|c| PartId {
                        content_id: c.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        match mp
            .complete_multipart(&path, &progress.upload_id, parts)
            .await
        {
            Ok(_) => {}
            // A completion whose answer was lost: the store finished it and forgot the id.
            Err(object_store::Error::NotFound { .. }) if self.read_back(rel).await?.is_some() => {}
            Err(e) => {
                return Err(classify(
                    e,
                    format!("completing multipart upload of {path}"),
                ))
            }
        }
        self.journal.multipart.remove(rel);
        self.save()?;
        Ok(())
    }

    async fn upload_object(&mut self, rel: &str) -> Result<ManifestEntry, UploadError> {
        let file = self.run_dir.join(rel);
        let (size, sha256) = hash_file(&file).map_err(local)?;
        let entry = ManifestEntry {
            path: rel.to_string(),
            size,
            sha256: sha256.clone(),
        };
        if self.journal.done.get(rel) == Some(&entry) {
            return Ok(entry);
        }
        let in_flight = self.journal.multipart.contains_key(rel);
        if !in_flight {
            if let Some((s, h)) = self.read_back(rel).await? {
                if s == size && h == sha256 {
                    self.read_back_ok.insert(rel.to_string());
                    self.journal.done.insert(rel.to_string(), entry.clone());
                    self.save()?;
                    return Ok(entry);
                }
                if !self.journal.repairing.contains_key(rel) {
                    return Err(permanent(anyhow!(
                    "{} already exists in the store with different content ({s} bytes, sha256 {}…); refusing to overwrite it",
                    self.object(rel),
                    &h[..12]
                )));
                }
                // A verification found this object different and the repair has removed
                // the manifest: the upload below replaces it.
                tracing::warn!(
                    object = rel,
                    "replacing an object that differs from the run's file"
                );
            }
        }
        if size >= self.options.multipart_threshold {
            self.put_multipart(rel, &file, size).await?;
        } else {
            self.put_small(rel, &file).await?;
        }
        match self.read_back(rel).await? {
            Some((s, h)) if s == size && h == sha256 => {}
            Some((s, h)) => {
                return Err(UploadError {
                    permanent: false,
                    credentials_refused: false,
                    error: anyhow!(
                    "{} read back as {s} bytes sha256 {h}, expected {size} bytes sha256 {sha256}",
                    self.object(rel)
                ),
                })
            }
            None => {
                return Err(UploadError {
                    permanent: false,
                    credentials_refused: false,
                    error: anyhow!("{} is missing right after its upload", self.object(rel)),
                })
            }
        }
        self.read_back_ok.insert(rel.to_string());
        self.journal.done.insert(rel.to_string(), entry.clone());
        self.save()?;
        Ok(entry)
    }

    /// Every object under the run's key with its size, as the store lists it.
    async fn list_run(&self) -> Result<BTreeMap<String, u64>, UploadError> {
        use futures::TryStreamExt;
        use object_store::ObjectStore;
        let [a, m, r] = self.key.parts();
        let base = self.store.path(&[a, m, r]);
        let metas: Vec<object_store::ObjectMeta> =
            match self.store.objects.list(Some(&base)).try_collect().await {
                Ok(v) => v,
                Err(object_store::Error::NotFound { .. }) => Vec::new(),
                Err(e) => return Err(classify(e, format!("listing {base}"))),
            };
        Ok(metas
            .into_iter()
            .filter_map(|m| {
                let rel = m.location.as_ref().strip_prefix(base.as_ref())?;
                Some((rel.trim_start_matches('/').to_string(), m.size))
            })
            .collect())
    }

    /// What is missing or different in the store, object by object (path → why): the
    /// listing first, then a read-back of each object this process has not read back.
    async fn verify_objects(
        &mut self,
        local: &[ManifestEntry],
    ) -> Result<BTreeMap<String, String>, UploadError> {
        let listed = self.list_run().await?;
        let mut problems = BTreeMap::new();
        for (i, e) in local.iter().enumerate() {
            if i % 25 == 0 {
                crate::notify::status(&format!(
                    "upload: verifying {i}/{} objects in {}",
                    local.len(),
                    self.store.url
                ));
            }
            match listed.get(&e.path) {
                None => {
                    problems.insert(e.path.clone(), "missing".to_string());
                    continue;
                }
                Some(size) if *size != e.size => {
                    problems.insert(
                        e.path.clone(),
                        format!("{size} bytes in the store, {} here", e.size),
                    );
                    continue;
                }
                Some(_) => {}
            }
            if self.read_back_ok.contains(&e.path) {
                continue;
            }
            match self.read_back(&e.path).await? {
                None => {
                    problems.insert(e.path.clone(), "missing".to_string());
                }
                Some((s, h)) if s == e.size && h == e.sha256 => {
                    self.read_back_ok.insert(e.path.clone());
                }
                Some(_) => {
                    problems.insert(e.path.clone(), "different content".to_string());
                }
            }
        }
        Ok(problems)
    }

    /// The run's objects as the local files are now (path, size, sha256).
    fn local_entries(&self) -> Result<Vec<ManifestEntry>, UploadError> {
        let files = list_files(self.run_dir).map_err(local)?;
        files
            .into_iter()
            .filter(|rel| rel != MANIFEST)
            .map(|rel| {
                let (size, sha256) = hash_file(&self.run_dir.join(&rel)).map_err(local)?;
                Ok(ManifestEntry {
                    path: rel,
                    size,
                    sha256,
                })
            })
            .collect()
    }

    /// Records what a repair must redo (before anything in the store changes), drops it
    /// from the objects known to be stored, and removes the stored manifest.
    async fn start_repair(
        &mut self,
        problems: BTreeMap<String, String>,
        manifest_there: bool,
    ) -> Result<(), UploadError> {
        for (rel, why) in &problems {
            tracing::warn!(object = %rel, problem = %why, "repairing the stored run");
            self.journal.done.remove(rel);
            self.read_back_ok.remove(rel);
        }
        self.journal.repairing.extend(problems);
        self.journal.manifest_done = false;
        self.save()?;
        if manifest_there {
            let path = self.object(MANIFEST);
            match self.store.objects.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(classify(e, format!("deleting {path} to repair the run"))),
            }
        }
        Ok(())
    }

    /// The stored manifest: None when there is none, `Err(why)` when it is not one.
    async fn manifest_in_store(
        &self,
    ) -> Result<Option<std::result::Result<Manifest, String>>, UploadError> {
        let path = self.object(MANIFEST);
        match self.store.objects.get(&path).await {
            Ok(g) => {
                let bytes = g
                    .bytes()
                    .await
                    .map_err(|e| classify(e, format!("reading {path}")))?;
                Ok(Some(
                    serde_json::from_slice(&bytes).map_err(|e| format!("not a manifest: {e}")),
                ))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(classify(e, format!("reading {path}"))),
        }
    }

    /// Why a stored manifest does not describe this run as it is here (None: it does).
    fn manifest_mismatch(&self, stored: &Manifest, local: &[ManifestEntry]) -> Option<String> {
        if stored.schema_version != MANIFEST_SCHEMA_VERSION
            || stored.appliance != self.key.appliance
            || stored.machine_id != self.key.machine_id
            || stored.run_id != self.key.run_id
        {
            return Some("names another run or schema".into());
        }
        let listed: BTreeMap<&str, &ManifestEntry> = stored
            .objects
            .iter()
            .map(|o| (o.path.as_str(), o))
            .collect();
        let here: BTreeMap<&str, &ManifestEntry> =
            local.iter().map(|o| (o.path.as_str(), o)).collect();
        if listed.len() != stored.objects.len() {
            return Some("lists an object twice".into());
        }
        (listed != here).then(|| {
            let differ = here
                .iter()
                .filter(|(k, v)| listed.get(*k) != Some(*v))
                .count()
                + listed.keys().filter(|k| !here.contains_key(*k)).count();
            format!("differs from the run's files in {differ} entries")
        })
    }

    /// The run's results here ([`REGENERATED`]) that differ from a stored manifest of this
    /// run whose own objects the store still holds as listed: a verified stored copy, which
    /// a file regenerated or changed since must not replace (None when nothing differs).
    async fn differs_from_verified_copy(
        &self,
        stored: &Manifest,
        here: &[ManifestEntry],
    ) -> Result<Option<Vec<String>>, UploadError> {
        if stored.appliance != self.key.appliance
            || stored.machine_id != self.key.machine_id
            || stored.run_id != self.key.run_id
        {
            return Ok(None);
        }
        let mut differ = Vec::new();
        // The run's results, which the report step makes again from the points: evidence
        // (a failure bundle, then the reset's fuller copy) is meant to be replaced.
        for e in here
            .iter()
            .filter(|e| REGENERATED.contains(&e.path.as_str()))
        {
            let Some(s) = stored.objects.iter().find(|o| o.path == e.path) else {
                continue;
            };
            if s == e {
                continue;
            }
            // The store's object as its manifest lists it: the stored copy is good.
            match self.read_back(&s.path).await? {
                Some((size, sha)) if size == s.size && sha == s.sha256 => {
                    differ.push(e.path.clone())
                }
                _ => return Ok(None),
            }
        }
        Ok((!differ.is_empty()).then_some(differ))
    }

    /// A stored manifest against the files here and the store's objects: the run as
    /// stored when they all agree, else the repair started (None).
    async fn verify_stored(
        &mut self,
        found: std::result::Result<Manifest, String>,
        here: &[ManifestEntry],
    ) -> Result<Option<Stored>, UploadError> {
        let manifest_problem = match &found {
            Ok(m) => self.manifest_mismatch(m, here),
            Err(why) => Some(why.clone()),
        };
        let mut problems = self.verify_objects(here).await?;
        if problems.is_empty() && manifest_problem.is_none() {
            if let Ok(m) = found {
                self.journal.manifest_done = true;
                self.journal.repairing.clear();
                self.save()?;
                return Ok(Some(Stored {
                    manifest: m,
                    repaired: std::mem::take(&mut self.repaired),
                }));
            }
        }
        if let Some(why) = manifest_problem {
            problems.insert(MANIFEST.to_string(), why);
        }
        self.start_repair(problems, true).await?;
        Ok(None)
    }

    async fn run(&mut self) -> Result<Stored, UploadError> {
        let here = self.local_entries()?;
        match self.manifest_in_store().await? {
            Some(Ok(m)) if !self.journal.repairing.contains_key(MANIFEST) => {
                if let Some(differ) = self.differs_from_verified_copy(&m, &here).await? {
                    return Err(permanent(anyhow!(
                        "the store holds a verified copy of run {} (under {} in {}) whose {} differ from the files here (changed or regenerated since the run was stored): refusing to overwrite it; both are kept, the store's and the local one in {}",
                        self.key.run_id,
                        self.key.parts().join("/"),
                        self.store.url,
                        differ.join(", "),
                        self.run_dir.display()
                    )));
                }
                if let Some(stored) = self.verify_stored(Ok(m), &here).await? {
                    return Ok(stored);
                }
            }
            Some(found) => {
                if let Some(stored) = self.verify_stored(found, &here).await? {
                    return Ok(stored);
                }
            }
            None => {
                // Objects the journal knows as stored but the store does not list (or lists
                // with another size) are uploaded again.
                let listed = self.list_run().await?;
                let gone: Vec<String> = self
                    .journal
                    .done
                    .iter()
                    .filter(|(rel, e)| listed.get(*rel) != Some(&e.size))
                    .map(|(rel, _)| rel.clone())
                    .collect();
                for rel in gone {
                    self.journal.done.remove(&rel);
                    if self.journal.manifest_done {
                        self.journal.repairing.insert(rel, "missing".into());
                    }
                }
                if self.journal.manifest_done {
                    self.journal
                        .repairing
                        .insert(MANIFEST.to_string(), "missing".into());
                    self.journal.manifest_done = false;
                }
                self.save()?;
            }
        }
        self.repaired.extend(
            self.journal
                .repairing
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        let total = here.len();
        let mut objects = Vec::with_capacity(total);
        for (i, e) in here.iter().enumerate() {
            if i % 25 == 0 {
                crate::notify::status(&format!(
                    "upload: {}/{total} objects to {}",
                    i, self.store.url
                ));
            }
            let entry = self.upload_object(&e.path).await?;
            if entry != *e {
                return Err(permanent(anyhow!(
                    "{} changed while it was being uploaded",
                    self.run_dir.join(&e.path).display()
                )));
            }
            objects.push(entry);
        }
        // Verified in the store before the manifest commits the run.
        let problems = self.verify_objects(&objects).await?;
        if !problems.is_empty() {
            let what: Vec<String> = problems.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            self.start_repair(problems, false).await?;
            return Err(UploadError {
                permanent: false,
                credentials_refused: false,
                error: anyhow!(
                    "the store does not hold what was uploaded ({}); repairing",
                    what.join(", ")
                ),
            });
        }
        let manifest = Manifest {
            schema_version: MANIFEST_SCHEMA_VERSION,
            appliance: self.key.appliance.clone(),
            machine_id: self.key.machine_id.clone(),
            run_id: self.key.run_id.clone(),
            created_at: crate::clock::now(),
            objects,
        };
        let mut bytes = serde_json::to_vec_pretty(&manifest).map_err(|e| local(e.into()))?;
        bytes.push(b'\n');
        let want = format!("{:x}", Sha256::digest(&bytes));
        let path = self.object(MANIFEST);
        self.store
            .objects
            .put(&path, PutPayload::from(bytes.clone()))
            .await
            .map_err(|e| classify(e, format!("uploading {path}")))?;
        match self.read_back(MANIFEST).await? {
            Some((s, h)) if s == bytes.len() as u64 && h == want => {}
            _ => {
                return Err(UploadError {
                    permanent: false,
                    credentials_refused: false,
                    error: anyhow!("{path} did not read back as written"),
                })
            }
        }
        self.journal.manifest_done = true;
        self.journal.repairing.clear();
        self.save()?;
        Ok(Stored {
            manifest,
            repaired: std::mem::take(&mut self.repaired),
        })
    }
}

/// Part `idx` of a file cut into `part_size` pieces (the last one shorter).
fn read_part(file: &Path, idx: usize, part_size: usize) -> Result<Vec<u8>> {
    use std::io::Seek;
    let mut f = std::fs::File::open(file).with_context(|| format!("reading {}", file.display()))?;
    f.seek(std::io::SeekFrom::Start(idx as u64 * part_size as u64))?;
    let mut buf = vec![0u8; part_size];
    let n = read_full(&mut f, &mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        let m = f.read(&mut buf[n..])?;
        if m == 0 {
            break;
        }
        n += m;
    }
    Ok(n)
}

/// The report step's products: made again from the points when they are missing or
/// damaged here, so they may differ from the copy the store verified.
const REGENERATED: &[&str] = &["results.json", "summary.csv", "report.html"];

/// The uploader's own journal in the work directory.
pub(crate) const UPLOAD_STATE_FILE: &str = "upload-state.json";

/// The upload journal of a work dir.
pub(crate) fn journal_path(workdir: &Path) -> PathBuf {
    workdir.join(UPLOAD_STATE_FILE)
}

/// The upload journal at `path`, or a fresh one: when there is none, and when it cannot be
/// read (it only saves work: every object is checked against the store again), in which
/// case it is set aside as `<name>.unreadable[.N]` and the warning names both files.
fn read_upload_journal(path: &Path) -> UploadJournal {
    let Ok(text) = std::fs::read_to_string(path) else {
        return UploadJournal::default();
    };
    match serde_json::from_str::<UploadJournal>(&text) {
        Ok(j) => j,
        Err(e) => {
            let mut aside = path.with_extension("json.unreadable");
            let mut n = 2;
            while aside.exists() {
                aside = path.with_extension(format!("json.unreadable.{n}"));
                n += 1;
            }
            match std::fs::rename(path, &aside) {
                Ok(()) => tracing::warn!(
                    "the upload journal {} is not valid ({e}): set aside as {}, starting the upload over (every object is checked against the store)",
                    path.display(),
                    aside.display()
                ),
                Err(mv) => tracing::warn!(
                    "the upload journal {} is not valid ({e}) and could not be set aside ({mv}): starting the upload over",
                    path.display()
                ),
            }
            UploadJournal::default()
        }
    }
}

/// Uploads a run dir, retrying transient failures until it is complete and verified.
pub(crate) async fn upload_run(
    store: &Store,
    key: &RunKey,
    run_dir: &Path,
    workdir: &Path,
    options: UploadOptions,
) -> Result<Stored> {
    let journal_path = journal_path(workdir);
    let journal = read_upload_journal(&journal_path);
    let key_text = key.parts().join("/");
    let journal =
        if journal.run_id == key.run_id && journal.key == format!("{}|{key_text}", store.url) {
            journal
        } else {
            UploadJournal {
                run_id: key.run_id.clone(),
                key: format!("{}|{key_text}", store.url),
                ..Default::default()
            }
        };
    let mut up = Uploader {
        store,
        key,
        run_dir,
        journal_path,
        journal,
        options,
        read_back_ok: Default::default(),
        repaired: BTreeMap::new(),
    };
    let mut wait = Duration::from_secs(1);
    let started = std::time::Instant::now();
    loop {
        let attempt = up.run();
        let outcome = match options.give_up_after {
            Some(limit) => {
                match tokio::time::timeout(limit.saturating_sub(started.elapsed()), attempt).await {
                    Ok(r) => r,
                    Err(_) => Err(UploadError {
                        permanent: false,
                        credentials_refused: false,
                        error: anyhow!("no answer within {}", humantime::format_duration(limit)),
                    }),
                }
            }
            None => attempt.await,
        };
        let e = match outcome {
            Ok(m) => return Ok(m),
            Err(e) => e,
        };
        let expired = store.expired_credentials(&format!("{e}"), e.credentials_refused);
        let status = match expired {
            // Keys from a file that expired: retried, fresh ones put there are used at once.
            Some(expired) if store.credentials_file.is_some() => {
                tracing::warn!(error = %e, "{expired}");
                format!("upload: {expired}")
            }
            // The library's chain repeats the store's answer (its XML body) at each level:
            // one line says it once, with the keys and the fix.
            Some(expired) => {
                return Err(anyhow!(
                    "{expired}; uploading run {} to {} (results stay in {})",
                    key.run_id,
                    store.url,
                    run_dir.display()
                ))
            }
            None if e.permanent => {
                return Err(anyhow!(aws_error::one_line(
                    &format!(
                        "uploading run {} to {} (results stay in {})",
                        key.run_id,
                        store.url,
                        run_dir.display()
                    ),
                    &format!("{:#}", e.error),
                    "store",
                    store.keys.as_deref(),
                    "the plan's [upload] credentials"
                )))
            }
            None => format!(
                "upload: {}",
                aws_error::one_line(
                    &format!("store {} unreachable or failing", store.url),
                    &format!("{e}"),
                    "store",
                    store.keys.as_deref(),
                    "the plan's [upload] credentials"
                )
            ),
        };
        if let Some(limit) = options.give_up_after {
            if started.elapsed() + wait >= limit {
                return Err(anyhow::Error::new(UploadPostponed {
                    store: store.url.clone(),
                    run_id: key.run_id.clone(),
                    run_dir: run_dir.to_path_buf(),
                    waited: limit,
                    cause: store::probe(store).await,
                    last: status.trim_start_matches("upload: ").to_string(),
                }));
            }
        }
        crate::notify::status(&format!(
            "{status}; results kept in {}; retrying in {}s",
            run_dir.display(),
            wait.as_secs()
        ));
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(options.max_retry_interval);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run directory, a work directory (both made) and a store folder under `dir`.
    fn run_work_and_store(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
        let (run, work) = (dir.join("run"), dir.join("work"));
        for d in [&run, &work] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        (run, work, dir.join("store"))
    }

    /// A `file://` store at `root` and the run key the tests upload under.
    fn file_store(root: &Path) -> (Store, RunKey) {
        let store = Store::open(&StoreConfig::environment(
            format!("file://{}", root.display()),
            "us-east-1",
        ))
        .expect("store");
        let key = RunKey {
            appliance: "app".into(),
            machine_id: "m".into(),
            run_id: "r-1".into(),
        };
        (store, key)
    }

    #[tokio::test]
    async fn a_verified_stored_copy_is_not_overwritten_by_a_changed_local_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (run, work, root) = run_work_and_store(dir.path());
        std::fs::write(run.join("results.json"), b"{\"tps\": 1542.8}").expect("write");
        std::fs::write(run.join("summary.csv"), b"tps\r\n1542.8\r\n").expect("write");
        let (store, key) = file_store(&root);
        let options = UploadOptions::default();
        upload_run(&store, &key, &run, &work, options)
            .await
            .expect("first upload");
        // results.json regenerated here after local damage: not the one stored.
        std::fs::write(run.join("results.json"), b"{\"tps\": 1542.7}").expect("write");
        let err = format!(
            "{:#}",
            upload_run(&store, &key, &run, &work, options)
                .await
                .expect_err("a verified copy is not replaced")
        );
        assert!(
            err.contains("refusing to overwrite") && err.contains("results.json"),
            "{err}"
        );
        let stored = root.join("app/m/r-1");
        assert_eq!(
            std::fs::read(stored.join("results.json")).expect("stored"),
            b"{\"tps\": 1542.8}"
        );
        assert!(stored.join(MANIFEST).exists(), "the stored run stays whole");
        assert_eq!(
            std::fs::read(run.join("results.json")).expect("local"),
            b"{\"tps\": 1542.7}"
        );
        // A stored copy that is itself damaged is still repaired from the files here.
        std::fs::write(stored.join("results.json"), b"{\"tps\": 0}").expect("damage");
        let repaired = upload_run(&store, &key, &run, &work, options)
            .await
            .expect("repair");
        assert!(repaired.repaired.contains_key("results.json"));
        assert_eq!(
            std::fs::read(stored.join("results.json")).expect("stored"),
            b"{\"tps\": 1542.7}"
        );
    }

    #[tokio::test]
    async fn an_upload_with_a_garbage_upload_state_sets_it_aside_and_completes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (run, work, root) = run_work_and_store(dir.path());
        std::fs::write(run.join("results.json"), b"{}").expect("write");
        std::fs::write(journal_path(&work), b"\0garbage").expect("garbage");
        let (store, key) = file_store(&root);
        upload_run(&store, &key, &run, &work, UploadOptions::default())
            .await
            .expect("the upload starts over");
        assert!(root.join("app/m/r-1").join(MANIFEST).exists());
        assert_eq!(
            std::fs::read(work.join("upload-state.json.unreadable")).expect("set aside"),
            b"\0garbage"
        );
    }

    #[test]
    fn a_machine_id_that_is_not_a_plain_name_is_passed_over() {
        let s = |v: &str| Some(v.to_string());
        assert_eq!(machine_id_from([s("0a1b2c\n"), s("host")]), "0a1b2c");
        assert_eq!(machine_id_from([s("../../victim\n"), s("host\n")]), "host");
        assert_eq!(machine_id_from([s("a/b"), s("")]), "unknown");
        assert_eq!(machine_id_from([None, s("web-1.example")]), "web-1.example");
    }

    #[test]
    fn a_garbage_upload_journal_is_set_aside_and_the_upload_starts_over() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = journal_path(dir.path());
        std::fs::write(&path, b"{ not json").expect("write");
        assert_eq!(read_upload_journal(&path), UploadJournal::default());
        assert!(!path.exists());
        let aside = dir.path().join("upload-state.json.unreadable");
        assert_eq!(std::fs::read(&aside).expect("set aside"), b"{ not json");
        // A second one does not overwrite the first.
        std::fs::write(&path, b"[]").expect("write");
        assert_eq!(read_upload_journal(&path), UploadJournal::default());
        assert!(dir.path().join("upload-state.json.unreadable.2").exists());
        assert_eq!(std::fs::read(&aside).expect("kept"), b"{ not json");
    }
}
