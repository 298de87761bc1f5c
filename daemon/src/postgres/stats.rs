//! Server statistics around a sweep point: snapshots of the cumulative statistics views
//! before and after, their deltas, and WAL bytes from the LSN difference. Checkpoint
//! counters live in `pg_stat_checkpointer` from 17 on, in `pg_stat_bgwriter` before.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::sql::Session;

/// One row of a statistics view, column → text value.
pub(crate) type Row = BTreeMap<String, String>;

#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Snapshot {
    pub(crate) wal_lsn: Option<String>,
    pub(crate) database: Row,
    pub(crate) bgwriter: Row,
    pub(crate) checkpointer: Option<Row>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatsDelta {
    pub(crate) wal_bytes: Option<f64>,
    /// `pg_stat_database` of the dataset's database (commits, rollbacks, blocks read/hit,
    /// tuples, temp files/bytes, deadlocks, block I/O times, …).
    pub(crate) database: BTreeMap<String, f64>,
    pub(crate) bgwriter: BTreeMap<String, f64>,
    /// `pg_stat_checkpointer` (17+); `None` before 17, where checkpoints are in bgwriter.
    pub(crate) checkpointer: Option<BTreeMap<String, f64>>,
}

/// Numeric columns that grew between two rows (after − before). Text columns (names,
/// timestamps) are left out.
pub(crate) fn row_delta(before: &Row, after: &Row) -> BTreeMap<String, f64> {
    after
        .iter()
        .filter_map(|(k, a)| {
            let a: f64 = a.parse().ok()?;
            let b: f64 = before.get(k).and_then(|b| b.parse().ok()).unwrap_or(0.0);
            Some((k.clone(), a - b))
        })
        .filter(|(k, _)| !k.ends_with("id") && k != "numbackends")
        .collect()
}

pub(crate) fn delta(before: &Snapshot, after: &Snapshot, wal_bytes: Option<f64>) -> StatsDelta {
    StatsDelta {
        wal_bytes,
        database: row_delta(&before.database, &after.database),
        bgwriter: row_delta(&before.bgwriter, &after.bgwriter),
        checkpointer: match (&before.checkpointer, &after.checkpointer) {
            (Some(b), Some(a)) => Some(row_delta(b, a)),
            _ => None,
        },
    }
}

async fn one_row(s: &Session, sql: &str) -> Result<Row> {
    let rows = s.named_rows(sql).await?;
    Ok(rows.into_iter().next().unwrap_or_default())
}

pub(crate) async fn snapshot(s: &Session, pg_major: u32) -> Result<Snapshot> {
    Ok(Snapshot {
        wal_lsn: s.value("SELECT pg_current_wal_lsn()::text").await?,
        database: one_row(
            s,
            "SELECT * FROM pg_stat_database WHERE datname = current_database()",
        )
        .await?,
        bgwriter: one_row(s, "SELECT * FROM pg_stat_bgwriter").await?,
        checkpointer: if pg_major >= 17 {
            Some(one_row(s, "SELECT * FROM pg_stat_checkpointer").await?)
        } else {
            None
        },
    })
}

/// Resets the database and shared statistics a point reports, so each point starts clean.
/// Waits (at most `limit`) until no other client backend is connected to this session's
/// database: an exiting backend flushes its statistics before it leaves pg_stat_activity,
/// so after this a snapshot counts every transaction of the clients that just finished.
/// Returns how many were still there when the time ran out (0 normally).
pub(crate) async fn wait_for_other_backends(
    s: &Session,
    limit: std::time::Duration,
) -> Result<u64> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let left: u64 = s
            .value(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
            )
            .await?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if left == 0 || std::time::Instant::now() >= deadline {
            if left > 0 {
                tracing::warn!(
                    backends = left,
                    "client backends still connected when the point's statistics were read"
                );
            }
            return Ok(left);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

pub(crate) async fn reset(s: &Session, pg_major: u32) -> Result<()> {
    s.execute("SELECT pg_stat_reset()").await?;
    s.execute("SELECT pg_stat_reset_shared('bgwriter')").await?;
    if pg_major >= 17 {
        s.execute("SELECT pg_stat_reset_shared('checkpointer')")
            .await?;
    }
    if pg_major >= 14 {
        s.execute("SELECT pg_stat_reset_shared('wal')").await?;
    }
    Ok(())
}

/// WAL bytes between two LSNs, computed by the server.
pub(crate) async fn wal_bytes(s: &Session, from: &str, to: &str) -> Result<Option<f64>> {
    Ok(s.value(&format!(
        "SELECT pg_wal_lsn_diff({}, {})",
        super::sql::literal(to),
        super::sql::literal(from)
    ))
    .await?
    .and_then(|v| v.parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pairs: &[(&str, &str)]) -> Row {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn deltas_of_numeric_columns_only() {
        let before = row(&[
            ("datid", "5"),
            ("datname", "pgbench"),
            ("xact_commit", "100"),
            ("blks_hit", "10"),
        ]);
        let after = row(&[
            ("datid", "5"),
            ("datname", "pgbench"),
            ("xact_commit", "350"),
            ("blks_hit", "40"),
            ("stats_reset", "2026-11-29 21:00:00+00"),
        ]);
        let d = row_delta(&before, &after);
        assert_eq!(d.get("xact_commit"), Some(&250.0));
        assert_eq!(d.get("blks_hit"), Some(&30.0));
        assert!(
            !d.contains_key("datid")
                && !d.contains_key("datname")
                && !d.contains_key("stats_reset")
        );
    }

    #[test]
    fn checkpointer_only_when_both_sides_have_it() {
        let a = Snapshot {
            checkpointer: Some(row(&[("num_timed", "3")])),
            ..Default::default()
        };
        let b = Snapshot {
            checkpointer: Some(row(&[("num_timed", "5")])),
            ..Default::default()
        };
        assert_eq!(
            delta(&a, &b, Some(8.0))
                .checkpointer
                .and_then(|c| c.get("num_timed").copied()),
            Some(2.0)
        );
        assert!(delta(&Snapshot::default(), &b, None).checkpointer.is_none());
    }
}
