#!/usr/bin/env bash
# Several "hosts" on this machine: network namespaces joined by veth pairs on
# a private bridge, each with its own address, and mpirun across them over
# TCP as across servers (a hostfile, Open MPI's tcp transports bound to that
# network; a launch agent enters each namespace where ssh would log in).
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2. Every namespace, link and
# process it made is removed when it exits, whatever the outcome.
#
#   scripts/netns-hosts.sh N -- MPIRUN_ARGS...
#   scripts/netns-hosts.sh 2 -- -np 2 $PWD/build/launcher/polyhal run $PWD/pretrain.yaml --set collective.engine=mpi
# (absolute paths: each "host" starts the command on its own)
#
# Sourced (`. scripts/netns-hosts.sh`), it defines netns_up N, netns_mpirun
# ARGS... and netns_down for a script of its own (tests/multihost_test.sh).
# NETNS_PREFIX names the namespaces (default polyhal-<pid>); the hosts are
# 10.X.Y.1 .. 10.X.Y.N/24, mpirun on a launch host 10.X.Y.253, the bridge
# 10.X.Y.254, X.Y picked from the pid.
# NETNS_RATE (e.g. 2gbit) caps each host's link both ways, as a real
# network would (tc's token bucket); unset, the link is as fast as the CPU
# copies.

netns_prefix=${NETNS_PREFIX:-ph$$}
netns_hosts=0
netns_work=""
netns_subnet="10.$((($$ / 250) % 200 + 20)).$(($$ % 250))."

# Whether this machine lets us make namespaces (prints why not).
netns_possible() {
  if ! command -v ip > /dev/null; then echo "iproute2 (ip) is not installed"; return 1; fi
  if ! command -v mpirun > /dev/null; then echo "Open MPI (mpirun) is not installed"; return 1; fi
  local probe="${netns_prefix}-probe"
  if ! ip netns add "$probe" 2> /dev/null; then
    echo "$(id -un) may not create network namespaces here (ip netns add needs CAP_NET_ADMIN and CAP_SYS_ADMIN: root outside a restricted container)"
    return 1
  fi
  ip netns del "$probe"
}

netns_down() {
  local i
  for i in $(seq 1 "$netns_hosts"); do
    ip netns pids "$netns_prefix-h$i" 2> /dev/null | xargs -r kill -9 2> /dev/null
    ip netns del "$netns_prefix-h$i" 2> /dev/null
  done
  ip netns pids "$netns_prefix-h0" 2> /dev/null | xargs -r kill -9 2> /dev/null
  ip netns del "$netns_prefix-h0" 2> /dev/null
  ip link del "${netns_prefix}br" 2> /dev/null
  [ -n "$netns_work" ] && rm -rf "$netns_work"
  netns_hosts=0
  return 0
}

# netns_up N: N hosts h1..hN; writes $netns_work/hostfile (one slot each).
netns_up() {
  netns_hosts=$1
  netns_work=$(mktemp -d)
  ip link add "${netns_prefix}br" type bridge forward_delay 0
  ip addr add "${netns_subnet}254/24" dev "${netns_prefix}br"
  ip link set "${netns_prefix}br" up
  : > "$netns_work/hostfile"
  local i ns
  for i in $(seq 0 "$netns_hosts"); do
    ns=$netns_prefix-h$i
    ip netns add "$ns"
    ip link add "${netns_prefix}v$i" type veth peer name eth0 netns "$ns"
    ip link set "${netns_prefix}v$i" master "${netns_prefix}br" up
    ip -n "$ns" addr add "$netns_subnet$((i == 0 ? 253 : i))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    if [ -n "${NETNS_RATE:-}" ] && [ "$i" -gt 0 ]; then
      ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$NETNS_RATE" burst 1mb latency 100ms
      tc qdisc add dev "${netns_prefix}v$i" root tbf rate "$NETNS_RATE" burst 1mb latency 100ms
    fi
    [ "$i" -gt 0 ] && echo "$netns_subnet$i slots=1" >> "$netns_work/hostfile"
  done
  # h0 is the launch host, where mpirun runs (a login node). It gives up on
  # a silent host's daemon after about 13 s of retransmissions instead of
  # Linux's 15 minutes (tcp_retries2 15): a link that goes down ends the
  # job, where the default would keep mpirun waiting after every rank has
  # stopped. docs/scale-out.md says to do the same on a real launch host.
  ip netns exec "$netns_prefix-h0" sysctl -qw net.ipv4.tcp_retries2=5
  # A fresh bridge port may drop the first packets: wait until every host
  # reaches the bridge (a refused TCP connection is an answer; silence is not).
  local tries status
  for i in $(seq 0 "$netns_hosts"); do
    for tries in $(seq 1 50); do
      status=0
      timeout 0.2 ip netns exec "$netns_prefix-h$i" bash -c "exec 3<> /dev/tcp/${netns_subnet}254/9" \
        2> /dev/null || status=$?
      [ "$status" -ne 124 ] && break
    done
  done
  # Where mpirun would ssh to a host, enter its namespace, as that host: its
  # own hostname (a UTS namespace) and its own temporary directory, so the
  # Open MPI daemons of two "hosts" never share a session directory.
  for i in $(seq 1 "$netns_hosts"); do mkdir -p "$netns_work/h$i"; done
  cat > "$netns_work/agent" << 'AGENT'
#!/bin/sh
# agent HOST COMMAND...: COMMAND as host 10.X.Y.N, in namespace @PREFIX@-hN.
n=${1##*.}
shift
export NETNS_COMMAND="$*" NETNS_HOST="@PREFIX@-h$n" TMPDIR="@WORK@/h$n"
exec ip netns exec "$NETNS_HOST" unshare --uts sh -c 'hostname "$NETNS_HOST" && exec sh -c "$NETNS_COMMAND"'
AGENT
  sed -i "s|@PREFIX@|$netns_prefix|g; s|@WORK@|$netns_work|g" "$netns_work/agent"
  chmod +x "$netns_work/agent"
}

# netns_mpirun ARGS...: mpirun over the hosts' hostfile and network.
netns_mpirun() {
  ip netns exec "$netns_prefix-h0" mpirun --allow-run-as-root --hostfile "$netns_work/hostfile" \
    --mca plm_rsh_agent "$netns_work/agent" \
    --mca oob_tcp_if_include "${netns_subnet}0/24" --mca btl_tcp_if_include "${netns_subnet}0/24" \
    --mca btl tcp,self --mca routed direct \
    --mca oob_tcp_keepalive_time 3 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3 "$@"
}

# netns_of N: the namespace of host N (to take its link down, or signal its ranks).
netns_of() { echo "$netns_prefix-h$1"; }

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  [ $# -ge 3 ] && [ "$2" = "--" ] || { sed -n '2,20p' "$0"; exit 2; }
  why=$(netns_possible) || { echo "netns-hosts: $why"; exit 3; }
  trap netns_down EXIT INT TERM
  netns_up "$1"
  shift 2
  netns_mpirun "$@"
fi
