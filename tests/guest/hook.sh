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
# A persistent journal: the daemon's messages of every boot stay, each with its boot id (a
# reboot between rounds is checked from them). The guest's root is a throwaway overlay.
mkdir -p /var/log/journal && journalctl --flush > /dev/null 2>&1
# Where this boot's time went, by the guest's own clock (less sensitive to the host's load
# than the harness's): written once the boot has finished, beside the hook's work.
( systemctl is-system-running --wait > /dev/null 2>&1
  { systemd-analyze time; systemd-analyze critical-chain --no-pager; systemd-analyze blame --no-pager | head -30; } \
      > "$out/boot-time-$(cut -c1-8 /proc/sys/kernel/random/boot_id).txt" 2>&1 ) &
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
# el8-dnf: the guest's package manager is dnf 4 and rpm (Debian's builds), configured as
# Rocky 8's are, with the distribution's repository from tests/guest/el8-repo:
# rpm's database at /var/lib/rpm (Debian's rpm defaults to ~/.rpmdb), dnf's platform
# el8 (Rocky takes it from os-release's PLATFORM_ID), and what Rocky's minimal install
# has (rocky-release, bash, shadow-utils, lvm2, xfsprogs) installed before the daemon starts.
if [ -f "$share/el8-dnf" ] && [ ! -x /usr/bin/pgapplianced ]; then
    # The file names where the repositories are: 10.0.2.102 from qemu, the host's loopback
    # from nspawn (which shares the host's network).
    repos=$(cat "$share/el8-dnf")
    mkdir -p /etc/rpm /etc/dnf /etc/yum.repos.d
    echo '%_dbpath /var/lib/rpm' > /etc/rpm/macros.dbpath
    printf '[main]\ngpgcheck=1\ninstallonly_limit=3\nclean_requirements_on_remove=True\nbest=True\nskip_if_unavailable=False\nmodule_platform_id=platform:el8\n' \
        > /etc/dnf/dnf.conf
    printf '[appstream]\nname=Rocky Linux 8.6 (the el8-dnf stand-in)\nbaseurl=%s/os\nenabled=1\ngpgcheck=0\n' \
        "$repos" > /etc/yum.repos.d/rocky-os.repo
    dnf -y --releasever=8 install rocky-release bash shadow-utils lvm2 xfsprogs > "$out/el8-base-install.log" 2>&1 \
        || { say "el8-dnf: the base packages did not install"; echo base-install-failed > "$out/outcome"; systemctl poweroff; exit 1; }
fi
# deb-medium: the packages the payload carries are purged first (apt-get purge needs no
# network), so the daemon's packages step has them to install, from the payload alone.
if [ -f "$share/deb-purge" ] && [ ! -x /usr/bin/pgapplianced ]; then
    # shellcheck disable=SC2046
    DEBIAN_FRONTEND=noninteractive apt-get -y purge $(cat "$share/deb-purge") > "$out/deb-purge.log" 2>&1 \
        || { say "deb-medium: the purge failed"; echo purge-failed > "$out/outcome"; systemctl poweroff; exit 1; }
    : > /var/log/apt/history.log
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
    # vm-reset: the harness names the moment of its power cut as a fault point of the
    # daemon (a debug build's PGAPPLIANCE_FAULT, e.g. begin-point@2=stop): the daemon stops
    # itself there and the loop below tells the harness. The drop-in lasts until then.
    if [ -f "$share/fault" ]; then
        mkdir -p /etc/systemd/system/pgapplianced.service.d
        printf '[Service]\nEnvironment=PGAPPLIANCE_FAULT=%s\n' "$(cat "$share/fault")" \
            > /etc/systemd/system/pgapplianced.service.d/fault.conf
    fi
    systemctl daemon-reload
    systemctl enable pgapplianced.service >> "$out/hook.log" 2>&1
    systemctl start --no-block pgapplianced.service
    say "payload installed, pgapplianced started"
fi

last=""
outcome=timeout
# The share's hook-timeout (seconds), when the harness wrote one, overrides the default:
# the arm64 guest under TCG needs longer per boot.
[ -f "$share/hook-timeout" ] && PGA_HOOK_TIMEOUT=$(cat "$share/hook-timeout")
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
    # The daemon stopped itself at the harness's fault point: the drop-in goes (the next
    # boot runs unarmed), then the harness is told and cuts the power; nothing else here.
    pid=$(systemctl show -p MainPID --value pgapplianced.service)
    if [ -f /etc/systemd/system/pgapplianced.service.d/fault.conf ] && [ "${pid:-0}" != 0 ] \
        && [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" = T ]; then
        rm -f /etc/systemd/system/pgapplianced.service.d/fault.conf
        sync
        sed -n 's|^points: \([0-9]*/[0-9]*\).*|\1|p' "$out/status" > "$out/fault-reached.tmp"
        mv "$out/fault-reached.tmp" "$out/fault-reached"
        say "the daemon stopped at its fault point: waiting for the power cut"
        while :; do sleep 60; done
    fi
    if [ -n "$stop_after" ] && grep -Eq "^  $stop_after +done" "$out/status" 2>/dev/null; then
        systemctl stop pgapplianced.service
        outcome=stopped-after-$stop_after; break
    fi
    state=$(systemctl show -p ActiveState --value pgapplianced.service)
    if [ "$state" = failed ]; then outcome=failed; break; fi
    sleep 1
done
# The daemon's last STATUS= may have come between this loop's reading of it and of the
# unit's state (a refusal is sent just before the exit, after the failure bundle's upload
# status): read it once more now that the unit has stopped.
text=$(systemctl show -p StatusText --value pgapplianced.service)
if [ -n "$text" ] && [ "$text" != "$last" ]; then echo "$text" >> "$out/status-text.log"; fi
say "outcome: $outcome"
systemctl status --no-pager pgapplianced.service > "$out/systemctl-status.txt" 2>&1
systemctl show pgapplianced.service > "$out/systemctl-show.txt" 2>&1
journalctl --no-pager -b -u pgapplianced.service > "$out/daemon-$(date +%s).log" 2>&1
journalctl --no-pager -u pgapplianced.service -o json > "$out/daemon-every-boot.json" 2>&1
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
if [ -f "$share/el8-dnf" ]; then
    dnf history > "$out/dnf-history.txt" 2>&1
    for id in $(dnf history 2>/dev/null | awk '$1 ~ /^[0-9]+$/ { print $1 }'); do
        echo "=== transaction $id"; dnf history info "$id"
    done > "$out/dnf-history-info.txt" 2>&1
    dnf module list --disabled > "$out/dnf-module-disabled.txt" 2>&1
    rpm -q gpg-pubkey --qf '%{VERSION}-%{RELEASE} %{SUMMARY}\n' > "$out/rpm-gpg-pubkey.txt" 2>&1
    # The header's signature (rpm 4.18's rpmsign adds only that one; 4.14's adds it too).
    rpm -qa --qf '%{NAME} %{VERSION}-%{RELEASE} %{RSAHEADER:pgpsig}\n' | sort > "$out/rpm-qa.txt" 2>&1
    cat /etc/yum.repos.d/*.repo > "$out/yum-repos.txt" 2>&1
    cat /proc/net/dev > "$out/net-dev.txt" 2>&1
    systemctl show -p Environment,ActiveState,UnitFileState,FragmentPath,DropInPaths postgresql-15.service \
        > "$out/postgres-show.txt" 2>&1
    cat /var/lib/pgsql/15/initdb.log > "$out/setup-initdb.log" 2>&1
    rpm -qf /usr/pgsql-15/bin/postgres /usr/lib/systemd/system/postgresql-15.service \
        /usr/pgsql-15/bin/postgresql-15-setup > "$out/rpm-qf.txt" 2>&1
fi
if [ -f "$share/deb-purge" ]; then
    cat /proc/net/dev > "$out/net-dev.txt" 2>&1
    for f in /etc/apt/sources.list.d/*.list; do echo "=== $f"; cat "$f"; done > "$out/apt-sources.txt" 2>&1
    cp /var/log/apt/history.log "$out/apt-history.log" 2>/dev/null
    # shellcheck disable=SC2046
    dpkg-query -W -f '${Package} ${Version} ${db:Status-Status}\n' $(cat "$share/deb-purge") \
        > "$out/dpkg-installed.txt" 2>&1
fi
echo "$outcome" > "$out/outcome"
sync
# The last thing a scenario's guest does, and everything the host checks is on the share
# (synced; the root disk is thrown away, the installer's second disk is unmounted above):
# off at once, without stopping each unit and unmounting (under TCG that took 10 to 20 s).
systemctl poweroff --force --force
