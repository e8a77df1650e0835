//! A file system with one `nacre serve` process per target, each target directory where
//! the test puts it (a power-cut disk, a tmpfs, a plain temporary directory), so a test
//! can kill, cut or restart one target while the others and the client go on.

use super::{free_port, nacre};
use nacre_client::{Client, MountSpec};
use nacre_core::Fid;
use nacre_rpc::Key;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

pub struct ServeCluster {
    pub fsname: String,
    pub mgsnode: String,
    /// Where each target lives: `mgs`, `mdt0`, `ost0`, ...
    pub dirs: HashMap<String, PathBuf>,
    /// Logs of the servers.
    pub logs: PathBuf,
    /// The servers' registry, which `lctl` reads: this cluster's own, so a command
    /// finds no other test's servers (tests run in parallel threads).
    run_dir: PathBuf,
    procs: HashMap<String, Child>,
}

impl ServeCluster {
    /// Formats an MGS in `mgs`, MDT i in `mdts[i]` and OST i in `osts[i]`.
    pub fn format(fsname: &str, mgs: &Path, mdts: &[PathBuf], osts: &[PathBuf]) -> ServeCluster {
        let mgsnode = format!("127.0.0.1:{}", free_port());
        let run = |args: &[&str]| {
            let o = Command::new(nacre()).args(args).output().expect("nacre");
            assert!(
                o.status.success(),
                "nacre {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        };
        let s = |p: &Path| p.to_string_lossy().into_owned();
        run(&[
            "format",
            "--mgs",
            "--fsname",
            fsname,
            "--mgsnode",
            &mgsnode,
            &s(mgs),
        ]);
        let key = s(&mgs.join("key"));
        let mut dirs = HashMap::new();
        dirs.insert("mgs".to_string(), mgs.to_path_buf());
        for (kind, list) in [("mdt", mdts), ("ost", osts)] {
            for (i, d) in list.iter().enumerate() {
                run(&[
                    "format",
                    &format!("--{kind}"),
                    "--index",
                    &i.to_string(),
                    "--fsname",
                    fsname,
                    "--mgsnode",
                    &mgsnode,
                    "--key",
                    &key,
                    &s(d),
                ]);
                dirs.insert(format!("{kind}{i}"), d.clone());
            }
        }
        let logs = mgs.parent().expect("mgs parent").join("logs");
        std::fs::create_dir_all(&logs).expect("logs dir");
        let run_dir = mgs.parent().expect("mgs parent").join("run");
        super::use_run_dir(run_dir.clone());
        ServeCluster {
            fsname: fsname.to_string(),
            mgsnode,
            dirs,
            logs,
            run_dir,
            procs: HashMap::new(),
        }
    }

    pub fn key(&self) -> Key {
        Key::load(&self.dirs["mgs"].join("key")).expect("key")
    }

    pub fn spec(&self) -> String {
        format!("{}:/{}", self.mgsnode, self.fsname)
    }

    /// Targets in start order: the MGS, the OSTs, the MDTs.
    pub fn targets(&self) -> Vec<String> {
        let mut t: Vec<String> = self.dirs.keys().cloned().collect();
        let rank = |n: &str| match &n[..3] {
            "mgs" => 0,
            "ost" => 1,
            _ => 2,
        };
        t.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
        t
    }

    /// Starts `target` and waits until it serves.
    pub fn start(&mut self, target: &str) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.logs.join(format!("{target}.log")))
            .expect("log");
        let mut cmd = Command::new(nacre());
        cmd.arg("serve").arg(&self.dirs[target]);
        if target == "mgs" {
            cmd.args(["--listen", &self.mgsnode]);
        } else {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        let mut child = cmd
            .env_remove("NACRE_FAIL_POINT")
            // `lctl` of this test finds the servers' parameters.
            .env("NACRE_RUN_DIR", &self.run_dir)
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
        if rx.recv_timeout(Duration::from_secs(60)).is_err() {
            let log = std::fs::read_to_string(self.logs.join(format!("{target}.log")));
            panic!("{target} did not start:\n{}", log.unwrap_or_default());
        }
        self.procs.insert(target.to_string(), child);
    }

    pub fn start_all(&mut self) {
        for t in self.targets() {
            self.start(&t);
        }
    }

    /// The pid of a running target.
    pub fn pid(&self, target: &str) -> u32 {
        self.procs[target].id()
    }

    /// Kills `target` at once (SIGKILL), as a power cut does, and reaps it.
    pub fn kill(&mut self, target: &str) {
        if let Some(mut c) = self.procs.remove(target) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops `target` cleanly (SIGTERM) and waits for it.
    pub fn stop(&mut self, target: &str) {
        if let Some(mut c) = self.procs.remove(target) {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
    }

    pub fn stop_all(&mut self) {
        let mut t = self.targets();
        t.reverse();
        for t in t {
            self.stop(&t);
        }
    }

    /// MDT target directories, in index order (for `nacre check`).
    pub fn mdt_dirs(&self) -> Vec<PathBuf> {
        (0..)
            .map_while(|i| self.dirs.get(&format!("mdt{i}")).cloned())
            .collect()
    }

    /// Mounts a client library instance once every MDT is registered and answers.
    pub async fn mount(&self, name: &str) -> Arc<Client> {
        self.mount_with(name, self.key()).await
    }

    /// Mounts with the client key, as `nacre mount` does: a client-role peer, whose
    /// export the MDT keeps.
    #[allow(dead_code)]
    pub async fn mount_as_client(&self, name: &str) -> Arc<Client> {
        self.mount_with(name, self.key().client_key()).await
    }

    async fn mount_with(&self, name: &str, key: Key) -> Arc<Client> {
        let spec = MountSpec::parse(&self.spec(), key, name).expect("spec");
        let mdts = self.mdt_dirs().len();
        for _ in 0..300 {
            if let Ok(c) = Client::mount(spec.clone()).await {
                if c.config().mdts.len() == mdts && c.getattr(Fid::ROOT).await.is_ok() {
                    return c;
                }
                c.unmount();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("cannot mount {}", self.spec());
    }

    /// OST target directories, in index order.
    pub fn ost_dirs(&self) -> Vec<PathBuf> {
        (0..)
            .map_while(|i| self.dirs.get(&format!("ost{i}")).cloned())
            .collect()
    }

    /// `nacre check` of the stopped targets: the namespace, and every file's layout
    /// against the OSTs' objects.
    pub fn check(&self) -> nacre_lfsck::offline::CheckReport {
        nacre::check::check_targets(&self.mdt_dirs(), &self.ost_dirs()).expect("nacre check")
    }
}

impl Drop for ServeCluster {
    fn drop(&mut self) {
        for (_, mut c) in self.procs.drain() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
