//! A file system spread over network namespaces: the MGS, 2 MDTs, 3 OSTs and 2 clients
//! each run as their own `nacre serve` / `nacre mount` process in their own namespace,
//! joined by veth links to a bridge in a hub namespace, on a private subnet. Each link
//! carries `tc netem` latency and loss; a node can be partitioned (all its packets dropped
//! both ways) and healed. Processes enter only the network namespace (`nsenter --net`), so
//! the clients' FUSE mounts are visible to the test. Everything goes on drop, panic
//! included: processes killed, mounts detached, namespaces deleted.

use super::{is_mounted, nacre};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Nodes in start order; a node's address is `10.213.0.(index + 2)`.
pub const NODES: [&str; 8] = ["mgs", "ost0", "ost1", "ost2", "mdt0", "mdt1", "c0", "c1"];
const MGS_PORT: u16 = 9880;
/// How long a node may take to start serving or mounting on a loaded machine.
const START_TIMEOUT: Duration = Duration::from_secs(90);

static SEQ: AtomicU32 = AtomicU32::new(0);

/// `ip netns` works here: tests that need it fail loudly rather than pass vacuously,
/// unless the environment says to skip them.
pub fn require_netns() -> bool {
    if std::env::var_os("NACRE_SKIP_NETNS").is_some() {
        eprintln!("NACRE_SKIP_NETNS is set: skipping a network namespace test");
        return false;
    }
    for tool in ["ip", "tc", "nsenter"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            found,
            "{tool} is missing: scripts/install-deps.sh --test (or set NACRE_SKIP_NETNS=1)"
        );
    }
    true
}

/// Whether the kernel has the netem qdisc (`sch_netem`); some (minimal VM kernels) do
/// not, and the links then carry no added latency or loss.
pub fn netem_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        let ns = format!("n{}probe", std::process::id() % 10000);
        let probe = format!(
            "ip netns add {ns} && ip -n {ns} link add p0 type veth peer name p1 && \
             tc -n {ns} qdisc add dev p0 root netem delay 1ms; r=$?; ip netns del {ns}; exit $r"
        );
        let ok = Command::new("sh")
            .args(["-c", &probe])
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            eprintln!("no netem qdisc in this kernel: links carry no added latency or loss");
        }
        ok
    })
}

fn run_ok(cmd: &mut Command) -> Output {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn ip(args: &[&str]) {
    run_ok(Command::new("ip").args(args));
}

pub struct NetnsCluster {
    pub tmp: tempfile::TempDir,
    pub fsname: String,
    /// Prefix of this cluster's namespaces and links (short: link names are 15 bytes).
    tag: String,
    /// The netem options every link carries when not partitioned.
    base_netem: String,
    procs: HashMap<String, Child>,
    namespaces: Vec<String>,
}

impl NetnsCluster {
    /// Builds the network (each link with `netem`, e.g. `delay 20ms 5ms loss 0.5%`),
    /// formats and starts every target and mounts both clients.
    pub fn up(netem: &str) -> NetnsCluster {
        let tag = format!(
            "n{}{}",
            std::process::id() % 10000,
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut c = NetnsCluster {
            tmp: tempfile::tempdir().expect("tmp"),
            fsname: "netns".to_string(),
            tag,
            base_netem: netem.to_string(),
            procs: HashMap::new(),
            namespaces: Vec::new(),
        };
        c.network();
        c.format();
        for n in NODES {
            c.start(n);
        }
        c
    }

    pub fn ns(&self, node: &str) -> String {
        format!("{}-{node}", self.tag)
    }

    fn index(node: &str) -> usize {
        NODES
            .iter()
            .position(|n| *n == node)
            .unwrap_or_else(|| panic!("no node {node}"))
    }

    pub fn addr(node: &str) -> String {
        format!("10.213.0.{}", Self::index(node) + 2)
    }

    /// The node's end of its link (in its namespace) and the hub's end.
    fn links(&self, node: &str) -> (String, String) {
        let i = Self::index(node);
        (format!("{}v{i}", self.tag), format!("{}h{i}", self.tag))
    }

    fn network(&mut self) {
        let hub = self.ns("hub");
        ip(&["netns", "add", &hub]);
        self.namespaces.push(hub.clone());
        ip(&["-n", &hub, "link", "set", "lo", "up"]);
        ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &hub, "link", "set", "br0", "up"]);
        for n in NODES {
            let ns = self.ns(n);
            ip(&["netns", "add", &ns]);
            self.namespaces.push(ns.clone());
            let (v, h) = self.links(n);
            ip(&[
                "-n", &hub, "link", "add", &h, "type", "veth", "peer", "name", &v, "netns", &ns,
            ]);
            ip(&["-n", &hub, "link", "set", &h, "master", "br0", "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            let a = format!("{}/24", Self::addr(n));
            ip(&["-n", &ns, "addr", "add", &a, "dev", &v]);
            ip(&["-n", &ns, "link", "set", &v, "up"]);
            if netem_available() {
                self.netem(n, &self.base_netem.clone());
            }
        }
    }

    /// Sets `netem ARGS` on both directions of `node`'s link.
    pub fn netem(&self, node: &str, args: &str) {
        let (v, h) = self.links(node);
        for (ns, dev) in [(self.ns(node), v), (self.ns("hub"), h)] {
            let mut cmd = Command::new("tc");
            cmd.args(["-n", &ns, "qdisc", "replace", "dev", &dev, "root", "netem"]);
            cmd.args(args.split_whitespace());
            run_ok(&mut cmd);
        }
    }

    /// Drops every packet to and from `node`: its port on the bridge goes down, so
    /// nothing is refused or reset, packets are simply lost, as on a cut cable.
    pub fn partition(&self, node: &str) {
        ip(&[
            "-n",
            &self.ns("hub"),
            "link",
            "set",
            &self.links(node).1,
            "down",
        ]);
    }

    /// [`NetnsCluster::partition`] now and the heal after `d`, both run by one shell
    /// started now: a process whose threads do I/O on a FUSE mount that is waiting on
    /// the partitioned node cannot start a program (the exec waits for the address space
    /// those threads hold, here until the client's request times out), so the test's own
    /// heal came 22 s late. Wait for the returned child to know the link is back.
    pub fn partition_for(&self, node: &str, d: Duration) -> Child {
        let (hub, link) = (self.ns("hub"), self.links(node).1);
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ip -n {hub} link set {link} down && sleep {} && ip -n {hub} link set {link} up",
                d.as_secs_f64()
            ))
            .spawn()
            .expect("partition")
    }

    /// Gives `node` its link back.
    pub fn heal(&self, node: &str) {
        let hub = self.ns("hub");
        ip(&["-n", &hub, "link", "set", &self.links(node).1, "up"]);
    }

    pub fn dir(&self, node: &str) -> PathBuf {
        self.tmp.path().join(node)
    }

    pub fn key(&self) -> PathBuf {
        self.dir("mgs").join("key")
    }

    /// What the clients mount with: the servers' requests are refused to it.
    pub fn client_key(&self) -> PathBuf {
        self.dir("mgs").join("client.key")
    }

    pub fn mgsnode(&self) -> String {
        format!("{}:{MGS_PORT}", Self::addr("mgs"))
    }

    /// Where client `node` (`c0`, `c1`) is mounted.
    pub fn mnt(&self, node: &str) -> PathBuf {
        self.tmp.path().join(format!("mnt-{node}"))
    }

    /// The registry directory of client `node`, for `nacre lctl` and `nacre lfs`.
    pub fn run_dir(&self, node: &str) -> PathBuf {
        self.tmp.path().join(format!("run-{node}"))
    }

    fn format(&self) {
        let s = |p: &Path| p.to_string_lossy().into_owned();
        let mgsnode = self.mgsnode();
        let fmt = |args: Vec<String>| {
            run_ok(Command::new(nacre()).arg("format").args(args));
        };
        fmt(vec![
            "--mgs".into(),
            "--fsname".into(),
            self.fsname.clone(),
            "--mgsnode".into(),
            mgsnode.clone(),
            s(&self.dir("mgs")),
        ]);
        for n in NODES
            .iter()
            .filter(|n| n.starts_with("md") || n.starts_with("os"))
        {
            fmt(vec![
                format!("--{}", &n[..3]),
                "--index".into(),
                n[3..].to_string(),
                "--fsname".into(),
                self.fsname.clone(),
                "--mgsnode".into(),
                mgsnode.clone(),
                "--key".into(),
                s(&self.key()),
                s(&self.dir(n)),
            ]);
        }
    }

    /// A command run in `node`'s network namespace only.
    pub fn command_in(&self, node: &str, program: &str) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", self.ns(node)))
            .arg("--")
            .arg(program);
        cmd
    }

    fn log(&self, node: &str) -> PathBuf {
        self.tmp.path().join(format!("{node}.log"))
    }

    /// Starts `node`'s process (a target's `nacre serve`, a client's `nacre mount`) and
    /// waits until it serves or is mounted and can create a file.
    pub fn start(&mut self, node: &str) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log(node))
            .expect("log");
        let mut cmd = self.command_in(node, nacre());
        let client = node.starts_with('c');
        if client {
            let mnt = self.mnt(node);
            std::fs::create_dir_all(&mnt).expect("mnt");
            cmd.arg("mount")
                .arg(format!("{}:/{}", self.mgsnode(), self.fsname))
                .arg(&mnt)
                .arg("--key")
                .arg(self.client_key());
        } else {
            let port = if node == "mgs" { MGS_PORT } else { 0 };
            cmd.arg("serve")
                .arg(self.dir(node))
                .args(["--listen", &format!("{}:{port}", Self::addr(node))]);
        }
        let mut child = cmd
            .env("NACRE_RUN_DIR", self.run_dir(node))
            .env_remove("NACRE_FAIL_POINT")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("nsenter");
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if line.contains("serving on") {
                    let _ = tx.send(());
                }
            }
        });
        self.procs.insert(node.to_string(), child);
        if client {
            self.wait_mounted(node);
        } else if rx.recv_timeout(START_TIMEOUT).is_err() {
            panic!("{node} did not start:\n{}", self.log_text(node));
        }
    }

    pub fn log_text(&self, node: &str) -> String {
        std::fs::read_to_string(self.log(node)).unwrap_or_default()
    }

    fn wait_mounted(&self, node: &str) {
        let mnt = self.mnt(node);
        let probe = mnt.join(format!(".probe-{node}"));
        let start = Instant::now();
        while start.elapsed() < START_TIMEOUT {
            if is_mounted(&mnt) && std::fs::write(&probe, b"x").is_ok() {
                let _ = std::fs::remove_file(&probe);
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("{node} did not mount:\n{}", self.log_text(node));
    }

    /// The pid of `node`'s process (`nsenter` execs it, so this is `nacre` itself).
    pub fn pid(&self, node: &str) -> u32 {
        self.procs[node].id()
    }

    /// Kills `node`'s process at once (SIGKILL) and reaps it; a client's mount is detached.
    pub fn kill(&mut self, node: &str) {
        if let Some(mut c) = self.procs.remove(node) {
            let _ = c.kill();
            let _ = c.wait();
        }
        if node.starts_with('c') {
            detach(&self.mnt(node));
        }
    }

    /// Stops `node` cleanly (SIGTERM) and waits for it.
    pub fn stop(&mut self, node: &str) {
        if let Some(mut c) = self.procs.remove(node) {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
    }

    /// `nacre ARGS` run as client `node` (its registry, its namespace); the output.
    pub fn nacre_on(&self, node: &str, args: &[&str]) -> Output {
        self.command_in(node, nacre())
            .args(args)
            .env("NACRE_RUN_DIR", self.run_dir(node))
            .output()
            .expect("nsenter nacre")
    }

    /// `nacre lctl set_param NAME=VALUE` on client `node`, which must succeed.
    pub fn set_param(&self, node: &str, assignment: &str) {
        let o = self.nacre_on(node, &["lctl", "set_param", assignment]);
        assert!(
            o.status.success(),
            "lctl set_param {assignment} on {node}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// Lazily detaches a mount point (one whose daemon died answers nothing).
fn detach(mnt: &Path) {
    if is_mounted(mnt) {
        let _ = Command::new("umount").arg("-l").arg(mnt).status();
    }
}

impl Drop for NetnsCluster {
    fn drop(&mut self) {
        for (_, mut c) in self.procs.drain() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for n in ["c0", "c1"] {
            detach(&self.mnt(n));
        }
        for ns in self.namespaces.drain(..) {
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
        }
    }
}
