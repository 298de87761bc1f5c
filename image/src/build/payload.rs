//! The payload: a deterministic tar.gz of what the appliance installs. Members are sorted,
//! owned by root with explicit modes, and stamped with one mtime (`SOURCE_DATE_EPOCH`, else
//! 0); gzip carries no name or time. The same inputs give byte-identical files.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use flate2::{Compression, GzBuilder};

/// Largest payload the builder writes (it travels on install media and in user-data URLs).
pub const MAX_PAYLOAD_BYTES: u64 = 256 << 20;

/// One file of the payload.
pub struct Member {
    pub mode: u32,
    pub data: Vec<u8>,
}

pub fn mtime() -> Result<u64> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v
            .trim()
            .parse()
            .with_context(|| format!("SOURCE_DATE_EPOCH=\"{v}\" is not a number of seconds")),
        Err(_) => Ok(0),
    }
}

/// Writes `members` (path → file) as a deterministic tar.gz; returns its bytes.
pub fn build(members: &BTreeMap<String, Member>, mtime: u64) -> Result<Vec<u8>> {
    let mut dirs = std::collections::BTreeSet::new();
    for path in members.keys() {
        let mut p = Path::new(path).parent();
        while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
            dirs.insert(format!("{}/", d.display()));
            p = d.parent();
        }
    }
    let mut entries: Vec<(String, Option<&Member>)> = dirs.into_iter().map(|d| (d, None)).collect();
    entries.extend(members.iter().map(|(p, m)| (p.clone(), Some(m))));
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let gz = GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), Compression::best());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    for (path, member) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_uid(0);
        h.set_gid(0);
        h.set_username("root")?;
        h.set_groupname("root")?;
        h.set_mtime(mtime);
        match member {
            None => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_size(0);
                h.set_cksum();
                tar.append_data(&mut h, &path, std::io::empty())?;
            }
            Some(m) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(m.mode);
                h.set_size(m.data.len() as u64);
                h.set_cksum();
                tar.append_data(&mut h, &path, m.data.as_slice())?;
            }
        }
    }
    let gz = tar.into_inner()?;
    let mut bytes = gz.finish()?;
    bytes.flush()?;
    if bytes.len() as u64 > MAX_PAYLOAD_BYTES {
        bail!(
            "the payload would be {} MiB, over the {} MiB limit: is the daemon binary a debug build? (strip it or build with --release)",
            bytes.len() >> 20,
            MAX_PAYLOAD_BYTES >> 20
        );
    }
    Ok(bytes)
}
