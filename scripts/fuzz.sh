#!/usr/bin/env bash
# Runs every fuzz target (or the ones named) for a bounded time and prints executions,
# coverage and crashes per target. CI runs it briefly from scripts/test.sh; long campaigns use
# the same script (see docs/reliability.md).
#
#   bash scripts/fuzz.sh [--time SECONDS] [--runs N] [--sanitizer address|none]
#                        [--no-trace-compares] [--jobs N] [--lanes N] [TARGET...]
#
# Defaults: 20 s per target, AddressSanitizer, one target at a time (--jobs 2 runs two side by
# side: each libFuzzer process uses one core; --lanes N runs N processes of each target on its
# one corpus, their executions summed, for a campaign on one target); with both --time and --runs a run stops at
# whichever comes first. --no-trace-compares builds without libFuzzer's comparison tracing
# (into fuzz/target/no-trace-compares): more executions per second on targets whose time
# goes largely to tracing comparisons (capi_sequence, onnx_graph; see docs/reliability.md);
# mutations are then no longer guided by compared values, so use it for long campaigns on a
# grown corpus, beside a run with tracing. Installs cargo-fuzz (crates.io) when missing and
# runs on the machine's stable toolchain (RUSTC_BOOTSTRAP=1; no nightly needed). Corpora live
# in fuzz/corpus/<target>/ (seeded from the fixtures
# by scripts/fuzz-seeds.py, grown by every run); a crash leaves its input in
# fuzz/artifacts/<target>/ and makes the script fail after all targets ran. Minimize a crash
# with `cargo fuzz tmin TARGET ARTIFACT` (as above) and keep it under fuzz/regressions/TARGET/.
# Long campaigns on a shared machine: stop a run with SIGINT (libFuzzer prints its executions
# and exits; reported as "interrupted"), and lower its priority with
# `echo 19 > /proc/PID/autogroup` (plain `nice` does not reach below a desktop's or a
# `setsid` job's autogroup). Do not pause it with SIGSTOP for longer than the 30 s `-timeout`:
# libFuzzer then reports the current input as a timeout, and its handler can hang.
set -euo pipefail
cd "$(dirname "$0")/.."

time_limit=20
jobs=1
lanes=1
runs=()
sanitizer=address
cmp=()
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time) time_limit="$2"; shift 2 ;;
    --runs) runs=(-runs="$2"); [ "$time_limit" = 20 ] && time_limit=0; shift 2 ;;
    --sanitizer) sanitizer="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --lanes) lanes="$2"; shift 2 ;;
    --no-trace-compares) cmp=(--no-trace-compares --target-dir target/no-trace-compares); shift ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done

# cargo-fuzz passes `-Z` flags; the machine's own (stable) toolchain accepts them with
# RUSTC_BOOTSTRAP=1 and ships the AddressSanitizer runtime. DASHRANK_FUZZ_TOOLCHAIN=nightly
# (or any rustup toolchain name) picks another.
toolchain=()
if [ -n "${DASHRANK_FUZZ_TOOLCHAIN:-}" ]; then
  toolchain=("+$DASHRANK_FUZZ_TOOLCHAIN")
else
  export RUSTC_BOOTSTRAP=1
fi
bash scripts/tools.sh cargo-fuzz

all=$(cd fuzz && cargo fuzz list)
[ ${#targets[@]} -gt 0 ] || read -r -a targets <<< "$(echo $all)"
for t in "${targets[@]}"; do
  grep -qx "$t" <<< "$all" || { echo "error: no fuzz target '$t' (have: $(echo $all))" >&2; exit 1; }
done

python3 scripts/fuzz-seeds.py
echo "== building fuzz targets (sanitizer: $sanitizer)"
one=()
[ ${#targets[@]} -eq 1 ] && one=("${targets[0]}")
(cd fuzz && cargo "${toolchain[@]}" fuzz build -O --sanitizer "$sanitizer" "${cmp[@]}" "${one[@]}") \
  || { echo "error: fuzz build failed" >&2; exit 1; }

# Known upstream leak in ort-tract (see ffi-examples/lsan.supp); anything else fails the run.
export LSAN_OPTIONS="suppressions=$PWD/ffi-examples/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
mkdir -p fuzz/logs
# One target's run: its log in fuzz/logs/TARGET.log, its table row in TARGET.row and "ok" or
# "failed" in TARGET.status.
run_target() {
  local t=$1 log=fuzz/logs/$1.log lock rc execs speed cov ft result status=failed
  rm -f "fuzz/logs/$t.row" "fuzz/logs/$t.status"
  # One run per target at a time: a second run would write into the first one's log.
  if command -v flock >/dev/null; then
    exec {lock}>"fuzz/logs/$t.lock"
    if ! flock -n "$lock"; then
      printf '%-16s %12s %8s %8s %8s  %s\n' "$t" - - - - \
        "another scripts/fuzz.sh run of $t holds fuzz/logs/$t.lock; wait for it to exit" \
        > "fuzz/logs/$t.row"
      echo failed > "fuzz/logs/$t.status"
      return
    fi
  fi
  # Lane k logs to TARGET.log (k = 1) or TARGET.lane<k>.log; all lanes share corpus/TARGET.
  local k lane_logs=() pids=() lane_rc
  rc=0
  for k in $(seq 1 "$lanes"); do
    local lane_log=$log
    [ "$k" -gt 1 ] && lane_log=fuzz/logs/$t.lane$k.log
    lane_logs+=("$lane_log")
    (cd fuzz && cargo "${toolchain[@]}" fuzz run -O --sanitizer "$sanitizer" "${cmp[@]}" "$t" "corpus/$t" -- \
        -max_total_time="$time_limit" "${runs[@]}" -rss_limit_mb=3072 -timeout=30 -max_len=65536 -print_final_stats=1) \
        > "$lane_log" 2>&1 &
    pids+=($!)
  done
  for k in "${pids[@]}"; do
    lane_rc=0
    wait "$k" || lane_rc=$?
    [ $lane_rc -eq 0 ] || rc=$lane_rc
  done
  execs=$(cat "${lane_logs[@]}" | sed -n 's/^stat::number_of_executed_units: *//p' | awk '{s += $1} END {print s}')
  speed=$(cat "${lane_logs[@]}" | sed -n 's/^stat::average_exec_per_sec: *//p' | awk '{s += $1} END {print s}')
  [ "$lanes" -gt 1 ] && cat "${lane_logs[@]:1}" >> "$log"
  cov=$( (grep -o 'cov: [0-9]*' "$log" || true) | cut -d' ' -f2 | sort -n | tail -n 1)
  ft=$( (grep -o 'ft: [0-9]*' "$log" || true) | cut -d' ' -f2 | sort -n | tail -n 1)
  if [ $rc -eq 0 ]; then
    result=ok; status=ok
  elif grep -q 'libFuzzer: run interrupted' "$log" && ! grep -qE '^==[0-9]+== *ERROR|^SUMMARY|panicked at' "$log"; then
    result="interrupted (SIGINT; executions so far above)"
  else
    result="CRASH (see $log, fuzz/artifacts/$t/)"
  fi
  printf '%-16s %12s %8s %8s %8s  %s\n' "$t" "${execs:-?}" "${speed:-?}" "${cov:-?}" "${ft:-?}" "$result" \
    > "fuzz/logs/$t.row"
  echo "$status" > "fuzz/logs/$t.status"
}

# Up to --jobs targets at a time (each libFuzzer process uses one core).
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_target "$t" &
done
wait
failed=()
printf '%-16s %12s %8s %8s %8s  %s\n' target executions exec/s cov ft result
for t in "${targets[@]}"; do
  cat "fuzz/logs/$t.row" 2>/dev/null || printf '%-16s  no result (see fuzz/logs/%s.log)\n' "$t" "$t"
  [ "$(cat "fuzz/logs/$t.status" 2>/dev/null)" = ok ] || failed+=("$t")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "error: fuzz targets crashed or were interrupted: ${failed[*]}" >&2
  exit 1
fi
echo "== fuzz: ok"
