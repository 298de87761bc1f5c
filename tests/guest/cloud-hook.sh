#!/bin/sh
# Runs inside the guest of the cloud scenarios (pga-hook.service, from the host's share at
# /mnt/pga, as hook.sh there). It installs nothing: cloud-init does, from the NoCloud seed's
# user-data. It stands in for the cloud around the instance (the object store at the
# address the presigned URLs name, the metadata service at 169.254.169.254, both forwarded
# to qemu's guestfwd), waits for cloud-init to finish, follows the daemon when cloud-init
# started it, then copies the evidence to the share and powers the guest off.
set -u
share=/mnt/pga
out=$share/out
mkdir -p "$out"
say() { echo "pga-cloud-hook: $*" > /dev/console 2>/dev/null || true; echo "$*" >> "$out/hook.log"; }
# shellcheck disable=SC1091
. "$share/cloud.env"
cat /proc/sys/kernel/random/boot_id >> "$out/boots"
# Where this boot's time went, by the guest's own clock (less sensitive to the host's load
# than the harness's): written once the boot has finished, beside the hook's work.
( systemctl is-system-running --wait > /dev/null 2>&1
  { systemd-analyze time; systemd-analyze critical-chain --no-pager; systemd-analyze blame --no-pager | head -30; } \
      > "$out/boot-time-$(cut -c1-8 /proc/sys/kernel/random/boot_id).txt" 2>&1 ) &

socat "TCP-LISTEN:$STORE_PORT,bind=127.0.0.1,fork,reuseaddr" TCP:10.0.2.100:8333 &
ip addr add 169.254.169.254/32 dev lo
socat TCP-LISTEN:80,bind=169.254.169.254,fork,reuseaddr TCP:10.0.2.101:80 &
say "store forwarded at 127.0.0.1:$STORE_PORT, metadata at 169.254.169.254"

# cloud-init has finished when its last stage has: `cloud-init status --wait` alone returns
# between two stages when an earlier one reported an error.
deadline=$(( $(date +%s) + ${PGA_HOOK_TIMEOUT:-1500} ))
while [ "$(date +%s)" -lt "$deadline" ] && [ ! -e /var/lib/cloud/instance/boot-finished ] \
    && ! systemctl is-failed -q cloud-final.service; do
    sleep 2
done
cloud-init status --wait > /dev/null 2>&1
cloud-init status --long > "$out/cloud-init-status.txt" 2>&1
say "cloud-init: $(sed -n 's/^status: //p' "$out/cloud-init-status.txt")"

outcome=not-started
if [ -x /usr/bin/pgapplianced ] && systemctl is-enabled -q pgapplianced.service 2>/dev/null; then
    outcome=timeout
    deadline=$(( $(date +%s) + ${PGA_HOOK_TIMEOUT:-1500} ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        /usr/bin/pgapplianced status --workdir /var/lib/pgappliance > "$out/status.tmp" 2>&1 \
            && mv "$out/status.tmp" "$out/status"
        if [ -e /var/lib/pgappliance/done ]; then outcome=done; break; fi
        state=$(systemctl show -p ActiveState --value pgapplianced.service)
        if [ "$state" = failed ]; then outcome=failed; break; fi
        sleep 2
    done
fi
say "outcome: $outcome"
cp /var/log/cloud-init.log /var/log/cloud-init-output.log "$out/" 2>/dev/null
systemctl show -p LoadState,ActiveState,UnitFileState pgapplianced.service > "$out/daemon-unit.txt" 2>&1
if [ -e /usr/bin/pgapplianced ]; then echo present; else echo absent; fi > "$out/daemon-binary"
journalctl --no-pager -b -u pgapplianced.service > "$out/daemon.log" 2>&1
journalctl --no-pager -b > "$out/journal.txt" 2>&1
ls -l /etc/pgappliance/ > "$out/etc-pgappliance.txt" 2>&1
rm -rf "$out/var-lib"; mkdir -p "$out/var-lib"
cp -a /var/lib/pgappliance/state.json /var/lib/pgappliance/runs "$out/var-lib/" 2>/dev/null
echo "$outcome" > "$out/outcome"
sync
# The last thing a scenario's guest does, and everything the host checks is on the share
# (synced; the root disk is thrown away, the installer's second disk is unmounted above):
# off at once, without stopping each unit and unmounting (under TCG that took 10 to 20 s).
systemctl poweroff --force --force
