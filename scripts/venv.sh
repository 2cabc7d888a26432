#!/usr/bin/env bash
# The Python venv in the repo (.venv): the package with its test extra and the lab's Python
# distribution (lab/: pure Python, no tool; product self-tests use its simulators and
# scenario specs as test doubles), reinstalled when a pyproject.toml changes. All
# `make check` needs (no lab tool, no root, no system package); scripts/bootstrap.sh calls
# it too, then adds the labs' artefacts.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=".venv/.kgc-stamp"
want="$(cat pyproject.toml lab/pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    echo "[venv] python3 has no venv/ensurepip: install python3-venv (Debian) first" >&2
    exit 1
  fi
  echo "[venv] python venv (.venv, pip install -e '.[test]' -e ./lab)"
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -e '.[test]' -e ./lab
  echo "$want" > "$stamp"
fi
