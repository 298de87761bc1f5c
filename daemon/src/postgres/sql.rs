//! SQL sessions with the cluster (tokio-postgres over the Unix socket).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;
use tokio_postgres::{Client, NoTls};

/// A connected session; the connection task ends when the client is dropped.
pub(crate) struct Session {
    client: Client,
    target: String,
}

impl Session {
    pub(crate) async fn connect(
        socket_dir: &Path,
        port: u16,
        user: &str,
        dbname: &str,
    ) -> Result<Self> {
        let target = format!("{dbname} on {}:{port}", socket_dir.display());
        let mut cfg = tokio_postgres::Config::new();
        cfg.host_path(socket_dir)
            .port(port)
            .user(user)
            .dbname(dbname)
            .application_name("pgappliance");
        let (client, connection) = cfg
            .connect(NoTls)
            .await
            .with_context(|| format!("connecting to {target}"))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "database connection closed");
            }
        });
        Ok(Session { client, target })
    }

    /// The underlying client, for COPY.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) async fn execute(&self, sql: &str) -> Result<()> {
        self.client
            .batch_execute(sql)
            .await
            .with_context(|| format!("`{sql}` on {}", self.target))
    }

    /// The rows of a simple-protocol query (all values as text).
    async fn simple_rows(&self, sql: &str) -> Result<Vec<tokio_postgres::SimpleQueryRow>> {
        let messages = self
            .client
            .simple_query(sql)
            .await
            .with_context(|| format!("`{sql}` on {}", self.target))?;
        Ok(messages
            .into_iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => Some(r),
                _ => None,
            })
            .collect())
    }

    /// First column of every row, as text.
    pub(crate) async fn column(&self, sql: &str) -> Result<Vec<Option<String>>> {
        Ok(self
            .simple_rows(sql)
            .await?
            .iter()
            .map(|r| r.get(0).map(str::to_string))
            .collect())
    }

    /// One value (first column of the first row).
    pub(crate) async fn value(&self, sql: &str) -> Result<Option<String>> {
        Ok(self.column(sql).await?.into_iter().next().flatten())
    }

    /// All rows as text columns.
    pub(crate) async fn rows(&self, sql: &str) -> Result<Vec<Vec<Option<String>>>> {
        Ok(self
            .simple_rows(sql)
            .await?
            .iter()
            .map(|r| (0..r.len()).map(|i| r.get(i).map(str::to_string)).collect())
            .collect())
    }

    /// All rows as column name → text (NULLs left out).
    pub(crate) async fn named_rows(&self, sql: &str) -> Result<Vec<BTreeMap<String, String>>> {
        Ok(self
            .simple_rows(sql)
            .await?
            .iter()
            .map(|r| {
                r.columns()
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| Some((c.name().to_string(), r.get(i)?.to_string())))
                    .collect()
            })
            .collect())
    }

    /// The server's settings that differ from their built-in defaults.
    pub(crate) async fn effective_settings(&self) -> Result<Vec<Setting>> {
        let rows = self
            .rows(
                "SELECT name, setting, unit, source, pending_restart::text FROM pg_settings \
                 WHERE source <> 'default' ORDER BY name",
            )
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| Setting {
                name: r.first().cloned().flatten().unwrap_or_default(),
                setting: r.get(1).cloned().flatten().unwrap_or_default(),
                unit: r.get(2).cloned().flatten(),
                source: r.get(3).cloned().flatten().unwrap_or_default(),
                pending_restart: r.get(4).cloned().flatten().as_deref() == Some("true"),
            })
            .collect())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub(crate) struct Setting {
    pub(crate) name: String,
    pub(crate) setting: String,
    pub(crate) unit: Option<String>,
    pub(crate) source: String,
    pub(crate) pending_restart: bool,
}

/// The number of rows of `table` in database `db`, as text; None when the database or the
/// table is not there. Asked in separate queries: a query naming a missing table fails
/// when it is parsed, whatever `CASE WHEN to_regclass(…)` would have guarded it.
pub(crate) async fn rows_in(
    socket_dir: &Path,
    port: u16,
    user: &str,
    db: &str,
    table: &str,
) -> Result<Option<String>> {
    let admin = Session::connect(socket_dir, port, user, "postgres").await?;
    let db_there = admin
        .value(&format!(
            "SELECT 1 FROM pg_database WHERE datname = {}",
            literal(db)
        ))
        .await?
        .is_some();
    drop(admin);
    if !db_there {
        return Ok(None);
    }
    let s = Session::connect(socket_dir, port, user, db).await?;
    let table_there = s
        .value(&format!(
            "SELECT to_regclass({}) IS NOT NULL",
            literal(&ident(table))
        ))
        .await?
        .as_deref()
        == Some("t");
    if !table_there {
        return Ok(None);
    }
    s.value(&format!("SELECT count(*) FROM {}", ident(table)))
        .await
}

/// A string literal for SQL (standard_conforming_strings on).
pub(crate) fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A quoted identifier.
pub(crate) fn ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}
