//! A snapshot's manifest: its key, and each directory and file of the data directory with
//! mode, size and sha256. Written last (and fsynced) into `<id>.partial`, which is then
//! renamed to `<id>`: a snapshot directory without the `.partial` suffix is complete.
//!
//! Schema versions: 1 (a store's copy names one compressed stream, [`Archive`]) and 2 (a
//! store's copy lists independently compressed parts, [`Parts`], made by [`split`]). This
//! daemon writes 2 and reads both.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::key::SnapshotKey;

pub(crate) const MANIFEST_FILE: &str = "manifest.json";
pub(crate) const MANIFEST_SCHEMA_VERSION: u32 = 2;
/// The schema versions this daemon reads: 1 (one archive stream), 2 (parts).
pub(crate) const READABLE_SCHEMA_VERSIONS: [u32; 2] = [1, MANIFEST_SCHEMA_VERSION];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DirEntry {
    /// Relative to the data directory ("" is the data directory itself).
    pub(crate) path: String,
    pub(crate) mode: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Relative to the data directory.
    pub path: String,
    pub(crate) mode: u32,
    pub(crate) size: u64,
    pub(crate) sha256: String,
    /// For a file larger than [`CHUNK_BYTES`]: the sha256 of each chunk of that size (a
    /// restore checks these while several threads copy the chunks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) chunks: Vec<String>,
}

/// Size of the pieces of a large file that are copied and hashed separately.
pub const CHUNK_BYTES: u64 = 64 << 20;

/// What was read of a file: its sha256, or the sha256s of its chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Digest {
    Whole(String),
    Chunks(Vec<String>),
}

/// The compressed archive of a snapshot in the object store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Archive {
    /// Object name beside the manifest.
    pub(crate) object: String,
    pub(crate) compression: String,
    pub(crate) size: u64,
    pub(crate) sha256: String,
}

/// A byte range of one file inside a part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Piece {
    /// The file's path, as in [`Manifest::files`].
    pub(crate) path: String,
    pub(crate) offset: u64,
    pub(crate) len: u64,
}

/// One independently compressed object of a store's snapshot: its pieces' bytes one after
/// the other, compressed as one frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Part {
    /// Object name beside the manifest.
    pub(crate) object: String,
    pub(crate) pieces: Vec<Piece>,
    /// Size and sha256 of the compressed object.
    pub(crate) size: u64,
    pub(crate) sha256: String,
}

/// The parts of a store's snapshot (schema version 2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parts {
    pub(crate) compression: String,
    /// The most uncompressed bytes of a part ([`PART_BYTES`] when it was written).
    pub(crate) part_bytes: u64,
    pub list: Vec<Part>,
}

/// The most uncompressed bytes in one part: a chunk of a large file, or small files
/// together. A chunk of [`CHUNK_BYTES`] is the unit of a large file's hashes, so a part
/// checks its pieces against the manifest alone.
pub(crate) const PART_BYTES: u64 = CHUNK_BYTES;

/// The pieces of each part for `files`, in order: a file of more than [`CHUNK_BYTES`] in
/// parts of one chunk each (the unit of its hashes), a file of `part_bytes` or more alone,
/// smaller files (empty ones too) gathered whole, in manifest order, into parts of at most
/// `part_bytes`. Every piece has a sha256 of its own in the manifest ([`piece_sha256`]).
/// Pure: the same files give the same parts.
pub(crate) fn split(files: &[FileEntry], part_bytes: u64) -> Vec<Vec<Piece>> {
    let mut parts: Vec<Vec<Piece>> = Vec::new();
    let mut cur: Vec<Piece> = Vec::new();
    let mut cur_bytes = 0u64;
    let limit = part_bytes.clamp(1, CHUNK_BYTES);
    for f in files {
        if f.size > CHUNK_BYTES || f.size >= limit {
            // Alone, after the small files before it (the parts stay in manifest order).
            if !cur.is_empty() {
                parts.push(std::mem::take(&mut cur));
                cur_bytes = 0;
            }
        }
        if f.size > CHUNK_BYTES {
            let mut offset = 0;
            while offset < f.size {
                let len = (f.size - offset).min(CHUNK_BYTES);
                parts.push(vec![Piece {
                    path: f.path.clone(),
                    offset,
                    len,
                }]);
                offset += len;
            }
            continue;
        }
        let whole = Piece {
            path: f.path.clone(),
            offset: 0,
            len: f.size,
        };
        if f.size >= limit {
            parts.push(vec![whole]);
            continue;
        }
        if !cur.is_empty() && cur_bytes + f.size > limit {
            parts.push(std::mem::take(&mut cur));
            cur_bytes = 0;
        }
        cur.push(whole);
        cur_bytes += f.size;
    }
    if !cur.is_empty() {
        parts.push(cur);
    }
    parts
}

/// The sha256 the manifest gives for `piece`: the file's (a whole file) or its chunk's.
pub(crate) fn piece_sha256<'a>(file: &'a FileEntry, piece: &Piece) -> Option<&'a str> {
    if piece.offset == 0 && piece.len == file.size {
        return Some(file.sha256.as_str()).filter(|_| file.chunks.len() <= 1);
    }
    if piece.offset % CHUNK_BYTES != 0 {
        return None;
    }
    let i = (piece.offset / CHUNK_BYTES) as usize;
    let end = ((i as u64 + 1) * CHUNK_BYTES).min(file.size);
    if piece.offset + piece.len != end {
        return None;
    }
    file.chunks.get(i).map(String::as_str)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub(crate) schema_version: u32,
    pub id: String,
    pub(crate) key: SnapshotKey,
    pub(crate) created_at: String,
    /// Whether data checksums were on in the data directory.
    pub(crate) checksums: bool,
    pub(crate) dirs: Vec<DirEntry>,
    pub files: Vec<FileEntry>,
    /// Present in the store's copy of a schema 1 manifest: the one compressed stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) archive: Option<Archive>,
    /// Present in the store's copy of a schema 2 manifest: the parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<Parts>,
}

impl Manifest {
    pub(crate) fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// Reads and checks a manifest (its id must be its key's).
    pub(crate) fn parse(text: &str, what: &str) -> Result<Manifest> {
        let m: Manifest = serde_json::from_str(text)
            .with_context(|| format!("snapshot manifest {what} is not valid"))?;
        if !READABLE_SCHEMA_VERSIONS.contains(&m.schema_version) {
            bail!(
                "snapshot manifest {what} has schema version {}, this daemon reads {READABLE_SCHEMA_VERSIONS:?}",
                m.schema_version
            );
        }
        if m.schema_version == 1 && m.parts.is_some() {
            bail!(
                "snapshot manifest {what} has schema version 1 but lists parts (a version 2 field)"
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
        if let Some(parts) = &m.parts {
            check_parts(&m, parts, what)?;
        }
        Ok(m)
    }

    /// Whether this is a store's copy (it names what to download).
    pub(crate) fn is_stored(&self) -> bool {
        self.archive.is_some() || self.parts.is_some()
    }

    /// The compressed bytes in the store.
    pub(crate) fn stored_bytes(&self) -> u64 {
        match (&self.parts, &self.archive) {
            (Some(p), _) => p.list.iter().map(|p| p.size).sum(),
            (None, Some(a)) => a.size,
            (None, None) => 0,
        }
    }

    pub(crate) fn load(dir: &Path) -> Result<Manifest> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        Manifest::parse(&text, &path.display().to_string())
    }

    pub(crate) fn by_path(&self) -> BTreeMap<&str, &FileEntry> {
        self.files.iter().map(|f| (f.path.as_str(), f)).collect()
    }
}

/// The parts of a manifest cover each of its files exactly once, in order, each piece with
/// a sha256 of its own in the manifest (a whole file, or one chunk of a large one).
fn check_parts(m: &Manifest, parts: &Parts, what: &str) -> Result<()> {
    let files = m.by_path();
    let mut next: BTreeMap<&str, u64> = BTreeMap::new();
    let mut objects = std::collections::BTreeSet::new();
    for (i, part) in parts.list.iter().enumerate() {
        if part.object.is_empty() || part.object.contains('/') || !objects.insert(&part.object) {
            bail!(
                "snapshot manifest {what}: part {i} has the object name {:?} (empty, with a '/', or another part's)",
                part.object
            );
        }
        for p in &part.pieces {
            let Some(f) = files.get(p.path.as_str()) else {
                bail!(
                    "snapshot manifest {what}: part {} holds {}, which the manifest does not list",
                    part.object,
                    p.path
                );
            };
            let at = next.entry(p.path.as_str()).or_insert(0);
            if p.offset != *at || p.offset + p.len > f.size {
                bail!(
                    "snapshot manifest {what}: part {} holds bytes {}–{} of {}, expected bytes from {} of its {}",
                    part.object,
                    p.offset,
                    p.offset + p.len,
                    p.path,
                    at,
                    f.size
                );
            }
            if piece_sha256(f, p).is_none() {
                bail!(
                    "snapshot manifest {what}: part {} holds bytes {}–{} of {}, which have no sha256 of their own in the manifest",
                    part.object,
                    p.offset,
                    p.offset + p.len,
                    p.path
                );
            }
            *at = p.offset + p.len;
            if p.len == 0 && f.size != 0 {
                bail!(
                    "snapshot manifest {what}: part {} holds an empty piece of {}",
                    part.object,
                    p.path
                );
            }
        }
    }
    for f in &m.files {
        let got = next.get(f.path.as_str()).copied();
        if got != Some(f.size) {
            bail!(
                "snapshot manifest {what}: its parts hold {} of the {} bytes of {}",
                got.map_or_else(|| "none".to_string(), |g| g.to_string()),
                f.size,
                f.path
            );
        }
    }
    Ok(())
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
pub(crate) fn compare(
    manifest: &Manifest,
    seen: &BTreeMap<String, (u64, Option<Digest>)>,
) -> Vec<String> {
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
            parts: None,
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

    fn file(path: &str, size: u64) -> FileEntry {
        let n = size.div_ceil(CHUNK_BYTES);
        FileEntry {
            path: path.into(),
            mode: 0o600,
            size,
            sha256: format!("sha-{path}"),
            chunks: if n > 1 {
                (0..n).map(|i| format!("sha-{path}-{i}")).collect()
            } else {
                vec![]
            },
        }
    }

    fn pieces(parts: &[Vec<Piece>]) -> Vec<Vec<(String, u64, u64)>> {
        parts
            .iter()
            .map(|p| {
                p.iter()
                    .map(|x| (x.path.clone(), x.offset, x.len))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn split_gathers_small_files_and_cuts_large_ones_at_their_chunks() {
        let files = [
            file("PG_VERSION", 3),
            file("a", 0),
            file("b", 600),
            file("c", 500),
            file("big", 2 * CHUNK_BYTES + 10),
            file("d", 1000),
            file("e", 1),
        ];
        let parts = split(&files, 1000);
        let s = |p: &str, o: u64, l: u64| (p.to_string(), o, l);
        assert_eq!(
            pieces(&parts),
            vec![
                vec![s("PG_VERSION", 0, 3), s("a", 0, 0), s("b", 0, 600)],
                vec![s("c", 0, 500)],
                vec![s("big", 0, CHUNK_BYTES)],
                vec![s("big", CHUNK_BYTES, CHUNK_BYTES)],
                vec![s("big", 2 * CHUNK_BYTES, 10)],
                vec![s("d", 0, 1000)],
                vec![s("e", 0, 1)],
            ]
        );
        assert_eq!(split(&files, 1000), parts, "the same files, the same parts");
        // Each piece has a sha256 of its own: the file's or its chunk's.
        let by_path: BTreeMap<&str, &FileEntry> =
            files.iter().map(|f| (f.path.as_str(), f)).collect();
        let shas: Vec<&str> = parts
            .iter()
            .flatten()
            .map(|p| piece_sha256(by_path[p.path.as_str()], p).expect("a sha256"))
            .collect();
        assert_eq!(
            shas,
            [
                "sha-PG_VERSION",
                "sha-a",
                "sha-b",
                "sha-c",
                "sha-big-0",
                "sha-big-1",
                "sha-big-2",
                "sha-d",
                "sha-e"
            ]
        );
        // The default size: a data directory of small files is a few parts.
        let many: Vec<FileEntry> = (0..100).map(|i| file(&format!("f{i}"), 8192)).collect();
        assert_eq!(split(&many, PART_BYTES).len(), 1);
        assert!(split(&[], PART_BYTES).is_empty());
        // A piece that is not a whole file nor a whole chunk has no sha256 of its own.
        let f = file("big", 2 * CHUNK_BYTES);
        let half = Piece {
            path: "big".into(),
            offset: 0,
            len: CHUNK_BYTES / 2,
        };
        assert_eq!(piece_sha256(&f, &half), None);
    }

    fn stored(m: &Manifest) -> Manifest {
        let mut m = m.clone();
        m.parts = Some(Parts {
            compression: "zstd-3".into(),
            part_bytes: PART_BYTES,
            list: split(&m.files, PART_BYTES)
                .into_iter()
                .enumerate()
                .map(|(i, pieces)| Part {
                    object: format!("part-{i:05}.zst"),
                    pieces,
                    size: 10,
                    sha256: "cc".into(),
                })
                .collect(),
        });
        m
    }

    #[test]
    fn a_manifest_with_parts_round_trips_and_wrong_parts_are_named() {
        let m = stored(&manifest());
        let text = serde_json::to_string(&m).expect("json");
        let back = Manifest::parse(&text, "m").expect("parse");
        assert_eq!(back, m);
        assert!(back.is_stored());
        assert_eq!(back.stored_bytes(), 10);
        let refused = |m: &Manifest| {
            Manifest::parse(&serde_json::to_string(m).expect("json"), "m")
                .expect_err("refused")
                .to_string()
        };
        let mut lost = m.clone();
        lost.parts.as_mut().expect("parts").list[0].pieces.pop();
        assert!(
            refused(&lost).contains("its parts hold none of the 8192 bytes of base/1/1259"),
            "{}",
            refused(&lost)
        );
        let mut twice = m.clone();
        let p = twice.parts.as_mut().expect("parts");
        let again = p.list[0].clone();
        p.list.push(Part {
            object: "part-00001.zst".into(),
            ..again
        });
        assert!(
            refused(&twice).contains("holds bytes 0–3 of PG_VERSION, expected bytes from 3"),
            "{}",
            refused(&twice)
        );
        let mut stranger = m.clone();
        stranger.parts.as_mut().expect("parts").list[0].pieces[0].path = "x".into();
        assert!(refused(&stranger).contains("holds x, which the manifest does not list"));
        let mut cut = m.clone();
        cut.parts.as_mut().expect("parts").list[0].pieces[1].len = 100;
        assert!(
            refused(&cut).contains("no sha256 of their own"),
            "{}",
            refused(&cut)
        );
        let mut name = m.clone();
        name.parts.as_mut().expect("parts").list[0].object = "../x".into();
        assert!(
            refused(&name).contains("object name \"../x\""),
            "{}",
            refused(&name)
        );
    }

    #[test]
    fn schema_1_manifests_are_read_and_unknown_versions_refused() {
        // A store's manifest as daemons before schema 2 wrote it: one archive.
        let old = r#"{
  "schema_version": 1,
  "id": "ID",
  "key": KEY,
  "created_at": "2026-12-01T19:00:00Z",
  "checksums": false,
  "dirs": [{"path": "", "mode": 448}],
  "files": [
    {"path": "PG_VERSION", "mode": 384, "size": 3, "sha256": "aa"},
    {"path": "base/1/1259", "mode": 384, "size": 8192, "sha256": "bb"}
  ],
  "archive": {"object": "data.tar.zst", "compression": "zstd-3", "size": 40, "sha256": "dd"}
}"#;
        let m = manifest();
        let text = old
            .replace("\"ID\"", &format!("{:?}", m.id))
            .replace("KEY", &serde_json::to_string(&m.key).expect("key"));
        let read = Manifest::parse(&text, "old").expect("schema 1 is read");
        assert_eq!(read.schema_version, 1);
        assert_eq!(read.files, m.files);
        assert_eq!(read.parts, None);
        assert_eq!(
            read.archive.as_ref().map(|a| a.object.as_str()),
            Some("data.tar.zst")
        );
        assert_eq!(read.stored_bytes(), 40);
        let err = Manifest::parse(
            &text.replace("\"schema_version\": 1", "\"schema_version\": 3"),
            "new",
        )
        .expect_err("schema 3");
        assert!(
            err.to_string()
                .contains("has schema version 3, this daemon reads [1, 2]"),
            "{err}"
        );
        let mut mixed = stored(&m);
        mixed.schema_version = 1;
        let err = Manifest::parse(&serde_json::to_string(&mixed).expect("json"), "mixed")
            .expect_err("schema 1 with parts");
        assert!(err.to_string().contains("lists parts"), "{err}");
    }
}
