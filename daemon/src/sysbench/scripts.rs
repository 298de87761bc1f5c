//! The sysbench-tpcc Lua scripts: one `.tar.gz` named by the plan (`[sysbench] tpcc_source`)
//! and pinned by its sha256. `pgappliance build` packs the verified archive into the payload
//! ([`PAYLOAD_ARCHIVE`]), so an air-gapped appliance needs nothing else; without it the daemon
//! fetches the source itself. Either way the bytes are checked against the plan's sha256
//! before anything is unpacked, and a mismatch names both digests.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use sha2::{Digest, Sha256};

use crate::plan::Sysbench;

/// Where the payload puts the archive (relative to `/`).
pub const PAYLOAD_ARCHIVE: &str = "usr/share/pgappliance/sysbench-tpcc.tar.gz";

/// Largest archive accepted (the upstream one is about 30 KiB).
pub const MAX_ARCHIVE_BYTES: u64 = 16 << 20;

/// The script every run starts (the others are loaded from its directory).
pub(crate) const ENTRY: &str = "tpcc.lua";

/// The hex sha256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// Refuses bytes whose sha256 is not the plan's, naming both.
pub fn verify(bytes: &[u8], sb: &Sysbench, from: &str) -> Result<()> {
    let got = sha256_hex(bytes);
    if !got.eq_ignore_ascii_case(&sb.tpcc_sha256) {
        bail!(
            "the sysbench-tpcc archive from {from} has sha256 {got}, but the plan's [sysbench] tpcc_sha256 is {}: refusing it (a different release, or a damaged download)",
            sb.tpcc_sha256.to_ascii_lowercase()
        );
    }
    Ok(())
}

/// The archive's bytes from the plan's source (https://, http:// or file:///), verified.
pub async fn fetch(sb: &Sysbench) -> Result<Vec<u8>> {
    let src = sb.tpcc_source.as_str();
    let bytes = if let Some(path) = src.strip_prefix("file://") {
        let mut buf = Vec::new();
        crate::fsutil::open_regular(std::path::Path::new(path))
            .with_context(|| format!("opening the sysbench-tpcc archive {path}"))?
            .take(MAX_ARCHIVE_BYTES + 1)
            .read_to_end(&mut buf)
            .with_context(|| format!("reading the sysbench-tpcc archive {path}"))?;
        buf
    } else {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(20))
            .timeout(Duration::from_secs(300))
            .build()
            .context("building an HTTP client")?;
        let resp = client
            .get(src)
            .send()
            .await
            .with_context(|| format!("fetching the sysbench-tpcc archive {src}"))?;
        let status = resp.status();
        if !status.is_success() {
            bail!("fetching the sysbench-tpcc archive {src}: the server answered {status}");
        }
        resp.bytes()
            .await
            .with_context(|| format!("reading the sysbench-tpcc archive from {src}"))?
            .to_vec()
    };
    if bytes.len() as u64 > MAX_ARCHIVE_BYTES {
        bail!(
            "the sysbench-tpcc archive {src} is larger than {} MiB: not a sysbench-tpcc release",
            MAX_ARCHIVE_BYTES >> 20
        );
    }
    verify(&bytes, sb, src)?;
    Ok(bytes)
}

/// The directory (under `work`) holding the unpacked scripts of the plan's archive, made
/// once per sha256: from `packed` (the payload's copy) when it is there and verifies, else
/// fetched from the plan's source. Unpacked into a temporary directory and renamed, so a
/// directory that exists is complete.
pub(crate) async fn ensure(sb: &Sysbench, work: &Path, packed: Option<&Path>) -> Result<PathBuf> {
    let sha = sb.tpcc_sha256.to_ascii_lowercase();
    let dest = work.join(format!("sysbench-tpcc-{}", &sha[..16.min(sha.len())]));
    if let Some(dir) = script_dir(&dest)? {
        return Ok(dir);
    }
    let bytes = match packed.filter(|p| p.exists()) {
        Some(p) => {
            let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
            match verify(&bytes, sb, &p.display().to_string()) {
                Ok(()) => bytes,
                Err(e) => {
                    tracing::warn!(error = %e, "the payload's sysbench-tpcc archive is not the plan's; fetching the plan's source");
                    fetch(sb).await?
                }
            }
        }
        None => fetch(sb).await?,
    };
    crate::fsutil::create_dir_all(work)?;
    let tmp = work.join(format!(".sysbench-tpcc-{}.partial", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).with_context(|| format!("clearing {}", tmp.display()))?;
    }
    unpack(&bytes, &tmp)?;
    if script_dir(&tmp)?.is_none() {
        let _ = std::fs::remove_dir_all(&tmp);
        bail!(
            "the sysbench-tpcc archive {} has no {ENTRY}: not a sysbench-tpcc release",
            sb.tpcc_source
        );
    }
    if dest.exists() {
        std::fs::remove_dir_all(&dest).with_context(|| format!("clearing {}", dest.display()))?;
    }
    std::fs::rename(&tmp, &dest)
        .with_context(|| format!("moving {} to {}", tmp.display(), dest.display()))?;
    script_dir(&dest)?.with_context(|| format!("{ENTRY} vanished from {}", dest.display()))
}

/// Unpacks a .tar.gz into `dir`, refusing links and paths that leave it.
pub(crate) fn unpack(bytes: &[u8], dir: &Path) -> Result<()> {
    crate::fsutil::create_dir_all(dir)?;
    let mut ar = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    for entry in ar.entries().context("reading the sysbench-tpcc archive")? {
        let mut entry = entry.context("reading the sysbench-tpcc archive")?;
        let path = entry.path()?.into_owned();
        if path.is_absolute()
            || path
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            bail!(
                "the sysbench-tpcc archive holds {}, a path outside its directory",
                path.display()
            );
        }
        match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Directory => {
                entry
                    .unpack_in(dir)
                    .with_context(|| format!("unpacking {}", path.display()))?;
            }
            // git archive's pax header and the like carry no files.
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader => {}
            other => bail!(
                "the sysbench-tpcc archive holds {} of type {other:?}; only files and directories are unpacked",
                path.display()
            ),
        }
    }
    Ok(())
}

/// The directory holding [`ENTRY`] in an unpacked archive (its top level or one folder
/// down, as `git archive --prefix` makes it).
fn script_dir(root: &Path) -> Result<Option<PathBuf>> {
    if !root.is_dir() {
        return Ok(None);
    }
    if root.join(ENTRY).is_file() {
        return Ok(Some(root.to_path_buf()));
    }
    for e in std::fs::read_dir(root).with_context(|| format!("reading {}", root.display()))? {
        let p = e?.path();
        if p.join(ENTRY).is_file() {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pinned() -> (PathBuf, String) {
        let (path, _, sha) =
            crate::third_party::pinned(crate::third_party::SYSBENCH_TPCC).expect("pinned copy");
        (path, sha)
    }

    #[tokio::test]
    async fn a_file_url_is_fetched_verified_and_unpacked_once() {
        let (path, sha) = pinned();
        let work = tempfile::tempdir().expect("test step");
        let sb = Sysbench {
            tpcc_source: format!("file://{}", path.display()),
            tpcc_sha256: sha.clone(),
        };
        let dir = ensure(&sb, work.path(), None).await.expect("test step");
        assert!(dir.join("tpcc.lua").is_file() && dir.join("tpcc_common.lua").is_file());
        // A second call finds it without reading the source.
        let moved = Sysbench {
            tpcc_source: "file:///nonexistent/archive.tar.gz".into(),
            tpcc_sha256: sha,
        };
        assert_eq!(
            ensure(&moved, work.path(), None).await.expect("test step"),
            dir
        );
    }

    #[tokio::test]
    async fn a_wrong_sha256_is_refused_naming_both_digests() {
        let (path, sha) = pinned();
        let wrong = "0".repeat(64);
        let sb = Sysbench {
            tpcc_source: format!("file://{}", path.display()),
            tpcc_sha256: wrong.clone(),
        };
        let work = tempfile::tempdir().expect("test step");
        let e = format!(
            "{:#}",
            ensure(&sb, work.path(), None)
                .await
                .expect_err("should fail")
        );
        assert!(e.contains(&sha) && e.contains(&wrong), "{e}");
        assert!(
            std::fs::read_dir(work.path())
                .expect("test step")
                .next()
                .is_none(),
            "nothing unpacked"
        );
    }

    #[test]
    fn archives_with_links_or_escaping_paths_are_refused() {
        let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::fast(),
        ));
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        h.set_mode(0o777);
        b.append_link(&mut h, "x/tpcc.lua", "/etc/passwd")
            .expect("test step");
        let bytes = b
            .into_inner()
            .expect("test step")
            .finish()
            .expect("test step");
        let dir = tempfile::tempdir().expect("test step");
        let e = unpack(&bytes, dir.path())
            .expect_err("should fail")
            .to_string();
        assert!(e.contains("x/tpcc.lua") && e.contains("Symlink"), "{e}");
    }
}
