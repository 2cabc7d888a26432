#!/usr/bin/env bash
# Node-image lab (kgc_lab.node, issue 3): QEMU (TCG), qemu-img, debootstrap, mkfs.ext4 -d,
# SSH client. The node image itself (kernel, initramfs, driverctl, libvirt-clients for the
# virt-host-validate comparison) is built from Debian's archive by `kgc lab node build` into
# ${KGC_CACHE:-~/.cache/kgc}/node/ (needs root; ~2.5 min once, then cached).
set -euo pipefail
pkgs=(qemu-system-x86 qemu-utils debootstrap cpio openssh-client e2fsprogs ovmf mtools)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
