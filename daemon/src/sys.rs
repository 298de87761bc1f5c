//! The few operating-system calls std does not offer: user lookup and the child-process
//! set-up of the local executor (file limit, identity, parent-death signal).

use std::io;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use nix::sys::resource::{setrlimit, Resource};
use nix::unistd::{Gid, Uid, User};

/// A user to run commands as.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub(crate) name: String,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) groups: Vec<u32>,
    pub(crate) home: PathBuf,
}

pub(crate) fn lookup_user(name: &str) -> io::Result<Identity> {
    let user = User::from_name(name)
        .map_err(io::Error::from)?
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no user named \"{name}\" on this machine"),
            )
        })?;
    let cname = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "user name contains NUL"))?;
    let groups = nix::unistd::getgrouplist(&cname, user.gid)
        .map_err(io::Error::from)?
        .into_iter()
        .map(|g| g.as_raw())
        .collect();
    Ok(Identity {
        name: user.name,
        uid: user.uid.as_raw(),
        gid: user.gid.as_raw(),
        groups,
        home: user.dir,
    })
}

/// The daemon's own user (by effective uid); None when it has no passwd entry.
pub(crate) fn current_user() -> Option<Identity> {
    let user = User::from_uid(Uid::effective()).ok().flatten()?;
    lookup_user(&user.name).ok()
}

pub(crate) fn is_root() -> bool {
    Uid::effective().is_root()
}

/// Child set-up run between fork and exec, in this order because each step needs the
/// privilege the next one gives up: raise the file limit, switch identity, then ask for
/// SIGKILL when the daemon dies (a credential change would clear that request).
#[allow(unsafe_code)]
pub(crate) fn prepare_child(
    cmd: &mut std::process::Command,
    limit_nofile: Option<u64>,
    identity: Option<&Identity>,
) {
    // Running as the identity already (a developer's tests as themselves): nothing to
    // switch, and setgroups would need a privilege such a process lacks.
    let already =
        |id: &&Identity| Uid::effective().as_raw() == id.uid && Gid::effective().as_raw() == id.gid;
    let identity = identity.filter(|id| !already(id)).map(|id| {
        let groups: Vec<Gid> = id.groups.iter().map(|g| Gid::from_raw(*g)).collect();
        (groups, Gid::from_raw(id.gid), Uid::from_raw(id.uid))
    });
    let parent = std::process::id();
    // SAFETY: the closure only makes async-signal-safe system calls (setrlimit, setgroups,
    // setgid, setuid, prctl, getppid) on data prepared before the fork; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(n) = limit_nofile {
                setrlimit(Resource::RLIMIT_NOFILE, n, n).map_err(io::Error::from)?;
            }
            if let Some((groups, gid, uid)) = &identity {
                nix::unistd::setgroups(groups).map_err(io::Error::from)?;
                nix::unistd::setgid(*gid).map_err(io::Error::from)?;
                nix::unistd::setuid(*uid).map_err(io::Error::from)?;
            }
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(io::Error::from)?;
            if nix::unistd::getppid().as_raw() != parent as i32 {
                return Err(io::Error::other("parent exited before exec"));
            }
            Ok(())
        });
    }
}
