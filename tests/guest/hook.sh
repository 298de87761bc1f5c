#!/bin/sh
# Runs inside the guest on every boot (pga-hook.service, from the host's share at /mnt/pga).
# First boot: installs the appliance from the payload the way the kickstart's %post does
# (sha256 check, unpack, enable) and starts it without blocking. Every boot: reports the
# daemon's progress to the share until the run is done or the daemon has failed for good,
# then copies the evidence to the share and powers the guest off.
set -u
share=/mnt/pga
out=$share/out
mkdir -p "$out"
say() { echo "pga-hook: $*" > /dev/console 2>/dev/null || true; echo "$*" >> "$out/hook.log"; }

echo "$(cat /proc/sys/kernel/random/boot_id)" >> "$out/boots"
# The object store on the host is reachable through qemu's guestfwd once the NIC has its
# user-networking address (restrict=on: nothing else is).
if [ -f "$share/guest-address" ]; then
    nic=$(ip -o link show | awk -F': ' '$2 != "lo" { print $2; exit }')
    ip link set "$nic" up && ip addr add "$(cat "$share/guest-address")" dev "$nic" 2>/dev/null
fi
# el8-tools: Rocky 8's lsblk and wipefs (util-linux 2.32.1, built on the host) replace the
# guest's own, so every lsblk/wipefs the daemon runs is the old one; the hook keeps
# Debian's under another name for its own evidence. The guest's root is a throwaway overlay.
lsblk=lsblk
if [ -d "$share/el8-tools" ]; then
    lsblk=/usr/local/sbin/lsblk.debian
    for tool in lsblk wipefs; do
        for dir in /usr/bin /usr/sbin /bin /sbin; do
            if [ -x "$dir/$tool" ] && [ ! -L "$dir/$tool" ] && ! "$dir/$tool" --version | grep -q 2.32.1; then
                mv "$dir/$tool" "/usr/local/sbin/$tool.debian"
            fi
        done
        install -m 0755 "$share/el8-tools/$tool" "/usr/local/sbin/$tool"
    done
    lsblk --version > "$out/el8-lsblk-version" 2>&1
    wipefs --version > "$out/el8-wipefs-version" 2>&1
    [ -e "$out/lsblk-2.32.1-before.json" ] || /usr/local/sbin/lsblk -J -b -p \
        -o NAME,SIZE,TYPE,ROTA,MODEL,SERIAL,FSTYPE,MOUNTPOINT,PKNAME,TRAN \
        > "$out/lsblk-2.32.1-before.json" 2> "$out/lsblk-2.32.1-before.err"
fi
stop_after=$(cat "$share/stop-after" 2>/dev/null || true)
if [ ! -x /usr/bin/pgapplianced ]; then
    cd "$share/payload" || exit 1
    if ! sha256sum -c payload.tar.gz.sha256 >> "$out/hook.log" 2>&1; then
        say "payload checksum mismatch"; echo payload-bad > "$out/outcome"; systemctl poweroff; exit 1
    fi
    tar -xzf payload.tar.gz -C / --no-same-owner
    # Credentials never travel in the payload: the operator puts them in this root-only
    # file, which the unit reads with EnvironmentFile=.
    if [ -f "$share/credentials.env" ]; then
        install -D -m 0600 "$share/credentials.env" /etc/pgappliance/credentials.env
    fi
    systemctl daemon-reload
    systemctl enable pgapplianced.service >> "$out/hook.log" 2>&1
    systemctl start --no-block pgapplianced.service
    say "payload installed, pgapplianced started"
fi

last=""
outcome=timeout
deadline=$(( $(date +%s) + ${PGA_HOOK_TIMEOUT:-1500} ))
while [ "$(date +%s)" -lt "$deadline" ]; do
    /usr/bin/pgapplianced status --workdir /var/lib/pgappliance > "$out/status.tmp" 2>&1 \
        && mv "$out/status.tmp" "$out/status"
    text=$(systemctl show -p StatusText --value pgapplianced.service)
    if [ -n "$text" ] && [ "$text" != "$last" ]; then
        echo "$text" >> "$out/status-text.log"
        last=$text
        case "$text" in
            sweep*) [ -e "$out/systemctl-status-sweep.txt" ] || \
                systemctl status --no-pager pgapplianced.service > "$out/systemctl-status-sweep.txt" 2>&1 ;;
        esac
    fi
    if [ -e /var/lib/pgappliance/done ]; then outcome=done; break; fi
    if [ -n "$stop_after" ] && grep -Eq "^  $stop_after +done" "$out/status" 2>/dev/null; then
        systemctl stop pgapplianced.service
        outcome=stopped-after-$stop_after; break
    fi
    state=$(systemctl show -p ActiveState --value pgapplianced.service)
    if [ "$state" = failed ]; then outcome=failed; break; fi
    sleep 1
done
say "outcome: $outcome"
systemctl status --no-pager pgapplianced.service > "$out/systemctl-status.txt" 2>&1
systemctl show pgapplianced.service > "$out/systemctl-show.txt" 2>&1
journalctl --no-pager -b -u pgapplianced.service > "$out/daemon-$(date +%s).log" 2>&1
journalctl --no-pager -b -u 'pga-cmd-*' -o cat > "$out/command-units.log" 2>&1
journalctl --no-pager -b > "$out/journal-$(date +%s).txt" 2>&1
rm -rf "$out/var-lib"; mkdir -p "$out/var-lib"
cp -a /var/lib/pgappliance/state.json /var/lib/pgappliance/runs /var/lib/pgappliance/store \
    "$out/var-lib/" 2>/dev/null
$lsblk -J -b -o NAME,PATH,TYPE,FSTYPE,MOUNTPOINT > "$out/lsblk.json" 2>&1
if [ -d "$share/el8-tools" ]; then
    /usr/local/sbin/lsblk -J -b -p -o NAME,SIZE,TYPE,ROTA,MODEL,SERIAL,FSTYPE,MOUNTPOINT,PKNAME,TRAN \
        > "$out/lsblk-2.32.1-after.json" 2>&1
fi
lvs --noheadings -o lv_name,vg_name,stripes,stripe_size --units k > "$out/lvs.txt" 2>&1
findmnt -J > "$out/findmnt.json" 2>&1
cat /proc/cmdline > "$out/cmdline"
getconf PAGESIZE > "$out/page-size" 2>&1
uname -m > "$out/machine" 2>&1
cat /proc/cpuinfo > "$out/cpuinfo" 2>&1
lscpu -J > "$out/lscpu.json" 2>&1
cat /sys/kernel/mm/transparent_hugepage/enabled > "$out/thp" 2>&1
busctl call com.redhat.tuned /Tuned com.redhat.tuned.control active_profile > "$out/tuned-active" 2>&1
systemctl cat postgresql-15.service > "$out/postgres-unit.txt" 2>&1
systemctl show -p ActiveState,UnitFileState postgresql-15.service > "$out/postgres-state.txt" 2>&1
su postgres -c "psql -XAtc 'SHOW data_directory'" > "$out/data-directory" 2>&1
echo "$outcome" > "$out/outcome"
sync
systemctl poweroff
