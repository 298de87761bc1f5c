//! `pgappliance collect STORE_URL --out DIR`: every run under the prefix whose manifest is
//! there and whose results check out, rendered into one comparison (index.html,
//! summary.csv). Runs that cannot be used are listed with the reason.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::Path;

use anyhow::{Context, Result};
use futures::TryStreamExt;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
use pgappliance::compare::{render_index, rows, summary_csv, CollectedRun, SkippedRun};
use pgappliance::results::{RunResults, RESULTS_SCHEMA_VERSION};
use pgappliance::upload::{Manifest, Store, StoreConfig, MANIFEST};
use sha2::{Digest, Sha256};

pub struct CollectArgs<'a> {
    pub store: StoreConfig,
    pub out: &'a Path,
}

async fn get(store: &Store, path: &object_store::path::Path) -> Result<Vec<u8>> {
    Ok(store
        .objects
        .get(path)
        .await
        .with_context(|| format!("reading {path}"))?
        .bytes()
        .await
        .with_context(|| format!("reading {path}"))?
        .to_vec())
}

/// Checks one run and loads its results, or says why not.
async fn load_run(
    store: &Store,
    key: &str,
    objects: &BTreeMap<String, u64>,
) -> std::result::Result<RunResults, String> {
    if !objects.contains_key(MANIFEST) {
        return Err("no manifest yet (upload unfinished)".into());
    }
    let base = |rel: &str| store.path(&[key, rel]);
    let manifest: Manifest = serde_json::from_slice(
        &get(store, &base(MANIFEST))
            .await
            .map_err(|e| format!("{e:#}"))?,
    )
    .map_err(|e| format!("manifest.json is not a manifest: {e}"))?;
    for o in &manifest.objects {
        match objects.get(&o.path) {
            None => return Err(format!("{} is listed in the manifest but missing", o.path)),
            Some(size) if *size != o.size => {
                return Err(format!(
                    "{} is {size} bytes, the manifest says {}",
                    o.path, o.size
                ))
            }
            _ => {}
        }
    }
    let entry = manifest
        .objects
        .iter()
        .find(|o| o.path == "results.json")
        .ok_or("the manifest lists no results.json")?;
    let bytes = get(store, &base("results.json"))
        .await
        .map_err(|e| format!("{e:#}"))?;
    let sha = format!("{:x}", Sha256::digest(&bytes));
    if sha != entry.sha256 {
        return Err(format!(
            "checksum mismatch: results.json has sha256 {}…, the manifest says {}…",
            &sha[..12],
            &entry.sha256[..12]
        ));
    }
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("results.json is not JSON: {e}"))?;
    let version = value["schema_version"].as_u64().unwrap_or(0);
    if version > u64::from(RESULTS_SCHEMA_VERSION) {
        return Err(format!(
            "results.json has schema version {version}, newer than this collector's {RESULTS_SCHEMA_VERSION}: upgrade pgappliance"
        ));
    }
    serde_json::from_value(value)
        .map_err(|e| format!("results.json does not match schema version {version}: {e}"))
}

pub async fn collect(args: CollectArgs<'_>) -> Result<i32> {
    let store = Store::open(&args.store)?;
    let prefix = store.path(&[]);
    let listing: Vec<ObjectMeta> = store
        .objects
        .list(if prefix.as_ref().is_empty() {
            None
        } else {
            Some(&prefix)
        })
        .try_collect()
        .await
        .with_context(|| format!("listing {}", store.url))?;
    let prefix_len = prefix.parts().count();
    // appliance/machine/run → relative object path → size
    let mut runs: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for m in listing {
        let parts: Vec<String> = m.location.parts().map(|p| p.as_ref().to_string()).collect();
        if parts.len() < prefix_len + 4 {
            continue;
        }
        let key = parts[prefix_len..prefix_len + 3].join("/");
        let rel = parts[prefix_len + 3..].join("/");
        runs.entry(key).or_default().insert(rel, m.size);
    }
    let bar = if std::io::stderr().is_terminal() && runs.len() > 1 {
        let b = indicatif::ProgressBar::new(runs.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} runs {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Some(b)
    } else {
        None
    };
    let mut collected = Vec::new();
    let mut skipped = Vec::new();
    for (key, objects) in &runs {
        if let Some(b) = &bar {
            b.set_message(key.clone());
        }
        match load_run(&store, key, objects).await {
            Ok(results) => collected.push(CollectedRun {
                key: key.clone(),
                results,
            }),
            Err(reason) => skipped.push(SkippedRun {
                key: key.clone(),
                reason,
            }),
        }
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    std::fs::create_dir_all(args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let index = args.out.join("index.html");
    let csv = args.out.join("summary.csv");
    std::fs::write(&index, render_index(&collected, &skipped))
        .with_context(|| format!("writing {}", index.display()))?;
    std::fs::write(&csv, summary_csv(&rows(&collected)))
        .with_context(|| format!("writing {}", csv.display()))?;
    for s in &skipped {
        eprintln!("skipped {}: {}", s.key, s.reason);
    }
    println!(
        "collected {} run(s), skipped {}; wrote {} and {}",
        collected.len(),
        skipped.len(),
        index.display(),
        csv.display()
    );
    Ok(0)
}
