#!/usr/bin/env python3
"""Host-side checks of what a guest scenario left in its share's out/ directory.

    check.py nspawn OUT DIR                 (DIR: the scenario's directory, its nspawn-exits)
    check.py vm-boot OUT COLLECTED_DIR
    check.py vm-reset OUT COLLECTED_DIR RESET_AT_FILE
    check.py vm-refuse OUT NVME0_IMAGE
    check.py el8-tools OUT
    check.py el8-refuse OUT NVME0_IMAGE
    check.py cloud-init DIR                 (DIR: the scenario's directory, out/ in share/)
    check.py cloud-refuse DIR expired|corrupt
    check.py kickstart-post DIR medium|url
    check.py el8-dnf OUT FINGERPRINT_FILE
    check.py el8-dnf-mirror OUT FINGERPRINT_FILE
    check.py el8-dnf-badsig OUT
    check.py el8-dnf-medium OUT FINGERPRINT_FILE
    check.py deb-medium OUT DEBS_DIR       (DEBS_DIR: the .debs the payload carries)
    check.py arm64-boot OUT COLLECTED_DIR STORED_DIR  (STORED_DIR: the store's objects, fetched)

Prints one line per check and exits non-zero when any fails.
"""
import glob
import hashlib
import json
import os
import re
import subprocess
import sys

failures = []


def ok(cond, what, detail=""):
    print(f"  {'ok  ' if cond else 'FAIL'} {what}" + (f": {detail}" if detail and not cond else ""))
    if not cond:
        failures.append(what)
    return cond


def read(out, name, default=""):
    try:
        with open(os.path.join(out, name), encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return default


def daemon_log(out):
    return "".join(read(out, os.path.basename(p)) for p in sorted(glob.glob(os.path.join(out, "daemon-*.log"))))


def run_dir(out):
    runs = glob.glob(os.path.join(out, "var-lib", "runs", "*"))
    return runs[0] if len(runs) == 1 else None


def state(out):
    try:
        return json.loads(read(out, "var-lib/state.json"))
    except ValueError:
        return {}


def completed_run(out, expect_points, collected=None):
    ok(read(out, "outcome").strip() == "done", "the daemon finished (done marker)", read(out, "outcome").strip())
    rd = run_dir(out)
    if not ok(rd is not None, "one run directory"):
        return None
    try:
        with open(os.path.join(rd, "results.json")) as f:
            results = json.load(f)
    except (OSError, ValueError) as e:
        ok(False, "results.json readable", str(e))
        return None
    ids = [p["id"] for p in results["points"]]
    ok(len(ids) == expect_points and results["points_total"] == expect_points,
       f"{expect_points} points in results.json", f"{len(ids)} of {results['points_total']}")
    ok(len(set(ids)) == len(ids), "each point once", str(ids))
    bad = [p["id"] for p in results["points"] if p.get("status") != "ok"]
    ok(not bad, "every point ok", str(bad))
    ok(all((p.get("summary") or p.get("sysbench") or {}).get("tps", 0) > 0 for p in results["points"]),
       "every point has a tps figure")
    logs = glob.glob(os.path.join(rd, "raw", "points", "*", "attempt-*", "pgbench_log*"))
    ok(bool(logs) and all(os.stat(l).st_uid != 0 for l in logs),
       "pgbench wrote its transaction logs as the postgres user, not root", str(logs[:2]))
    for f in ("summary.csv", "report.html", "inventory.json"):
        ok(os.path.exists(os.path.join(rd, f)), f"{f} written")
    if collected is None:
        manifests = glob.glob(os.path.join(out, "var-lib", "store", "**", "manifest.json"), recursive=True)
        ok(len(manifests) == 1, "uploaded to the local object store with a manifest", str(manifests))
    else:
        csv = read(collected, "summary.csv")
        rows = [l for l in csv.splitlines()[1:] if results["run_id"] in l]
        ok(len(rows) == expect_points,
           f"uploaded to the host's S3 server and collected there: {expect_points} rows of this run in summary.csv",
           csv[:600] + read(os.path.dirname(collected), "collected.log")[-600:])
        ok(os.path.exists(os.path.join(collected, "index.html")), "the comparison page was rendered")
    st = state(out)
    for step in ("inventory", "packages", "storage", "postgres", "tuning", "os_tuning", "in_effect", "dataset", "sweep", "report", "upload"):
        ok(st.get("steps", {}).get(step, {}).get("finished_at") is not None, f"journal: step {step} finished")
    status = read(out, "status")
    ok("finished" in status and f"points: {expect_points}/{expect_points}" in status,
       "`pgapplianced status` shows the run finished", status)
    texts = read(out, "status-text.log")
    ok(re.search(r"^sweep \d+/\d+: \d+ clients", texts, re.M) is not None,
       "STATUS= lines for sweep points", texts[-400:])
    ok("Status: \"sweep" in read(out, "systemctl-status-sweep.txt"),
       "`systemctl status pgapplianced` shows the sweep point", read(out, "systemctl-status-sweep.txt")[:600])
    journal = "".join(read(out, os.path.basename(p)) for p in glob.glob(os.path.join(out, "journal-*.txt")))
    ok(re.search(r"pga-cmd-[0-9a-f]+-\d+-pgbench\.service", journal) is not None,
       "pgbench ran as transient units")
    tie = results.get("tuning_in_effect") or {}
    ok(tie.get("os_tuning_planned") is True, "tuning in effect recorded on the appliance", str(tie)[:400])
    bad = [c for c in tie.get("checks", []) if c.get("status") == "not_in_effect"]
    ok(not bad and any(c.get("area") == "postgres" for c in tie.get("checks", [])),
       "every planned setting read back in effect", str(bad or tie)[:600])
    ok("Tuning in effect" in open(os.path.join(rd, "report.html")).read(), "the report shows the tuning in effect")
    ok("ActiveState=active" in read(out, "postgres-state.txt")
       and "UnitFileState=enabled" in read(out, "postgres-state.txt"),
       "postgresql-15.service enabled and active", read(out, "postgres-state.txt"))
    ok(read(out, "data-directory").strip() == "/var/lib/pgappliance/pgdata/data",
       "PGDATA from the drop-in", read(out, "data-directory"))
    ok("Environment=PGDATA=/var/lib/pgappliance/pgdata/data" in read(out, "postgres-unit.txt"),
       "the drop-in is part of the unit")
    return results


def stripe_checks(out):
    lsblk = json.loads(read(out, "lsblk.json") or "{}")
    disks = {d["name"]: d for d in lsblk.get("blockdevices", [])}
    for n in ("nvme0n1", "nvme1n1"):
        kids = [c.get("name") for c in disks.get(n, {}).get("children", []) or []]
        ok("pgappliance-data" in kids, f"{n} carries the data LV", str(disks.get(n)))
    lvs = read(out, "lvs.txt").split()
    ok(lvs[:3] == ["data", "pgappliance", "2"] and lvs[3].startswith("64"),
       "LV striped over 2 drives, 64 KiB stripe", str(lvs))
    mounts = read(out, "findmnt.json")
    ok(re.search(r'"target":\s*"/var/lib/pgappliance/pgdata",\s*"source":\s*"/dev/mapper/pgappliance-data",\s*"fstype":\s*"xfs"', mounts) is not None,
       "XFS on the LV mounted at the mount point", mounts[-600:])


def volume_checks(out):
    stripe_checks(out)
    ok("transparent_hugepage=never" in read(out, "cmdline"), "kernel argument in /proc/cmdline", read(out, "cmdline"))
    ok("[never]" in read(out, "thp"), "THP is never", read(out, "thp"))
    ok('"postgresql"' in read(out, "tuned-active"), "tuned profile postgresql active", read(out, "tuned-active"))
    st = state(out)
    ok(bool(st.get("state", {}).get("os_tuning", {}).get("reboot_from_boot")), "journal recorded the kernel-argument reboot")


def el8_tools_checks(out):
    """util-linux 2.32.1's lsblk and wipefs were the guest's only ones."""
    ok("lsblk from util-linux 2.32.1" in read(out, "el8-lsblk-version"),
       "the guest's lsblk is util-linux 2.32.1", read(out, "el8-lsblk-version"))
    ok("wipefs from util-linux 2.32.1" in read(out, "el8-wipefs-version"),
       "the guest's wipefs is util-linux 2.32.1", read(out, "el8-wipefs-version"))
    before = read(out, "lsblk-2.32.1-before.json")
    try:
        devs = {d["name"]: d for d in json.loads(before)["blockdevices"]}
    except (ValueError, KeyError) as e:
        ok(False, "lsblk 2.32.1 printed JSON before the daemon ran", f"{e}: {before[:400]}")
        return
    nvme = [devs.get(n) for n in ("/dev/nvme0n1", "/dev/nvme1n1")]
    ok(all(d is not None for d in nvme), "lsblk 2.32.1 -p lists both drives by path", str(list(devs)))
    ok(all(d and isinstance(d.get("size"), str) and isinstance(d.get("rota"), str) for d in nvme),
       "lsblk 2.32.1 prints sizes and flags as strings", str(nvme))


def el8_inventory_checks(out):
    rd = run_dir(out)
    if not ok(rd is not None, "one run directory"):
        return
    try:
        with open(os.path.join(rd, "inventory.json")) as f:
            inv = json.load(f)
    except (OSError, ValueError) as e:
        ok(False, "inventory.json readable", str(e))
        return
    devs = {d["name"]: d for d in inv.get("block_devices", [])}
    for n in ("nvme0n1", "nvme1n1"):
        d = devs.get(n, {})
        ok(d.get("path") == f"/dev/{n}" and d.get("size_bytes") == 2 << 30 and d.get("rotational") is False,
           f"inventory.json from lsblk 2.32.1: {n} with its path, 2 GiB as a number, not rotational", str(d))


def tuning_in_effect_checks(results):
    tie = results.get("tuning_in_effect") or {}
    status = {}
    for c in tie.get("checks", []):
        status.setdefault(c["area"], set()).add(c["status"])
    for area in ("kernel", "tuned", "sysctl", "volume", "lvm", "postgres"):
        ok("in_effect" in status.get(area, ()), f"tuning in effect: {area} checked and in effect", str(status))
    lvm = tie.get("lvm") or [{}]
    ok(all(s.get("stripes") == 2 and s.get("stripe_size_bytes") == 65536 for s in lvm),
       "tuning in effect: LVM 2 stripes of 64 KiB", str(lvm))
    vol = tie.get("data_volume") or {}
    ok(vol.get("fstype") == "xfs" and "noatime" in vol.get("options", []),
       "tuning in effect: XFS data volume mounted noatime", str(vol))
    ok((tie.get("tuned") or {}).get("active_profile") == "postgresql" and tie.get("transparent_hugepage") == "never",
       "tuning in effect: tuned profile and THP recorded", str(tie)[:400])


def every_boot_journal(out):
    """The daemon's journal entries of every boot (the hook's daemon-every-boot.json), each
    as (boot id, message)."""
    entries = []
    for line in read(out, "daemon-every-boot.json").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        msg = entry.get("MESSAGE", "")
        if isinstance(msg, list):
            msg = bytes(msg).decode("utf-8", "replace")
        entries.append((entry.get("_BOOT_ID", ""), re.sub(r"\x1b\[[0-9;]*m", "", msg)))
    return entries


def between_rounds_reboot_checks(out, d, results):
    """The nspawn plan's select-only workload ran in 3 rounds with a reboot before rounds 2
    and 3: every round's points once, each round in a boot of its own (the daemon's journal
    messages of every boot, with their boot ids), the harness booting the container again
    after each reboot."""
    exits = read(d, "nspawn-exits").split()
    ok(exits == ["133", "133", "0"],
       "the container rebooted twice (systemd-nspawn exit status 133) and powered off after the third boot",
       str(exits))
    boot_ids = [l.strip().replace("-", "") for l in read(out, "boots").splitlines() if l.strip()]
    ok(len(boot_ids) == 3 and len(set(boot_ids)) == 3, "three boots, each with its own boot id", str(boot_ids))
    ro = [p for p in results["points"] if p["workload"] == "ro"]
    keys = sorted((p["clients"], p["repeat"]) for p in ro)
    ok(keys == [(c, r) for c in (2, 8) for r in (1, 2, 3)],
       "every round's select-only points, each once", str(keys))
    # The boot each point was measured in, from the daemon's "point done" messages.
    done_in = {}
    reboots = []
    for boot, msg in every_boot_journal(out):
        m = re.search(r"point done point=(\S+)", msg)
        if m:
            done_in.setdefault(m.group(1), []).append(boot)
        m = re.search(r"rebooting between rounds round=(\d+)", msg)
        if m:
            reboots.append((int(m.group(1)), boot))
    ok(all(len(done_in.get(p["id"], [])) == 1 for p in ro),
       "the journal records each select-only point done once",
       str({p["id"]: done_in.get(p["id"]) for p in ro}))
    round_boots = {}
    for p in ro:
        round_boots.setdefault(p["repeat"], set()).update(done_in.get(p["id"], []))
    ok(len(boot_ids) == 3 and all(round_boots.get(r) == {boot_ids[r - 1]} for r in (1, 2, 3)),
       "each round measured in a boot of its own, rounds 1, 2, 3 in boots 1, 2, 3",
       str(round_boots) + " " + str(boot_ids))
    ok([r for r, _ in reboots] == [2, 3]
       and [b for _, b in reboots] == [next(iter(round_boots.get(r, {""}))) for r in (1, 2)],
       "the daemon asked for a reboot before rounds 2 and 3, each from the boot of the round before",
       str(reboots))
    sweep = state(out).get("state", {}).get("sweep", {})
    ok(sweep.get("prepared_round") == 3, "the journal: round 3 prepared (its reboot done)", json.dumps(sweep))


def boots(out):
    return len([l for l in read(out, "boots").splitlines() if l.strip()])


def cloud_common(d):
    """What every cloud scenario shows: the guest got exactly the user-data launch built."""
    out = os.path.join(d, "share", "out")
    built = read(d, "build/user-data.yaml")
    ok(built.startswith("#cloud-config") and read(d, "seed/user-data") == built,
       "the instance's UserData read back from moto is the user-data the build wrote")
    log = read(out, "cloud-init.log")
    ok("DataSourceNoCloud" in log and "cidata" in read(out, "cloud-init-status.txt") + log,
       "cloud-init read the NoCloud seed (cidata)", log[-600:])
    return out


def cloud_run_checks(d):
    out = cloud_common(d)
    instance = read(d, "instance-id").strip()
    ok("status: done" in read(out, "cloud-init-status.txt"), "cloud-init finished without error",
       read(out, "cloud-init-status.txt"))
    ok(read(out, "outcome").strip() == "done", "the daemon cloud-init started finished the plan",
       read(out, "outcome") + read(out, "daemon.log")[-800:])
    ok("UnitFileState=enabled" in read(out, "daemon-unit.txt"), "pgapplianced.service enabled",
       read(out, "daemon-unit.txt"))
    ok("store.credentials" in read(out, "etc-pgappliance.txt")
       and "-rw-------" in read(out, "etc-pgappliance.txt"),
       "the store credentials from the user-data, 0600", read(out, "etc-pgappliance.txt"))
    rd = run_dir(out)
    results = {}
    if ok(rd is not None, "one run directory"):
        try:
            with open(os.path.join(rd, "results.json")) as f:
                results = json.load(f)
        except (OSError, ValueError) as e:
            ok(False, "results.json readable", str(e))
    points = results.get("points", [])
    ok(len(points) == 2 and all(p.get("status") == "ok" for p in points), "2 points, each ok",
       str([(p.get("id"), p.get("status")) for p in points]))
    cloud = (results.get("inventory") or {}).get("cloud") or {}
    if not cloud and rd is not None:
        try:
            with open(os.path.join(rd, "inventory.json")) as f:
                cloud = json.load(f).get("cloud") or {}
        except (OSError, ValueError):
            cloud = {}
    ok(cloud.get("instance_id") == instance, f"the daemon knows itself as {instance} (IMDSv2)", str(cloud))
    wait_log = read(d, "wait.log")
    ok(read(d, "wait-status").strip() == "0", "pgappliance wait --teardown exited 0", wait_log[-1500:])
    ok(instance in wait_log, "wait followed the instance by its id", wait_log[-800:])
    ok(read(d, "instance-state").strip() in ("terminated", "shutting-down"),
       "the instance is terminated in the emulator", read(d, "instance-state"))
    csv = read(os.path.join(d, "collected"), "summary.csv")
    run_id = results.get("run_id", "?")
    ok(len([l for l in csv.splitlines()[1:] if run_id in l]) == 2,
       "wait collected the run: its 2 rows in summary.csv", csv[:400])
    ok(os.path.exists(os.path.join(d, "collected", "index.html")), "the comparison page was rendered")


def cloud_refuse_checks(d, mode):
    out = cloud_common(d)
    status = read(out, "cloud-init-status.txt")
    ok(re.search(r"^status: (done|error)", status, re.M) is not None, "cloud-init finished", status)
    ok("status: error" in status, "cloud-init reports the failed runcmd", status)
    ok(read(out, "outcome").strip() == "not-started", "the daemon was not started",
       read(out, "outcome"))
    ok(read(out, "daemon-binary").strip() == "absent", "nothing of the payload unpacked",
       read(out, "daemon-binary"))
    ok("ActiveState=inactive" in read(out, "daemon-unit.txt"), "pgapplianced.service inactive",
       read(out, "daemon-unit.txt"))
    why = {
        "expired": r"the payload could not be fetched from \S+/payload\.tar\.gz \(curl exit status 22",
        "corrupt": r"the payload's sha256 is [0-9a-f]{64}, not [0-9a-f]{64}",
    }[mode]
    log = read(out, "cloud-init-output.log")
    ok(re.search("pgappliance: " + why + ".*; the daemon is not started", log) is not None,
       "cloud-init's output log says why", log[-1200:])
    if mode == "expired":
        ok("403" in log, "curl's error shows the store refused the expired URL (403)", log[-600:])
    report = read(d, "install-failed.txt")
    ok(re.search(r"^pgappliance install failed on pga-cloud \(machine [0-9a-f]{32}\): " + why, report) is not None,
       "the failure report is in the store under <appliance>/failed/<launch id>/", report)
    wait_log = read(d, "wait.log")
    ok(read(d, "wait-status").strip() == "1", "pgappliance wait exited 1", wait_log[-1200:])
    ok("the install failed" in wait_log and "install-failed.txt" in wait_log,
       "wait names the install failure", wait_log[-1200:])
    ok(read(d, "instance-state").strip() in ("terminated", "shutting-down"),
       "wait --teardown terminated the instance", read(d, "instance-state"))


def kickstart_checks(d, mode):
    inst = os.path.join(d, "install-share", "out")
    out = os.path.join(d, "share", "out")
    ok(read(inst, "post-status").split("\n")[:2] == ["01 nochroot 0", "02 chroot 0"],
       "both %post sections ran as anaconda runs them and exited 0 (--nochroot, then chrooted)",
       read(inst, "post-status") + read(inst, "kickstart-post.log")[-600:])
    nochroot = read(inst, "pgappliance-ks-nochroot.log")
    chroot = read(inst, "pgappliance-ks.log")
    if mode == "medium":
        ok("not on the install medium" not in nochroot, "the payload came from the medium", nochroot)
    else:
        ok("payload not on the install medium: it is fetched in the chroot from http://10.0.2.100:8333/payload.tar.gz"
           in nochroot, "the --nochroot part found no payload on the medium and said so", nochroot)
        ok("GET /payload.tar.gz" in read(d, "http.log"), "the chrooted part fetched the payload URL",
           read(d, "http.log"))
    ok("payload.tar.gz: OK" in chroot, "sha256sum -c passed in the chroot", chroot)
    built = read(d, "build/payload.tar.gz.sha256").split()[:1]
    ok(built and read(inst, "installed-payload.sha256").split()[:1] == built,
       "the installed system holds the built payload", read(inst, "installed-payload.sha256"))
    ok(read(inst, "daemon-binary").strip() == "present", "the daemon unpacked, executable")
    ok("pgapplianced.service -> " in read(inst, "wants.txt"), "%post enabled pgapplianced.service",
       read(inst, "wants.txt"))
    sshd = read(inst, "sshd_config")
    ok("PermitRootLogin prohibit-password" in sshd and "PermitRootLogin yes" not in sshd,
       "root logs in with keys only (sshd_config rewritten)", sshd)
    ok(read(out, "outcome").strip() == "stopped-after-inventory",
       "on its boot the installed system's daemon started the plan (its first step done)",
       read(out, "outcome") + read(out, "hook.log"))
    ok("payload installed" not in read(out, "hook.log"), "the test hook installed nothing", read(out, "hook.log"))
    show = read(out, "systemctl-show.txt")
    ok("UnitFileState=enabled" in show, "pgapplianced.service enabled at boot",
       " ".join(l for l in show.splitlines() if l.startswith("UnitFileState")))
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "plans", "kickstart.toml"), "rb") as f:
        plan_sha = hashlib.sha256(f.read()).hexdigest()
    ok(state(out).get("plan_sha256") == plan_sha, "the run is of the kickstart's plan (its sha256)",
       str(state(out).get("plan_sha256")))


def dnf_transactions(out):
    """`dnf history info` of every transaction: [(command line, [(action, package)])]."""
    txs = []
    for block in read(out, "dnf-history-info.txt").split("=== transaction ")[1:]:
        m = re.search(r"^Command Line\s*:\s*(.*)$", block, re.M)
        pkgs = re.findall(r"^\s+(Install|Upgrade|Reinstall|Removed|Dep-Install)\s+(\S+)", block, re.M)
        txs.append(((m.group(1).strip() if m else ""), pkgs))
    return txs


def installed(txs, prefix):
    return [p for _, ps in txs for a, p in ps if a in ("Install", "Dep-Install") and p.startswith(prefix)]


def el8_key_checks(out, fingerprint_file, module_disabled=True):
    fpr = read("", fingerprint_file).strip().lower()
    keys = read(out, "rpm-gpg-pubkey.txt")
    # rpm 4.14 names the key "gpg(UID)", rpm 4.18 "UID public key".
    ok(len(fpr) == 40 and re.search(rf"^{fpr[-8:]}-[0-9a-f]+ .*PostgreSQL RPM Repository \(pgappliance test key\)", keys, re.M) is not None,
       f"rpm imported the test PGDG key (gpg-pubkey-{fpr[-8:]})", keys)
    qa = read(out, "rpm-qa.txt")
    line = next((l for l in qa.splitlines() if l.startswith("postgresql15-server ")), "")
    ok(fpr[-16:] in line.lower(), "postgresql15-server is installed, signed with that key", line or qa[-400:])
    pg = [l.split()[0] for l in qa.splitlines() if l.startswith("postgresql15")]
    ok(sorted(pg) == ["postgresql15", "postgresql15-contrib", "postgresql15-libs", "postgresql15-server"],
       "postgresql15, -libs, -server, -contrib installed", str(pg))
    if not module_disabled:
        return
    mods = read(out, "dnf-module-disabled.txt")
    ok(re.search(r"^postgresql\s+10\s+\[d\]\[x\]", mods, re.M) is not None,
       "dnf module list --disabled: the postgresql module (default stream 10) is disabled", mods[-600:])


def el8_dnf_checks(out, fingerprint_file):
    ok(read(out, "outcome").strip() == "stopped-after-postgres",
       "the daemon got through packages, storage and postgres", read(out, "outcome"))
    st = state(out)
    for step in ("inventory", "packages", "storage", "postgres"):
        ok(st.get("steps", {}).get(step, {}).get("finished_at") is not None, f"journal: step {step} finished")
    txs = dnf_transactions(out)
    cmds = [c for c, _ in txs]
    ok(any(c.startswith("install -y http://10.0.2.102/pub/repos/yum/reporpms/EL-8-x86_64/pgdg-redhat-repo-latest.noarch.rpm") for c in cmds)
       and installed(txs, "pgdg-redhat-repo-42.0-38PGDG.noarch"),
       "dnf history: the repository RPM installed from its URL", str(cmds))
    pg_tx = [(c, ps) for c, ps in txs if c.startswith("install -y postgresql15 postgresql15-server postgresql15-contrib")]
    ok(len(pg_tx) == 1 and {p.rsplit("-", 2)[0] for a, p in pg_tx[0][1]} >= {"postgresql15", "postgresql15-libs", "postgresql15-server", "postgresql15-contrib"},
       "dnf history: one transaction installed PGDG's packages (libs as a dependency)", str(pg_tx)[:600])
    repo = read(out, "yum-repos.txt")
    ok("[pgdg15]" in repo and "repo_gpgcheck = 1" in repo and "gpgkey=file:///etc/pki/rpm-gpg/PGDG-RPM-GPG-KEY-RHEL" in repo,
       "the repository RPM wrote pgdg-redhat-all.repo (gpgcheck, repo_gpgcheck, the key's file)", repo[:400])
    el8_key_checks(out, fingerprint_file)
    owners = read(out, "rpm-qf.txt").split()
    ok(len(owners) == 3 and all(o.startswith("postgresql15-server-") for o in owners),
       "postgres, postgresql-15.service and postgresql-15-setup belong to postgresql15-server", str(owners))
    show = dict(l.split("=", 1) for l in read(out, "postgres-show.txt").splitlines() if "=" in l)
    pgdata = re.findall(r"PGDATA=(\S+)", show.get("Environment", ""))
    ok(pgdata[-1:] == ["/var/lib/pgappliance/pgdata/data"],
       "the service's PGDATA (the drop-in's, after the unit's) is on the stripe", show.get("Environment", ""))
    # /lib is /usr/lib on Debian 12 (merged /usr); systemd names the first.
    ok(show.get("FragmentPath") in ("/usr/lib/systemd/system/postgresql-15.service", "/lib/systemd/system/postgresql-15.service")
       and "postgresql-15.service.d/pgappliance.conf" in show.get("DropInPaths", ""),
       "the unit is the package's, PGDATA comes from the appliance's drop-in", str(show))
    ok(show.get("ActiveState") == "active" and show.get("UnitFileState") == "enabled",
       "postgresql-15.service started and enabled", str(show))
    ok(read(out, "data-directory").strip() == "/var/lib/pgappliance/pgdata/data",
       "the running server's data_directory is on the stripe", read(out, "data-directory"))
    ok("Success." in read(out, "setup-initdb.log"),
       "postgresql-15-setup initdb ran initdb (its log)", read(out, "setup-initdb.log")[-400:])
    stripe_checks(out)
    log = daemon_log(out)
    ok(re.search(r"postgresql-15-setup", log + read(out, "command-units.log")) is not None,
       "the daemon ran postgresql-15-setup", log[-600:])


def el8_dnf_mirror_checks(out, fingerprint_file):
    ok(read(out, "outcome").strip() == "stopped-after-packages", "the daemon got through packages", read(out, "outcome"))
    repo = read(out, "yum-repos.txt")
    ok("[pgdg-mirror]" in repo and re.search(r"^baseurl=http://[^/]+/mirror$", repo, re.M) is not None
       and re.search(r"^gpgkey=http://[^/]+/mirror/PGDG-RPM-GPG-KEY-RHEL$", repo, re.M) is not None
       and "gpgcheck=1" in repo,
       "the daemon wrote the mirror's .repo (baseurl, gpgkey, gpgcheck=1)", repo[-500:])
    txs = dnf_transactions(out)
    ok(not installed(txs, "pgdg-redhat-repo"), "no repository RPM in mirror mode", str(txs)[:400])
    ok(any(c.startswith("install -y postgresql15 postgresql15-server postgresql15-contrib") for c, _ in txs),
       "dnf history: PGDG's packages installed from the mirror", str([c for c, _ in txs]))
    el8_key_checks(out, fingerprint_file)


def offline_packages_checks(out):
    """A medium scenario's container: through the packages step, with no network but loopback."""
    ok(read(out, "outcome").strip() == "stopped-after-packages", "the daemon got through packages", read(out, "outcome"))
    dev = read(out, "net-dev.txt")
    links = [l.split(":")[0].strip() for l in dev.splitlines()[2:] if ":" in l]
    ok(links == ["lo"], "the container had no network but loopback", dev)


def el8_dnf_medium_checks(out, fingerprint_file):
    offline_packages_checks(out)
    repo = read(out, "yum-repos.txt")
    ok("[pgappliance-medium]" in repo
       and re.search(r"^baseurl=file:///usr/share/pgappliance/packages$", repo, re.M) is not None
       and re.search(r"^gpgkey=file:///usr/share/pgappliance/packages/keys/PGDG-RPM-GPG-KEY-RHEL$", repo, re.M) is not None
       and re.search(r"^gpgcheck=1$", repo, re.M) is not None,
       "the daemon wrote the medium's .repo (file:// baseurl, its key, gpgcheck=1)", repo[-600:])
    ok("[pgdg-mirror]" not in repo, "the plan's mirror was not configured", repo[-600:])
    txs = dnf_transactions(out)
    med = [(c, ps) for c, ps in txs
           if c.startswith("install -y --disablerepo=* --enablerepo=pgappliance-medium postgresql15 postgresql15-server postgresql15-contrib")]
    ok(len(med) == 1 and {p.rsplit("-", 2)[0] for a, p in med[0][1]}
       >= {"postgresql15", "postgresql15-libs", "postgresql15-server", "postgresql15-contrib", "policycoreutils-python-utils"},
       "dnf history: one transaction from the medium alone installed PGDG's packages and policycoreutils-python-utils",
       str([c for c, _ in txs])[:800])
    ok(not installed(txs, "pgdg-redhat-repo"), "no repository RPM", str(txs)[:400])
    el8_key_checks(out, fingerprint_file, module_disabled=False)


def deb_medium_checks(out, debs_dir):
    """debian12's packages from the payload, with no network but loopback."""
    offline_packages_checks(out)
    sources = read(out, "apt-sources.txt")
    ok(re.search(r"^deb \[trusted=yes\] file:/usr/share/pgappliance/packages \./$", sources, re.M) is not None,
       "the daemon wrote the medium's apt source (file:, the payload's directory)", sources[-600:])
    ok("pgdg.list" not in sources and "10.0.2.102" not in sources,
       "the plan's PGDG repository was not configured", sources[-600:])
    # apt's history of the run: one install, reading the medium's source alone.
    entries = [e for e in read(out, "apt-history.log").split("\n\n") if "Commandline:" in e]
    installs = [e for e in entries if re.search(r"^Install: ", e, re.M)]
    ok(len(installs) == 1
       and "-o Dir::Etc::sourcelist=/etc/apt/sources.list.d/pgappliance-medium.list" in installs[0]
       and "-o Dir::Etc::sourceparts=-" in installs[0],
       "apt's history: one install, from the medium's source alone", "\n".join(entries)[-1200:])
    # The installed versions are the medium's .debs (dpkg-deb reads their control fields).
    want = {}
    for deb in sorted(glob.glob(os.path.join(debs_dir, "*.deb"))):
        fields = subprocess.run(["dpkg-deb", "-f", deb, "Package", "Version"], capture_output=True, text=True).stdout
        f = dict(l.split(": ", 1) for l in fields.splitlines() if ": " in l)
        want[f.get("Package")] = f.get("Version")
    have = {}
    for line in read(out, "dpkg-installed.txt").splitlines():
        parts = line.split()
        if len(parts) == 3:
            have[parts[0]] = (parts[1], parts[2])
    ok(len(want) == 3 and all(have.get(p) == (v, "installed") for p, v in want.items()),
       "every package of the medium is installed, at the medium's version", f"want {want}, have {have}")
    if installs:
        for p in want:
            ok(re.search(rf"^Install: .*\b{re.escape(p)}:amd64 \(", installs[0], re.M) is not None,
               f"{p} was installed by that transaction", installs[0][-600:])
    log = daemon_log(out)
    ok("installing from the packages the payload carries" in log, "the daemon said it installed from the payload", log[-800:])


def el8_dnf_badsig_checks(out):
    ok(read(out, "outcome").strip() == "failed", "the daemon stopped", read(out, "outcome"))
    log = daemon_log(out)
    ok(re.search(r"postgresql15-server-[^ ]+ .*signature", log) is not None,
       "the daemon's error names the package whose signature failed", log[-1500:])
    ok(re.search(r"postgresql15-server-[^ ]+: no installed public key matches its signature", log) is not None,
       "the reason: no installed key matches the package's signature", log[-1500:])
    show = read(out, "systemctl-show.txt")
    ok("ExecMainStatus=3" in show and "NRestarts=0" in show,
       "refused: exit status 3, not restarted",
       " ".join(l for l in show.splitlines() if l.startswith(("ExecMainStatus", "NRestarts"))))
    status_text = read(out, "status-text.log")
    ok(re.search(r"^refused: .*postgresql15-server-\S+: no installed public key", status_text, re.M) is not None,
       "STATUS= says it refused, naming the package", status_text[-400:])
    ok("postgresql15-server" not in read(out, "rpm-qa.txt"), "postgresql15-server is not installed",
       read(out, "rpm-qa.txt"))
    st = state(out)
    ok(st.get("steps", {}).get("storage", {}).get("finished_at") is None, "nothing after the packages step ran")
def manifest_checks(stored, run_id):
    """Every object the stored manifest names is in the store with its size and sha256."""
    manifests = [m for m in glob.glob(os.path.join(stored, "**", "manifest.json"), recursive=True)
                 if run_id and run_id in m]
    if not ok(len(manifests) == 1, "the run's manifest.json is in the store", str(manifests)):
        return
    base = os.path.dirname(manifests[0])
    with open(manifests[0]) as f:
        manifest = json.load(f)
    objects = manifest.get("objects", [])
    bad = []
    for e in objects:
        p = os.path.join(base, e["path"])
        try:
            with open(p, "rb") as f:
                data = f.read()
        except OSError as err:
            bad.append(f"{e['path']}: {err}")
            continue
        if len(data) != e["size"] or hashlib.sha256(data).hexdigest() != e["sha256"]:
            bad.append(f"{e['path']}: {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()[:12]}")
    ok(bool(objects) and not bad, f"the stored manifest verified: {len(objects)} objects, each with its size and sha256",
       str(bad[:5]))
    ok(any(e["path"].endswith("results.json") for e in objects), "the manifest names results.json")


def arm64_checks(out, collected, stored):
    """The aarch64 daemon's run in the arm64 guest, read from what it stored."""
    ok(read(out, "machine").strip() == "aarch64", "the guest is aarch64 (uname -m)", read(out, "machine"))
    results = completed_run(out, 3, collected)
    rd = run_dir(out)
    inv = {}
    if rd is not None:
        try:
            with open(os.path.join(rd, "inventory.json")) as f:
                inv = json.load(f)
        except (OSError, ValueError) as e:
            ok(False, "inventory.json readable", str(e))
    cpu = inv.get("cpu") or {}
    ok(cpu.get("architecture") == "aarch64", "inventory: the architecture is aarch64", str(cpu)[:300])
    ok(cpu.get("cpus") == 2, "inventory: 2 CPUs", str(cpu.get("cpus")))
    ok(str(inv.get("page_size")) == read(out, "page-size").strip(),
       "inventory: the page size is the one the guest's kernel uses (read at run time)",
       f"{inv.get('page_size')} vs getconf {read(out, 'page-size').strip()}")
    lsblk = json.loads(read(out, "lsblk.json") or "{}")
    disks = {d["name"]: d for d in lsblk.get("blockdevices", [])}
    for n in ("vdb", "vdc"):
        kids = [c.get("name") for c in disks.get(n, {}).get("children", []) or []]
        ok("pgappliance-data" in kids, f"{n} carries the data LV", str(disks.get(n)))
    lvs = read(out, "lvs.txt").split()
    ok(lvs[:3] == ["data", "pgappliance", "2"] and len(lvs) > 3 and lvs[3].startswith("64"),
       "LV striped over the 2 virtio disks, 64 KiB stripe", str(lvs))
    mounts = read(out, "findmnt.json")
    ok(re.search(r'"target":\s*"/var/lib/pgappliance/pgdata",\s*"source":\s*"/dev/mapper/pgappliance-data",\s*"fstype":\s*"xfs"', mounts) is not None,
       "XFS on the LV mounted at the mount point", mounts[-600:])
    ok("transparent_hugepage=never" in read(out, "cmdline"), "kernel argument in /proc/cmdline", read(out, "cmdline"))
    ok("[never]" in read(out, "thp"), "THP is never", read(out, "thp"))
    ok('"postgresql"' in read(out, "tuned-active"), "tuned profile postgresql active", read(out, "tuned-active"))
    ok(bool(state(out).get("state", {}).get("os_tuning", {}).get("reboot_from_boot")),
       "journal recorded the kernel-argument reboot")
    ok(boots(out) == 2, "two boots: first, and after the kernel-argument reboot", str(boots(out)))
    if results is None:
        return
    tuning_in_effect_checks(results)
    kinds = sorted(p.get("kind", "pgbench") for p in results["points"])
    tpcc = [p for p in results["points"] if p.get("kind") == "sysbench-tpcc"]
    ok(len(tpcc) == 1 and tpcc[0]["sysbench"]["threads"] == 2 and len(tpcc[0]["sysbench"]["series"]) >= 2,
       "the sysbench-tpcc point parsed, with its per-second series", json.dumps(tpcc)[:600] + str(kinds))
    pgb = [p for p in results["points"] if p.get("kind") != "sysbench-tpcc"]
    ok(len(pgb) == 2 and all((p.get("summary") or {}).get("tps", 0) > 0 for p in pgb),
       "the 2 pgbench points parsed, each with its tps", json.dumps(pgb)[:600])
    log = daemon_log(out)
    ok("sysbench-tpcc dataset ready" in log, "the sysbench-tpcc dataset was prepared", log[-800:])
    ok(log.count("restoring the data directory") == 1,
       "the data directory was restored from the snapshot before the 2nd workload",
       str(log.count("restoring the data directory")))
    manifest_checks(stored, results.get("run_id"))


def main():
    kind, out = sys.argv[1], sys.argv[2]
    print(f"checks for {kind}:")
    if kind == "nspawn":
        results = completed_run(out, 10)
        if results is not None:
            between_rounds_reboot_checks(out, sys.argv[3], results)
            # The client's CPU comes from the command unit's CPUUsageNSec: null where the
            # container's systemd has no CPU accounting (a cgroup v1 host), else measured.
            clients = [p.get("client", "absent") for p in results["points"]]
            ok(results.get("schema_version") == 4
               and all(c is None or (c["cpu_s"] >= 0 and c["wait_s"] is None) for c in clients),
               "every point has its client CPU, measured or null (schema 4)", json.dumps(clients)[:400])
            tpcc = [p for p in results["points"] if p.get("kind") == "sysbench-tpcc"]
            ok(len(tpcc) == 1 and tpcc[0]["sysbench"]["threads"] == 2
               and len(tpcc[0]["sysbench"]["series"]) >= 2,
               "the sysbench-tpcc point ran under systemd with its per-second series",
               json.dumps(tpcc)[:600])
            # Every boot's messages: the sweep ran over three boots.
            log = "\n".join(msg for _, msg in every_boot_journal(out))
            ok("sysbench-tpcc dataset ready" in log, "the sysbench-tpcc dataset was prepared", log[-800:])
            # restore = "each-workload": before a workload's points when another workload ran
            # on the data since: ro and tpcc in round 1, ro again in round 2 (after tpcc),
            # not in round 3 (after ro itself).
            ok(log.count("restoring the data directory") == 3,
               "the data directory was restored from the snapshot before round 1's 2nd and 3rd workloads and round 2's",
               str(log.count("restoring the data directory")))
    elif kind == "vm-boot":
        results = completed_run(out, 4, sys.argv[3])
        volume_checks(out)
        if results is not None:
            tuning_in_effect_checks(results)
        ok(boots(out) == 2, "two boots: first, and after the kernel-argument reboot", str(boots(out)))
    elif kind == "vm-reset":
        at = read("", sys.argv[4]).strip()
        ok(bool(at), "the guest was hard-reset during the sweep", at)
        # Everything vm-boot checks (vm-reset's guest goes through the same first boot and
        # kernel-argument reboot), then the reset's own checks.
        results = completed_run(out, 4, sys.argv[3])
        volume_checks(out)
        if results is not None:
            tuning_in_effect_checks(results)
            # A VM's systemd has CPU accounting (cgroup v2): every point's client CPU is
            # measured from its command unit's CPUUsageNSec (the appliance's path).
            clients = [p.get("client") for p in results["points"]]
            ok(all(isinstance(c, dict) and c.get("cpu_s", 0) > 0 for c in clients),
               "every point's client CPU measured from its unit (CPUUsageNSec)", json.dumps(clients)[:400])
        ok(boots(out) == 3, "three boots: first, kernel arguments, after the reset (no other reboot)", str(boots(out)))
        log = daemon_log(out)
        m = re.search(r'resuming: the previous process stopped during this step step="sweep" item="([^"]+)"', log)
        ok(m is not None, "the daemon resumed from its journal in the sweep", log[-800:])
        if m:
            # The power cut came at the second point's begin (the fault point begin-point@2).
            ok(m.group(1).startswith("p002-"), "the cut came during the second point", m.group(1))
            attempts = state(out).get("points", {}).get(m.group(1), {}).get("attempts")
            ok(attempts == 2, f"the interrupted point {m.group(1)} ran again as attempt 2", str(attempts))
    elif kind == "el8-tools":
        ok(read(out, "outcome").strip() == "stopped-after-storage",
           "the daemon got through inventory and storage", read(out, "outcome"))
        el8_tools_checks(out)
        el8_inventory_checks(out)
        st = state(out)
        for step in ("inventory", "packages", "storage"):
            ok(st.get("steps", {}).get(step, {}).get("finished_at") is not None, f"journal: step {step} finished")
        stripe_checks(out)
        journal = "".join(read(out, os.path.basename(p)) for p in glob.glob(os.path.join(out, "journal-*.txt")))
        for tool in ("lsblk", "wipefs", "pvcreate", "lvcreate", "mkfs_xfs"):
            ok(re.search(rf"pga-cmd-[0-9a-f]+-\d+-{tool}\.service", journal) is not None,
               f"{tool} ran as a transient unit")
    elif kind in ("vm-refuse", "el8-refuse"):
        if kind == "el8-refuse":
            el8_tools_checks(out)
        ok(read(out, "outcome").strip() == "failed", "the daemon stopped", read(out, "outcome"))
        log = daemon_log(out)
        ok(re.search(r"/dev/nvme0n1 holds a ext4 filesystem; refusing to touch it", log) is not None,
           "the error names the drive and what is on it", log[-1500:])
        show = read(out, "systemctl-show.txt")
        ok("ExecMainStatus=3" in show and "NRestarts=0" in show,
           "exit status 3, not restarted", " ".join(l for l in show.splitlines() if l.startswith(("ExecMainStatus", "NRestarts"))))
        ok("refused:" in read(out, "status-text.log"), "STATUS= says it refused")
        ok("pgappliance" not in read(out, "lvs.txt"), "no volume group made", read(out, "lvs.txt"))
        img = sys.argv[3]
        cat = subprocess.run(["debugfs", "-R", "cat /marker.txt", img], capture_output=True, text=True)
        ok("precious data" in cat.stdout, "the marker file on the drive is intact", cat.stderr[-300:])
        fsck = subprocess.run(["e2fsck", "-fn", img], capture_output=True, text=True)
        ok(fsck.returncode == 0, "the filesystem on the drive is clean", fsck.stdout[-300:])
    elif kind == "el8-dnf":
        el8_dnf_checks(out, sys.argv[3])
    elif kind == "el8-dnf-mirror":
        el8_dnf_mirror_checks(out, sys.argv[3])
    elif kind == "el8-dnf-medium":
        el8_dnf_medium_checks(out, sys.argv[3])
    elif kind == "deb-medium":
        deb_medium_checks(out, sys.argv[3])
    elif kind == "el8-dnf-badsig":
        el8_dnf_badsig_checks(out)
    elif kind == "arm64-boot":
        arm64_checks(out, sys.argv[3], sys.argv[4])
    elif kind == "cloud-init":
        cloud_run_checks(out)
    elif kind == "kickstart-post":
        kickstart_checks(out, sys.argv[3])
    elif kind == "cloud-refuse":
        cloud_refuse_checks(out, sys.argv[3])
    else:
        ok(False, f"known scenario {kind}")
    if failures:
        print(f"  {len(failures)} check(s) failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
