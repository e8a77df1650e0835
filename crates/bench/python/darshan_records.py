"""Prints the POSIX file records of Darshan logs as JSON lines, for `nacre darshan-age`.

Reads each log with the `darshan` package (PyDarshan, over libdarshan-util), one record at
a time. For every log it prints a header line, then one line per file:

  {"log": PATH, "version": "3.21", "exe": "...", "nprocs": N, "files": N}
  {"size_at_open": BYTES, "bytes_written": BYTES}

Darshan 2 logs carried CP_SIZE_AT_OPEN; Darshan 3's POSIX module does not. The size a file
had when the job opened it is then taken as the bytes the job read beyond anything it wrote
itself (POSIX_MAX_BYTE_READ + 1 when that is past POSIX_MAX_BYTE_WRITTEN), which were there
before it opened the file; a file the job only wrote had none. Records of one file from
several ranks (logs kept unreduced) are merged: bytes written add up, the extents take the
largest.

With --locate NAME it prints the path of a log shipped with the package (its examples and
test inputs are logs of real jobs) and exits.
"""

import glob
import json
import os
import sys


def fail(msg, code=2):
    print(f"darshan_records: {msg}", file=sys.stderr)
    sys.exit(code)


try:
    import darshan
    from darshan.backend import cffi_backend as backend
except ImportError as e:  # the caller says how to install it
    fail(f"the darshan Python package is missing ({e}); run scripts/install-deps.sh", 3)


def locate(name):
    root = os.path.dirname(darshan.__file__)
    hits = sorted(glob.glob(os.path.join(root, "**", name), recursive=True))
    if not hits:
        fail(f"no log named {name} ships with darshan {darshan.__version__} in {root}")
    print(hits[0])


def counter(rec, name):
    return int(rec["counters"][name])


def dump(path):
    if not os.path.isfile(path):
        fail(f"{path}: no such file")
    log = backend.log_open(path)
    if log["handle"] == backend.ffi.NULL:
        fail(f"{path}: not a Darshan log libdarshan-util can read")
    try:
        job = backend.log_get_job(log)
        modules = backend.log_get_modules(log)
        files = {}
        if "POSIX" in modules:
            while True:
                rec = backend.log_get_generic_record(log, "POSIX", dtype="dict")
                if rec is None:
                    break
                written = max(counter(rec, "POSIX_BYTES_WRITTEN"), 0)
                max_w = counter(rec, "POSIX_MAX_BYTE_WRITTEN")
                max_r = counter(rec, "POSIX_MAX_BYTE_READ")
                prev = files.get(rec["id"])
                if prev is None:
                    files[rec["id"]] = [written, max_w, max_r]
                else:
                    prev[0] += written
                    prev[1] = max(prev[1], max_w)
                    prev[2] = max(prev[2], max_r)
        header = {
            "log": path,
            "version": job.get("log_ver", ""),
            "exe": backend.log_get_exe(log),
            "nprocs": job.get("nprocs", 0),
            "files": len(files),
        }
        out = sys.stdout
        out.write(json.dumps(header) + "\n")
        for written, max_w, max_r in files.values():
            at_open = max_r + 1 if max_r > max_w else 0
            out.write(
                json.dumps({"size_at_open": at_open, "bytes_written": written}) + "\n"
            )
    finally:
        backend.log_close(log)


def main(argv):
    if len(argv) == 2 and argv[0] == "--locate":
        locate(argv[1])
        return
    if not argv:
        fail("usage: darshan_records.py LOG... | --locate NAME")
    for path in argv:
        dump(path)
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
