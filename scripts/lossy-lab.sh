#!/usr/bin/env bash
# The lossy-link laboratory: for each link profile, bench/lossy/linkemu
# creates two network namespaces joined by a veth pair and impairs the
# packets between them in user space (delay, jitter, random and bursty
# loss, reordering, rate); `mq dev` and an embedded nats-server run in
# namespace B and the workloads of bench/lossy TestLabWorkloads (sync1,
# sync32, async32, pull, push; migrate on request) run from namespace A,
# rotating which transport goes first between rounds (migrate is QUIC
# only). Transports (QUIVER_LAB_TRANSPORTS) are TCP with the CUBIC and the
# BBR controller (set per namespace), QUIC with reno and with Quiver's BBR
# (one `mq dev` per QUIC controller), and optionally nats. Prints the LAB lines (with packet counters) and, at the end,
# the markdown tables of medians (TestLabTable).
#
#   scripts/lossy-lab.sh [seconds per cell, default 4] [rounds, default 2] [profiles, default "lan loss1 loss5 wifi cellular satellite"] [workloads]
#
# Needs root and /dev/net/tun. Keep runs short on a shared machine: a
# round of all six profiles at 4 s per cell took about 4 minutes with
# two transports and four workloads; with three and migrate, about 7.
# Transports: QUIVER_LAB_TRANSPORTS=tcp,quic,nats is the older set (the
# namespaces' default TCP controller, QUIC reno).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-4}
ROUNDS=${2:-2}
PROFILES=${3:-lan loss1 loss5 wifi cellular satellite}
WORKLOADS=${4:-sync1,sync32,async32,pull,push}
TRANSPORTS=${QUIVER_LAB_TRANSPORTS:-tcp-cubic,tcp-bbr,quic-reno,quic-bbr}
if [ "$(id -u)" != 0 ] || [ ! -e /dev/net/tun ]; then
  echo "lossy-lab: needs root and /dev/net/tun; skipping" >&2
  exit 0
fi
# A network namespace other than the first may only pick a TCP controller
# the first allows (tcp_set_default_congestion_control): allow the lab's.
allowed=$(sysctl -n net.ipv4.tcp_allowed_congestion_control)
for cc in cubic bbr; do
  case " $allowed " in *" $cc "*) ;; *) allowed="$allowed $cc" ;; esac
done
sysctl -qw net.ipv4.tcp_allowed_congestion_control="$allowed"
bin=$(mktemp -d)
emu=
cleanup() {
  if [ -n "$emu" ]; then kill -TERM "$emu" 2>/dev/null || true; wait "$emu" 2>/dev/null || true; fi
  rm -rf "$bin"
}
trap cleanup EXIT
if [ -n "${QUIVER_MQ_BINARY:-}" ]; then cp "$QUIVER_MQ_BINARY" "$bin/mq"; else go build -o "$bin/mq" ./cmd/mq; fi
go build -o "$bin/linkemu" ./bench/lossy/linkemu/cmd/linkemu
go test -c -o "$bin/lossy.test" ./bench/lossy
results=${QUIVER_LAB_OUT:-$bin/results.txt}
: >"$results"
for round in $(seq 1 "$ROUNDS"); do
  # Rotate the transports: round 1 a,b,c,d; round 2 b,c,d,a; ...
  IFS=, read -r -a trs <<<"$TRANSPORTS"
  n=${#trs[@]}
  order=
  for i in $(seq 0 $((n - 1))); do order="$order${order:+,}${trs[$(((i + round - 1) % n))]}"; done
  for profile in $PROFILES; do
    echo "round=$round profile=$profile order=$order load:$(uptime | sed 's/.*load average://')"
    "$bin/linkemu" -profile "$profile" -prefix "ql$$" -seed "$round" >"$bin/emu.out" 2>&1 &
    emu=$!
    for _ in $(seq 1 100); do grep -q 'LINKEMU ready' "$bin/emu.out" && break; sleep 0.1; done
    grep -q 'LINKEMU ready' "$bin/emu.out" || { cat "$bin/emu.out" >&2; exit 1; }
    ip netns exec "ql$$a" env QUIVER_MQ_BINARY="$bin/mq" QUIVER_LAB_SECONDS="$SECS" QUIVER_LAB_NS_B="ql$$b" \
      QUIVER_LAB_PROFILE="$profile" QUIVER_LAB_ORDER="$order" QUIVER_LAB_WORKLOADS="$WORKLOADS" \
      "$bin/lossy.test" -test.run 'TestLabWorkloads$' -test.timeout 20m >"$bin/run.out" 2>&1 || { echo "lossy-lab: $profile run failed:" >&2; tail -40 "$bin/run.out" >&2; }
    grep '^LAB' "$bin/run.out" | tee -a "$results" || true
    kill -TERM "$emu"; wait "$emu" || true; emu=
    grep '^LINKEMU stats' "$bin/emu.out" || true
  done
done
QUIVER_LAB_RESULTS="$results" "$bin/lossy.test" -test.run 'TestLabTable$' | grep -e '^|' -e '^$'
