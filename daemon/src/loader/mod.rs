//! The `parallel` dataset init: exactly the tables `pgbench -i` makes (same columns, types,
//! fillfactor, rows, values, primary keys; vacuumed and analysed), loaded faster:
//!
//! 1. load settings (fsync, full_page_writes and synchronous_commit off, autovacuum off,
//!    `wal_level = minimal`, more maintenance memory and parallel maintenance workers),
//!    applied with a restart — the appliance owns the server while it loads;
//! 2. the small tables with INSERT … SELECT, `pgbench_accounts` with binary COPY over
//!    `degree` connections, each its own range of `aid`; with one connection the table is
//!    created in the loading transaction and COPY runs with FREEZE (no WAL, no vacuum work);
//! 3. VACUUM ANALYZE (FREEZE for pgbench_accounts, which pgbench's COPY FREEZE leaves
//!    frozen too), then the three primary keys built at once (accounts' with parallel
//!    maintenance workers);
//! 4. the plan's settings restored with a restart, an OS-level sync and a CHECKPOINT, so the
//!    dataset is exactly as durable as pgbench's when this returns. From the first COPY on,
//!    a writeback thread keeps the disk writing what the load dirtied (`writeback.rs`), so
//!    that sync finds little left.
//!
//! The journal fact `load_settings` is set while the load settings are in force; a resumed
//! run finds it and restores the plan's settings before anything else.

pub(crate) mod copy;
mod writeback;

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, Result};
use futures::SinkExt;

use crate::postgres::cluster::SUPERUSER;
use crate::postgres::sql::{literal, Session};
use crate::postgres::Cluster;

/// Rows of pgbench_accounts per unit of scale.
pub(crate) const ACCOUNTS_PER_SCALE: u64 = 100_000;
const TELLERS_PER_SCALE: u64 = 10;
/// pgbench switches aid to bigint from this scale on.
const BIGINT_SCALE: u32 = 20_000;

/// Settings in force during the load (name, value). Index builds use every core.
pub(crate) fn load_settings(cores: u32, ram_bytes: u64) -> Vec<(&'static str, String)> {
    let maintenance_mb = (ram_bytes / 8 / (1 << 20)).clamp(64, 4096);
    vec![
        ("fsync", "off".into()),
        ("full_page_writes", "off".into()),
        ("synchronous_commit", "off".into()),
        ("autovacuum", "off".into()),
        ("wal_level", "minimal".into()),
        ("max_wal_senders", "0".into()),
        ("archive_mode", "off".into()),
        ("checkpoint_timeout", "1h".into()),
        ("max_wal_size", "16GB".into()),
        (
            "maintenance_work_mem",
            format!("{}MB", maintenance_mb.max(64)),
        ),
        ("max_parallel_maintenance_workers", cores.max(1).to_string()),
    ]
}

/// How many times the loader runs VACUUM (FREEZE) on pgbench_accounts at most, half a second
/// apart, until every page is all-visible.
const FREEZE_PASSES: u32 = 20;

/// COPY streams for `cores` CPUs when the plan names no degree. Only one stream can load
/// with FREEZE into the table created in its own transaction (no WAL, nothing for VACUUM to
/// do); rows from several streams are WAL-logged and must then be frozen by one VACUUM pass
/// over the whole table, which PostgreSQL does on one core. Measured at scale 50 here: one
/// stream 3.3–3.5 s COPY + 0.3 s VACUUM; two streams 3.8–4.1 s + 2.1–2.3 s. With a stream
/// per two cores, the streams' share shrinks but the VACUUM does not, so several streams pay
/// only from about 8 cores on (docs/performance.md); below that, one.
pub(crate) fn default_degree(cores: u32) -> u32 {
    if cores < 8 {
        1
    } else {
        cores / 2
    }
}

/// What a parallel init did and how long each phase took.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct ParallelInit {
    pub(crate) degree: u32,
    pub(crate) phases: Vec<(String, f64)>,
    pub(crate) total_s: f64,
}

async fn connect(c: &Cluster, db: &str) -> Result<Session> {
    Session::connect(&c.socket_dir(), c.port, SUPERUSER, db).await
}

/// Sets the load settings for `cores` and `ram_bytes` and restarts the server; undone by
/// [`restore_settings`].
pub(crate) async fn apply_load_settings(c: &Cluster, cores: u32, ram_bytes: u64) -> Result<()> {
    apply_settings(c, &load_settings(cores, ram_bytes), None).await
}

/// Sets the load settings (or restores `restore`) and restarts the server.
async fn apply_settings(
    c: &Cluster,
    set: &[(&str, String)],
    restore: Option<&BTreeMap<String, String>>,
) -> Result<()> {
    let s = connect(c, "postgres").await?;
    for (name, value) in set {
        let sql = match restore {
            None => format!("ALTER SYSTEM SET {name} = {}", literal(value)),
            Some(planned) => match planned.get(*name) {
                Some(v) => format!("ALTER SYSTEM SET {name} = {}", literal(v)),
                None => format!("ALTER SYSTEM RESET {name}"),
            },
        };
        s.execute(&sql).await?;
    }
    drop(s);
    c.restart().await
}

/// Puts the plan's settings back after a load (also after an interrupted one): restart,
/// OS-level sync, CHECKPOINT.
pub(crate) async fn restore_settings(
    c: &Cluster,
    cores: u32,
    ram_bytes: u64,
    planned: &BTreeMap<String, String>,
) -> Result<()> {
    apply_settings(c, &load_settings(cores, ram_bytes), Some(planned)).await?;
    // Pages written while fsync was off may sit in the OS cache: flush them all (`syncfs` on
    // the data directory's filesystem), then CHECKPOINT with fsync on, so the dataset is as
    // durable as one pgbench loaded with fsync on.
    let data_dir = c.data_dir();
    tokio::task::spawn_blocking(move || writeback::sync_filesystem(&data_dir))
        .await
        .context("syncing the data directory")??;
    connect(c, "postgres").await?.execute("CHECKPOINT").await
}

/// pgbench's pgbench_accounts has no column defaults: the load's go once the rows are in.
const DROP_LOAD_DEFAULTS: &str =
    "alter table pgbench_accounts alter abalance drop default, alter filler drop default";

fn ddl(scale: u32, fillfactor: u32) -> Vec<String> {
    let aid = if scale >= BIGINT_SCALE {
        "bigint"
    } else {
        "int"
    };
    vec![
        format!("create table pgbench_history(tid int,bid int,aid {aid},delta int,mtime timestamp,filler char(22))"),
        format!("create table pgbench_tellers(tid int not null,bid int,tbalance int,filler char(84)) with (fillfactor={fillfactor})"),
        // The defaults are the loader's (see copy.rs) and dropped once the rows are in.
        format!("create table pgbench_accounts(aid {aid} not null,bid int,abalance int default 0,filler char(84) default '') with (fillfactor={fillfactor})"),
        format!("create table pgbench_branches(bid int not null,bbalance int,filler char(88)) with (fillfactor={fillfactor})"),
    ]
}

/// Loads the pgbench tables into `db` with `degree` connections. The caller has applied
/// nothing; this applies and restores the load settings itself.
/// What to load and with how much of the machine.
#[derive(Debug, Clone)]
pub(crate) struct LoadSpec<'a> {
    pub(crate) database: &'a str,
    pub(crate) scale: u32,
    pub(crate) fillfactor: u32,
    /// Connections loading pgbench_accounts.
    pub(crate) degree: u32,
    /// CPUs, for the parallel index builds.
    pub(crate) cores: u32,
    pub(crate) ram_bytes: u64,
}

pub(crate) async fn parallel_init(
    c: &Cluster,
    spec: &LoadSpec<'_>,
    planned: &BTreeMap<String, String>,
) -> Result<ParallelInit> {
    let LoadSpec {
        database: db,
        scale,
        fillfactor,
        degree,
        cores,
        ram_bytes,
    } = *spec;
    let started = Instant::now();
    let mut phases = Vec::new();
    let mut mark = Instant::now();
    let mut phase = |name: &str, mark: &mut Instant| {
        phases.push((name.to_string(), mark.elapsed().as_secs_f64()));
        *mark = Instant::now();
    };
    let degree = degree.max(1);
    apply_settings(c, &load_settings(cores, ram_bytes), None)
        .await
        .context("applying the load settings")?;
    phase("load settings", &mut mark);
    // From here on every page the load writes goes to the disk while the CPUs keep
    // loading, instead of all at the end (the kernel would otherwise hold gigabytes dirty).
    let writeback = writeback::Writeback::start(c.data_dir())?;

    let s = connect(c, db).await?;
    s.execute(
        "drop table if exists pgbench_accounts, pgbench_branches, pgbench_history, pgbench_tellers",
    )
    .await?;
    let tables = ddl(scale, fillfactor);
    // accounts is created by its loader when one connection loads it (same transaction).
    for (i, t) in tables.iter().enumerate() {
        if i != 2 || degree > 1 {
            s.execute(t).await?;
        }
    }
    let scale64 = u64::from(scale);
    s.execute(&format!(
        "insert into pgbench_branches(bid,bbalance) select bid, 0 from generate_series(1, {scale64}) as bid;\
         insert into pgbench_tellers(tid,bid,tbalance) select tid, (tid - 1) / {TELLERS_PER_SCALE} + 1, 0 \
         from generate_series(1, {}) as tid",
        scale64 * TELLERS_PER_SCALE
    ))
    .await?;
    phase("create tables", &mut mark);

    let total = scale64 * ACCOUNTS_PER_SCALE;
    let bigint = scale >= BIGINT_SCALE;
    // Rows sent by every stream, for the progress line.
    let loaded = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let progress = crate::progress::Progress::start(
        crate::progress::Kind::Load,
        format!("dataset: parallel load of pgbench_accounts over {degree} connections"),
        None,
        Some(crate::progress::Detail::Rows(loaded.clone(), total)),
    );
    let mut loaders = Vec::new();
    for w in 0..u64::from(degree) {
        let from = total * w / u64::from(degree) + 1;
        let to = total * (w + 1) / u64::from(degree);
        let create = (degree == 1).then(|| tables[2].clone());
        let session = connect(c, db).await?;
        let loaded = loaded.clone();
        loaders.push(async move {
            let client = session.client();
            client.batch_execute("begin").await?;
            let freeze = if let Some(create) = &create {
                client.batch_execute(create).await?;
                ", freeze true"
            } else {
                ""
            };
            let sink = client
                .copy_in::<_, bytes::Bytes>(&format!(
                    "copy pgbench_accounts(aid, bid) from stdin (format binary{freeze})"
                ))
                .await?;
            futures::pin_mut!(sink);
            // Rows are encoded on a thread of their own per stream (the daemon's async
            // runtime is single-threaded), a few chunks ahead of the socket.
            let (tx, mut rx) = tokio::sync::mpsc::channel::<(bytes::Bytes, u64)>(4);
            let encoder = tokio::task::spawn_blocking(move || {
                let mut encoder = copy::AccountsEncoder::new(from, to, bigint);
                let mut before = encoder.rows_encoded();
                while let Some(chunk) = encoder.next_chunk(1 << 20) {
                    let rows = encoder.rows_encoded() - before;
                    before = encoder.rows_encoded();
                    if tx.blocking_send((chunk, rows)).is_err() {
                        break;
                    }
                }
            });
            while let Some((chunk, rows)) = rx.recv().await {
                sink.send(chunk).await?;
                loaded.fetch_add(rows, std::sync::atomic::Ordering::Relaxed);
                crate::faults::point("loader-chunk-sent");
            }
            encoder.await.context("the row encoder thread failed")?;
            sink.finish().await?;
            if create.is_some() {
                client.batch_execute(DROP_LOAD_DEFAULTS).await?;
            }
            client.batch_execute("commit").await?;
            Ok::<_, anyhow::Error>(())
        });
    }
    let done = futures::future::try_join_all(loaders).await;
    drop(progress);
    done.context("loading pgbench_accounts")?;
    if degree > 1 {
        s.execute(DROP_LOAD_DEFAULTS).await?;
    }
    phase("generate", &mut mark);

    // pgbench (14 and later) loads pgbench_accounts with COPY FREEZE, so it is frozen when
    // pgbench returns (15's small tables are all-visible but not frozen: measured, and the
    // test compares both). Accounts rows from several
    // streams are frozen by this VACUUM, in the same page writes it makes anyway to set their
    // hint bits; pages COPY FREEZE wrote are all-frozen already and skipped. A long sweep then
    // meets no anti-wraparound VACUUM of the big table that pgbench's would not need.
    s.execute("vacuum analyze pgbench_branches, pgbench_tellers, pgbench_history")
        .await?;
    s.execute("vacuum (freeze, analyze) pgbench_accounts")
        .await?;
    if degree > 1 {
        // Measured on 15: after rows from several COPY streams, the first pass leaves a few
        // dozen pages frozen but not marked all-visible (the test checks every page is);
        // a second pass visits only those.
        s.execute("vacuum (freeze) pgbench_accounts").await?;
    }
    // VACUUM marks a page all-visible (and frozen) only when no snapshot still running could
    // see an older state of it. A snapshot held for a moment elsewhere in the cluster (seen
    // once under load: every page left not all-visible) makes the pass a no-op: pass again,
    // for a while, until every page is, naming what held the horizon.
    for attempt in 1..=FREEZE_PASSES {
        let counts = s
            .value("select relallvisible::text || '/' || relpages::text from pg_class where oid = 'pgbench_accounts'::regclass")
            .await?
            .unwrap_or_default();
        let (visible, pages) = counts.split_once('/').unwrap_or(("0", "0"));
        if visible == pages {
            break;
        }
        let holders = s
            .column("select pid::text || ' ' || coalesce(datname, '-') || ' ' || coalesce(state, '-') || ' xmin ' || backend_xmin::text from pg_stat_activity where backend_xmin is not null and pid <> pg_backend_pid()")
            .await?
            .into_iter()
            .flatten()
            .collect::<Vec<_>>();
        tracing::warn!(
            attempt,
            all_visible = visible,
            pages,
            holders = %holders.join("; "),
            "pgbench_accounts is not all-visible after its VACUUM (FREEZE); vacuuming again"
        );
        if attempt == FREEZE_PASSES {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        s.execute("vacuum (freeze) pgbench_accounts").await?;
    }
    phase("vacuum", &mut mark);

    let mut keys = Vec::new();
    for (table, col) in [
        ("pgbench_accounts", "aid"),
        ("pgbench_branches", "bid"),
        ("pgbench_tellers", "tid"),
    ] {
        let session = connect(c, db).await?;
        keys.push(async move {
            session
                .execute(&format!("alter table {table} add primary key ({col})"))
                .await
        });
    }
    futures::future::try_join_all(keys).await?;
    phase("primary keys", &mut mark);
    drop(s);

    // The restart runs while the writeback thread is still writing the last pages; the
    // sync inside restore_settings covers whatever it has not reached.
    restore_settings(c, cores, ram_bytes, planned)
        .await
        .context("restoring the plan's settings")?;
    writeback
        .stop()
        .await
        .context("writing the loaded tables")?;
    phase("restore settings", &mut mark);
    Ok(ParallelInit {
        degree,
        total_s: started.elapsed().as_secs_f64(),
        phases,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_stream_below_eight_cores_then_one_per_two() {
        let got: Vec<u32> = [1, 2, 4, 7, 8, 32, 80].map(default_degree).to_vec();
        assert_eq!(got, [1, 1, 1, 1, 4, 16, 40]);
    }

    #[test]
    fn load_settings_scale_memory_and_workers() {
        let s: BTreeMap<_, _> = load_settings(80, 256 << 30).into_iter().collect();
        assert_eq!(s["wal_level"], "minimal");
        assert_eq!(s["maintenance_work_mem"], "4096MB");
        assert_eq!(s["max_parallel_maintenance_workers"], "80");
        let s: BTreeMap<_, _> = load_settings(2, 256 << 20).into_iter().collect();
        assert_eq!(s["maintenance_work_mem"], "64MB");
    }
}
