//! Mapping plan problems back to the file: key paths ⇄ byte spans ⇄ line and column.

use std::fmt;
use std::ops::Range;

use toml_edit::{Document, Item, Table, Value};

use super::PlanIssue;

/// Keys the plan may spell by another name (serde aliases), as (key, alias).
const KEY_ALIASES: &[(&str, &str)] = &[("progress_interval_s", "report_interval_s")];

/// A path to a key in the plan, e.g. `workloads[1].clients[2]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyPath(Vec<Segment>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

impl KeyPath {
    pub fn root() -> Self {
        KeyPath(Vec::new())
    }
    pub fn key(&self, k: &str) -> Self {
        let mut v = self.0.clone();
        v.push(Segment::Key(k.to_string()));
        KeyPath(v)
    }
    pub(crate) fn index(&self, i: usize) -> Self {
        let mut v = self.0.clone();
        v.push(Segment::Index(i));
        KeyPath(v)
    }
    /// Whether `self` is `other` or inside it.
    pub(crate) fn starts_with(&self, other: &KeyPath) -> bool {
        self.0.starts_with(&other.0)
    }
    /// The last key, when the path ends in one (not an array index).
    pub(crate) fn last_key(&self) -> Option<&str> {
        match self.0.last()? {
            Segment::Key(k) => Some(k),
            Segment::Index(_) => None,
        }
    }
    pub(crate) fn parent(&self) -> Option<KeyPath> {
        let (_, rest) = self.0.split_last()?;
        Some(KeyPath(rest.to_vec()))
    }
    /// The item at this path in a document, if the plan's text has it.
    pub(crate) fn item<'a>(&self, doc: &'a toml_edit::DocumentMut) -> Option<&'a Item> {
        let mut item = doc.as_item();
        for seg in &self.0 {
            item = match seg {
                Segment::Key(k) => item.get(k.as_str())?,
                Segment::Index(i) => item.get(*i)?,
            };
        }
        Some(item)
    }
    /// The path as the plan wrote it: a key the plan spelt by its alias (`report_interval_s`
    /// for `progress_interval_s`) is named by that alias, in the path and in the message,
    /// so the problem is shown at the key's own line under the name the plan uses.
    #[allow(clippy::wrong_self_convention)]
    pub(crate) fn as_written(
        self,
        doc: &toml_edit::DocumentMut,
        message: String,
    ) -> (KeyPath, String) {
        for (key, alias) in KEY_ALIASES {
            if self.last_key() != Some(*key) || self.item(doc).is_some() {
                continue;
            }
            let Some(parent) = self.parent() else {
                continue;
            };
            let spelt = parent.key(alias);
            if spelt.item(doc).is_some() {
                return (spelt, message.replace(key, alias));
            }
        }
        (self, message)
    }
    /// The item at this path in an editable document.
    pub(crate) fn item_mut<'a>(&self, doc: &'a mut toml_edit::DocumentMut) -> Option<&'a mut Item> {
        let mut item = doc.as_item_mut();
        for seg in &self.0 {
            item = match seg {
                Segment::Key(k) => item.get_mut(k.as_str())?,
                Segment::Index(i) => item.get_mut(*i)?,
            };
        }
        Some(item)
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return write!(f, "(plan)");
        }
        for (n, seg) in self.0.iter().enumerate() {
            match seg {
                Segment::Key(k) if n == 0 => write!(f, "{k}")?,
                Segment::Key(k) => write!(f, ".{k}")?,
                Segment::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|p| p + 1).unwrap_or(0);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Turns a deserialisation error into a located issue naming the key at fault.
pub(crate) fn issue_from_toml_error(text: &str, err: &toml::de::Error) -> PlanIssue {
    let span = err.span().unwrap_or(0..0);
    let (line, column) = line_col(text, span.start);
    let key = match Document::parse(text) {
        Ok(doc) => path_at(doc.as_table(), &span, &KeyPath::root())
            .map(|p| p.to_string())
            .unwrap_or_else(|| "(plan)".to_string()),
        Err(_) => "(syntax)".to_string(),
    };
    PlanIssue {
        line,
        column,
        key,
        message: err.message().trim().to_string(),
    }
}

/// Where a deserialisation error points in `text`: the key path, and whether it points at
/// the key itself (an unknown key) rather than its value.
pub(crate) fn error_path(text: &str, err: &toml::de::Error) -> Option<(KeyPath, bool)> {
    let span = err.span()?;
    let doc = Document::parse(text).ok()?;
    let path = path_at(doc.as_table(), &span, &KeyPath::root())?;
    let on_key = key_span(doc.as_table(), &path.0).is_some_and(|k| covers(&k, &span));
    Some((path, on_key))
}

/// The table (or array-of-tables element) whose span is exactly `span`; the top level
/// when none is.
pub(crate) fn table_with_span(text: &str, span: &Range<usize>) -> Option<KeyPath> {
    fn walk(table: &Table, span: &Range<usize>, here: &KeyPath) -> Option<KeyPath> {
        for (k, item) in table.iter() {
            let path = here.key(k);
            match item {
                Item::Table(t) => {
                    if t.span().as_ref() == Some(span) {
                        return Some(path);
                    }
                    if let Some(found) = walk(t, span, &path) {
                        return Some(found);
                    }
                }
                Item::ArrayOfTables(a) => {
                    for (i, t) in a.iter().enumerate() {
                        let p = path.index(i);
                        if t.span().as_ref() == Some(span) {
                            return Some(p);
                        }
                        if let Some(found) = walk(t, span, &p) {
                            return Some(found);
                        }
                    }
                }
                Item::Value(v) => {
                    if let Some(found) = inline(v, span, &path) {
                        return Some(found);
                    }
                }
                Item::None => {}
            }
        }
        None
    }
    fn inline(v: &Value, span: &Range<usize>, here: &KeyPath) -> Option<KeyPath> {
        match v {
            Value::InlineTable(t) => {
                if t.span().as_ref() == Some(span) {
                    return Some(here.clone());
                }
                t.iter().find_map(|(k, v)| inline(v, span, &here.key(k)))
            }
            Value::Array(a) => a
                .iter()
                .enumerate()
                .find_map(|(i, v)| inline(v, span, &here.index(i))),
            _ => None,
        }
    }
    let doc = Document::parse(text).ok()?;
    Some(walk(doc.as_table(), span, &KeyPath::root()).unwrap_or_default())
}

/// Locates a problem at the key itself (an unknown key), else like [`locate`].
pub(crate) fn locate_key(text: &str, path: &KeyPath, message: String) -> PlanIssue {
    let offset = Document::parse(text)
        .ok()
        .and_then(|doc| key_span(doc.as_table(), &path.0))
        .map(|s| s.start);
    match offset {
        Some(offset) => {
            let (line, column) = line_col(text, offset);
            PlanIssue {
                line,
                column,
                key: path.to_string(),
                message,
            }
        }
        None => locate(text, path, message),
    }
}

/// The span of the last key of `path`, when it is a key in a table or inline table.
fn key_span(table: &Table, path: &[Segment]) -> Option<Range<usize>> {
    let (first, rest) = path.split_first()?;
    let Segment::Key(k) = first else { return None };
    if rest.is_empty() {
        return table.key(k).and_then(|key| key.span());
    }
    match (table.get(k)?, rest.split_first()?) {
        (Item::Table(t), _) => key_span(t, rest),
        (Item::ArrayOfTables(a), (Segment::Index(i), more)) => key_span(a.get(*i)?, more),
        (Item::Value(v), _) => value_key_span(v, rest),
        _ => None,
    }
}

fn value_key_span(value: &Value, path: &[Segment]) -> Option<Range<usize>> {
    match (value, path.split_first()?) {
        (Value::InlineTable(t), (Segment::Key(k), more)) => {
            if more.is_empty() {
                t.key(k).and_then(|key| key.span())
            } else {
                value_key_span(t.get(k)?, more)
            }
        }
        (Value::Array(a), (Segment::Index(i), more)) => value_key_span(a.get(*i)?, more),
        _ => None,
    }
}

/// Locates a validation problem: the value of the key when it exists, else its nearest
/// existing parent.
pub(crate) fn locate(text: &str, path: &KeyPath, message: String) -> PlanIssue {
    let offset = Document::parse(text)
        .ok()
        .and_then(|doc| span_of(doc.as_table(), &path.0))
        .map(|s| s.start)
        .unwrap_or(0);
    let (line, column) = line_col(text, offset);
    PlanIssue {
        line,
        column,
        key: path.to_string(),
        message,
    }
}

fn span_of(table: &Table, path: &[Segment]) -> Option<Range<usize>> {
    let (first, rest) = path.split_first()?;
    let Segment::Key(k) = first else { return None };
    let Some(item) = table.get(k) else {
        return table.span();
    };
    let key_span = table.key(k).and_then(|key| key.span());
    span_in_item(item, rest)
        .or(key_span)
        .or_else(|| table.span())
}

fn span_in_item(item: &Item, path: &[Segment]) -> Option<Range<usize>> {
    let Some((first, rest)) = path.split_first() else {
        return item.span().or_else(|| match item {
            Item::ArrayOfTables(a) => a.get(0).and_then(|t| t.span()),
            _ => None,
        });
    };
    match (item, first) {
        (Item::Table(t), Segment::Key(_)) => span_of(t, path),
        (Item::ArrayOfTables(a), Segment::Index(i)) => {
            let t = a.get(*i)?;
            if rest.is_empty() {
                t.span()
            } else {
                span_of(t, rest).or_else(|| t.span())
            }
        }
        (Item::Value(v), _) => span_in_value(v, path).or_else(|| v.span()),
        _ => item.span(),
    }
}

fn span_in_value(value: &Value, path: &[Segment]) -> Option<Range<usize>> {
    let Some((first, rest)) = path.split_first() else {
        return value.span();
    };
    match (value, first) {
        (Value::Array(a), Segment::Index(i)) => {
            a.get(*i).and_then(|v| span_in_value(v, rest)).or(a.span())
        }
        (Value::InlineTable(t), Segment::Key(k)) => {
            let key_span = t.key(k).and_then(|key| key.span());
            t.get(k)
                .and_then(|v| span_in_value(v, rest))
                .or(key_span)
                .or(t.span())
        }
        _ => value.span(),
    }
}

/// The innermost key path whose key or value covers `span`.
fn path_at(table: &Table, span: &Range<usize>, here: &KeyPath) -> Option<KeyPath> {
    for (k, item) in table.iter() {
        let path = here.key(k);
        let key_hit = table
            .key(k)
            .and_then(|key| key.span())
            .is_some_and(|s| covers(&s, span));
        if key_hit {
            return Some(path);
        }
        if let Some(found) = path_in_item(item, span, &path) {
            return Some(found);
        }
    }
    None
}

fn path_in_item(item: &Item, span: &Range<usize>, here: &KeyPath) -> Option<KeyPath> {
    match item {
        Item::Table(t) => path_at(t, span, here)
            .or_else(|| t.span().filter(|s| covers(s, span)).map(|_| here.clone())),
        Item::ArrayOfTables(a) => a.iter().enumerate().find_map(|(i, t)| {
            let p = here.index(i);
            path_at(t, span, &p).or_else(|| t.span().filter(|s| covers(s, span)).map(|_| p))
        }),
        Item::Value(v) => path_in_value(v, span, here),
        Item::None => None,
    }
}

fn path_in_value(value: &Value, span: &Range<usize>, here: &KeyPath) -> Option<KeyPath> {
    if !value.span().is_some_and(|s| covers(&s, span)) {
        return None;
    }
    let inner = match value {
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, v)| path_in_value(v, span, &here.index(i))),
        Value::InlineTable(t) => t.iter().find_map(|(k, v)| {
            let p = here.key(k);
            let key_hit = t
                .key(k)
                .and_then(|key| key.span())
                .is_some_and(|s| covers(&s, span));
            if key_hit {
                Some(p)
            } else {
                path_in_value(v, span, &p)
            }
        }),
        _ => None,
    };
    Some(inner.unwrap_or_else(|| here.clone()))
}

fn covers(outer: &Range<usize>, inner: &Range<usize>) -> bool {
    outer.start <= inner.start && inner.end <= outer.end.max(outer.start + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one() {
        let text = "a = 1\nbb = 2\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 6), (2, 1));
        assert_eq!(line_col(text, 11), (2, 6));
    }

    #[test]
    fn key_path_display() {
        let p = KeyPath::root().key("workloads").index(1).key("clients");
        assert_eq!(p.to_string(), "workloads[1].clients");
    }

    #[test]
    fn locates_nested_array_values() {
        let text = "[[w]]\nname = \"a\"\n[[w]]\nname = \"b\"\nclients = [1, 5, 3]\n";
        let path = KeyPath::root().key("w").index(1).key("clients").index(2);
        let issue = locate(text, &path, "x".into());
        assert_eq!((issue.line, issue.column), (5, 18));
    }
}
