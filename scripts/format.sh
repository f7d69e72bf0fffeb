#!/usr/bin/env bash
# clang-format over every C and C++ file git tracks (.clang-format at the root).
#
#   scripts/format.sh           rewrites the files in place
#   scripts/format.sh --check   changes nothing; lists every file that is not
#                               clean and exits 1 if there is one (the unit test
#                               redlock_format_check runs this)
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
[[ "${1:-}" == "--check" ]] && check=1
command -v clang-format >/dev/null || { echo "format.sh: clang-format not found (apt-get install clang-format)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.c' '*.cpp' 2>/dev/null || true)
if ((${#files[@]} == 0)); then
  # Not a git checkout (an unpacked source tree): every file under the root.
  mapfile -t files < <(find . -path ./build\* -prune -o \( -name '*.cc' -o -name '*.h' -o -name '*.c' \) -print)
fi
bad=()
present=()
for f in "${files[@]}"; do [[ -f "$f" ]] && present+=("$f"); done
if ((check)); then
  # Batches of 40 files per clang-format run (one process per file took
  # minutes on a loaded machine); a batch that fails is looked at file by file.
  for ((i = 0; i < ${#present[@]}; i += 40)); do
    batch=("${present[@]:i:40}")
    clang-format --dry-run --Werror "${batch[@]}" >/dev/null 2>&1 && continue
    for f in "${batch[@]}"; do
      clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
    done
  done
else
  ((${#present[@]})) && printf '%s\0' "${present[@]}" | xargs -0 -n 40 clang-format -i
fi
if ((check)); then
  if ((${#bad[@]})); then
    echo "format.sh: ${#bad[@]} of ${#files[@]} files are not clang-format clean (fix: scripts/format.sh):" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
  fi
  echo "format.sh: ${#files[@]} files clang-format clean"
fi
