//! Damage on purpose: bit flips in object files, as a failing disk or a stray write leaves
//! them, for tests and fault drills. The store is bypassed (the flip goes through the
//! file, so the page cache and every later reader see it) and the file's times are put
//! back, so nothing but the checksums can tell.

use crate::cksum::SIDECAR_SUFFIX;
use nacre_core::Fid;
use rand::Rng;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// One flipped bit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flip {
    /// The object (`[seq:oid:0]`).
    pub obj: Fid,
    pub path: PathBuf,
    pub offset: u64,
    pub bit: u8,
}

/// Flips bit `bit` (0–7) of the byte at `offset` of the file at `path`, keeping its times.
pub fn flip_bit(path: &Path, offset: u64, bit: u8) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    let m = f.metadata()?;
    let mut b = [0u8; 1];
    // Past the end reads nothing: flipping a zero makes the file longer, as it should.
    let _ = f.read_at(&mut b, offset)?;
    b[0] ^= 1 << (bit & 7);
    f.write_all_at(&b, offset)?;
    let times = [
        libc::timespec {
            tv_sec: m.atime() as libc::time_t,
            tv_nsec: m.atime_nsec() as libc::c_long,
        },
        libc::timespec {
            tv_sec: m.mtime() as libc::time_t,
            tv_nsec: m.mtime_nsec() as libc::c_long,
        },
    ];
    // SAFETY: a valid descriptor and an array of two timespecs.
    if unsafe { libc::futimens(std::os::fd::AsRawFd::as_raw_fd(&f), times.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Objects holding data in the object store of target directory `dir` (an OST's, or the
/// `dom` directory of an MDT): FID, path and size, in path order.
pub fn objects_with_data(dir: &Path) -> std::io::Result<Vec<(Fid, PathBuf, u64)>> {
    let mut out = Vec::new();
    let root = dir.join("O");
    let Ok(seqs) = std::fs::read_dir(&root) else {
        return Ok(out);
    };
    for seq in seqs.flatten() {
        let Some(s) = seq
            .file_name()
            .to_str()
            .and_then(|n| u64::from_str_radix(n, 16).ok())
        else {
            continue;
        };
        for sub in std::fs::read_dir(seq.path())?.flatten() {
            if !sub.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            for obj in std::fs::read_dir(sub.path())?.flatten() {
                let name = obj.file_name();
                let Some(name) = name.to_str() else {
                    continue;
                };
                if name.ends_with(SIDECAR_SUFFIX) {
                    continue;
                }
                let Ok(oid) = name.parse::<u32>() else {
                    continue;
                };
                let size = obj.metadata()?.len();
                if size > 0 {
                    out.push((Fid::new(s, oid, 0), obj.path(), size));
                }
            }
        }
    }
    out.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(out)
}

/// Flips one bit at a random offset in each of `count` objects with data under `dir`,
/// chosen at random (every one of them if there are no more).
pub fn flip_random(dir: &Path, count: usize, rng: &mut impl Rng) -> std::io::Result<Vec<Flip>> {
    let mut objs = objects_with_data(dir)?;
    let mut out = Vec::new();
    while out.len() < count && !objs.is_empty() {
        let (obj, path, size) = objs.swap_remove(rng.gen_range(0..objs.len()));
        let offset = rng.gen_range(0..size);
        let bit = rng.gen_range(0..8u8);
        flip_bit(&path, offset, bit)?;
        out.push(Flip {
            obj,
            path,
            offset,
            bit,
        });
    }
    Ok(out)
}
