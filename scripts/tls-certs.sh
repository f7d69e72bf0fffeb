#!/bin/sh
# Makes a throw-away CA and the certificates for Redis nodes on TLS ports and
# for redlock clients, with the openssl command (Debian package openssl):
#
#   scripts/tls-certs.sh [DIR] [NAME...]
#
# DIR (default: tls, the directory docker-compose.yml's "tls" profile mounts)
# gets
#   ca.crt, ca.key          the CA (give ca.crt to clients: --tls-ca, Options::tls.ca_file)
#   server.crt, server.key  the nodes' certificate, for localhost, 127.0.0.1 and
#                           every NAME (a DNS name, or an IPv4/IPv6 address)
#   client.crt, client.key  a client certificate, for nodes that require one
#                           (tls-auth-clients yes: --tls-cert/--tls-key)
# EC P-256 keys, certificates valid for 365 days. An existing DIR is reused:
# its files are replaced.
#
# For development and experiments: a real deployment's CA key is not kept
# next to the certificates, and server.key is not world-readable (it is made
# readable here so that the redis user inside the containers can load it).
set -eu
dir=${1:-tls}
[ $# -gt 0 ] && shift
command -v openssl >/dev/null 2>&1 || {
  echo "tls-certs.sh: openssl is not installed (apt-get install openssl)" >&2
  exit 1
}
names="DNS:localhost,IP:127.0.0.1"
for name in "$@"; do
  case "$name" in
    *:*) names="$names,IP:$name" ;;        # IPv6
    *[!0-9.]*) names="$names,DNS:$name" ;;  # a name
    *) names="$names,IP:$name" ;;           # IPv4
  esac
done
mkdir -p "$dir"
umask 077
ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
# shellcheck disable=SC2086  # $ec is several arguments
openssl req -x509 $ec -keyout "$dir/ca.key" -out "$dir/ca.crt" -days 365 \
  -subj "/CN=redlock CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  2>/dev/null
# shellcheck disable=SC2086
openssl req -x509 $ec -keyout "$dir/server.key" -out "$dir/server.crt" -days 365 \
  -subj "/CN=localhost" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
  -addext "subjectAltName=$names" -addext "basicConstraints=CA:FALSE" \
  -addext "extendedKeyUsage=serverAuth" 2>/dev/null
# shellcheck disable=SC2086
openssl req -x509 $ec -keyout "$dir/client.key" -out "$dir/client.crt" -days 365 \
  -subj "/CN=redlock client" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
  -addext "basicConstraints=CA:FALSE" -addext "extendedKeyUsage=clientAuth" 2>/dev/null
chmod 644 "$dir/ca.crt" "$dir/server.crt" "$dir/client.crt" "$dir/server.key"
openssl verify -CAfile "$dir/ca.crt" "$dir/server.crt" "$dir/client.crt" >/dev/null
echo "tls-certs.sh: $dir/{ca,server,client}.{crt,key} (server names: $names)"
