//! `pgappliance collect STORE_URL --out DIR`: every run under the prefix whose manifest is
//! there and whose results check out, rendered into one comparison (index.html,
//! summary.csv). Runs that cannot be used are listed with the reason.

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::path::Path;

use anyhow::{bail, Context, Result};
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
use pgappliance::compare::{render_index, rows, summary_csv, CollectedRun, SkippedRun};
use pgappliance::results::{RunResults, RESULTS_SCHEMA_VERSION};
use pgappliance::upload::{Manifest, Store, StoreConfig, MANIFEST};
use sha2::{Digest, Sha256};

pub struct CollectArgs<'a> {
    pub store: StoreConfig,
    pub out: &'a Path,
}

/// The largest `results.json` collect reads (a run of 10,000 points with per-second series
/// is about 40 MiB); a larger one is skipped unread.
pub const MAX_RESULTS_BYTES: u64 = 64 << 20;
/// The largest `manifest.json` collect reads (about 150 bytes per object).
pub const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// Reads an object, refusing it as soon as it passes `limit` bytes, whatever the listing
/// said its size was.
async fn get_capped(
    store: &Store,
    path: &object_store::path::Path,
    limit: u64,
) -> std::result::Result<Vec<u8>, String> {
    let mut stream = store
        .objects
        .get(path)
        .await
        .map_err(|e| format!("reading {path}: {e}"))?
        .into_stream();
    let mut out = Vec::new();
    while let Some(chunk) = stream
        .try_next()
        .await
        .map_err(|e| format!("reading {path}: {e}"))?
    {
        if out.len() as u64 + chunk.len() as u64 > limit {
            return Err(format!(
                "{path} is larger than {} MiB, the most collect reads",
                limit >> 20
            ));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// At most the first `n` characters of a string from the store, for messages.
fn head(s: &str, n: usize) -> String {
    let h: String = s.chars().take(n).collect();
    if h.len() < s.len() {
        format!("{h}…")
    } else {
        h
    }
}

/// What a manifest must say before anything in it is trusted: relative object paths
/// without `.`/`..`/empty segments, each once, with a sha256 of 64 hex digits.
fn check_manifest(manifest: &Manifest) -> std::result::Result<(), String> {
    let mut paths = BTreeSet::new();
    for o in &manifest.objects {
        let path_ok = !o.path.is_empty()
            && o.path
                .split('/')
                .all(|seg| !seg.is_empty() && seg != "." && seg != "..");
        if !path_ok {
            return Err(format!(
                "manifest.json lists an object path \"{}\" that is not a plain relative path",
                head(&o.path, 80)
            ));
        }
        if !paths.insert(o.path.as_str()) {
            return Err(format!("manifest.json lists {} twice", o.path));
        }
        let sha_ok = o.sha256.len() == 64
            && o.sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !sha_ok {
            return Err(format!(
                "manifest.json gives {} the sha256 \"{}\", which is not 64 hex digits",
                o.path,
                head(&o.sha256, 70)
            ));
        }
    }
    Ok(())
}

/// A run that checked out: its results and the sha256 of its results.json.
struct LoadedRun {
    results: RunResults,
    sha256: String,
}

/// Checks one run and loads its results, or says why not.
async fn load_run(
    store: &Store,
    key: &str,
    objects: &BTreeMap<String, u64>,
) -> std::result::Result<LoadedRun, String> {
    let Some(&manifest_size) = objects.get(MANIFEST) else {
        return Err("no manifest yet (upload unfinished)".into());
    };
    if manifest_size > MAX_MANIFEST_BYTES {
        return Err(format!(
            "manifest.json is {manifest_size} bytes, more than the {} MiB collect reads",
            MAX_MANIFEST_BYTES >> 20
        ));
    }
    let base = |rel: &str| store.path(&[key, rel]);
    let manifest: Manifest =
        serde_json::from_slice(&get_capped(store, &base(MANIFEST), MAX_MANIFEST_BYTES).await?)
            .map_err(|e| format!("manifest.json is not a manifest: {e}"))?;
    check_manifest(&manifest)?;
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
    if entry.size > MAX_RESULTS_BYTES {
        return Err(format!(
            "results.json is {} bytes, more than the {} MiB collect reads",
            entry.size,
            MAX_RESULTS_BYTES >> 20
        ));
    }
    let bytes = get_capped(store, &base("results.json"), MAX_RESULTS_BYTES).await?;
    let sha = format!("{:x}", Sha256::digest(&bytes));
    if sha != entry.sha256 {
        return Err(format!(
            "checksum mismatch: results.json has sha256 {}…, the manifest says {}…",
            head(&sha, 12),
            head(&entry.sha256, 12)
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
    let results = serde_json::from_value(value)
        .map_err(|e| format!("results.json does not match schema version {version}: {e}"))?;
    Ok(LoadedRun {
        results,
        sha256: sha,
    })
}

/// The directory of a `file://` store, which must exist: collecting from a directory
/// that is not there is a mistake in the URL, not an empty store.
fn existing_file_store(url: &str) -> Result<()> {
    let Some(dir) = url.strip_prefix("file://") else {
        return Ok(());
    };
    let dir = Path::new(dir);
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => bail!("store {url}: {} is not a directory", dir.display()),
        Err(e) => bail!("store {url}: {}: {e}", dir.display()),
    }
}

/// The names one level below `path` (`list_with_delimiter`'s common prefixes).
async fn children(store: &Store, path: &ObjectPath) -> Result<Vec<String>> {
    let listing = store
        .objects
        .list_with_delimiter(if path.as_ref().is_empty() {
            None
        } else {
            Some(path)
        })
        .await
        .with_context(|| format!("listing {} at \"{path}\"", store.url))?;
    Ok(listing
        .common_prefixes
        .iter()
        .filter_map(|p| p.filename().map(str::to_string))
        .collect())
}

/// Every run key (`appliance/machine/run`) under the store's prefix. A level that cannot
/// be listed (a bucket or directory that is not there, no permission) is an error.
async fn run_keys(store: &Store) -> Result<Vec<String>> {
    let mut keys = Vec::new();
    for appliance in children(store, &store.path(&[])).await? {
        for machine in children(store, &store.path(&[&appliance])).await? {
            for run in children(store, &store.path(&[&appliance, &machine])).await? {
                keys.push(format!("{appliance}/{machine}/{run}"));
            }
        }
    }
    keys.sort();
    Ok(keys)
}

/// The objects of one run (relative path → size). An entry the store cannot list (a
/// symlink loop, a name that is not UTF-8) makes this run unusable, not the collect.
async fn run_objects(
    store: &Store,
    key: &str,
) -> std::result::Result<BTreeMap<String, u64>, String> {
    let base = store.path(&[key]);
    let depth = base.parts().count();
    let listing: Vec<ObjectMeta> = store
        .objects
        .list(Some(&base))
        .try_collect()
        .await
        .map_err(|e| format!("cannot list the run: {e}"))?;
    Ok(listing
        .into_iter()
        .map(|m| {
            let rel: Vec<String> = m
                .location
                .parts()
                .skip(depth)
                .map(|p| p.as_ref().to_string())
                .collect();
            (rel.join("/"), m.size)
        })
        .collect())
}

pub async fn collect(args: CollectArgs<'_>) -> Result<i32> {
    existing_file_store(&args.store.url)?;
    let store = Store::open(&args.store)?;
    let runs = run_keys(&store).await?;
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
    // A run found twice (copied under another key, or the same results under two run ids)
    // is counted once, under the first key in sorted order.
    let mut by_run_id: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut by_content: BTreeMap<String, String> = BTreeMap::new();
    for key in &runs {
        if let Some(b) = &bar {
            b.set_message(key.clone());
        }
        let loaded = match run_objects(&store, key).await {
            Ok(objects) => load_run(&store, key, &objects).await,
            Err(reason) => Err(reason),
        };
        let loaded = loaded.and_then(|run| {
            let id = (run.results.appliance.clone(), run.results.run_id.clone());
            if let Some(first) = by_run_id.get(&id) {
                return Err(format!(
                    "the same run as {first} (appliance {}, run id {}): counted once",
                    id.0, id.1
                ));
            }
            if let Some(first) = by_content.get(&run.sha256) {
                return Err(format!(
                    "results.json is identical to {first}'s: counted once"
                ));
            }
            by_run_id.insert(id, key.clone());
            by_content.insert(run.sha256.clone(), key.clone());
            Ok(run)
        });
        match loaded {
            Ok(run) => collected.push(CollectedRun {
                key: key.clone(),
                results: run.results,
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
