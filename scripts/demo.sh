#!/usr/bin/env bash
# Brings up a nacre file system on this machine and shows it working. It stays up
# afterwards; `nacre down` (printed at the end) stops it.
#   DIR (default /tmp/nacre-demo) holds the targets, MNT (default /mnt/nacre) the mount.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-/tmp/nacre-demo}
MNT=${2:-/mnt/nacre}

scripts/install-deps.sh
echo "== building nacre (release)"
cargo build --release --quiet -p nacre
NACRE="${CARGO_TARGET_DIR:-target}/release/nacre"

"$NACRE" down "$DIR" >/dev/null 2>&1 || true
echo "== nacre up $DIR --mount $MNT --background"
"$NACRE" up "$DIR" --mount "$MNT" --background

echo
echo "== lfs df -h $MNT"
"$NACRE" lfs df -h "$MNT"

echo "== a file striped over 2 OSTs with 1 MiB stripes"
mkdir -p "$MNT/demo"
rm -f "$MNT/demo/striped"
"$NACRE" lfs setstripe -c 2 -S 1M "$MNT/demo/striped"
dd if=/dev/urandom of="$MNT/demo/striped" bs=1M count=8 conv=notrunc,fsync status=none
"$NACRE" lfs getstripe "$MNT/demo/striped"

echo "== a copy of this source tree, checked byte for byte"
rm -rf "$MNT/demo/src"
cp -a crates "$MNT/demo/src"
diff -r crates "$MNT/demo/src" && echo "identical: $(find "$MNT/demo/src" -type f | wc -l) files"

echo "== lfs path2fid / fid2path"
FID=$("$NACRE" lfs path2fid "$MNT/demo/striped")
echo "$MNT/demo/striped -> $FID -> $("$NACRE" lfs fid2path "$MNT" "$FID")"

echo
"$NACRE" status "$DIR"
echo
echo "nacre is up: use it at $MNT. Stop it with: $NACRE down $DIR"
