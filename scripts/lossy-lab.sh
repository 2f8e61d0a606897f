#!/usr/bin/env bash
# The lossy-link laboratory: for each link profile, bench/lossy/linkemu
# creates two network namespaces joined by a veth pair and impairs the
# packets between them in user space (delay, jitter, random and bursty
# loss, reordering, rate); `mq dev` and an embedded nats-server run in
# namespace B and the workloads of bench/lossy TestLabWorkloads (sync1,
# sync32, async32, pull, migrate) run from namespace A over TCP, QUIC and
# NATS, rotating which transport goes first between rounds (migrate is
# QUIC only). Prints the LAB lines (with packet counters) and, at the end,
# the markdown tables of medians (TestLabTable).
#
#   scripts/lossy-lab.sh [seconds per cell, default 4] [rounds, default 2] [profiles, default "lan loss1 loss5 wifi cellular satellite"] [workloads]
#
# Needs root and /dev/net/tun. Keep runs short on a shared machine: a
# round of all six profiles at 4 s per cell took about 4 minutes with
# two transports and four workloads; with three and migrate, about 7.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-4}
ROUNDS=${2:-2}
PROFILES=${3:-lan loss1 loss5 wifi cellular satellite}
WORKLOADS=${4:-sync1,sync32,async32,pull,migrate}
TRANSPORTS=${QUIVER_LAB_TRANSPORTS:-tcp,quic,nats}
if [ "$(id -u)" != 0 ] || [ ! -e /dev/net/tun ]; then
  echo "lossy-lab: needs root and /dev/net/tun; skipping" >&2
  exit 0
fi
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
  # Rotate the transports: round 1 tcp,quic,nats; round 2 quic,nats,tcp; ...
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
