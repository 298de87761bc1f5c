#!/bin/sh
# The installer's side of the kickstart-post scenario (pga-hook.service of the first of its
# two guests, from the host's share at /mnt/pga): the guest's second disk (/dev/vdb, a copy
# of the guest root filesystem) is the freshly installed system. Puts there what a Rocky 8
# install has and the Debian image lacks (sshd_config), runs the %post sections of the
# share's ks.cfg with kickstart-post (the share's medium.iso loop-mounted at
# /run/install/repo, the disk at /mnt/sysimage), copies what the installed system then
# holds to the share and powers off. The second guest boots that disk.
set -u
share=/mnt/pga
out=$share/out
mkdir -p "$out"
say() { echo "pga-ks-hook: $*" > /dev/console 2>/dev/null || true; echo "$*" >> "$out/hook.log"; }
# Where this boot's time went, by the guest's own clock (less sensitive to the host's load
# than the harness's): written once the boot has finished, beside the hook's work.
( systemctl is-system-running --wait > /dev/null 2>&1
  { systemd-analyze time; systemd-analyze critical-chain --no-pager; systemd-analyze blame --no-pager | head -30; } \
      > "$out/boot-time-$(cut -c1-8 /proc/sys/kernel/random/boot_id).txt" 2>&1 ) &
if [ -f "$share/guest-address" ]; then
    nic=$(ip -o link show | awk -F': ' '$2 != "lo" { print $2; exit }')
    ip link set "$nic" up && ip addr add "$(cat "$share/guest-address")" dev "$nic"
fi
sys=/var/tmp/sysimage
mkdir -p "$sys"
if mount /dev/vdb "$sys"; then
    # The installed Rocky 8 system's sshd_config, whose root login line the %post rewrites.
    mkdir -p "$sys/etc/ssh"
    printf '#Port 22\nPermitRootLogin yes\nPasswordAuthentication yes\n' > "$sys/etc/ssh/sshd_config"
    # The medium on the guest's own disk (a loop device over a 9p file is not dependable),
    # as anaconda has an ISO it loop-mounts on a local drive.
    modprobe loop
    cp "$share/medium.iso" /var/tmp/medium.iso
    bash "$share/kickstart-post" "$share/ks.cfg" /var/tmp/medium.iso "$sys" "$out/post-status" \
        > "$out/kickstart-post.log" 2>&1
    say "kickstart-post exited $?: $(tr '\n' ';' < "$out/post-status")"
    cp "$sys/root/pgappliance-ks-nochroot.log" "$sys/root/pgappliance-ks.log" "$out/" 2>> "$out/hook.log"
    ls -l "$sys/etc/systemd/system/multi-user.target.wants/" > "$out/wants.txt" 2>&1
    cp "$sys/etc/ssh/sshd_config" "$out/sshd_config"
    sha256sum "$sys/var/lib/pgappliance/install/payload.tar.gz" > "$out/installed-payload.sha256" 2>&1
    if [ -x "$sys/usr/bin/pgapplianced" ]; then echo present; else echo absent; fi > "$out/daemon-binary"
    umount "$sys"
else
    say "the installed system's disk /dev/vdb did not mount"
fi
echo installed > "$out/outcome"
sync
# The last thing a scenario's guest does, and everything the host checks is on the share
# (synced; the root disk is thrown away, the installer's second disk is unmounted above):
# off at once, without stopping each unit and unmounting (under TCG that took 10 to 20 s).
systemctl poweroff --force --force
