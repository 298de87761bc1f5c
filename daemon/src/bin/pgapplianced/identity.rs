//! The bytes that tell this binary from any other program (`pgappliance::identity`).

static MARKER: &str = concat!("\0pgapplianced-binary:", env!("CARGO_PKG_VERSION"), "\0");

/// Makes the marker part of the program: referenced at run time, it survives every
/// linker's section garbage collection (`#[used]` alone keeps it from the linker only
/// with newer compilers).
pub(crate) fn keep() {
    std::hint::black_box(MARKER);
}
