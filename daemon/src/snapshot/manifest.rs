//! A snapshot's manifest: its key, and each directory and file of the data directory with
//! mode, size and sha256. Written last (and fsynced) into `<id>.partial`, which is then
//! renamed to `<id>`: a snapshot directory without the `.partial` suffix is complete.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::key::SnapshotKey;

pub const MANIFEST_FILE: &str = "manifest.json";
pub const MANIFEST_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    /// Relative to the data directory ("" is the data directory itself).
    pub path: String,
    pub mode: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Relative to the data directory.
    pub path: String,
    pub mode: u32,
    pub size: u64,
    pub sha256: String,
    /// For a file larger than [`CHUNK_BYTES`]: the sha256 of each chunk of that size (a
    /// restore checks these while several threads copy the chunks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<String>,
}

/// Size of the pieces of a large file that are copied and hashed separately.
pub const CHUNK_BYTES: u64 = 64 << 20;

/// What was read of a file: its sha256, or the sha256s of its chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Digest {
    Whole(String),
    Chunks(Vec<String>),
}

/// The compressed archive of a snapshot in the object store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Archive {
    /// Object name beside the manifest.
    pub object: String,
    pub compression: String,
    pub size: u64,
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub schema_version: u32,
    pub id: String,
    pub key: SnapshotKey,
    pub created_at: String,
    /// Whether data checksums were on in the data directory.
    pub checksums: bool,
    pub dirs: Vec<DirEntry>,
    pub files: Vec<FileEntry>,
    /// Present in the store's copy of the manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<Archive>,
}

impl Manifest {
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// Reads and checks a manifest (its id must be its key's).
    pub fn parse(text: &str, what: &str) -> Result<Manifest> {
        let m: Manifest = serde_json::from_str(text)
            .with_context(|| format!("snapshot manifest {what} is not valid"))?;
        if m.schema_version != MANIFEST_SCHEMA_VERSION {
            bail!(
                "snapshot manifest {what} has schema version {}, this daemon reads {MANIFEST_SCHEMA_VERSION}",
                m.schema_version
            );
        }
        if m.id != m.key.id() {
            bail!(
                "snapshot manifest {what} names id {} but its key's id is {}",
                m.id,
                m.key.id()
            );
        }
        let mut seen = std::collections::BTreeSet::new();
        for f in &m.files {
            check_relative(&f.path, what)?;
            if !seen.insert(f.path.as_str()) {
                bail!("snapshot manifest {what} lists {} twice", f.path);
            }
        }
        for d in &m.dirs {
            if !d.path.is_empty() {
                check_relative(&d.path, what)?;
            }
        }
        Ok(m)
    }

    pub fn load(dir: &Path) -> Result<Manifest> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        Manifest::parse(&text, &path.display().to_string())
    }

    pub fn by_path(&self) -> BTreeMap<&str, &FileEntry> {
        self.files.iter().map(|f| (f.path.as_str(), f)).collect()
    }
}

/// A manifest path stays inside the data directory: relative, no `..`, no empty parts.
fn check_relative(p: &str, what: &str) -> Result<()> {
    if p.is_empty()
        || p.starts_with('/')
        || p.split('/').any(|c| c.is_empty() || c == "." || c == "..")
    {
        bail!("snapshot manifest {what} has a path outside the data directory: {p:?}");
    }
    Ok(())
}

/// Where a snapshot's files differ from its manifest (`seen`: path → (size, digest when
/// the bytes were read)); empty when they agree.
pub fn compare(manifest: &Manifest, seen: &BTreeMap<String, (u64, Option<Digest>)>) -> Vec<String> {
    let mut problems = Vec::new();
    for f in &manifest.files {
        match seen.get(&f.path) {
            None => problems.push(format!("{} is missing", f.path)),
            Some((size, _)) if *size != f.size => problems.push(format!(
                "{} has {size} bytes, the manifest {}",
                f.path, f.size
            )),
            Some((_, Some(Digest::Whole(sha)))) if *sha != f.sha256 => problems.push(format!(
                "{} has sha256 {sha}, the manifest {}",
                f.path, f.sha256
            )),
            Some((_, Some(Digest::Chunks(got)))) => {
                let want: Vec<String> = if f.chunks.is_empty() {
                    vec![f.sha256.clone()]
                } else {
                    f.chunks.clone()
                };
                if let Some(i) =
                    (0..got.len().max(want.len())).find(|i| got.get(*i) != want.get(*i))
                {
                    let (g, w) = (
                        got.get(i).map_or("(none)", String::as_str),
                        want.get(i).map_or("(none)", String::as_str),
                    );
                    problems.push(if want.len() == 1 {
                        format!("{} has sha256 {g}, the manifest {w}", f.path)
                    } else {
                        format!(
                            "{} has sha256 {g} in bytes {}–{}, the manifest {w}",
                            f.path,
                            i as u64 * CHUNK_BYTES,
                            ((i as u64 + 1) * CHUNK_BYTES).min(f.size)
                        )
                    });
                }
            }
            _ => {}
        }
    }
    let listed = manifest.by_path();
    for p in seen.keys() {
        if !listed.contains_key(p.as_str()) {
            problems.push(format!("{p} is not in the manifest"));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        let key = SnapshotKey {
            postgres_major: 15,
            controldata: BTreeMap::from([("block_size".to_string(), "8192".to_string())]),
            architecture: "x86_64".into(),
            encoding: "UTF8".into(),
            lc_collate: "C".into(),
            lc_ctype: "C".into(),
            dataset: "db=pgbench scale=1".into(),
        };
        Manifest {
            schema_version: MANIFEST_SCHEMA_VERSION,
            id: key.id(),
            key,
            created_at: "2026-12-01T19:00:00Z".into(),
            checksums: false,
            dirs: vec![DirEntry {
                path: "".into(),
                mode: 0o700,
            }],
            files: vec![
                FileEntry {
                    path: "PG_VERSION".into(),
                    mode: 0o600,
                    size: 3,
                    sha256: "aa".into(),
                    chunks: vec![],
                },
                FileEntry {
                    path: "base/1/1259".into(),
                    mode: 0o600,
                    size: 8192,
                    sha256: "bb".into(),
                    chunks: vec![],
                },
            ],
            archive: None,
        }
    }

    #[test]
    fn a_manifest_round_trips_and_a_bad_one_is_refused_naming_why() {
        let m = manifest();
        let text = serde_json::to_string(&m).expect("json");
        assert_eq!(Manifest::parse(&text, "m").expect("parse"), m);
        let mut wrong_id = m.clone();
        wrong_id.id = "0123".into();
        let err = Manifest::parse(&serde_json::to_string(&wrong_id).expect("json"), "m")
            .expect_err("wrong id");
        assert!(err.to_string().contains("its key's id"), "{err}");
        let mut escape = m.clone();
        escape.files[1].path = "../etc/passwd".into();
        let err = Manifest::parse(&serde_json::to_string(&escape).expect("json"), "m")
            .expect_err("escape");
        assert!(
            err.to_string().contains("outside the data directory"),
            "{err}"
        );
        assert!(Manifest::parse("{", "m").is_err());
    }

    #[test]
    fn a_flipped_byte_a_missing_file_and_an_extra_one_are_named() {
        let m = manifest();
        let mut seen = BTreeMap::from([
            (
                "PG_VERSION".to_string(),
                (3, Some(Digest::Whole("aa".to_string()))),
            ),
            (
                "base/1/1259".to_string(),
                (8192, Some(Digest::Chunks(vec!["bb".to_string()]))),
            ),
        ]);
        assert!(compare(&m, &seen).is_empty());
        seen.insert(
            "base/1/1259".into(),
            (8192, Some(Digest::Whole("cc".into()))),
        );
        assert_eq!(
            compare(&m, &seen),
            ["base/1/1259 has sha256 cc, the manifest bb"]
        );
        seen.insert(
            "base/1/1259".into(),
            (8192, Some(Digest::Chunks(vec!["cc".into()]))),
        );
        assert_eq!(
            compare(&m, &seen),
            ["base/1/1259 has sha256 cc, the manifest bb"]
        );
        seen.insert("base/1/1259".into(), (8192, None));
        assert!(compare(&m, &seen).is_empty(), "sizes only");
        let mut big = m.clone();
        big.files[1].size = 3 * CHUNK_BYTES;
        big.files[1].chunks = vec!["c0".into(), "c1".into(), "c2".into()];
        let chunks = |c: &[&str]| Some(Digest::Chunks(c.iter().map(|s| s.to_string()).collect()));
        let mut s2 = seen.clone();
        s2.insert(
            "base/1/1259".into(),
            (3 * CHUNK_BYTES, chunks(&["c0", "c1", "c2"])),
        );
        assert!(compare(&big, &s2).is_empty());
        s2.insert(
            "base/1/1259".into(),
            (3 * CHUNK_BYTES, chunks(&["c0", "xx", "c2"])),
        );
        assert_eq!(
            compare(&big, &s2),
            ["base/1/1259 has sha256 xx in bytes 67108864–134217728, the manifest c1"]
        );
        seen.remove("PG_VERSION");
        seen.insert("extra".into(), (1, None));
        assert_eq!(
            compare(&m, &seen),
            ["PG_VERSION is missing", "extra is not in the manifest"]
        );
    }
}
