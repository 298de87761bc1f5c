//! Every type error of a plan at once. serde stops at the first one, so the plan is
//! deserialised again with each fault taken out (an unknown key removed, a missing or
//! wrong value replaced by a stand-in of a type that fits) until it deserialises; each
//! fault is reported where it is in the original text, in words a user understands.

use toml_edit::{value, Array, DocumentMut, InlineTable, Item, Table};

use super::location::{self, KeyPath};
use super::{Plan, PlanIssue};

/// A plan with more faults than this is reported up to here.
const MAX_FAULTS: usize = 100;

/// What deserialising found: the plan (with stand-ins where values were wrong), the type
/// errors, and the key paths that hold stand-ins (their validation problems are not real).
pub struct Deserialised {
    pub plan: Option<Plan>,
    pub issues: Vec<PlanIssue>,
    pub stand_ins: Vec<KeyPath>,
}

struct Fault {
    path: KeyPath,
    on_key: bool,
    message: String,
}

fn attempt(text: &str) -> Result<Plan, Fault> {
    toml::from_str::<Plan>(text).map_err(|err| {
        let (path, on_key) = location::error_path(text, &err).unwrap_or_default();
        Fault {
            path,
            on_key,
            message: err.message().trim().to_string(),
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
pub fn plain(message: &str) -> String {
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
    m
}

/// Stand-ins to try for a wrong or missing value, the variant the message names first.
fn candidates(message: &str) -> Vec<Item> {
    let mut v = Vec::new();
    if let Some(after) = message.split_once("expected").map(|(_, a)| a) {
        if let Some(word) = after.split('`').nth(1) {
            v.push(value(word));
        }
        if let Some(word) = after.split('"').nth(1) {
            v.push(value(word));
        }
    }
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

/// Whether a later fault is still about `target` (the fix did not take).
fn still_about(f: &Fault, target: &KeyPath) -> bool {
    f.path.starts_with(target)
        || (missing_field(&f.message) == target.last_key()
            && f.path.parent().is_some()
            && Some(&f.path) == target.parent().as_ref())
}

pub fn deserialise(text: &str) -> Result<Deserialised, PlanIssue> {
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
    let mut current = text.to_string();
    for _ in 0..MAX_FAULTS {
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
        // A fault inside a stand-in (a missing table's required keys) is not the user's.
        if !stand_ins
            .iter()
            .any(|s| target.starts_with(s) && *s != target)
        {
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
        let mut fixed = None;
        if fault.message.starts_with("unknown field") || missing_field(&fault.message).is_none() {
            let mut d = doc.clone();
            if remove(&mut d, &target) {
                fixed = Some(d);
            }
        }
        let unknown_key = fault.message.starts_with("unknown field");
        let removal_holds = fixed.as_ref().is_some_and(|d| {
            unknown_key
                || match attempt(&d.to_string()) {
                    Ok(_) => true,
                    Err(f) => !still_about(&f, &target),
                }
        });
        if !removal_holds {
            fixed = candidates(&fault.message).into_iter().find_map(|item| {
                let mut d = doc.clone();
                if !put(&mut d, &target, item) {
                    return None;
                }
                match attempt(&d.to_string()) {
                    Ok(_) => Some(d),
                    Err(f) if !still_about(&f, &target) => Some(d),
                    Err(_) => None,
                }
            });
        }
        let Some(d) = fixed else { break };
        doc = d;
        current = doc.to_string();
        if !unknown_key {
            stand_ins.push(target);
        }
    }
    Ok(Deserialised {
        plan: None,
        issues,
        stand_ins,
    })
}
