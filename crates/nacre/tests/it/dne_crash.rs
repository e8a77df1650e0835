//! Crash safety of operations across MDTs: each target runs as its own `nacre serve`
//! process; a fault-injection point (`NACRE_FAIL_POINT`) kills the coordinator or a
//! participant MDT at each step of a remote mkdir, a striped mkdir, renames of a file and
//! of a directory across MDTs, a remote rmdir and a hard link across MDTs. The victim is
//! restarted, recovery runs, and then the operation must be either complete or undone
//! (checked through the client) and the file system consistent (the checker, run on the
//! stopped stores, finds no dangling name, orphan, bad link count or unfinished record, and
//! every file's objects match its layout).

use crate::common;

use common::cluster::quiesce_within;
use common::{free_port, nacre};
use nacre_client::{Client, MountSpec};
use nacre_core::lmv::HashType;
use nacre_core::{Errno, Fid};
use nacre_rpc::Key;
use nacre_rpc::msg::{Cred, DirLayoutRequest, LayoutRequest};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MDTS: u32 = 3;
const FSNAME: &str = "crash";
/// Exit status of a process killed at a fail point (`nacre_mdt::fail::EXIT_CODE`).
const FAIL_EXIT: i32 = 137;

/// A file system with one process per target.
struct Cluster {
    dir: PathBuf,
    mgsnode: String,
    procs: HashMap<String, Child>,
}

impl Cluster {
    fn format(dir: &Path) -> Cluster {
        let mgsnode = format!("127.0.0.1:{}", free_port());
        let run = |args: &[&str]| {
            let o = Command::new(nacre()).args(args).output().expect("nacre");
            assert!(
                o.status.success(),
                "nacre {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        };
        let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
        run(&[
            "format",
            "--mgs",
            "--fsname",
            FSNAME,
            "--mgsnode",
            &mgsnode,
            &p("mgs"),
        ]);
        let key = p("mgs/key");
        for i in 0..MDTS {
            run(&[
                "format",
                "--mdt",
                "--index",
                &i.to_string(),
                "--fsname",
                FSNAME,
                "--mgsnode",
                &mgsnode,
                "--key",
                &key,
                &p(&format!("mdt{i}")),
            ]);
        }
        run(&[
            "format",
            "--ost",
            "--index",
            "0",
            "--fsname",
            FSNAME,
            "--mgsnode",
            &mgsnode,
            "--key",
            &key,
            &p("ost0"),
        ]);
        Cluster {
            dir: dir.to_path_buf(),
            mgsnode,
            procs: HashMap::new(),
        }
    }

    fn key(&self) -> Key {
        Key::load(&self.dir.join("mgs/key")).expect("key")
    }

    /// Starts `target` (mgs, ost0, mdtN) and waits until it serves.
    fn start(&mut self, target: &str, fail: Option<&str>) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{target}.log")))
            .expect("log");
        let mut cmd = Command::new(nacre());
        cmd.arg("serve").arg(self.dir.join(target));
        if target == "mgs" {
            cmd.args(["--listen", &self.mgsnode]);
        } else {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        cmd.env_remove("NACRE_FAIL_POINT");
        if let Some(f) = fail {
            cmd.env("NACRE_FAIL_POINT", f);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("serve");
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if line.contains("serving on") {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{target} did not start (see {target}.log)"));
        self.procs.insert(target.to_string(), child);
    }

    fn start_all(&mut self) {
        self.start("mgs", None);
        self.start("ost0", None);
        for i in 0..MDTS {
            self.start(&format!("mdt{i}"), None);
        }
    }

    /// Stops `target` cleanly (SIGTERM) and waits for it.
    fn stop(&mut self, target: &str) {
        if let Some(mut c) = self.procs.remove(target) {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
    }

    fn stop_all(&mut self) {
        for i in 0..MDTS {
            self.stop(&format!("mdt{i}"));
        }
        self.stop("ost0");
        self.stop("mgs");
    }

    /// Waits for `target` to exit on its own.
    fn wait_exit(&mut self, target: &str, within: Duration) -> Option<ExitStatus> {
        let end = Instant::now() + within;
        while Instant::now() < end {
            let c = self.procs.get_mut(target)?;
            if let Ok(Some(st)) = c.try_wait() {
                self.procs.remove(target);
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, mut c) in self.procs.drain() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

async fn mount(cl: &Cluster) -> Arc<Client> {
    let spec = MountSpec::parse(&format!("{}:/{FSNAME}", cl.mgsnode), cl.key(), "crash-test")
        .expect("spec");
    for _ in 0..100 {
        if let Ok(c) = Client::mount(spec.clone()).await {
            let ready = c.config().mdts.len() == MDTS as usize;
            if ready && c.getattr(Fid::ROOT).await.is_ok() {
                return c;
            }
            c.unmount();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("cannot mount");
}

fn cred() -> Cred {
    Cred::root()
}

async fn mkdir_on(c: &Client, parent: Fid, name: &str, mdt: i32, count: i32) -> Result<Fid, Errno> {
    c.mkdir_with_layout(
        parent,
        name.as_bytes(),
        0o755,
        &cred(),
        DirLayoutRequest {
            stripe_count: count,
            stripe_offset: mdt,
            mdts: Vec::new(),
            hash_type: HashType::Fnv1a64 as u32,
        },
    )
    .await
    .map(|i| i.attr.fid)
}

async fn create(c: &Client, parent: Fid, name: &str, dir: bool) -> Fid {
    let mode = if dir {
        libc::S_IFDIR | 0o755
    } else {
        libc::S_IFREG | 0o644
    };
    c.create(
        parent,
        name.as_bytes(),
        mode,
        0,
        &cred(),
        None,
        LayoutRequest::Inherit,
        None,
        true,
    )
    .await
    .unwrap_or_else(|e| panic!("create {name}: {e}"))
    .0
    .attr
    .fid
}

async fn exists(c: &Client, parent: Fid, name: &str) -> Option<Fid> {
    match c.lookup(parent, name.as_bytes(), &Cred::root()).await {
        Ok(i) => Some(i.attr.fid),
        Err(Errno::ENOENT) => None,
        Err(e) => panic!("lookup {name}: {e}"),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    RemoteMkdir,
    StripedMkdir,
    RenameFile,
    RenameDir,
    RemoteRmdir,
    Link,
}

/// Names and FIDs an operation works on, made before the crash.
struct Setup {
    a: Fid,
    b: Fid,
    obj: Option<Fid>,
}

impl Op {
    /// (coordinator, participant) MDTs.
    fn roles(self) -> (u32, u32) {
        match self {
            Op::RenameDir => (2, 1),
            _ => (0, 1),
        }
    }

    async fn setup(self, c: &Arc<Client>, tag: &str) -> Setup {
        let root = Fid::ROOT;
        // `a` on MDT1 holds the sources; `b` on MDT2 is a target for directory renames.
        let a = mkdir_on(c, root, &format!("{tag}.a"), 1, 1)
            .await
            .expect("a");
        let b = mkdir_on(c, root, &format!("{tag}.b"), 2, 1)
            .await
            .expect("b");
        let obj = match self {
            Op::RemoteMkdir | Op::StripedMkdir => None,
            // With data: its OST object names the file, which the layout check verifies.
            Op::RenameFile | Op::Link => Some(
                common::integrity::write_file(c, a, "f", None, b"moved across MDTs")
                    .await
                    .expect("write f"),
            ),
            Op::RenameDir => {
                let x = create(c, a, "x", true).await;
                create(c, x, "inside", false).await;
                Some(x)
            }
            Op::RemoteRmdir => Some(
                mkdir_on(c, root, &format!("{tag}.r"), 1, 1)
                    .await
                    .expect("r"),
            ),
        };
        Setup { a, b, obj }
    }

    async fn run(self, c: Arc<Client>, tag: String, s: &Setup) -> Result<(), Errno> {
        let root = Fid::ROOT;
        match self {
            Op::RemoteMkdir => mkdir_on(&c, root, &format!("{tag}.new"), 1, 1)
                .await
                .map(|_| ()),
            Op::StripedMkdir => mkdir_on(&c, root, &format!("{tag}.new"), 1, 3)
                .await
                .map(|_| ()),
            Op::RenameFile => {
                c.rename(s.a, b"f", root, format!("{tag}.f").as_bytes(), 0, &cred())
                    .await
            }
            Op::RenameDir => c.rename(s.a, b"x", s.b, b"x", 0, &cred()).await,
            Op::RemoteRmdir => c.rmdir(root, format!("{tag}.r").as_bytes(), &cred()).await,
            Op::Link => c
                .link(
                    s.obj.expect("f"),
                    root,
                    format!("{tag}.l").as_bytes(),
                    &cred(),
                )
                .await
                .map(|_| ()),
        }
    }

    /// Checks that the operation either happened or did not, through the client; returns
    /// whether it happened.
    async fn outcome(self, c: &Client, tag: &str, s: &Setup) -> bool {
        let root = Fid::ROOT;
        match self {
            Op::RemoteMkdir | Op::StripedMkdir => {
                let Some(d) = exists(c, root, &format!("{tag}.new")).await else {
                    return false;
                };
                let info = c.getattr(d).await.expect("new dir");
                assert_eq!(
                    info.lmv.map(|l| l.stripe_count()).unwrap_or(1),
                    if self == Op::StripedMkdir { 3 } else { 1 }
                );
                // Usable: a file in each stripe.
                for i in 0..6 {
                    create(c, d, &format!("probe{i}"), false).await;
                }
                let (ents, _) = c.readdir(d, 0, 100, &Cred::root()).await.expect("readdir");
                assert_eq!(ents.len(), 6);
                true
            }
            Op::RenameFile => {
                let old = exists(c, s.a, "f").await;
                let new = exists(c, root, &format!("{tag}.f")).await;
                assert!(old.is_some() != new.is_some(), "old {old:?} new {new:?}");
                assert_eq!(old.or(new), s.obj);
                new.is_some()
            }
            Op::RenameDir => {
                let old = exists(c, s.a, "x").await;
                let new = exists(c, s.b, "x").await;
                assert!(old.is_some() != new.is_some(), "old {old:?} new {new:?}");
                let x = old.or(new).expect("x");
                assert_eq!(Some(x), s.obj);
                assert!(exists(c, x, "inside").await.is_some());
                let (na, nb) = (
                    c.getattr(s.a).await.expect("a").attr.nlink,
                    c.getattr(s.b).await.expect("b").attr.nlink,
                );
                if new.is_some() {
                    assert_eq!((na, nb), (2, 3));
                } else {
                    assert_eq!((na, nb), (3, 2));
                }
                new.is_some()
            }
            Op::RemoteRmdir => match exists(c, root, &format!("{tag}.r")).await {
                Some(r) => {
                    assert_eq!(Some(r), s.obj);
                    create(c, r, "still-usable", false).await;
                    false
                }
                None => {
                    assert_eq!(
                        c.getattr(s.obj.expect("r")).await.err(),
                        Some(Errno::ESTALE)
                    );
                    true
                }
            },
            Op::Link => {
                let f = c.getattr(s.obj.expect("f")).await.expect("f").attr.nlink;
                match exists(c, root, &format!("{tag}.l")).await {
                    Some(l) => {
                        assert_eq!(Some(l), s.obj);
                        assert_eq!(f, 2);
                        true
                    }
                    None => {
                        assert_eq!(f, 1);
                        false
                    }
                }
            }
        }
    }
}

/// The fail points, whom they kill, and whether the operation must have happened after
/// recovery (`None`: either is correct). A coordinator killed before its commit point
/// rolls the operation back, but the client, which got no answer, resends it once the
/// MDT is back (Lustre's resend), so it may run again: either outcome is right as long
/// as it is the one the client was told.
const POINTS: [(&str, bool, Option<bool>); 5] = [
    ("dne.coord.prepared", true, None),
    ("dne.coord.committed", true, Some(true)),
    ("dne.coord.remote_committed", true, Some(true)),
    ("dne.part.prepared", false, None),
    ("dne.part.committed", false, Some(true)),
];

async fn crash_matrix(ops: &[Op]) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("warn")
        .with_test_writer()
        .try_init();
    let tmp = tempfile::tempdir().expect("tmp");
    let mut cl = Cluster::format(tmp.path());
    cl.start_all();
    let mut c = mount(&cl).await;
    let mut n = 0;
    for &op in ops {
        for (point, kill_coord, expect) in POINTS {
            n += 1;
            let tag = format!("s{n}");
            let s = op.setup(&c, &tag).await;
            let (coord, part) = op.roles();
            let victim = format!("mdt{}", if kill_coord { coord } else { part });
            // Re-start the victim with the point armed.
            cl.stop(&victim);
            cl.start(&victim, Some(point));
            let task = tokio::spawn({
                let c = c.clone();
                let tag = tag.clone();
                async move {
                    let s = s;
                    let r = op.run(c, tag, &s).await;
                    (r, s)
                }
            });
            let st = tokio::task::block_in_place(|| cl.wait_exit(&victim, Duration::from_secs(40)))
                .unwrap_or_else(|| panic!("{op:?} at {point}: {victim} did not reach the point"));
            assert_eq!(
                st.code(),
                Some(FAIL_EXIT),
                "{op:?} at {point}: {victim} exit {st}"
            );
            tokio::task::block_in_place(|| cl.start(&victim, None));
            let (r, s) = tokio::time::timeout(Duration::from_secs(60), task)
                .await
                .expect("operation hangs")
                .expect("task");
            quiesce_within(&c, Duration::from_secs(60)).await;
            let happened = op.outcome(&c, &tag, &s).await;
            eprintln!(
                "{op:?} killed {victim} at {point}: client got {r:?}; after recovery done={happened}"
            );
            if let Some(want) = expect {
                assert_eq!(happened, want, "{op:?} at {point}");
            }
            // What the client was told holds: a success is never undone by recovery.
            if r.is_ok() {
                assert!(
                    happened,
                    "{op:?} at {point}: the client got Ok, recovery undid it"
                );
            }
            // The namespace on the stopped stores.
            c.disconnect().await;
            c.unmount();
            tokio::task::block_in_place(|| cl.stop_all());
            let dirs: Vec<PathBuf> = (0..MDTS)
                .map(|i| tmp.path().join(format!("mdt{i}")))
                .collect();
            let osts = [tmp.path().join("ost0")];
            let rep = nacre::check::check_targets(&dirs, &osts).expect("check");
            assert!(rep.is_clean(), "{op:?} at {point}: {}", rep.summary());
            tokio::task::block_in_place(|| cl.start_all());
            c = mount(&cl).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_during_mkdir_across_mdts() {
    crash_matrix(&[Op::RemoteMkdir, Op::StripedMkdir]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_during_rename_across_mdts() {
    crash_matrix(&[Op::RenameFile, Op::RenameDir]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_during_rmdir_and_link_across_mdts() {
    crash_matrix(&[Op::RemoteRmdir, Op::Link]).await;
}

/// An operation needing a stopped MDT fails promptly with EIO and leaves nothing; a
/// participant that dies after preparing and stays down leaves exactly what the checker
/// reports (a pending record and the unnamed object), and recovery clears both once it
/// is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mdt_down_and_checker_finds_what_recovery_fixes() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut cl = Cluster::format(tmp.path());
    cl.start_all();
    let c = mount(&cl).await;
    let dirs: Vec<PathBuf> = (0..MDTS)
        .map(|i| tmp.path().join(format!("mdt{i}")))
        .collect();
    let osts = [tmp.path().join("ost0")];

    tokio::task::block_in_place(|| cl.stop("mdt2"));
    let t = Instant::now();
    let r = mkdir_on(&c, Fid::ROOT, "on-a-down-mdt", 2, 1).await;
    assert_eq!(r.err(), Some(Errno::EIO));
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "took {:?}",
        t.elapsed()
    );
    assert!(exists(&c, Fid::ROOT, "on-a-down-mdt").await.is_none());
    let r = mkdir_on(&c, Fid::ROOT, "striped-over-a-down-mdt", 0, 3).await;
    assert_eq!(r.err(), Some(Errno::EIO));
    assert!(
        exists(&c, Fid::ROOT, "striped-over-a-down-mdt")
            .await
            .is_none()
    );
    tokio::task::block_in_place(|| cl.start("mdt2", None));

    tokio::task::block_in_place(|| {
        cl.stop("mdt1");
        cl.start("mdt1", Some("dne.part.prepared"));
    });
    let task = tokio::spawn({
        let c = c.clone();
        async move { mkdir_on(&c, Fid::ROOT, "half", 1, 1).await }
    });
    let st = tokio::task::block_in_place(|| cl.wait_exit("mdt1", Duration::from_secs(30)));
    assert_eq!(st.and_then(|s| s.code()), Some(FAIL_EXIT));
    // MDT1 stays down: the coordinator gives up and the client hears so.
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("no hang")
            .expect("task")
            .err(),
        Some(Errno::EIO)
    );
    assert!(exists(&c, Fid::ROOT, "half").await.is_none());
    c.unmount();
    tokio::task::block_in_place(|| cl.stop_all());
    let rep = nacre::check::check_targets(&dirs, &osts).expect("check");
    assert_eq!(rep.pending, 1, "{}", rep.summary());
    assert_eq!(rep.orphans.len(), 1, "{}", rep.summary());
    assert!(!rep.is_clean());

    tokio::task::block_in_place(|| cl.start_all());
    let c = mount(&cl).await;
    quiesce_within(&c, Duration::from_secs(60)).await;
    assert!(exists(&c, Fid::ROOT, "half").await.is_none());
    c.unmount();
    tokio::task::block_in_place(|| cl.stop_all());
    let rep = nacre::check::check_targets(&dirs, &osts).expect("check");
    assert!(rep.is_clean(), "{}", rep.summary());
}
