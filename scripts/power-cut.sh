#!/usr/bin/env bash
# A simulated power cut for a target's storage: the target's directory lives on ext4 in an
# image that `outagefs` exposes as a file (recording every write and every sync reaching
# it), attached to a loop device. A cut kills the target's processes at once, shuts ext4
# down without flushing anything, and keeps only the writes that a sync made durable:
# every write after the last sync is dropped, as a disk with a volatile cache loses it.
#
#   power-cut.sh install                  installs outagefs and xfs_io when missing
#   power-cut.sh start STATE MNT [SIZE]   image in STATE (new: SIZE, default 256M, ext4),
#                                         recorded and mounted on MNT
#   power-cut.sh cut STATE MNT [PID...]   kill -9 PIDs, cut: STATE's image is then what
#                                         survived; `start` mounts it again
#   power-cut.sh cases STATE [N]          after a cut: up to N `outagefs gen-tests`
#                                         filters over the writes after the last sync
#                                         (each keeps a different subset of them)
#   power-cut.sh replay STATE FILTER      after a cut: the image with that filter instead
#   power-cut.sh discard STATE MNT        unmount and forget every write since `start`
#                                         (the last cut's recording stays for `replay`)
#   power-cut.sh stop STATE MNT           clean unmount (everything kept), recording ends
#   power-cut.sh remove STATE MNT         stop whatever runs and delete STATE
#   power-cut.sh suite [ROUNDS] [SUBSETS] the crash-consistency suite (crates/nacre/tests/it/power_cut.rs)
#                                         ROUNDS times (default 3), a cut per operation and
#                                         SUBSETS (default 16) random other outcomes of each
#
# Needs root, a kernel with loop devices and FUSE, e2fsprogs, xfsprogs (`xfs_io` sends
# ext4 the shutdown ioctl) and outagefs (`install`, run by `start`, installs the last two).
set -euo pipefail
export PATH="$HOME/.cargo/bin:$PATH"

die() {
    echo "power-cut: $*" >&2
    exit 1
}

[ $# -ge 1 ] || die "usage: power-cut.sh install | suite | start|cut|cases|replay|discard|stop|remove STATE ..."
cmd=$1
shift
if [ "$cmd" = suite ]; then
    rounds=${1:-3}
    subsets=${2:-16}
    cd "$(dirname "$0")/.."
    for r in $(seq "$rounds"); do
        echo "== power-cut suite, round $r of $rounds ($subsets outcomes per cut)"
        NACRE_POWER_CUT_EACH=1 NACRE_POWER_CUT_SUBSETS=$subsets \
            cargo test --release --quiet -p nacre --test it power_cut:: -- --test-threads=1
    done
    exit 0
fi
state=${1:-}
[ $# -eq 0 ] || shift
[ "$cmd" = install ] || [ -n "$state" ] || die "usage: power-cut.sh $cmd STATE ..."

# Files in STATE: base (the image), changes (writes recorded since start), dev (the
# file outagefs serves), ctl (a FIFO: a line on it makes outagefs save and exit),
# holder.pid (keeps ctl open), outagefs.pid, loop (the loop device), rec.base and
# rec.changes (the last recording, kept for `cases` and `replay`).

# A killed process is gone once it is a zombie: its parent may be the one waiting on us.
alive() {
    local st
    st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# outagefs (crates.io; building it needs libfuse 2 headers) and xfs_io (xfsprogs),
# installed when missing.
install_tools() {
    local pkgs=()
    command -v xfs_io >/dev/null || pkgs+=(xfsprogs)
    command -v mkfs.ext4 >/dev/null || pkgs+=(e2fsprogs)
    if ! command -v outagefs >/dev/null; then
        for p in libfuse-dev pkg-config; do
            dpkg -s "$p" >/dev/null 2>&1 || pkgs+=("$p")
        done
    fi
    if [ ${#pkgs[@]} -gt 0 ]; then
        [ "$(id -u)" -eq 0 ] || die "installing ${pkgs[*]} needs root"
        echo "power-cut: apt-get install ${pkgs[*]}" >&2
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}"; } >&2 ||
            die "apt-get install ${pkgs[*]} failed"
    fi
    if ! command -v outagefs >/dev/null; then
        command -v cargo >/dev/null || die "outagefs is missing and there is no cargo to install it"
        echo "power-cut: cargo install outagefs" >&2
        cargo install --quiet --locked outagefs >&2 || die "cargo install outagefs failed"
    fi
    command -v outagefs >/dev/null && command -v xfs_io >/dev/null || die "outagefs or xfs_io is still missing"
}

is_fuse_mounted() {
    grep -q " $(realpath "$1") fuse" /proc/self/mounts 2>/dev/null
}

# Ends the recording: outagefs writes its changes file and unmounts.
stop_outagefs() {
    if [ -f "$state/outagefs.pid" ]; then
        local pid
        pid=$(cat "$state/outagefs.pid")
        if kill -0 "$pid" 2>/dev/null; then
            echo >"$state/ctl"
            for _ in $(seq 600); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.05
            done
            kill -0 "$pid" 2>/dev/null && die "outagefs (pid $pid) did not save and exit"
        fi
        rm -f "$state/outagefs.pid"
    fi
    if [ -f "$state/holder.pid" ]; then
        kill "$(cat "$state/holder.pid")" 2>/dev/null || true
        rm -f "$state/holder.pid"
    fi
    if is_fuse_mounted "$state/dev"; then
        fusermount -u "$state/dev" 2>/dev/null || umount -l "$state/dev" || true
    fi
}

detach_loop() {
    if [ -f "$state/loop" ]; then
        losetup -d "$(cat "$state/loop")" 2>/dev/null || true
        rm -f "$state/loop"
    fi
}

# The image as the last recording left it, with FILTER applied (`outagefs merge`).
apply_filter() {
    local filter=$1
    if [ ! -s "$state/rec.changes" ]; then
        cp "$state/rec.base" "$state/base"
        return
    fi
    cp "$state/rec.base" "$state/base.new"
    cp "$state/rec.changes" "$state/changes.new"
    outagefs merge -b "$state/base.new" -c "$state/changes.new" --filter "$filter" >/dev/null
    mv "$state/base.new" "$state/base"
    rm -f "$state/changes.new"
}

# The cut writes one block past the end of the ext4 file system (the image's last block,
# which ext4 does not use): what reaches the disk after it (unmounting, detaching the loop
# device) came after the power went.
marker_offset() {
    echo $(($(stat -c %s "$1") - 4096))
}

# Changes up to and including the last sync before the cut: `K:0` keeps them and drops
# the rest. Prints K and, after it, how many changes came before the cut's marker.
synced_prefix() {
    [ -s "$state/rec.changes" ] || {
        echo "0 0"
        return
    }
    outagefs show -b "$state/rec.base" -c "$state/rec.changes" 2>/dev/null |
        awk -v marker="$(marker_offset "$state/rec.base")" '
            $2 == "Write" && $4 == marker && cut == "" { cut = $1 }
            $2 == "Sync" && cut == "" { last = $1 + 1 }
            END { if (cut == "") cut = NR; print last + 0, cut }'
}

case "$cmd" in
install)
    install_tools
    ;;
start)
    [ $# -ge 1 ] || die "usage: power-cut.sh start STATE MNT [SIZE]"
    mnt=$1
    size=${2:-256M}
    [ "$(id -u)" -eq 0 ] || die "needs root (loop devices and mounts)"
    install_tools
    mkdir -p "$state" "$mnt"
    [ -f "$state/outagefs.pid" ] && die "$state is already recording (cut or stop it first)"
    if [ ! -f "$state/base" ]; then
        truncate -s "$size" "$state/base"
        # The last block stays outside the file system, for the cut's marker.
        mkfs.ext4 -q -F -b 4096 "$state/base" $(($(stat -c %s "$state/base") / 4096 - 1))
    fi
    rm -f "$state/changes"
    : >"$state/dev"
    [ -p "$state/ctl" ] || mkfifo "$state/ctl"
    # A writer keeps the FIFO open, so outagefs waits for a line rather than an end.
    sleep 1000000 >"$state/ctl" 2>/dev/null </dev/null &
    echo $! >"$state/holder.pid"
    outagefs mount --record -b "$state/base" -c "$state/changes" -d "$state/dev" \
        <"$state/ctl" >"$state/outagefs.log" 2>&1 &
    echo $! >"$state/outagefs.pid"
    for _ in $(seq 200); do
        is_fuse_mounted "$state/dev" && break
        sleep 0.05
    done
    is_fuse_mounted "$state/dev" || die "outagefs did not mount $state/dev (see $state/outagefs.log)"
    losetup -f --show "$state/dev" >"$state/loop"
    # Journal commits only when something syncs (or after a minute): what nobody synced
    # stays volatile until the cut, the case the cut is for.
    mount -t ext4 -o commit=60 "$(cat "$state/loop")" "$mnt"
    ;;
cut)
    [ $# -ge 1 ] || die "usage: power-cut.sh cut STATE MNT [PID...]"
    mnt=$1
    shift
    # The target's processes stop at once.
    for pid in "$@"; do
        kill -9 "$pid" 2>/dev/null || true
    done
    for pid in "$@"; do
        while alive "$pid"; do sleep 0.01; done
    done
    # The disk may have received some cached writes before it lost its cache: file data
    # goes to it without a flush or a journal commit, so `cases` can keep some of them
    # (a torn journal tail, a half-written page) while the cut itself drops them all.
    find "$mnt" -xdev -type f -print0 |
        while IFS= read -r -d '' f; do
            xfs_io -r -c "sync_range -b -w -a 0 0" "$f" 2>/dev/null || true
        done
    # The power goes here: nothing the disk receives after the marker is kept, such as
    # the journal superblock (written with a flush) that shutting ext4 down writes, or
    # what unmounting writes. ext4 is shut down so that it writes no more.
    dd if=/dev/zero of="$state/dev" bs=4096 count=1 conv=notrunc status=none \
        seek=$(($(marker_offset "$state/dev") / 4096))
    xfs_io -x -c shutdown "$mnt"
    umount "$mnt"
    detach_loop
    stop_outagefs
    mv "$state/base" "$state/rec.base"
    mv "$state/changes" "$state/rec.changes" 2>/dev/null || : >"$state/rec.changes"
    read -r k _ < <(synced_prefix)
    apply_filter "$k:0"
    ;;
cases)
    n=${1:-8}
    [ -f "$state/rec.changes" ] || die "no cut recorded in $state"
    read -r k cut < <(synced_prefix)
    # gen-tests bounds the cases of each stretch between syncs at 2^m; keep those of
    # the stretch after the last sync, cut at the marker (nothing after the power went
    # may be kept), each once, at most N.
    m=1
    while [ $((1 << m)) -lt "$n" ]; do m=$((m + 1)); done
    outagefs gen-tests -b "$state/rec.base" -c "$state/rec.changes" -m "$m" 2>/dev/null |
        awk -F: -v k="$k" -v w=$((cut - k)) '$1 == k && w > 0 {
                bits = substr($2, 1, w)
                if (bits ~ /1/ && !(bits in seen)) { seen[bits] = 1; print k ":" bits }
            }' | head -n "$n"
    ;;
replay)
    [ $# -ge 1 ] && [ -n "$1" ] || die "usage: power-cut.sh replay STATE FILTER"
    apply_filter "$1"
    ;;
discard)
    [ $# -ge 1 ] || die "usage: power-cut.sh discard STATE MNT"
    mnt=$1
    if mountpoint -q "$mnt"; then umount "$mnt"; fi
    detach_loop
    stop_outagefs
    rm -f "$state/changes"
    ;;
stop)
    [ $# -ge 1 ] || die "usage: power-cut.sh stop STATE MNT"
    mnt=$1
    if mountpoint -q "$mnt"; then umount "$mnt"; fi
    detach_loop
    stop_outagefs
    # Everything written is kept (a clean stop): the recording becomes the image.
    if [ -f "$state/changes" ]; then
        outagefs merge -b "$state/base" -c "$state/changes" >/dev/null
        rm -f "$state/changes"
    fi
    ;;
remove)
    [ $# -ge 1 ] || die "usage: power-cut.sh remove STATE MNT"
    mnt=$1
    if mountpoint -q "$mnt" 2>/dev/null; then umount "$mnt" || umount -l "$mnt"; fi
    detach_loop
    stop_outagefs
    rm -rf "$state"
    ;;
*)
    die "unknown command '$cmd' (install, suite, start, cut, cases, replay, discard, stop, remove)"
    ;;
esac
