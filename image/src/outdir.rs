//! Where a command that writes a directory puts it (`build --out`, `launch --out`,
//! `collect --out`, `wait --teardown --out`): `--out DIR` is only ever replaced when it is
//! empty or holds an earlier output of the same command of this tool, unchanged (the marker
//! `.pgappliance-build` names the command and lists every file it wrote with its size and
//! sha256). Anything else is refused naming what is there, and so, outright, is a file
//! system root, `$HOME`, the current directory, or a directory holding an input of the
//! command, or a parent of one of these. Paths are resolved first (symbolic links, `..`,
//! relative to the current directory), so another spelling of the same directory is caught
//! too: a link to `/` is the root. The new output is written into a directory beside DIR
//! ([`OutDir::staging`]) and moved into place by renames: the old directory is only deleted
//! once the new one stands where it was.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The file in an output directory that says this tool wrote it and what it wrote.
pub(crate) const MARKER: &str = ".pgappliance-build";

/// Which command wrote an output directory; one replaces only its own earlier output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `build` and `launch`: payload, kickstart, user-data, ISO.
    Build,
    /// `collect` and `wait --teardown`: index.html, summary.csv, runs/.
    Collect,
}

impl Kind {
    /// As the marker names it.
    fn name(self) -> &'static str {
        match self {
            Kind::Build => "build",
            Kind::Collect => "collect",
        }
    }

    /// What goes into the directory, in messages.
    fn output(self) -> &'static str {
        match self {
            Kind::Build => "the build",
            Kind::Collect => "collect's pages",
        }
    }

    fn from_name(name: &str) -> Option<Kind> {
        [Kind::Build, Kind::Collect]
            .into_iter()
            .find(|k| k.name() == name)
    }
}
/// The marker's format; a marker of another format is not replaced.
pub(crate) const MARKER_FORMAT: u64 = 1;
/// How many of the entries of a refused directory the error names.
const NAMED_ENTRIES: usize = 5;

/// What an `--out` holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Previous {
    /// Nothing is there.
    Absent,
    /// An empty directory.
    Empty,
    /// An earlier output of the same command: its files (paths inside the directory) and
    /// their sizes.
    Earlier(BTreeMap<String, u64>),
}

/// A checked `--out`: the directory it resolves to and what it holds.
#[derive(Debug)]
pub(crate) struct OutDir {
    pub(crate) path: PathBuf,
    pub(crate) previous: Previous,
    pub(crate) kind: Kind,
}

impl OutDir {
    /// A new empty directory beside the output (on the same file system, so it can be
    /// renamed into place by [`install`]), to write the output into.
    pub(crate) fn staging(&self) -> Result<tempfile::TempDir> {
        let parent = self.path.parent().unwrap_or(Path::new("/"));
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
        tempfile::Builder::new()
            .prefix(&format!(".pgappliance-{}-", self.kind.name()))
            .tempdir_in(parent)
            .with_context(|| format!("creating a temporary directory in {}", parent.display()))
    }
}

/// `path` made absolute against `cwd`, with every symbolic link and `..` of its existing
/// part resolved; the part that does not exist yet is appended as given (no `..` in it).
pub(crate) fn resolve(path: &Path, cwd: &Path) -> Result<PathBuf> {
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

/// Checks that the output of `kind` may go to `out` (see the module comment). `inputs`
/// are the files and directories the command reads, by what they are ("the plan").
pub(crate) fn check(out: &Path, inputs: &[(&str, &Path)], kind: Kind) -> Result<OutDir> {
    let cwd = std::env::current_dir().context("the current directory")?;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    check_with(out, inputs, &cwd, home.as_deref(), kind)
}

fn check_with(
    out: &Path,
    inputs: &[(&str, &Path)],
    cwd: &Path,
    home: Option<&Path>,
    kind: Kind,
) -> Result<OutDir> {
    let output = kind.output();
    let path = resolve(out, cwd)?;
    let named = if path == out {
        format!("--out {}", out.display())
    } else {
        format!("--out {} (that is {})", out.display(), path.display())
    };
    let Some(parent) = path.parent() else {
        bail!("{named} is the root directory: give a directory of its own for {output}");
    };
    let refuse = |what: &str, inside: &Path| -> Result<()> {
        let dir = std::fs::canonicalize(inside).unwrap_or_else(|_| inside.to_path_buf());
        if dir == path {
            bail!("{named} is {what}: give a directory of its own for {output}");
        }
        if dir.starts_with(&path) {
            bail!(
                "{named} holds {what} ({}): give a directory of its own for {output}",
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
                "{named} holds {what} {}: {output} would replace its own input; give a directory of its own",
                input.display()
            );
        }
    }
    let meta = match path.symlink_metadata() {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Ok(OutDir {
                path,
                previous: Previous::Absent,
                kind,
            })
        }
        r => r.with_context(|| format!("{named}: reading it"))?,
    };
    if !meta.is_dir() {
        bail!("{named} exists and is not a directory: give a directory for {output}");
    }
    let parent_meta = parent
        .metadata()
        .with_context(|| format!("{named}: reading {}", parent.display()))?;
    if meta.dev() != parent_meta.dev() {
        bail!("{named} is the root of a mounted file system: give a directory inside it");
    }
    let previous = examine(&path, true, kind).with_context(|| named.clone())?;
    Ok(OutDir {
        path,
        previous,
        kind,
    })
}

/// Every entry under `dir` but the marker, by its path inside `dir` (`runs/a.html`), with
/// its metadata (not following links); directories are listed and descended into.
fn walk(dir: &Path) -> Result<Vec<(String, std::fs::Metadata)>> {
    let mut out = Vec::new();
    let mut pending = vec![(dir.to_path_buf(), String::new())];
    while let Some((at, prefix)) = pending.pop() {
        for e in std::fs::read_dir(&at).context("listing it")? {
            let e = e.context("listing it")?;
            let meta = e.path().symlink_metadata().context("reading an entry")?;
            let name = format!("{prefix}{}", e.file_name().to_string_lossy());
            if meta.is_dir() {
                pending.push((e.path(), format!("{name}/")));
            }
            out.push((name, meta));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// What an existing directory holds; refuses anything that is not empty or an unchanged
/// earlier output of `kind`. `verify_content` also compares every file's sha256 with the
/// marker's.
fn examine(dir: &Path, verify_content: bool, kind: Kind) -> Result<Previous> {
    let output = kind.output();
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
            "it holds {} {} that pgappliance did not write: {}; {output} replaces only an empty directory or an earlier output of its own (marked by {MARKER}): give a new or empty directory",
            names.len(),
            if names.len() == 1 { "entry" } else { "entries" },
            shown(&names)
        );
    }
    let (written_by, files) = read_marker(&dir.join(MARKER))?;
    if written_by != kind {
        bail!(
            "it holds the output of pgappliance {} (marked by {MARKER}), not of {}: nothing was replaced; give another directory",
            written_by.name(),
            kind.name()
        );
    }
    let mut problems = Vec::new();
    let mut sizes = BTreeMap::new();
    for entry in walk(dir)?.iter().filter(|(n, _)| n != MARKER) {
        let (name, meta) = entry;
        let Some((bytes, sha256)) = files.get(name) else {
            let holds_written =
                meta.is_dir() && files.keys().any(|f| f.starts_with(&format!("{name}/")));
            if !holds_written {
                problems.push(format!("{} (not written by {output})", display(entry)));
            }
            continue;
        };
        if !meta.file_type().is_file() || meta.len() != *bytes {
            problems.push(format!(
                "{} (changed since {output} wrote it)",
                display(entry)
            ));
            continue;
        }
        if verify_content && file_sha256(&dir.join(name))? != *sha256 {
            problems.push(format!("{name} (changed since {output} wrote it)"));
            continue;
        }
        sizes.insert(name.clone(), *bytes);
    }
    if !problems.is_empty() {
        bail!(
            "it holds an earlier output of {} and {}: {}; nothing was replaced: move them away or give another directory",
            kind.name(),
            if problems.len() == 1 {
                format!("a file {output} did not write as it is")
            } else {
                format!("files {output} did not write as they are")
            },
            shown(&problems)
        );
    }
    Ok(Previous::Earlier(sizes))
}

/// The files a marker lists: their sizes and sha256, by path inside the directory.
type MarkedFiles = BTreeMap<String, (u64, String)>;

/// Whether a path a marker lists stays inside the directory: relative, and of plain
/// segments (no empty, `.` or `..` one), and not the marker itself.
fn plain_inside(name: &str) -> bool {
    name != MARKER
        && !name.starts_with('/')
        && name
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != "..")
}

/// The command a marker names (a marker without one is a build's) and the files it lists,
/// with their sizes and sha256.
fn read_marker(path: &Path) -> Result<(Kind, MarkedFiles)> {
    let text = pgappliance::fsutil::read_regular_to_string(path)
        .with_context(|| format!("reading the marker {MARKER}"))?;
    let bad = || {
        format!("{MARKER} is not a pgappliance output marker (it was not written by this tool); nothing was replaced")
    };
    let v: Value = serde_json::from_str(&text).with_context(bad)?;
    match v.get("format").and_then(Value::as_u64) {
        Some(MARKER_FORMAT) => {}
        Some(other) => bail!(
            "{MARKER} is of format {other}, written by another version of pgappliance (this one writes format {MARKER_FORMAT}); nothing was replaced: remove the directory yourself if it is to go"
        ),
        None => bail!(bad()),
    }
    let kind = match v.get("kind") {
        None => Kind::Build,
        Some(k) => match k.as_str().and_then(Kind::from_name) {
            Some(kind) => kind,
            None => bail!(bad()),
        },
    };
    let Some(files) = v.get("files").and_then(Value::as_object) else {
        bail!(bad());
    };
    let mut out = BTreeMap::new();
    for (name, f) in files {
        let bytes = f.get("bytes").and_then(Value::as_u64);
        let sha = f.get("sha256").and_then(Value::as_str);
        match (bytes, sha) {
            (Some(b), Some(s)) if plain_inside(name) => {
                out.insert(name.clone(), (b, s.to_string()));
            }
            _ => bail!(bad()),
        }
    }
    Ok((kind, out))
}

fn file_sha256(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).with_context(|| format!("reading {}", path.display()))?;
    Ok(format!("{:x}", h.finalize()))
}

/// Writes the marker into a finished output directory of `kind`, listing every file in it
/// and below it.
pub(crate) fn write_marker(dir: &Path, kind: Kind) -> Result<()> {
    let mut files = serde_json::Map::new();
    for (name, meta) in walk(dir).with_context(|| dir.display().to_string())? {
        if meta.is_file() {
            let p = dir.join(&name);
            files.insert(
                name,
                json!({ "bytes": meta.len(), "sha256": file_sha256(&p)? }),
            );
        }
    }
    let marker = json!({
        "format": MARKER_FORMAT,
        "kind": kind.name(),
        "written_by": format!("pgappliance {}", env!("CARGO_PKG_VERSION")),
        "files": files,
    });
    std::fs::write(
        dir.join(MARKER),
        serde_json::to_string_pretty(&marker)? + "\n",
    )
    .with_context(|| format!("writing {MARKER}"))
}

/// Moves the finished output `built` ([`OutDir::staging`]) to `out.path`, after checking
/// that what is there is still what [`check`] found. An earlier output is moved aside
/// first and deleted only once the new one is in place; if the new one cannot be moved in,
/// the earlier one is put back.
pub(crate) fn install(built: tempfile::TempDir, out: &OutDir) -> Result<()> {
    let target = &out.path;
    let now = match target.symlink_metadata() {
        Err(e) if e.kind() == ErrorKind::NotFound => Previous::Absent,
        Err(e) => return Err(e).with_context(|| format!("reading {}", target.display())),
        Ok(m) if !m.is_dir() => bail!(
            "{} appeared while {} was written and is not a directory; nothing was moved there",
            target.display(),
            out.kind.output()
        ),
        Ok(_) => examine(target, false, out.kind)
            .with_context(|| format!("--out {}", target.display()))?,
    };
    if now != out.previous {
        bail!(
            "{} changed while {} was written; nothing was replaced: run it again",
            target.display(),
            out.kind.output()
        );
    }
    let parent = target.parent().unwrap_or(Path::new("/"));
    if now == Previous::Absent {
        std::fs::rename(built.path(), target)
            .with_context(|| format!("moving {} to {}", out.kind.output(), target.display()))?;
        let _ = built.keep();
        return Ok(());
    }
    let aside = tempfile::Builder::new()
        .prefix(".pgappliance-previous-")
        .tempdir_in(parent)
        .with_context(|| format!("creating a directory in {}", parent.display()))?;
    let output = out.kind.output();
    let old = aside.path().join("earlier");
    std::fs::rename(target, &old)
        .with_context(|| format!("moving the earlier output {} aside", target.display()))?;
    if let Err(e) = std::fs::rename(built.path(), target) {
        let back = std::fs::rename(&old, target);
        let _ = aside.keep();
        return match back {
            Ok(()) => Err(e).with_context(|| {
                format!("moving {output} to {}; the earlier output is back in place", target.display())
            }),
            Err(b) => Err(e).with_context(|| {
                format!(
                    "moving {output} to {}; the earlier output could not be put back ({b}) and is in {}",
                    target.display(),
                    old.display()
                )
            }),
        };
    }
    let _ = built.keep();
    aside.close().with_context(|| {
        format!(
            "deleting the earlier output, moved aside to {}",
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
        assert_eq!(
            examine(&d, true, Kind::Build).expect("empty"),
            Previous::Empty
        );
        std::fs::write(d.join("ks.cfg"), "ks").expect("write");
        std::fs::write(d.join("payload.tar.gz"), "pay").expect("write");
        write_marker(&d, Kind::Build).expect("marker");
        let want = Previous::Earlier(
            [("ks.cfg".to_string(), 2), ("payload.tar.gz".to_string(), 3)]
                .into_iter()
                .collect(),
        );
        assert_eq!(examine(&d, true, Kind::Build).expect("build"), want);
        // Same size, other content: only the content check sees it.
        std::fs::write(d.join("ks.cfg"), "KS").expect("write");
        assert_eq!(examine(&d, false, Kind::Build).expect("sizes"), want);
        let e = examine(&d, true, Kind::Build)
            .expect_err("changed")
            .to_string();
        assert!(
            e.contains("ks.cfg (changed since the build wrote it)"),
            "{e}"
        );
        std::fs::write(d.join("ks.cfg"), "ks").expect("write");
        std::fs::create_dir(d.join("notes")).expect("mkdir");
        let e = examine(&d, true, Kind::Build)
            .expect_err("extra")
            .to_string();
        assert!(e.contains("notes/ (not written by the build)"), "{e}");
        std::fs::remove_dir(d.join("notes")).expect("rmdir");
        for (text, says) in [
            ("{\"format\": 2, \"files\": {}}", "format 2"),
            ("not json", "not a pgappliance output marker"),
            (
                "{\"format\": 1, \"files\": {\"../x\": {\"bytes\": 1, \"sha256\": \"a\"}}}",
                "not a pgappliance output marker",
            ),
        ] {
            std::fs::write(d.join(MARKER), text).expect("write");
            let e = format!("{:#}", examine(&d, true, Kind::Build).expect_err(text));
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
            check_with(out, &inputs, &work, Some(&home), Kind::Build)
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
            check_with(out, &inputs, &root, Some(&home), Kind::Build)
                .expect_err("refused")
                .to_string()
        };
        let e = from_root(&home);
        assert!(e.contains("($HOME)"), "{e}");
        let e = from_root(&root.join("home"));
        assert!(e.contains("holds the home directory"), "{e}");
        // The plan's directory, seen from elsewhere.
        let e = check_with(&work, &inputs, &root, None, Kind::Build)
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

    #[test]
    fn a_collect_output_with_subdirectories_round_trips_and_is_not_a_build() {
        let t = tempfile::tempdir().expect("tmp");
        let d = t.path().join("cmp");
        std::fs::create_dir_all(d.join("runs")).expect("mkdir");
        std::fs::write(d.join("index.html"), "<html>").expect("write");
        std::fs::write(d.join("runs/a.html"), "run").expect("write");
        write_marker(&d, Kind::Collect).expect("marker");
        let want = Previous::Earlier(
            [
                ("index.html".to_string(), 6),
                ("runs/a.html".to_string(), 3),
            ]
            .into_iter()
            .collect(),
        );
        assert_eq!(examine(&d, true, Kind::Collect).expect("earlier"), want);
        let e = examine(&d, true, Kind::Build)
            .expect_err("a build")
            .to_string();
        assert!(e.contains("output of pgappliance collect"), "{e}");
        std::fs::write(d.join("runs/notes.txt"), "mine").expect("write");
        let e = examine(&d, true, Kind::Collect)
            .expect_err("extra")
            .to_string();
        assert!(
            e.contains("runs/notes.txt (not written by collect's pages)"),
            "{e}"
        );
    }

    #[test]
    fn someone_elses_directory_and_a_link_to_the_root_are_refused_for_collect() {
        let t = tempfile::tempdir().expect("tmp");
        let root = std::fs::canonicalize(t.path()).expect("canon");
        let theirs = root.join("theirs");
        std::fs::create_dir(&theirs).expect("mkdir");
        std::fs::write(theirs.join("index.html"), "their page").expect("write");
        let e = format!(
            "{:#}",
            check_with(&theirs, &[], &root, None, Kind::Collect).expect_err("theirs")
        );
        assert!(
            e.contains("that pgappliance did not write: index.html"),
            "{e}"
        );
        std::os::unix::fs::symlink("/", root.join("to-root")).expect("symlink");
        let e = check_with(&root.join("to-root"), &[], &root, None, Kind::Collect)
            .expect_err("root")
            .to_string();
        assert!(e.contains("(that is /) is the root directory"), "{e}");
    }
}
