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

# the Debian mirror this machine already uses (the base system's own apt sources)
mirror="${KGC_DEBIAN_MIRROR:-$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)[[:space:]]*$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)}"
[ -n "$mirror" ] || mirror="$(awk '$1 == "deb" && $2 ~ /\/debian$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)"
[ -n "$mirror" ] || { echo "20-containerd: cannot find the Debian mirror in /etc/apt sources" >&2; exit 1; }
for suite in trixie sid; do
  dest="$CACHE/$suite"
  if [ -x "$dest/root/usr/bin/containerd" ] && [ -f "$dest/VERSION" ]; then
    continue
  fi
  apt_dir="$CACHE/apt-$suite"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$apt_dir/etc/preferences.d" "$dest/debs"
  printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
    "$mirror" "$suite" > "$apt_dir/etc/sources.list"
  : > "$apt_dir/etc/preferences"
  opts=(-o "Dir::Etc::SourceList=$apt_dir/etc/sources.list"
        -o "Dir::Etc::SourceParts=/dev/null"
        -o "Dir::Etc::Preferences=$apt_dir/etc/preferences"
        -o "Dir::Etc::PreferencesParts=$apt_dir/etc/preferences.d"
        -o "Dir::State::Lists=$apt_dir/lists"
        -o "Dir::Cache::Archives=$apt_dir/archives"
        -o "Dir::State::status=/dev/null"
        -o "APT::Get::List-Cleanup=0"
        -o "Acquire::Languages=none"
        -o "Debug::NoLocking=1"
        -o "APT::Sandbox::User=root")
  apt-get -qq "${opts[@]}" update >/dev/null
  (cd "$dest/debs" && apt-get -qq "${opts[@]}" download containerd >/dev/null)
  rm -rf "$dest/root"
  mkdir -p "$dest/root"
  for deb in "$dest"/debs/containerd_*.deb; do
    dpkg-deb -x "$deb" "$dest/root"
  done
  "$dest/root/usr/bin/containerd" --version > "$dest/VERSION"
  rm -rf "$apt_dir/lists"
done
echo "containerd lab cache: $(cat "$CACHE"/trixie/VERSION) | $(cat "$CACHE"/sid/VERSION)"
