//! Extent maps of files (linux/fiemap.h): where an OST object's bytes sit on the OST's
//! device, for fragmentation reports (`nacre frag`), as Lustre's `filefrag` shows per OST.

use serde::{Deserialize, Serialize};
use std::os::fd::AsRawFd;

/// One extent of an object: `length` bytes at `logical` in the object, at `physical` on
/// the device holding the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjExtent {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
    /// `FIEMAP_EXTENT_*` flags.
    pub flags: u32,
}

/// Most extents one object reports: bounds the reply. A map with more is cut here, without
/// a mark (an object reported with this many has at least this many).
pub const MAX_OBJECT_EXTENTS: usize = 8192;

/// `FIEMAP_EXTENT_LAST`.
pub const FIEMAP_EXTENT_LAST: u32 = 0x1;
const FIEMAP_FLAG_SYNC: u32 = 0x1;
/// `_IOWR('f', 11, struct fiemap)`.
const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
/// Extents fetched per ioctl.
const BATCH: usize = 256;

#[repr(C)]
#[derive(Default)]
struct Header {
    fm_start: u64,
    fm_length: u64,
    fm_flags: u32,
    fm_mapped_extents: u32,
    fm_extent_count: u32,
    fm_reserved: u32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RawExtent {
    fe_logical: u64,
    fe_physical: u64,
    fe_length: u64,
    fe_reserved64: [u64; 2],
    fe_flags: u32,
    fe_reserved: [u32; 3],
}

#[repr(C)]
struct Buf {
    hdr: Header,
    ext: [RawExtent; BATCH],
}

/// The extent map of an open file, at most `max` extents. `Ok(None)` when the file
/// system has no extent maps.
pub fn file_extents(file: &std::fs::File, max: usize) -> std::io::Result<Option<Vec<ObjExtent>>> {
    let mut buf = Box::new(Buf {
        hdr: Header::default(),
        ext: [RawExtent::default(); BATCH],
    });
    let mut out = Vec::new();
    let mut start = 0u64;
    while out.len() < max {
        buf.hdr = Header {
            fm_start: start,
            fm_length: u64::MAX - start,
            fm_flags: FIEMAP_FLAG_SYNC,
            fm_extent_count: BATCH as u32,
            ..Header::default()
        };
        let p: *mut Buf = &mut *buf;
        // SAFETY: `buf` is a `struct fiemap` followed by room for `fm_extent_count`
        // extents, as FS_IOC_FIEMAP expects; the descriptor is open for the call.
        let ret = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP as _, p) };
        if ret < 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) | Some(libc::ENOTTY) | Some(libc::EINVAL) => Ok(None),
                _ => Err(e),
            };
        }
        let n = (buf.hdr.fm_mapped_extents as usize).min(BATCH);
        if n == 0 {
            break;
        }
        let mut last = false;
        for fe in &buf.ext[..n] {
            if out.len() < max {
                out.push(ObjExtent {
                    logical: fe.fe_logical,
                    physical: fe.fe_physical,
                    length: fe.fe_length,
                    flags: fe.fe_flags,
                });
            }
            last |= fe.fe_flags & FIEMAP_EXTENT_LAST != 0;
        }
        let tail = &buf.ext[n - 1];
        let next = tail.fe_logical.saturating_add(tail.fe_length);
        if last || next <= start {
            break;
        }
        start = next;
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_written_file_has_extents_covering_it() {
        let mut f = tempfile_in_tmp();
        f.write_all(&vec![7u8; 256 * 1024]).unwrap();
        f.sync_all().unwrap();
        let Some(ext) = file_extents(&f, MAX_OBJECT_EXTENTS).unwrap() else {
            return; // a file system without FIEMAP (tmpfs)
        };
        let covered: u64 = ext.iter().map(|e| e.length).sum();
        assert!(covered >= 256 * 1024, "{ext:?}");
        assert!(ext.iter().any(|e| e.flags & FIEMAP_EXTENT_LAST != 0));
        let one = file_extents(&f, 1).unwrap().unwrap();
        assert_eq!(one.len(), 1);
    }

    fn tempfile_in_tmp() -> std::fs::File {
        let p = std::env::temp_dir().join(format!("nacre-fiemap-{}", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        let _ = std::fs::remove_file(&p);
        f
    }
}
