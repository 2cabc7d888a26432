#!/usr/bin/env bash
# Build the lab's base node root filesystem (Debian bookworm) into $1 (a directory).
# Reproducible from the repo alone: debootstrap minbase + the packages below, then the
# lab's fixed configuration. Needs root (chroot, mounts). Idempotent: a finished tree
# carries $1/.kgc-base-done and is left alone.
set -euo pipefail
ROOT=${1:?usage: build-base.sh ROOTDIR}
MIRROR=${KGC_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
[ -e "$ROOT/.kgc-base-done" ] && { echo "base tree already built: $ROOT"; exit 0; }
rm -rf "$ROOT"; mkdir -p "$ROOT"
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8
# keep the kernel's postinst from building an initramfs in stage 1; we build it once below
debootstrap --variant=minbase \
  --include=systemd,systemd-sysv,udev,kmod,dbus,openssh-server,pciutils,driverctl,iproute2,initramfs-tools,zstd,ca-certificates \
  "$SUITE" "$ROOT" "$MIRROR" >/dev/null
cleanup() { for m in dev/pts dev proc sys; do mountpoint -q "$ROOT/$m" && umount -l "$ROOT/$m" || true; done; }
trap cleanup EXIT
mount -t proc proc "$ROOT/proc"; mount -t sysfs sys "$ROOT/sys"
mount --bind /dev "$ROOT/dev"; mount --bind /dev/pts "$ROOT/dev/pts"
printf '#!/bin/sh\nexit 101\n' > "$ROOT/usr/sbin/policy-rc.d"; chmod +x "$ROOT/usr/sbin/policy-rc.d"
# initramfs: only what a virtio-blk ext4 root needs (MODULES=dep would look at the HOST)
sed -i 's/^MODULES=.*/MODULES=list/; s/^COMPRESS=.*/COMPRESS=zstd/' "$ROOT/etc/initramfs-tools/initramfs.conf"
printf 'virtio_pci\nvirtio_blk\next4\ncrc32c_generic\n' > "$ROOT/etc/initramfs-tools/modules"
chroot "$ROOT" apt-get install -y -qq --no-install-recommends linux-image-amd64 >/dev/null
# virt-host-validate (libvirt-clients): only for the side-by-side benchmark
chroot "$ROOT" apt-get install -y -qq --no-install-recommends libvirt-clients >/dev/null
rm -f "$ROOT/usr/sbin/policy-rc.d"
# --- fixed lab configuration -------------------------------------------------------------
echo kgc-node > "$ROOT/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 kgc-node\n' > "$ROOT/etc/hosts"
printf '/dev/vda / ext4 rw,noatime,errors=remount-ro 0 1\n' > "$ROOT/etc/fstab"
mkdir -p "$ROOT/etc/systemd/network"
cat > "$ROOT/etc/systemd/network/10-lab.network" <<'NET'
[Match]
Name=en* eth*
[Network]
Address=10.0.2.15/24
Gateway=10.0.2.2
DNS=10.0.2.3
LinkLocalAddressing=no
IPv6AcceptRA=no
NET
chroot "$ROOT" systemctl enable systemd-networkd.service >/dev/null 2>&1
# fast boot: nothing waits for the network; no timers, no getty on tty1, no time sync
for u in systemd-networkd-wait-online.service apt-daily.timer apt-daily-upgrade.timer \
         e2scrub_all.timer e2scrub_reap.service fstrim.timer dpkg-db-backup.timer \
         getty@tty1.service systemd-timesyncd.service man-db.timer logrotate.timer \
         systemd-tmpfiles-clean.timer remote-fs.target systemd-update-utmp.service \
         systemd-update-utmp-runlevel.service console-setup.service keyboard-setup.service; do
  chroot "$ROOT" systemctl mask "$u" >/dev/null 2>&1 || true
done
chroot "$ROOT" systemctl enable serial-getty@ttyS0.service >/dev/null 2>&1 || true
# sshd: root by key only; host keys are generated per VM instance by the lab (pinned)
rm -f "$ROOT"/etc/ssh/ssh_host_*
cat > "$ROOT/etc/ssh/sshd_config.d/kgc-lab.conf" <<'SSH'
PermitRootLogin prohibit-password
PasswordAuthentication no
UseDNS no
HostKey /etc/ssh/ssh_host_ed25519_key
SSH
mkdir -p "$ROOT/root/.ssh"; chmod 700 "$ROOT/root/.ssh"
# boot entry: the lab's "boot loader" reads this (BLS type 1) and boots the image's own
# kernel + initramfs with these options
KVER=$(ls "$ROOT/lib/modules" | sort -V | tail -1)
mkdir -p "$ROOT/boot/loader/entries"
cat > "$ROOT/boot/loader/entries/debian.conf" <<ENT
title Debian GNU/Linux (kgc lab node)
linux /boot/vmlinuz-$KVER
initrd /boot/initrd.img-$KVER
options root=/dev/vda rw console=ttyS0,115200 quiet no_timer_check random.trust_cpu=on intel_iommu=on iommu=pt systemd.show_status=0 net.ifnames=0
ENT
chroot "$ROOT" apt-get clean
rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/*.bin "$ROOT"/usr/share/doc/* "$ROOT"/usr/share/man/* "$ROOT"/usr/share/locale/*
: > "$ROOT/etc/machine-id"
echo "$KVER" > "$ROOT/.kgc-base-done"
echo "base tree built: $ROOT (kernel $KVER)"
