#!/usr/bin/env bash
# Node-image lab (issue 3): QEMU TCG, debootstrap, initramfs tooling, SSH client.
set -euo pipefail
pkgs=(qemu-system-x86 qemu-utils debootstrap cpio openssh-client e2fsprogs initramfs-tools-core zstd fakeroot)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# virt-host-validate (benchmark comparison only; optional)
if ! command -v virt-host-validate >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libvirt-clients >/dev/null || true
fi
