#!/usr/bin/env bash
# The memory budget as resident size: a fresh `nacre up --memory BUDGET` runs the seed-004
# six-job fio mix (posixaio, iodepth 32, 20k+ small files), a 12k-file `tar x`, mdtest with
# 100k files and IOR through its mount, one after the other. For each it prints the peak
# resident size of the nacre process (sampled every 0.2 s), its size 10 s after the files
# are gone, and the allocator's live bytes (lctl get_param memused); PASS when the peak
# stays within the budget and the process returns near its idle size.
#
#   scripts/memory-budget.sh [path/to/nacre]
#
# Environment: MEMORY=1G (the --memory budget), WORKLOADS="mix tar mdtest ior",
# MIX_FILES=6000 (files of each small-file job), MDTEST_FILES=100000, IOR_BLOCK=1g.
# Needs root for FUSE, fio, tar and python3 (scripts/install-deps.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
N=$(realpath "${1:-${CARGO_TARGET_DIR:-target}/release/nacre}")
[ -x "$N" ] || { echo "no nacre binary at $N (cargo build --release -p nacre)" >&2; exit 2; }
MEMORY=${MEMORY:-1G}
WORKLOADS=${WORKLOADS:-"mix tar mdtest ior"}
MIX_FILES=${MIX_FILES:-6000}
MDTEST_FILES=${MDTEST_FILES:-100000}
IOR_BLOCK=${IOR_BLOCK:-1g}
for t in fio tar python3; do
    command -v "$t" >/dev/null || { echo "memory-budget: $t is missing" >&2; exit 2; }
done

work=$(mktemp -d /tmp/nacre-memory.XXXXXX)
export NACRE_RUN_DIR=$work/run
mnt=$work/mnt
sampler=
cleanup() {
    [ -n "$sampler" ] && kill "$sampler" 2>/dev/null
    "$N" down --force "$work/fs" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

budget=$(python3 -c "import sys; s=sys.argv[1].upper(); m={'K':1<<10,'M':1<<20,'G':1<<30}; print(int(float(s[:-1])*m[s[-1]]) if s[-1] in m else int(s))" "$MEMORY")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$N" up "$work/fs" --mount "$mnt" --background --port "$port" --memory "$MEMORY" >/dev/null
pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$work/fs/run.json")
rss() { awk '/VmRSS/ { print $2 * 1024 }' "/proc/$pid/status"; }
mib() { echo $(($1 >> 20)); }
sleep 2
idle=$(rss)
echo "nacre up --memory $MEMORY: idle RSS $(mib "$idle") MiB"
printf '%-8s %12s %12s %12s %10s  %s\n' workload "peak MiB" "after MiB" "memused MiB" "time s" verdict
failed=0

# run NAME CMD...: the workload under a sampler of the nacre process's RSS.
run() {
    local name=$1 start=$SECONDS peak=0 after used verdict
    shift
    : >"$work/samples"
    (while kill -0 "$pid" 2>/dev/null; do rss >>"$work/samples"; sleep 0.2; done) &
    sampler=$!
    if ! "$@" >"$work/$name.log" 2>&1; then
        echo "memory-budget: $name failed; its output:" >&2
        tail -n 20 "$work/$name.log" >&2
        failed=$((failed + 1))
    fi
    local took=$((SECONDS - start))
    rm -rf "${mnt:?}"/*
    sleep 10
    kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true
    sampler=
    peak=$(sort -n "$work/samples" | tail -n 1)
    after=$(rss)
    used=$("$N" lctl get_param -n memused 2>/dev/null || echo 0)
    verdict=PASS
    if [ "${peak:-0}" -gt "$budget" ]; then verdict="FAIL (peak over the budget)"; fi
    if [ "$after" -gt $((idle * 2 > idle + (64 << 20) ? idle * 2 : idle + (64 << 20))) ]; then
        verdict="FAIL (did not return near idle)"
    fi
    [ "$verdict" = PASS ] || failed=$((failed + 1))
    printf '%-8s %12s %12s %12s %10s  %s\n' "$name" "$(mib "${peak:-0}")" "$(mib "$after")" \
        "$(mib "$used")" "$took" "$verdict"
}

mix() {
    cat >"$work/mix.fio" <<EOF
[global]
ioengine=posixaio
iodepth=32
directory=$mnt/mix
[randwrite-1m]
rw=randwrite
bs=1M
nrfiles=$((MIX_FILES / 6))
filesize=2M
[randread-32k-zipf]
rw=randread
bs=32K
nrfiles=$MIX_FILES
filesize=64K
random_distribution=zipf:1.2
[write-16k]
rw=write
bs=16K
nrfiles=$MIX_FILES
filesize=64K
[write-8k]
rw=write
bs=8K
nrfiles=$MIX_FILES
filesize=32K
[read-1m]
rw=read
bs=1M
nrfiles=$((MIX_FILES / 20))
filesize=3M
[write-256k]
rw=write
bs=256K
nrfiles=$((MIX_FILES / 6))
filesize=2M
EOF
    mkdir -p "$mnt/mix"
    fio "$work/mix.fio"
}

tarx() {
    # 12,000 files of 1 to 8 KiB in 120 directories, made once outside the mount.
    python3 - "$work/src.tar" <<'EOF'
import io, random, sys, tarfile
rng = random.Random(4)
with tarfile.open(sys.argv[1], 'w') as t:
    for i in range(12000):
        data = rng.randbytes(rng.randint(1024, 8192))
        info = tarfile.TarInfo(f'tree/d{i % 120}/f{i}')
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
EOF
    tar -xf "$work/src.tar" -C "$mnt"
}

mdtest() {
    mkdir -p "$mnt/mdtest"
    "$N" bench mdtest -F -n "$MDTEST_FILES" -d "$mnt/mdtest"
}

ior() {
    "$N" bench ior -w -r -e -t 1m -b "$IOR_BLOCK" -o "$mnt/ior.dat"
}

for w in $WORKLOADS; do
    case $w in
        mix) run mix mix ;;
        tar) run tar tarx ;;
        mdtest) run mdtest mdtest ;;
        ior) run ior ior ;;
        *) echo "memory-budget: unknown workload '$w' (mix tar mdtest ior)" >&2; exit 2 ;;
    esac
done
"$N" lctl get_param memory_stats | sed 's/^/  /'
echo "== $failed failed"
exit $((failed > 0))
