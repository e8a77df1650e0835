#!/usr/bin/env bash
# Installs what nacre needs on a Debian machine: fuse3 to mount, the darshan Python package
# (`nacre darshan-age` reads Darshan logs with it), and with --test the tools the test suite
# runs (fio, dbench, e2fsprogs, attr, acl, git, xfsprogs, iproute2 for the netns cluster,
# and pjdfstest, fsx and outagefs from crates.io, and the nightly toolchain and cargo-fuzz
# for scripts/fuzz.sh). --darshan installs only the darshan package, --fuzz only nightly
# and cargo-fuzz. Safe to run again: it skips what is already there.
set -euo pipefail

want_tests=0
want_fuzz=0
[ "${1:-}" = "--test" ] && want_tests=1 && want_fuzz=1
[ "${1:-}" = "--fuzz" ] && want_fuzz=1

# The darshan package (PyDarshan, with libdarshan-util and real sample logs inside), for the
# Python that `nacre darshan-age` runs: NACRE_PYTHON, or python3.
install_darshan() {
    local py="${NACRE_PYTHON:-python3}"
    if ! command -v "$py" >/dev/null 2>&1; then
        echo "install-deps: $py is missing; install Python 3 (Debian: python3 python3-pip)" >&2
        exit 1
    fi
    if ! "$py" -c 'import darshan' >/dev/null 2>&1; then
        echo "install-deps: pip install darshan (for $py)"
        "$py" -m pip install --quiet darshan ||
            "$py" -m pip install --quiet --break-system-packages darshan
    fi
    "$py" -c 'import darshan' || {
        echo "install-deps: the darshan package does not import in $py" >&2
        exit 1
    }
}

if [ "${1:-}" = "--darshan" ]; then
    install_darshan
    exit 0
fi

need_root() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps: installing Debian packages needs root (try: sudo $0 $*)" >&2
        exit 1
    fi
}

pkgs=(fuse3)
# Python and pip for the darshan package, where the machine has no Python of its own.
command -v "${NACRE_PYTHON:-python3}" >/dev/null 2>&1 || pkgs+=(python3 python3-pip)
# xfsprogs, libfuse-dev and pkg-config: the power-cut harness (xfs_io; building outagefs).
# iproute2 and util-linux (ip, tc, nsenter): the network namespace cluster.
[ $want_tests = 1 ] && pkgs+=(fio dbench e2fsprogs attr acl git xfsprogs libfuse-dev pkg-config
    iproute2 util-linux)
missing=()
for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    need_root "$@"
    echo "install-deps: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

install_darshan

if ! command -v cargo >/dev/null 2>&1; then
    echo "install-deps: cargo is missing; install Rust from https://rustup.rs" >&2
    exit 1
fi

if [ $want_tests = 1 ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
    for tool in pjdfstest fsx outagefs; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            echo "install-deps: cargo install $tool"
            cargo install --quiet "$tool"
        fi
    done
fi

if [ $want_fuzz = 1 ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
    # libFuzzer's instrumentation needs nightly rustc.
    if ! rustup run nightly rustc --version >/dev/null 2>&1; then
        echo "install-deps: rustup toolchain install nightly"
        rustup toolchain install nightly --profile minimal
    fi
    if ! command -v cargo-fuzz >/dev/null 2>&1; then
        echo "install-deps: cargo install cargo-fuzz"
        cargo install --quiet --locked cargo-fuzz
    fi
fi
