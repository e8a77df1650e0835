//! `fcntl` and `flock` locks across clients (Lustre's flock locks, mounted `-o flock`): a
//! lock taken on one mount keeps the other out, `F_GETLK` names it, a waiting lock is
//! granted when the holder lets go (by unlock, close or death), a signal ends a wait
//! with EINTR, two waits that would deadlock get EDEADLK, and a counter that two clients
//! increment under a lock loses no increment. The first mount is `nacre up`'s own, the
//! second a `nacre mount` process.

use crate::common;

use common::{Second, UpFs, require_fuse};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `python3` under a bound: a wait that deadlock detection missed fails the test rather
/// than hanging it.
fn python() -> Command {
    let mut c = Command::new("timeout");
    c.args(["60", "python3"]);
    c
}

/// Longest a waiting lock may take to be granted once its holder lets go: the client
/// asks again at the MDT's callback, or within a second without one.
const GRANT_BOUND: Duration = Duration::from_secs(5);

fn open_rw(p: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(p)
        .expect("open")
}

/// `fcntl(cmd)` with a `struct flock` of `typ` over `start..start+len` (`len` 0: to the
/// end); the lock `F_GETLK` returned, or the errno.
fn fcntl_lock(f: &File, cmd: i32, typ: i32, start: i64, len: i64) -> Result<libc::flock, i32> {
    // SAFETY: a zeroed `struct flock` is a valid value of it.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = typ as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start;
    fl.l_len = len;
    // SAFETY: the descriptor is open and `fl` outlives the call.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), cmd, &mut fl) };
    if r == 0 {
        Ok(fl)
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

fn flock(f: &File, op: i32) -> Result<(), i32> {
    // SAFETY: the descriptor is open.
    let r = unsafe { libc::flock(f.as_raw_fd(), op) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

#[test]
fn a_write_lock_on_one_client_keeps_the_other_out_until_unlocked() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    std::fs::write(fs.path("f"), vec![0u8; 4096]).expect("write");
    let a = open_rw(&fs.path("f"));
    let b = open_rw(&m2.path("f"));
    fcntl_lock(&a, libc::F_SETLK, libc::F_WRLCK, 100, 100).expect("lock on m1");
    // Overlapping: refused, and F_GETLK names the holder's range.
    assert_eq!(
        fcntl_lock(&b, libc::F_SETLK, libc::F_RDLCK, 150, 10).err(),
        Some(libc::EAGAIN)
    );
    let got = fcntl_lock(&b, libc::F_GETLK, libc::F_WRLCK, 0, 0).expect("getlk");
    assert_eq!(i32::from(got.l_type), libc::F_WRLCK);
    assert_eq!((got.l_start, got.l_len), (100, 100));
    // Beside it: granted.
    fcntl_lock(&b, libc::F_SETLK, libc::F_WRLCK, 200, 50).expect("lock beside");
    fcntl_lock(&b, libc::F_SETLK, libc::F_WRLCK, 0, 100).expect("lock before");
    // The holder's own further locks are its business: a read lock over its range.
    fcntl_lock(&a, libc::F_SETLK, libc::F_RDLCK, 120, 10).expect("convert part");
    // Now a read lock over that part is shared, the rest still refused.
    fcntl_lock(&b, libc::F_SETLK, libc::F_RDLCK, 120, 10).expect("share the read part");
    assert_eq!(
        fcntl_lock(&b, libc::F_SETLK, libc::F_RDLCK, 110, 5).err(),
        Some(libc::EAGAIN)
    );
    fcntl_lock(&a, libc::F_SETLK, libc::F_UNLCK, 0, 0).expect("unlock all");
    fcntl_lock(&b, libc::F_SETLK, libc::F_WRLCK, 100, 100).expect("lock after unlock");
    // And m1 is kept out now.
    let got = fcntl_lock(&a, libc::F_GETLK, libc::F_RDLCK, 0, 0).expect("getlk on m1");
    assert_eq!(i32::from(got.l_type), libc::F_WRLCK);
}

#[test]
fn flock_excludes_across_clients_until_the_holder_closes() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    std::fs::write(fs.path("lock"), b"").expect("create");
    let a = File::open(fs.path("lock")).expect("open m1");
    let b = File::open(m2.path("lock")).expect("open m2");
    flock(&a, libc::LOCK_EX | libc::LOCK_NB).expect("flock on m1");
    assert_eq!(
        flock(&b, libc::LOCK_SH | libc::LOCK_NB).err(),
        Some(libc::EWOULDBLOCK)
    );
    // util-linux's flock(1) on the second mount sees it too.
    let st = Command::new("flock")
        .args(["-n", "-E", "75"])
        .arg(m2.path("lock"))
        .arg("true")
        .status()
        .expect("run flock(1)");
    assert_eq!(st.code(), Some(75), "flock -n on m2 while m1 holds it");
    // Shared locks share.
    flock(&a, libc::LOCK_SH | libc::LOCK_NB).expect("downgrade");
    flock(&b, libc::LOCK_SH | libc::LOCK_NB).expect("shared on m2");
    flock(&b, libc::LOCK_UN).expect("unlock m2");
    flock(&a, libc::LOCK_EX | libc::LOCK_NB).expect("upgrade");
    // The holder's close gives it back.
    drop(a);
    let start = Instant::now();
    loop {
        match flock(&b, libc::LOCK_EX | libc::LOCK_NB) {
            Ok(()) => break,
            // The kernel sends the last close's release after close(2) returns.
            Err(e) if e == libc::EWOULDBLOCK && start.elapsed() < GRANT_BOUND => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("flock on m2 after m1 closed: errno {e}"),
        }
    }
}

#[test]
fn a_waiting_lock_is_granted_when_the_other_client_lets_go() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    std::fs::write(fs.path("f"), b"x").expect("create");
    let a = open_rw(&fs.path("f"));
    fcntl_lock(&a, libc::F_SETLK, libc::F_WRLCK, 0, 0).expect("lock on m1");
    let p2 = m2.path("f");
    let waiter = std::thread::spawn(move || {
        let b = open_rw(&p2);
        fcntl_lock(&b, libc::F_SETLKW, libc::F_WRLCK, 0, 0).map(|_| Instant::now())
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !waiter.is_finished(),
        "the waiter got the lock while m1 held it"
    );
    let released = Instant::now();
    fcntl_lock(&a, libc::F_SETLK, libc::F_UNLCK, 0, 0).expect("unlock");
    let granted = waiter.join().expect("waiter").expect("F_SETLKW on m2");
    let took = granted.saturating_duration_since(released);
    assert!(took < GRANT_BOUND, "granted {took:?} after the unlock");
}

/// A Python process on `p` that takes an exclusive `lockf` lock, says so, and sleeps.
fn holder(p: &Path) -> std::process::Child {
    // Not under `timeout`: the test kills this very process.
    let mut c = Command::new("python3")
        .arg("-c")
        .arg(
            "import fcntl,sys,time\n\
             f=open(sys.argv[1],'r+')\n\
             fcntl.lockf(f, fcntl.LOCK_EX)\n\
             print('locked', flush=True)\n\
             time.sleep(120)\n",
        )
        .arg(p)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    let out = c.stdout.take().expect("stdout");
    BufReader::new(out).read_line(&mut line).expect("read");
    assert_eq!(line.trim(), "locked");
    c
}

#[test]
fn a_killed_holders_lock_goes_and_a_signal_ends_a_wait() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    std::fs::write(fs.path("f"), b"x").expect("create");
    let mut h = holder(&fs.path("f"));
    // A waiter on m2 that an alarm interrupts: EINTR within the bound, not a hang.
    let start = Instant::now();
    let out = python()
        .arg("-c")
        .arg(
            "import fcntl,signal,sys,errno\n\
             def ring(s, f): raise TimeoutError()\n\
             signal.signal(signal.SIGALRM, ring)\n\
             f=open(sys.argv[1],'r+')\n\
             signal.alarm(1)\n\
             try:\n    fcntl.lockf(f, fcntl.LOCK_EX)\n    print('granted')\n\
             except TimeoutError:\n    print('interrupted')\n",
        )
        .arg(m2.path("f"))
        .output()
        .expect("python3 waiter");
    let took = start.elapsed();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "interrupted");
    assert!(took < GRANT_BOUND, "the interrupted wait took {took:?}");
    // The interrupted waiter left nothing behind: m1's holder still holds, and once it
    // is killed its lock goes.
    let b = open_rw(&m2.path("f"));
    assert_eq!(
        fcntl_lock(&b, libc::F_SETLK, libc::F_WRLCK, 0, 0).err(),
        Some(libc::EAGAIN)
    );
    h.kill().expect("kill the holder");
    let _ = h.wait();
    let start = Instant::now();
    fcntl_lock(&b, libc::F_SETLKW, libc::F_WRLCK, 0, 0).expect("lock after the kill");
    assert!(start.elapsed() < GRANT_BOUND);
}

/// How long a wait in a lock cycle may block before the test calls it a missed deadlock.
const DEADLOCK_BOUND: Duration = Duration::from_secs(30);

#[test]
fn two_waits_that_would_deadlock_get_edeadlk() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    std::fs::write(fs.path("f"), vec![0u8; 10]).expect("create");
    let a = open_rw(&fs.path("f"));
    fcntl_lock(&a, libc::F_SETLK, libc::F_WRLCK, 0, 1).expect("m1 takes byte 0");
    let p2 = m2.path("f");
    let (tx, rx) = std::sync::mpsc::channel();
    let (theirs_tx, theirs_rx) = std::sync::mpsc::channel();
    let _other = std::thread::spawn(move || {
        let b = open_rw(&p2);
        fcntl_lock(&b, libc::F_SETLK, libc::F_WRLCK, 1, 1).expect("m2 takes byte 1");
        tx.send(()).expect("send");
        // Waits for m1's byte 0.
        let r = fcntl_lock(&b, libc::F_SETLKW, libc::F_WRLCK, 0, 1).map(|_| ());
        let _ = theirs_tx.send(r);
        b
    });
    rx.recv().expect("m2 locked");
    std::thread::sleep(Duration::from_millis(300));
    // m1 waiting for m2's byte 1 closes the cycle. Waited for on a thread of its own, so
    // a cycle nobody refused fails the test within the bound instead of hanging it.
    let (mine_tx, mine_rx) = std::sync::mpsc::channel();
    let a = std::thread::spawn(move || {
        let r = fcntl_lock(&a, libc::F_SETLKW, libc::F_WRLCK, 1, 1).map(|_| ());
        let _ = mine_tx.send(r);
        a
    });
    let ended = |rx: &std::sync::mpsc::Receiver<Result<(), i32>>, who: &str| {
        rx.recv_timeout(DEADLOCK_BOUND).unwrap_or_else(|_| {
            panic!("{who}'s wait still blocked after {DEADLOCK_BOUND:?}: a deadlock nobody refused")
        })
    };
    let mine = ended(&mine_rx, "m1");
    let a = a.join().expect("m1 thread");
    if mine.is_err() {
        assert_eq!(mine, Err(libc::EDEADLK));
        fcntl_lock(&a, libc::F_SETLK, libc::F_UNLCK, 0, 0).expect("m1 lets go");
        assert_eq!(ended(&theirs_rx, "m2"), Ok(()));
    } else {
        // m2's wait was the one refused (it asked again after m1 began waiting).
        assert_eq!(ended(&theirs_rx, "m2"), Err(libc::EDEADLK));
    }
}

#[test]
fn a_counter_two_clients_increment_under_a_lock_loses_nothing() {
    if !require_fuse() {
        return;
    }
    const ROUNDS: u64 = 150;
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    std::fs::write(fs.path("counter"), 0u64.to_le_bytes()).expect("create");
    let run = |p: std::path::PathBuf| {
        std::thread::spawn(move || {
            let f = open_rw(&p);
            for _ in 0..ROUNDS {
                fcntl_lock(&f, libc::F_SETLKW, libc::F_WRLCK, 0, 0).expect("lock");
                let mut b = [0u8; 8];
                f.read_exact_at(&mut b, 0).expect("read");
                let n = u64::from_le_bytes(b) + 1;
                f.write_all_at(&n.to_le_bytes(), 0).expect("write");
                fcntl_lock(&f, libc::F_SETLK, libc::F_UNLCK, 0, 0).expect("unlock");
            }
        })
    };
    let t1 = run(fs.path("counter"));
    let t2 = run(m2.path("counter"));
    t1.join().expect("m1 thread");
    t2.join().expect("m2 thread");
    let mut b = [0u8; 8];
    File::open(fs.path("counter"))
        .and_then(|f| f.read_exact_at(&mut b, 0))
        .expect("read the counter");
    assert_eq!(u64::from_le_bytes(b), 2 * ROUNDS);
}

/// Lustre's `flocks_test 3` (its bug 24040), in Python: two `flock`s of one file by
/// one process through two opens conflict; a child that inherited the first open can
/// unlock it, and then the child's own open's `flock` succeeds.
const FLOCKS_TEST_3: &str = r#"
import fcntl, os, sys
p = sys.argv[1]
NB = fcntl.LOCK_EX | fcntl.LOCK_NB
fd = os.open(p, os.O_RDWR)
fcntl.flock(fd, NB)
fd2 = os.open(p, os.O_RDWR)
try:
    fcntl.flock(fd2, NB)
    print("second flock succeeded")
    sys.exit(1)
except BlockingIOError:
    pass
os.close(fd2)
pid = os.fork()
if pid == 0:
    fd3 = os.open(p, os.O_RDWR)
    try:
        fcntl.flock(fd3, NB)
        os._exit(2)
    except BlockingIOError:
        pass
    fcntl.flock(fd, fcntl.LOCK_UN)
    try:
        fcntl.flock(fd3, NB)
    except BlockingIOError:
        os._exit(3)
    os._exit(0)
_, st = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(st))
"#;

#[test]
fn flocks_of_two_opens_conflict_and_an_inherited_open_unlocks() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    std::fs::write(fs.path("f"), b"x").expect("create");
    for p in [fs.path("f"), m2.path("f")] {
        let out = python()
            .arg("-c")
            .arg(FLOCKS_TEST_3)
            .arg(&p)
            .output()
            .expect("python3");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "child 0",
            "{}: {}",
            p.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Lustre's `flocks_test 4` as `sanity-multi.sh` test 74 runs it ("flock deadlock:
/// different mounts"), in Python: a parent and its child each lock one of two files, one
/// opened through each mount, then wait for the other's: one of the two waits is EDEADLK,
/// the other is granted once that one's process closes its files, and both exit cleanly.
const FLOCKS_TEST_4: &str = r#"
import errno, fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fd2 = os.open(sys.argv[2], os.O_RDWR)
def lock(f):
    try:
        fcntl.lockf(f, fcntl.LOCK_EX, 10, 0)
        return "granted"
    except OSError as e:
        if e.errno == errno.EDEADLK:
            return "EDEADLK"
        raise
pid = os.fork()
if pid == 0:
    lock(fd)
    time.sleep(1)
    print("child", lock(fd2), flush=True)
    os._exit(0)
lock(fd2)
time.sleep(1)
print("parent", lock(fd), flush=True)
time.sleep(1)
os.close(fd)
os.close(fd2)
_, st = os.waitpid(pid, 0)
print("exit", os.waitstatus_to_exitcode(st))
"#;

#[test]
fn a_parent_and_child_waiting_for_each_others_file_get_one_edeadlk() {
    if !require_fuse() {
        return;
    }
    let fs = UpFs::new(&[]);
    let m2 = Second::mount(&fs);
    std::fs::write(fs.path("f1"), vec![0u8; 10]).expect("create");
    std::fs::write(fs.path("f2"), vec![0u8; 10]).expect("create");
    let out = python()
        .arg("-c")
        .arg(FLOCKS_TEST_4)
        .arg(fs.path("f1"))
        .arg(m2.path("f2"))
        .output()
        .expect("python3");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.pop(),
        Some("exit 0"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut got: Vec<&str> = lines.iter().filter_map(|l| l.split(' ').nth(1)).collect();
    got.sort_unstable();
    assert_eq!(got, ["EDEADLK", "granted"], "{text}");
}
