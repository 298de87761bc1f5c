//! Every type error of a plan at once. serde stops at the first one, so the plan is
//! deserialised again with each fault taken out (an unknown key removed, a missing or
//! wrong value replaced by a stand-in of a type that fits) until it deserialises; each
//! fault is reported where it is in the original text, in words a user understands.

use toml_edit::{value, Array, DocumentMut, InlineTable, Item, Table};

use super::location::{self, KeyPath};
use super::{Plan, PlanIssue};

/// A plan with more faults than this is reported up to here.
const MAX_FAULTS: usize = 100;
/// Rounds of deserialising (each fixes one fault or tries one more stand-in).
const MAX_ROUNDS: usize = 1000;

/// What deserialising found: the plan (with stand-ins where values were wrong), the type
/// errors, and the key paths that hold stand-ins (their validation problems are not real).
pub(crate) struct Deserialised {
    pub(crate) plan: Option<Plan>,
    pub(crate) issues: Vec<PlanIssue>,
    pub(crate) stand_ins: Vec<KeyPath>,
}

struct Fault {
    path: KeyPath,
    on_key: bool,
    message: String,
}

fn attempt(text: &str) -> Result<Plan, Fault> {
    toml::from_str::<Plan>(text).map_err(|err| {
        let message = err.message().trim().to_string();
        // A missing key is reported on the span of its table (the whole table's header);
        // the top level's is an empty span.
        let (path, on_key) = if missing_field(&message).is_some() {
            let table = err
                .span()
                .and_then(|span| location::table_with_span(text, &span))
                .unwrap_or_default();
            (table, false)
        } else {
            location::error_path(text, &err).unwrap_or_default()
        };
        Fault {
            path,
            on_key,
            message,
        }
    })
}

/// `missing field `x`` → `x`.
fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.split('`').next()
}

/// The key path a fault is about: the missing key for "missing field", else where it points.
fn target(f: &Fault) -> KeyPath {
    match missing_field(&f.message) {
        Some(k) => f.path.key(k),
        None => f.path.clone(),
    }
}

/// serde's words for types, as a plan's author knows them.
pub(crate) fn plain(message: &str) -> String {
    let mut m = message.to_string();
    for (from, to) in [
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        (
            "expected u64",
            "expected a whole number from 0 to 18446744073709551615",
        ),
        ("expected i64", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected a sequence", "expected a list"),
        ("expected a map", "expected a table"),
        ("invalid type: sequence", "invalid type: list"),
        ("invalid type: map", "invalid type: table"),
        ("floating point", "number with a fraction or exponent"),
        (
            "wanted string or table",
            "expected a string (one of the names docs/plan.md lists)",
        ),
    ] {
        m = m.replace(from, to);
    }
    if let Some(rest) = m.strip_prefix("invalid type: ") {
        if let Some((found, expected)) = rest.split_once(", expected struct ") {
            m = format!("invalid type: {found}, expected a table ({expected})");
        }
    }
    if let Some(k) = missing_field(&m) {
        m = format!("missing field `{k}`: this key is required");
    }
    if let Some(right) = lower_case_variant(&m) {
        m = format!("{m} (names are lower case: \"{right}\")");
    }
    m
}

/// For ``unknown variant `Rocky8`, expected `rocky8` or `debian12` `` the name it was
/// meant to be (`rocky8`), when the two differ only in case.
fn lower_case_variant(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown variant `")?;
    let (given, expected) = rest.split_once('`')?;
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .find(|name| *name != given && name.eq_ignore_ascii_case(given))
        .map(str::to_string)
}

/// The value an error message names as expected (``expected one of `rocky8`, …``,
/// `expected "auto" or …`), a stand-in that fits an enum.
fn named_value(message: &str) -> Option<Item> {
    let after = message.split_once("expected")?.1;
    after
        .split('`')
        .nth(1)
        .or_else(|| after.split('"').nth(1))
        .map(value)
}

/// Stand-ins to try for a wrong or missing value: the one the message names, then one of
/// each TOML type.
fn candidates(message: &str) -> Vec<Item> {
    let mut v: Vec<Item> = named_value(message).into_iter().collect();
    v.extend([
        value(""),
        value(1i64),
        value(false),
        value(1.0),
        value(Array::new()),
        Item::Value(InlineTable::new().into()),
        Item::Table(Table::new()),
    ]);
    v
}

fn remove(doc: &mut DocumentMut, path: &KeyPath) -> bool {
    let (Some(parent), Some(key)) = (path.parent(), path.last_key()) else {
        return false;
    };
    parent
        .item_mut(doc)
        .and_then(Item::as_table_like_mut)
        .and_then(|t| t.remove(key))
        .is_some()
}

fn put(doc: &mut DocumentMut, path: &KeyPath, item: Item) -> bool {
    if let Some(slot) = path.item_mut(doc) {
        *slot = item;
        return true;
    }
    let (Some(parent), Some(key)) = (path.parent(), path.last_key()) else {
        return false;
    };
    match parent.item_mut(doc).and_then(Item::as_table_like_mut) {
        Some(t) => {
            t.insert(key, item);
            true
        }
        None => false,
    }
}

pub(crate) fn deserialise(text: &str) -> Result<Deserialised, PlanIssue> {
    let mut doc: DocumentMut = match text.parse() {
        Ok(doc) => doc,
        Err(_) => {
            let err = toml::from_str::<Plan>(text).err();
            return Err(match err {
                Some(err) => location::issue_from_toml_error(text, &err),
                None => location::locate(text, &KeyPath::root(), "not a TOML file".into()),
            });
        }
    };
    let mut issues = Vec::new();
    let mut stand_ins: Vec<KeyPath> = Vec::new();
    // Stand-ins not yet tried, per key path that holds one.
    let mut untried: Vec<(KeyPath, Vec<Item>)> = Vec::new();
    let mut current = text.to_string();
    for _ in 0..MAX_ROUNDS {
        let fault = match attempt(&current) {
            Ok(plan) => {
                return Ok(Deserialised {
                    plan: Some(plan),
                    issues,
                    stand_ins,
                })
            }
            Err(f) => f,
        };
        let target = target(&fault);
        // A fault at a stand-in (it did not fit) or inside one (a missing table's keys)
        // is not the user's: it is fixed without a report.
        let ours = stand_ins.iter().any(|s| target.starts_with(s));
        if !ours && issues.len() < MAX_FAULTS {
            let message = plain(&fault.message);
            issues.push(if fault.on_key {
                location::locate_key(text, &fault.path, message)
            } else {
                location::locate(text, &fault.path, message)
            });
        }
        if target == KeyPath::root() {
            break;
        }
        if fault.message.starts_with("unknown field") {
            if !remove(&mut doc, &target) {
                break;
            }
        } else {
            let at = match untried.iter().position(|(p, _)| *p == target) {
                Some(at) => at,
                None => {
                    untried.push((target.clone(), candidates(&fault.message)));
                    untried.len() - 1
                }
            };
            let queue = &mut untried[at].1;
            // The value the new message names (a wrong name lists the right ones) first.
            if let Some(named) = named_value(&fault.message) {
                queue.insert(0, named);
            }
            let mut placed = false;
            while !queue.is_empty() && !placed {
                placed = put(&mut doc, &target, queue.remove(0));
            }
            if !placed && !remove(&mut doc, &target) {
                break;
            }
            if !stand_ins.contains(&target) {
                stand_ins.push(target);
            }
        }
        current = doc.to_string();
    }
    Ok(Deserialised {
        plan: None,
        issues,
        stand_ins,
    })
}
