#!/usr/bin/env bash
# The self-tests in two tiers.
#
#   scripts/run-tests.sh check [PYTEST_ARGS...]   `make check`: the product tier
#   scripts/run-tests.sh lab   [PYTEST_ARGS...]   the lab tier alone
#   scripts/run-tests.sh       [PYTEST_ARGS...]   `make test` (CI): check, then the lab tier
#
# check   tests/ minus the `lab`-marked tests, under pytest-xdist (KGC_CHECK_JOBS workers,
#         default 2), with the lab's tools hidden: PATH is rebuilt without QEMU, Chromium,
#         containerd/runc, kubectl and the control plane, Node/Allure, busybox, unshare,
#         chroot/mount, debootstrap, Go; KGC_CACHE points at an empty directory (no cached
#         lab artefact is found) and KGC_ALLURE at no file. A test that needs any of them
#         fails here on every machine, not only on a fresh one: it belongs to the lab tier.
#         What a developer runs on every change (≤ 5 min on 2 cores; benchmarks/README.md).
# lab     lab/tests (the lab's own tests and those that need a lab; its conftest marks them
#         all `lab`) and the lab-marked tests left in tests/, in two pytest sessions side by side:
#           vm    the suites that boot TCG guests (node lab, node images, the cluster lab's
#                 real node): CPU-bound emulation, one session, serial
#           rest  the cluster / containerd labs, whose tests mostly wait on real clocks (HPA
#                 syncs, sandbox delays, pod starts), and the SIGKILL cleanup tests, on
#                 KGC_REST_JOBS xdist workers (default 2, a file per worker)
#         Each session has its own short --basetemp (UNIX socket paths under it stay < 108
#         bytes) and its own log; both logs are printed, the vm one at the end.
#         In `all` (make test) check runs beside both lab sessions, on one worker.
#
# Where the cores went: each session runs in a cgroup v1 cpuacct group where that is writable
# (root); the end of the output gives the CPU seconds per session and, per session, the 12
# costliest tests with all they started (scripts/lib/kgc_cpuacct.py). benchmarks/README.md.
#
# Every test runs in `make test`: check runs what lab does not (`-m "not lab"` / `-m lab`
# over the same tests/; lab/tests whole in the lab tier). Any non-zero exit — a failure, an
# error, or pytest's 5 ("no tests ran") — fails the run. KGC_TEST_SERIAL=1 runs the lab
# tier as one session.
set -uo pipefail
cd "$(dirname "$0")/.."

PY=.venv/bin/pytest
COMMON=(-p no:cacheprovider -q -rfEs --durations=15)
# the TCG-guest suites (the vm session); everything else lab-marked is the rest session
VM=(lab/tests/node lab/tests/image lab/tests/realnode)

# CPU seconds per session (cgroup v1 cpuacct, where it is writable: root on this machine,
# a cgroup per session that its daemonized QEMUs stay in too); the line "[tests] cpu: ..."
# at the end says where the cores went (benchmarks/README.md). Nothing when unavailable.
CG=
CG_ROOT=/sys/fs/cgroup/cpuacct
if [ -z "${KGC_TEST_NO_CPUACCT:-}" ] && [ -w "$CG_ROOT" ] && [ -e "$CG_ROOT/tasks" ]; then
  CG="$CG_ROOT/kgc-tests-$$"
  if mkdir -p "$CG" 2>/dev/null; then CG_LOGS=$(mktemp -d /tmp/kgc-t-cpu.XXXXXX); else CG=; fi
fi
T_START=$(date +%s)
cg_join() {  # cg_join SESSION: this shell and what it starts are accounted to SESSION
  if [ -n "$CG" ] && mkdir -p "$CG/$1" 2>/dev/null; then
    echo "$BASHPID" >"$CG/$1/tasks" 2>/dev/null || true
    # CPU seconds per test (scripts/lib/kgc_cpuacct.py): each pytest process of the
    # session counts its tests in a group of its own below the session's
    export KGC_TEST_CPU_CG="$CG/$1" KGC_TEST_CPU_LOG="$CG_LOGS/$1.tsv"
    export PYTHONPATH="$PWD/scripts/lib${PYTHONPATH:+:$PYTHONPATH}"
    export PYTEST_ADDOPTS="-p kgc_cpuacct${PYTEST_ADDOPTS:+ $PYTEST_ADDOPTS}"
  fi
}
cg_run() {  # cg_run SESSION CMD...: run CMD (in a subshell) accounted to SESSION
  local n=$1; shift
  ( cg_join "$n"; exec "$@" )
}
cg_report() {
  [ -n "$CG" ] || return 0
  local d n line="" total=0 us
  for d in "$CG"/*/; do
    [ -e "$d/cpuacct.usage" ] || continue
    n=$(basename "$d"); us=$(cat "$d/cpuacct.usage")
    total=$((total + us / 1000000000))
    line+=" $n $((us / 1000000000)) s,"
  done
  for n in "$CG_LOGS"/*.tsv; do
    [ -s "$n" ] || continue
    echo "[tests] cpu, session $(basename "$n" .tsv), the 12 costliest tests (CPU-s, setup to teardown, with all they started):"
    sort -rn "$n" | head -12 | sed 's/^/    /'
  done
  echo "[tests] cpu:${line} total $total s in $(( $(date +%s) - T_START )) s wall on $(nproc) cores"
  for d in "$CG"/*/*/ "$CG"/*/; do rmdir "$d" 2>/dev/null; done
  rmdir "$CG" 2>/dev/null || true
  rm -rf "$CG_LOGS"
}
trap cg_report EXIT

mode=all
case "${1:-}" in
  check|lab|all) mode=$1; shift ;;
esac

# A PATH with the same directories' programs minus the lab's tools (symlinks in $1).
lab_free_path() {
  local dir=$1 d f n
  mkdir -p "$dir"
  IFS=: read -ra dirs <<<"$PATH"
  for d in "${dirs[@]}"; do
    [ -d "$d" ] || continue
    case $d in */node_modules/*) continue ;; esac
    for f in "$d"/*; do
      n=${f##*/}
      case $n in
        qemu-*|chromium*|google-chrome*|containerd*|ctr|runc|crun|kubectl|kube-*|kwok*|\
        etcd*|allure|node|nodejs|npx|npm|busybox|debootstrap|mmdebstrap|unshare|nsenter|\
        chroot|mount|umount|setpriv|sudo|go|gofmt|docker*|podman|virtiofsd) continue ;;
      esac
      [ -e "$dir/$n" ] || ln -s "$f" "$dir/$n"
    done
  done
  echo "$dir"
}

run_check() {
  local scratch rc
  scratch=$(mktemp -d /tmp/kgc-t-check.XXXXXX)
  echo "[tests] check: tests/ -m 'not lab', ${KGC_CHECK_JOBS:-2} workers, lab tools hidden"
  PATH=$(lab_free_path "$scratch/bin") KGC_CACHE="$scratch/no-lab-cache" \
    KGC_ALLURE="$scratch/no-allure" \
    cg_run check "$PY" tests -m "not lab" -n "${KGC_CHECK_JOBS:-2}" "${COMMON[@]}" \
    --basetemp "$scratch/t" "$@"
  rc=$?
  rm -rf "$scratch" 2>/dev/null || true
  echo "[tests] check: exit $rc"
  return "$rc"
}

start_vm() {
  # the TCG-guest suites: CPU-bound emulation, one serial session in the background
  logs=$(mktemp -d /tmp/kgc-tests.XXXXXX)
  base_vm=$(mktemp -d /tmp/kgc-t-vm.XXXXXX)
  echo "[tests] lab session vm: ${VM[*]} (log $logs/vm.log)"
  { cg_join vm; exec "$PY" "${VM[@]}" -m lab "${COMMON[@]}" --basetemp "$base_vm" "$@"; } \
    >"$logs/vm.log" 2>&1 &
  vm_pid=$!
  # if this script is stopped, stop the vm session too (its labs clean up on SIGTERM)
  trap 'kill -TERM "$vm_pid" 2>/dev/null; wait "$vm_pid"; exit 143' INT TERM
}

finish_vm() {
  wait "$vm_pid"
  vm_rc=$?
  trap - INT TERM
  echo "=============================== session vm output ==============================="
  cat "$logs/vm.log"
  rm -rf "$logs" "$base_vm" 2>/dev/null || true
}

run_lab_rest() {
  # the rest session's tests mostly wait on real clocks, so they run on KGC_REST_JOBS
  # pytest-xdist workers (default 2), a test file per worker (--dist loadfile: a file's
  # module fixtures stay on one worker); each worker brings up its own labs (session
  # fixtures; every lab picks free ports and its own run directory)
  local base_rest ignore=() p rc jobs=${KGC_REST_JOBS:-2} par=()
  base_rest=$(mktemp -d /tmp/kgc-t-rest.XXXXXX)
  for p in "${VM[@]}"; do ignore+=(--ignore "$p"); done
  [ "$jobs" -gt 1 ] && par=(-n "$jobs" --dist loadfile)
  echo "[tests] lab session rest: the lab tier minus the vm suites, $jobs worker(s)"
  cg_run rest "$PY" lab/tests tests "${ignore[@]}" -m lab "${par[@]}" "${COMMON[@]}" \
    --basetemp "$base_rest" "$@"
  rc=$?
  rm -rf "$base_rest" 2>/dev/null || true
  return "$rc"
}

start_rest() {
  # the rest session in the background (beside check), its output in its own log
  rest_log=$(mktemp /tmp/kgc-tests-rest.XXXXXX.log)
  echo "[tests] lab session rest in the background (log $rest_log)"
  run_lab_rest "$@" >"$rest_log" 2>&1 &
  rest_pid=$!
  trap 'kill -TERM "$vm_pid" "$rest_pid" 2>/dev/null; wait; exit 143' INT TERM
}

finish_rest() {
  wait "$rest_pid"
  rest_rc=$?
  echo "=============================== session rest output ==============================="
  cat "$rest_log"
  rm -f "$rest_log"
}

run_lab() {
  if [ -n "${KGC_TEST_SERIAL:-}" ]; then
    "$PY" lab/tests tests -m lab "${COMMON[@]}" "$@"
    return
  fi
  local rest_rc
  start_vm "$@"
  run_lab_rest "$@"; rest_rc=$?
  echo "[tests] lab session rest: exit $rest_rc; waiting for session vm"
  finish_vm
  echo "[tests] lab session rest: exit $rest_rc, session vm: exit $vm_rc"
  [ "$rest_rc" -eq 0 ] && [ "$vm_rc" -eq 0 ]
}

case $mode in
  check) run_check "$@" ;;
  lab) run_lab "$@" ;;
  all)
    # the three sessions side by side from the start: vm (one core, emulation), the rest
    # of the lab tier (mostly waits on real clocks) and check (one worker, the other core)
    if [ -n "${KGC_TEST_SERIAL:-}" ]; then
      run_check "$@"; check_rc=$?
      run_lab "$@"; lab_rc=$?
    else
      start_vm "$@"
      start_rest "$@"
      KGC_CHECK_JOBS=${KGC_CHECK_JOBS:-1} run_check "$@"; check_rc=$?
      echo "[tests] check: exit $check_rc; waiting for the lab sessions"
      finish_rest
      echo "[tests] lab session rest: exit $rest_rc; waiting for session vm"
      finish_vm
      echo "[tests] lab session rest: exit $rest_rc, session vm: exit $vm_rc"
      lab_rc=0; { [ "$rest_rc" -eq 0 ] && [ "$vm_rc" -eq 0 ]; } || lab_rc=1
    fi
    echo "[tests] check: exit $check_rc, lab tier: exit $lab_rc"
    [ "$check_rc" -eq 0 ] && [ "$lab_rc" -eq 0 ]
    ;;
esac
