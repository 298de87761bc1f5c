//! Crash-safe file writes: temp file in the same directory, fsync, rename, fsync directory.
//! A reader (or a resumed daemon) sees the old content or the new, never a torn file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Reads a UTF-8 file of at most `max` bytes; a larger one (or an endless one such as
/// `/dev/zero`) is refused with an error saying so, without being read into memory.
pub fn read_to_string_limited(path: &Path, max: u64, what: &str) -> io::Result<String> {
    let mut bytes = Vec::new();
    io::Read::read_to_end(&mut io::Read::take(File::open(path)?, max + 1), &mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(io::Error::other(format!(
            "it is larger than {} KiB, the most {what} may be",
            max >> 10
        )));
    }
    String::from_utf8(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

pub fn atomic_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(|e| io::Error::new(e.kind(), format!("writing {}: {e}", path.display())))
}

/// Serialises to pretty JSON (with a final newline) and writes atomically.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    bytes.push(b'\n');
    atomic_write(path, &bytes)
}

pub fn create_dir_all(path: &Path) -> io::Result<()> {
    fs::create_dir_all(path)
        .map_err(|e| io::Error::new(e.kind(), format!("creating {}: {e}", path.display())))
}

/// Writes `text` to `path` (atomically, creating the directory) unless it already holds
/// exactly that; says whether it wrote. For configuration the daemon owns (units, drop-ins,
/// the tuned profile), so a resumed run changes nothing that is already right.
pub fn write_if_changed(path: &Path, text: &str) -> anyhow::Result<bool> {
    use anyhow::Context;
    if std::fs::read_to_string(path).ok().as_deref() == Some(text) {
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    atomic_write(path, text.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("state.json");
        atomic_write(&p, b"one").expect("write");
        atomic_write(&p, b"two").expect("write");
        assert_eq!(fs::read(&p).expect("read"), b"two");
        let names: Vec<_> = fs::read_dir(dir.path())
            .expect("ls")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }
}

/// An identifier read from a state file (a run id, a point id, a snapshot id, a machine
/// id) that becomes one component of a path: 1 to 128 of `A-Z a-z 0-9 . _ -`, not starting
/// with a dot. `../../victim` or `a/b` would make a path outside the directory it is
/// joined to; the error names what the identifier is and where it came from.
pub fn check_path_component(what: &str, value: &str) -> Result<(), String> {
    let ok = !value.is_empty()
        && value.len() <= 128
        && !value.starts_with('.')
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} {:?} is not a plain name (1 to 128 of A-Z, a-z, 0-9, '.', '_', '-', not starting with '.'): it would make a path outside its directory",
            value.chars().take(140).collect::<String>()
        ))
    }
}

#[cfg(test)]
mod path_component_tests {
    use super::check_path_component;

    #[test]
    fn only_plain_names_are_path_components() {
        for good in [
            "20261202T052721Z-c267",
            "p000-rw-c16-r1",
            "0a1b2c",
            "a.b_c-d",
        ] {
            assert_eq!(check_path_component("run id", good), Ok(()), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../../victim",
            "a/b",
            ".hidden",
            "a\0b",
            "a b",
            "é",
        ] {
            let err = check_path_component("run id", bad).expect_err(bad);
            assert!(err.starts_with("run id "), "{err}");
        }
        assert!(check_path_component("run id", &"a".repeat(129)).is_err());
    }
}
