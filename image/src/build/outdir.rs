//! Where a build goes: `--out DIR` is only ever replaced when it is empty or holds an
//! earlier build of this tool, unchanged (the marker `.pgappliance-build` lists every file
//! that build wrote with its size and sha256). Anything else is refused naming what is
//! there, and so, outright, is a file system root, `$HOME`, the current directory, or a
//! directory holding an input of the build, or a parent of one of these. Paths are resolved
//! first (symbolic links, `..`, relative to the current directory), so another spelling of
//! the same directory is caught too. The new build is moved into place by renames: the old
//! directory is only deleted once the new one stands where it was.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The file in a build directory that says this tool wrote it and what it wrote.
pub const MARKER: &str = ".pgappliance-build";
/// The marker's format; a marker of another format is not replaced.
pub const MARKER_FORMAT: u64 = 1;
/// How many of the entries of a refused directory the error names.
const NAMED_ENTRIES: usize = 5;

/// What an `--out` holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Previous {
    /// Nothing is there.
    Absent,
    /// An empty directory.
    Empty,
    /// An earlier build: its files and their sizes.
    Build(BTreeMap<String, u64>),
}

/// A checked `--out`: the directory it resolves to and what it holds.
#[derive(Debug)]
pub struct OutDir {
    pub path: PathBuf,
    pub previous: Previous,
}

/// `path` made absolute against `cwd`, with every symbolic link and `..` of its existing
/// part resolved; the part that does not exist yet is appended as given (no `..` in it).
pub fn resolve(path: &Path, cwd: &Path) -> Result<PathBuf> {
    let abs = cwd.join(path);
    let mut existing = abs.as_path();
    let mut rest = Vec::new();
    let base = loop {
        match std::fs::canonicalize(existing) {
            Ok(c) => break c,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                if existing.symlink_metadata().is_ok() {
                    bail!(
                        "--out {}: {} is a symbolic link to something that does not exist",
                        path.display(),
                        existing.display()
                    );
                }
                match (existing.file_name(), existing.parent()) {
                    (Some(name), Some(parent)) => {
                        rest.push(name.to_owned());
                        existing = parent;
                    }
                    _ => bail!(
                        "--out {}: {} does not exist, so `..` after it cannot be resolved",
                        path.display(),
                        existing.display()
                    ),
                }
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("--out {}: resolving {}", path.display(), existing.display())
                })
            }
        }
    };
    Ok(rest.iter().rev().fold(base, |p, name| p.join(name)))
}

/// Checks that the build may go to `out` (see the module comment). `inputs` are the files
/// the build reads, by what they are ("the plan").
pub fn check(out: &Path, inputs: &[(&str, &Path)]) -> Result<OutDir> {
    let cwd = std::env::current_dir().context("the current directory")?;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    check_with(out, inputs, &cwd, home.as_deref())
}

fn check_with(
    out: &Path,
    inputs: &[(&str, &Path)],
    cwd: &Path,
    home: Option<&Path>,
) -> Result<OutDir> {
    let path = resolve(out, cwd)?;
    let named = if path == out {
        format!("--out {}", out.display())
    } else {
        format!("--out {} (that is {})", out.display(), path.display())
    };
    let Some(parent) = path.parent() else {
        bail!("{named} is the root directory: give a directory of its own for the build");
    };
    let refuse = |what: &str, inside: &Path| -> Result<()> {
        let dir = std::fs::canonicalize(inside).unwrap_or_else(|_| inside.to_path_buf());
        if dir == path {
            bail!("{named} is {what}: give a directory of its own for the build");
        }
        if dir.starts_with(&path) {
            bail!(
                "{named} holds {what} ({}): give a directory of its own for the build",
                inside.display()
            );
        }
        Ok(())
    };
    refuse("the current directory", cwd)?;
    if let Some(home) = home.filter(|h| !h.as_os_str().is_empty()) {
        refuse("the home directory ($HOME)", home)?;
    }
    for (what, input) in inputs {
        let Ok(input) = std::fs::canonicalize(input) else {
            continue;
        };
        if input.starts_with(&path) {
            bail!(
                "{named} holds {what} {}: the build would replace its own input; give a directory of its own",
                input.display()
            );
        }
    }
    let meta = match path.symlink_metadata() {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Ok(OutDir {
                path,
                previous: Previous::Absent,
            })
        }
        r => r.with_context(|| format!("{named}: reading it"))?,
    };
    if !meta.is_dir() {
        bail!("{named} exists and is not a directory: give a directory for the build");
    }
    let parent_meta = parent
        .metadata()
        .with_context(|| format!("{named}: reading {}", parent.display()))?;
    if meta.dev() != parent_meta.dev() {
        bail!("{named} is the root of a mounted file system: give a directory inside it");
    }
    let previous = examine(&path, true).with_context(|| named.clone())?;
    Ok(OutDir { path, previous })
}

/// What an existing directory holds; refuses anything that is not empty or an unchanged
/// earlier build. `verify_content` also compares every file's sha256 with the marker's.
fn examine(dir: &Path, verify_content: bool) -> Result<Previous> {
    let mut entries: Vec<(String, std::fs::Metadata)> = Vec::new();
    for e in std::fs::read_dir(dir).context("listing it")? {
        let e = e.context("listing it")?;
        let meta = e.path().symlink_metadata().context("reading an entry")?;
        entries.push((e.file_name().to_string_lossy().into_owned(), meta));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    if entries.is_empty() {
        return Ok(Previous::Empty);
    }
    let shown = |names: &[String]| {
        let mut s = names
            .iter()
            .take(NAMED_ENTRIES)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if names.len() > NAMED_ENTRIES {
            s.push_str(&format!(" and {} more", names.len() - NAMED_ENTRIES));
        }
        s
    };
    let display = |(name, meta): &(String, std::fs::Metadata)| {
        if meta.is_dir() {
            format!("{name}/")
        } else if meta.file_type().is_symlink() {
            format!("{name} (a symbolic link)")
        } else {
            name.clone()
        }
    };
    let marked = entries
        .iter()
        .any(|(n, m)| n == MARKER && m.file_type().is_file());
    if !marked {
        let names: Vec<String> = entries.iter().map(display).collect();
        bail!(
            "it holds {} {} that pgappliance did not write: {}; a build replaces only an empty directory or an earlier build of its own (marked by {MARKER}): give a new or empty directory",
            names.len(),
            if names.len() == 1 { "entry" } else { "entries" },
            shown(&names)
        );
    }
    let files = read_marker(&dir.join(MARKER))?;
    let mut problems = Vec::new();
    let mut sizes = BTreeMap::new();
    for entry in entries.iter().filter(|(n, _)| n != MARKER) {
        let (name, meta) = entry;
        let Some((bytes, sha256)) = files.get(name) else {
            problems.push(format!("{} (not written by the build)", display(entry)));
            continue;
        };
        if !meta.file_type().is_file() || meta.len() != *bytes {
            problems.push(format!(
                "{} (changed since the build wrote it)",
                display(entry)
            ));
            continue;
        }
        if verify_content && file_sha256(&dir.join(name))? != *sha256 {
            problems.push(format!("{name} (changed since the build wrote it)"));
            continue;
        }
        sizes.insert(name.clone(), *bytes);
    }
    if !problems.is_empty() {
        bail!(
            "it holds an earlier build and {}: {}; nothing was replaced: move them away or give another directory",
            if problems.len() == 1 {
                "a file the build did not write as it is"
            } else {
                "files the build did not write as they are"
            },
            shown(&problems)
        );
    }
    Ok(Previous::Build(sizes))
}

/// The files a marker lists, with their sizes and sha256.
fn read_marker(path: &Path) -> Result<BTreeMap<String, (u64, String)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the build marker {MARKER}"))?;
    let bad = || {
        format!("{MARKER} is not a pgappliance build marker (it was not written by this tool); nothing was replaced")
    };
    let v: Value = serde_json::from_str(&text).with_context(bad)?;
    match v.get("format").and_then(Value::as_u64) {
        Some(MARKER_FORMAT) => {}
        Some(other) => bail!(
            "{MARKER} is of format {other}, written by another version of pgappliance (this one writes format {MARKER_FORMAT}); nothing was replaced: remove the directory yourself if it is to go"
        ),
        None => bail!(bad()),
    }
    let Some(files) = v.get("files").and_then(Value::as_object) else {
        bail!(bad());
    };
    let mut out = BTreeMap::new();
    for (name, f) in files {
        let bytes = f.get("bytes").and_then(Value::as_u64);
        let sha = f.get("sha256").and_then(Value::as_str);
        match (bytes, sha) {
            (Some(b), Some(s)) if !name.contains('/') && name != MARKER => {
                out.insert(name.clone(), (b, s.to_string()));
            }
            _ => bail!(bad()),
        }
    }
    Ok(out)
}

fn file_sha256(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).with_context(|| format!("reading {}", path.display()))?;
    Ok(format!("{:x}", h.finalize()))
}

/// Writes the marker into a finished build directory, listing every file in it.
pub fn write_marker(dir: &Path) -> Result<()> {
    let mut files = serde_json::Map::new();
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    names.sort();
    for p in names {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        files.insert(
            name,
            json!({ "bytes": p.metadata()?.len(), "sha256": file_sha256(&p)? }),
        );
    }
    let marker = json!({
        "format": MARKER_FORMAT,
        "written_by": format!("pgappliance {}", env!("CARGO_PKG_VERSION")),
        "files": files,
    });
    std::fs::write(
        dir.join(MARKER),
        serde_json::to_string_pretty(&marker)? + "\n",
    )
    .with_context(|| format!("writing {MARKER}"))
}

/// Moves the finished build `built` (a directory next to `out.path`) to `out.path`,
/// after checking that what is there is still what [`check`] found. An earlier build is
/// moved aside first and deleted only once the new one is in place; if the new one cannot
/// be moved in, the earlier one is put back.
pub fn install(built: tempfile::TempDir, out: &OutDir) -> Result<()> {
    let target = &out.path;
    let now = match target.symlink_metadata() {
        Err(e) if e.kind() == ErrorKind::NotFound => Previous::Absent,
        Err(e) => return Err(e).with_context(|| format!("reading {}", target.display())),
        Ok(m) if !m.is_dir() => bail!(
            "{} appeared during the build and is not a directory; the build was not moved there",
            target.display()
        ),
        Ok(_) => examine(target, false).with_context(|| format!("--out {}", target.display()))?,
    };
    if now != out.previous {
        bail!(
            "{} changed during the build; nothing was replaced: run the build again",
            target.display()
        );
    }
    let parent = target.parent().unwrap_or(Path::new("/"));
    if now == Previous::Absent {
        std::fs::rename(built.path(), target)
            .with_context(|| format!("moving the build to {}", target.display()))?;
        let _ = built.keep();
        return Ok(());
    }
    let aside = tempfile::Builder::new()
        .prefix(".pgappliance-previous-")
        .tempdir_in(parent)
        .with_context(|| format!("creating a directory in {}", parent.display()))?;
    let old = aside.path().join("build");
    std::fs::rename(target, &old)
        .with_context(|| format!("moving the earlier build {} aside", target.display()))?;
    if let Err(e) = std::fs::rename(built.path(), target) {
        let back = std::fs::rename(&old, target);
        let _ = aside.keep();
        return match back {
            Ok(()) => Err(e).with_context(|| {
                format!("moving the build to {}; the earlier build is back in place", target.display())
            }),
            Err(b) => Err(e).with_context(|| {
                format!(
                    "moving the build to {}; the earlier build could not be put back ({b}) and is in {}",
                    target.display(),
                    old.display()
                )
            }),
        };
    }
    let _ = built.keep();
    aside.close().with_context(|| {
        format!(
            "deleting the earlier build, moved aside to {}",
            old.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_follows_links_and_dots_and_keeps_what_does_not_exist() {
        let t = tempfile::tempdir().expect("tmp");
        let root = std::fs::canonicalize(t.path()).expect("canon");
        std::fs::create_dir_all(root.join("a/b")).expect("mkdir");
        std::os::unix::fs::symlink(root.join("a"), root.join("link")).expect("symlink");
        let r = |p: &str| resolve(Path::new(p), &root.join("a/b"));
        assert_eq!(r(".").expect("."), root.join("a/b"));
        assert_eq!(r("..").expect(".."), root.join("a"));
        assert_eq!(
            r("../../link/b/./new/deeper").expect("new"),
            root.join("a/b/new/deeper")
        );
        assert_eq!(
            r(root.join("link").to_str().expect("utf8")).expect("link"),
            root.join("a")
        );
        assert!(r("missing/../x").is_err());
        std::os::unix::fs::symlink(root.join("nowhere"), root.join("dangling")).expect("symlink");
        let e = resolve(&root.join("dangling"), &root)
            .expect_err("dangling")
            .to_string();
        assert!(e.contains("symbolic link"), "{e}");
    }

    #[test]
    fn marker_round_trip_and_what_breaks_it() {
        let t = tempfile::tempdir().expect("tmp");
        let d = t.path().join("b");
        std::fs::create_dir(&d).expect("mkdir");
        assert_eq!(examine(&d, true).expect("empty"), Previous::Empty);
        std::fs::write(d.join("ks.cfg"), "ks").expect("write");
        std::fs::write(d.join("payload.tar.gz"), "pay").expect("write");
        write_marker(&d).expect("marker");
        let want = Previous::Build(
            [("ks.cfg".to_string(), 2), ("payload.tar.gz".to_string(), 3)]
                .into_iter()
                .collect(),
        );
        assert_eq!(examine(&d, true).expect("build"), want);
        // Same size, other content: only the content check sees it.
        std::fs::write(d.join("ks.cfg"), "KS").expect("write");
        assert_eq!(examine(&d, false).expect("sizes"), want);
        let e = examine(&d, true).expect_err("changed").to_string();
        assert!(
            e.contains("ks.cfg (changed since the build wrote it)"),
            "{e}"
        );
        std::fs::write(d.join("ks.cfg"), "ks").expect("write");
        std::fs::create_dir(d.join("notes")).expect("mkdir");
        let e = examine(&d, true).expect_err("extra").to_string();
        assert!(e.contains("notes/ (not written by the build)"), "{e}");
        std::fs::remove_dir(d.join("notes")).expect("rmdir");
        for (text, says) in [
            ("{\"format\": 2, \"files\": {}}", "format 2"),
            ("not json", "not a pgappliance build marker"),
            (
                "{\"format\": 1, \"files\": {\"../x\": {\"bytes\": 1, \"sha256\": \"a\"}}}",
                "not a pgappliance build marker",
            ),
        ] {
            std::fs::write(d.join(MARKER), text).expect("write");
            let e = format!("{:#}", examine(&d, true).expect_err(text));
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn outright_refusals() {
        let t = tempfile::tempdir().expect("tmp");
        let root = std::fs::canonicalize(t.path()).expect("canon");
        let home = root.join("home/u");
        let work = home.join("work");
        std::fs::create_dir_all(&work).expect("mkdir");
        std::fs::write(work.join("plan.toml"), "").expect("write");
        let plan = work.join("plan.toml");
        let inputs = [("the plan", plan.as_path())];
        let c = |out: &Path| {
            check_with(out, &inputs, &work, Some(&home))
                .map(|o| o.previous)
                .map_err(|e| e.to_string())
        };
        let e = c(Path::new("/")).expect_err("/");
        assert!(e.contains("root directory"), "{e}");
        let e = c(Path::new(".")).expect_err(".");
        assert!(e.contains("is the current directory"), "{e}");
        let e = c(Path::new("..")).expect_err("..");
        assert!(e.contains("holds the current directory"), "{e}");
        let from_root = |out: &Path| {
            check_with(out, &inputs, &root, Some(&home))
                .expect_err("refused")
                .to_string()
        };
        let e = from_root(&home);
        assert!(e.contains("($HOME)"), "{e}");
        let e = from_root(&root.join("home"));
        assert!(e.contains("holds the home directory"), "{e}");
        // The plan's directory, seen from elsewhere.
        let e = check_with(&work, &inputs, &root, None)
            .expect_err("plan dir")
            .to_string();
        assert!(e.contains("holds the plan"), "{e}");
        let e = c(&plan).expect_err("plan file");
        assert!(e.contains("holds the plan"), "{e}");
        assert_eq!(c(Path::new("out")), Ok(Previous::Absent));
        std::fs::create_dir(work.join("out")).expect("mkdir");
        assert_eq!(c(Path::new("out")), Ok(Previous::Empty));
        let e = c(Path::new("/proc")).expect_err("/proc");
        assert!(e.contains("root of a mounted file system"), "{e}");
    }
}
