//! The pinned third-party inputs of the tests and tools: `third_party/` at the repository's
//! root, each file checked against `third_party/SHA256SUMS` before it is used (the shell
//! tools do the same with `third_party/verify`). Only tests call this: the appliance fetches
//! or is packed what its plan names.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

/// The sysbench-tpcc scripts at commit 585e2b8a, as a `git archive` tarball.
pub const SYSBENCH_TPCC: &str =
    "sysbench-tpcc/sysbench-tpcc-585e2b8af327d35866aed7e56837c2134d8835a9.tar.gz";

/// util-linux 2.32.1, Rocky 8's version, as a `git archive` tarball.
#[cfg(test)]
const UTIL_LINUX: &str = "util-linux/util-linux-2.32.1.tar.xz";

/// The repository's `third_party/` folder.
pub(crate) fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../third_party")
}

/// A pinned file: its path, bytes and sha256, after checking the digest `SHA256SUMS` lists.
pub fn pinned(name: &str) -> Result<(PathBuf, Vec<u8>, String)> {
    let sums_path = dir().join("SHA256SUMS");
    let sums = std::fs::read_to_string(&sums_path)
        .with_context(|| format!("reading {}", sums_path.display()))?;
    let Some(want) = expected(&sums, name) else {
        bail!("{name} is not listed in {}", sums_path.display());
    };
    let path = dir().join(name);
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let got = format!("{:x}", Sha256::digest(&bytes));
    if got != want {
        bail!(
            "{} has sha256 {got}, {} says {want}",
            path.display(),
            sums_path.display()
        );
    }
    Ok((path, bytes, got))
}

/// The digest `sums` (sha256sum's output format) lists for `name`.
fn expected<'a>(sums: &'a str, name: &str) -> Option<&'a str> {
    sums.lines().find_map(|l| {
        let (digest, file) = l.split_once(char::is_whitespace)?;
        (file.trim_start().trim_start_matches('*') == name).then_some(digest)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_file_matches_its_digest() {
        for name in [SYSBENCH_TPCC, UTIL_LINUX] {
            let (path, bytes, _) = pinned(name).expect("pinned file");
            assert!(path.is_file() && !bytes.is_empty(), "{}", path.display());
        }
    }

    #[test]
    fn a_name_not_listed_or_a_digest_that_differs_is_named() {
        let e = pinned("nothing.tar").expect_err("not listed");
        assert!(e.to_string().contains("nothing.tar is not listed"), "{e}");
        let sums = "00ab  a/b.tar\n11cd *c.tar\n";
        assert_eq!(expected(sums, "a/b.tar"), Some("00ab"));
        assert_eq!(expected(sums, "c.tar"), Some("11cd"));
        assert_eq!(expected(sums, "b.tar"), None);
    }
}
