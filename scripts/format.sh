#!/usr/bin/env bash
# Formats every tracked C++ file with the repository's .clang-format (Debian `clang-format`).
#   bash scripts/format.sh          # rewrite in place
#   bash scripts/format.sh --check  # list the files that would change; exit 1 if any
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h')
if [[ "${1:-}" == "--check" ]]; then
  changed=0
  for f in "${files[@]}"; do
    if ! clang-format --style=file "$f" | cmp -s - "$f"; then echo "$f"; changed=1; fi
  done
  exit "$changed"
fi
clang-format --style=file -i "${files[@]}"
