//! Per-OST RPC statistics (Lustre's `osc.*.rpc_stats`): how many read and write RPCs,
//! and how many pages each carried, so the effect of `max_pages_per_rpc`, write-behind and
//! readahead can be seen.

use parking_lot::Mutex;
use std::collections::BTreeMap;

/// Pages are counted in Lustre's 4 KiB unit.
pub const PAGE: u64 = 4096;

#[derive(Default, Clone)]
pub struct OscStats {
    pub read_rpcs: u64,
    pub write_rpcs: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Pages per RPC (rounded up to a power of two) -> (reads, writes).
    pub pages: BTreeMap<u64, (u64, u64)>,
}

#[derive(Default)]
pub struct RpcStats {
    by_ost: Mutex<BTreeMap<u32, OscStats>>,
}

impl RpcStats {
    pub fn record(&self, ost: u32, write: bool, bytes: u64) {
        let pages = bytes.div_ceil(PAGE).max(1).next_power_of_two();
        let mut m = self.by_ost.lock();
        let s = m.entry(ost).or_default();
        let b = s.pages.entry(pages).or_default();
        if write {
            s.write_rpcs += 1;
            s.write_bytes += bytes;
            b.1 += 1;
        } else {
            s.read_rpcs += 1;
            s.read_bytes += bytes;
            b.0 += 1;
        }
    }

    pub fn get(&self, ost: u32) -> OscStats {
        self.by_ost.lock().get(&ost).cloned().unwrap_or_default()
    }

    pub fn clear(&self, ost: u32) {
        self.by_ost.lock().remove(&ost);
    }

    /// Lustre's `rpc_stats` text: a histogram of pages per RPC for reads and writes.
    pub fn render(&self, ost: u32) -> String {
        let s = self.get(ost);
        let mut out = format!(
            "read RPCs: {}\nwrite RPCs: {}\nread bytes: {}\nwrite bytes: {}\n\n",
            s.read_rpcs, s.write_rpcs, s.read_bytes, s.write_bytes
        );
        out.push_str("pages per rpc         rpcs   % cum % |       rpcs   % cum %\n");
        let (tr, tw) = (s.read_rpcs.max(1), s.write_rpcs.max(1));
        let (mut cr, mut cw) = (0u64, 0u64);
        for (pages, (r, w)) in &s.pages {
            cr += r;
            cw += w;
            out.push_str(&format!(
                "{pages}:\t\t{r:10} {:3} {:3}   | {w:10} {:3} {:3}\n",
                r * 100 / tr,
                cr * 100 / tr,
                w * 100 / tw,
                cw * 100 / tw
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_by_pages() {
        let s = RpcStats::default();
        s.record(0, true, 1 << 20);
        s.record(0, true, 1 << 20);
        s.record(0, false, 4096);
        let g = s.get(0);
        assert_eq!((g.write_rpcs, g.read_rpcs), (2, 1));
        assert_eq!(g.pages.get(&256), Some(&(0, 2)));
        assert_eq!(g.pages.get(&1), Some(&(1, 0)));
        assert!(s.render(0).contains("write RPCs: 2"));
    }
}

/// The calls `llite.*.stats` counts: what the kernel asks the mount for, under Lustre's
/// llite names where Lustre has one (`lookup` is ours: FUSE asks for names one by one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum VfsOp {
    Lookup,
    Getattr,
    Setattr,
    Readlink,
    Mknod,
    Mkdir,
    Symlink,
    Unlink,
    Rmdir,
    Rename,
    Link,
    Open,
    Create,
    Read,
    Write,
    Fallocate,
    Flush,
    Close,
    Fsync,
    Opendir,
    Readdir,
    Statfs,
    Setxattr,
    Getxattr,
    Listxattr,
    Removexattr,
    /// `fcntl` and `flock` locks (getlk, setlk).
    Flock,
}

impl VfsOp {
    const ALL: [VfsOp; 27] = [
        VfsOp::Lookup,
        VfsOp::Getattr,
        VfsOp::Setattr,
        VfsOp::Readlink,
        VfsOp::Mknod,
        VfsOp::Mkdir,
        VfsOp::Symlink,
        VfsOp::Unlink,
        VfsOp::Rmdir,
        VfsOp::Rename,
        VfsOp::Link,
        VfsOp::Open,
        VfsOp::Create,
        VfsOp::Read,
        VfsOp::Write,
        VfsOp::Fallocate,
        VfsOp::Flush,
        VfsOp::Close,
        VfsOp::Fsync,
        VfsOp::Opendir,
        VfsOp::Readdir,
        VfsOp::Statfs,
        VfsOp::Setxattr,
        VfsOp::Getxattr,
        VfsOp::Listxattr,
        VfsOp::Removexattr,
        VfsOp::Flock,
    ];

    pub fn name(self) -> &'static str {
        match self {
            VfsOp::Lookup => "lookup",
            VfsOp::Getattr => "getattr",
            VfsOp::Setattr => "setattr",
            VfsOp::Readlink => "readlink",
            VfsOp::Mknod => "mknod",
            VfsOp::Mkdir => "mkdir",
            VfsOp::Symlink => "symlink",
            VfsOp::Unlink => "unlink",
            VfsOp::Rmdir => "rmdir",
            VfsOp::Rename => "rename",
            VfsOp::Link => "link",
            VfsOp::Open => "open",
            VfsOp::Create => "create",
            VfsOp::Read => "read",
            VfsOp::Write => "write",
            VfsOp::Fallocate => "fallocate",
            VfsOp::Flush => "flush",
            VfsOp::Close => "close",
            VfsOp::Fsync => "fsync",
            VfsOp::Opendir => "opendir",
            VfsOp::Readdir => "readdir",
            VfsOp::Statfs => "statfs",
            VfsOp::Setxattr => "setxattr",
            VfsOp::Getxattr => "getxattr",
            VfsOp::Listxattr => "listxattr",
            VfsOp::Removexattr => "removexattr",
            VfsOp::Flock => "flock",
        }
    }

    /// The name of a recorded counter (`OpStats` keeps them by number).
    pub fn name_of(n: u16) -> &'static str {
        VfsOp::ALL
            .get(usize::from(n))
            .map_or("unknown", |op| op.name())
    }
}

#[cfg(test)]
mod vfs_op_tests {
    use super::VfsOp;

    #[test]
    fn numbers_and_names_agree() {
        for (i, op) in VfsOp::ALL.iter().enumerate() {
            assert_eq!(*op as usize, i);
            assert_eq!(VfsOp::name_of(i as u16), op.name());
        }
        assert_eq!(VfsOp::name_of(999), "unknown");
    }
}
