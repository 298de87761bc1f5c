//! What makes a data directory reusable somewhere else: the snapshot key. Two data
//! directories with equal keys hold the same dataset in the same on-disk format, so one can
//! be put in place of the other. The id of a snapshot is a digest of its key.

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The pg_controldata lines that fix the on-disk format, and the key field each becomes.
const CONTROLDATA_FIELDS: &[(&str, &str)] = &[
    ("Catalog version number", "catalog_version"),
    ("Database block size", "block_size"),
    ("Blocks per segment of large relation", "segment_blocks"),
    ("WAL block size", "wal_block_size"),
    ("Bytes per WAL segment", "wal_segment_bytes"),
    ("Maximum data alignment", "max_data_alignment"),
    ("Data page checksum version", "checksum_version"),
];

/// Everything a data directory's reuse depends on, as named strings (a key that differs in
/// anything is another key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotKey {
    /// PostgreSQL's major version.
    pub postgres_major: u32,
    /// From pg_controldata: catalog version, block size, segment size, WAL block size, WAL
    /// segment size, alignment, checksum version.
    pub controldata: BTreeMap<String, String>,
    /// The machine's architecture (`x86_64`, `aarch64`).
    pub architecture: String,
    /// initdb's encoding and locale (template0's encoding, collation and ctype).
    pub encoding: String,
    pub lc_collate: String,
    pub lc_ctype: String,
    /// The journal's dataset spec (kind, database, scale, fillfactor, tables).
    pub dataset: String,
}

impl SnapshotKey {
    /// Every field as `name = value`, in a fixed order.
    pub(crate) fn fields(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        m.insert("postgres_major".into(), self.postgres_major.to_string());
        for (k, v) in &self.controldata {
            m.insert(k.clone(), v.clone());
        }
        m.insert("architecture".into(), self.architecture.clone());
        m.insert("encoding".into(), self.encoding.clone());
        m.insert("lc_collate".into(), self.lc_collate.clone());
        m.insert("lc_ctype".into(), self.lc_ctype.clone());
        m.insert("dataset".into(), self.dataset.clone());
        m
    }

    /// The snapshot id: the first 20 hex digits of the sha256 of the fields.
    pub(crate) fn id(&self) -> String {
        let mut h = Sha256::new();
        for (k, v) in self.fields() {
            h.update(k.as_bytes());
            h.update(b"=");
            h.update(v.as_bytes());
            h.update(b"\n");
        }
        let hex = format!("{:x}", h.finalize());
        hex[..20].to_string()
    }

    /// What differs from `other`, one `name: ours ≠ theirs` per field (empty: the same).
    pub(crate) fn differences(&self, other: &SnapshotKey) -> Vec<String> {
        let (a, b) = (self.fields(), other.fields());
        let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .filter(|n| a.get(*n) != b.get(*n))
            .map(|n| {
                format!(
                    "{n}: {} ≠ {}",
                    a.get(n).map_or("(none)", String::as_str),
                    b.get(n).map_or("(none)", String::as_str)
                )
            })
            .collect()
    }
}

/// The format fields of `pg_controldata` output (run with `LC_ALL=C`); an error names the
/// line that is missing.
pub(crate) fn parse_controldata(text: &str) -> Result<BTreeMap<String, String>> {
    let lines: BTreeMap<&str, &str> = text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    let mut out = BTreeMap::new();
    for (label, name) in CONTROLDATA_FIELDS {
        match lines.get(label) {
            Some(v) if !v.is_empty() => {
                out.insert(name.to_string(), v.to_string());
            }
            _ => bail!("pg_controldata printed no \"{label}\" line"),
        }
    }
    Ok(out)
}

/// The cluster state pg_controldata reports (`shut down` after a clean stop).
pub(crate) fn parse_cluster_state(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim() == "Database cluster state")
        .map(|(_, v)| v.trim().to_string())
}

/// The WAL segment file holding the latest checkpoint's redo point: after a clean stop, the
/// only WAL a data directory needs (the others are recycled segments).
pub(crate) fn parse_redo_wal_file(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim() == "Latest checkpoint's REDO WAL file")
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| is_wal_segment(v))
}

/// A WAL segment file name (24 hex digits).
pub(crate) fn is_wal_segment(name: &str) -> bool {
    name.len() == 24 && name.chars().all(|c| c.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PG15: &str = "pg_control version number:            1300
Catalog version number:               202209061
Database system identifier:           7335195823465783491
Database cluster state:               shut down
Latest checkpoint's REDO WAL file:    00000001000000000000002A
pg_control last modified:             Tue 01 Dec 2026 07:11:02 PM UTC
Database block size:                  8192
Blocks per segment of large relation: 131072
WAL block size:                       8192
Bytes per WAL segment:                16777216
Maximum length of identifiers:        64
Maximum data alignment:               8
Data page checksum version:           0
";

    fn key(controldata: &str) -> SnapshotKey {
        SnapshotKey {
            postgres_major: 15,
            controldata: parse_controldata(controldata).expect("parse"),
            architecture: "x86_64".into(),
            encoding: "UTF8".into(),
            lc_collate: "C".into(),
            lc_ctype: "C".into(),
            dataset: "db=pgbench scale=50 fillfactor=100 init=Parallel".into(),
        }
    }

    #[test]
    fn controldata_fields_are_read_and_a_missing_one_is_named() {
        let f = parse_controldata(PG15).expect("parse");
        assert_eq!(f["catalog_version"], "202209061");
        assert_eq!(f["segment_blocks"], "131072");
        assert_eq!(f["checksum_version"], "0");
        assert_eq!(f.len(), CONTROLDATA_FIELDS.len());
        assert_eq!(parse_cluster_state(PG15).as_deref(), Some("shut down"));
        assert_eq!(
            parse_redo_wal_file(PG15).as_deref(),
            Some("00000001000000000000002A")
        );
        assert_eq!(
            parse_redo_wal_file("Latest checkpoint's REDO WAL file: x"),
            None
        );
        let err = parse_controldata(&PG15.replace("WAL block size", "WAL blocksize"))
            .expect_err("missing line");
        assert!(err.to_string().contains("\"WAL block size\""), "{err}");
    }

    #[test]
    fn the_id_follows_every_field_and_differences_are_named() {
        let a = key(PG15);
        assert_eq!(a.id(), key(PG15).id());
        assert_eq!(a.id().len(), 20);
        assert!(a.differences(&key(PG15)).is_empty());
        let b = key(&PG15.replace(
            "Data page checksum version:           0",
            "Data page checksum version:           1",
        ));
        assert_ne!(a.id(), b.id());
        assert_eq!(a.differences(&b), ["checksum_version: 0 ≠ 1"]);
        let mut c = a.clone();
        c.architecture = "aarch64".into();
        c.dataset = c.dataset.replace("scale=50", "scale=51");
        assert_ne!(a.id(), c.id());
        let d = a.differences(&c);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].starts_with("architecture: x86_64 ≠ aarch64"), "{d:?}");
        assert!(d[1].contains("scale=50"), "{d:?}");
    }
}
