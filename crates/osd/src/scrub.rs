//! Checksum scrub (as Lustre's OI scrub lives in osd-ldiskfs): walks every object of a
//! store in the background and checks every block against its stored checksum, at a
//! bounded rate, reporting each bad block with its object, the file it belongs to (the
//! filter fid) and that file's path.
//!
//! A pass walks sequences, then their 32 subdirectories, then object ids, in order; its
//! position is saved (in `scrub_status` beside the store) every
//! [`CHECKPOINT_INTERVAL`], so a stopped target resumes where it was. A pass starts when
//! the last one completed `interval` seconds ago (at once for a store never scrubbed, or
//! one whose pass was cut short), or when asked (`start`); `enable=0` pauses it.
//!
//! Tunables (the owning target names them, e.g. `obdfilter.*.scrub_rate_mb`):
//! - `enable` (1): background passes on or off;
//! - `rate_mb` (32): MiB/s read at most, every object counting at least one block, so it
//!   also bounds objects per second; 0 is no limit;
//! - `interval` (86400): seconds from the end of a pass to the start of the next;
//! - `start`: writing 1 starts a pass now.

use crate::objstore::{BadBlock, OBJ_SUBDIRS, ObjStore, VERIFY_CHUNK};
use nacre_core::Fid;
use nacre_core::cksum::BLOCK;
use parking_lot::{Mutex, RwLock};
use std::collections::VecDeque;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Resolves a file FID to its path in the namespace (the MDT's fid2path).
pub type PathResolver =
    Arc<dyn Fn(Fid) -> Pin<Box<dyn Future<Output = Option<String>> + Send>> + Send + Sync>;

pub const DEFAULT_RATE_MB: u64 = 32;
pub const DEFAULT_INTERVAL: u64 = 86_400;
/// Bad blocks the status keeps to show (all are counted and logged).
pub const BAD_KEPT: usize = 256;
/// How often a pass saves its position.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(10);
/// File holding the last pass's results and the position of one under way.
pub const STATUS_FILE: &str = "scrub_status";

/// A scrub tunable: its name after the owner's prefix, and bounds.
pub struct ScrubParam {
    pub name: &'static str,
    pub min: u64,
    pub max: u64,
}

pub const PARAMS: &[ScrubParam] = &[
    ScrubParam {
        name: "enable",
        min: 0,
        max: 1,
    },
    ScrubParam {
        name: "rate_mb",
        min: 0,
        max: 1 << 20,
    },
    ScrubParam {
        name: "interval",
        min: 1,
        max: 365 * 86_400,
    },
    ScrubParam {
        name: "start",
        min: 0,
        max: 1,
    },
];

/// One bad block (or unreadable table) a pass found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadReport {
    pub obj: Fid,
    /// The file's FID (the object's filter fid), with the stripe index in `ver`.
    pub file: Option<Fid>,
    pub path: Option<String>,
    /// The block's offset in the object; `None` when the object's checksums are unreadable.
    pub offset: Option<u64>,
    pub what: String,
}

impl std::fmt::Display for BadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let file = self
            .file
            .map(|p| Fid::new(p.seq, p.oid, 0).to_string())
            .unwrap_or_else(|| "unknown".into());
        write!(
            f,
            "object {} file {file} path {}",
            self.obj,
            self.path.as_deref().unwrap_or("unknown")
        )?;
        match self.offset {
            Some(o) => write!(f, " offset {o}: {}", self.what),
            None => write!(f, ": {}", self.what),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Status {
    #[default]
    Init,
    Scanning,
    Completed,
    Paused,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Init => "init",
            Status::Scanning => "scanning",
            Status::Completed => "completed",
            Status::Paused => "paused",
        }
    }
}

/// Where a pass is: the last object checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Position {
    seq: u64,
    subdir: u32,
    oid: u32,
}

/// Counts of one pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    objects: u64,
    bytes: u64,
    bad_blocks: u64,
    bad_tables: u64,
    unprotected: u64,
}

#[derive(Default)]
struct State {
    status: Status,
    position: Option<Position>,
    /// This pass (or the last, once it completed).
    counts: Counts,
    latest_start: Option<SystemTime>,
    /// Seconds spent scanning in this pass.
    run_time: Duration,
    last_completed: Option<u64>,
    success_count: u64,
    bad: VecDeque<BadReport>,
    /// Bytes per second over the last second of scanning.
    speed: u64,
}

/// The scrub of one store.
pub struct Scrub {
    store: Arc<ObjStore>,
    file: PathBuf,
    enabled: AtomicBool,
    rate_mb: AtomicU64,
    interval: AtomicU64,
    requested: AtomicBool,
    kick: tokio::sync::Notify,
    state: Mutex<State>,
    resolver: RwLock<Option<PathResolver>>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Scrub {
    /// The scrub of `store`, with what a previous run saved.
    pub fn new(store: Arc<ObjStore>) -> Arc<Scrub> {
        let file = store.target_dir().join(STATUS_FILE);
        let mut state = State::default();
        if let Ok(text) = std::fs::read_to_string(&file) {
            load(&text, &mut state);
        }
        Arc::new(Scrub {
            store,
            file,
            enabled: AtomicBool::new(true),
            rate_mb: AtomicU64::new(DEFAULT_RATE_MB),
            interval: AtomicU64::new(DEFAULT_INTERVAL),
            requested: AtomicBool::new(false),
            kick: tokio::sync::Notify::new(),
            state: Mutex::new(state),
            resolver: RwLock::new(None),
        })
    }

    /// How file FIDs become paths in reports.
    pub fn set_resolver(&self, r: PathResolver) {
        *self.resolver.write() = Some(r);
    }

    /// The tunables' values, by name.
    pub fn params(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("enable", u64::from(self.enabled.load(Ordering::Relaxed))),
            ("rate_mb", self.rate_mb.load(Ordering::Relaxed)),
            ("interval", self.interval.load(Ordering::Relaxed)),
            ("start", u64::from(self.requested.load(Ordering::Relaxed))),
        ]
    }

    /// Sets tunable `name`, checking its bounds.
    pub fn set_param(&self, name: &str, value: &str) -> Result<(), String> {
        let def = PARAMS
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| format!("no scrub parameter '{name}'"))?;
        let v: u64 = value
            .trim()
            .parse()
            .map_err(|_| format!("{name}: '{}' is not a number", value.trim()))?;
        if v < def.min || v > def.max {
            return Err(format!(
                "{name}: {v} is out of range [{}, {}]",
                def.min, def.max
            ));
        }
        match name {
            "enable" => self.enabled.store(v == 1, Ordering::Relaxed),
            "rate_mb" => self.rate_mb.store(v, Ordering::Relaxed),
            "interval" => self.interval.store(v, Ordering::Relaxed),
            _ if v == 1 => self.requested.store(true, Ordering::Relaxed),
            _ => {}
        }
        self.kick.notify_one();
        Ok(())
    }

    /// Bad blocks found by scrub since the target started (or the last ones, at most
    /// [`BAD_KEPT`]), one per line.
    pub fn bad_blocks(&self) -> String {
        let st = self.state.lock();
        st.bad.iter().map(|b| format!("{b}\n")).collect()
    }

    /// Bad blocks this pass found (the last pass's, once complete).
    pub fn errors(&self) -> u64 {
        let st = self.state.lock();
        st.counts.bad_blocks + st.counts.bad_tables
    }

    /// Passes completed since the store was made.
    pub fn passes(&self) -> u64 {
        self.state.lock().success_count
    }

    /// The status, in the shape of Lustre's `oi_scrub`.
    pub fn status(&self) -> String {
        let st = self.state.lock();
        let now = now_secs();
        let ago = |t: Option<u64>| {
            t.map(|t| format!("{} seconds", now.saturating_sub(t)))
                .unwrap_or_else(|| "N/A".into())
        };
        let pos = |p: Option<Position>| {
            p.map(|p| Fid::new(p.seq, p.oid, 0).to_string())
                .unwrap_or_else(|| "N/A".into())
        };
        let secs = st.run_time.as_secs_f64();
        let avg = if secs > 0.0 {
            st.counts.bytes as f64 / secs / f64::from(1 << 20)
        } else {
            0.0
        };
        let started = st
            .latest_start
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_secs());
        let c = st.counts;
        format!(
            "name: checksum_scrub\n\
             status: {}\n\
             flags:\n\
             param: rate_mb={} interval={}\n\
             time_since_last_completed: {}\n\
             time_since_latest_start: {}\n\
             last_completed_time: {}\n\
             checked: {}\n\
             checked_bytes: {}\n\
             failed: {}\n\
             bad_tables: {}\n\
             unprotected: {}\n\
             success_count: {}\n\
             run_time: {} seconds\n\
             average_speed: {avg:.1} MiB/sec\n\
             real-time_speed: {}\n\
             current_position: {}\n",
            st.status.name(),
            self.rate_mb.load(Ordering::Relaxed),
            self.interval.load(Ordering::Relaxed),
            ago(st.last_completed),
            ago(started),
            st.last_completed
                .map(|t| t.to_string())
                .unwrap_or_else(|| "N/A".into()),
            c.objects,
            c.bytes,
            c.bad_blocks,
            c.bad_tables,
            c.unprotected,
            st.success_count,
            st.run_time.as_secs(),
            if st.status == Status::Scanning {
                format!("{:.1} MiB/sec", st.speed as f64 / f64::from(1 << 20))
            } else {
                "N/A".into()
            },
            pos(st.position),
        )
    }

    fn save(&self) {
        let text = {
            let st = self.state.lock();
            dump(&st)
        };
        let tmp = self.file.with_extension("tmp");
        let r = crate::private_file()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
            .and_then(|_| std::fs::rename(&tmp, &self.file));
        if let Err(e) = r {
            tracing::warn!(target: "osd", "{}: cannot save the scrub status: {e}", self.file.display());
        }
    }

    /// Whether a pass should run now, and if not, how long to wait before asking again.
    fn due(&self) -> Result<(), Duration> {
        if !self.enabled.load(Ordering::Relaxed) {
            return Err(Duration::from_secs(3600));
        }
        if self.requested.load(Ordering::Relaxed) {
            return Ok(());
        }
        let st = self.state.lock();
        if st.position.is_some() {
            return Ok(());
        }
        let Some(last) = st.last_completed else {
            return Ok(());
        };
        let next = last.saturating_add(self.interval.load(Ordering::Relaxed));
        let now = now_secs();
        if now >= next {
            Ok(())
        } else {
            Err(Duration::from_secs(next - now))
        }
    }

    /// Runs passes whenever they are due, until `shutdown`.
    pub async fn run(self: Arc<Self>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        loop {
            if *shutdown.borrow() {
                return;
            }
            match self.due() {
                Ok(()) => {
                    let done = tokio::select! {
                        r = self.clone().pass() => r,
                        _ = shutdown.changed() => false,
                    };
                    self.save();
                    if !done {
                        // Paused or stopping: wait for a change.
                        tokio::select! {
                            _ = self.kick.notified() => {}
                            _ = shutdown.changed() => return,
                        }
                    }
                }
                Err(wait) => {
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = self.kick.notified() => {}
                        _ = shutdown.changed() => return,
                    }
                }
            }
        }
    }

    /// One pass from the saved position (or the start); true when it completed.
    async fn pass(self: Arc<Self>) -> bool {
        self.requested.store(false, Ordering::Relaxed);
        let from = {
            let mut st = self.state.lock();
            if st.position.is_none() {
                st.counts = Counts::default();
                st.run_time = Duration::ZERO;
                st.latest_start = Some(SystemTime::now());
            }
            st.status = Status::Scanning;
            st.position
        };
        let store = self.store.clone();
        let seqs = match tokio::task::spawn_blocking(move || store.sequences()).await {
            Ok(Ok(s)) => s,
            other => {
                tracing::warn!(target: "osd", "{}: scrub cannot list the objects: {other:?}", self.file.display());
                self.state.lock().status = Status::Paused;
                return false;
            }
        };
        let mut pacer = Pacer::new();
        let mut last_save = Instant::now();
        for seq in seqs {
            if from.is_some_and(|p| seq < p.seq) {
                continue;
            }
            for subdir in 0..OBJ_SUBDIRS {
                if from.is_some_and(|p| seq == p.seq && subdir < p.subdir) {
                    continue;
                }
                let store = self.store.clone();
                let oids = match tokio::task::spawn_blocking(move || store.objects_in(seq, subdir))
                    .await
                {
                    Ok(Ok(v)) => v,
                    _ => Vec::new(),
                };
                for oid in oids {
                    if from.is_some_and(|p| (seq, subdir) == (p.seq, p.subdir) && oid <= p.oid) {
                        continue;
                    }
                    if !self.enabled.load(Ordering::Relaxed) {
                        self.state.lock().status = Status::Paused;
                        return false;
                    }
                    self.check_object(Fid::new(seq, oid, 0), &mut pacer).await;
                    {
                        let mut st = self.state.lock();
                        st.position = Some(Position { seq, subdir, oid });
                        st.counts.objects += 1;
                    }
                    if last_save.elapsed() >= CHECKPOINT_INTERVAL {
                        self.save();
                        last_save = Instant::now();
                    }
                }
            }
        }
        let mut st = self.state.lock();
        st.status = Status::Completed;
        st.position = None;
        st.last_completed = Some(now_secs());
        st.success_count += 1;
        let c = st.counts;
        drop(st);
        tracing::info!(target: "osd", "{}: scrub pass done: {} objects, {} bytes, {} bad blocks, {} unreadable tables", self.file.display(), c.objects, c.bytes, c.bad_blocks, c.bad_tables);
        true
    }

    async fn check_object(&self, fid: Fid, pacer: &mut Pacer) {
        let mut off = 0u64;
        loop {
            let rate = self.rate_mb.load(Ordering::Relaxed) << 20;
            let store = self.store.clone();
            let t = Instant::now();
            let r =
                tokio::task::spawn_blocking(move || store.verify_range(&fid, off, VERIFY_CHUNK))
                    .await;
            let c = match r {
                Ok(Ok(c)) => c,
                // Destroyed meanwhile, or unreadable: nothing more to check here.
                _ => return,
            };
            {
                let mut st = self.state.lock();
                st.run_time += t.elapsed();
                st.counts.bytes += c.checked;
                st.counts.unprotected += u64::from(c.unprotected && off == 0);
                st.counts.bad_blocks += c.bad_count;
                st.counts.bad_tables += u64::from(c.bad_table.is_some());
            }
            if let Some(why) = &c.bad_table {
                self.found(fid, None, why.clone()).await;
            }
            for b in &c.bad {
                self.found(fid, Some(*b), describe(b)).await;
            }
            let d = pacer.spent(c.checked.max(BLOCK as u64), rate);
            self.state.lock().speed = pacer.speed();
            if !d.is_zero() {
                tokio::time::sleep(d).await;
            }
            off += c.checked;
            if c.checked == 0 || off >= c.size || c.bad_table.is_some() || c.unprotected {
                return;
            }
        }
    }

    async fn found(&self, obj: Fid, b: Option<BadBlock>, what: String) {
        let store = self.store.clone();
        let file = tokio::task::spawn_blocking(move || store.filter_fid(&obj))
            .await
            .ok()
            .and_then(Result::ok)
            .flatten();
        let resolver = self.resolver.read().clone();
        let path = match (file, resolver) {
            (Some(f), Some(r)) => r(Fid::new(f.seq, f.oid, 0)).await,
            _ => None,
        };
        let report = BadReport {
            obj,
            file,
            path,
            offset: b.map(|b| b.offset),
            what,
        };
        tracing::error!(target: "osd", "{}: scrub: checksum error: {report}", self.file.display());
        let mut st = self.state.lock();
        if st.bad.len() >= BAD_KEPT {
            st.bad.pop_front();
        }
        st.bad.push_back(report);
    }
}

fn describe(b: &BadBlock) -> String {
    format!("stored {:#010x}, data gives {:#010x}", b.stored, b.computed)
}

/// Paces a pass to a byte rate.
struct Pacer {
    start: Instant,
    bytes: u64,
    rate: u64,
    window: (Instant, u64),
    speed: u64,
}

impl Pacer {
    fn new() -> Pacer {
        let now = Instant::now();
        Pacer {
            start: now,
            bytes: 0,
            rate: 0,
            window: (now, 0),
            speed: 0,
        }
    }

    /// Counts `n` bytes done; returns how long to wait to keep to `rate` bytes/s (0: none).
    fn spent(&mut self, n: u64, rate: u64) -> Duration {
        if rate != self.rate {
            // A new rate counts from now.
            self.rate = rate;
            self.start = Instant::now();
            self.bytes = 0;
        }
        self.bytes += n;
        self.window.1 += n;
        let w = self.window.0.elapsed();
        if w >= Duration::from_secs(1) {
            self.speed = (self.window.1 as f64 / w.as_secs_f64()) as u64;
            self.window = (Instant::now(), 0);
        }
        if rate == 0 {
            return Duration::ZERO;
        }
        let due = Duration::from_secs_f64(self.bytes as f64 / rate as f64);
        due.saturating_sub(self.start.elapsed())
    }

    fn speed(&self) -> u64 {
        self.speed
    }
}

fn dump(st: &State) -> String {
    let mut s = String::new();
    if let Some(t) = st.last_completed {
        s += &format!("last_completed_time {t}\n");
    }
    s += &format!("success_count {}\n", st.success_count);
    let c = st.counts;
    s += &format!(
        "counts {} {} {} {} {}\n",
        c.objects, c.bytes, c.bad_blocks, c.bad_tables, c.unprotected
    );
    if let Some(p) = st.position {
        s += &format!("position {:x} {} {}\n", p.seq, p.subdir, p.oid);
    }
    s
}

/// Reads what [`dump`] wrote; anything malformed is skipped (a fresh pass then starts).
fn load(text: &str, st: &mut State) {
    for line in text.lines() {
        let mut w = line.split_whitespace();
        let key = w.next();
        let nums: Vec<&str> = w.collect();
        let n = |i: usize| nums.get(i).and_then(|v| v.parse::<u64>().ok());
        match key {
            Some("last_completed_time") => st.last_completed = n(0),
            Some("success_count") => st.success_count = n(0).unwrap_or(0),
            Some("counts") => {
                if let (Some(a), Some(b), Some(c), Some(d), Some(e)) =
                    (n(0), n(1), n(2), n(3), n(4))
                {
                    st.counts = Counts {
                        objects: a,
                        bytes: b,
                        bad_blocks: c,
                        bad_tables: d,
                        unprotected: e,
                    };
                }
            }
            Some("position") => {
                let seq = nums.first().and_then(|v| u64::from_str_radix(v, 16).ok());
                if let (Some(seq), Some(subdir), Some(oid)) = (seq, n(1), n(2))
                    && subdir < u64::from(OBJ_SUBDIRS)
                {
                    st.position = Some(Position {
                        seq,
                        subdir: subdir as u32,
                        oid: u32::try_from(oid).unwrap_or(u32::MAX),
                    });
                    st.status = Status::Paused;
                }
            }
            _ => {}
        }
    }
    if st.last_completed.is_some() && st.position.is_none() {
        st.status = Status::Completed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ObjStoreConfig;

    #[test]
    fn saved_state_round_trips() {
        let st = State {
            position: Some(Position {
                seq: 0x240000400,
                subdir: 7,
                oid: 39,
            }),
            counts: Counts {
                objects: 5,
                bytes: 6,
                bad_blocks: 1,
                bad_tables: 0,
                unprotected: 2,
            },
            last_completed: Some(1234),
            success_count: 3,
            ..State::default()
        };
        let mut back = State::default();
        load(&dump(&st), &mut back);
        assert_eq!(back.position, st.position);
        assert_eq!(back.counts, st.counts);
        assert_eq!((back.last_completed, back.success_count), (Some(1234), 3));
        let mut junk = State::default();
        load("position zz 99 1\ncounts 1 2\n", &mut junk);
        assert_eq!(junk.position, None);
    }

    #[test]
    fn the_pacer_keeps_to_its_rate() {
        let mut p = Pacer::new();
        assert_eq!(p.spent(1 << 20, 0), Duration::ZERO);
        let d = p.spent(4 << 20, 1 << 20);
        assert!(
            d > Duration::from_millis(3900) && d <= Duration::from_secs(4),
            "{d:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pass_finds_every_flipped_block_with_its_file_and_path() {
        use rand::SeedableRng;
        let d = tempfile::tempdir().expect("tmp");
        crate::objstore::check_xattr_support(d.path()).expect("xattrs");
        let health = crate::Health::open("test-OST0000", d.path()).expect("health");
        let store =
            Arc::new(ObjStore::open(d.path(), ObjStoreConfig::default(), health).expect("open"));
        let seq = 0x240000400;
        store.precreate(seq, 200).expect("precreate");
        for i in 1..=100u32 {
            let parent = Fid::new(0x200000401, i, 0);
            let data: Vec<u8> = (0..(i as usize * 3001))
                .map(|b| (b * 7 + i as usize) as u8)
                .collect();
            store
                .write(&Fid::new(seq, i, 0), &parent, 0, &data)
                .expect("write");
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let flips = crate::inject::flip_random(d.path(), 20, &mut rng).expect("flip");
        let scrub = Scrub::new(store.clone());
        scrub.set_resolver(Arc::new(|f: Fid| {
            Box::pin(async move { Some(format!("/dir/file-{}", f.oid)) })
        }));
        scrub.set_param("rate_mb", "0").expect("rate");
        let (tx, rx) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(scrub.clone().run(rx));
        let deadline = Instant::now() + Duration::from_secs(20);
        while scrub.passes() == 0 {
            assert!(
                Instant::now() < deadline,
                "no pass completed:\n{}",
                scrub.status()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = tx.send(true);
        task.await.expect("scrub task");
        let status = scrub.status();
        assert!(status.contains("status: completed"), "{status}");
        // The 100 precreated objects never written are checked too, and are empty.
        assert!(status.contains("checked: 200\n"), "{status}");
        assert!(status.contains("unprotected: 0\n"), "{status}");
        assert!(status.contains("failed: 20\n"), "{status}");
        let bad = scrub.bad_blocks();
        for f in &flips {
            let line = format!(
                "object {} file [0x200000401:{:#x}:0x0] path /dir/file-{} offset {}:",
                f.obj,
                f.obj.oid,
                f.obj.oid,
                f.offset & !(BLOCK as u64 - 1)
            );
            assert!(bad.contains(&line), "{line} not in\n{bad}");
        }
        // The result outlives the process: a new scrub of the store knows it.
        let again = Scrub::new(store);
        assert!(again.status().contains("status: completed"));
        assert!(again.status().contains("failed: 20\n"));
    }
}
