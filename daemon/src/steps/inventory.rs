//! Inventory: what machine this is → `inventory.json`. Collected once per run.

use std::time::Instant;

use anyhow::{Context, Result};

use super::Run;
use crate::inventory::{self, Inventory};
use crate::journal::StepName;

pub async fn run(run: &mut Run) -> Result<()> {
    let path = run.run_dir.join("inventory.json");
    if run.journal.is_done(StepName::Inventory) {
        if let Ok(text) = std::fs::read_to_string(&path) {
            if let Ok(inv) = serde_json::from_str::<Inventory>(&text) {
                run.inventory = Some(inv);
                return Ok(());
            }
        }
    }
    let t0 = Instant::now();
    run.journal.begin(StepName::Inventory, None)?;
    let mut inv = inventory::collect(&run.runner).await?;
    if run.is_appliance() {
        // Only the appliance asks the link-local metadata service (a few seconds at most
        // where nothing answers).
        let endpoint = std::env::var("PGAPPLIANCE_IMDS_ENDPOINT")
            .unwrap_or_else(|_| inventory::cloud::IMDS_ENDPOINT.to_string());
        inv.cloud = inventory::cloud::ec2_instance(&endpoint).await;
    }
    crate::fsutil::write_json(&path, &inv).context("writing inventory.json")?;
    tracing::info!(
        cpus = inv.cpu.cpus,
        memory_gib = inv.memory_bytes >> 30,
        model = inv.cpu.model_name.as_deref().unwrap_or("?"),
        "inventory"
    );
    run.inventory = Some(inv);
    run.journal
        .finish(StepName::Inventory, t0.elapsed().as_secs_f64())
}
