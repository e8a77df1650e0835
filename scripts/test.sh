#!/usr/bin/env bash
# Runs every test: formatting and lints, the unit and integration tests of every crate
# (including FUSE mounts used by real programs), then the external POSIX suites
# (pjdfstest, fsx, fio, dbench) on a real mount. Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
start=$(date +%s)
# Each step says when it began, so a slow CI run shows where its time went.
step() { echo "== $* (at $(( $(date +%s) - start ))s)"; }

step "install what the tests need"
scripts/install-deps.sh --test

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --release --workspace --all-targets --quiet -- -D warnings

step "cargo test: build"
cargo test --release --workspace --quiet --no-run

step "cargo test: run"
cargo test --release --workspace --quiet

step "fuzz every decoder briefly (scripts/fuzz.sh runs them longer)"
# No sanitizer here: the AddressSanitizer build alone takes longer than this step's few
# minutes on two cores; panics, hangs and the RSS limit are still caught.
scripts/fuzz.sh --seconds "${FUZZ_SECONDS:-5}" --sanitizer none

step "external suites on a real mount"
# The binary the tests built, with the same features: `-p nacre` alone would resolve the
# dependencies' features without the dev-dependencies and rebuild half the workspace.
cargo build --release --quiet --workspace --all-targets
scripts/external-suites.sh "${CARGO_TARGET_DIR:-target}/release/nacre"

step "a small measurement series (PaF + IOR, CSV and plots) on a local directory and a mount"
scripts/series-smoke.sh "${CARGO_TARGET_DIR:-target}/release/nacre"

echo "== all tests passed in $(( $(date +%s) - start ))s"
