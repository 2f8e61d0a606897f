#!/usr/bin/env bash
# Prints a Markdown table of mq's stripped static binary sizes, the full
# build against the edge build (-tags nogrpc, docs/guide/edge.md), for
# the targets given as os/arch[/variant] (default: the linux release
# targets and mipsle). Built as make release builds (CGO_ENABLED=0,
# -trimpath, -ldflags "-s -w"); docs/lab/BENCHMARKS.md quotes its output.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(linux/amd64 linux/arm64 linux/arm/7 linux/mipsle/softfloat)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "| target | full (bytes) | edge, -tags nogrpc (bytes) | saved |"
echo "|---|---|---|---|"
for t in "${targets[@]}"; do
  IFS=/ read -r os arch variant <<<"$t"
  env=(CGO_ENABLED=0 GOOS="$os" GOARCH="$arch")
  case "$arch" in
    arm) env+=(GOARM="${variant:-7}") ;;
    mips|mipsle) env+=(GOMIPS="${variant:-softfloat}") ;;
  esac
  env "${env[@]}" go build -trimpath -ldflags "-s -w" -o "$out/full" ./cmd/mq
  env "${env[@]}" go build -tags nogrpc -trimpath -ldflags "-s -w" -o "$out/edge" ./cmd/mq
  full=$(stat -c %s "$out/full")
  edge=$(stat -c %s "$out/edge")
  awk -v t="$t" -v f="$full" -v e="$edge" 'BEGIN {
    printf "| %s | %d (%.1f MiB) | %d (%.1f MiB) | %.1f %% |\n", t, f, f/1048576, e, e/1048576, 100*(f-e)/f }'
done
echo
echo "(go $(go env GOVERSION), $(git describe --always --dirty 2>/dev/null || echo unknown), $(date -u +%Y-%m-%d))"
