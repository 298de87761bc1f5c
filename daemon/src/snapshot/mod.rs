//! Dataset snapshots (docs/plan.md, `[dataset]`), the library: a snapshot's key ([`key`]),
//! its manifest of sizes and sha256s ([`manifest`]), the local snapshot and restore
//! ([`local`]: reflinks or a parallel copy) and the object store's copy ([`store`]). It
//! knows no step, journal or run context: the dataset step (`steps/dataset/snapshot.rs`)
//! decides when to take, share and restore one.

pub mod copy;
pub mod key;
pub mod local;
pub mod manifest;
pub mod store;

use anyhow::{Context as _, Result};

use crate::postgres::cluster::SUPERUSER;
use crate::postgres::sql::Session;
use crate::postgres::Cluster;
use copy::Owner;
use key::SnapshotKey;
use local::Corrupt;

pub(crate) const SOURCE_GENERATED: &str = "generated";
pub(crate) const SOURCE_LOCAL: &str = "snapshot:local";
pub(crate) const SOURCE_STORE: &str = "snapshot:store";

/// The key of the running server's data directory holding the dataset `dataset` (the
/// journal's spec).
pub(crate) async fn current_key(cluster: &Cluster, dataset: &str) -> Result<SnapshotKey> {
    let controldata = key::parse_controldata(&cluster.controldata().await?)?;
    let s = Session::connect(&cluster.socket_dir(), cluster.port, SUPERUSER, "postgres").await?;
    let row = s
        .rows("SELECT pg_encoding_to_char(encoding), datcollate, datctype FROM pg_database WHERE datname = 'template0'")
        .await?;
    let row = row
        .into_iter()
        .next()
        .context("the server has no template0 database")?;
    let field = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
    Ok(SnapshotKey {
        postgres_major: cluster.bin.major,
        controldata,
        architecture: std::env::consts::ARCH.to_string(),
        encoding: field(0),
        lc_collate: field(1),
        lc_ctype: field(2),
        dataset: dataset.to_string(),
    })
}

/// Who owns the restored files: the data directory's owner (or the cluster's user).
pub(crate) fn owner_for(cluster: &Cluster) -> Result<Option<Owner>> {
    let data = cluster.data_dir();
    if data.exists() {
        return Owner::of(&data).map(Some);
    }
    match &cluster.os_user {
        Some(u) => {
            let id = crate::sys::lookup_user(u)?;
            Ok(Some(Owner {
                uid: id.uid,
                gid: id.gid,
            }))
        }
        None => Ok(None),
    }
}

/// The room a restore asks for before it keeps the directory it replaced for the next
/// restore (`local::retire`): twice the dataset (the points may grow the data by its size
/// and still leave as much), three times when a local snapshot of it is still to be taken.
pub(crate) fn room_to_keep(dataset_bytes: u64, snapshot_to_come: bool) -> u64 {
    dataset_bytes.saturating_mul(if snapshot_to_come { 3 } else { 2 })
}

/// Of a stopped cluster: whether data checksums are on and the WAL segment of its
/// shutdown checkpoint; refused unless it was stopped cleanly.
pub(crate) async fn stopped_state(cluster: &Cluster) -> Result<(bool, String)> {
    let text = cluster.controldata().await?;
    let state = key::parse_cluster_state(&text).unwrap_or_default();
    if state != "shut down" {
        anyhow::bail!(
            "{} is in state \"{state}\", not \"shut down\": only a cleanly stopped data directory is snapshotted",
            cluster.data_dir().display()
        );
    }
    let checksums = key::parse_controldata(&text)?
        .get("checksum_version")
        .is_some_and(|v| v != "0");
    let redo = key::parse_redo_wal_file(&text)
        .context("pg_controldata printed no \"Latest checkpoint's REDO WAL file\" line")?;
    Ok((checksums, redo))
}

/// Whether `e` is (or was caused by) a corrupt snapshot.
pub(crate) fn is_corrupt(e: &anyhow::Error) -> Option<&Corrupt> {
    e.downcast_ref::<Corrupt>()
}
