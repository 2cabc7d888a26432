#!/usr/bin/env bash
# The self-tests, as `make test` runs them: two pytest sessions side by side.
#
#   vm       the suites that boot TCG guests (node lab, node images, the cluster lab's real
#            node): CPU-bound emulation, one session, serial
#   rest     everything else: the fast self-tests and the cluster / containerd labs, whose
#            tests mostly wait on real clocks (HPA syncs, sandbox delays, pod starts), and
#            the SIGKILL cleanup tests (moved here to balance the two)
#
# Run one after the other they took ≈ 75 min on this 2-core machine; side by side 54 min
# (vm 53, rest 41, before the SIGKILL tests moved over; benchmarks/README.md). Each session has its own short
# --basetemp (UNIX socket paths under it stay < 108 bytes) and its own log; both logs are
# printed, the vm one at the end. Any non-zero exit — a failure, an error, or pytest's 5
# ("no tests ran") — fails the run.
#
#   scripts/run-tests.sh [PYTEST_ARGS...]      (extra args go to both sessions)
#   KGC_TEST_SERIAL=1 scripts/run-tests.sh     one session, as before
set -uo pipefail
cd "$(dirname "$0")/.."

PY=.venv/bin/pytest
COMMON=(-p no:cacheprovider -q -rfEs --durations=15)
VM=(tests/node tests/image tests/realnode)

if [ -n "${KGC_TEST_SERIAL:-}" ]; then
  exec "$PY" tests "${COMMON[@]}" "$@"
fi

logs=$(mktemp -d /tmp/kgc-tests.XXXXXX)
base_vm=$(mktemp -d /tmp/kgc-t-vm.XXXXXX)
base_rest=$(mktemp -d /tmp/kgc-t-rest.XXXXXX)
ignore=()
for p in "${VM[@]}"; do ignore+=(--ignore "$p"); done

echo "[tests] session vm: ${VM[*]} (log $logs/vm.log)"
"$PY" "${VM[@]}" "${COMMON[@]}" --basetemp "$base_vm" "$@" >"$logs/vm.log" 2>&1 &
vm_pid=$!
# if this script is stopped, stop the vm session too (its labs clean up on SIGTERM)
trap 'kill -TERM "$vm_pid" 2>/dev/null; wait "$vm_pid"; exit 143' INT TERM

echo "[tests] session rest: tests minus the vm suites"
"$PY" tests "${ignore[@]}" "${COMMON[@]}" --basetemp "$base_rest" "$@"
rest_rc=$?
echo "[tests] session rest: exit $rest_rc; waiting for session vm"
wait "$vm_pid"
vm_rc=$?
trap - INT TERM
echo "=============================== session vm output ==============================="
cat "$logs/vm.log"
echo "[tests] session rest: exit $rest_rc, session vm: exit $vm_rc"
rm -rf "$logs"
rm -rf "$base_vm" "$base_rest" 2>/dev/null || true
if [ "$rest_rc" -ne 0 ] || [ "$vm_rc" -ne 0 ]; then
  exit 1
fi
exit 0
