//! Crash consistency under power cuts, in the style of Lustre's `replay-single.sh` and
//! `recovery-small.sh`: each target runs as its own `nacre serve` process with its
//! directory on a disk that can lose power (`scripts/power-cut.sh`, `outagefs`). For each
//! modifying operation (create, mkdir, unlink, rename within a directory, across
//! directories and across MDTs, link, setattr, setxattr, write + fsync, truncate, layout
//! change) the test runs it once followed by the `fsync`/`fsyncdir` that covers it, and
//! once without; then the power of an MDT or an OST goes (at the worst moment: right
//! after the last reply, before any checkpoint), the target restarts, and a new client
//! checks that everything synced is there, that what was not synced is either there whole
//! or absent (never a name without its data nor a size past its data), and that the
//! stopped file system passes `nacre check`. For a few cases the disk keeps other subsets
//! of its unsynced writes too (`outagefs gen-tests`), and the other targets restart from
//! copies taken at the moment of the cut.
//!
//! `NACRE_POWER_CUT_EACH=1` cuts the power once per operation instead of once per
//! target, `NACRE_POWER_CUT_OPS` (`Unlink,WriteFsync`) runs only the operations it names,
//! and `NACRE_POWER_CUT_SUBSETS` sets how many other outcomes of each cut are
//! checked (2 by default); `scripts/power-cut.sh suite` runs it so, with 16, in rounds.

use crate::common;

use bytes::Bytes;
use common::cluster::{DIR, FILE, create, pattern, rw};
use common::power_cut::{PowerCutDisk, require_power_cut};
use common::procs::ServeCluster;
use nacre_client::Client;
use nacre_core::attr::SetAttr;
use nacre_core::lmv::HashType;
use nacre_core::{Component, Errno, Fid, Layout};
use nacre_rpc::msg::{Cred, DirLayoutRequest, LayoutRequest, OpenFlags};
use std::collections::HashMap;
use std::sync::Arc;

/// Bytes written by the data operations: several stripes' worth of RPCs.
const DATA: usize = 3 << 20;
/// Where a truncate cuts.
const TRUNC: usize = 100_000;
/// Size of each power-cut disk.
const DISK: &str = "192M";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Create,
    Mkdir,
    Unlink,
    Rename,
    RenameDirs,
    RenameMdts,
    Link,
    Setattr,
    Setxattr,
    WriteFsync,
    /// A new file written and `fsync`ed, its directory not: Lustre's `fsync` commits the
    /// MDT's transactions up to the file's, so its name is durable with its data.
    CreateWriteFsync,
    /// The same with Lustre's layout for small files (`-E 1M -L mdt -E -1`): the first
    /// MiB is a new object on the MDT's DoM store, whose name there `fsync` makes durable
    /// too.
    DomCreateWriteFsync,
    Truncate,
    LayoutChange,
}

const ALL: [Op; 14] = [
    Op::Create,
    Op::Mkdir,
    Op::Unlink,
    Op::Rename,
    Op::RenameDirs,
    Op::RenameMdts,
    Op::Link,
    Op::Setattr,
    Op::Setxattr,
    Op::WriteFsync,
    Op::CreateWriteFsync,
    Op::DomCreateWriteFsync,
    Op::Truncate,
    Op::LayoutChange,
];

fn cred() -> Cred {
    Cred::root()
}

/// Fields drop in order: the servers stop before their disks go, and the disks before
/// the directory holding the MGS.
struct Rig {
    cl: ServeCluster,
    disks: HashMap<String, PowerCutDisk>,
    /// The other targets' directories as they were at the last cut ([`Rig::cut`]).
    at_cut: Option<tempfile::TempDir>,
    _tmp: tempfile::TempDir,
}

impl Rig {
    /// MGS on a plain directory; MDT0, MDT1 and OST0 each on their own power-cut disk.
    fn new() -> Rig {
        let tmp = tempfile::tempdir().expect("tmp");
        let mut disks = HashMap::new();
        for t in ["mdt0", "mdt1", "ost0"] {
            disks.insert(t.to_string(), PowerCutDisk::new(DISK));
        }
        let at = |t: &str| disks[t].path().join(t);
        let cl = ServeCluster::format(
            "pcut",
            &tmp.path().join("mgs"),
            &[at("mdt0"), at("mdt1")],
            &[at("ost0")],
        );
        Rig {
            cl,
            disks,
            at_cut: None,
            _tmp: tmp,
        }
    }

    /// [`Rig::new`] with every target serving.
    fn started() -> Rig {
        let mut r = Rig::new();
        r.cl.start_all();
        r
    }

    /// The power of `target`'s disk goes, then comes back and `target` restarts.
    ///
    /// The other targets are frozen at the moment of the cut and their directories
    /// copied, for [`Rig::other_outcome`]: once the restarted target answers them they act
    /// on what it says (an MDT drops its destroy record when the OST says the destroy is
    /// durable), so a later outcome of the same cut must meet them as they were at the
    /// cut, not as they became after talking to another outcome.
    fn cut(&mut self, target: &str) {
        let others: Vec<String> = self
            .cl
            .targets()
            .into_iter()
            .filter(|t| t != target)
            .collect();
        let pids: Vec<i32> = others.iter().map(|t| self.cl.pid(t) as i32).collect();
        for &p in &pids {
            // SAFETY: signalling our own children.
            unsafe { libc::kill(p, libc::SIGSTOP) };
        }
        for &p in &pids {
            wait_stopped(p);
        }
        self.cl.kill(target);
        let disk = &self.disks[target];
        disk.cut(&[]);
        let snap = tempfile::tempdir().expect("snapshot dir");
        for t in &others {
            copy_dir(&self.cl.dirs[t], &snap.path().join(t));
        }
        self.at_cut = Some(snap);
        for &p in &pids {
            // SAFETY: as above.
            unsafe { libc::kill(p, libc::SIGCONT) };
        }
        disk.power_on();
        self.cl.start(target);
    }

    /// The whole file system as outcome `filter` of the last cut of `target` left it:
    /// `target`'s disk with that subset of its unsynced writes, the other targets as they
    /// were at the cut (each restarts as after a crash of its process, which loses
    /// nothing it wrote).
    fn other_outcome(&mut self, target: &str, filter: &str) {
        self.cl.stop_all();
        let snap = self.at_cut.as_ref().expect("a cut before its outcomes");
        for t in self.cl.targets().iter().filter(|t| *t != target) {
            let dir = &self.cl.dirs[t];
            std::fs::remove_dir_all(dir).expect("remove a target's directory");
            copy_dir(&snap.path().join(t), dir);
        }
        let disk = &self.disks[target];
        disk.discard();
        disk.replay(filter);
        disk.power_on();
        self.cl.start_all();
    }
}

/// Waits until process `pid` is stopped by a signal.
fn wait_stopped(pid: i32) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
        // The state follows the command name in parentheses.
        let state = stat.rsplit(") ").next().and_then(|r| r.chars().next());
        if state == Some('T') {
            return;
        }
        assert!(std::time::Instant::now() < end, "{pid} never stopped");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Copies a directory tree with its owners, modes and extended attributes.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    common::sh(
        &format!("cp -a '{}' '{}'", from.display(), to.display()),
        std::path::Path::new("/"),
    );
}

/// Names of one operation's directory, and its FID.
struct Case {
    op: Op,
    synced: bool,
    dir: Fid,
    /// A second directory: on another MDT for [`Op::RenameMdts`].
    other: Fid,
    file: Option<Fid>,
}

fn name(op: Op, synced: bool) -> String {
    format!("{op:?}-{}", if synced { "synced" } else { "unsynced" })
}

async fn mkdir_on(c: &Client, parent: Fid, name: &str, mdt: i32) -> Fid {
    c.mkdir_with_layout(
        parent,
        name.as_bytes(),
        0o755,
        &cred(),
        DirLayoutRequest {
            stripe_count: 1,
            stripe_offset: mdt,
            mdts: Vec::new(),
            hash_type: HashType::Fnv1a64 as u32,
        },
    )
    .await
    .unwrap_or_else(|e| panic!("mkdir {name} on MDT{mdt}: {e}"))
    .attr
    .fid
}

async fn lookup(c: &Client, dir: Fid, name: &str) -> Option<nacre_rpc::msg::InodeInfo> {
    match c.lookup(dir, name.as_bytes(), &cred()).await {
        Ok(i) => Some(i),
        Err(Errno::ENOENT) => None,
        Err(e) => panic!("lookup {name}: {e}"),
    }
}

/// Writes `data` at 0 of `fid`, then fsyncs when `sync`, and closes.
async fn write_file(c: &Arc<Client>, fid: Fid, data: &[u8], sync: bool) {
    let (f, _) = c.open(fid, rw(), &cred()).await.expect("open");
    let mut off = 0;
    while off < data.len() {
        let end = (off + (1 << 20)).min(data.len());
        c.write(&f, off as u64, Bytes::copy_from_slice(&data[off..end]))
            .await
            .expect("write");
        off = end;
    }
    if sync {
        c.fsync(&f).await.expect("fsync");
    }
    c.release(&f).await.expect("close");
}

/// `fsync` of an inode's attributes (opened read-only).
async fn fsync_inode(c: &Client, fid: Fid) {
    let ro = OpenFlags {
        read: true,
        ..OpenFlags::default()
    };
    let (f, _) = c.open(fid, ro, &cred()).await.expect("open");
    c.fsync(&f).await.expect("fsync");
    c.release(&f).await.expect("close");
}

/// The whole content of `fid` as a client reads it, and its size.
async fn content(c: &Arc<Client>, fid: Fid) -> (u64, Vec<u8>) {
    let ro = OpenFlags {
        read: true,
        ..OpenFlags::default()
    };
    let (f, _) = c.open(fid, ro, &cred()).await.expect("open");
    // The size a stat gives: the MDT's when it knows it exact, else its OST objects'
    // (after an MDT's cut its size may be older than the data the OSTs kept).
    let size = c.getattr(fid).await.expect("getattr").attr.size;
    let mut out = Vec::new();
    while (out.len() as u64) < size + 1 {
        let b = c.read(&f, out.len() as u64, 1 << 20).await.expect("read");
        if b.is_empty() {
            break;
        }
        out.extend_from_slice(&b);
    }
    c.release(&f).await.expect("close");
    (size, out)
}

/// A file's content must be `data` cut at the file's size: a size never runs past the
/// data behind it, and no byte differs from what was written.
async fn assert_prefix_of(c: &Arc<Client>, fid: Fid, data: &[u8], what: &str) {
    let (size, got) = content(c, fid).await;
    assert_eq!(
        got.len() as u64,
        size,
        "{what}: size {size} but {} bytes readable",
        got.len()
    );
    assert!(
        got.len() <= data.len() && got == data[..got.len()],
        "{what}: {} bytes that are not what was written (size {size})",
        got.len()
    );
}

impl Case {
    /// Makes what the operation needs, all of it synced.
    async fn setup(c: &Arc<Client>, op: Op, synced: bool) -> Case {
        let n = name(op, synced);
        let dir = mkdir_on(c, Fid::ROOT, &n, 0).await;
        let other = if op == Op::RenameMdts {
            mkdir_on(c, Fid::ROOT, &format!("{n}.mdt1"), 1).await
        } else {
            create(c, dir, b"other", DIR).await.expect("other").attr.fid
        };
        let needs_file = !matches!(
            op,
            Op::Create | Op::Mkdir | Op::CreateWriteFsync | Op::DomCreateWriteFsync
        );
        let file = if needs_file {
            let fid = create(c, dir, b"f", FILE).await.expect("f").attr.fid;
            if matches!(op, Op::Truncate | Op::LayoutChange | Op::Unlink) {
                write_file(c, fid, &pattern(DATA, 1), true).await;
            }
            if op == Op::RenameDirs || op == Op::RenameMdts {
                c.sync_dir(other).await.expect("fsyncdir");
            }
            c.sync_dir(dir).await.expect("fsyncdir");
            fsync_inode(c, fid).await;
            Some(fid)
        } else {
            c.sync_dir(dir).await.expect("fsyncdir");
            None
        };
        c.sync_dir(Fid::ROOT).await.expect("fsyncdir /");
        Case {
            op,
            synced,
            dir,
            other,
            file,
        }
    }

    fn file(&self) -> Fid {
        self.file.expect("the case's file")
    }

    /// The operation, then the sync that covers it when `synced`.
    async fn run(&self, c: &Arc<Client>) {
        let (dir, other) = (self.dir, self.other);
        let sync_dirs = |dirs: Vec<Fid>| async move {
            for d in dirs {
                c.sync_dir(d).await.expect("fsyncdir");
            }
        };
        match self.op {
            Op::Create => {
                create(c, dir, b"new", FILE).await.expect("create");
                if self.synced {
                    sync_dirs(vec![dir]).await;
                }
            }
            Op::Mkdir => {
                create(c, dir, b"new", DIR).await.expect("mkdir");
                if self.synced {
                    sync_dirs(vec![dir]).await;
                }
            }
            Op::Unlink => {
                c.unlink(dir, b"f", &cred()).await.expect("unlink");
                if self.synced {
                    sync_dirs(vec![dir]).await;
                }
            }
            Op::Rename => {
                c.rename(dir, b"f", dir, b"g", 0, &cred())
                    .await
                    .expect("rename");
                if self.synced {
                    sync_dirs(vec![dir]).await;
                }
            }
            Op::RenameDirs | Op::RenameMdts => {
                c.rename(dir, b"f", other, b"g", 0, &cred())
                    .await
                    .expect("rename");
                if self.synced {
                    sync_dirs(vec![dir, other]).await;
                }
            }
            Op::Link => {
                c.link(self.file(), other, b"l", &cred())
                    .await
                    .expect("link");
                if self.synced {
                    sync_dirs(vec![other]).await;
                }
            }
            Op::Setattr => {
                let a = SetAttr {
                    mode: Some(0o600),
                    uid: Some(7),
                    gid: Some(8),
                    ..SetAttr::default()
                };
                c.setattr(self.file(), a, &cred(), None)
                    .await
                    .expect("setattr");
                if self.synced {
                    fsync_inode(c, self.file()).await;
                }
            }
            Op::Setxattr => {
                c.setxattr(self.file(), b"user.k", b"value", 0, &cred())
                    .await
                    .expect("setxattr");
                if self.synced {
                    fsync_inode(c, self.file()).await;
                }
            }
            Op::WriteFsync => write_file(c, self.file(), &pattern(DATA, 2), self.synced).await,
            Op::CreateWriteFsync => {
                let fid = create(c, dir, b"new", FILE).await.expect("create").attr.fid;
                write_file(c, fid, &pattern(DATA, 3), self.synced).await;
            }
            Op::DomCreateWriteFsync => {
                let dom = Layout::composite(vec![
                    Component::dom(1 << 20),
                    Component::raid0(1 << 20, nacre_core::layout::EOF, 1, 1 << 20, -1),
                ]);
                let (i, _) = c
                    .create(
                        dir,
                        b"new",
                        FILE,
                        0,
                        &cred(),
                        None,
                        LayoutRequest::Explicit(dom),
                        None,
                        true,
                    )
                    .await
                    .expect("create");
                write_file(c, i.attr.fid, &pattern(DATA, 3), self.synced).await;
            }
            Op::Truncate => {
                let (f, _) = c.open(self.file(), rw(), &cred()).await.expect("open");
                let a = SetAttr {
                    size: Some(TRUNC as u64),
                    ..SetAttr::default()
                };
                c.setattr(self.file(), a, &cred(), None)
                    .await
                    .expect("truncate");
                if self.synced {
                    c.fsync(&f).await.expect("fsync");
                }
                c.release(&f).await.expect("close");
            }
            Op::LayoutChange => {
                let l = Layout::composite(vec![
                    Component::dom(64 << 10),
                    Component::raid0(64 << 10, nacre_core::layout::EOF, 1, 1 << 20, -1),
                ]);
                c.migrate(self.file(), l, &cred()).await.expect("migrate");
                if self.synced {
                    fsync_inode(c, self.file()).await;
                }
            }
        }
    }

    /// After the cut, through a new client: synced effects are all there; unsynced ones
    /// are there whole or not at all.
    async fn verify(&self, c: &Arc<Client>, cut: &str) {
        let what = format!("{} after a power cut of {cut}", name(self.op, self.synced));
        let (dir, other) = (self.dir, self.other);
        let must = self.synced;
        let has = |d: Fid, n: &'static str| async move { lookup(c, d, n).await };
        match self.op {
            Op::Create | Op::Mkdir => {
                let i = has(dir, "new").await;
                assert!(!must || i.is_some(), "{what}: the new name is gone");
                if let Some(i) = i {
                    assert_eq!(i.attr.is_dir(), self.op == Op::Mkdir, "{what}");
                }
            }
            Op::Unlink => {
                let i = has(dir, "f").await;
                assert!(!must || i.is_none(), "{what}: the name came back");
                if i.is_some() {
                    // The cut took the unlink back: the file with it, objects and all.
                    let (size, got) = content(c, self.file()).await;
                    assert_eq!(size, DATA as u64, "{what}: size");
                    assert!(got == pattern(DATA, 1), "{what}: the data differs");
                }
            }
            Op::Rename | Op::RenameDirs | Op::RenameMdts => {
                let to = if self.op == Op::Rename { dir } else { other };
                let (old, new) = (has(dir, "f").await, has(to, "g").await);
                assert!(
                    old.is_some() != new.is_some(),
                    "{what}: old name {} new name {}",
                    old.is_some(),
                    new.is_some()
                );
                assert!(!must || new.is_some(), "{what}: the rename was lost");
                let i = new.or(old).expect("one name");
                assert_eq!(i.attr.fid, self.file(), "{what}");
            }
            Op::Link => {
                let l = has(other, "l").await;
                let i = c.getattr(self.file()).await.expect("getattr");
                assert!(!must || l.is_some(), "{what}: the link was lost");
                assert_eq!(i.attr.nlink, 1 + l.is_some() as u32, "{what}: nlink");
            }
            Op::Setattr => {
                let i = c.getattr(self.file()).await.expect("getattr");
                let changed = (i.attr.mode & 0o7777, i.attr.uid, i.attr.gid) == (0o600, 7, 8);
                assert!(
                    !must || changed,
                    "{what}: {:o} {} {}",
                    i.attr.mode,
                    i.attr.uid,
                    i.attr.gid
                );
            }
            Op::Setxattr => {
                let v = c.getxattr(self.file(), b"user.k", &cred()).await;
                match v {
                    Ok(v) => assert_eq!(v, b"value", "{what}"),
                    Err(Errno::ENODATA) => assert!(!must, "{what}: the xattr was lost"),
                    Err(e) => panic!("{what}: getxattr: {e}"),
                }
            }
            Op::WriteFsync => {
                let data = pattern(DATA, 2);
                if must {
                    let (size, got) = content(c, self.file()).await;
                    assert_eq!(size, DATA as u64, "{what}: size");
                    assert!(got == data, "{what}: the synced data differs");
                } else {
                    assert_prefix_of(c, self.file(), &data, &what).await;
                }
            }
            Op::CreateWriteFsync | Op::DomCreateWriteFsync => {
                let i = has(dir, "new").await;
                assert!(
                    !must || i.is_some(),
                    "{what}: the fsynced file's name is gone"
                );
                if let Some(i) = i {
                    if self.op == Op::DomCreateWriteFsync {
                        let l = c.getattr(i.attr.fid).await.expect("getattr").layout;
                        assert!(
                            l.as_ref().is_some_and(|l| l.dom().is_some()),
                            "{what}: not a DoM file: {l:?}"
                        );
                    }
                    let data = pattern(DATA, 3);
                    if must {
                        let (size, got) = content(c, i.attr.fid).await;
                        assert_eq!(size, DATA as u64, "{what}: size");
                        assert!(got == data, "{what}: the synced data differs");
                    } else {
                        assert_prefix_of(c, i.attr.fid, &data, &what).await;
                    }
                }
            }
            Op::Truncate => {
                let data = pattern(DATA, 1);
                let (size, got) = content(c, self.file()).await;
                assert!(!must || size == TRUNC as u64, "{what}: size {size}");
                assert!(
                    size == TRUNC as u64 || size == DATA as u64,
                    "{what}: size {size}"
                );
                assert_eq!(
                    got.len() as u64,
                    size,
                    "{what}: size and readable bytes differ"
                );
                assert!(got == data[..got.len()], "{what}: the data differs");
            }
            Op::LayoutChange => {
                let i = c.getattr(self.file()).await.expect("getattr");
                let moved = i.layout.as_ref().is_some_and(|l| l.dom().is_some());
                assert!(!must || moved, "{what}: the layout change was lost");
                let (size, got) = content(c, self.file()).await;
                assert_eq!(size, DATA as u64, "{what}: size");
                assert!(got == pattern(DATA, 1), "{what}: the data differs");
            }
        }
    }
}

/// Runs `ops` (each synced and not), cuts `target`'s power, and checks the outcome, then
/// `subsets` other outcomes of the same cut.
async fn cut_after(rig: &mut Rig, ops: &[Op], target: &str, subsets: usize, round: &str) {
    let c = rig.cl.mount(&format!("pcut-{round}")).await;
    // Clients unmount before the cut and never replay: a short recovery window keeps each
    // restart from waiting long for them.
    for (n, v) in [("recovery_time_soft", "1"), ("recovery_time_hard", "3")] {
        for t in ["mdt", "obdfilter"] {
            c.set_param_persistent(&format!("{t}.*.{n}"), Some(v))
                .await
                .expect("set_param -P");
        }
    }
    let mut cases = Vec::new();
    for &op in ops {
        cases.push(Case::setup(&c, op, true).await);
        cases.push(Case::setup(&c, op, false).await);
    }
    // Synced operations first: a later sync would make the unsynced ones durable too.
    for case in cases.iter().filter(|c| c.synced) {
        case.run(&c).await;
    }
    for case in cases.iter().filter(|c| !c.synced) {
        case.run(&c).await;
    }
    c.unmount();
    tokio::task::block_in_place(|| rig.cut(target));
    verify_all(rig, &cases, target, round).await;
    let filters = tokio::task::block_in_place(|| rig.disks[target].cases(subsets));
    eprintln!(
        "{round}: {} other outcome(s) of the cut of {target}",
        filters.len()
    );
    for f in filters {
        tokio::task::block_in_place(|| rig.other_outcome(target, &f));
        verify_all(rig, &cases, &format!("{target} (outcome {f})"), round).await;
    }
}

async fn verify_all(rig: &mut Rig, cases: &[Case], cut: &str, round: &str) {
    let c = rig.cl.mount(&format!("pcut-{round}-verify")).await;
    // Distributed operations the cut left open are finished by recovery first.
    common::cluster::quiesce_within(&c, std::time::Duration::from_secs(60)).await;
    for case in cases {
        case.verify(&c, cut).await;
    }
    // A file made now gets the objects the MDT hands out next, which the cut may have
    // taken back from a lost file after a client wrote them: it starts empty and takes
    // its own writes.
    let name = format!("after {cut}");
    let fid = create(&c, Fid::ROOT, name.as_bytes(), FILE)
        .await
        .expect("a create after the cut")
        .attr
        .fid;
    let (size, _) = content(&c, fid).await;
    assert_eq!(size, 0, "{name}: a new file is not empty");
    let data = pattern(70_000, 9);
    write_file(&c, fid, &data, true).await;
    let (size, got) = content(&c, fid).await;
    assert!(
        size == data.len() as u64 && got == data,
        "{name}: a new file reads {size} bytes, not what was written"
    );
    c.unmount();
    tokio::task::block_in_place(|| {
        rig.cl.stop_all();
        let rep = rig.cl.check();
        assert!(
            rep.is_clean(),
            "after a power cut of {cut}: {}",
            rep.summary()
        );
        rig.cl.start_all();
    });
}

fn each() -> bool {
    std::env::var_os("NACRE_POWER_CUT_EACH").is_some()
}

/// The operations of the suite: all, or those `NACRE_POWER_CUT_OPS` names
/// (`WriteFsync,Unlink`).
fn ops() -> Vec<Op> {
    match std::env::var("NACRE_POWER_CUT_OPS") {
        Ok(v) => {
            let names: Vec<&str> = v.split(',').map(str::trim).collect();
            let ops: Vec<Op> = ALL
                .into_iter()
                .filter(|op| names.contains(&format!("{op:?}").as_str()))
                .collect();
            assert!(
                !ops.is_empty(),
                "NACRE_POWER_CUT_OPS={v} names no operation"
            );
            ops
        }
        Err(_) => ALL.to_vec(),
    }
}

fn subsets() -> usize {
    std::env::var("NACRE_POWER_CUT_SUBSETS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

async fn suite(target: &str) {
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(Rig::started);
    if each() {
        for op in ops() {
            cut_after(&mut rig, &[op], target, subsets(), &format!("{op:?}")).await;
        }
    } else {
        cut_after(&mut rig, &ops(), target, subsets(), "all").await;
    }
    tokio::task::block_in_place(|| rig.cl.stop_all());
}

/// The harness itself: a cut keeps a synced file and its name, and loses a file, a
/// directory and an overwrite nobody synced.
#[test]
fn a_power_cut_drops_every_write_not_synced() {
    if !require_power_cut() {
        return;
    }
    use std::io::Write;
    let disk = PowerCutDisk::new("64M");
    let p = disk.path().to_path_buf();
    let put = |name: &str, data: &[u8], sync: bool| {
        let mut f = std::fs::File::create(p.join(name)).expect("create");
        f.write_all(data).expect("write");
        if sync {
            f.sync_all().expect("fsync");
            std::fs::File::open(&p)
                .and_then(|d| d.sync_all())
                .expect("fsync dir");
        }
    };
    put("synced", b"kept", true);
    put("overwritten", b"old", true);
    put("unsynced", b"lost", false);
    put("overwritten", b"new and longer", false);
    std::fs::create_dir(p.join("dir")).expect("mkdir");
    disk.cut(&[]);
    disk.power_on();
    assert_eq!(std::fs::read(p.join("synced")).expect("synced"), b"kept");
    assert!(
        !p.join("unsynced").exists(),
        "an unsynced file survived the cut"
    );
    assert!(
        !p.join("dir").exists(),
        "an unsynced mkdir survived the cut"
    );
    assert_eq!(
        std::fs::read(p.join("overwritten")).expect("overwritten"),
        b"old"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_cut_of_the_mdt_keeps_what_was_synced() {
    suite("mdt0").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_cut_of_the_ost_keeps_what_was_synced() {
    suite("ost0").await;
}

/// A truncate alone before the cut (in the whole suite, later operations happen to sync
/// the punched objects): the MDT must not trust a size whose punch the OST may lose.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_cut_of_the_ost_after_a_truncate() {
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(Rig::started);
    cut_after(&mut rig, &[Op::Truncate], "ost0", subsets(), "truncate").await;
    tokio::task::block_in_place(|| rig.cl.stop_all());
}

/// A new file written and left unsynced, alone before the MDT's cut (in the whole suite a
/// later `fsync` commits its create): the cut takes back the create and the pool's next
/// object id with it, while the OST keeps what the client wrote. The restarted MDT hands
/// that id out again, so its OST must reset the object first (the orphan cleanup): the
/// check after the cut makes a new file, which must start empty and read back only its
/// own bytes, and `nacre check` finds no orphan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_cut_of_the_mdt_after_an_unsynced_create_leaves_its_objects_to_no_one() {
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(Rig::started);
    cut_after(
        &mut rig,
        &[Op::CreateWriteFsync],
        "mdt0",
        subsets(),
        "lost-create",
    )
    .await;
    tokio::task::block_in_place(|| rig.cl.stop_all());
}

/// A file's objects destroyed by its unlink, then the OST's power cut before anything else
/// synced its disk: the MDT dropped its destroy record on the OST's answer, so an object
/// the cut brought back would be an orphan nothing destroys again. The OST answers a
/// destroy only once it is durable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_cut_of_the_ost_after_its_objects_were_destroyed() {
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(Rig::started);
    let c = rig.cl.mount("pcut-destroy").await;
    let info = create(&c, c.root(), b"gone", FILE).await.expect("create");
    let fid = info.attr.fid;
    write_file(&c, fid, &pattern(DATA, 3), true).await;
    let ost = rig.disks["ost0"].path().join("ost0");
    let objs: Vec<Fid> = info
        .layout
        .as_ref()
        .expect("layout")
        .objects()
        .map(|o| o.fid)
        .collect();
    // The file's objects that hold data on the OST's disk.
    let held = || -> usize {
        nacre_osd::inject::objects_with_data(&ost)
            .expect("objects")
            .iter()
            .filter(|(f, _, _)| objs.contains(f))
            .count()
    };
    assert!(held() > 0, "the file's data is on the OST");
    c.unlink(c.root(), b"gone", &cred()).await.expect("unlink");
    // The MDT destroys the objects within moments of the unlink; the cut follows at once,
    // well within the OST disk's own journal commit (5 s).
    let end = std::time::Instant::now() + std::time::Duration::from_secs(4);
    while held() > 0 {
        assert!(
            std::time::Instant::now() < end,
            "the objects were never destroyed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    c.unmount();
    tokio::task::block_in_place(|| rig.cut("ost0"));
    verify_all(&mut rig, &[], "ost0", "destroy").await;
    tokio::task::block_in_place(|| rig.cl.stop_all());
}

/// An unlink nobody synced, then the MDT's power cut once the unlink log had time for a
/// pass: the MDT destroys a file's objects only once the change that dropped them is
/// durable (Lustre's OSP sends only committed llog records), so a cut that takes the
/// unlink back gives the file back whole, and `nacre check` finds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_cut_of_the_mdt_after_an_unsynced_unlink_gives_the_file_back_whole() {
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(Rig::started);
    let c = rig.cl.mount("pcut-unlink").await;
    // No checkpoint of its own makes the unlink durable during the test.
    let name = format!("osd-nacre.{}-MDT0000.checkpoint_interval", rig.cl.fsname);
    common::power_cut::set_param_p_and_wait(&c, &name, "600").await;
    let dir = mkdir_on(&c, Fid::ROOT, "d", 0).await;
    let fid = create(&c, dir, b"f", FILE).await.expect("create").attr.fid;
    let data = pattern(DATA, 4);
    write_file(&c, fid, &data, true).await;
    c.sync_dir(dir).await.expect("fsyncdir");
    c.sync_dir(Fid::ROOT).await.expect("fsyncdir /");
    c.unlink(dir, b"f", &cred()).await.expect("unlink");
    // Several passes' gathering time, well under a pass's wait for a commit.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    c.unmount();
    tokio::task::block_in_place(|| rig.cut("mdt0"));
    let v = rig.cl.mount("pcut-unlink-verify").await;
    common::cluster::quiesce_within(&v, std::time::Duration::from_secs(60)).await;
    let i = lookup(&v, dir, "f")
        .await
        .expect("the unsynced unlink was taken back");
    assert_eq!(i.attr.fid, fid);
    let (size, got) = content(&v, fid).await;
    assert_eq!(size, DATA as u64, "size");
    assert!(got == data, "the file came back with other bytes");
    v.unmount();
    tokio::task::block_in_place(|| {
        rig.cl.stop_all();
        let rep = rig.cl.check();
        assert!(rep.is_clean(), "{}", rep.summary());
    });
}

/// A file whose exact size the MDT had synced (created empty), then rewritten without a
/// sync: the open that made the size inexact and the close that recorded the new one are
/// both in the journal tail the MDT's power cut takes, while the OSTs keep the data. The
/// size shown afterwards must be the data's, not the old exact one: a restart after an
/// unclean stop trusts no exact size recorded before it and glimpses the OSTs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_cut_of_the_mdt_after_an_unsynced_rewrite_shows_the_size_the_osts_kept() {
    if !require_power_cut() {
        return;
    }
    let mut rig = tokio::task::block_in_place(Rig::started);
    let c = rig.cl.mount("pcut-size").await;
    let name = format!("osd-nacre.{}-MDT0000.checkpoint_interval", rig.cl.fsname);
    common::power_cut::set_param_p_and_wait(&c, &name, "600").await;
    let dir = mkdir_on(&c, Fid::ROOT, "d", 0).await;
    let fid = create(&c, dir, b"f", FILE).await.expect("create").attr.fid;
    c.sync_dir(dir).await.expect("fsyncdir");
    c.sync_dir(Fid::ROOT).await.expect("fsyncdir /");
    fsync_inode(&c, fid).await;
    let size = c.getattr(fid).await.expect("getattr").attr.size;
    assert_eq!(size, 0, "the new file's size");
    let data = pattern(DATA, 5);
    write_file(&c, fid, &data, false).await;
    // The close's settle has time to record the new size, unsynced.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    c.unmount();
    tokio::task::block_in_place(|| rig.cut("mdt0"));
    let v = rig.cl.mount("pcut-size-verify").await;
    common::cluster::quiesce_within(&v, std::time::Duration::from_secs(60)).await;
    assert_prefix_of(&v, fid, &data, "rewritten file").await;
    // The stat that glimpsed also queued the file to be settled again: soon its size is
    // exact on the MDT once more, and it is the data's.
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let st = v.getattr(fid).await.expect("getattr");
        if st.size_authoritative {
            assert_eq!(st.attr.size, DATA as u64, "the settled size");
            break;
        }
        assert!(
            std::time::Instant::now() < end,
            "the size was never settled again"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    v.unmount();
    tokio::task::block_in_place(|| {
        rig.cl.stop_all();
        let rep = rig.cl.check();
        assert!(rep.is_clean(), "{}", rep.summary());
    });
}

/// A rename across MDTs alone before the cut, of the MDT that removes the old name (a
/// participant) and then of the one that adds the new name (the coordinator): both
/// names or none would be a half-done distributed operation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_cut_of_either_mdt_of_a_rename_across_mdts() {
    if !require_power_cut() {
        return;
    }
    for target in ["mdt0", "mdt1"] {
        let mut rig = tokio::task::block_in_place(|| {
            let mut r = Rig::new();
            r.cl.start_all();
            r
        });
        let round = format!("rename-{target}");
        cut_after(&mut rig, &[Op::RenameMdts], target, subsets(), &round).await;
        tokio::task::block_in_place(|| rig.cl.stop_all());
    }
}
