#!/bin/sh
# deploy/entrypoint.sh - container entrypoint: `slotd-entrypoint PROGRAM [ARGS...]` runs PROGRAM
# (slotd), adding --node-id, --peers, --advertise and --peer-advertise when it runs as a pod of the
# slotd StatefulSet.
#
# Without SLOTD_CLUSTER_SIZE it runs `PROGRAM ARGS...` unchanged (a single node, e.g. `docker run`).
# With it, the pod name's ordinal N (HOSTNAME=<set>-N) gives --node-id N+1, and --peers lists
# K+1=<set>-K.<headless service>.<namespace>.svc.<cluster domain>:<peer port> for K in
# 0..SLOTD_CLUSTER_SIZE-1; the pod's own DNS name with the client and peer ports is what it
# advertises (--advertise, --peer-advertise), since it listens on 0.0.0.0.
#
# Environment (StatefulSet mode):
#   SLOTD_CLUSTER_SIZE         the StatefulSet's replica count (required for this mode), 1..64;
#                          removed from slotd's environment (slotd would read it as --replicas)
#   POD_NAMESPACE          the pod's namespace (required; from the downward API)
#   HOSTNAME               the pod name, <set>-<ordinal> (Kubernetes sets it)
#   SLOTD_HEADLESS_SERVICE the headless Service's name (default slotd-headless)
#   SLOTD_CLUSTER_DOMAIN   the cluster's DNS domain (default cluster.local)
#   SLOTD_CLIENT_PORT      the client port every pod listens on (default 7700)
#   SLOTD_PEER_PORT        the peer port every pod listens on (default 7701)
set -eu

die() {
  echo "slotd-entrypoint: $*" >&2
  exit 2
}

[ $# -ge 1 ] || die "usage: slotd-entrypoint PROGRAM [ARGS...]"
program=$1
shift

if [ -z "${SLOTD_CLUSTER_SIZE:-}" ]; then
  exec "$program" "$@"
fi

case "$SLOTD_CLUSTER_SIZE" in
  '' | *[!0-9]*) die "SLOTD_CLUSTER_SIZE='$SLOTD_CLUSTER_SIZE' is not a number" ;;
esac
replicas=$((SLOTD_CLUSTER_SIZE + 0))
if [ "$replicas" -lt 1 ] || [ "$replicas" -gt 64 ]; then
  die "SLOTD_CLUSTER_SIZE=$replicas is not in 1..64"
fi

[ -n "${POD_NAMESPACE:-}" ] || die "POD_NAMESPACE is not set (downward API metadata.namespace)"
# shellcheck disable=SC3028 # HOSTNAME is set by the container runtime, not by the shell.
pod=${HOSTNAME:-}
[ -n "$pod" ] || pod=$(hostname)
# Only the first label: some runtimes report a fully qualified name.
pod=${pod%%.*}

set_name=${pod%-*}
ordinal=${pod##*-}
case "$ordinal" in
  '' | *[!0-9]*) die "hostname '$pod' does not end in -<ordinal>" ;;
esac
if [ "$set_name" = "$pod" ] || [ -z "$set_name" ]; then
  die "hostname '$pod' is not <set>-<ordinal>"
fi
ordinal=$((ordinal + 0))
[ "$ordinal" -lt "$replicas" ] ||
  die "ordinal $ordinal is not below SLOTD_CLUSTER_SIZE=$replicas (scale the StatefulSet and SLOTD_CLUSTER_SIZE together)"

service=${SLOTD_HEADLESS_SERVICE:-slotd-headless}
domain=${SLOTD_CLUSTER_DOMAIN:-cluster.local}
client_port=${SLOTD_CLIENT_PORT:-7700}
port=${SLOTD_PEER_PORT:-7701}

peers=
k=0
while [ "$k" -lt "$replicas" ]; do
  peer="$((k + 1))=${set_name}-${k}.${service}.${POD_NAMESPACE}.svc.${domain}:${port}"
  peers=${peers:+$peers,}$peer
  k=$((k + 1))
done
self=${set_name}-${ordinal}.${service}.${POD_NAMESPACE}.svc.${domain}

# SLOTD_CLUSTER_SIZE is not a slotd option; keep it out of slotd's environment all the same.
unset SLOTD_CLUSTER_SIZE
exec "$program" --node-id "$((ordinal + 1))" --peers "$peers" \
  --advertise "$self:$client_port" --peer-advertise "$self:$port" "$@"
