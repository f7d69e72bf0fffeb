#!/usr/bin/env bash
# Installs the Debian packages named on the command line that are missing,
# when run as root; as any other user it prints the exact apt-get line to run
# and exits 1. Used by scripts/setup.sh, scripts/bench.sh and
# scripts/package.sh, each with the packages it needs.
#
#   scripts/install-packages.sh PACKAGE...
set -euo pipefail
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]})) || exit 0
if [[ $(id -u) -ne 0 ]]; then
  echo "$(basename "$0"): missing Debian packages; install them as root with:" >&2
  echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
echo "$(basename "$0"): installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq || echo "$(basename "$0"): apt-get update failed; trying the install anyway" >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
