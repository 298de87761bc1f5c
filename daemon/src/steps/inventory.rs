//! Inventory: what machine this is → `inventory.json`. Collected once per run.

use anyhow::{Context as _, Result};

use super::{Check, Context, Looking, Product, Step};
use crate::inventory;
use crate::journal::StepName;

pub(crate) struct Inventory;

const FILE: &str = "inventory.json";

impl Step for Inventory {
    const NAME: StepName = StepName::Inventory;
    const NEEDS: &'static [Product] = &[];
    const GIVES: &'static [Product] = &[Product::Inventory];

    async fn check(&self, cx: &mut Looking<'_>) -> Result<Check> {
        if !cx.journal.is_done(StepName::Inventory) {
            return Ok(Check::Todo("not collected yet".into()));
        }
        let path = cx.run_dir.join(FILE);
        let Some(inv) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<inventory::Inventory>(&t).ok())
        else {
            return Ok(Check::Todo(format!(
                "{} is missing or unreadable",
                path.display()
            )));
        };
        cx.set_inventory(inv);
        Ok(Check::Done)
    }

    async fn apply(&self, cx: &mut Context) -> Result<()> {
        let mut inv = inventory::collect(&cx.runner).await?;
        inv.cloud = cx.host.cloud_instance().await;
        crate::fsutil::write_json(&cx.run_dir.join(FILE), &inv)
            .context("writing inventory.json")?;
        tracing::info!(
            cpus = inv.cpu.cpus,
            memory_gib = inv.memory_bytes >> 30,
            model = inv.cpu.model_name.as_deref().unwrap_or("?"),
            "inventory"
        );
        cx.set_inventory(inv);
        Ok(())
    }
}
