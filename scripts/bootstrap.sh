#!/usr/bin/env bash
# Install everything the suite and its self-tests need, on a clean Debian bookworm machine
# (root). Idempotent: a second run only checks. Heavy lab artefacts are cached under
# ${KGC_CACHE:-$HOME/.cache/kgc} and reused; scripts/bootstrap.d/*.sh add each lab's needs.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
export KGC_CACHE="${KGC_CACHE:-$HOME/.cache/kgc}"
mkdir -p "$KGC_CACHE"
APT=(apt-get -o DPkg::Lock::Timeout=900 -o Acquire::Retries=3 -qq)
log() { printf '[bootstrap] %s\n' "$*"; }

# -- system packages for the core -------------------------------------------------------
need=()
command -v chromium >/dev/null || need+=(chromium)          # the HTML report test
command -v strace >/dev/null || need+=(strace)              # process-count self-test
command -v node >/dev/null || need+=(nodejs npm)
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  log "apt: ${need[*]}"
  "${APT[@]}" update
  "${APT[@]}" install -y --no-install-recommends "${need[@]}" >/dev/null
fi

# -- Python: a venv in the repo, reinstalled when a pyproject.toml changes -----------------
stamp=".venv/.kgc-stamp"
want="$(cat pyproject.toml lab/pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "python venv"
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -e '.[test]' -e lab
  echo "$want" > "$stamp"
fi

# -- Allure 3 (npm, pinned by package-lock.json) -----------------------------------------
lockstamp="node_modules/.kgc-stamp"
lwant="$(sha256sum package-lock.json | cut -c1-16)"
if [ ! -x node_modules/.bin/allure ] || [ "$(cat "$lockstamp" 2>/dev/null)" != "$lwant" ]; then
  log "npm ci (allure)"
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
  echo "$lwant" > "$lockstamp"
fi

# -- each lab's own needs ---------------------------------------------------------------
for f in scripts/bootstrap.d/*.sh; do
  [ -e "$f" ] || continue
  log "$f"
  bash "$f"
done
log "ready"
