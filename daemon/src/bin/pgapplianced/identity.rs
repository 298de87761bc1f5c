//! The bytes that tell this binary from any other program (`pgappliance::identity`):
//! kept in the binary though nothing reads them here.

#[used]
static MARKER: &str = concat!("\0pgapplianced-binary:", env!("CARGO_PKG_VERSION"), "\0");
