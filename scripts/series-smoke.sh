#!/usr/bin/env bash
# A small `nacre series` (PaF then IOR at each capacity and fragmentation level) on a local
# directory and on a nacre mount, checking that each run writes its CSV, JSON and plots.
set -euo pipefail
NACRE=${1:-${NACRE:-target/release/nacre}}
work=$(mktemp -d /tmp/nacre-series.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export NACRE_RUN_DIR="$work/run"
cleanup() {
    "$NACRE" down --force "$work/fs" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

args=(--capacity-kb 65536 --capacities 20,40 --frags 0,30 --file-size 1m --xfers 256k,1m
      --block 8m --iterations 2 --paf-threads 2 --seed 7)

check() {
    local out=$1
    for f in series.csv series-summary.json; do
        [ -s "$out/$f" ] || { echo "series-smoke: $out/$f is missing or empty" >&2; exit 1; }
    done
    local svg png
    svg=$(find "$out" -name '*.svg' | wc -l)
    png=$(find "$out" -name '*.png' | wc -l)
    [ "$svg" -gt 0 ] && [ "$png" -gt 0 ] || { echo "series-smoke: no plots in $out" >&2; exit 1; }
    echo "series-smoke: $out: $(($(wc -l < "$out/series.csv") - 1)) rows, $svg SVG and $png PNG plots"
}

mkdir -p "$work/local"
timeout 300 "$NACRE" series "$work/local" --out "$work/out-local" "${args[@]}" >/dev/null
check "$work/out-local"

"$NACRE" up "$work/fs" --mount "$work/mnt" --background --port "$port" --osts 2 >/dev/null
timeout 300 "$NACRE" series "$work/mnt" --out "$work/out-nacre" "${args[@]}" >/dev/null
check "$work/out-nacre"
"$NACRE" down "$work/fs" >/dev/null
