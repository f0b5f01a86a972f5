#!/bin/sh
# deploy/entrypoint.sh - container entrypoint: `slotd-entrypoint PROGRAM [ARGS...]` runs PROGRAM
# (slotd), adding --node-id, --peers or --join, --advertise and --peer-advertise when it runs as a
# pod of the slotd StatefulSet.
#
# Without SLOTD_CLUSTER_SIZE it runs `PROGRAM ARGS...` unchanged (a single node, e.g. `docker run`).
# With it, the pod name's ordinal N (HOSTNAME=<set>-N) gives --node-id N+1, and the pod's own DNS
# name <set>-N.<headless service>.<namespace>.svc.<cluster domain> with the client and peer ports
# is what it advertises (--advertise, --peer-advertise), since it listens on 0.0.0.0.
# - Ordinals 0..V-1, V = min(SLOTD_INITIAL_VOTERS, SLOTD_CLUSTER_SIZE), are the initial controller
#   voters: --peers K+1=<set>-K.<...>:<peer port> for K in 0..V-1 and
#   --bootstrap-expect SLOTD_CLUSTER_SIZE (slot groups are placed once that many data nodes are
#   active).
# - Every other ordinal, below SLOTD_CLUSTER_SIZE or not, is a data node:
#   --join <set>-0.<...>:<peer port>; it registers and activates itself. So `kubectl scale` up
#   needs no change here; SLOTD_CLUSTER_SIZE is only the size the cluster bootstraps with.
#
# Environment (StatefulSet mode):
#   SLOTD_CLUSTER_SIZE     the bootstrap size, 1..64: the StatefulSet's replicas at the first apply
#   SLOTD_INITIAL_VOTERS   initial controller voters (default 3, at most SLOTD_CLUSTER_SIZE)
#   POD_NAMESPACE          the pod's namespace (required; from the downward API)
#   HOSTNAME               the pod name, <set>-<ordinal> with ordinal 0..63 (Kubernetes sets it)
#   SLOTD_HEADLESS_SERVICE the headless Service's name (default slotd-headless)
#   SLOTD_CLUSTER_DOMAIN   the cluster's DNS domain (default cluster.local)
#   SLOTD_CLIENT_PORT      the client port every pod listens on (default 7700)
#   SLOTD_PEER_PORT        the peer port every pod listens on (default 7701)
# These are not slotd options: they are removed from slotd's environment (slotd would warn about
# them, and read SLOTD_CLUSTER_SIZE as --replicas).
set -eu

die() {
  echo "slotd-entrypoint: $*" >&2
  exit 2
}

# The value of variable $1 (named $2 in messages) as a decimal number, or exit 2.
number() {
  case "$1" in
    '' | *[!0-9]*) die "$2='$1' is not a number" ;;
  esac
  echo $(($1 + 0))
}

[ $# -ge 1 ] || die "usage: slotd-entrypoint PROGRAM [ARGS...]"
program=$1
shift

if [ -z "${SLOTD_CLUSTER_SIZE:-}" ]; then
  exec "$program" "$@"
fi

size=$(number "$SLOTD_CLUSTER_SIZE" SLOTD_CLUSTER_SIZE)
if [ "$size" -lt 1 ] || [ "$size" -gt 64 ]; then
  die "SLOTD_CLUSTER_SIZE=$size is not in 1..64"
fi
voters=$(number "${SLOTD_INITIAL_VOTERS:-3}" SLOTD_INITIAL_VOTERS)
[ "$voters" -ge 1 ] || die "SLOTD_INITIAL_VOTERS=$voters is not at least 1"
[ "$voters" -le "$size" ] || voters=$size

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
# The cluster state holds at most 64 nodes (CTL_NODES_MAX), removed ones included.
[ "$ordinal" -lt 64 ] || die "ordinal $ordinal is not below 64 (a cluster holds at most 64 nodes)"

service=${SLOTD_HEADLESS_SERVICE:-slotd-headless}
domain=${SLOTD_CLUSTER_DOMAIN:-cluster.local}
client_port=$(number "${SLOTD_CLIENT_PORT:-7700}" SLOTD_CLIENT_PORT)
port=$(number "${SLOTD_PEER_PORT:-7701}" SLOTD_PEER_PORT)
suffix=${service}.${POD_NAMESPACE}.svc.${domain}
self=${set_name}-${ordinal}.${suffix}

unset SLOTD_CLUSTER_SIZE SLOTD_INITIAL_VOTERS SLOTD_HEADLESS_SERVICE SLOTD_CLUSTER_DOMAIN \
  SLOTD_CLIENT_PORT SLOTD_PEER_PORT

if [ "$ordinal" -ge "$voters" ]; then
  exec "$program" --node-id "$((ordinal + 1))" --join "${set_name}-0.${suffix}:${port}" \
    --advertise "$self:$client_port" --peer-advertise "$self:$port" "$@"
fi

peers=
k=0
while [ "$k" -lt "$voters" ]; do
  peers=${peers:+$peers,}$((k + 1))=${set_name}-${k}.${suffix}:${port}
  k=$((k + 1))
done
exec "$program" --node-id "$((ordinal + 1))" --peers "$peers" --bootstrap-expect "$size" \
  --advertise "$self:$client_port" --peer-advertise "$self:$port" "$@"
