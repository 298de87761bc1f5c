//! Files the programs read and write, safely.
//!
//! Reading a path a user gave: [`open_regular`] opens it without blocking and refuses
//! anything but a regular file (a FIFO would block forever, a directory or a device is no
//! input), naming the path and what it is.
//!
//! Writing the work directory: [`atomic_write`] (temp file in the same directory, fsync,
//! rename, fsync directory: a reader or a resumed daemon sees the old content or the new,
//! never a torn file) and [`open_own_file`] for files written in place (the lock, command
//! output). Neither follows a symbolic link, and a file opened in place must be a regular
//! file of one name that belongs to this user: a link planted in the work directory never
//! makes the daemon write somewhere else.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// What a file system entry is, in words for an error ("a FIFO", "a directory").
pub(crate) fn kind_of(ft: fs::FileType) -> &'static str {
    if ft.is_file() {
        "a regular file"
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// Opens a file a user named for reading. It is opened with `O_NONBLOCK`, so a FIFO never
/// blocks, and refused unless it is a regular file; the error names the path and what it
/// is. Symbolic links to a regular file are followed (the user chose the path).
pub fn open_regular(path: &Path) -> io::Result<File> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(named)?;
    let ft = f.metadata().map_err(named)?.file_type();
    if !ft.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is {}, not a regular file: give a file",
                path.display(),
                kind_of(ft)
            ),
        ));
    }
    Ok(f)
}

/// The bytes of a regular file a user named (see [`open_regular`]).
pub fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    io::Read::read_to_end(&mut open_regular(path)?, &mut bytes)?;
    Ok(bytes)
}

/// The text of a regular file a user named (see [`open_regular`]).
pub fn read_regular_to_string(path: &Path) -> io::Result<String> {
    String::from_utf8(read_regular(path)?).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: stream did not contain valid UTF-8", path.display()),
        )
    })
}

/// Reads a UTF-8 regular file of at most `max` bytes (see [`open_regular`]); a larger one
/// is refused with an error saying so, without being read into memory.
pub fn read_to_string_limited(path: &Path, max: u64, what: &str) -> io::Result<String> {
    let mut bytes = Vec::new();
    io::Read::read_to_end(
        &mut io::Read::take(open_regular(path)?, max + 1),
        &mut bytes,
    )?;
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

pub(crate) fn atomic_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
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
        // A temp file left by an earlier process of the same pid, or a link planted under
        // its name, is removed (a link itself, not its target), and the new one is created
        // exclusively without following links.
        match fs::remove_file(&tmp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
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
pub(crate) fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    bytes.push(b'\n');
    atomic_write(path, &bytes)
}

/// Opens (creating it if need be) a file the daemon writes in place in its work
/// directory: without following a symbolic link (`O_NOFOLLOW`) or blocking on a FIFO,
/// and refused unless it is a regular file of one name owned by this user, so that no
/// link, hard link or special file planted under its name makes the daemon write
/// somewhere else. `truncate` empties it once it is checked.
pub(crate) fn open_own_file(path: &Path, read: bool, truncate: bool) -> io::Result<File> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let f = OpenOptions::new()
        .read(read)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(|e| {
            // A link (ELOOP), a FIFO without a reader (ENXIO), a directory (EISDIR):
            // named as what it is.
            match fs::symlink_metadata(path) {
                Ok(md) if !md.file_type().is_file() => io::Error::new(
                    e.kind(),
                    format!(
                        "{} is {}: the daemon writes only files of its own there; remove it",
                        path.display(),
                        kind_of(md.file_type())
                    ),
                ),
                _ => named(e),
            }
        })?;
    let md = f.metadata().map_err(named)?;
    let refuse = |why: String| {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} {why}: the daemon writes only files of its own there; remove it",
                path.display()
            ),
        ))
    };
    if !md.file_type().is_file() {
        return refuse(format!("is {}", kind_of(md.file_type())));
    }
    if md.nlink() != 1 {
        return refuse(format!(
            "has {} names (hard links): writing it would change another file",
            md.nlink()
        ));
    }
    let me = nix::unistd::geteuid().as_raw();
    if md.uid() != me {
        return refuse(format!(
            "belongs to uid {}, not to this user (uid {me})",
            md.uid()
        ));
    }
    if truncate {
        f.set_len(0).map_err(named)?;
    }
    Ok(f)
}

pub(crate) fn create_dir_all(path: &Path) -> io::Result<()> {
    fs::create_dir_all(path)
        .map_err(|e| io::Error::new(e.kind(), format!("creating {}: {e}", path.display())))
}

/// Writes `text` to `path` (atomically, creating the directory) unless it already holds
/// exactly that; says whether it wrote. For configuration the daemon owns (units, drop-ins,
/// the tuned profile), so a resumed run changes nothing that is already right.
pub(crate) fn write_if_changed(path: &Path, text: &str) -> anyhow::Result<bool> {
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

    #[test]
    fn atomic_write_never_writes_through_a_planted_link() {
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("precious");
        fs::write(&victim, "keep me\n").expect("write");
        let work = dir.path().join("work");
        fs::create_dir(&work).expect("mkdir");
        // A link where the temp file goes, and one where the file goes.
        let tmp = work.join(format!(".state.json.tmp-{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &tmp).expect("symlink");
        std::os::unix::fs::symlink(&victim, work.join("state.json")).expect("symlink");
        atomic_write(&work.join("state.json"), b"new").expect("write");
        assert_eq!(fs::read_to_string(&victim).expect("read"), "keep me\n");
        let md = fs::symlink_metadata(work.join("state.json")).expect("stat");
        assert!(
            md.file_type().is_file(),
            "the link is replaced, not followed"
        );
        assert_eq!(fs::read(work.join("state.json")).expect("read"), b"new");
    }

    #[test]
    fn own_files_are_refused_unless_regular_of_one_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("precious");
        fs::write(&victim, "keep me\n").expect("write");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).expect("symlink");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .expect("mkfifo");
        let hard = dir.path().join("hard");
        fs::hard_link(&victim, &hard).expect("link");
        for (path, says) in [
            (&link, "is a symbolic link"),
            (&fifo, "is a FIFO"),
            (&hard, "has 2 names"),
            (&dir.path().to_path_buf(), "is a directory"),
        ] {
            let e = open_own_file(path, false, true)
                .expect_err("refused")
                .to_string();
            assert!(e.contains(&path.display().to_string()), "{e}");
            assert!(e.contains(says), "{says}: {e}");
        }
        assert_eq!(fs::read_to_string(&victim).expect("read"), "keep me\n");
        let own = dir.path().join("own");
        fs::write(&own, "old").expect("write");
        open_own_file(&own, false, true).expect("own file");
        assert_eq!(fs::read(&own).expect("read"), b"");
    }

    #[test]
    fn user_inputs_must_be_regular_files_and_a_fifo_never_blocks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("plan.toml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .expect("mkfifo");
        for (path, says) in [
            (fifo.as_path(), "is a FIFO, not a regular file"),
            (dir.path(), "is a directory, not a regular file"),
            (
                Path::new("/dev/null"),
                "is a character device, not a regular file",
            ),
        ] {
            let e = read_to_string_limited(path, 1 << 20, "a plan")
                .expect_err("refused")
                .to_string();
            assert!(e.contains(&path.display().to_string()), "{e}");
            assert!(e.contains(says), "{says}: {e}");
            let e = read_regular(path).expect_err("refused").to_string();
            assert!(e.contains(says), "{says}: {e}");
        }
        let file = dir.path().join("ok");
        fs::write(&file, "text").expect("write");
        assert_eq!(read_regular_to_string(&file).expect("read"), "text");
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
