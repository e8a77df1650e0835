//! Running as one rank of many, without an MPI library.
//!
//! Rank and size come from the launcher's environment (`mpirun`: `OMPI_COMM_WORLD_RANK/SIZE`;
//! MPICH/Intel MPI: `PMI_RANK/PMI_SIZE`; PMIx: `PMIX_RANK` with `OMPI_COMM_WORLD_SIZE`; `srun`:
//! `SLURM_PROCID/SLURM_NTASKS`; or `NACRE_RANK/NACRE_SIZE` set by hand, which wins). Ranks meet
//! in *rounds*: every rank contributes a payload, rank 0 collects them all and publishes one
//! release payload that every rank waits for. Barriers, gathers, broadcasts and error
//! propagation are all rounds.
//!
//! Two rendezvous transports:
//! * **files** (default): a directory shared by all ranks, `DIR/.nacre-rdv/<job>/`, where
//!   `<job>` comes from `NACRE_JOB_ID`, `SLURM_JOB_ID.SLURM_STEP_ID` or `PMIX_NAMESPACE`.
//!   A rank publishes `r<round>.<rank>` (written to a temporary name and renamed, so it appears
//!   whole); rank 0 publishes `r<round>.go`. It goes through the [`FileSystem`] trait, so it
//!   works on the file system under test, native or POSIX. Rank 0 removes the directory at the
//!   end; after a crash remove `DIR/.nacre-rdv` by hand.
//! * **tcp**: `--rendezvous HOST:PORT` (or `NACRE_RENDEZVOUS`): rank 0 listens there and every
//!   other rank connects once; each round is one length-prefixed frame each way.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::backend::{self, FileSystem, OpenOptions};
use crate::cancel::Cancel;
use crate::error::{BenchError, Result};

/// Largest payload one rank may contribute to a round.
pub const MAX_PAYLOAD: usize = 16 << 20;
/// Longest wait between two polls of the rendezvous directory.
const MAX_POLL: Duration = Duration::from_millis(50);
/// Name of the rendezvous directory under DIR.
pub const RDV_DIR_NAME: &str = ".nacre-rdv";
/// Tag that opens every TCP hello frame.
const TCP_MAGIC: u32 = 0x4e52_4456; // "NRDV"

/// What a round yields: every payload (rank 0 only) and the release.
type RoundResult = Result<(Option<Vec<Vec<u8>>>, Vec<u8>)>;

/// This process's place among the ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankInfo {
    pub rank: usize,
    pub size: usize,
    /// Which variables it came from (for messages).
    pub source: &'static str,
}

/// Reads rank and size from the launcher's environment.
pub fn rank_from_env() -> Result<RankInfo> {
    rank_from_vars(&|k| std::env::var(k).ok())
}

/// Reads rank and size through `get` (the environment, or a map in tests).
pub fn rank_from_vars(get: &dyn Fn(&str) -> Option<String>) -> Result<RankInfo> {
    const PAIRS: [(&str, &str, &str); 5] = [
        ("NACRE_RANK", "NACRE_SIZE", "NACRE_RANK/NACRE_SIZE"),
        (
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_RANK/SIZE",
        ),
        ("PMI_RANK", "PMI_SIZE", "PMI_RANK/PMI_SIZE"),
        ("PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK"),
        ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_PROCID/SLURM_NTASKS"),
    ];
    for (rk, sk, source) in PAIRS {
        let (Some(r), Some(s)) = (get(rk), get(sk)) else {
            continue;
        };
        let rank: usize = r
            .trim()
            .parse()
            .map_err(|_| BenchError::Usage(format!("{rk}={r:?} is not a rank number")))?;
        let size: usize = s
            .trim()
            .parse()
            .map_err(|_| BenchError::Usage(format!("{sk}={s:?} is not a task count")))?;
        if size == 0 || rank >= size {
            return Err(BenchError::Usage(format!(
                "{source}: rank {rank} is outside a world of {size}"
            )));
        }
        return Ok(RankInfo { rank, size, source });
    }
    Ok(RankInfo {
        rank: 0,
        size: 1,
        source: "single process",
    })
}

/// The job identifier that keeps concurrent runs' rendezvous files apart.
pub fn job_id_from_env() -> String {
    let get = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let raw = get("NACRE_JOB_ID")
        .or_else(|| {
            get("SLURM_JOB_ID").map(|j| match get("SLURM_STEP_ID") {
                Some(s) => format!("{j}.{s}"),
                None => j,
            })
        })
        .or_else(|| get("PMIX_NAMESPACE"))
        .or_else(|| get("OMPI_MCA_orte_ess_jobid"))
        .unwrap_or_else(|| "job".to_string());
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// How ranks meet.
#[derive(Debug, Clone)]
pub struct RendezvousOpts {
    /// `HOST:PORT` for TCP; `None` for the shared-directory transport.
    pub tcp: Option<String>,
    /// Override of the shared directory (default `DIR/.nacre-rdv`).
    pub dir: Option<PathBuf>,
    /// How long a rank waits for the others at one round.
    pub timeout: Duration,
}

impl Default for RendezvousOpts {
    fn default() -> Self {
        RendezvousOpts {
            tcp: std::env::var("NACRE_RENDEZVOUS")
                .ok()
                .filter(|s| !s.is_empty()),
            dir: None,
            timeout: Duration::from_secs(24 * 3600),
        }
    }
}

enum Transport {
    Single,
    Files {
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
    },
    TcpRoot {
        peers: Vec<TcpStream>,
    },
    TcpPeer {
        stream: TcpStream,
    },
}

struct State {
    transport: Transport,
    round: u64,
}

/// The set of ranks running one command.
pub struct World {
    rank: usize,
    size: usize,
    timeout: Duration,
    cancel: Cancel,
    state: Mutex<State>,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

impl World {
    /// A world of one: every round is immediate.
    pub fn single() -> World {
        World::with_transport(0, 1, Transport::Single, Duration::ZERO, Cancel::new())
    }

    fn with_transport(
        rank: usize,
        size: usize,
        transport: Transport,
        timeout: Duration,
        cancel: Cancel,
    ) -> World {
        World {
            rank,
            size,
            timeout,
            cancel,
            state: Mutex::new(State {
                transport,
                round: 0,
            }),
        }
    }

    /// Joins the world the launcher started: rank and size from the environment, rendezvous
    /// in `base/.nacre-rdv/<job>` through `fs` or over TCP.
    pub fn from_launcher(
        opts: &RendezvousOpts,
        fs: Arc<dyn FileSystem>,
        base: &Path,
        cancel: Cancel,
    ) -> Result<World> {
        let info = rank_from_env()?;
        if info.size == 1 {
            return Ok(World::with_transport(
                0,
                1,
                Transport::Single,
                opts.timeout,
                cancel,
            ));
        }
        tracing::info!(
            rank = info.rank,
            size = info.size,
            source = info.source,
            "joining"
        );
        match &opts.tcp {
            Some(addr) => World::tcp(info.rank, info.size, addr, opts.timeout, cancel),
            None => {
                if opts.dir.is_none() {
                    // Never create the rendezvous under a DIR that is not there.
                    backend::check_dir(fs.as_ref(), base)?;
                }
                let root = opts.dir.clone().unwrap_or_else(|| base.join(RDV_DIR_NAME));
                World::files(
                    info.rank,
                    info.size,
                    fs,
                    &root.join(job_id_from_env()),
                    opts.timeout,
                    cancel,
                )
            }
        }
    }

    /// A world meeting in directory `dir` (created if missing).
    pub fn files(
        rank: usize,
        size: usize,
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        timeout: Duration,
        cancel: Cancel,
    ) -> Result<World> {
        if size == 0 || rank >= size {
            return Err(BenchError::Usage(format!("rank {rank} of {size}")));
        }
        backend::mkdir_all(fs.as_ref(), dir)
            .map_err(|e| BenchError::io("creating rendezvous directory", dir, e))?;
        Ok(World::with_transport(
            rank,
            size,
            Transport::Files {
                fs,
                dir: dir.to_path_buf(),
            },
            timeout,
            cancel,
        ))
    }

    /// A world meeting over TCP at `addr`, where rank 0 listens.
    pub fn tcp(
        rank: usize,
        size: usize,
        addr: &str,
        timeout: Duration,
        cancel: Cancel,
    ) -> Result<World> {
        if size == 0 || rank >= size {
            return Err(BenchError::Usage(format!("rank {rank} of {size}")));
        }
        let rdv = |m: String| BenchError::Rendezvous(format!("{addr}: {m}"));
        let transport = if rank == 0 {
            let listener = TcpListener::bind(addr).map_err(|e| rdv(format!("listen: {e}")))?;
            listener
                .set_nonblocking(true)
                .map_err(|e| rdv(e.to_string()))?;
            let mut slots: Vec<Option<TcpStream>> = (0..size).map(|_| None).collect();
            let deadline = Instant::now() + timeout;
            let mut joined = 1;
            while joined < size {
                match listener.accept() {
                    Ok((mut s, _)) => {
                        s.set_nonblocking(false).map_err(|e| rdv(e.to_string()))?;
                        s.set_read_timeout(Some(Duration::from_secs(1)))
                            .map_err(|e| rdv(e.to_string()))?;
                        let mut hello = [0u8; 12];
                        read_exact_patient(&mut s, &mut hello, deadline, &cancel)
                            .map_err(|e| rdv(format!("hello: {e}")))?;
                        let magic = u32::from_le_bytes([hello[0], hello[1], hello[2], hello[3]]);
                        let r =
                            u32::from_le_bytes([hello[4], hello[5], hello[6], hello[7]]) as usize;
                        let sz =
                            u32::from_le_bytes([hello[8], hello[9], hello[10], hello[11]]) as usize;
                        if magic != TCP_MAGIC || sz != size || r == 0 || r >= size {
                            return Err(rdv(format!(
                                "bad hello (rank {r} of {sz}, expected a world of {size})"
                            )));
                        }
                        if slots[r].is_some() {
                            return Err(rdv(format!("rank {r} joined twice")));
                        }
                        slots[r] = Some(s);
                        joined += 1;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if cancel.is_cancelled() {
                            return Err(BenchError::Interrupted(
                                "while waiting for ranks to connect".into(),
                            ));
                        }
                        if Instant::now() > deadline {
                            return Err(rdv(format!(
                                "only {joined} of {size} ranks connected before the timeout"
                            )));
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err(e) => return Err(rdv(format!("accept: {e}"))),
                }
            }
            Transport::TcpRoot {
                peers: slots.into_iter().skip(1).flatten().collect(),
            }
        } else {
            let deadline = Instant::now() + timeout;
            let mut stream = loop {
                match TcpStream::connect(addr) {
                    Ok(s) => break s,
                    Err(e) => {
                        if cancel.is_cancelled() {
                            return Err(BenchError::Interrupted(
                                "while connecting to rank 0".into(),
                            ));
                        }
                        if Instant::now() > deadline {
                            return Err(rdv(format!("could not reach rank 0: {e}")));
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            };
            stream
                .set_read_timeout(Some(Duration::from_secs(1)))
                .map_err(|e| rdv(e.to_string()))?;
            let mut hello = Vec::with_capacity(12);
            hello.extend_from_slice(&TCP_MAGIC.to_le_bytes());
            hello.extend_from_slice(&(rank as u32).to_le_bytes());
            hello.extend_from_slice(&(size as u32).to_le_bytes());
            stream
                .write_all(&hello)
                .map_err(|e| rdv(format!("hello: {e}")))?;
            Transport::TcpPeer { stream }
        };
        Ok(World::with_transport(
            rank, size, transport, timeout, cancel,
        ))
    }

    pub fn rank(&self) -> usize {
        self.rank
    }
    pub fn size(&self) -> usize {
        self.size
    }
    pub fn is_root(&self) -> bool {
        self.rank == 0
    }
    pub fn cancel(&self) -> &Cancel {
        &self.cancel
    }

    /// One round: every rank sends `payload`; rank 0 sees all of them (in rank order) and
    /// computes the release every rank receives.
    fn round(
        &self,
        label: &str,
        payload: Vec<u8>,
        release_of: &dyn Fn(&[Vec<u8>]) -> Vec<u8>,
    ) -> RoundResult {
        if payload.len() > MAX_PAYLOAD {
            return Err(BenchError::Rendezvous(format!(
                "{label}: payload of {} bytes exceeds {MAX_PAYLOAD}",
                payload.len()
            )));
        }
        let mut st = self
            .state
            .lock()
            .map_err(|_| BenchError::Rendezvous("state poisoned".into()))?;
        st.round += 1;
        let round = st.round;
        let mut framed = Vec::with_capacity(label.len() + 1 + payload.len());
        framed.extend_from_slice(label.as_bytes());
        framed.push(b'\n');
        framed.extend_from_slice(&payload);
        let deadline = Instant::now() + self.timeout;
        match &mut st.transport {
            Transport::Single => {
                let all = vec![payload];
                let rel = release_of(&all);
                Ok((Some(all), rel))
            }
            Transport::Files { fs, dir } => {
                let fs = fs.clone();
                let dir = dir.clone();
                self.files_round(
                    fs.as_ref(),
                    &dir,
                    round,
                    label,
                    framed,
                    deadline,
                    release_of,
                )
            }
            Transport::TcpRoot { peers } => {
                let mut all = vec![payload];
                for (i, s) in peers.iter_mut().enumerate() {
                    let frame = read_frame(s, round, deadline, &self.cancel).map_err(|e| {
                        BenchError::Rendezvous(format!("{label}: rank {}: {e}", i + 1))
                    })?;
                    all.push(check_label(label, i + 1, frame)?);
                }
                let rel = release_of(&all);
                for (i, s) in peers.iter_mut().enumerate() {
                    write_frame(s, round, &rel).map_err(|e| {
                        BenchError::Rendezvous(format!("{label}: rank {}: {e}", i + 1))
                    })?;
                }
                Ok((Some(all), rel))
            }
            Transport::TcpPeer { stream } => {
                write_frame(stream, round, &framed)
                    .map_err(|e| BenchError::Rendezvous(format!("{label}: {e}")))?;
                let rel = read_frame(stream, round, deadline, &self.cancel)
                    .map_err(|e| BenchError::Rendezvous(format!("{label}: {e}")))?;
                Ok((None, rel))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn files_round(
        &self,
        fs: &dyn FileSystem,
        dir: &Path,
        round: u64,
        label: &str,
        framed: Vec<u8>,
        deadline: Instant,
        release_of: &dyn Fn(&[Vec<u8>]) -> Vec<u8>,
    ) -> RoundResult {
        let go = dir.join(format!("r{round:010}.go"));
        if self.rank != 0 {
            publish(fs, dir, &format!("r{round:010}.{:06}", self.rank), &framed)?;
            let rel = self.wait_file(fs, &go, label, 0, deadline)?;
            return Ok((None, rel));
        }
        let mut all = Vec::with_capacity(self.size);
        let mut own = framed;
        all.push(split_label(label, 0, &mut own)?);
        for r in 1..self.size {
            let p = dir.join(format!("r{round:010}.{r:06}"));
            let frame = self.wait_file(fs, &p, label, r, deadline)?;
            all.push(check_label(label, r, frame)?);
        }
        let rel = release_of(&all);
        publish(fs, dir, &format!("r{round:010}.go"), &rel)?;
        // Everyone reached this round, so they all read the previous release.
        for r in 1..self.size {
            let _ = fs.unlink(&dir.join(format!("r{round:010}.{r:06}")));
        }
        if round > 1 {
            let _ = fs.unlink(&dir.join(format!("r{:010}.go", round - 1)));
        }
        Ok((Some(all), rel))
    }

    fn wait_file(
        &self,
        fs: &dyn FileSystem,
        path: &Path,
        label: &str,
        from: usize,
        deadline: Instant,
    ) -> Result<Vec<u8>> {
        let mut pause = Duration::from_millis(1);
        loop {
            match read_small(fs, path) {
                Ok(b) => return Ok(b),
                Err(e) if backend::is_not_found(&e) => {}
                Err(e) => return Err(BenchError::io("reading rendezvous file", path, e)),
            }
            if self.cancel.is_cancelled() {
                return Err(BenchError::Interrupted(format!(
                    "while waiting for rank {from} at {label}"
                )));
            }
            if Instant::now() > deadline {
                return Err(BenchError::Rendezvous(format!(
                    "timed out waiting for rank {from} at {label} ({}); if a previous run \
                     crashed, remove that directory",
                    path.parent().unwrap_or(path).display()
                )));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(MAX_POLL);
        }
    }

    /// Waits until every rank reaches `label`.
    pub fn barrier(&self, label: &str) -> Result<()> {
        self.round(label, Vec::new(), &|_| Vec::new()).map(drop)
    }

    /// Collects one value from every rank; rank 0 gets them in rank order, the others `None`.
    pub fn gather<T: Serialize + DeserializeOwned>(
        &self,
        label: &str,
        value: &T,
    ) -> Result<Option<Vec<T>>> {
        let bytes = serde_json::to_vec(value)
            .map_err(|e| BenchError::Rendezvous(format!("{label}: encode: {e}")))?;
        let (all, _) = self.round(label, bytes, &|_| Vec::new())?;
        match all {
            None => Ok(None),
            Some(all) => all
                .iter()
                .map(|b| {
                    serde_json::from_slice(b)
                        .map_err(|e| BenchError::Rendezvous(format!("{label}: decode: {e}")))
                })
                .collect::<Result<Vec<T>>>()
                .map(Some),
        }
    }

    /// Rank 0's `value` delivered to every rank (other ranks pass `None`).
    pub fn broadcast<T: Serialize + DeserializeOwned>(
        &self,
        label: &str,
        value: Option<&T>,
    ) -> Result<T> {
        let bytes = match (self.is_root(), value) {
            (true, Some(v)) => serde_json::to_vec(v)
                .map_err(|e| BenchError::Rendezvous(format!("{label}: encode: {e}")))?,
            (true, None) => {
                return Err(BenchError::Rendezvous(format!(
                    "{label}: rank 0 has nothing to broadcast"
                )));
            }
            (false, _) => Vec::new(),
        };
        let (_, rel) = self.round(label, bytes, &|all| all[0].clone())?;
        serde_json::from_slice(&rel)
            .map_err(|e| BenchError::Rendezvous(format!("{label}: decode: {e}")))
    }

    /// Shares each rank's outcome of a phase: if any rank failed, every rank returns an error
    /// (its own if it failed, else "rank N failed: …"), so nobody waits forever at the next
    /// barrier.
    pub fn agree<T>(&self, label: &str, local: Result<T>) -> Result<T> {
        if self.size == 1 {
            return local;
        }
        let msg = match &local {
            Ok(_) => Vec::new(),
            Err(e) => e.to_string().into_bytes(),
        };
        let (_, rel) = self.round(label, msg, &|all| {
            all.iter()
                .enumerate()
                .find(|(_, m)| !m.is_empty())
                .map(|(r, m)| {
                    format!("rank {r} failed: {}", String::from_utf8_lossy(m)).into_bytes()
                })
                .unwrap_or_default()
        })?;
        match local {
            Err(e) => Err(e),
            Ok(_) if !rel.is_empty() => Err(BenchError::Rendezvous(
                String::from_utf8_lossy(&rel).into_owned(),
            )),
            Ok(v) => Ok(v),
        }
    }

    /// Number of distinct hosts among the ranks.
    pub fn count_nodes(&self) -> Result<usize> {
        if self.size == 1 {
            return Ok(1);
        }
        let host = hostname();
        let all = self.gather("hostnames", &host)?;
        let n = all.map(|mut v| {
            v.sort();
            v.dedup();
            v.len()
        });
        self.broadcast("node-count", n.as_ref())
    }

    /// Leaves the world; rank 0 removes the rendezvous directory once every rank has left.
    pub fn finish(self) -> Result<()> {
        let cancel = self.cancel.clone();
        let deadline = Instant::now() + self.timeout;
        let (rank, size) = (self.rank, self.size);
        let st = self
            .state
            .into_inner()
            .map_err(|_| BenchError::Rendezvous("state poisoned".into()))?;
        if let Transport::Files { fs, dir } = st.transport {
            if rank != 0 {
                return publish(fs.as_ref(), &dir, &format!("fin.{rank:06}"), b"");
            }
            for r in 1..size {
                let p = dir.join(format!("fin.{r:06}"));
                let mut pause = Duration::from_millis(1);
                loop {
                    match fs.stat(&p) {
                        Ok(_) => break,
                        Err(e) if backend::is_not_found(&e) => {}
                        Err(e) => return Err(BenchError::io("stat", &p, e)),
                    }
                    if cancel.is_cancelled() || Instant::now() > deadline {
                        return Err(BenchError::Rendezvous(format!(
                            "rank {r} did not finish; leaving {}",
                            dir.display()
                        )));
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(MAX_POLL);
                }
            }
            backend::remove_tree(fs.as_ref(), &dir, &|_, _| false)
                .map_err(|e| BenchError::io("removing rendezvous directory", &dir, e))?;
            if let Some(parent) = dir.parent() {
                // Only succeeds when no other job is using it.
                let _ = fs.rmdir(parent);
            }
        }
        Ok(())
    }
}

fn split_label(label: &str, rank: usize, framed: &mut Vec<u8>) -> Result<Vec<u8>> {
    let nl = framed.iter().position(|&b| b == b'\n').ok_or_else(|| {
        BenchError::Rendezvous(format!("{label}: malformed frame from rank {rank}"))
    })?;
    let got = String::from_utf8_lossy(&framed[..nl]).into_owned();
    if got != label {
        return Err(BenchError::Rendezvous(format!(
            "ranks out of step: rank 0 is at {label:?} but rank {rank} is at {got:?}"
        )));
    }
    Ok(framed.split_off(nl + 1))
}

fn check_label(label: &str, rank: usize, mut frame: Vec<u8>) -> Result<Vec<u8>> {
    split_label(label, rank, &mut frame)
}

/// Writes `data` to `dir/name` so that it appears complete (temporary name, then rename).
fn publish(fs: &dyn FileSystem, dir: &Path, name: &str, data: &[u8]) -> Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let dst = dir.join(name);
    let fh = fs
        .create(&tmp, OpenOptions::write().truncate(true))
        .map_err(|e| BenchError::io("creating rendezvous file", &tmp, e))?;
    let w = backend::write_all_at(fs, fh, data, 0);
    let c = fs.close(fh);
    w.and(c)
        .map_err(|e| BenchError::io("writing rendezvous file", &tmp, e))?;
    fs.rename(&tmp, &dst)
        .map_err(|e| BenchError::io("publishing rendezvous file", &dst, e))
}

fn read_small(fs: &dyn FileSystem, path: &Path) -> io::Result<Vec<u8>> {
    let fh = fs.open(path, OpenOptions::read())?;
    let res = (|| {
        let size = fs.fstat(fh)?.size as usize;
        if size > MAX_PAYLOAD + 4096 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "oversized frame",
            ));
        }
        let mut buf = vec![0u8; size];
        let n = backend::read_full_at(fs, fh, &mut buf, 0)?;
        buf.truncate(n);
        Ok(buf)
    })();
    let _ = fs.close(fh);
    res
}

fn read_exact_patient(
    s: &mut TcpStream,
    buf: &mut [u8],
    deadline: Instant,
    cancel: &Cancel,
) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match s.read(&mut buf[done..]) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "peer left")),
            Ok(n) => done += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                if cancel.is_cancelled() {
                    return Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted"));
                }
                if Instant::now() > deadline {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "timed out"));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn write_frame(s: &mut TcpStream, round: u64, data: &[u8]) -> io::Result<()> {
    let mut hdr = [0u8; 12];
    hdr[..8].copy_from_slice(&round.to_le_bytes());
    hdr[8..].copy_from_slice(&(data.len() as u32).to_le_bytes());
    s.write_all(&hdr)?;
    s.write_all(data)?;
    s.flush()
}

fn read_frame(
    s: &mut TcpStream,
    round: u64,
    deadline: Instant,
    cancel: &Cancel,
) -> io::Result<Vec<u8>> {
    let mut hdr = [0u8; 12];
    read_exact_patient(s, &mut hdr, deadline, cancel)?;
    let mut r = [0u8; 8];
    r.copy_from_slice(&hdr[..8]);
    let got = u64::from_le_bytes(r);
    if got != round {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("out of step: round {got}, expected {round}"),
        ));
    }
    let len = u32::from_le_bytes([hdr[8], hdr[9], hdr[10], hdr[11]]) as usize;
    if len > MAX_PAYLOAD + 4096 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "oversized frame",
        ));
    }
    let mut buf = vec![0u8; len];
    read_exact_patient(s, &mut buf, deadline, cancel)?;
    Ok(buf)
}

/// This host's name (for counting nodes).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it or
    // truncates, and we stop at the first NUL.
    let ret = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if ret != 0 {
        return "localhost".to_string();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::PosixFs;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn launcher_environments() {
        let r = rank_from_vars(&vars(&[
            ("OMPI_COMM_WORLD_RANK", "3"),
            ("OMPI_COMM_WORLD_SIZE", "8"),
        ]))
        .expect("ompi");
        assert_eq!((r.rank, r.size), (3, 8));
        let r = rank_from_vars(&vars(&[("PMI_RANK", "1"), ("PMI_SIZE", "2")])).expect("pmi");
        assert_eq!((r.rank, r.size), (1, 2));
        let r = rank_from_vars(&vars(&[("SLURM_PROCID", "5"), ("SLURM_NTASKS", "192")]))
            .expect("slurm");
        assert_eq!((r.rank, r.size), (5, 192));
        let r = rank_from_vars(&vars(&[
            ("NACRE_RANK", "0"),
            ("NACRE_SIZE", "1"),
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "192"),
        ]))
        .expect("override");
        assert_eq!((r.rank, r.size), (0, 1));
        let r = rank_from_vars(&vars(&[])).expect("none");
        assert_eq!((r.rank, r.size), (0, 1));
        assert!(rank_from_vars(&vars(&[("PMI_RANK", "x"), ("PMI_SIZE", "2")])).is_err());
        assert!(rank_from_vars(&vars(&[("PMI_RANK", "2"), ("PMI_SIZE", "2")])).is_err());
    }

    fn exercise(worlds: Vec<World>) {
        let handles: Vec<_> = worlds
            .into_iter()
            .map(|w| {
                std::thread::spawn(move || {
                    let r = w.rank();
                    w.barrier("start").expect("barrier");
                    let g = w.gather("g", &(r * 10)).expect("gather");
                    if r == 0 {
                        assert_eq!(g, Some(vec![0, 10, 20]));
                    } else {
                        assert_eq!(g, None);
                    }
                    let hello = "hello".to_string();
                    let b: String = w.broadcast("b", (r == 0).then_some(&hello)).expect("bcast");
                    assert_eq!(b, "hello");
                    let local = if r == 2 {
                        Err(BenchError::Usage("boom".into()))
                    } else {
                        Ok(())
                    };
                    let e = w.agree("phase", local).expect_err("someone failed");
                    assert!(e.to_string().contains("boom"), "{e}");
                    w.barrier("end").expect("barrier");
                    w.finish().expect("finish");
                })
            })
            .collect();
        for h in handles {
            h.join().expect("rank thread");
        }
    }

    #[test]
    fn file_rendezvous_three_ranks() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join(RDV_DIR_NAME).join("t");
        let fs: Arc<dyn FileSystem> = Arc::new(PosixFs::new());
        let worlds = (0..3)
            .map(|r| {
                World::files(
                    r,
                    3,
                    fs.clone(),
                    &dir,
                    Duration::from_secs(20),
                    Cancel::new(),
                )
                .expect("world")
            })
            .collect();
        exercise(worlds);
        assert!(!tmp.path().join(RDV_DIR_NAME).exists(), "cleaned up");
    }

    #[test]
    fn tcp_rendezvous_three_ranks() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").port()
        };
        let addr = format!("127.0.0.1:{port}");
        let peers: Vec<_> = (1..3)
            .map(|r| {
                let a = addr.clone();
                std::thread::spawn(move || {
                    World::tcp(r, 3, &a, Duration::from_secs(20), Cancel::new()).expect("peer")
                })
            })
            .collect();
        let root = World::tcp(0, 3, &addr, Duration::from_secs(20), Cancel::new()).expect("root");
        let mut worlds = vec![root];
        for p in peers {
            worlds.push(p.join().expect("join"));
        }
        exercise(worlds);
    }

    #[test]
    fn out_of_step_ranks_are_reported() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("rdv");
        let fs: Arc<dyn FileSystem> = Arc::new(PosixFs::new());
        let w0 = World::files(
            0,
            2,
            fs.clone(),
            &dir,
            Duration::from_secs(10),
            Cancel::new(),
        )
        .expect("w0");
        let w1 = World::files(1, 2, fs, &dir, Duration::from_secs(10), Cancel::new()).expect("w1");
        let t = std::thread::spawn(move || {
            let _ = w1.barrier("other");
        });
        let e = w0.barrier("mine").expect_err("mismatch");
        assert!(e.to_string().contains("out of step"), "{e}");
        drop(w0);
        // Rank 1 waits for a release that never comes; cancel is not shared, so just detach.
        drop(t);
    }
}
