#!/usr/bin/env bash
# Lossy-link benchmark: Quiver's client against a real `mq dev`, both inside
# a private network namespace whose loopback drops packets at random
# (iptables -m statistic), comparing TCP and QUIC for 32 concurrent
# in-flight sync sends of 1 KiB at 0%, 1% and 5% loss.
#
#   scripts/lossy-bench.sh [seconds per run, default 10] [rounds, default 1] [loss rates, default "0 0.01 0.05"]
#
# Each round starts a fresh namespace and `mq dev` per loss rate and runs
# both transports, alternating which goes first between rounds (the load
# of a shared machine drifts). Each LOSSY line also gives the CPU time per
# message of the client and of the server process.
#
# Needs root (or unprivileged user namespaces), unshare and iptables
# (apt-get install -y iptables). Prints one LOSSY line per run; the figures
# in docs/lab/BENCHMARKS.md come from it. `tc netem` is not available on these
# machines, so the link adds loss only, no delay.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-10}
ROUNDS=${2:-1}
LOSSES=${3:-0 0.01 0.05}
if ! command -v iptables >/dev/null; then
  echo "lossy-bench: iptables is missing (apt-get install -y iptables); skipping" >&2
  exit 0
fi
if ! unshare -n true 2>/dev/null; then
  echo "lossy-bench: cannot create a network namespace here (unshare -n); skipping" >&2
  exit 0
fi
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/mq" ./cmd/mq
go test -c -o "$bin/lossy.test" ./bench/lossy
for round in $(seq 1 "$ROUNDS"); do
  order=tcp,quic
  if [ $((round % 2)) = 0 ]; then order=quic,tcp; fi
  for loss in $LOSSES; do
    echo "round=$round loss=$loss order=$order load:$(uptime | sed 's/.*load average://')"
    unshare -n sh -c "
      ip link set lo up
      if [ $loss != 0 ]; then iptables -A INPUT -i lo -m statistic --mode random --probability $loss -j DROP; fi
      QUIVER_MQ_BINARY=$bin/mq QUIVER_LOSSY_SECONDS=$SECS QUIVER_LOSSY_LOSS=$loss QUIVER_LOSSY_ORDER=$order $bin/lossy.test -test.run TestLossyLink -test.timeout 10m
    " | grep '^LOSSY' || true
  done
done
