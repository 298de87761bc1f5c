//! The built pgapplianced carries the mark `pgappliance build` looks for
//! (`pgappliance::identity`), with this package's version.

#[test]
fn the_daemon_binary_carries_its_mark() {
    let bin = std::fs::read(env!("CARGO_BIN_EXE_pgapplianced")).expect("the daemon binary");
    let versions = pgappliance::identity::marker_versions(&bin);
    assert!(
        versions.iter().any(|v| v == pgappliance::identity::VERSION),
        "{versions:?}"
    );
}
