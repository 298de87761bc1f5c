//! What the launch, wait and build tests (`image/tests/`) share: a plan and a daemon
//! stand-in to build from, the `launch` command they start from and the record it leaves,
//! real emulators started on loopback (sushy-emulator's fake driver, pyghmi's fakebmc, moto
//! as EC2, a plain HTTP server), all stopped when dropped. The crate's
//! `describe`, `runtime`, `seaweed`, `wait_until_ready` and `workspace` are re-exported, so
//! `use pgappliance_test_support::launch::*` is all a launch test imports.

use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

pub use crate::{describe, runtime, seaweed, wait_until_ready, workspace};

pub fn venv_bin(name: &str) -> PathBuf {
    let p = seaweed::venv().join("bin").join(name);
    assert!(
        p.exists(),
        "{} is missing: run tools/install-deps (tools/requirements.txt)",
        p.display()
    );
    p
}

/// A file that is an aarch64 ELF executable (`ET_EXEC`) as far as its header goes, with
/// the mark of a pgapplianced build: the builder only reads those and packs it.
pub fn fake_aarch64_binary(dir: &Path) -> PathBuf {
    let mut h = vec![0u8; 4096];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2;
    h[5] = 1;
    h[16..18].copy_from_slice(&2u16.to_le_bytes());
    h[18..20].copy_from_slice(&0xb7u16.to_le_bytes());
    h.extend_from_slice(pgappliance::identity::marker().as_bytes());
    let p = dir.join("pgapplianced-aarch64");
    std::fs::write(&p, h).expect("write");
    p
}

/// The Altra example plan with what the kickstart needs from the operator.
pub fn altra_plan(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(workspace().join("examples/altra-q80.toml")).expect("plan");
    // The example's [install] holds a placeholder key, which build refuses: a test key in
    // its place.
    let placeholder = "ssh-ed25519 REPLACE-WITH-YOUR-PUBLIC-KEY you@laptop";
    assert!(
        text.contains(placeholder),
        "the Altra example's placeholder key moved"
    );
    let text = text.replace(
        placeholder,
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTests0000000000000000000000 ops@lab",
    );
    let p = dir.join("altra.toml");
    std::fs::write(&p, text).expect("write");
    p
}

/// A small Rocky-shaped aarch64 ISO (EFI El Torito image with grub.cfg) for `--iso`.
pub fn synthetic_rocky_iso(dir: &Path) -> PathBuf {
    let tree = dir.join("tree");
    std::fs::create_dir_all(tree.join("EFI/BOOT")).expect("mkdir");
    std::fs::create_dir_all(tree.join("images/pxeboot")).expect("mkdir");
    let label = "Rocky-8-6-aarch64-dvd";
    let grub = format!(
        "set default=\"1\"\n\nset timeout=60\nsearch --no-floppy --set=root -l '{label}'\n\
         menuentry 'Install Rocky Linux 8.6' --class red --class gnu-linux --class gnu --class os {{\n\
         \tlinux /images/pxeboot/vmlinuz inst.stage2=hd:LABEL={label} ro\n\tinitrd /images/pxeboot/initrd.img\n}}\n\
         menuentry 'Test this media & install Rocky Linux 8.6' --class red --class gnu-linux --class gnu --class os {{\n\
         \tlinux /images/pxeboot/vmlinuz inst.stage2=hd:LABEL={label} rd.live.check\n\tinitrd /images/pxeboot/initrd.img\n}}\n"
    );
    std::fs::write(tree.join("EFI/BOOT/grub.cfg"), &grub).expect("grub");
    std::fs::write(tree.join("EFI/BOOT/BOOTAA64.EFI"), "efi").expect("efi");
    std::fs::write(tree.join("images/pxeboot/vmlinuz"), "kernel").expect("kernel");
    std::fs::write(tree.join("images/pxeboot/initrd.img"), "initrd").expect("initrd");
    let img = tree.join("images/efiboot.img");
    let o = Command::new("bash")
        .args([
            "-ec",
            &format!(
                "mkfs.fat -C {img} 2048 >/dev/null; mmd -i {img} ::/EFI ::/EFI/BOOT; \
                 mcopy -i {img} tree/EFI/BOOT/grub.cfg tree/EFI/BOOT/BOOTAA64.EFI ::/EFI/BOOT/; \
                 xorriso -as mkisofs -quiet -V {label} -J -joliet-long -r -e images/efiboot.img -no-emul-boot -o rocky.iso tree; \
                 implantisomd5 rocky.iso >/dev/null",
                img = img.display()
            ),
        ])
        .current_dir(dir)
        .output()
        .expect("bash");
    assert!(o.status.success(), "{}", describe(&o));
    dir.join("rocky.iso")
}

/// Waits until `child` listens on `port` (see [`wait_until_ready`]).
pub fn wait_for_port(child: &mut Child, port: u16, what: &str, log: &Path) {
    wait_until_ready(
        &format!("{what} on port {port}"),
        child,
        || std::fs::read_to_string(log).unwrap_or_default(),
        || TcpStream::connect(("127.0.0.1", port)).is_ok(),
    );
}

/// A child process killed when dropped.
pub struct Daemon {
    pub child: Child,
    pub dir: tempfile::TempDir,
    pub port: u16,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }
}

pub const BMC_USER: &str = "admin";
pub const BMC_PASSWORD: &str = "pw-Zq81-secret";

/// `sushy-emulator --fake` over https with a self-signed certificate (`cert.pem` in its
/// directory, for --bmc-ca) and Basic auth from an htpasswd (bcrypt) file. Its state goes
/// to its own directory: by default the fake driver keeps it in /tmp/sushy-emulator, shared
/// by every emulator on the machine.
pub fn sushy() -> Daemon {
    let dir = tempfile::Builder::new()
        .prefix("pga-sushy-")
        .tempdir()
        .expect("tmp");
    let d = dir.path();
    let o = Command::new("htpasswd")
        .args(["-nbB", BMC_USER, BMC_PASSWORD])
        .output()
        .expect("htpasswd (apache2-utils)");
    assert!(o.status.success(), "{}", describe(&o));
    std::fs::write(d.join("htpasswd"), &o.stdout).expect("htpasswd");
    let o = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args([
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(d.join("key.pem"))
        .arg("-out")
        .arg(d.join("cert.pem"))
        .output()
        .expect("openssl");
    assert!(o.status.success(), "{}", describe(&o));
    std::fs::write(
        d.join("conf.py"),
        format!(
            "SUSHY_EMULATOR_AUTH_FILE = '{}'\nSUSHY_EMULATOR_STATE_DIR = '{}'\n",
            d.join("htpasswd").display(),
            d.join("state").display()
        ),
    )
    .expect("conf");
    let port = seaweed::free_port();
    let log = std::fs::File::create(d.join("log")).expect("log");
    let child = Command::new(venv_bin("sushy-emulator"))
        .args(["--fake", "-i", "127.0.0.1", "-p", &port.to_string()])
        .arg("--config")
        .arg(d.join("conf.py"))
        .arg("--ssl-certificate")
        .arg(d.join("cert.pem"))
        .arg("--ssl-key")
        .arg(d.join("key.pem"))
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("sushy-emulator");
    let mut s = Daemon { child, dir, port };
    wait_for_port(
        &mut s.child,
        port,
        "sushy-emulator",
        &s.dir.path().join("log"),
    );
    s
}

/// `python3 -m http.server` serving a directory on loopback (a URL "the user serves").
pub fn http_server(root: &Path) -> Daemon {
    let dir = tempfile::tempdir().expect("tmp");
    let port = seaweed::free_port();
    let log = std::fs::File::create(dir.path().join("log")).expect("log");
    let child = Command::new("python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "-d",
        ])
        .arg(root)
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("python3 http.server");
    let mut s = Daemon { child, dir, port };
    wait_for_port(&mut s.child, port, "http.server", &s.dir.path().join("log"));
    s
}

/// pyghmi's `fakebmc` (user admin, password "password", fixed in its source) on a free
/// UDP port.
pub fn fakebmc() -> Daemon {
    let dir = tempfile::tempdir().expect("tmp");
    let port = seaweed::free_port();
    let log = std::fs::File::create(dir.path().join("log")).expect("log");
    let child = Command::new(venv_bin("fakebmc"))
        .args(["--port", &port.to_string()])
        .stdout(Stdio::from(log.try_clone().expect("log")))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("fakebmc");
    let mut d = Daemon { child, dir, port };
    // It listens on UDP: ready once ipmitool gets an answer.
    let log = d.dir.path().join("log");
    let last = std::cell::RefCell::new(String::new());
    wait_until_ready(
        &format!("fakebmc on port {port}"),
        &mut d.child,
        || {
            format!(
                "{}\n{}",
                std::fs::read_to_string(&log).unwrap_or_default(),
                last.borrow()
            )
        },
        || {
            let o = Command::new("ipmitool")
                .args(["-I", "lanplus", "-H", "127.0.0.1", "-p", &port.to_string()])
                .args([
                    "-U", "admin", "-E", "-R", "1", "-N", "1", "chassis", "power", "status",
                ])
                .env("IPMI_PASSWORD", "password")
                .output()
                .expect("ipmitool (Debian package ipmitool)");
            *last.borrow_mut() = describe(&o);
            o.status.success()
        },
    );
    d
}

/// GET a Redfish resource from the emulator with curl (an independent client).
pub fn redfish_get(s: &Daemon, path: &str) -> serde_json::Value {
    let o = Command::new("curl")
        .args(["-sS", "--fail", "--cacert"])
        .arg(s.dir.path().join("cert.pem"))
        .args(["-u", &format!("{BMC_USER}:{BMC_PASSWORD}")])
        .arg(format!("https://127.0.0.1:{}{path}", s.port))
        .output()
        .expect("curl");
    assert!(o.status.success(), "{}", describe(&o));
    serde_json::from_slice(&o.stdout).expect("json")
}

pub fn read_to_string(p: &Path) -> String {
    let mut s = String::new();
    std::fs::File::open(p)
        .and_then(|mut f| f.read_to_string(&mut s))
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    s
}

/// `moto_server` (moto with server, ec2, s3) with request authentication on: the first
/// three requests are let through unauthenticated to create an IAM user, its allow-all
/// policy and its access key; every later request must be signed with that key. The
/// server is [`crate::moto::Moto`]'s (started, awaited and killed there).
pub struct Moto {
    pub server: crate::moto::Moto,
    pub access_key: String,
    pub secret_key: String,
}

impl Moto {
    pub fn start() -> Moto {
        let mut m = Moto {
            server: crate::moto::Moto::start(3),
            access_key: "unauthenticated".into(),
            secret_key: "unauthenticated".into(),
        };
        m.aws(&["iam", "create-user", "--user-name", "pga"]);
        m.aws(&[
            "iam",
            "put-user-policy",
            "--user-name",
            "pga",
            "--policy-name",
            "all",
            "--policy-document",
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#,
        ]);
        let key: serde_json::Value =
            serde_json::from_str(&m.aws(&["iam", "create-access-key", "--user-name", "pga"]))
                .expect("key json");
        m.access_key = key["AccessKey"]["AccessKeyId"].as_str().expect("id").into();
        m.secret_key = key["AccessKey"]["SecretAccessKey"]
            .as_str()
            .expect("secret")
            .into();
        m
    }

    pub fn endpoint(&self) -> String {
        self.server.endpoint()
    }

    /// The id of the image moto offers first (`aws ec2 describe-images`), with its newline.
    pub fn ami(&self) -> String {
        self.aws(&[
            "ec2",
            "describe-images",
            "--owners",
            "amazon",
            "--query",
            "Images[0].ImageId",
            "--output",
            "text",
        ])
    }

    /// The AWS CLI (awscli from the venv) against this server, signed with its key.
    pub fn aws(&self, args: &[&str]) -> String {
        let o = Command::new(venv_bin("aws"))
            .args(["--endpoint-url", &self.endpoint(), "--output", "json"])
            .args(args)
            .env("AWS_ACCESS_KEY_ID", &self.access_key)
            .env("AWS_SECRET_ACCESS_KEY", &self.secret_key)
            .env("AWS_DEFAULT_REGION", "us-east-1")
            .env_remove("AWS_ENDPOINT_URL")
            .env_remove("AWS_PROFILE")
            .output()
            .expect("aws");
        assert!(o.status.success(), "aws {args:?}: {}", describe(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// A 0600 credentials file with this server's key (the store's format).
    pub fn credentials_file(&self, dir: &Path, secret: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join(format!("aws-{secret}"));
        std::fs::write(
            &p,
            format!(
                "access_key_id = {}\nsecret_access_key = {secret}\n",
                self.access_key
            ),
        )
        .expect("credentials");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        p
    }
}

/// `pgappliance launch PLAN --out DIR/out --daemon-binary <a fake aarch64 pgapplianced in
/// DIR>`: what every launch starts from; its targets and options are the caller's to add.
pub fn launch_command(dir: &Path, plan: &Path) -> Command {
    let mut c = Command::new(crate::image_binary());
    c.arg("launch")
        .arg(plan)
        .arg("--out")
        .arg(dir.join("out"))
        .arg("--daemon-binary")
        .arg(fake_aarch64_binary(dir));
    c
}

/// The launch id `launch` printed (its `launch ID: …` line).
pub fn launch_id(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("launch "))
        .and_then(|l| l.split(':').next())
        .unwrap_or_else(|| panic!("no launch id: {}", describe(o)))
        .to_string()
}

/// The launch record `id` in a `file://` store's directory.
pub fn file_record(store: &Path, id: &str) -> serde_json::Value {
    serde_json::from_str(&read_to_string(
        &store.join("launches").join(format!("{id}.json")),
    ))
    .expect("record json")
}

/// The launch record `id` in an object store.
pub fn stored_record(store: &pgappliance::upload::Store, id: &str) -> serde_json::Value {
    let bytes = runtime()
        .block_on(async {
            use object_store::ObjectStoreExt;
            store
                .objects
                .get(&store.path(&["launches", &format!("{id}.json")]))
                .await?
                .bytes()
                .await
        })
        .expect("record in the store");
    serde_json::from_slice(&bytes).expect("record json")
}
