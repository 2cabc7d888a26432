#!/usr/bin/env bash
# Sizing layer's real-guest proof (tests/sizing/test_real_guest.py, lab/kgc_lab/guests.py):
# a guest kernel and a statically linked busybox. Uses the node lab's cached kernel when it
# has been built, else downloads Debian's linux-image (apt-get download, no install) and
# busybox-static into ${KGC_CACHE:-~/.cache/kgc}/sizing. QEMU comes from 10-node-lab.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python -m kgc_lab.guests assets
