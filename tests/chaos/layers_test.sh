#!/usr/bin/env bash
# The chaos rooms import one way (chaos/README.md "The parts"): each room may
# include only the rooms before it in this order, and nothing includes a
# main (chaos/*_main.cc). Fails listing every include that goes the wrong way.
#
#   tests/chaos/layers_test.sh [SOURCE_DIR]
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
order=(history check plot base clients faults run kinds scenarios explore backends)
declare -A rank
for i in "${!order[@]}"; do rank[${order[$i]}]=$i; done
bad=0
checked=0
while IFS= read -r file; do
  rel="${file#"$root"/}"
  room="$(cut -d/ -f2 <<<"$rel")"
  [[ "$rel" == chaos/*_main.cc ]] && continue  # the mains may include anything
  if [[ -z "${rank[$room]+x}" ]]; then
    echo "layers_test: $rel is in a room the order does not know ($room)" >&2
    bad=1
    continue
  fi
  while IFS= read -r inc; do
    checked=$((checked + 1))
    to="$(cut -d/ -f2 <<<"$inc")"
    if [[ "$inc" == chaos/*_main.cc || -z "${rank[$to]+x}" ]]; then
      echo "layers_test: $rel includes $inc" >&2
      bad=1
    elif ((rank[$to] > rank[$room])); then
      echo "layers_test: $rel ($room) includes $inc ($to): $to comes after $room" >&2
      bad=1
    fi
  done < <(sed -n 's|^#include "\(chaos/[^"]*\)".*|\1|p' "$file")
done < <(find "$root/chaos" -name '*.h' -o -name '*.cc' | sort)
if ((checked == 0)); then
  echo "layers_test: no chaos include found under $root/chaos" >&2
  exit 1
fi
((bad == 0)) && echo "layers_test: $checked includes, all one way (${order[*]}, then the mains)"
exit "$bad"
