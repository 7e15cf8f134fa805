#!/usr/bin/env bash
# The include graph by room: one line per arrow "FROM -> TO  (N includes)", then a check that
# every arrow points down (to a lower floor). Exit 1, naming the file and line, on an upward or
# sideways arrow. ctest runs it as house.room_graph.
#
#   bash scripts/room_graph.sh          # print the graph and check it
#   bash scripts/room_graph.sh --quiet  # check only
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Floors, top to bottom: a room may include only rooms on a lower floor. bench/ and fuzz/ are
# harnesses over everything.
declare -A FLOOR=(
  [bench]=5 [fuzz]=5
  [cli]=4 [gui]=4
  [executor]=3 [calibration]=3 [interop]=3 [planner]=3
  [formats]=2
  [frameworks]=1
  [simulator]=0 [proc]=0
)
ROOMS=(bench fuzz cli gui executor calibration interop planner formats frameworks proc simulator)

quiet=0
[[ "${1:-}" == "--quiet" ]] && quiet=1

bad=0
declare -A COUNT=()
for from in "${ROOMS[@]}"; do
  [[ -d "$from" ]] || continue
  while IFS=: read -r file line target; do
    to="${target%%/*}"
    [[ "$to" == "$from" || -z "${FLOOR[$to]+x}" ]] && continue
    COUNT["$from -> $to"]=$(( ${COUNT["$from -> $to"]:-0} + 1 ))
    if (( FLOOR[$to] >= FLOOR[$from] )); then
      echo "room_graph: $file:$line: $from (floor ${FLOOR[$from]}) includes $target (floor ${FLOOR[$to]}): an arrow that does not point down" >&2
      bad=1
    fi
  done < <(grep -rnoE --include='*.cpp' --include='*.hpp' --include='*.h' '^#include "[a-z_]+/[^"]+"' "$from" \
             | sed -E 's/#include "([^"]+)"/\1/')
done

if (( !quiet )); then
  for from in "${ROOMS[@]}"; do
    for to in "${ROOMS[@]}"; do
      key="$from -> $to"
      [[ -n "${COUNT[$key]+x}" ]] && printf '%-26s (%d includes)\n' "$key" "${COUNT[$key]}"
    done
  done
fi
if (( bad )); then
  echo "room_graph: FAILED: upward arrows above" >&2
  exit 1
fi
(( quiet )) || echo "room_graph: every arrow points down"
