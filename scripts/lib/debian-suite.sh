# shellcheck shell=bash
# Download packages from another Debian suite (trixie, sid) with apt-get, through a private
# apt state directory, so the base system's sources, lists and pinning stay untouched and
# nothing is installed. Source this file, then:
#   suite_download SUITE DEST_DIR PACKAGE...    # .debs land in DEST_DIR
# The mirror is the one this machine's own apt sources use (override: KGC_DEBIAN_MIRROR).

debian_mirror() {
  local m="${KGC_DEBIAN_MIRROR:-}"
  [ -n "$m" ] || m="$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)[[:space:]]*$/\1/p' \
    /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)"
  [ -n "$m" ] || m="$(awk '$1 == "deb" && $2 ~ /\/debian$/ {print $2; exit}' \
    /etc/apt/sources.list 2>/dev/null)"
  [ -n "$m" ] || { echo "cannot find the Debian mirror in /etc/apt sources" >&2; return 1; }
  printf '%s\n' "$m"
}

suite_download() {
  local suite="$1" dest="$2"; shift 2
  local mirror; mirror="$(debian_mirror)" || return 1
  local apt_dir="${KGC_CACHE:-$HOME/.cache/kgc}/apt-$suite"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$apt_dir/etc/preferences.d" "$dest"
  printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
    "$mirror" "$suite" > "$apt_dir/etc/sources.list"
  : > "$apt_dir/etc/preferences"
  local opts=(-o "Dir::Etc::SourceList=$apt_dir/etc/sources.list"
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
  (cd "$dest" && apt-get -qq "${opts[@]}" download "$@" >/dev/null)
}
