#!/usr/bin/env bash
# containerd lab for kgc (issue 4): containerd 1.7 (Debian trixie) and 2.x (Debian sid)
# unpacked from .debs into ${KGC_CACHE:-$HOME/.cache/kgc}/containerd/<suite>/ — never
# installed over the base system. runc and busybox-static come from the base (bookworm).
# Idempotent: every step is skipped when its result is already there.
#
# The trixie/sid package lists live in a private apt state directory under the cache
# (apt -o Dir::...), so the base system's sources, lists and pinning are untouched.
set -euo pipefail

CACHE="${KGC_CACHE:-$HOME/.cache/kgc}/containerd"
mkdir -p "$CACHE"

export DEBIAN_FRONTEND=noninteractive
need_base=()
command -v runc >/dev/null 2>&1 || need_base+=(runc)
# the lab's pause/probe images are built from a STATIC busybox (the dynamic `busybox`
# package would need the host's libc inside the image)
dpkg -s busybox-static >/dev/null 2>&1 || need_base+=(busybox-static)
if [ "${#need_base[@]}" -gt 0 ]; then
  apt-get -qq -o DPkg::Lock::Timeout=900 update >/dev/null
  apt-get -qq -o DPkg::Lock::Timeout=900 install -y --no-install-recommends "${need_base[@]}" >/dev/null
fi

. "$(dirname "$0")/../lib/debian-suite.sh"
for suite in trixie sid; do
  dest="$CACHE/$suite"
  if [ -x "$dest/root/usr/bin/containerd" ] && [ -f "$dest/VERSION" ]; then
    continue
  fi
  suite_download "$suite" "$dest/debs" containerd
  rm -rf "$dest/root"
  mkdir -p "$dest/root"
  for deb in "$dest"/debs/containerd_*.deb; do
    dpkg-deb -x "$deb" "$dest/root"
  done
  "$dest/root/usr/bin/containerd" --version > "$dest/VERSION"
done
echo "containerd lab cache: $(cat "$CACHE"/trixie/VERSION) | $(cat "$CACHE"/sid/VERSION)"
