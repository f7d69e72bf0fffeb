#!/bin/sh
# Writes the manual page of the `redlock` tool, redlock(1), from the built
# tool's own help: `redlock --help`, then `redlock help <command>` for every
# command it lists. The page says nothing the help does not, so the two
# cannot disagree. Run by the build (cmake/RedlockInstall.cmake).
#
#   tools/make-man.sh BUILD/tools/redlock VERSION OUT.1
set -eu
tool=${1:?usage: make-man.sh TOOL VERSION OUT}
version=${2:?usage: make-man.sh TOOL VERSION OUT}
out=${3:?usage: make-man.sh TOOL VERSION OUT}

# Text as roff: backslashes doubled, a leading dot or quote escaped, in
# no-fill mode so the help's own layout (tables of flags, exit codes) stays.
roff() {
  sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"
}

help=$("$tool" --help)
commands=$(printf '%s\n' "$help" |
  sed -n '/^Commands:/,/^$/p' | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p')
[ -n "$commands" ] || { echo "make-man.sh: no commands in '$tool --help'" >&2; exit 1; }

tmp="$out.tmp"
{
  echo ".TH REDLOCK 1 \"\" \"redlock $version\" \"User Commands\""
  echo ".SH NAME"
  echo "redlock \\- distributed locks on N independent Redis masters (Redlock) from the shell"
  echo ".SH SYNOPSIS"
  echo ".B redlock"
  echo "[global flags] <command> [flags]"
  echo ".SH DESCRIPTION"
  echo ".nf"
  printf '%s\n' "$help" | roff
  echo ".fi"
  echo ".SH COMMANDS"
  for c in $commands; do
    echo ".SS $c"
    echo ".nf"
    "$tool" help "$c" | roff
    echo ".fi"
  done
  echo ".SH ENVIRONMENT"
  echo "REDLOCK_NODES, REDLOCK_TLS_CA, REDLOCK_TLS_CERT, REDLOCK_TLS_KEY,"
  echo "REDLOCK_TLS_SERVER_NAME, REDLOCK_TLS_INSECURE: the defaults of the global flags above."
} >"$tmp"
mv "$tmp" "$out"
