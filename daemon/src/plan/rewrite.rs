//! A plan's text with its `[upload]` store changed, comments and layout kept: what `build
//! --store` and `launch --store` pack, so the store named on the command line is the store
//! the appliance writes to.

use toml_edit::{value, DocumentMut, Item, Table};

/// The store a command line gives for the appliance: its URL and, when given with it, the
/// endpoint and region.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreChange {
    pub store: String,
    pub endpoint: Option<String>,
    pub region: Option<String>,
}

/// `text` with `upload.store` (and `upload.endpoint`, `upload.region` when given) set (pure).
/// The result is checked like any plan by whoever reads it next.
pub fn with_store(text: &str, change: &StoreChange) -> Result<String, String> {
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e| format!("the plan is not TOML: {e}"))?;
    let upload = doc
        .entry("upload")
        .or_insert_with(|| Item::Table(Table::new()));
    let Some(upload) = upload.as_table_like_mut() else {
        return Err("the plan's `upload` is not a table".into());
    };
    set(upload, "store", &change.store);
    if let Some(e) = &change.endpoint {
        set(upload, "endpoint", e);
    }
    if let Some(r) = &change.region {
        set(upload, "region", r);
    }
    Ok(doc.to_string())
}

/// Sets `key` to `text`: in place when it is there (its comments and spacing kept), else
/// added at the end of the table.
fn set(table: &mut dyn toml_edit::TableLike, key: &str, text: &str) {
    match table.get_mut(key) {
        Some(item) => {
            let decor = item.as_value().map(|v| v.decor().clone());
            *item = value(text);
            if let (Some(d), Some(v)) = (decor, item.as_value_mut()) {
                *v.decor_mut() = d;
            }
        }
        None => {
            table.insert(key, value(text));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_is_replaced_and_the_rest_kept() {
        let text = "[appliance]\nname = \"a\" # the name\n\n[upload]\n# where\nstore = \"s3://b/plan\"\nregion = \"us-east-1\"\ncredentials = \"instance-role\"\n";
        let out = with_store(
            text,
            &StoreChange {
                store: "s3://b/cloud".into(),
                endpoint: None,
                region: None,
            },
        )
        .expect("rewritten");
        assert_eq!(out, text.replace("s3://b/plan", "s3://b/cloud"));
        let out = with_store(
            text,
            &StoreChange {
                store: "s3://c/x".into(),
                endpoint: Some("https://s3.lab:9000".into()),
                region: Some("eu-west-1".into()),
            },
        )
        .expect("rewritten");
        assert!(out.contains("store = \"s3://c/x\"\nregion = \"eu-west-1\"\ncredentials = \"instance-role\"\nendpoint = \"https://s3.lab:9000\""), "{out}");
        assert!(
            out.contains("# the name") && out.contains("# where"),
            "{out}"
        );
        assert!(with_store("upload = 3\n", &StoreChange::default()).is_err());
    }
}
