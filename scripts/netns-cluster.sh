#!/usr/bin/env bash
# A nacre file system over a real (virtual) network: MGS, 2 MDTs, 3 OSTs and 2 clients,
# each its own process in its own network namespace, joined by veth links to a bridge in a
# hub namespace (10.213.0.0/24), each link with netem latency and loss. Needs root, ip, tc
# and nsenter (scripts/install-deps.sh --test). The tests use crates/nacre/tests/common/netns.rs.
#
#   scripts/netns-cluster.sh up [NETEM...]        # default: delay 25ms 5ms loss 0.5%
#   scripts/netns-cluster.sh down
#   scripts/netns-cluster.sh partition NODE       # drop every packet to and from NODE
#   scripts/netns-cluster.sh heal NODE
#   scripts/netns-cluster.sh netem NODE ARGS...   # e.g. netem ost1 delay 200ms loss 5%
#   scripts/netns-cluster.sh status
#
# NODE is one of: mgs ost0 ost1 ost2 mdt0 mdt1 c0 c1. Clients are mounted on
# $NACRE_NETNS_DIR/mnt-c0 and mnt-c1 (default dir /var/tmp/nacre-netns); run lctl/lfs for
# a client with `NACRE_RUN_DIR=$NACRE_NETNS_DIR/run-c0 nsenter --net=/run/netns/nacre-c0 nacre ...`.
set -euo pipefail

DIR=${NACRE_NETNS_DIR:-/var/tmp/nacre-netns}
NACRE=${NACRE:-$(command -v nacre || echo target/release/nacre)}
TAG=nacre
NODES=(mgs ost0 ost1 ost2 mdt0 mdt1 c0 c1)
FSNAME=netns
MGSNODE=10.213.0.2:9880

index() {
	local i
	for i in "${!NODES[@]}"; do
		[ "${NODES[$i]}" = "$1" ] && { echo "$i"; return; }
	done
	echo "unknown node $1 (one of ${NODES[*]})" >&2
	exit 2
}
addr() { echo "10.213.0.$(($(index "$1") + 2))"; }

netem() {
	local node=$1 i
	shift
	i=$(index "$node")
	tc -n "$TAG-$node" qdisc replace dev "${TAG}v$i" root netem "$@"
	tc -n "$TAG-hub" qdisc replace dev "${TAG}h$i" root netem "$@"
}

wait_for() { # wait_for SECONDS COMMAND...
	local t=$1
	shift
	for _ in $(seq $((t * 5))); do
		"$@" && return 0
		sleep 0.2
	done
	return 1
}

up() {
	local base="${*:-delay 25ms 5ms loss 0.5%}" n i
	[ -e "/run/netns/$TAG-hub" ] && { echo "already up (down first)" >&2; exit 1; }
	mkdir -p "$DIR"
	ip netns add "$TAG-hub"
	ip -n "$TAG-hub" link set lo up
	ip -n "$TAG-hub" link add br0 type bridge
	ip -n "$TAG-hub" link set br0 up
	for n in "${NODES[@]}"; do
		i=$(index "$n")
		ip netns add "$TAG-$n"
		ip -n "$TAG-hub" link add "${TAG}h$i" type veth peer name "${TAG}v$i" netns "$TAG-$n"
		ip -n "$TAG-hub" link set "${TAG}h$i" master br0 up
		ip -n "$TAG-$n" link set lo up
		ip -n "$TAG-$n" addr add "$(addr "$n")/24" dev "${TAG}v$i"
		ip -n "$TAG-$n" link set "${TAG}v$i" up
		# shellcheck disable=SC2086
		netem "$n" $base 2>/dev/null || echo "no netem qdisc in this kernel: $n's link as is" >&2
	done
	"$NACRE" format --mgs --fsname $FSNAME --mgsnode $MGSNODE "$DIR/mgs" >/dev/null
	for n in mdt0 mdt1 ost0 ost1 ost2; do
		"$NACRE" format "--${n:0:3}" --index "${n:3}" --fsname $FSNAME --mgsnode $MGSNODE \
			--key "$DIR/mgs/key" "$DIR/$n" >/dev/null
	done
	for n in mgs ost0 ost1 ost2 mdt0 mdt1; do
		local port=0
		[ "$n" = mgs ] && port=9880
		nsenter --net="/run/netns/$TAG-$n" -- "$NACRE" serve "$DIR/$n" \
			--listen "$(addr "$n"):$port" >"$DIR/$n.out" 2>"$DIR/$n.log" &
		echo $! >"$DIR/$n.pid"
		wait_for 90 grep -qs "serving on" "$DIR/$n.out" || { echo "$n did not start" >&2; exit 1; }
	done
	for n in c0 c1; do
		mkdir -p "$DIR/mnt-$n"
		NACRE_RUN_DIR="$DIR/run-$n" nsenter --net="/run/netns/$TAG-$n" -- "$NACRE" mount \
			"$MGSNODE:/$FSNAME" "$DIR/mnt-$n" --key "$DIR/mgs/client.key" >"$DIR/$n.out" 2>"$DIR/$n.log" &
		echo $! >"$DIR/$n.pid"
		wait_for 90 mountpoint -q "$DIR/mnt-$n" || { echo "$n did not mount" >&2; exit 1; }
	done
	echo "up: clients on $DIR/mnt-c0 and $DIR/mnt-c1; links: $base"
}

down() {
	local n
	for n in c0 c1; do
		mountpoint -q "$DIR/mnt-$n" 2>/dev/null && umount -l "$DIR/mnt-$n"
	done
	for n in c1 c0 mdt1 mdt0 ost2 ost1 ost0 mgs; do
		if [ -f "$DIR/$n.pid" ]; then
			kill "$(cat "$DIR/$n.pid")" 2>/dev/null || true
			rm -f "$DIR/$n.pid"
		fi
	done
	sleep 1
	for n in hub "${NODES[@]}"; do
		ip netns del "$TAG-$n" 2>/dev/null || true
	done
	rm -rf "$DIR"
	echo down
}

case "${1:-}" in
up) shift; up "$@" ;;
down) down ;;
# The node's bridge port goes down: its packets are lost both ways, nothing is reset.
partition) ip -n "$TAG-hub" link set "${TAG}h$(index "$2")" down ;;
heal) ip -n "$TAG-hub" link set "${TAG}h$(index "$2")" up ;;
netem) n=$2; shift 2; netem "$n" "$@" ;;
status)
	for n in "${NODES[@]}"; do
		echo "$n $(addr "$n") $(tc -n "$TAG-$n" qdisc show dev "${TAG}v$(index "$n")" | head -1)"
	done
	;;
*) sed -n '2,17p' "$0"; exit 2 ;;
esac
