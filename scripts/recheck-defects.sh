#!/usr/bin/env bash
# Re-runs, as a hostile but fair tester would, the reproductions of the defects found by
# trying to break nacre (stale reads between clients, a full disk, oversized requests,
# handshake floods, readable storage, a target deleted under its server, ...), each against
# a fresh `nacre up`, and prints one PASS or FAIL line per item with what was seen.
#
#   scripts/recheck-defects.sh [path/to/nacre]
#
# Needs root (tmpfs mounts, another uid, FUSE), python3, and a built nacre
# (default: $CARGO_TARGET_DIR/release/nacre or target/release/nacre).
set -uo pipefail
cd "$(dirname "$0")/.."
N=${1:-${CARGO_TARGET_DIR:-target}/release/nacre}
N=$(realpath "$N")
[ -x "$N" ] || { echo "no nacre binary at $N (cargo build --release -p nacre)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 2; }

work=$(mktemp -d /tmp/nacre-recheck.XXXXXX)
export NACRE_RUN_DIR=$work/run
failed=0
cleanup() {
    for d in "$work"/fs*; do [ -d "$d" ] && "$N" down --force "$d" >/dev/null 2>&1; done
    for m in "$work"/m*; do mountpoint -q "$m" 2>/dev/null && umount -l "$m"; done
    for t in "$work"/disk*; do mountpoint -q "$t" 2>/dev/null && umount -l "$t"; done
    rm -rf "$work"
}
trap cleanup EXIT

pass() { echo "item $1: PASS - $2"; }
fail() { echo "item $1: FAIL - $2"; failed=$((failed + 1)); }
port=9700
up() { # up NAME [args]: a file system in $work/NAME mounted on $work/m-NAME
    local name=$1; shift; port=$((port + 1))
    "$N" up "$work/$name" --mount "$work/m-$name" --background --port $port "$@" >/dev/null
}
pid_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$work/$1/run.json"; }
ms() { date +%s%3N; }

# 1. Another client's rewrite of the same size, an open reader, mmap.
up fs1 && "$N" mount "$work/fs1" "$work/m2" --background >/dev/null
python3 - "$work/m-fs1" "$work/m2" > "$work/1.out" 2>&1 <<'EOF'
import os, sys, mmap
m1, m2 = sys.argv[1:]
bad = []
open(f'{m1}/f', 'w').write('A' * 5000); open(f'{m2}/f').read()
for c in 'BCD':
    open(f'{m1}/f', 'w').write(c * 5000); os.stat(f'{m2}/f')
    if open(f'{m2}/f').read(3) != c * 3: bad.append(f'rewrite {c}')
R, N = 4109, 200
with open(f'{m1}/r', 'wb') as f: f.truncate(R * N)
rd = os.open(f'{m2}/r', os.O_RDONLY); os.pread(rd, R * N, 0)
wr = os.open(f'{m1}/r', os.O_RDWR); missed = 0
for i in range(N):
    os.pwrite(wr, bytes([65 + i % 26]) * R, i * R); os.fsync(wr)
    missed += os.pread(rd, R, i * R) != bytes([65 + i % 26]) * R
if missed: bad.append(f'open reader missed {missed}/{N}')
with open(f'{m1}/mm', 'wb') as f: f.write(b'x' * 8192)
f2 = open(f'{m2}/mm', 'rb'); held = mmap.mmap(f2.fileno(), 8192, prot=mmap.PROT_READ); held[:1]
f1 = open(f'{m1}/mm', 'r+b'); w = mmap.mmap(f1.fileno(), 8192); w[:4] = b'MMAP'; w.flush(); w.close(); f1.close()
if held[:4] != b'MMAP': bad.append('mmap held on the other client')
print('; '.join(bad) if bad else 'rewrites, 200 fsynced records to an open reader, mmap: all new bytes seen')
sys.exit(1 if bad else 0)
EOF
if [ $? = 0 ]; then pass 1 "$(cat "$work/1.out")"; else fail 1 "$(tail -3 "$work/1.out")"; fi
"$N" umount "$work/m2" >/dev/null 2>&1

# 2. A full disk: ENOSPC, close within 5 s, rm works, the process lives.
mkdir -p "$work/disk2" && mount -t tmpfs -o size=150m tmpfs "$work/disk2"
"$N" up "$work/disk2/fs" --mount "$work/m-disk2" --background --port $((port += 1)) >/dev/null
t0=$(ms); out=$(timeout 60 dd if=/dev/zero of="$work/m-disk2/one" bs=1M count=300 2>&1); t1=$(ms)
timeout 10 rm -f "$work/m-disk2/one"; rmrc=$?
p2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$work/disk2/fs/run.json")
if grep -q 'No space left' <<<"$out" && [ $((t1 - t0)) -lt 30000 ] && [ $rmrc = 0 ] && kill -0 "$p2"; then
    pass 2 "dd: ENOSPC after $((t1 - t0)) ms in all, rm on the full disk: ok, server alive"
else
    fail 2 "dd: $(tail -1 <<<"$out") ($((t1 - t0)) ms), rm rc $rmrc"
fi
"$N" down --force "$work/disk2/fs" >/dev/null 2>&1

# 3 and 4: oversized reads and handshake floods are protocol-level: the tests that send them.
for t in "nacre-ost --test read_bounds" "nacre-mdt --test dom_read_bounds" "nacre-rpc --test handshake_flood"; do
    if cargo test --release --quiet -p $t >"$work/34.out" 2>&1; then r=ok; else r=FAILED; fi
    echo "    cargo test -p $t: $r"
    [ $r = ok ] || failed=$((failed + 1))
done
up fs4
python3 - $port "$(pid_of fs4)" > "$work/4.out" 2>&1 <<'EOF'
import socket, struct, sys, time
port, pid = int(sys.argv[1]), sys.argv[2]
rss = lambda: int([l for l in open(f'/proc/{pid}/status') if l.startswith('VmRSS')][0].split()[1])
before = rss(); socks = []
for _ in range(64):
    s = socket.create_connection(('127.0.0.1', port)); s.settimeout(2)
    try: s.recv(4096)
    except OSError: pass
    # A handshake frame that announces an 80 MiB body, then nothing.
    s.send(struct.pack('<IHHQIIII', 0x3152434e, 3, 0, 0, 2, 80 << 20, 0, 0)); socks.append(s)
time.sleep(1); grown = rss() - before
print(f'64 stalled handshakes: RSS {before // 1024} -> {(before + grown) // 1024} MiB')
sys.exit(0 if grown < 16 * 1024 else 1)
EOF
if [ $? = 0 ]; then pass 4 "$(cat "$work/4.out")"; else fail 4 "$(cat "$work/4.out")"; fi

# 5. Storage readable by its owner only.
echo secret > "$work/m-fs4/private"; chmod 600 "$work/m-fs4/private"; sync
obj=$(find "$work/fs4" -path '*/O/*' -type f -size +0 | head -1)
open=$(find "$work/fs4" \( -perm -o=r -o -perm -o=x \) -print | head -3)
if [ -n "$obj" ] && ! setpriv --reuid=65534 --regid=65534 --clear-groups cat "$obj" >/dev/null 2>&1 && [ -z "$open" ]; then
    pass 5 "nobody cannot read $(basename "$obj"); nothing under the data dir is open to others"
else
    fail 5 "object $obj readable by nobody, or open to others: $open"
fi

# 6. A target's storage removed under its running server: EIO within a bound, a log line.
up fs6 --osts 2
"$N" lfs setstripe -c 2 "$work/m-fs6/striped" >/dev/null
dd if=/dev/zero of="$work/m-fs6/striped" bs=1M count=8 conv=fsync status=none
rm -rf "$work/fs6/ost1"
t0=$(ms); timeout 60 dd if=/dev/zero of="$work/m-fs6/striped" bs=1M count=8 conv=fsync status=none 2>"$work/6.err"; rc=$?; t1=$(ms)
if [ $rc != 0 ] && [ $rc != 124 ] && grep -qi 'input/output' "$work/6.err" && grep -qiE 'OST0001.*(fail|gone|missing)' "$work/fs6/nacre.log"; then
    pass 6 "fsync'd write over the deleted OST: EIO after $((t1 - t0)) ms; log: $(grep -iE 'OST0001.*(fail|gone|missing)' "$work/fs6/nacre.log" | head -1 | cut -c1-120)"
else
    fail 6 "rc $rc after $((t1 - t0)) ms: $(cat "$work/6.err")"
fi

# 7. A restart on a full disk works or says why.
mkdir -p "$work/disk7" && mount -t tmpfs -o size=64m tmpfs "$work/disk7"
"$N" up "$work/disk7/fs" --mount "$work/m-disk7" --background --port $((port += 1)) >/dev/null
"$N" down "$work/disk7/fs" >/dev/null
dd if=/dev/zero of="$work/disk7/filler" bs=1M count=100 status=none 2>/dev/null
out=$("$N" up "$work/disk7/fs" --mount "$work/m-disk7" --background --port $((port += 1)) 2>&1); rc=$?
if [ $rc = 0 ] || grep -qiE 'space|ENOSPC' <<<"$out"; then
    pass 7 "restart on the full disk: rc $rc, $(tail -1 <<<"$out" | cut -c1-120)"
else
    fail 7 "rc $rc: $out"
fi
"$N" down --force "$work/disk7/fs" >/dev/null 2>&1

# 8. EFBIG at the write that passes the largest object.
python3 - "$work/m-fs4/big" > "$work/8.out" 2>&1 <<'EOF'
import os, sys, errno
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o644)
try:
    os.pwrite(fd, b'x' * 4096, 2**44 - 4096); print('pwrite at 2^44-4096 succeeded, size', os.fstat(fd).st_size); sys.exit(1)
except OSError as e:
    print(f'pwrite at 2^44-4096: {errno.errorcode[e.errno]} at once, size {os.fstat(fd).st_size}')
    sys.exit(0 if e.errno == errno.EFBIG else 1)
EOF
if [ $? = 0 ]; then pass 8 "$(cat "$work/8.out")"; else fail 8 "$(cat "$work/8.out")"; fi

# 9. rm -rf of one tree from two clients.
"$N" mount "$work/fs4" "$work/m9" --background >/dev/null
for d in $(seq 8); do mkdir -p "$work/m-fs4/t/d$d"; for f in $(seq 60); do echo x > "$work/m-fs4/t/d$d/f$f"; done; done
find "$work/m9/t" >/dev/null
rm -rf "$work/m-fs4/t" 2>"$work/9a" & rm -rf "$work/m9/t" 2>"$work/9b"; rb=$?; wait $!; ra=$?
if [ $ra = 0 ] && [ $rb = 0 ]; then pass 9 "both rm -rf exit 0"; else fail 9 "rc $ra/$rb: $(head -2 "$work/9a" "$work/9b")"; fi

# 10. umount after kill -9 of the mount process.
mpid=$(pgrep -f "mount $work/fs4 $work/m9" | head -1)
kill -9 "$mpid"; sleep 0.5
out=$("$N" umount "$work/m9" 2>&1); rc=$?
if ! grep -q " $work/m9 " /proc/self/mountinfo; then pass 10 "umount: rc $rc, the dead mount is gone"; else fail 10 "rc $rc ($out) but still mounted"; fi

# 11. Refused connections are logged at a bounded rate.
before=$(grep -c 'refused' "$work/fs4/nacre.log")
python3 - $port <<'EOF'
import socket, sys
for _ in range(100):
    try:
        s = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); s.recv(4096); s.send(b'\0' * 64); s.close()
    except OSError: pass
EOF
sleep 1; lines=$(( $(grep -c 'refused' "$work/fs4/nacre.log") - before ))
if [ $lines -le 5 ]; then pass 11 "100 garbage connections: $lines log lines"; else fail 11 "100 garbage connections: $lines log lines"; fi

# 12. Hard links stay fast as a file gains links; Lustre's limit. Batches of links to a
# fresh file and to one with 20,000 links alternate, so load elsewhere on the machine
# slows both alike; the median ratio is what counts.
python3 - "$work/m-fs4" > "$work/12.out" 2>&1 <<'EOF'
import os, sys, time, statistics
d = sys.argv[1] + '/links'; os.mkdir(d)
for f in ('few', 'many'): open(f'{d}/{f}', 'w').close()
for i in range(20000): os.link(f'{d}/many', f'{d}/m{i}')
def rate(target, tag, n=500):
    t = time.time()
    for i in range(n): os.link(f'{d}/{target}', f'{d}/{tag}{i}')
    return n / (time.time() - t)
few, many, ratios = [], [], []
for r in range(5):
    few.append(rate('few', f'a{r}_')); many.append(rate('many', f'b{r}_'))
    ratios.append(many[-1] / few[-1])
    for i in range(500): os.unlink(f'{d}/a{r}_{i}')  # the fresh file stays near one link
ratio = statistics.median(ratios)
print(f'links/s near 1 link: {statistics.median(few):.0f}, past 20k links: '
      f'{statistics.median(many):.0f} (median ratio {ratio:.2f})')
sys.exit(0 if ratio > 0.5 else 1)
EOF
if [ $? = 0 ]; then pass 12 "$(cat "$work/12.out")"; else fail 12 "$(cat "$work/12.out")"; fi

# 13. A registry directory planted by another user is refused.
chmod 711 "$work"  # another uid must reach tmp13 below
mkdir -p "$work/tmp13/nacre-65534" && chmod 777 "$work/tmp13" "$work/tmp13/nacre-65534"
out=$(cd / && env -u NACRE_RUN_DIR -u XDG_RUNTIME_DIR TMPDIR="$work/tmp13" setpriv --reuid=65534 --regid=65534 --clear-groups "$N" lctl list_param '*' 2>&1)
if grep -qi 'owned by' <<<"$out"; then pass 13 "$(head -1 <<<"$out" | cut -c1-120)"; else fail 13 "$out"; fi

# 14. Output into a closed pipe.
out=$("$N" status "$work/fs4" 2>&1 | head -1; echo "rc ${PIPESTATUS[0]}")
if ! grep -q panicked <<<"$out"; then pass 14 "nacre status | head -1: $(tail -1 <<<"$out"), no panic"; else fail 14 "$out"; fi

echo "== $failed failed"
exit $((failed > 0))
