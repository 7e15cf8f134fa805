#!/usr/bin/env bash
# Coverage-guided fuzzing of the readers of files users bring (fuzz/, libFuzzer, clang's ASan +
# UBSan): every target for SECONDS each (default 60), starting from its committed seed corpus.
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET ...]     e.g. bash scripts/fuzz.sh 600 plan runs_file
#   FUZZ_RUNS=1000000 bash scripts/fuzz.sh 600     each target stops at 1,000,000 executions or
#                                                   600 s, whichever comes first
#
# Builds the `fuzz` preset first. New inputs that add coverage go to build/fuzz/corpus/<target>
# (the committed corpus is only read). A finding (crash, leak, sanitizer report, uncaught
# exception, an input slower than 10 s) stops with a non-zero exit and its reproducer in
# build/fuzz/findings/<target>/: fix it, then copy the file to fuzz/regressions/<target>/, which
# ctest replays in every build. Prints executions, edges covered and corpus size per target.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds="${1:-60}"
runs="${FUZZ_RUNS:--1}"
shift || true
targets=("$@")
if ((${#targets[@]} == 0)); then
  read -r -a targets <<< "$(sed -n 's/^set(SHARDPLAN_FUZZ_TARGETS \(.*\))$/\1/p' fuzz/CMakeLists.txt)"
fi

cmake --preset fuzz > /dev/null
# Only the fuzz binaries (and what they link), not the rest of the tree.
cmake --build --preset fuzz -j"$(nproc)" --target $(printf 'fuzz_%s ' "${targets[@]}")

printf '%-20s %12s %8s %10s %8s %8s\n' target executions seconds exec/s edges corpus
for t in "${targets[@]}"; do
  work="build/fuzz/corpus/$t" findings="build/fuzz/findings/$t"
  mkdir -p "$work" "$findings"
  log="$findings/fuzz.log"
  seeds=("fuzz/corpus/$t")
  [[ -d "fuzz/regressions/$t" ]] && seeds+=("fuzz/regressions/$t")
  start=$(date +%s)
  if ! "build/fuzz/fuzz/fuzz_$t" "$work" "${seeds[@]}" -dict="fuzz/$t.dict" \
      -max_total_time="$seconds" -runs="$runs" -timeout=10 -rss_limit_mb=4096 -artifact_prefix="$findings/" \
      -print_final_stats=1 > "$log" 2>&1; then
    echo "fuzz.sh: $t: FINDING (reproducer in $findings/; log $log)" >&2
    tail -40 "$log" >&2
    exit 1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  edges=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  printf '%-20s %12s %8s %10s %8s %8s\n' "$t" "${execs:-?}" "$(($(date +%s) - start))" "${rate:-?}" "${edges:-?}" "$(find "$work" -type f | wc -l)"
done
