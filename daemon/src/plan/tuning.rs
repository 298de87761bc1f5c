//! The `auto` tuning calculator: a pure function from the machine and the plan's shape to
//! PostgreSQL settings. Rules and their reasons are in docs/tuning.md; the two reference
//! machines (scenario A: 80-core Altra, 256 GiB; scenario B: 32 vCPU, 128 GiB) are tested below.

use std::collections::BTreeMap;

use super::{Plan, StorageKind};

/// Connections kept free above the largest client count: 3 for superusers
/// (`superuser_reserved_connections`) and 7 for the appliance's own sessions (statistics,
/// CHECKPOINT, monitoring).
pub(crate) const RESERVED_CONNECTIONS: u32 = 10;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// What the calculator looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MachineShape {
    pub(crate) ram_bytes: u64,
    pub(crate) cores: u32,
    pub(crate) max_clients: u32,
    pub(crate) storage: StorageKind,
    pub(crate) pg_major: u32,
}

/// Renders a byte count the way postgresql.conf does: whole GB when exact, else MB.
fn mem(bytes: u64) -> String {
    let mb = bytes / MIB;
    if mb >= 1024 && mb % 1024 == 0 {
        format!("{}GB", mb / 1024)
    } else {
        format!("{mb}MB")
    }
}

fn round_down_mib(bytes: u64) -> u64 {
    bytes / MIB * MIB
}

/// Computes settings for a machine shape. Every value is a string ready for `ALTER SYSTEM`.
pub(crate) fn auto_settings(m: &MachineShape) -> BTreeMap<String, String> {
    let mut s = BTreeMap::new();
    let mut set = |k: &str, v: String| {
        s.insert(k.to_string(), v);
    };
    let cores = m.cores.max(1);
    let ram = m.ram_bytes.max(GIB);

    let max_connections = (m.max_clients + RESERVED_CONNECTIONS).max(100);
    set("max_connections", max_connections.to_string());

    let shared_buffers = round_down_mib(ram / 4);
    set("shared_buffers", mem(shared_buffers));
    set("effective_cache_size", mem(round_down_mib(ram / 4 * 3)));
    set("huge_pages", "try".into());

    let work_mem =
        ((ram - shared_buffers) / (u64::from(max_connections) * 3)).clamp(4 * MIB, 64 * MIB);
    set("work_mem", mem(round_down_mib(work_mem)));
    let maintenance = (ram / 32).clamp(64 * MIB, 8 * GIB);
    set("maintenance_work_mem", mem(round_down_mib(maintenance)));
    let wal_buffers = (shared_buffers / 128).clamp(16 * MIB, 512 * MIB);
    set("wal_buffers", mem(round_down_mib(wal_buffers)));

    set("max_worker_processes", cores.max(8).to_string());
    set("max_parallel_workers", cores.to_string());
    set(
        "max_parallel_workers_per_gather",
        (cores / 2).max(2).to_string(),
    );
    set(
        "max_parallel_maintenance_workers",
        (cores / 2).max(2).to_string(),
    );

    set("checkpoint_timeout", "15min".into());
    set("checkpoint_completion_target", "0.9".into());
    set("min_wal_size", "1GB".into());
    set(
        "max_wal_size",
        mem((ram / 16).clamp(2 * GIB, 64 * GIB) / GIB * GIB),
    );

    let (random_page_cost, io_concurrency) = match m.storage {
        StorageKind::Nvme => ("1.1", 256),
        StorageKind::Ssd => ("1.1", 200),
        StorageKind::Hdd => ("4.0", 2),
    };
    set("random_page_cost", random_page_cost.into());
    set("effective_io_concurrency", io_concurrency.to_string());

    // lz4 WAL compression arrived in 15 (PGDG and distro builds link lz4); before, "on" = pglz.
    set(
        "wal_compression",
        if m.pg_major >= 15 { "lz4" } else { "on" }.into(),
    );
    // 15 raised the default hash_mem_multiplier to 2.0; give 13/14 the same.
    if m.pg_major < 15 {
        set("hash_mem_multiplier", "2.0".into());
    }
    s
}

/// The settings the appliance applies: the computed ones when `auto` is on, with the plan's
/// explicit settings on top.
pub(crate) fn effective_settings(plan: &Plan, shape: &MachineShape) -> BTreeMap<String, String> {
    let mut settings = if plan.tuning.auto {
        auto_settings(shape)
    } else {
        BTreeMap::new()
    };
    for (k, v) in &plan.tuning.settings {
        settings.insert(k.clone(), v.to_string());
    }
    settings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(s: &'a BTreeMap<String, String>, k: &str) -> &'a str {
        s.get(k).map(String::as_str).unwrap_or("<missing>")
    }

    #[test]
    fn altra_q80_256gib_matches_scenario_a_where_it_should() {
        let s = auto_settings(&MachineShape {
            ram_bytes: 256 * GIB,
            cores: 80,
            max_clients: 1000,
            storage: StorageKind::Nvme,
            pg_major: 14,
        });
        assert_eq!(get(&s, "max_connections"), "1010");
        assert_eq!(get(&s, "shared_buffers"), "64GB");
        assert_eq!(get(&s, "effective_cache_size"), "192GB");
        assert_eq!(get(&s, "work_mem"), "64MB");
        assert_eq!(get(&s, "maintenance_work_mem"), "8GB");
        assert_eq!(get(&s, "wal_buffers"), "512MB");
        assert_eq!(get(&s, "max_worker_processes"), "80");
        assert_eq!(get(&s, "max_parallel_workers"), "80");
        assert_eq!(get(&s, "max_parallel_workers_per_gather"), "40");
        assert_eq!(get(&s, "max_parallel_maintenance_workers"), "40");
        assert_eq!(get(&s, "max_wal_size"), "16GB");
        assert_eq!(get(&s, "wal_compression"), "on");
        assert_eq!(get(&s, "hash_mem_multiplier"), "2.0");
        assert_eq!(get(&s, "random_page_cost"), "1.1");
    }

    #[test]
    fn graviton_32_vcpu_128gib() {
        let s = auto_settings(&MachineShape {
            ram_bytes: 128 * GIB,
            cores: 32,
            max_clients: 16,
            storage: StorageKind::Nvme,
            pg_major: 13,
        });
        assert_eq!(get(&s, "max_connections"), "100");
        assert_eq!(get(&s, "shared_buffers"), "32GB");
        assert_eq!(get(&s, "effective_cache_size"), "96GB");
        assert_eq!(get(&s, "work_mem"), "64MB");
        assert_eq!(get(&s, "maintenance_work_mem"), "4GB");
        assert_eq!(get(&s, "wal_buffers"), "256MB");
        assert_eq!(get(&s, "max_parallel_workers_per_gather"), "16");
        assert_eq!(get(&s, "max_wal_size"), "8GB");
        assert_eq!(get(&s, "wal_compression"), "on");
    }

    #[test]
    fn max_connections_always_covers_clients_plus_reserved() {
        for clients in [1, 16, 89, 90, 91, 500, 1000, 5000] {
            let s = auto_settings(&MachineShape {
                ram_bytes: 8 * GIB,
                cores: 2,
                max_clients: clients,
                storage: StorageKind::Ssd,
                pg_major: 17,
            });
            let mc: u32 = get(&s, "max_connections").parse().unwrap_or(0);
            assert!(mc >= clients + RESERVED_CONNECTIONS, "{clients} -> {mc}");
        }
    }

    #[test]
    fn version_and_storage_change_the_answer() {
        let base = MachineShape {
            ram_bytes: 16 * GIB,
            cores: 4,
            max_clients: 50,
            storage: StorageKind::Hdd,
            pg_major: 16,
        };
        let s = auto_settings(&base);
        assert_eq!(get(&s, "wal_compression"), "lz4");
        assert!(!s.contains_key("hash_mem_multiplier"));
        assert_eq!(get(&s, "random_page_cost"), "4.0");
        assert_eq!(get(&s, "effective_io_concurrency"), "2");
        assert_eq!(get(&s, "max_parallel_workers_per_gather"), "2");
        assert_eq!(get(&s, "max_worker_processes"), "8");
    }

    #[test]
    fn small_machines_get_floors() {
        let s = auto_settings(&MachineShape {
            ram_bytes: 512 * MIB,
            cores: 1,
            max_clients: 10,
            storage: StorageKind::Nvme,
            pg_major: 15,
        });
        assert_eq!(get(&s, "shared_buffers"), "256MB");
        assert_eq!(get(&s, "work_mem"), "4MB");
        assert_eq!(get(&s, "maintenance_work_mem"), "64MB");
        assert_eq!(get(&s, "max_wal_size"), "2GB");
    }
}
