#!/usr/bin/env bash
# Fuzzes every decoder with libFuzzer (cargo-fuzz; the targets are in fuzz/fuzz_targets, one
# per decoder): builds the targets, runs each for N seconds from its checked-in seeds
# (fuzz/seeds/TARGET) plus what earlier runs found (fuzz/corpus/TARGET), and fails if any
# target crashes, panics, allocates past its limit or hangs, printing the input that did it
# (fuzz/artifacts/TARGET/...; replay with `cargo +nightly fuzz run TARGET FILE`).
#
#   scripts/fuzz.sh [--seconds N] [--sanitizer address|none] [TARGET...]
#
# Long mode (the default): 300 s per target under AddressSanitizer, which also enforces the
# per-allocation limit below. CI (scripts/test.sh) runs a few seconds per target with
# `--sanitizer none`: the ASan build alone takes longer than CI's fuzz budget on two
# cores; without it, panics, hangs and the RSS limit are still caught.
# Targets run side by side, FUZZ_JOBS at a time (default: one per core). Installs the
# nightly toolchain and cargo-fuzz first if they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export PATH="$HOME/.cargo/bin:$PATH"

seconds=300
sanitizer=address
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --sanitizer|-s) sanitizer="$2"; shift 2 ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done

# An input that makes a decoder allocate more than this at once is a defect (ASan only),
# as is a process that grows past the RSS limit or an input that takes longer than the
# timeout: no stored record or message is anywhere near these.
MALLOC_LIMIT_MB=512
RSS_LIMIT_MB=2048
TIMEOUT_S=10

scripts/install-deps.sh --fuzz

# One build directory per sanitizer: their flags differ, so sharing one would rebuild
# everything at each switch.
build_dir="${FUZZ_TARGET_DIR:-${CARGO_TARGET_DIR:-$root/target}/fuzz}-$sanitizer"
fuzz() { (cd "$root" && cargo +nightly fuzz "$@"); }

if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(fuzz list)
fi

start=$(date +%s)
echo "== fuzz: building ${#targets[@]} targets (sanitizer $sanitizer)"
fuzz build --sanitizer "$sanitizer" --target-dir "$build_dir"
echo "== fuzz: built in $(( $(date +%s) - start ))s"

# Targets run side by side, one per core (FUZZ_JOBS): each libFuzzer process uses one.
at_once=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT

# Runs target $1; its output goes to $results/$1.out and its verdict (ok or failed) to
# $results/$1.verdict. Always returns 0: the verdicts are read once all have run.
run_target() {
    local t=$1
    local corpus="$root/fuzz/corpus/$t" seeds="$root/fuzz/seeds/$t"
    local artifacts="$root/fuzz/artifacts/$t" log="$results/$t.log"
    mkdir -p "$corpus" "$artifacts"
    [ -d "$seeds" ] || seeds=""
    if fuzz run "$t" --sanitizer "$sanitizer" --target-dir "$build_dir" \
        "$corpus" ${seeds:+"$seeds"} -- \
        -max_total_time="$seconds" -timeout="$TIMEOUT_S" \
        -rss_limit_mb="$RSS_LIMIT_MB" -malloc_limit_mb="$MALLOC_LIMIT_MB" \
        -artifact_prefix="$artifacts/" -print_final_stats=1 >"$log" 2>&1; then
        { grep -E '^stat::number_of_executed_units|^Done [0-9]+ runs' "$log" | tail -1 || true; } >"$results/$t.out"
        echo ok >"$results/$t.verdict"
    else
        {
            tail -40 "$log"
            echo "fuzz: $t FAILED; input in:" \
                $(grep -oE "$artifacts/(crash|leak|timeout|oom|slow-unit)-[0-9a-f]+" "$log" | sort -u)
        } >"$results/$t.out"
        echo failed >"$results/$t.verdict"
    fi
    return 0
}

echo "== fuzz: ${#targets[@]} targets for ${seconds}s each, $at_once at a time"
for t in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$at_once" ]; do
        wait -n || true
    done
    run_target "$t" &
done
wait

failed=()
for t in "${targets[@]}"; do
    echo "== fuzz: $t"
    cat "$results/$t.out" 2>/dev/null || true
    [ "$(cat "$results/$t.verdict" 2>/dev/null)" = ok ] || failed+=("$t")
done

echo "== fuzz: ${#targets[@]} targets in $(( $(date +%s) - start ))s"
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: failing targets: ${failed[*]}" >&2
    exit 1
fi
