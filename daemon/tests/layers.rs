//! The layering check: every `crate::`/`super::` path in the library (`daemon/src/`) and the
//! builder (`image/src/`) is an edge between top-level modules; the edges must point down
//! the layer table written in docs/architecture.md ("Layers"), and no set of modules may
//! close a cycle. Test modules (`#[cfg(test)] mod …`) are left out: tests may reach across.
//!
//! The table is read from the document, so the document and the check cannot drift apart.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One use of another module: where it is written and what it names.
#[derive(Debug, Clone)]
struct Edge {
    from: String,
    to: String,
    file: String,
    line: usize,
}

/// Source text with comments, string and character literals blanked out (newlines kept, so
/// line numbers stay right).
fn code_only(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if ch == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
        {
            // raw string r"…" / r#"…"#
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(ch);
                i += 1;
                continue;
            }
            for _ in i..=j {
                out.push(' ');
            }
            j += 1;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (1..=hashes).all(|k| c.get(j + k) == Some(&'#')) {
                    for _ in 0..=hashes {
                        out.push(' ');
                    }
                    j += hashes + 1;
                    break;
                }
                blank(&mut out, c[j]);
                j += 1;
            }
            i = j;
        } else if ch == '"' {
            out.push(' ');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if ch == '\'' {
            // a character literal ('x', '\n', '\u{..}') or a lifetime ('a)
            if next == Some('\\') {
                let mut j = i + 2;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                for _ in i..=j.min(c.len() - 1) {
                    out.push(' ');
                }
                i = j + 1;
            } else if c.get(i + 2) == Some(&'\'') {
                out.push_str("   ");
                i += 3;
            } else {
                out.push(ch);
                i += 1;
            }
        } else {
            out.push(ch);
            i += 1;
        }
    }
    out
}

/// `code` without its `#[cfg(test)] mod name { … }` blocks (blanked, lines kept).
fn without_test_modules(code: &str) -> String {
    let mut out: Vec<char> = code.chars().collect();
    let text: String = out.iter().collect();
    let mut search = 0;
    while let Some(at) = text[search..].find("#[cfg(test)]") {
        let start = search + at;
        let after = &text[start + "#[cfg(test)]".len()..];
        search = start + 1;
        if test_module_name(after).is_none_or(|(_, in_a_file)| in_a_file) {
            // Not a module, or one in a file of its own (left out by `edges`).
            continue;
        }
        // char index of byte offset (source is mostly ASCII; convert properly anyway)
        let start_c = text[..start].chars().count();
        let Some(open_rel) = text[start..].find('{') else {
            continue;
        };
        let mut i = start_c + text[start..start + open_rel].chars().count();
        let mut depth = 0;
        let from = start_c;
        while i < out.len() {
            match out[i] {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        let end = (i + 1).min(out.len());
        for ch in out.iter_mut().take(end).skip(from) {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
    }
    out.drain(..).collect()
}

/// After `#[cfg(test)]`: the module declared there, if one is, and whether it is in a file
/// of its own (`mod tests;`) rather than inline (`mod tests { … }`).
fn test_module_name(after: &str) -> Option<(String, bool)> {
    let t = after.trim_start();
    let t = ["pub(crate) mod ", "pub mod ", "mod "]
        .iter()
        .find_map(|p| t.strip_prefix(p))?;
    let name: String = t
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if name.is_empty() {
        return None;
    }
    let rest = t[name.len()..].trim_start();
    Some((name, rest.starts_with(';')))
}

/// The module paths of test modules in files of their own (`#[cfg(test)] mod tests;` in
/// `steps/mod.rs` → `["steps", "tests"]`): their files are test code, left out like inline
/// test modules.
fn test_module_paths(files: &[(PathBuf, Vec<String>)]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (path, module) in files {
        let src = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let code = code_only(&src);
        let mut search = 0;
        while let Some(at) = code[search..].find("#[cfg(test)]") {
            let after = &code[search + at + "#[cfg(test)]".len()..];
            search += at + 1;
            if let Some((name, true)) = test_module_name(after) {
                let mut m = module.clone();
                m.push(name);
                out.push(m);
            }
        }
    }
    out
}

fn ident_at(s: &[char], mut i: usize) -> (String, usize) {
    while i < s.len() && s[i].is_whitespace() {
        i += 1;
    }
    let start = i;
    while i < s.len() && (s[i].is_alphanumeric() || s[i] == '_') {
        i += 1;
    }
    (s[start..i].iter().collect(), i)
}

/// The first segments a path continues with after `prefix::` at index `i`: one name, or
/// each item of a `{a, b::c, …}` group.
fn first_segments(s: &[char], i: usize) -> Vec<String> {
    let mut j = i;
    while j < s.len() && s[j].is_whitespace() {
        j += 1;
    }
    if s.get(j) == Some(&'{') {
        let mut names = Vec::new();
        let mut depth = 0;
        let mut expect = true;
        while j < s.len() {
            match s[j] {
                '{' => {
                    depth += 1;
                    if depth == 1 {
                        expect = true;
                    }
                }
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ',' if depth == 1 => expect = true,
                c if expect && depth == 1 && (c.is_alphanumeric() || c == '_') => {
                    let (name, end) = ident_at(s, j);
                    names.push(name);
                    expect = false;
                    j = end;
                    continue;
                }
                _ => {}
            }
            j += 1;
        }
        names
    } else {
        let (name, _) = ident_at(s, j);
        if name.is_empty() {
            Vec::new()
        } else {
            vec![name]
        }
    }
}

/// A crate's source files with their module paths (`plan/validate.rs` → `["plan",
/// "validate"]`, `plan/mod.rs` → `["plan"]`).
fn module_files(root: &Path, skip: &[&str]) -> Vec<(PathBuf, Vec<String>)> {
    fn walk(dir: &Path, root: &Path, skip: &[&str], out: &mut Vec<(PathBuf, Vec<String>)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let rel = path
                .strip_prefix(root)
                .expect("under the root")
                .to_string_lossy()
                .to_string();
            if skip.iter().any(|s| rel == *s) {
                continue;
            }
            if path.is_dir() {
                walk(&path, root, skip, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let mut segs: Vec<String> = rel
                    .trim_end_matches(".rs")
                    .split('/')
                    .map(str::to_string)
                    .collect();
                if segs.last().is_some_and(|s| s == "mod") {
                    segs.pop();
                }
                if segs.len() == 1 && (segs[0] == "lib" || segs[0] == "main") {
                    segs.clear();
                }
                out.push((path, segs));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, skip, &mut out);
    out
}

/// Every edge between two different top-level modules of a crate rooted at `root`.
fn edges(root: &Path, skip: &[&str]) -> (BTreeSet<String>, Vec<Edge>) {
    let mut files = module_files(root, skip);
    let tests = test_module_paths(&files);
    files.retain(|(_, m)| !tests.iter().any(|t| m.starts_with(t)));
    let top: BTreeSet<String> = files
        .iter()
        .filter_map(|(_, m)| m.first().cloned())
        .collect();
    let mut found = Vec::new();
    for (path, module) in &files {
        let Some(from) = module.first() else { continue };
        let src = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let code = without_test_modules(&code_only(&src));
        let chars: Vec<char> = code.chars().collect();
        let rel = path
            .strip_prefix(
                root.parent()
                    .and_then(Path::parent)
                    .expect("a crate in a repo"),
            )
            .expect("under the repo")
            .display()
            .to_string();
        let mut line = 1;
        let mut i = 0;
        while i < chars.len() {
            if chars[i] == '\n' {
                line += 1;
            }
            let boundary = i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
            let rest = |p: &str| {
                p.chars()
                    .enumerate()
                    .all(|(k, ch)| chars.get(i + k) == Some(&ch))
            };
            let mut targets: Vec<String> = Vec::new();
            let mut advance = 1;
            if boundary && rest("crate::") {
                targets = first_segments(&chars, i + 7);
                advance = 7;
            } else if boundary && rest("super::") {
                let mut ups = 0;
                let mut j = i;
                loop {
                    let here: String = chars[j..(j + 7).min(chars.len())].iter().collect();
                    if here == "super::" {
                        ups += 1;
                        j += 7;
                    } else {
                        break;
                    }
                }
                advance = j - i;
                let len = module.len();
                // a file `a/b.rs` is module a::b: super is a; `a/mod.rs` is a: super is root
                let base = len.saturating_sub(ups);
                targets = if base >= 1 {
                    vec![module[0].clone()]
                } else {
                    first_segments(&chars, j)
                };
            }
            for to in targets {
                if top.contains(&to) && &to != from {
                    found.push(Edge {
                        from: from.clone(),
                        to,
                        file: rel.clone(),
                        line,
                    });
                }
            }
            i += advance;
        }
    }
    (top, found)
}

/// The cycles of the module graph: its strongly connected components of more than one
/// module (Tarjan).
fn cycles(nodes: &BTreeSet<String>, edges: &[Edge]) -> Vec<Vec<String>> {
    let names: Vec<&String> = nodes.iter().collect();
    let index: BTreeMap<&String, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut adj = vec![BTreeSet::new(); names.len()];
    for e in edges {
        adj[index[&e.from]].insert(index[&e.to]);
    }
    struct T {
        idx: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(v: usize, adj: &[BTreeSet<usize>], t: &mut T) {
        t.idx[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        for &w in &adj[v] {
            match t.idx[w] {
                None => {
                    visit(w, adj, t);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.idx[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().expect("v is on the stack");
                t.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let n = names.len();
    let mut t = T {
        idx: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.idx[v].is_none() {
            visit(v, &adj, &mut t);
        }
    }
    t.out
        .into_iter()
        .map(|c| c.into_iter().map(|i| names[i].clone()).collect())
        .collect()
}

/// The layer table of docs/architecture.md for the folder named in a `### … (`folder`)`
/// heading under "## Layers": module → layer number.
fn layer_table(doc: &str, folder: &str) -> BTreeMap<String, u32> {
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Layers"))
        .expect("docs/architecture.md has a \"## Layers\" section");
    let sub = section
        .split("\n### ")
        .find(|s| {
            s.lines()
                .next()
                .is_some_and(|h| h.contains(&format!("`{folder}`")))
        })
        .unwrap_or_else(|| panic!("\"## Layers\" has a \"### … (`{folder}`)\" table"));
    let mut table = BTreeMap::new();
    for row in sub.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let Ok(layer) = cells[1].parse::<u32>() else {
            continue;
        };
        for name in cells[2].split(',') {
            let name = name.trim().trim_matches('`').trim_end_matches('/');
            let name = name.trim_end_matches(".rs");
            assert!(
                table.insert(name.to_string(), layer).is_none(),
                "`{name}` is listed twice in the layer table of `{folder}`"
            );
        }
    }
    table
}

/// Checks one crate: every module in the table, every edge down, no cycle. Returns the
/// problems found, one a line.
fn check(folder: &str, root: &Path, skip: &[&str], doc: &str) -> Vec<String> {
    let table = layer_table(doc, folder);
    let (nodes, found) = edges(root, skip);
    let mut problems = Vec::new();
    for n in &nodes {
        if !table.contains_key(n) {
            problems.push(format!(
                "{folder}: module `{n}` is not in the layer table (docs/architecture.md, Layers)"
            ));
        }
    }
    for n in table.keys() {
        if !nodes.contains(n) {
            problems.push(format!(
                "{folder}: the layer table lists `{n}`, which is not a module"
            ));
        }
    }
    let mut seen = BTreeSet::new();
    for e in &found {
        let (Some(a), Some(b)) = (table.get(&e.from), table.get(&e.to)) else {
            continue;
        };
        if b >= a && seen.insert((e.from.clone(), e.to.clone())) {
            problems.push(format!(
                "{folder}: `{}` (layer {a}) uses `{}` (layer {b}), which is not below it: {}:{}",
                e.from, e.to, e.file, e.line
            ));
        }
    }
    for cycle in cycles(&nodes, &found) {
        let inside: Vec<String> = found
            .iter()
            .filter(|e| cycle.contains(&e.from) && cycle.contains(&e.to))
            .map(|e| {
                (
                    (e.from.clone(), e.to.clone()),
                    format!("{}:{}", e.file, e.line),
                )
            })
            .collect::<BTreeMap<_, _>>()
            .into_iter()
            .map(|((a, b), at)| format!("{a} → {b} ({at})"))
            .collect();
        problems.push(format!(
            "{folder}: cycle among {}: {}",
            cycle.join(", "),
            inside.join("; ")
        ));
    }
    problems
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the daemon crate is in the workspace")
        .to_path_buf()
}

/// The sources checked are this checkout's, or (to measure another one against this
/// table) those of the checkout `PGA_LAYERS_SOURCES` names.
#[test]
fn layers_point_down_and_close_no_cycle() {
    let doc =
        std::fs::read_to_string(repo().join("docs/architecture.md")).expect("docs/architecture.md");
    let root = std::env::var_os("PGA_LAYERS_SOURCES").map_or_else(repo, PathBuf::from);
    let mut problems = check(
        "daemon/src/",
        &root.join("daemon/src"),
        // the daemon binary is its own crate, above the whole library
        &["bin"],
        &doc,
    );
    problems.extend(check("image/src/", &root.join("image/src"), &[], &doc));
    assert!(
        problems.is_empty(),
        "{} layering problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The parser finds what it must: grouped, nested and `super::` paths, and not what is in
/// comments, strings or test modules.
#[test]
fn the_path_reader_sees_code_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("a")).expect("write");
    std::fs::write(
        src.join("lib.rs"),
        "pub mod a; pub mod b; pub mod c; pub mod d; pub mod e;",
    )
    .expect("write");
    std::fs::write(
        src.join("a/mod.rs"),
        "use crate::{b::X, c};\n// crate::d is a comment\nconst S: &str = \"crate::d\";\nconst R: &str = r#\"crate::d\"#;\nfn f<'x>(c: char) -> bool { c == '{' }\n#[cfg(test)]\nmod tests { use crate::e; fn g() { let _ = '}'; } }\n",
    )
    .expect("write");
    std::fs::write(
        src.join("a/inner.rs"),
        "use super::super::e::Y;\nuse super::Z;\n",
    )
    .expect("write");
    std::fs::write(src.join("b.rs"), "fn f() { crate::a::g(); }").expect("write");
    // A test module in a file of its own is left out, and what follows its declaration is
    // still read.
    std::fs::write(
        src.join("c.rs"),
        "#[cfg(test)]\nmod tests;\nfn h() { crate::d::k(); }\n",
    )
    .expect("write");
    std::fs::create_dir_all(src.join("c")).expect("write");
    std::fs::write(src.join("c/tests.rs"), "use crate::e::T;\n").expect("write");
    std::fs::write(src.join("d.rs"), "").expect("write");
    std::fs::write(src.join("e.rs"), "").expect("write");
    let (nodes, found) = edges(&src, &[]);
    let pairs: BTreeSet<(String, String)> = found
        .iter()
        .map(|e| (e.from.clone(), e.to.clone()))
        .collect();
    let want: BTreeSet<(String, String)> =
        [("a", "b"), ("a", "c"), ("a", "e"), ("b", "a"), ("c", "d")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
    assert_eq!(pairs, want);
    assert_eq!(
        cycles(&nodes, &found),
        vec![vec!["a".to_string(), "b".to_string()]]
    );
}
