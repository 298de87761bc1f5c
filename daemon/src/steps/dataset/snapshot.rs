//! The dataset step's snapshots (docs/plan.md, `[dataset]`): after the dataset step the stopped data
//! directory is kept as a local snapshot ([`local`]: reflinks or a parallel copy, a
//! manifest of sizes and sha256s), optionally shared through the object store ([`store`])
//! under its key ([`key`]); a later dataset step with the same key restores instead of
//! generating, and the data directory is put back before a sweep point when `[dataset]
//! restore` says (and for a checksum variant). A restore is journaled: one interrupted is
//! redone at the next start. Which of these runs when is decided by the dataset's phases
//! ([`super::phase`]); this file carries them out.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context as _, Result};

use crate::results::DatasetInfo;
use crate::snapshot::store as snapstore;
use crate::snapshot::{
    copy, is_corrupt, key, local, manifest, owner_for, room_to_keep, stopped_state, SOURCE_LOCAL,
    SOURCE_STORE,
};
use crate::steps::Context;
use crate::upload::{Store, StoreConfig};
use copy::Hashing;
use key::SnapshotKey;
use local::Corrupt;
use manifest::{Manifest, MANIFEST_FILE};

/// Where this run keeps snapshots.
pub(crate) fn root(cx: &Context) -> Result<PathBuf> {
    Ok(cx.host.snapshot_root(cx.server()?))
}

/// The store snapshots are shared through, when the plan shares them.
pub(crate) fn store_url(cx: &Context) -> Option<String> {
    cx.plan.dataset.snapshot_store_url(&cx.store_url())
}

fn open_store(cx: &Context, url: &str) -> Result<Store> {
    let mut cfg = StoreConfig::from_plan(&cx.plan.upload, Some(url));
    if let Some(e) = &cx.upload.overrides.endpoint {
        cfg.endpoint = Some(e.clone());
    }
    Store::open(&cfg)
}

/// Removes the directory the last restore replaced (kept for the next restore,
/// `local::retire`) when no restore is to come: at the end of the sweep, and before a
/// dataset is generated (which needs the room).
pub(crate) async fn discard_spare(cx: &Context) -> Result<()> {
    let spare = local::restoring_dir(&cx.server()?.data_dir());
    if !spare.exists() {
        return Ok(());
    }
    tracing::debug!(spare = %spare.display(), "removing the directory kept for restores");
    tokio::task::spawn_blocking(move || local::discard(Some(&spare)))
        .await
        .context("the clean-up thread")?
}

/// Puts local snapshot `id` back as the data directory: the server stopped, the restore
/// journaled, the server started again. Returns the seconds it took.
pub(crate) async fn restore_local(
    cx: &mut Context,
    id: &str,
    hashing: Hashing,
) -> Result<(f64, copy::CopyOutcome)> {
    let cluster = cx.server()?.clone();
    let dir = local::snapshot_dir(&root(cx)?, id);
    let manifest = match Manifest::load(&dir) {
        Ok(m) => m,
        Err(e) => {
            cx.journal.update(|s| s.dataset.restoring = None)?;
            return Err(Corrupt {
                id: id.to_string(),
                problems: vec![format!("{e:#}")],
            }
            .into());
        }
    };
    cx.journal
        .update(|s| s.dataset.restoring = Some(id.to_string()))?;
    crate::faults::point("restore-journaled");
    crate::notify::status(&format!("dataset: restoring snapshot {id}"));
    let t0 = Instant::now();
    cluster.stop().await?;
    let owner = owner_for(&cluster)?;
    let data = cluster.data_dir();
    let restored =
        tokio::task::spawn_blocking(move || local::restore(&dir, &manifest, &data, owner, hashing))
            .await
            .context("the restore thread")?;
    let restored = match restored {
        Ok(r) => r,
        Err(e) => {
            // The data directory is the one the restore would have replaced.
            cluster.start().await?;
            cx.journal.update(|s| s.dataset.restoring = None)?;
            return Err(e);
        }
    };
    let raw = cx.raw();
    cx.host
        .label_data_dir(&cx.plan.storage.mount_point, "restore", &raw)
        .await?;
    cluster.start().await?;
    cx.journal.update(|s| {
        s.dataset.restoring = None;
        s.dataset.changed_by = None;
        s.dataset.changed_by_warmup = false;
    })?;
    let (replaced, room) = (
        restored.replaced.clone(),
        room_to_keep(restored.copy.bytes, false),
    );
    tokio::task::spawn_blocking(move || local::retire(replaced.as_deref(), room))
        .await
        .context("the clean-up thread")??;
    let secs = t0.elapsed().as_secs_f64();
    tracing::info!(
        snapshot = id,
        seconds = secs,
        reflinked = restored.copy.reflinked,
        copied = restored.copy.copied,
        bytes = restored.copy.bytes,
        "data directory restored from the snapshot"
    );
    Ok((secs, restored.copy))
}

fn restored_info(cx: &Context, source: &str, id: &str, secs: f64, how: String) -> DatasetInfo {
    let d = &cx.plan.dataset;
    DatasetInfo {
        database: d.database.clone(),
        scale: d.scale,
        fillfactor: d.fillfactor,
        init_mode: format!("{:?}", d.init).to_lowercase(),
        command: how,
        wall_s: secs,
        init: None,
        source: Some(source.to_string()),
        snapshot: Some(id.to_string()),
    }
}

/// The complete local snapshot with `key`, when there is one (its id). Unless `quiet`, the
/// log names why each other local snapshot is not used.
pub(crate) fn local_snapshot(
    cx: &Context,
    key: &SnapshotKey,
    quiet: bool,
) -> Result<Option<String>> {
    let root = root(cx)?;
    let id = key.id();
    if !quiet {
        for (dir, m) in local::list(&root) {
            match m {
                Ok(m) if m.id == id => {}
                Ok(m) => tracing::info!(
                    snapshot = %dir.display(),
                    differences = %key.differences(&m.key).join("; "),
                    "a local snapshot with another key is not used"
                ),
                Err(e) => {
                    tracing::warn!(snapshot = %dir.display(), error = %format!("{e:#}"), "a local snapshot whose manifest does not read is not used")
                }
            }
        }
    }
    Ok(local::snapshot_dir(&root, &id)
        .join(MANIFEST_FILE)
        .exists()
        .then_some(id))
}

/// The dataset made from local snapshot `id` (every file checked). None when the snapshot
/// is corrupt: it is removed (the log says why).
pub(crate) async fn restore_from_local(cx: &mut Context, id: &str) -> Result<Option<DatasetInfo>> {
    match restore_local(cx, id, Hashing::Always).await {
        Ok((secs, copy)) => {
            cx.journal.update(|s| {
                s.dataset.snapshot = Some(id.to_string());
                s.dataset.source = Some(SOURCE_LOCAL.into());
            })?;
            let how = format!(
                "restore of local snapshot {id} ({} files reflinked, {} copied, {} bytes)",
                copy.reflinked, copy.copied, copy.bytes
            );
            Ok(Some(restored_info(cx, SOURCE_LOCAL, id, secs, how)))
        }
        Err(e) if is_corrupt(&e).is_some() => {
            drop_corrupt(cx, id, &e, Forget::Nothing)?;
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The dataset made from the store's snapshot with `key` (streamed into the data
/// directory's place, every file checked). None when the store has none that can be used
/// (the log says why): the dataset is generated.
pub(crate) async fn restore_from_store(
    cx: &mut Context,
    url: &str,
    key: &SnapshotKey,
) -> Result<Option<DatasetInfo>> {
    let id = key.id();
    let store = match open_store(cx, url) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(store = %url, error = %format!("{e:#}"), "the snapshot store cannot be opened: generating");
            return Ok(None);
        }
    };
    let found = match snapstore::find(&store, key).await {
        Ok(Some(m)) => m,
        Ok(None) => {
            tracing::info!(store = %url, snapshot = %id, "the store has no snapshot with this key: generating");
            return Ok(None);
        }
        Err(e) => {
            tracing::warn!(store = %url, error = %format!("{e:#}"), "looking for a snapshot in the store failed: generating");
            return Ok(None);
        }
    };
    crate::notify::status(&format!("dataset: downloading snapshot {id} from {url}"));
    let t0 = Instant::now();
    let cluster = cx.server()?.clone();
    let owner = owner_for(&cluster)?;
    let data = cluster.data_dir();
    let tmp = local::restoring_dir(&data);
    cluster.stop().await?;
    // Streamed straight into the restored directory's place, every file checked.
    let unpacked =
        snapstore::download_into(&store, &found, &tmp, owner, snapstore::transfer_threads())
            .await
            .map(drop);
    let replaced = match unpacked.and_then(|()| local::install(&tmp, &data, &found.dirs)) {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            cluster.start().await?;
            let text = format!("the store's snapshot {id} is not used ({e:#}): generating instead");
            tracing::warn!("{text}");
            crate::notify::status(&format!("dataset: {text}"));
            return Ok(None);
        }
    };
    let raw = cx.raw();
    cx.host
        .label_data_dir(&cx.plan.storage.mount_point, "restore", &raw)
        .await?;
    cluster.start().await?;
    let secs = t0.elapsed().as_secs_f64();
    let room = room_to_keep(found.total_bytes(), cx.plan.dataset.keeps_snapshot());
    tokio::task::spawn_blocking(move || local::retire(replaced.as_deref(), room))
        .await
        .context("the clean-up thread")??;
    cx.journal.update(|s| {
        s.dataset.source = Some(SOURCE_STORE.into());
        // No local copy yet: the plan's is taken next (the copy the sweep restores from).
        s.dataset.snapshot = None;
        s.dataset.snapshot_stored = Some(url.to_string());
        s.dataset.changed_by = None;
    })?;
    tracing::info!(snapshot = %id, seconds = secs, bytes = found.total_bytes(), "data directory restored from the store's snapshot");
    let how = format!(
        "download of snapshot {id} from {url}, {} bytes unpacked",
        found.total_bytes()
    );
    Ok(Some(restored_info(cx, SOURCE_STORE, &id, secs, how)))
}

/// Keeps the freshly generated dataset as a local snapshot (server stopped meanwhile).
pub(crate) async fn keep(cx: &mut Context, key: &SnapshotKey) -> Result<String> {
    let cluster = cx.server()?.clone();
    let root = root(cx)?;
    crate::notify::status("dataset: taking the snapshot");
    let t0 = Instant::now();
    cluster.stop().await?;
    let (checksums, redo) = match stopped_state(&cluster).await {
        Ok(s) => s,
        Err(e) => {
            cluster.start().await?;
            return Err(e);
        }
    };
    let (data, k) = (cluster.data_dir(), key.clone());
    let taken =
        tokio::task::spawn_blocking(move || local::take(&data, &root, &k, checksums, &redo))
            .await
            .context("the snapshot thread");
    cluster.start().await?;
    let (manifest, copy) = taken??;
    cx.journal
        .update(|s| s.dataset.snapshot = Some(manifest.id.clone()))?;
    tracing::info!(
        snapshot = %manifest.id,
        seconds = t0.elapsed().as_secs_f64(),
        files = manifest.files.len(),
        bytes = manifest.total_bytes(),
        reflinked = copy.reflinked,
        copied = copy.copied,
        "snapshot of the dataset taken"
    );
    Ok(manifest.id)
}

/// Uploads the local snapshot to the plan's snapshot store unless it is there (resuming an
/// interrupted upload). A failure is logged: the run goes on, the next start tries again.
pub(crate) async fn share(cx: &mut Context) -> Result<()> {
    let Some(url) = store_url(cx) else {
        return Ok(());
    };
    let Some(id) = cx.journal.state.state.dataset.snapshot.clone() else {
        return Ok(());
    };
    if cx.journal.state.state.dataset.snapshot_stored.as_deref() == Some(url.as_str()) {
        return Ok(());
    }
    let dir = local::snapshot_dir(&root(cx)?, &id);
    let manifest = Manifest::load(&dir)?;
    let store = match open_store(cx, &url) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(store = %url, error = %format!("{e:#}"), "the snapshot store cannot be opened: the snapshot stays local");
            return Ok(());
        }
    };
    crate::notify::status(&format!("dataset: uploading snapshot {id} to {url}"));
    let resume = cx.journal.state.state.dataset.snapshot_upload.clone();
    let resumed = resume.is_some();
    let t0 = Instant::now();
    let journal = &mut cx.journal;
    let result = snapstore::upload(
        &store,
        &dir,
        &manifest,
        resume,
        snapstore::transfer_threads(),
        &mut |p| journal.update(|s| s.dataset.snapshot_upload = p.cloned()),
    )
    .await;
    match result {
        Ok(stored) => {
            cx.journal
                .update(|s| s.dataset.snapshot_stored = Some(url.clone()))?;
            tracing::info!(
                snapshot = %id,
                store = %url,
                seconds = t0.elapsed().as_secs_f64(),
                compressed = stored.stored_bytes(),
                bytes = manifest.total_bytes(),
                "snapshot uploaded and read back"
            );
        }
        Err(e) => {
            if resumed {
                // The multipart upload it resumed may be gone (aborted, expired by a
                // lifecycle rule): the next start begins a new one rather than retry it forever.
                cx.journal.update(|s| s.dataset.snapshot_upload = None)?;
            }
            let text =
                format!("the snapshot's upload to {url} failed: {e:#}; the next start tries again");
            tracing::warn!("{text}");
            crate::notify::status(&format!("dataset: {text}"));
        }
    }
    Ok(())
}

/// Before point `point`: puts the data directory back from snapshot `id` (sizes checked
/// only: its files were checked in full when it was taken or first restored). A corrupt
/// snapshot is removed and the journal forgets the datasets it held, so they are made again.
pub(crate) async fn put_back(cx: &mut Context, point: &str, id: &str, reason: &str) -> Result<()> {
    tracing::info!(point = %point, snapshot = %id, why = %reason, "restoring the data directory");
    match restore_local(cx, id, Hashing::Never).await {
        Ok(_) => Ok(()),
        Err(e) if is_corrupt(&e).is_some() => drop_corrupt(cx, id, &e, Forget::Datasets),
        Err(e) => Err(e),
    }
}

/// What the journal forgets when a snapshot is found corrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Forget {
    /// Nothing: the data directory was not touched and nothing was recorded from it.
    Nothing,
    /// The datasets the data directory held: a point (or an interrupted restore) changed
    /// them, and the snapshot that would have put them back is gone, so they are made again.
    Datasets,
}

/// Snapshot `id` found corrupt (error `e`): the log and the unit's status say why, its
/// directory is removed, and the journal forgets what `forget` says. The one route for
/// every restore that finds a snapshot corrupt.
pub(crate) fn drop_corrupt(
    cx: &mut Context,
    id: &str,
    e: &anyhow::Error,
    forget: Forget,
) -> Result<()> {
    let then = match forget {
        Forget::Nothing => "the dataset is generated",
        Forget::Datasets => "the datasets are generated again",
    };
    let text = format!("snapshot {id} is not used, {e:#}; it is removed and {then}");
    tracing::warn!("{text}");
    crate::notify::status(&format!("dataset: {text}"));
    let dir = local::snapshot_dir(&root(cx)?, id);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    if forget == Forget::Datasets {
        cx.journal.update(|s| {
            s.dataset.snapshot = None;
            s.dataset.restoring = None;
            s.dataset.spec = None;
            s.dataset.tpcc.clear();
            s.dataset.changed_by = None;
            s.dataset.changed_by_warmup = false;
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::plan::RestorePolicy;

    #[test]
    fn the_plan_says_when_a_snapshot_is_kept_and_refuses_contradictions() {
        let text = |dataset: &str| {
            format!(
                "[appliance]\nname = \"t\"\nplatform = \"debian12\"\n[postgres]\n[tuning]\n[dataset]\nscale = 1\n{dataset}\n\
                 [[workloads]]\nname = \"w\"\nclients = [1]\ntransactions = 10\n"
            )
        };
        let parse = |dataset: &str| crate::plan::Plan::parse(&text(dataset)).expect("plan");
        let problems = |dataset: &str| -> Vec<String> {
            match crate::plan::Plan::parse(&text(dataset)) {
                Ok(_) => Vec::new(),
                Err(issues) => issues
                    .into_iter()
                    .map(|i| format!("{}: {}", i.key, i.message))
                    .collect(),
            }
        };
        assert!(!parse("").dataset.keeps_snapshot());
        assert_eq!(parse("").dataset.restore, RestorePolicy::Never);
        assert!(parse("restore = \"each-point\"").dataset.keeps_snapshot());
        assert!(parse("snapshot_store = true").dataset.keeps_snapshot());
        assert!(!parse("snapshot_store = false").dataset.keeps_snapshot());
        assert!(parse("snapshot = true").dataset.keeps_snapshot());
        assert_eq!(
            parse("snapshot_store = true")
                .dataset
                .snapshot_store_url("s3://b/p"),
            Some("s3://b/p".into())
        );
        assert_eq!(
            parse("snapshot_store = \"s3://snaps/fleet\"")
                .dataset
                .snapshot_store_url("s3://b/p"),
            Some("s3://snaps/fleet".into())
        );
        assert!(problems("restore = \"each-workload\"\nsnapshot_store = true").is_empty());
        let p = problems("restore = \"each-point\"\nsnapshot = false");
        assert!(
            p.iter()
                .any(|p| p.contains("dataset.snapshot") && p.contains("restore")),
            "{p:?}"
        );
        let p = problems("snapshot = false\nsnapshot_store = true");
        assert!(
            p.iter().any(|p| p.contains("snapshot_store shares")),
            "{p:?}"
        );
        let p = problems("snapshot_store = \"s4://x\"");
        assert!(
            p.iter()
                .any(|p| p.contains("dataset.snapshot_store") && p.contains("not a store URL")),
            "{p:?}"
        );
        let p = problems("restore = \"always\"");
        assert!(p.iter().any(|p| p.contains("dataset.restore")), "{p:?}");
    }
}
