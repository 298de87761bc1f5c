//! `pgappliance collect --store URL… --out DIR`: every run under the stores' prefixes whose
//! manifest is there and whose results check out, rendered into one comparison that leads
//! with the finding (index.html, a page per run, summary.csv). Runs that cannot be used are
//! listed with the reason.
//!
//! Runs are listed and fetched `--jobs` at a time. Each run's manifest and results.json are
//! kept in a local cache under the manifest's sha256, with the listing's stamps of the
//! manifest and results.json (size, ETag, time) under the run's key: a run whose objects
//! are unchanged is read from the cache, so a second collect fetches only new runs. A run is
//! reduced to its figures (`RunDigest`) as soon as it is read, so memory grows with the runs
//! in flight, not the fleet.

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
use pgappliance::compare::stats::DEFAULT_THRESHOLD_PCT;
use pgappliance::compare::{
    baseline_index, findings_json, labels, regressions, render_index, rows, select_runs,
    summary_csv, IndexOptions, RunDigest, SkippedRun,
};
use pgappliance::plan::{Checksums, Credentials};
use pgappliance::results::{PointStatus, RunResults, RESULTS_SCHEMA_VERSION};
use pgappliance::upload::{Manifest, Store, StoreConfig, MANIFEST};
use sha2::{Digest, Sha256};

use crate::outdir;

#[derive(Debug, clap::Args)]
pub(crate) struct CollectCli {
    /// Stores to read: s3://bucket/prefix or file:///dir (the same as --store).
    #[arg(value_name = "STORE_URL", value_parser = pgappliance::upload::overrides::store_url_arg)]
    pub(crate) store_urls: Vec<String>,
    /// A store to read (s3://bucket/prefix or file:///dir); repeat for several stores.
    #[arg(long = "store", value_name = "URL", value_parser = pgappliance::upload::overrides::store_url_arg)]
    pub(crate) stores: Vec<String>,
    /// Output directory (index.html, runs/*.html, summary.csv).
    #[arg(long, required = true, value_name = "DIR")]
    pub(crate) out: PathBuf,
    /// S3 endpoint (path-style); default from AWS_ENDPOINT_URL or AWS. Once, or once per store.
    #[arg(long, value_name = "URL")]
    pub(crate) endpoint: Vec<String>,
    /// S3 region [default: us-east-1]. Once, or once per store.
    #[arg(long)]
    pub(crate) region: Vec<String>,
    /// A 0600 file with access_key_id/secret_access_key; default: the environment. Once, or
    /// once per store.
    #[arg(long, value_name = "FILE")]
    pub(crate) credentials_file: Vec<String>,
    /// The profile (`[name]` section) of the credentials file [default: default]. Once, or
    /// once per store.
    #[arg(long, value_name = "NAME", requires = "credentials_file")]
    pub(crate) credentials_profile: Vec<String>,
    /// Show every run; by default only the latest run of each machine is compared.
    #[arg(long)]
    pub(crate) all_runs: bool,
    /// The machine (appliance name) or run id everything is compared against; default: the
    /// first machine by name. A run id is compared even when it is not its machine's latest.
    #[arg(long, value_name = "MACHINE_OR_RUN")]
    pub(crate) baseline: Option<String>,
    /// The threshold T of every verdict (default 5%), and a regression check against the
    /// baseline: list every point whose tps is `slower` (its 95 % interval wholly below −T)
    /// or whose latency p99 is higher (its interval wholly above +T), after the finding,
    /// and the points that moved past T without a verdict that says so.
    #[arg(long, value_name = "PERCENT")]
    pub(crate) threshold: Option<String>,
    /// Exit 3 when a point regressed past --threshold by its verdict (not by one sample or
    /// an inconclusive interval).
    #[arg(long, requires = "threshold")]
    pub(crate) fail_on_regression: bool,
    /// Also look for change points over every run collected: runs grouped by machine
    /// identity and plan digest in time order, each workload × checksum state × client
    /// count's tps searched as Apache Otava does (E-divisive means, permutation test),
    /// each change printed with the runs before and after and the size of the shift.
    #[arg(long)]
    pub(crate) history: bool,
    /// Where fetched runs are kept, keyed by their manifest's sha256, so the next collect
    /// fetches only new runs [default: $XDG_CACHE_HOME/pgappliance/collect, else
    /// ~/.cache/pgappliance/collect].
    #[arg(long, value_name = "DIR")]
    pub(crate) cache: Option<PathBuf>,
    /// Runs listed and fetched at once.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub(crate) jobs: u16,
}

pub(crate) struct CollectArgs {
    pub(crate) stores: Vec<StoreConfig>,
    pub(crate) out: PathBuf,
    pub(crate) all_runs: bool,
    pub(crate) baseline: Option<String>,
    pub(crate) threshold_pct: Option<f64>,
    pub(crate) fail_on_regression: bool,
    pub(crate) cache: PathBuf,
    pub(crate) jobs: usize,
    pub(crate) history: bool,
}

/// The largest `results.json` collect reads (a run of 10,000 points with per-second series
/// is about 40 MiB); a larger one is skipped unread.
pub(crate) const MAX_RESULTS_BYTES: u64 = 64 << 20;
/// The largest `manifest.json` collect reads (about 150 bytes per object).
pub(crate) const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// The exit status when `--fail-on-regression` finds a regressed point.
pub(crate) const EXIT_REGRESSION: i32 = 3;

/// `--threshold`: a percentage such as `5%` or `5` (pure).
pub(crate) fn parse_threshold(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches('%').trim();
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "--threshold \"{text}\" is not a percentage above 0 (for example 5%)"
        )),
    }
}

/// One value of a store option for each of `n` stores: none given (the default for all),
/// one (for all), or one per store in order; `-` is the default (pure).
pub(crate) fn per_store(
    option: &str,
    values: &[String],
    n: usize,
) -> Result<Vec<Option<String>>, String> {
    let pick = |v: &String| (v != "-").then(|| v.clone());
    match values.len() {
        0 => Ok(vec![None; n]),
        1 => Ok(vec![pick(&values[0]); n]),
        k if k == n => Ok(values.iter().map(pick).collect()),
        k => Err(format!(
            "{option} is given {k} times for {n} stores: give it once (for every store) or once per store, in the order of the stores"
        )),
    }
}

/// The stores of a command line with their options.
pub(crate) fn store_configs(cli: &CollectCli) -> Result<Vec<StoreConfig>, String> {
    let urls: Vec<String> = cli.store_urls.iter().chain(&cli.stores).cloned().collect();
    if urls.is_empty() {
        return Err("no store given: name one or more with --store URL".into());
    }
    let n = urls.len();
    let endpoints = per_store("--endpoint", &cli.endpoint, n)?;
    let regions = per_store("--region", &cli.region, n)?;
    let files = per_store("--credentials-file", &cli.credentials_file, n)?;
    let profiles = per_store("--credentials-profile", &cli.credentials_profile, n)?;
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (i, url) in urls.into_iter().enumerate() {
        if !seen.insert(url.clone()) {
            return Err(format!("store {url} is given twice"));
        }
        out.push(StoreConfig {
            url,
            endpoint: endpoints[i].clone(),
            region: regions[i].clone().unwrap_or_else(|| "us-east-1".into()),
            credentials: if files[i].is_some() {
                Credentials::File
            } else {
                Credentials::Environment
            },
            credentials_file: files[i].clone(),
            credentials_profile: profiles[i].clone().unwrap_or_else(|| "default".into()),
            caller: None,
        });
    }
    Ok(out)
}

/// The cache directory when `--cache` names none.
pub(crate) fn default_cache() -> Result<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .context("neither XDG_CACHE_HOME nor HOME is set: name a cache directory with --cache")?;
    Ok(base.join("pgappliance/collect"))
}

/// `pgappliance collect`: the command line checked, then [`collect`] on a runtime.
pub(crate) fn run(cli: CollectCli) -> Result<i32> {
    // Each S3 store with this machine's own keys (its --credentials-file, else the
    // environment or ~/.aws/credentials): never an instance metadata service.
    let stores = store_configs(&cli)
        .map_err(anyhow::Error::msg)?
        .into_iter()
        .map(|cfg| {
            let file = cfg.credentials_file.clone().map(PathBuf::from);
            let profile = file.as_ref().map(|_| cfg.credentials_profile.clone());
            pgappliance::upload::caller::store_here(cfg, file.as_deref(), profile.as_deref())
        })
        .collect::<Result<Vec<_>>>()?;
    let threshold_pct = cli
        .threshold
        .as_deref()
        .map(parse_threshold)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let cache = match cli.cache {
        Some(c) => c,
        None => default_cache()?,
    };
    let args = CollectArgs {
        stores,
        out: cli.out,
        all_runs: cli.all_runs,
        baseline: cli.baseline,
        threshold_pct,
        fail_on_regression: cli.fail_on_regression,
        cache,
        jobs: usize::from(cli.jobs),
        history: cli.history,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(collect(args))
}

/// A run that checked out: its figures, the sha256 of its results.json, the cache entry
/// holding it, and whether it came from the store (not the cache).
struct LoadedRun {
    digest: RunDigest,
    results_sha256: String,
    manifest_sha256: String,
    fetched: bool,
}

/// The objects of one run as listed: relative path → size, and the listing's stamps (size,
/// ETag, time) of its manifest.json and results.json, which say whether a cached copy is
/// still what the store holds: an object rewritten in place is fetched and checked again.
#[derive(Default)]
struct RunObjects {
    sizes: BTreeMap<String, u64>,
    stamps: BTreeMap<String, String>,
}

impl RunObjects {
    fn add(&mut self, rel: String, meta: &ObjectMeta) {
        if rel == MANIFEST || rel == "results.json" {
            self.stamps.insert(
                rel.clone(),
                format!(
                    "{rel} {} {} {}",
                    meta.size,
                    meta.e_tag.as_deref().unwrap_or("-"),
                    meta.last_modified.to_rfc3339()
                ),
            );
        }
        self.sizes.insert(rel, meta.size);
    }

    fn stamp(&self) -> String {
        self.stamps
            .values()
            .cloned()
            .collect::<Vec<_>>()
            .join(" | ")
    }
}

/// A run found in a store, to be checked and loaded.
struct Candidate {
    store: usize,
    /// `appliance/machine/run` under the store's prefix.
    key: String,
    /// How the run is named to the user (with the store URL when there are several).
    shown_key: String,
    objects: std::result::Result<RunObjects, String>,
}

/// Fetched runs kept on disk: `runs/<manifest sha256>/{manifest,results,digest-v2}.json`, and
/// `keys/<sha256 of store URL and run key>` holding the listing's stamps of the run and
/// the manifest's sha256. Files are written to a temporary name and renamed into place, so
/// an interrupted collect leaves no half entry.
struct Cache {
    dir: PathBuf,
}

fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

impl Cache {
    fn open(dir: &Path) -> Result<Cache> {
        for sub in ["runs", "keys"] {
            std::fs::create_dir_all(dir.join(sub))
                .with_context(|| format!("creating the collect cache {}", dir.display()))?;
        }
        Ok(Cache {
            dir: dir.to_path_buf(),
        })
    }

    fn key_file(&self, store_url: &str, key: &str) -> PathBuf {
        self.dir
            .join("keys")
            .join(sha256_hex(format!("{store_url}\n{key}").as_bytes()))
    }

    fn run_dir(&self, manifest_sha256: &str) -> PathBuf {
        self.dir.join("runs").join(manifest_sha256)
    }

    fn results_path(&self, manifest_sha256: &str) -> PathBuf {
        self.run_dir(manifest_sha256).join("results.json")
    }

    /// The cached manifest of a run whose listed manifest and results have this stamp,
    /// verified against the sha256 it is kept under.
    fn manifest(&self, store_url: &str, key: &str, stamp: &str) -> Option<(String, Vec<u8>)> {
        let entry = std::fs::read_to_string(self.key_file(store_url, key)).ok()?;
        let (cached_stamp, sha) = entry.trim_end().rsplit_once('\n')?;
        if cached_stamp != stamp {
            return None;
        }
        let bytes = std::fs::read(self.run_dir(sha).join(MANIFEST)).ok()?;
        (sha256_hex(&bytes) == sha).then(|| (sha.to_string(), bytes))
    }

    fn digest_path(&self, manifest_sha256: &str) -> PathBuf {
        self.run_dir(manifest_sha256).join(DIGEST)
    }

    /// The figures kept of a cached run whose results.json has the sha256 the manifest
    /// gives (and is still there, for its page), under the key it is shown by now.
    fn digest(&self, manifest_sha256: &str, results_sha256: &str, key: &str) -> Option<RunDigest> {
        let text = std::fs::read(self.digest_path(manifest_sha256)).ok()?;
        let kept: KeptDigest = serde_json::from_slice(&text).ok()?;
        let present = self.results_path(manifest_sha256).is_file();
        (kept.results_sha256 == results_sha256 && present).then(|| RunDigest {
            key: key.to_string(),
            ..kept.digest
        })
    }

    fn put_digest(
        &self,
        manifest_sha256: &str,
        results_sha256: &str,
        digest: &RunDigest,
    ) -> Result<()> {
        let kept = KeptDigest {
            results_sha256: results_sha256.to_string(),
            digest: digest.clone(),
        };
        Self::write_atomic(
            &self.digest_path(manifest_sha256),
            &serde_json::to_vec(&kept).context("serialising a run's figures")?,
        )
    }

    /// The cached results.json of a manifest, if its sha256 is the one the manifest gives.
    fn results(&self, manifest_sha256: &str, want_sha256: &str) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.results_path(manifest_sha256)).ok()?;
        (sha256_hex(&bytes) == want_sha256).then_some(bytes)
    }

    fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
        let dir = path.parent().context("cache path has a parent")?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)
            .with_context(|| format!("writing into {}", dir.display()))?;
        std::io::Write::write_all(&mut tmp, bytes)
            .with_context(|| format!("writing {}", path.display()))?;
        tmp.persist(path)
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(())
    }

    fn put(
        &self,
        store_url: &str,
        key: &str,
        stamp: &str,
        manifest_sha256: &str,
        manifest: &[u8],
        results: &[u8],
    ) -> Result<()> {
        let dir = self.run_dir(manifest_sha256);
        Self::write_atomic(&dir.join("results.json"), results)?;
        Self::write_atomic(&dir.join(MANIFEST), manifest)?;
        Self::write_atomic(
            &self.key_file(store_url, key),
            format!("{stamp}\n{manifest_sha256}\n").as_bytes(),
        )
    }
}

/// The figures of a run as the cache keeps them (the name changes with their format).
/// v2: digests kept only of results that pass [`check_results`]; v3: with the machine
/// identity and plan digest a history groups by.
const DIGEST: &str = "digest-v3.json";

#[derive(serde::Serialize, serde::Deserialize)]
struct KeptDigest {
    results_sha256: String,
    digest: RunDigest,
}

/// Checks one run and loads its figures, from the cache when its manifest is unchanged,
/// else from the store (and then into the cache); or says why it cannot be used.
async fn load_run(
    store: &Store,
    cache: &Cache,
    key: &str,
    shown_key: String,
    objects: &RunObjects,
) -> std::result::Result<LoadedRun, String> {
    let Some(&manifest_size) = objects.sizes.get(MANIFEST) else {
        return Err("no manifest yet (upload unfinished)".into());
    };
    if manifest_size > MAX_MANIFEST_BYTES {
        return Err(format!(
            "manifest.json is {manifest_size} bytes, more than the {} MiB collect reads",
            MAX_MANIFEST_BYTES >> 20
        ));
    }
    let stamp = objects.stamp();
    let base = |rel: &str| store.path(&[key, rel]);
    let cached = cache.manifest(&store.url, key, &stamp);
    let fetched = cached.is_none();
    let (manifest_sha256, manifest_bytes) = match cached {
        Some(hit) => hit,
        None => {
            let bytes = get_capped(store, &base(MANIFEST), MAX_MANIFEST_BYTES).await?;
            (sha256_hex(&bytes), bytes)
        }
    };
    let mut manifest: Manifest = serde_json::from_slice(&manifest_bytes)
        .map_err(|e| format!("manifest.json is not a manifest: {e}"))?;
    check_manifest(&mut manifest)?;
    for o in &manifest.objects {
        match objects.sizes.get(&o.path) {
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
    if !fetched {
        if let Some(digest) = cache.digest(&manifest_sha256, &entry.sha256, &shown_key) {
            check_identity(key, &manifest, &digest.appliance, &digest.run_id)?;
            return Ok(LoadedRun {
                digest,
                results_sha256: entry.sha256.clone(),
                manifest_sha256,
                fetched: false,
            });
        }
    }
    // The cached results.json only stands in for the store's when this run's listed objects
    // are the ones cached: a copy of a run under another key is fetched and checked itself.
    let cached = if fetched {
        None
    } else {
        cache.results(&manifest_sha256, &entry.sha256)
    };
    let (bytes, fetched) = match cached {
        Some(bytes) => (bytes, false),
        None => (
            get_capped(store, &base("results.json"), MAX_RESULTS_BYTES).await?,
            true,
        ),
    };
    let sha = sha256_hex(&bytes);
    if sha != entry.sha256 {
        return Err(format!(
            "checksum mismatch: results.json has sha256 {}…, the manifest says {}…",
            head(&sha, 12),
            head(&entry.sha256, 12)
        ));
    }
    if fetched {
        cache
            .put(
                &store.url,
                key,
                &stamp,
                &manifest_sha256,
                &manifest_bytes,
                &bytes,
            )
            .map_err(|e| format!("keeping the run in the cache: {e:#}"))?;
    }
    // Parsing is the CPU-bound part: off the runtime's thread, so runs parse in parallel.
    let digest = tokio::task::spawn_blocking(move || {
        parse_results(&bytes).map(|results| RunDigest::new(shown_key, &results))
    })
    .await
    .map_err(|e| format!("reading results.json: {e}"))??;
    check_identity(key, &manifest, &digest.appliance, &digest.run_id)?;
    cache
        .put_digest(&manifest_sha256, &sha, &digest)
        .map_err(|e| format!("keeping the run in the cache: {e:#}"))?;
    Ok(LoadedRun {
        digest,
        results_sha256: sha,
        manifest_sha256,
        fetched,
    })
}

/// A results.json this collector can read, or why not.
fn parse_results(bytes: &[u8]) -> std::result::Result<RunResults, String> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("results.json is not JSON: {e}"))?;
    let version = value["schema_version"].as_u64().unwrap_or(0);
    if version > u64::from(RESULTS_SCHEMA_VERSION) {
        return Err(format!(
            "results.json has schema version {version}, newer than this collector's {RESULTS_SCHEMA_VERSION}: upgrade pgappliance"
        ));
    }
    let results: RunResults = serde_json::from_value(value)
        .map_err(|e| format!("results.json does not match schema version {version}: {e}"))?;
    check_results(&results)?;
    Ok(results)
}

/// Above this no benchmark has run: a billion transactions a second.
const MAX_PLAUSIBLE_TPS: f64 = 1e9;

/// What a run's figures must be before collect counts them (pure): a price, and every
/// measured point's tps and latencies, finite and not negative (tps not absurd); start and
/// finish RFC 3339 times (they order a machine's runs); each point once (a point listed twice
/// would be counted as two repeats).
fn check_results(r: &RunResults) -> std::result::Result<(), String> {
    let non_negative = |v: f64| v.is_finite() && v >= 0.0;
    if !non_negative(r.hourly_price_usd) {
        return Err(format!(
            "results.json gives the hourly price {:?}, not a finite, non-negative number",
            r.hourly_price_usd
        ));
    }
    for (what, time) in [
        ("started_at", Some(&r.started_at)),
        ("finished_at", r.finished_at.as_ref()),
    ] {
        if let Some(t) = time {
            if humantime::parse_rfc3339(t).is_err() {
                return Err(format!(
                    "results.json's {what} \"{}\" is not an RFC 3339 time (such as 2026-11-01T10:00:00Z)",
                    head(t, 40)
                ));
            }
        }
    }
    let mut ids = BTreeSet::new();
    let mut places: BTreeMap<String, &str> = BTreeMap::new();
    for p in &r.points {
        if !ids.insert(p.id.as_str()) {
            return Err(format!(
                "results.json lists point {} twice",
                head(&p.id, 80)
            ));
        }
        let place = format!(
            "workload {} at {} clients{}, repeat {}",
            p.workload,
            p.clients,
            match Checksums::label(p.checksums) {
                "" => String::new(),
                cs => format!(" with checksums {cs}"),
            },
            p.repeat
        );
        if let Some(first) = places.insert(place.clone(), p.id.as_str()) {
            return Err(format!(
                "results.json's points {} and {} are both {}: one measurement would count as two repeats",
                head(first, 80),
                head(&p.id, 80),
                head(&place, 160)
            ));
        }
        if p.status != PointStatus::Ok {
            continue;
        }
        let f = p.figures();
        let tps = f
            .tps
            .ok_or_else(|| format!("point {} is ok but has no tps", head(&p.id, 80)))?;
        if !non_negative(tps) || tps > MAX_PLAUSIBLE_TPS {
            return Err(format!(
                "point {} has tps {tps:?}, not a finite, non-negative figure below {MAX_PLAUSIBLE_TPS:e}",
                head(&p.id, 80)
            ));
        }
        let l = &f.latency;
        let figures = [
            ("latency average", f.latency_avg_ms),
            ("latency p25", l.p25),
            ("latency p50", l.p50),
            ("latency p75", l.p75),
            ("latency p90", l.p90),
            ("latency p95", l.p95),
            ("latency p99", l.p99),
            ("latency p99.9", l.p99_9),
            ("latency max", l.max),
            ("queries per second", f.qps),
        ];
        for (what, v) in figures {
            if let Some(v) = v.filter(|v| !non_negative(*v)) {
                return Err(format!(
                    "point {} has {what} {v:?}, not a finite, non-negative figure",
                    head(&p.id, 80)
                ));
            }
        }
        if let Some(s) = p
            .tps_series
            .iter()
            .find(|s| !non_negative(s.tps) || !non_negative(s.elapsed_s))
        {
            return Err(format!(
                "point {} has {:?} tps at {:?} s in its series, not finite, non-negative figures",
                head(&p.id, 80),
                s.tps,
                s.elapsed_s
            ));
        }
    }
    Ok(())
}

/// The run a key names (`appliance/machine/run`) against what its manifest and results say
/// they are (pure): a copy stored under another key cannot take a real run's identity.
fn check_identity(
    key: &str,
    manifest: &Manifest,
    appliance: &str,
    run_id: &str,
) -> std::result::Result<(), String> {
    let parts: Vec<&str> = key.split('/').collect();
    let [key_appliance, key_machine, key_run] = parts[..] else {
        return Err(format!("the key {key} is not appliance/machine/run"));
    };
    for (what, claimed, stored) in [
        (
            "manifest.json's appliance",
            manifest.appliance.as_str(),
            key_appliance,
        ),
        (
            "manifest.json's machine id",
            manifest.machine_id.as_str(),
            key_machine,
        ),
        ("manifest.json's run id", manifest.run_id.as_str(), key_run),
        ("results.json's appliance", appliance, key_appliance),
        ("results.json's run id", run_id, key_run),
    ] {
        if claimed != stored {
            return Err(format!(
                "{what} is \"{}\", but the run is stored under \"{}\"",
                head(claimed, 80),
                head(stored, 80)
            ));
        }
    }
    Ok(())
}

/// Every run of an S3 store with its objects: the appliance and machine levels are listed
/// with a delimiter, then each machine's objects in one recursive listing, `jobs` machines
/// at a time. A level that cannot be listed (a bucket that is not there, no permission) is
/// an error.
async fn s3_runs(store: &Store, jobs: usize) -> Result<Vec<(String, RunObjects)>> {
    let mut machines = Vec::new();
    for appliance in children(store, &store.path(&[])).await? {
        for machine in children(store, &store.path(&[&appliance])).await? {
            machines.push(format!("{appliance}/{machine}"));
        }
    }
    let listings: Vec<Vec<(String, RunObjects)>> = futures::stream::iter(machines)
        .map(|machine| async move {
            let base = store.path(&[&machine]);
            let depth = base.parts().count();
            let mut runs: BTreeMap<String, RunObjects> = BTreeMap::new();
            let mut listing = store.objects.list(Some(&base));
            while let Some(meta) = listing
                .try_next()
                .await
                .with_context(|| format!("listing {} at \"{base}\"", store.url))?
            {
                let rel: Vec<String> = meta
                    .location
                    .parts()
                    .skip(depth)
                    .map(|p| p.as_ref().to_string())
                    .collect();
                // Objects beside the runs (a status file) belong to no run.
                if rel.len() < 2 {
                    continue;
                }
                runs.entry(format!("{machine}/{}", rel[0]))
                    .or_default()
                    .add(rel[1..].join("/"), &meta);
            }
            anyhow::Ok(runs.into_iter().collect())
        })
        .buffered(jobs)
        .try_collect()
        .await?;
    Ok(listings.into_iter().flatten().collect())
}

/// The objects of one run of a file store. An entry the store cannot list (a symlink loop,
/// a name that is not UTF-8) makes this run unusable, not the collect.
async fn file_run_objects(store: &Store, key: &str) -> std::result::Result<RunObjects, String> {
    let base = store.path(&[key]);
    let depth = base.parts().count();
    let listing: Vec<ObjectMeta> = store
        .objects
        .list(Some(&base))
        .try_collect()
        .await
        .map_err(|e| format!("cannot list the run: {e}"))?;
    let mut objects = RunObjects::default();
    for m in listing {
        let rel: Vec<String> = m
            .location
            .parts()
            .skip(depth)
            .map(|p| p.as_ref().to_string())
            .collect();
        objects.add(rel.join("/"), &m);
    }
    Ok(objects)
}

/// Every run of one store, with its objects or why they cannot be listed, and the entries
/// that cannot be runs.
async fn list_store(
    store: &Store,
    index: usize,
    several: bool,
    jobs: usize,
) -> Result<(Vec<Candidate>, Vec<SkippedRun>)> {
    let shown = |key: &str| {
        if several {
            format!("{}/{key}", store.url.trim_end_matches('/'))
        } else {
            key.to_string()
        }
    };
    if let Some(root) = store.url.strip_prefix("file://") {
        let (mut keys, mut skipped) = file_store_run_keys(Path::new(root))?;
        keys.retain(|k| !beside_the_runs(k));
        skipped.retain(|s| !beside_the_runs(&s.key));
        for s in &mut skipped {
            s.key = shown(&s.key);
        }
        let candidates = futures::stream::iter(keys)
            .map(|key| async move {
                let objects = file_run_objects(store, &key).await;
                Candidate {
                    store: index,
                    shown_key: shown(&key),
                    key,
                    objects,
                }
            })
            .buffered(jobs)
            .collect()
            .await;
        return Ok((candidates, skipped));
    }
    let runs = s3_runs(store, jobs).await?;
    Ok((
        runs.into_iter()
            .filter(|(key, _)| !beside_the_runs(key))
            .map(|(key, objects)| Candidate {
                store: index,
                shown_key: shown(&key),
                key,
                objects: Ok(objects),
            })
            .collect(),
        Vec::new(),
    ))
}

/// Keys in a store that are not runs: the failure bundles and reset runs under
/// `<appliance>/failed/`, and the launch records under `launches/`.
fn beside_the_runs(key: &str) -> bool {
    let mut parts = key.split('/');
    let appliance = parts.next().unwrap_or("");
    let machine = parts.next().unwrap_or("");
    appliance == "launches" || machine == pgappliance::engine::reset::FAILED_PREFIX
}

/// A file name for a run's page.
fn page_name(appliance: &str, run_id: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!("runs/{}--{}.html", clean(appliance), clean(run_id))
}

/// Checks that collect may write `out` ([`crate::outdir`]): new, empty or an earlier
/// collect's pages, and holding neither the cache nor a file store it reads.
pub(crate) fn check_out(
    out: &Path,
    stores: &[StoreConfig],
    cache: &Path,
) -> Result<outdir::OutDir> {
    let file_stores: Vec<&Path> = stores
        .iter()
        .filter_map(|s| s.url.strip_prefix("file://").map(Path::new))
        .collect();
    let mut inputs = vec![("the collect cache", cache)];
    inputs.extend(file_stores.iter().map(|d| ("a file store it reads", *d)));
    outdir::check(out, &inputs, outdir::Kind::Collect)
}

pub(crate) async fn collect(args: CollectArgs) -> Result<i32> {
    let out = check_out(&args.out, &args.stores, &args.cache)?;
    let mut stores = Vec::new();
    for cfg in &args.stores {
        existing_file_store(&cfg.url)?;
        stores.push(Store::open(cfg)?);
    }
    let several = stores.len() > 1;
    let mut candidates = Vec::new();
    let mut skipped = Vec::new();
    for (i, store) in stores.iter().enumerate() {
        let (c, s) = list_store(store, i, several, args.jobs).await?;
        candidates.extend(c);
        skipped.extend(s);
    }
    candidates.sort_by(|a, b| a.shown_key.cmp(&b.shown_key));
    let cache = Cache::open(&args.cache)?;
    let bar = if std::io::stderr().is_terminal() && candidates.len() > 1 {
        let b = indicatif::ProgressBar::new(candidates.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} runs {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Some(b)
    } else {
        None
    };
    let loaded: Vec<(String, std::result::Result<LoadedRun, String>)> =
        futures::stream::iter(candidates)
            .map(|c| {
                let (stores, cache, bar) = (&stores, &cache, &bar);
                async move {
                    let result = match &c.objects {
                        Ok(objects) => {
                            load_run(
                                &stores[c.store],
                                cache,
                                &c.key,
                                c.shown_key.clone(),
                                objects,
                            )
                            .await
                        }
                        Err(reason) => Err(reason.clone()),
                    };
                    if let Some(b) = bar {
                        b.inc(1);
                    }
                    (c.shown_key, result)
                }
            })
            .buffered(args.jobs)
            .collect()
            .await;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    // A run found twice (copied under another key or store, or the same results under two
    // run ids) is counted once, under the first key in sorted order.
    let mut by_run_id: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut by_content: BTreeMap<String, String> = BTreeMap::new();
    let mut digests = Vec::new();
    let mut cached_at: BTreeMap<String, String> = BTreeMap::new();
    let (mut fetched, mut from_cache) = (0usize, 0usize);
    for (key, result) in loaded {
        let result = result.and_then(|run| {
            let id = (run.digest.appliance.clone(), run.digest.run_id.clone());
            if let Some(first) = by_run_id.get(&id) {
                return Err(format!(
                    "the same run as {first} (appliance {}, run id {}): counted once",
                    id.0, id.1
                ));
            }
            if let Some(first) = by_content.get(&run.results_sha256) {
                return Err(format!(
                    "results.json is identical to {first}'s: counted once"
                ));
            }
            by_run_id.insert(id, key.clone());
            by_content.insert(run.results_sha256.clone(), key.clone());
            Ok(run)
        });
        match result {
            Ok(run) => {
                if run.fetched {
                    fetched += 1;
                } else {
                    from_cache += 1;
                }
                cached_at.insert(key, run.manifest_sha256);
                digests.push(run.digest);
            }
            Err(reason) => skipped.push(SkippedRun { key, reason }),
        }
    }
    let collected = digests.len();
    let keep = args
        .baseline
        .as_deref()
        .filter(|b| digests.iter().any(|d| d.run_id == *b));
    // Every run collected, not only the shown ones: a history is over all of them.
    let history = args
        .history
        .then(|| pgappliance::compare::history::history(&digests));
    let (shown, left_out) = select_runs(digests, args.all_runs, keep);
    let baseline = if shown.is_empty() {
        0
    } else {
        baseline_index(&shown, args.baseline.as_deref()).map_err(anyhow::Error::msg)?
    };

    // Written beside --out and moved into place whole, once everything is written.
    let staging = out.staging()?;
    let dir = staging.path();
    // runs/ only when it will hold pages: an empty directory is in no marker, so a later
    // collect into the same --out would take it for someone else's.
    if !shown.is_empty() {
        std::fs::create_dir_all(dir.join("runs"))
            .with_context(|| format!("creating {}", dir.join("runs").display()))?;
    }
    // Each shown run's own page, rendered one run at a time from the cache.
    let mut run_pages = Vec::new();
    for run in &shown {
        let sha = &cached_at[&run.key];
        let path = cache.results_path(sha);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let results =
            parse_results(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let page = page_name(&run.appliance, &run.run_id);
        let file = dir.join(&page);
        std::fs::write(&file, pgappliance::report::render(&results))
            .with_context(|| format!("writing {}", file.display()))?;
        run_pages.push(page);
    }
    let store_urls: Vec<String> = stores.iter().map(|s| s.url.clone()).collect();
    let index = dir.join("index.html");
    let csv = dir.join("summary.csv");
    std::fs::write(
        &index,
        render_index(
            &shown,
            &skipped,
            &IndexOptions {
                baseline,
                threshold_pct: args.threshold_pct,
                left_out: &left_out,
                run_pages: &run_pages,
                stores: &store_urls,
            },
        ),
    )
    .with_context(|| format!("writing {}", index.display()))?;
    let rows = rows(&shown);
    std::fs::write(&csv, summary_csv(&rows))
        .with_context(|| format!("writing {}", csv.display()))?;
    let findings = dir.join("findings.json");
    std::fs::write(
        &findings,
        findings_json(
            &shown,
            &rows,
            baseline,
            args.threshold_pct.unwrap_or(DEFAULT_THRESHOLD_PCT),
        ),
    )
    .with_context(|| format!("writing {}", findings.display()))?;
    outdir::write_marker(dir, outdir::Kind::Collect)?;
    outdir::install(staging, &out)?;
    for s in &skipped {
        pgappliance::errln!("skipped {}: {}", s.key, s.reason);
    }
    let mut code = 0;
    // The finding's sentences, as the page's Finding section says them.
    if !shown.is_empty() {
        for f in pgappliance::compare::findings(
            &shown,
            &rows,
            baseline,
            args.threshold_pct.unwrap_or(DEFAULT_THRESHOLD_PCT),
        ) {
            pgappliance::outln!("finding: {}", f.sentence);
        }
    }
    if let Some(series) = &history {
        let mut changes = 0;
        for s in series {
            for c in &s.changes {
                pgappliance::outln!("{}", pgappliance::compare::history::change_line(s, c));
                changes += 1;
            }
        }
        let groups: BTreeSet<(&str, &str)> = series
            .iter()
            .map(|s| (s.machine_identity.as_str(), s.plan_digest.as_str()))
            .collect();
        pgappliance::outln!(
            "history: {} series over {} machine and plan group(s), {changes} change point(s) (E-divisive means, permutation test at p < {})",
            series.len(),
            groups.len(),
            pgappliance::compare::history::SIGNIFICANCE
        );
    }
    if let (Some(t), false) = (args.threshold_pct, shown.is_empty()) {
        let base = &labels(&shown)[baseline];
        let found = regressions(&rows, base, t);
        let confirmed = found.iter().filter(|r| r.confirmed()).count();
        for r in &found {
            pgappliance::outln!("{}", pgappliance::compare::regression_line(r));
        }
        pgappliance::outln!(
            "{confirmed} point(s) regressed by more than {t} % against {base} (verdict slower, or p99 higher); {} more moved past {t} % without a verdict that says so",
            found.len() - confirmed
        );
        if confirmed > 0 && args.fail_on_regression {
            code = EXIT_REGRESSION;
        }
    }
    pgappliance::outln!(
        "collected {collected} run(s), skipped {}; showing {} ({}); fetched {fetched}, {from_cache} from the cache; wrote {}, {} and {}",
        skipped.len(),
        shown.len(),
        if args.all_runs { "every run" } else { "the latest run of each machine" },
        out.path.join("index.html").display(),
        out.path.join("summary.csv").display(),
        out.path.join("findings.json").display()
    );
    Ok(code)
}

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
/// without `.`/`..`/empty segments, each once, with a sha256 of 64 hex digits (either case;
/// made lower case here, as sha256 sums are compared).
fn check_manifest(manifest: &mut Manifest) -> std::result::Result<(), String> {
    let mut paths = BTreeSet::new();
    for o in &mut manifest.objects {
        o.sha256.make_ascii_lowercase();
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
        if !paths.insert(o.path.clone()) {
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

/// A file store's run keys, read from its directories: the object store fails a whole
/// level's listing on one name that is not UTF-8, so such a name is skipped with its
/// reason here and its siblings are still collected. S3 keys are always UTF-8.
fn file_store_run_keys(root: &Path) -> Result<(Vec<String>, Vec<SkippedRun>)> {
    let mut level: Vec<(String, std::path::PathBuf)> = vec![(String::new(), root.to_path_buf())];
    let mut skipped = Vec::new();
    for _ in 0..3 {
        let mut next = Vec::new();
        for (key, dir) in level {
            let listing = || format!("listing {}", dir.display());
            for entry in std::fs::read_dir(&dir).with_context(listing)? {
                let path = entry.with_context(listing)?.path();
                // Directories only (through symbolic links), as the object store lists them.
                if !path.is_dir() {
                    continue;
                }
                let Some(name) = path.file_name() else {
                    continue;
                };
                let join = |n: &str| {
                    if key.is_empty() {
                        n.to_string()
                    } else {
                        format!("{key}/{n}")
                    }
                };
                match name.to_str() {
                    Some(n) => next.push((join(n), path.clone())),
                    None => skipped.push(SkippedRun {
                        key: join(&name.to_string_lossy()),
                        reason: format!(
                            "its name {} is not UTF-8, which no store key can be",
                            name.as_encoded_bytes().escape_ascii()
                        ),
                    }),
                }
            }
        }
        level = next;
    }
    let mut keys: Vec<String> = level.into_iter().map(|(k, _)| k).collect();
    keys.sort();
    Ok((keys, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_positive_percentages() {
        assert_eq!(parse_threshold("5%"), Ok(5.0));
        assert_eq!(parse_threshold(" 2.5 % "), Ok(2.5));
        assert_eq!(parse_threshold("10"), Ok(10.0));
        for bad in ["", "%", "five", "0", "-5%", "NaN", "inf"] {
            let err = parse_threshold(bad).expect_err(bad);
            assert!(err.contains(&format!("\"{bad}\"")), "{err}");
        }
    }

    #[test]
    fn store_options_apply_to_every_store_or_to_each_in_order() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(per_store("--endpoint", &[], 2), Ok(vec![None, None]));
        assert_eq!(
            per_store("--endpoint", &v(&["http://a"]), 2),
            Ok(vec![Some("http://a".into()), Some("http://a".into())])
        );
        assert_eq!(
            per_store("--endpoint", &v(&["-", "http://b"]), 2),
            Ok(vec![None, Some("http://b".into())])
        );
        let err = per_store("--region", &v(&["a", "b"]), 3).expect_err("2 for 3");
        assert!(
            err.contains("--region is given 2 times for 3 stores"),
            "{err}"
        );
    }

    #[test]
    fn an_upper_case_sha256_is_accepted_and_made_lower_case() {
        let sha = "AB".repeat(32);
        let mut m = Manifest {
            schema_version: 1,
            appliance: "a".into(),
            machine_id: "m".into(),
            run_id: "r".into(),
            created_at: "2026-11-01T10:00:00Z".into(),
            objects: vec![pgappliance::upload::ManifestEntry {
                path: "results.json".into(),
                size: 1,
                sha256: sha.clone(),
            }],
        };
        assert_eq!(check_manifest(&mut m), Ok(()));
        assert_eq!(m.objects[0].sha256, sha.to_ascii_lowercase());
        m.objects[0].sha256 = "G".repeat(64);
        let err = check_manifest(&mut m).expect_err("not hex");
        assert!(err.contains("not 64 hex digits"), "{err}");
    }

    #[test]
    fn page_names_are_plain_file_names() {
        assert_eq!(
            page_name("m6gd.8xlarge", "20261101T100000Z-0a1b"),
            "runs/m6gd.8xlarge--20261101T100000Z-0a1b.html"
        );
        assert_eq!(page_name("a/b c", ".."), "runs/a_b_c--...html");
    }
}
