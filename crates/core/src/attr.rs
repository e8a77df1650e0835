//! Inode attributes as the MDT stores them and the client reports them.

use crate::fid::Fid;
use serde::{Deserialize, Serialize};

/// `XATTR_SIZE_MAX`: the largest xattr value Linux takes, and so the largest ACL and the
/// largest layout Lustre can store (ldiskfs keeps both in xattrs).
pub const XATTR_SIZE_MAX: usize = 65536;

/// Seconds and nanoseconds since the epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Timespec {
    pub sec: i64,
    pub nsec: u32,
}

impl Timespec {
    pub fn now() -> Timespec {
        match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => Timespec {
                sec: d.as_secs() as i64,
                nsec: d.subsec_nanos(),
            },
            Err(_) => Timespec::default(),
        }
    }

    pub fn to_system_time(self) -> std::time::SystemTime {
        use std::time::{Duration, UNIX_EPOCH};
        if self.sec >= 0 {
            UNIX_EPOCH + Duration::new(self.sec as u64, self.nsec)
        } else {
            UNIX_EPOCH - Duration::from_secs(self.sec.unsigned_abs())
                + Duration::from_nanos(u64::from(self.nsec))
        }
    }

    pub fn from_system_time(t: std::time::SystemTime) -> Timespec {
        use std::time::UNIX_EPOCH;
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Timespec {
                sec: d.as_secs() as i64,
                nsec: d.subsec_nanos(),
            },
            Err(e) => {
                let d = e.duration();
                let mut sec = -(d.as_secs() as i64);
                let mut nsec = d.subsec_nanos();
                if nsec > 0 {
                    sec -= 1;
                    nsec = 1_000_000_000 - nsec;
                }
                Timespec { sec, nsec }
            }
        }
    }
}

/// The type bits of a mode, as a closed set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FileKind {
    Regular,
    Directory,
    Symlink,
    CharDevice,
    BlockDevice,
    Fifo,
    Socket,
}

impl FileKind {
    pub fn from_mode(mode: u32) -> Option<FileKind> {
        match mode & libc::S_IFMT {
            libc::S_IFREG => Some(FileKind::Regular),
            libc::S_IFDIR => Some(FileKind::Directory),
            libc::S_IFLNK => Some(FileKind::Symlink),
            libc::S_IFCHR => Some(FileKind::CharDevice),
            libc::S_IFBLK => Some(FileKind::BlockDevice),
            libc::S_IFIFO => Some(FileKind::Fifo),
            libc::S_IFSOCK => Some(FileKind::Socket),
            _ => None,
        }
    }

    pub fn mode_bits(self) -> u32 {
        match self {
            FileKind::Regular => libc::S_IFREG,
            FileKind::Directory => libc::S_IFDIR,
            FileKind::Symlink => libc::S_IFLNK,
            FileKind::CharDevice => libc::S_IFCHR,
            FileKind::BlockDevice => libc::S_IFBLK,
            FileKind::Fifo => libc::S_IFIFO,
            FileKind::Socket => libc::S_IFSOCK,
        }
    }

    /// The `d_type` value readdir reports.
    pub fn dtype(self) -> u8 {
        match self {
            FileKind::Regular => libc::DT_REG,
            FileKind::Directory => libc::DT_DIR,
            FileKind::Symlink => libc::DT_LNK,
            FileKind::CharDevice => libc::DT_CHR,
            FileKind::BlockDevice => libc::DT_BLK,
            FileKind::Fifo => libc::DT_FIFO,
            FileKind::Socket => libc::DT_SOCK,
        }
    }

    /// The letter `lfs find -type` uses.
    pub fn find_letter(self) -> char {
        match self {
            FileKind::Regular => 'f',
            FileKind::Directory => 'd',
            FileKind::Symlink => 'l',
            FileKind::CharDevice => 'c',
            FileKind::BlockDevice => 'b',
            FileKind::Fifo => 'p',
            FileKind::Socket => 's',
        }
    }
}

/// Attributes of one inode.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attr {
    pub fid: Fid,
    /// Type and permission bits, as `st_mode`.
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    /// 512-byte blocks allocated.
    pub blocks: u64,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
    /// Birth time.
    pub btime: Timespec,
    pub rdev: u32,
}

impl Attr {
    pub fn kind(&self) -> Option<FileKind> {
        FileKind::from_mode(self.mode)
    }

    pub fn is_dir(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFDIR
    }

    pub fn is_reg(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFREG
    }

    pub fn perm(&self) -> u32 {
        self.mode & 0o7777
    }
}

/// A time to set: a given value or the server's "now".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SetTime {
    Now,
    At(Timespec),
}

/// The set-user-ID and set-group-ID bits a write or truncate by a caller without
/// CAP_FSETID removes from a regular file (the kernel's `should_remove_suid`): the latter
/// only with group execute (without it, it marks mandatory locking). The MDT applies it to
/// a size change; a client, to a write that bypasses the kernel's cache.
pub fn privileges_to_kill(mode: u32) -> u32 {
    let (suid, sgid, xgrp) = (libc::S_ISUID, libc::S_ISGID, libc::S_IXGRP);
    let mut kill = mode & suid;
    if mode & (sgid | xgrp) == sgid | xgrp {
        kill |= sgid;
    }
    kill
}

/// The attribute changes of one setattr request; `None` leaves a field alone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<SetTime>,
    pub mtime: Option<SetTime>,
    pub ctime: Option<Timespec>,
}

impl SetAttr {
    pub fn is_empty(&self) -> bool {
        *self == SetAttr::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip() {
        for k in [
            FileKind::Regular,
            FileKind::Directory,
            FileKind::Symlink,
            FileKind::CharDevice,
            FileKind::BlockDevice,
            FileKind::Fifo,
            FileKind::Socket,
        ] {
            assert_eq!(FileKind::from_mode(k.mode_bits() | 0o644), Some(k));
        }
        assert_eq!(FileKind::from_mode(0o644), None);
    }

    #[test]
    fn times_round_trip_before_and_after_epoch() {
        for t in [
            Timespec { sec: 5, nsec: 7 },
            Timespec { sec: -5, nsec: 7 },
            Timespec { sec: 0, nsec: 0 },
        ] {
            assert_eq!(Timespec::from_system_time(t.to_system_time()), t);
        }
    }
}
