//! Files the appliance installs, embedded so the payload and the daemon carry the same copy.

/// The tuned profile of scenario A, installed as `/usr/lib/tuned/postgresql/tuned.conf`.
pub const TUNED_POSTGRESQL: &str = include_str!("../assets/tuned/postgresql/tuned.conf");

/// The name of that profile.
pub(crate) const TUNED_POSTGRESQL_NAME: &str = "postgresql";

/// Where tuned profiles live on the appliance.
pub const TUNED_PROFILE_DIR: &str = "usr/lib/tuned";

/// A PGDG-RPM-style PostgreSQL unit for platforms whose packages ship none (`@VERSION@`,
/// `@BINDIR@` filled in by [`crate::platform`]).
pub(crate) const POSTGRESQL_UNIT_TEMPLATE: &str =
    include_str!("../assets/units/postgresql-NN.service.in");
