//! Artifacts in the plan's object store behind presigned GET URLs that a BMC (the ISO) or an
//! instance (the payload) fetches without credentials (object_store's S3 signer).

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use object_store::{ObjectStoreExt, WriteMultipart};
use tokio::io::AsyncReadExt;

/// Multipart chunk size: S3's minimum part is 5 MiB.
const CHUNK: usize = 16 << 20;

/// A presigned GET URL for `parts` under the store's prefix (the object may not exist
/// yet: the URL only depends on its path); returns (object path, URL).
pub(crate) async fn presign(
    store: &pgappliance::upload::Store,
    parts: &[&str],
    lifetime: Duration,
    what: &str,
) -> Result<(String, String)> {
    presign_method(store, reqwest::Method::GET, parts, lifetime, what).await
}

/// A presigned URL for `method` (GET to fetch, PUT to write) on `parts` under the store's
/// prefix; returns (object path, URL).
pub(crate) async fn presign_method(
    store: &pgappliance::upload::Store,
    method: reqwest::Method,
    parts: &[&str],
    lifetime: Duration,
    what: &str,
) -> Result<(String, String)> {
    let Some(signer) = store.signer.clone() else {
        bail!(
            "the store {} cannot presign URLs (only s3:// stores can): serve {what} yourself and give its URL",
            store.url
        );
    };
    let path = store.path(parts);
    let url = signer
        .signed_url(method, &path, lifetime)
        .await
        .with_context(|| format!("presigning {path}"))?;
    Ok((path.to_string(), url.to_string()))
}

/// Uploads `file` to `parts` under the store's prefix (multipart).
pub(crate) async fn upload(
    store: &pgappliance::upload::Store,
    file: &Path,
    parts: &[&str],
) -> Result<()> {
    let path = store.path(parts);
    let upload = store.objects.put_multipart(&path).await.map_err(|e| {
        super::store_failure(
            store,
            &format!(
                "starting the upload of {} to {path} in {}",
                file.display(),
                store.url
            ),
            &e,
        )
    })?;
    let mut w = WriteMultipart::new_with_chunk_size(upload, CHUNK);
    let mut f = tokio::fs::File::open(file)
        .await
        .with_context(|| format!("opening {}", file.display()))?;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = f
            .read(&mut buf)
            .await
            .with_context(|| format!("reading {}", file.display()))?;
        if n == 0 {
            break;
        }
        w.wait_for_capacity(4).await.map_err(|e| {
            super::store_failure(
                store,
                &format!("uploading {} to {path} in {}", file.display(), store.url),
                &e,
            )
        })?;
        w.write(&buf[..n]);
    }
    w.finish().await.map_err(|e| {
        super::store_failure(
            store,
            &format!("uploading {} to {path} in {}", file.display(), store.url),
            &e,
        )
    })?;
    Ok(())
}
