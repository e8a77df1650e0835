#!/usr/bin/env bash
# Runs every test: formatting and lints, the unit and integration tests of every crate
# (including FUSE mounts used by real programs), then the external POSIX suites
# (pjdfstest, fsx, fio, dbench) on a real mount. Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
start=$(date +%s)

scripts/install-deps.sh --test

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --release --workspace --all-targets --quiet -- -D warnings

echo "== cargo test"
cargo test --release --workspace --quiet

echo "== fuzz every decoder briefly (scripts/fuzz.sh runs them longer)"
# No sanitizer here: the AddressSanitizer build alone takes longer than this step's few
# minutes on two cores; panics, hangs and the RSS limit are still caught.
scripts/fuzz.sh --seconds "${FUZZ_SECONDS:-5}" --sanitizer none

echo "== external suites on a real mount"
cargo build --release --quiet -p nacre
scripts/external-suites.sh "${CARGO_TARGET_DIR:-target}/release/nacre"

echo "== a small measurement series (PaF + IOR, CSV and plots) on a local directory and a mount"
scripts/series-smoke.sh "${CARGO_TARGET_DIR:-target}/release/nacre"

echo "== all tests passed in $(( $(date +%s) - start ))s"
