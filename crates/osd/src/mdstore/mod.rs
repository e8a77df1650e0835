//! The MDT's store: redb tables plus the redo [`Journal`], with group commit.
//!
//! Every change runs on one executor thread, in batches: the thread takes all queued
//! transactions (up to [`MdStoreConfig::max_batch`]), runs each against one redb write
//! transaction, writes the batch's changes to the journal in one `write(2)`, commits redb in
//! memory, and only then replies to every caller. A reply therefore means the change is in
//! the journal (durable against `kill -9`). A transaction that must survive power loss too
//! (an `fsync`, or every one under `sync_journal`) has its reply held by the sync thread
//! ([`sync`]) until one `fdatasync` covers it and every waiter queued with it; the executor
//! goes on journaling meanwhile. Every few seconds a checkpoint makes redb durable and
//! empties the journal.
//!
//! A transaction that fails has its own changes undone and does not disturb the others in
//! its batch. Reads never wait for the executor: they use redb read transactions.
//!
//! # Why redb
//!
//! Measured 2026-11-22 with `tools/store-choice` (method and full results in its README.md):
//! 1M files in 100 directories of 10k, the MDT's key and value shapes, creates and unlinks
//! in batches of 256 with a durable checkpoint every 250k ops, median of 3 runs. Machine:
//! 2 cores, 23.5 GiB RAM, ext4 on a virtual disk, shared with other builds (±10-30% between
//! runs). Reproduce: `cd tools/store-choice && cargo run --release`.
//!
//! | metric                        |    redb | redb 1G | lmdb nosync | lmdb nometasync | fjall |
//! |-------------------------------|--------:|--------:|------------:|----------------:|------:|
//! | create, ops/s                 |     80k |     98k |        163k |             37k |   75k |
//! | checkpoint, ms (median/worst) | 105/417 | 193/561 |      86/244 |             6/8 | 24/45 |
//! | lookup dirent+inode, ops/s    |    115k |    183k |        343k |            345k |   73k |
//! | readdir, entries/s            |    8.7M |    8.2M |       29.5M |           29.8M |  4.0M |
//! | unlink, ops/s                 |     25k |     33k |         51k |             14k |   34k |
//! | disk, MiB                     |     371 |     369 |         324 |             324 |   582 |
//! | reopen, ms                    |       1 |       6 |         0.4 |             0.3 |  2752 |
//!
//! (redb: 64 MiB cache, `MdStoreConfig::default()`; `nacre up` gives one MDT 256 MiB, a
//! quarter of its 1 GiB memory budget; redb 1G: a 1 GiB cache.)
//!
//! LMDB is clearly the faster store: with `MDB_NOSYNC` (no fsync per commit, as with redb's
//! `Durability::None`) it does 2× redb's creates and unlinks, 3× its lookups and 3.4× its
//! readdir, with less disk. But `MDB_NOSYNC` is not the guarantee this file relies on: a
//! `Durability::None` commit never overwrites the last durable commit, so after an OS crash
//! redb falls back to the last checkpoint and the journal replays onto it, whereas an LMDB
//! file written with `MDB_NOSYNC` can be left corrupt. LMDB's consistent mode
//! (`MDB_NOMETASYNC`, an fdatasync per batch) keeps the 3× reads but makes creates and
//! unlinks slower than redb's (0.46-0.72× and 0.57-0.84× over two runs). fjall loses to
//! redb on creates, lookups and readdir and reopens in seconds (journal recovery).
//!
//! So redb stays, and the cheap gain is its cache: 1 GiB instead of 64 MiB gives 1.6× the
//! lookups and ~1.2× creates, at the price of longer checkpoints (0.2 s median, up to 0.7 s,
//! during which the executor commits nothing). If lookups and readdir come to dominate the
//! MDT's time, move to LMDB (heed). That takes: this file rewritten against heed (all redb
//! use is here; callers see only this module's own types); `MDB_NOMETASYNC`
//! for batches and `mdb_env_sync` for checkpoints (or fully synced commits, which would make
//! the redo journal unnecessary when `sync_journal` is wanted); read transactions without
//! TLS, since tokio moves tasks between threads; a map size fixed at open and grown
//! between batches; failed transactions undone with nested write transactions, since
//! LMDB's put does not return the old value; giving up redb's page checksums; and
//! converting existing `mdt.redb` stores.

mod sync;

use crate::health::Health;
use crate::journal::{Journal, Mutation, Record};
use nacre_core::Errno;
use parking_lot::{Condvar, Mutex};
use redb::{
    Database, DatabaseError, ReadableDatabase, ReadableTable, ReadableTableMetadata,
    TableDefinition,
};
use std::any::Any;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{Semaphore, oneshot};

/// The tables of an MDT. Keys and values are bytes; the MDT defines their encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Table {
    /// Local inode number -> inode (attributes, layout, LMV, first link, and its own FID,
    /// as ldiskfs keeps it in the LMA).
    Inodes = 0,
    /// parent FID + name hash + name -> child FID and type (FID-in-dirent).
    Dirents = 1,
    /// FID + name -> value.
    Xattrs = 2,
    /// Store-wide values: sequences, precreate positions, checkpoint transno.
    Meta = 3,
    /// Open-unlinked inodes awaiting last close (Lustre's PENDING directory).
    Orphans = 4,
    /// OST objects to destroy once their unlink is committed (the unlink llog).
    Llog = 5,
    /// FID location database: sequence range start -> target.
    Fld = 6,
    /// DNE participant side: updates prepared for another MDT's distributed operation,
    /// with what undoes them, until that MDT says commit or abort.
    DnePending = 7,
    /// DNE coordinator side: distributed operations that committed here and whose
    /// participants have not all confirmed yet.
    DneCommitted = 8,
    /// child FID + parent FID + name hash + name -> nothing: every hard link of an inode
    /// but its first (the linkEA, one key per link).
    Links = 9,
    /// The object index (Lustre's OI): FID -> local inode number. The OI scrub rebuilds it
    /// from the inodes' own FIDs.
    Oi = 10,
    /// LFSCK's namespace trace: objects its second phase must look at again, and links
    /// a dry run found that the objects do not record.
    LfsckTrace = 11,
}

const TABLE_COUNT: usize = 12;
const ALL_TABLES: [Table; TABLE_COUNT] = [
    Table::Inodes,
    Table::Dirents,
    Table::Xattrs,
    Table::Meta,
    Table::Orphans,
    Table::Llog,
    Table::Fld,
    Table::DnePending,
    Table::DneCommitted,
    Table::Links,
    Table::Oi,
    Table::LfsckTrace,
];

impl Table {
    pub(crate) fn def(self) -> TableDefinition<'static, &'static [u8], &'static [u8]> {
        TableDefinition::new(match self {
            Table::Inodes => "inodes",
            Table::Dirents => "dirents",
            Table::Xattrs => "xattrs",
            Table::Meta => "meta",
            Table::Orphans => "orphans",
            Table::Llog => "llog",
            Table::Fld => "fld",
            Table::DnePending => "dne_pending",
            Table::DneCommitted => "dne_committed",
            Table::Links => "links",
            Table::Oi => "oi",
            Table::LfsckTrace => "lfsck_trace",
        })
    }

    fn from_u8(v: u8) -> Option<Table> {
        ALL_TABLES.get(v as usize).copied()
    }
}

pub(crate) const CHECKPOINT_KEY: &[u8] = b"journal.checkpoint_transno";
/// Present while the store is stopped cleanly: written durably by the last checkpoint of
/// [`MdStore::close`], removed durably when the store opens.
pub(crate) const CLEAN_STOP_KEY: &[u8] = b"store.clean_stop";
/// The store's crash generation ([`MdStore::crash_gen`]), little-endian.
pub(crate) const CRASH_GEN_KEY: &[u8] = b"store.crash_gen";
/// When the before-commit work ([`MdStore::set_before_commit`]) of the last commit began,
/// nanoseconds since the epoch, little-endian: what that work makes durable (an MDT's DoM
/// data) and changed later was never promised to a crash ([`MdStore::before_commit_began`]).
pub(crate) const BEFORE_COMMIT_KEY: &[u8] = b"store.before_commit_began";
/// The redb file and the journal, in the store's directory.
pub(crate) const DB_FILE: &str = "mdt.redb";
pub(crate) const JOURNAL_FILE: &str = "journal";

/// Tunables of the store.
#[derive(Clone, Debug)]
pub struct MdStoreConfig {
    /// redb page cache.
    pub cache_bytes: usize,
    /// Make redb durable and empty the journal this often...
    pub checkpoint_interval: Duration,
    /// ... or when the journal grows past this.
    pub checkpoint_bytes: u64,
    /// `fdatasync` the journal before every reply (power-loss safe, slower).
    pub sync_journal: bool,
    /// Transactions per group commit.
    pub max_batch: usize,
    /// Transactions queued for the executor before callers wait.
    pub queue_depth: usize,
}

impl Default for MdStoreConfig {
    fn default() -> Self {
        MdStoreConfig {
            cache_bytes: 64 << 20,
            checkpoint_interval: Duration::from_secs(5),
            checkpoint_bytes: 64 << 20,
            sync_journal: false,
            max_batch: 512,
            queue_depth: 4096,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the metadata store in {path}: {reason}")]
    Open { path: String, reason: String },
    #[error("journal replay in {path} failed: {reason}")]
    Replay { path: String, reason: String },
}

type Answer = Result<Box<dyn Any + Send>, Errno>;
type TxFn = Box<dyn FnOnce(&mut Tx<'_, '_>) -> Answer + Send>;
/// A transaction's answer and the transaction number it was committed under (0 when it
/// changed nothing).
type Numbered = Result<(Box<dyn Any + Send>, u64), Errno>;

tokio::task_local! {
    /// The highest transaction number the writes of the current task were committed
    /// under (see [`track_transno`]).
    static OP_TRANSNO: std::cell::Cell<u64>;
}

/// Runs `fut` and returns, with its output, the highest transaction number any store
/// write it made was committed under (0 when it changed nothing): the transno of one
/// request (Lustre's `th_transno`), whose writes all run in the request's own task.
pub async fn track_transno<F: std::future::Future>(fut: F) -> (F::Output, u64) {
    OP_TRANSNO
        .scope(std::cell::Cell::new(0), async move {
            let out = fut.await;
            (out, OP_TRANSNO.with(std::cell::Cell::get))
        })
        .await
}

/// Counters for `lctl get_param`-style stats.
#[derive(Debug, Default)]
pub struct StoreStats {
    pub transactions: AtomicU64,
    pub batches: AtomicU64,
    pub checkpoints: AtomicU64,
    pub journal_syncs: AtomicU64,
    /// Bytes written to the journal: what the committed changes cost on disk.
    pub journal_bytes: AtomicU64,
}

/// The highest transaction number on stable storage (Lustre's `last_committed`): every
/// transaction up to it is in a synced journal or a durable checkpoint.
#[derive(Debug, Default)]
struct Committed(AtomicU64, tokio::sync::Notify);

impl Committed {
    fn advance(&self, transno: u64) {
        if self.0.fetch_max(transno, Ordering::AcqRel) < transno {
            self.1.notify_waiters();
        }
    }

    async fn reached(&self, transno: u64) {
        loop {
            let advanced = self.1.notified();
            tokio::pin!(advanced);
            advanced.as_mut().enable();
            if self.0.load(Ordering::Acquire) >= transno {
                return;
            }
            advanced.await;
        }
    }
}

struct Shared {
    db: Database,
    /// Transactions waiting for the next group commit, and who commits them.
    queue: Mutex<Queue>,
    /// The journal and transaction numbers: held by the leader or the checkpointer.
    exec: Mutex<Executor>,
    /// Bounds the queue: a caller takes a slot before queueing ([`MdStoreConfig::queue_depth`]).
    slots: Semaphore,
    /// The target's storage health: once failed, nothing more is committed.
    health: Arc<Health>,
    sync_journal: AtomicBool,
    /// Milliseconds between checkpoints ([`MdStore::set_checkpoint_interval`]).
    checkpoint_every_ms: AtomicU64,
    stats: StoreStats,
    committed: Committed,
    max_batch: usize,
    checkpoint_bytes: u64,
    checkpointer: Arc<CheckpointSignal>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Puts that ride in the next batch committed ([`MdStore::put_with_next_commit`]),
    /// at most [`DEFERRED_PUTS_MAX`].
    deferred: Mutex<Vec<DeferredPut>>,
    /// Data kept outside the store that its transactions vouch for (an MDT's DoM
    /// objects): made durable before any commit moves `last_committed` past them.
    before_commit: std::sync::OnceLock<BeforeCommit>,
    /// See [`MdStore::crash_gen`]; fixed while the store is open.
    crash_gen: u64,
    /// Batches begun and ended, for [`MdStore::barrier`].
    batches: Batches,
    /// The last transaction number in the journal (and committed to redb): what the next
    /// journal sync covers.
    journaled: AtomicU64,
    /// The journal's file, for the sync thread's `fdatasync` while the executor appends.
    journal_sync: std::fs::File,
    /// Replies waiting for a journal sync, and the thread that syncs ([`sync`]).
    syncer: Arc<sync::Syncer>,
    sync_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Held by whoever runs the before-commit work and then moves `last_committed`: the
    /// sync thread or a checkpoint.
    commit_turn: Mutex<()>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.syncer.stop();
    }
}

/// Counts of group-commit batches begun and ended (committed and visible, or failed).
/// Batches run one at a time, in order.
#[derive(Default)]
struct Batches {
    begun: AtomicU64,
    ended: AtomicU64,
    ended_notify: tokio::sync::Notify,
}

/// Makes durable what a commit's transactions vouch for outside the store; see
/// [`MdStore::set_before_commit`]. Says whether there was anything to make durable.
pub type BeforeCommit = Box<dyn Fn() -> Result<bool, Errno> + Send + Sync>;

/// A put waiting for the next batch: table, key, value.
type DeferredPut = (Table, Vec<u8>, Vec<u8>);

/// Bounds of [`MdStore::set_checkpoint_interval`]: at least a second (a checkpoint
/// rewrites redb's pages), at most an hour (as `obdfilter.*.commit_interval`).
pub const CHECKPOINT_INTERVAL_MIN: Duration = Duration::from_secs(1);
pub const CHECKPOINT_INTERVAL_MAX: Duration = Duration::from_secs(3600);

/// Puts waiting for the next batch, at most: past it a caller commits its own.
pub const DEFERRED_PUTS_MAX: usize = 4096;

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Pending>,
    /// Some caller is committing batches; new arrivals join its next batch.
    leader: bool,
    /// The checkpointer has or wants the executor; leaders step aside.
    checkpointing: bool,
    closed: bool,
}

struct Pending {
    f: TxFn,
    sync: bool,
    reply: oneshot::Sender<Numbered>,
}

/// Wakes the checkpoint thread early (a big journal) or for good (close).
#[derive(Default)]
struct CheckpointSignal {
    state: Mutex<(bool, bool)>, // (kicked, stop)
    cv: Condvar,
}

impl CheckpointSignal {
    fn kick(&self) {
        self.state.lock().0 = true;
        self.cv.notify_one();
    }

    fn stop(&self) {
        self.state.lock().1 = true;
        self.cv.notify_one();
    }
}

/// What one leader step did.
#[derive(PartialEq, Eq)]
enum Step {
    /// Committed a batch; more are queued and this caller is still the leader.
    More,
    /// Nothing left (or the checkpointer took over): leadership given up.
    Idle,
}

impl Shared {
    fn checkpoint_every(&self) -> Duration {
        Duration::from_millis(self.checkpoint_every_ms.load(Ordering::Acquire))
    }

    /// Runs the before-commit work, if any: when it began, if it had anything to do.
    /// (Work with nothing to do needs no record: no data it covers changed since the
    /// last record's work took its list.)
    fn run_before_commit(&self) -> Result<Option<SystemTime>, Errno> {
        match self.before_commit.get() {
            Some(f) => {
                let began = SystemTime::now();
                f().map(|did| did.then_some(began))
            }
            None => Ok(None),
        }
    }

    /// Commits the next batch as the leader. The executor lock is taken under the queue
    /// lock while no checkpoint is pending, so it is free then and a leader, which runs on
    /// a caller's thread, never waits for a checkpoint.
    fn step(&self) -> Step {
        let (mut batch, mut exec) = {
            let mut q = self.queue.lock();
            if q.jobs.is_empty() || q.checkpointing {
                q.leader = false;
                return Step::Idle;
            }
            debug_assert!(q.leader);
            let n = q.jobs.len().min(self.max_batch);
            let batch: Vec<Pending> = q.jobs.drain(..n).collect();
            (batch, self.exec.lock())
        };
        exec.commit_batch(self, &mut batch);
        if exec.journal.len() >= self.checkpoint_bytes {
            self.checkpointer.kick();
        }
        drop(exec);
        let mut q = self.queue.lock();
        if q.jobs.is_empty() || q.checkpointing {
            q.leader = false;
            Step::Idle
        } else {
            Step::More
        }
    }

    /// Leads until the queue is empty.
    fn lead_to_idle(&self) {
        while self.step() == Step::More {}
    }

    /// Takes the executor away from leaders, runs `f` with it, then commits whatever
    /// queued meanwhile.
    fn with_executor(&self, f: impl FnOnce(&mut Executor)) {
        self.queue.lock().checkpointing = true;
        {
            let mut exec = self.exec.lock();
            f(&mut exec);
        }
        let lead = {
            let mut q = self.queue.lock();
            q.checkpointing = false;
            let lead = !q.jobs.is_empty() && !q.leader;
            q.leader |= lead;
            lead
        };
        if lead {
            self.lead_to_idle();
        }
    }
}

/// Leadership that must be exercised: dropping it leads the queue to idle. A hand-off to
/// a blocking-pool task carries one, so the queue is committed even when the task never
/// runs (its runtime shut down first); otherwise `leader` would stay set with no one
/// leading, and every later write would wait forever.
struct Leadership(Arc<Shared>);

impl Drop for Leadership {
    fn drop(&mut self) {
        self.0.lead_to_idle();
    }
}

/// Hands the leadership of a queue with more batches to a blocking-pool thread (commits
/// block), so the caller's reply is not held up; without a runtime, leads here.
fn hand_off_leadership(shared: &Arc<Shared>) {
    let lead = Leadership(shared.clone());
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => drop(rt.spawn_blocking(move || drop(lead))),
        Err(_) => drop(lead),
    }
}

/// Bytes an unprivileged writer may still use on the file system holding `dir`.
fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: statvfs fills the zeroed struct we pass for a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// The checkpoint thread: every interval (or when kicked) makes redb durable and empties
/// the journal; at close, commits what is queued and checkpoints one last time.
fn checkpoint_thread(shared: std::sync::Weak<Shared>, sig: Arc<CheckpointSignal>) {
    loop {
        let every = match shared.upgrade() {
            Some(s) => s.checkpoint_every(),
            None => return,
        };
        let stop = {
            let mut st = sig.state.lock();
            if !st.0 && !st.1 {
                let _ = sig.cv.wait_for(&mut st, every);
            }
            st.0 = false;
            st.1
        };
        let Some(s) = shared.upgrade() else { return };
        if stop {
            s.queue.lock().checkpointing = true;
            let mut exec = s.exec.lock();
            let mut rest: Vec<Pending> = s.queue.lock().jobs.drain(..).collect();
            while !rest.is_empty() {
                let n = rest.len().min(s.max_batch);
                let mut batch: Vec<Pending> = rest.drain(..n).collect();
                exec.commit_batch(&s, &mut batch);
            }
            exec.checkpoint(&s);
            // Everything is in redb, durably: the next open may trust what it finds.
            if exec.journal.is_empty()
                && !s.health.is_failed()
                && let Err(e) = mark_clean_stop(&s.db)
            {
                tracing::warn!(target: "osd", "cannot record the clean stop: {e}");
            }
            return;
        }
        let every = s.checkpoint_every();
        s.with_executor(|exec| {
            if exec.last_checkpoint.elapsed() >= every || exec.journal.len() >= s.checkpoint_bytes {
                exec.checkpoint(&s);
            }
        });
    }
}

/// Handle to an MDT store; cheap to clone.
#[derive(Clone)]
pub struct MdStore {
    shared: Arc<Shared>,
    /// Where the store lives, for free-space readings.
    dir: PathBuf,
    /// The last free-space reading: when, and whether there was room to grow.
    space: Arc<Mutex<Option<(Instant, bool)>>>,
}

/// Free space below which changes that grow the namespace are refused with ENOSPC, so the
/// journal's reserve ([`crate::journal::JOURNAL_RESERVE`]) stays for changes that free
/// space (unlinks) when the disk fills up.
pub const GROWTH_MIN_FREE: u64 = 4 << 20;
/// How long a free-space reading is trusted (a `statvfs` per create would cost little, but
/// nothing is gained from more than ten a second).
const SPACE_READING_AGE: Duration = Duration::from_millis(100);

/// Key-value pairs read from a table, in key order.
pub type KvPairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Reads shared by transactions and read views, so lookups are written once.
pub trait KvRead {
    /// The store's crash generation ([`MdStore::crash_gen`]).
    fn crash_gen(&self) -> u64;
    fn get(&mut self, t: Table, key: &[u8]) -> Result<Option<Vec<u8>>, Errno>;
    fn range(&mut self, t: Table, start: &[u8], end: &[u8], limit: usize)
    -> Result<KvPairs, Errno>;
}

impl KvRead for Tx<'_, '_> {
    fn crash_gen(&self) -> u64 {
        Tx::crash_gen(self)
    }

    fn get(&mut self, t: Table, key: &[u8]) -> Result<Option<Vec<u8>>, Errno> {
        Tx::get(self, t, key)
    }

    fn range(
        &mut self,
        t: Table,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<KvPairs, Errno> {
        Tx::range(self, t, start, end, limit)
    }
}

impl KvRead for ReadView {
    fn crash_gen(&self) -> u64 {
        ReadView::crash_gen(self)
    }

    fn get(&mut self, t: Table, key: &[u8]) -> Result<Option<Vec<u8>>, Errno> {
        ReadView::get(self, t, key)
    }

    fn range(
        &mut self,
        t: Table,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<KvPairs, Errno> {
        ReadView::range(self, t, start, end, limit)
    }
}

/// One transaction's view of the store: reads see the batch's earlier changes.
pub struct Tx<'a, 't> {
    tables: &'a mut [redb::Table<'t, &'static [u8], &'static [u8]>],
    muts: &'a mut Vec<Mutation>,
    undo: Vec<(Table, Vec<u8>, Option<Vec<u8>>)>,
    crash_gen: u64,
}

impl Tx<'_, '_> {
    /// The store's crash generation ([`MdStore::crash_gen`]).
    pub fn crash_gen(&self) -> u64 {
        self.crash_gen
    }

    pub fn get(&mut self, t: Table, key: &[u8]) -> Result<Option<Vec<u8>>, Errno> {
        let tab = &self.tables[t as usize];
        match tab.get(key) {
            Ok(v) => Ok(v.map(|g| g.value().to_vec())),
            Err(e) => Err(storage_errno(&e)),
        }
    }

    pub fn exists(&mut self, t: Table, key: &[u8]) -> Result<bool, Errno> {
        let tab = &self.tables[t as usize];
        tab.get(key)
            .map(|v| v.is_some())
            .map_err(|e| storage_errno(&e))
    }

    pub fn put(&mut self, t: Table, key: &[u8], val: &[u8]) -> Result<(), Errno> {
        let tab = &mut self.tables[t as usize];
        let old = tab
            .insert(key, val)
            .map_err(|e| storage_errno(&e))?
            .map(|g| g.value().to_vec());
        self.undo.push((t, key.to_vec(), old));
        self.muts.push(Mutation::Put {
            table: t as u8,
            key: key.to_vec(),
            val: val.to_vec(),
        });
        Ok(())
    }

    /// Removes `key`; returns whether it was there.
    pub fn delete(&mut self, t: Table, key: &[u8]) -> Result<bool, Errno> {
        let tab = &mut self.tables[t as usize];
        let old = tab
            .remove(key)
            .map_err(|e| storage_errno(&e))?
            .map(|g| g.value().to_vec());
        let existed = old.is_some();
        if existed {
            self.undo.push((t, key.to_vec(), old));
            self.muts.push(Mutation::Del {
                table: t as u8,
                key: key.to_vec(),
            });
        }
        Ok(existed)
    }

    /// Up to `limit` entries with keys in `[start, end)`.
    pub fn range(
        &mut self,
        t: Table,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<KvPairs, Errno> {
        let tab = &self.tables[t as usize];
        collect_range(tab.range::<&[u8]>(start..end), limit)
    }

    /// Whether any key lies in `[start, end)`.
    pub fn any_in(&mut self, t: Table, start: &[u8], end: &[u8]) -> Result<bool, Errno> {
        Ok(!self.range(t, start, end, 1)?.is_empty())
    }

    /// The greatest key of table `t` below `end` (one B-tree descent).
    pub fn last_key_below(&mut self, t: Table, end: &[u8]) -> Result<Option<Vec<u8>>, Errno> {
        let tab = &self.tables[t as usize];
        let mut r = tab.range::<&[u8]>(..end).map_err(|e| storage_errno(&e))?;
        match r.next_back() {
            Some(item) => {
                let (k, _) = item.map_err(|e| storage_errno(&e))?;
                Ok(Some(k.value().to_vec()))
            }
            None => Ok(None),
        }
    }

    fn rollback(&mut self, mark: usize) {
        while let Some((t, key, old)) = self.undo.pop() {
            let tab = &mut self.tables[t as usize];
            let _ = match old {
                Some(v) => tab.insert(key.as_slice(), v.as_slice()).map(|_| ()),
                None => tab.remove(key.as_slice()).map(|_| ()),
            };
        }
        self.muts.truncate(mark);
    }
}

fn collect_range<'a>(
    r: Result<redb::Range<'a, &'static [u8], &'static [u8]>, redb::StorageError>,
    limit: usize,
) -> Result<KvPairs, Errno> {
    let r = r.map_err(|e| storage_errno(&e))?;
    let mut out = Vec::new();
    for item in r {
        if out.len() >= limit {
            break;
        }
        let (k, v) = item.map_err(|e| storage_errno(&e))?;
        out.push((k.value().to_vec(), v.value().to_vec()));
    }
    Ok(out)
}

fn storage_errno(e: &redb::StorageError) -> Errno {
    tracing::error!(target: "osd", "metadata store error: {e}");
    match e {
        redb::StorageError::Io(io) => Errno::from(std::io::Error::new(io.kind(), io.to_string())),
        _ => Errno::EIO,
    }
}

/// Rows [`ReadView::for_each`] reads at a time.
pub const SCAN_PAGE: usize = 4096;

/// A consistent snapshot for reads.
pub struct ReadView {
    txn: redb::ReadTransaction,
    crash_gen: u64,
}

/// A table as a read view sees it.
type BytesTable = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;

impl ReadView {
    pub(crate) fn new(txn: redb::ReadTransaction, crash_gen: u64) -> ReadView {
        ReadView { txn, crash_gen }
    }

    /// The store's crash generation ([`MdStore::crash_gen`]).
    pub fn crash_gen(&self) -> u64 {
        self.crash_gen
    }

    /// Table `t`, or `None` where it was never written (a new store, read before its first
    /// change: nothing is created until something is written).
    fn table(&self, t: Table) -> Result<Option<BytesTable>, Errno> {
        match self.txn.open_table(t.def()) {
            Ok(tab) => Ok(Some(tab)),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => {
                tracing::error!(target: "osd", "open table: {e}");
                Err(Errno::EIO)
            }
        }
    }

    pub fn get(&self, t: Table, key: &[u8]) -> Result<Option<Vec<u8>>, Errno> {
        let Some(tab) = self.table(t)? else {
            return Ok(None);
        };
        tab.get(key)
            .map(|v| v.map(|g| g.value().to_vec()))
            .map_err(|e| storage_errno(&e))
    }

    pub fn range(
        &self,
        t: Table,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<KvPairs, Errno> {
        let Some(tab) = self.table(t)? else {
            return Ok(Vec::new());
        };
        collect_range(tab.range::<&[u8]>(start..end), limit)
    }

    /// Calls `f` with each key and value of table `t` in `[start, end)`, in key order,
    /// read [`SCAN_PAGE`] rows at a time (whole-table scans: `nacre check`).
    pub fn for_each(
        &self,
        t: Table,
        start: &[u8],
        end: &[u8],
        mut f: impl FnMut(&[u8], &[u8]) -> Result<(), Errno>,
    ) -> Result<(), Errno> {
        let mut from = start.to_vec();
        loop {
            let rows = self.range(t, &from, end, SCAN_PAGE)?;
            let Some((last, _)) = rows.last() else {
                return Ok(());
            };
            from = last.clone();
            from.push(0);
            for (k, v) in &rows {
                f(k, v)?;
            }
        }
    }

    pub fn count(&self, t: Table) -> Result<u64, Errno> {
        match self.table(t)? {
            Some(tab) => tab.len().map_err(|e| storage_errno(&e)),
            None => Ok(0),
        }
    }
}

impl MdStore {
    /// Opens (or creates) the store in `dir`, replaying the journal. `dir` is made if it
    /// is missing, but not its parent (the target directory). From then on `health`
    /// watches the store's directory and files, and the store commits nothing once it
    /// failed.
    pub fn open(
        dir: &Path,
        cfg: MdStoreConfig,
        health: Arc<Health>,
    ) -> Result<MdStore, StoreError> {
        let open_err = |reason: String| StoreError::Open {
            path: dir.display().to_string(),
            reason,
        };
        match crate::private_dir_builder().create(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(open_err(e.to_string()));
            }
            _ => {}
        }
        let db_path = dir.join(DB_FILE);
        let db = waiting_for_the_lock(|| {
            // Opened here rather than by redb, so a new file gets the private mode.
            let file = crate::private_file()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&db_path)?;
            let backend = redb::backends::FileBackend::new(file)?;
            redb::Builder::new()
                .set_cache_size(cfg.cache_bytes)
                .create_with_backend(backend)
        })
        .map_err(|e| open_err(e.to_string()))?;
        let journal_path = dir.join(JOURNAL_FILE);
        let mut journal = Journal::open(&journal_path).map_err(|e| open_err(e.to_string()))?;
        let transno = replay(&db, &mut journal).map_err(|reason| StoreError::Replay {
            path: journal_path.display().to_string(),
            reason,
        })?;
        let crash_gen = note_start(&db).map_err(open_err)?;
        for p in [dir, &db_path, &journal_path] {
            health.watch(p).map_err(|e| open_err(e.to_string()))?;
        }
        let journal_sync = journal.sync_handle().map_err(|e| open_err(e.to_string()))?;
        let checkpointer = Arc::new(CheckpointSignal::default());
        let syncer = Arc::new(sync::Syncer::default());
        let shared = Arc::new(Shared {
            db,
            queue: Mutex::new(Queue::default()),
            exec: Mutex::new(Executor {
                journal,
                transno,
                last_checkpoint: Instant::now(),
            }),
            slots: Semaphore::new(cfg.queue_depth.clamp(1, Semaphore::MAX_PERMITS)),
            health,
            sync_journal: AtomicBool::new(cfg.sync_journal),
            checkpoint_every_ms: AtomicU64::new(
                u64::try_from(cfg.checkpoint_interval.as_millis()).unwrap_or(u64::MAX),
            ),
            stats: StoreStats::default(),
            // What the journal replay left is all durable.
            committed: Committed(AtomicU64::new(transno), tokio::sync::Notify::new()),
            max_batch: cfg.max_batch.max(1),
            checkpoint_bytes: cfg.checkpoint_bytes,
            checkpointer: checkpointer.clone(),
            thread: Mutex::new(None),
            deferred: Mutex::new(Vec::new()),
            before_commit: std::sync::OnceLock::new(),
            crash_gen,
            batches: Batches::default(),
            journaled: AtomicU64::new(transno),
            journal_sync,
            syncer: syncer.clone(),
            sync_thread: Mutex::new(None),
            commit_turn: Mutex::new(()),
        });
        let weak = Arc::downgrade(&shared);
        let handle = std::thread::Builder::new()
            .name("mdstore-sync".into())
            .spawn(move || sync::sync_thread(weak, syncer))
            .map_err(|e| open_err(e.to_string()))?;
        *shared.sync_thread.lock() = Some(handle);
        let weak = Arc::downgrade(&shared);
        let handle = std::thread::Builder::new()
            .name("mdstore-ckpt".into())
            .spawn(move || checkpoint_thread(weak, checkpointer))
            .map_err(|e| open_err(e.to_string()))?;
        *shared.thread.lock() = Some(handle);
        Ok(MdStore {
            shared,
            dir: dir.to_path_buf(),
            space: Arc::new(Mutex::new(None)),
        })
    }

    /// Whether a change that grows the namespace (a create, a link, an xattr) may go ahead:
    /// ENOSPC when the store's file system has less than [`GROWTH_MIN_FREE`] left.
    pub fn check_growth_space(&self) -> Result<(), Errno> {
        let mut last = self.space.lock();
        if let Some((at, ok)) = *last
            && at.elapsed() < SPACE_READING_AGE
        {
            return if ok { Ok(()) } else { Err(Errno::ENOSPC) };
        }
        let ok = match free_bytes(&self.dir) {
            Ok(free) => free >= GROWTH_MIN_FREE,
            // Cannot tell: let the change try (the journal write reports a full disk).
            Err(_) => true,
        };
        *last = Some((Instant::now(), ok));
        if ok { Ok(()) } else { Err(Errno::ENOSPC) }
    }

    /// Runs `f` as one transaction in the next group commit. Its changes are visible to
    /// readers and in the journal when this returns `Ok`; on `Err` none of them happened.
    pub async fn write<R, F>(&self, f: F) -> Result<R, Errno>
    where
        R: Send + 'static,
        F: FnOnce(&mut Tx<'_, '_>) -> Result<R, Errno> + Send + 'static,
    {
        self.submit(f, false).await
    }

    /// Like [`MdStore::write`], and the journal is synced to stable storage before the reply.
    pub async fn write_sync<R, F>(&self, f: F) -> Result<R, Errno>
    where
        R: Send + 'static,
        F: FnOnce(&mut Tx<'_, '_>) -> Result<R, Errno> + Send + 'static,
    {
        self.submit(f, true).await
    }

    /// Puts `val` at `key` in the next batch anyone commits (a checkpoint commits one if
    /// nobody else does first), without a transaction of its own: for records that
    /// follow a change already committed and must never be on disk without it, yet need
    /// not be on disk with it, such as the answers an MDT keeps for resends. Visible to
    /// readers only once committed. Commits a transaction of its own instead, and waits
    /// for it, when [`DEFERRED_PUTS_MAX`] are already waiting.
    pub async fn put_with_next_commit(
        &self,
        t: Table,
        key: Vec<u8>,
        val: Vec<u8>,
    ) -> Result<(), Errno> {
        {
            let mut d = self.shared.deferred.lock();
            if d.len() < DEFERRED_PUTS_MAX {
                d.push((t, key, val));
                return Ok(());
            }
        }
        self.write(move |tx| tx.put(t, &key, &val)).await
    }

    async fn submit<R, F>(&self, f: F, sync: bool) -> Result<R, Errno>
    where
        R: Send + 'static,
        F: FnOnce(&mut Tx<'_, '_>) -> Result<R, Errno> + Send + 'static,
    {
        let s = &self.shared;
        s.health.ensure()?;
        let _slot = s.slots.acquire().await.map_err(|_| Errno::ESHUTDOWN)?;
        let (reply, mut rx) = oneshot::channel();
        let f: TxFn = Box::new(move |tx| f(tx).map(|r| Box::new(r) as Box<dyn Any + Send>));
        let lead = {
            let mut q = s.queue.lock();
            if q.closed {
                return Err(Errno::ESHUTDOWN);
            }
            q.jobs.push_back(Pending { f, sync, reply });
            let lead = !q.leader && !q.checkpointing;
            q.leader |= lead;
            lead
        };
        // Group commit without a hand-off: the first caller to find no leader commits the
        // queue on its own thread, so an uncontended write costs no thread switch.
        let answer = if lead {
            loop {
                let step = s.step();
                match rx.try_recv() {
                    Ok(a) => {
                        if step == Step::More {
                            hand_off_leadership(&self.shared);
                        }
                        break a;
                    }
                    Err(oneshot::error::TryRecvError::Empty) if step == Step::More => {}
                    // Another leader or the checkpointer commits it.
                    Err(oneshot::error::TryRecvError::Empty) => {
                        break rx.await.map_err(|_| Errno::EIO)?;
                    }
                    Err(oneshot::error::TryRecvError::Closed) => return Err(Errno::EIO),
                }
            }
        } else {
            rx.await.map_err(|_| Errno::EIO)?
        };
        let (any, transno) = answer?;
        if transno > 0 {
            let _ = OP_TRANSNO.try_with(|t| t.set(t.get().max(transno)));
        }
        any.downcast::<R>().map(|b| *b).map_err(|_| Errno::EIO)
    }

    /// The highest transaction number on stable storage (`last_committed`).
    pub fn last_committed(&self) -> u64 {
        self.shared.committed.0.load(Ordering::Acquire)
    }

    /// Returns once transaction `transno` is on stable storage: after the journal's
    /// next sync or the next checkpoint, whichever comes first; it forces neither.
    pub async fn committed_through(&self, transno: u64) {
        self.shared.committed.reached(transno).await
    }

    /// The last transaction number given out.
    pub fn last_transno(&self) -> u64 {
        self.shared.exec.lock().transno
    }

    /// Numbers later transactions above `transno`: after a recovery replayed requests
    /// numbered before a crash, new requests never reuse one of their numbers.
    pub fn advance_transno(&self, transno: u64) {
        self.shared
            .with_executor(|e| e.transno = e.transno.max(transno));
    }

    /// Has every commit (a journal sync, a checkpoint) run `f` first: for data outside
    /// the store that transactions vouch for, such as DoM bytes written before their
    /// transaction took its number, so `last_committed` never covers them unsynced. A
    /// failing `f` fails the commit. Set once; a second call is refused.
    pub fn set_before_commit(&self, f: BeforeCommit) -> Result<(), Errno> {
        self.shared.before_commit.set(f).map_err(|_| Errno::EEXIST)
    }

    /// When the before-commit work of the last commit on record began: data that work
    /// makes durable and that changed later may be torn by a crash. None when no commit
    /// with such work was recorded (a store without it, or older than the record).
    pub fn before_commit_began(&self) -> Result<Option<SystemTime>, Errno> {
        let v = self.read()?;
        Ok(v.get(Table::Meta, BEFORE_COMMIT_KEY)?.and_then(|b| {
            let ns = u64::from_le_bytes(b.as_slice().try_into().ok()?);
            Some(UNIX_EPOCH + Duration::from_nanos(ns))
        }))
    }

    /// Makes every reply so far durable against power loss.
    pub async fn sync(&self) -> Result<(), Errno> {
        self.write_sync(|_| Ok(())).await
    }

    /// Waits until every batch that began before this call has ended: a read after it
    /// sees what their transactions did. Without one, a read can miss a transaction whose
    /// closure already ran (and, say, found a file not open) but whose batch is still
    /// being committed.
    pub async fn barrier(&self) {
        let b = &self.shared.batches;
        let target = b.begun.load(Ordering::SeqCst);
        loop {
            let ended = b.ended_notify.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if b.ended.load(Ordering::SeqCst) >= target {
                return;
            }
            ended.await;
        }
    }

    pub fn read(&self) -> Result<ReadView, Errno> {
        self.shared
            .db
            .begin_read()
            .map(|txn| ReadView::new(txn, self.shared.crash_gen))
            .map_err(|e| {
                tracing::error!(target: "osd", "begin read: {e}");
                Errno::EIO
            })
    }

    pub fn set_sync_journal(&self, on: bool) {
        self.shared.sync_journal.store(on, Ordering::Release);
    }

    /// Sets the time between checkpoints (`osd-nacre.*.checkpoint_interval`, within
    /// [`CHECKPOINT_INTERVAL_MIN`]..=[`CHECKPOINT_INTERVAL_MAX`]): how much an MDT's power
    /// cut can take back of what it answered, and what its clients keep for replay.
    pub fn set_checkpoint_interval(&self, every: Duration) -> Result<(), Errno> {
        if !(CHECKPOINT_INTERVAL_MIN..=CHECKPOINT_INTERVAL_MAX).contains(&every) {
            return Err(Errno::EINVAL);
        }
        let ms = u64::try_from(every.as_millis()).map_err(|_| Errno::EINVAL)?;
        self.shared.checkpoint_every_ms.store(ms, Ordering::Release);
        // A sleeping checkpointer wakes to take a shorter interval at once.
        self.shared.checkpointer.cv.notify_all();
        Ok(())
    }

    /// The time between checkpoints.
    pub fn checkpoint_interval(&self) -> Duration {
        self.shared.checkpoint_every()
    }

    pub fn sync_journal(&self) -> bool {
        self.shared.sync_journal.load(Ordering::Acquire)
    }

    pub fn stats(&self) -> &StoreStats {
        &self.shared.stats
    }

    pub fn health(&self) -> &Arc<Health> {
        &self.shared.health
    }

    /// How many times this store opened after a stop that was not clean (a crash, a
    /// killed server, a power cut): a change it had answered may have been lost, while
    /// what it told other targets to do may not. Values the MDT keeps about data held
    /// elsewhere (an exact file size, Lazy Size-on-MDT) are stamped with the generation
    /// they were recorded in and trusted only in it.
    pub fn crash_gen(&self) -> u64 {
        self.shared.crash_gen
    }

    /// Commits what is queued, checkpoints and stops; later writes fail with ESHUTDOWN.
    pub async fn close(&self) {
        self.shared.queue.lock().closed = true;
        self.shared.slots.close();
        self.shared.checkpointer.stop();
        let handle = self.shared.thread.lock().take();
        if let Some(h) = handle {
            let _ = tokio::task::spawn_blocking(move || h.join()).await;
        }
        // The last checkpoint covered every reply still waiting for a sync.
        self.shared.syncer.stop();
        let handle = self.shared.sync_thread.lock().take();
        if let Some(h) = handle {
            let _ = tokio::task::spawn_blocking(move || h.join()).await;
        }
    }
}

/// How long an open waits for another holder of the store's lock to let go.
///
/// redb locks the file with open-file-description locks, which a child process forked
/// by another thread inherits until it execs: a store closed a moment ago can still look
/// open for that long. A store that is really open elsewhere stays locked past this.
pub const STORE_LOCK_WAIT: Duration = Duration::from_secs(2);
/// Pause between attempts while waiting for the lock.
const STORE_LOCK_RETRY: Duration = Duration::from_millis(20);

/// Runs `open` until it does not fail with [`DatabaseError::DatabaseAlreadyOpen`], for at
/// most [`STORE_LOCK_WAIT`].
pub(crate) fn waiting_for_the_lock<T>(
    mut open: impl FnMut() -> Result<T, DatabaseError>,
) -> Result<T, DatabaseError> {
    let started = Instant::now();
    loop {
        match open() {
            Err(DatabaseError::DatabaseAlreadyOpen) if started.elapsed() < STORE_LOCK_WAIT => {
                std::thread::sleep(STORE_LOCK_RETRY);
            }
            r => return r,
        }
    }
}

/// Applies journal records newer than the last checkpoint, then makes them durable.
fn replay(db: &Database, journal: &mut Journal) -> Result<u64, String> {
    let (records, good) = journal.replay().map_err(|e| e.to_string())?;
    if good < journal.len() {
        tracing::warn!(target: "osd", "journal: dropping {} bytes of torn tail", journal.len() - good);
        journal.truncate(good).map_err(|e| e.to_string())?;
    }
    let last = apply_records(db, records)?;
    if !journal.is_empty() {
        journal.reset().map_err(|e| e.to_string())?;
    }
    Ok(last)
}

/// Applies the records newer than the store's checkpoint in one durable transaction and
/// returns the last transaction number. With nothing to apply nothing is written, so a
/// store that was stopped cleanly opens without needing free space.
pub(crate) fn apply_records(db: &Database, records: Vec<Record>) -> Result<u64, String> {
    let mut wtxn = db.begin_write().map_err(|e| e.to_string())?;
    let _ = wtxn.set_durability(redb::Durability::Immediate);
    wtxn.set_quick_repair(true);
    let mut last = 0u64;
    let mut applied = 0usize;
    {
        let mut tables = Vec::with_capacity(TABLE_COUNT);
        for t in ALL_TABLES {
            tables.push(wtxn.open_table(t.def()).map_err(|e| e.to_string())?);
        }
        let checkpoint = read_checkpoint(&tables[Table::Meta as usize])?;
        last = last.max(checkpoint);
        for (transno, muts) in records {
            if transno <= checkpoint {
                continue;
            }
            for m in muts {
                match m {
                    Mutation::Put { table, key, val } => {
                        let t = Table::from_u8(table).ok_or("unknown table in journal")?;
                        tables[t as usize]
                            .insert(key.as_slice(), val.as_slice())
                            .map_err(|e| e.to_string())?;
                    }
                    Mutation::Del { table, key } => {
                        let t = Table::from_u8(table).ok_or("unknown table in journal")?;
                        tables[t as usize]
                            .remove(key.as_slice())
                            .map_err(|e| e.to_string())?;
                    }
                }
            }
            applied += 1;
            last = last.max(transno);
        }
        if applied > 0 {
            tracing::info!(target: "osd", "journal: replayed {applied} transaction batches up to {last}");
            tables[Table::Meta as usize]
                .insert(CHECKPOINT_KEY, last.to_le_bytes().as_slice())
                .map_err(|e| e.to_string())?;
        }
    }
    if applied > 0 {
        wtxn.commit().map_err(|e| e.to_string())?;
    } else {
        wtxn.abort().map_err(|e| e.to_string())?;
    }
    Ok(last)
}

/// Records this open: bumps the crash generation when the last stop was not clean (no
/// [`CLEAN_STOP_KEY`]; a store never checkpointed holds nothing to distrust), and removes
/// the clean-stop mark, durably, before anything runs. Returns the crash generation.
fn note_start(db: &Database) -> Result<u64, String> {
    let mut wtxn = db.begin_write().map_err(|e| e.to_string())?;
    let _ = wtxn.set_durability(redb::Durability::Immediate);
    let crash_gen = {
        let mut meta = wtxn
            .open_table(Table::Meta.def())
            .map_err(|e| e.to_string())?;
        let (crash_gen, unclean) = next_crash_gen(&meta)?;
        if unclean {
            tracing::info!(target: "osd", "store: the last stop was not clean; crash generation {crash_gen}");
        }
        meta.insert(CRASH_GEN_KEY, crash_gen.to_le_bytes().as_slice())
            .map_err(|e| e.to_string())?;
        meta.remove(CLEAN_STOP_KEY).map_err(|e| e.to_string())?;
        crash_gen
    };
    wtxn.commit().map_err(|e| e.to_string())?;
    Ok(crash_gen)
}

/// Marks the store stopped cleanly, durably (see [`note_start`]).
fn mark_clean_stop(db: &Database) -> Result<(), String> {
    let mut wtxn = db.begin_write().map_err(|e| e.to_string())?;
    let _ = wtxn.set_durability(redb::Durability::Immediate);
    {
        let mut meta = wtxn
            .open_table(Table::Meta.def())
            .map_err(|e| e.to_string())?;
        meta.insert(CLEAN_STOP_KEY, [1u8].as_slice())
            .map_err(|e| e.to_string())?;
    }
    wtxn.commit().map_err(|e| e.to_string())
}

/// The crash generation the store opens with, and whether its last stop was unclean: the
/// stored one (0 if never set), one more when the store was used (checkpointed) and has no
/// clean-stop mark.
pub(crate) fn next_crash_gen(
    meta: &impl ReadableTable<&'static [u8], &'static [u8]>,
) -> Result<(u64, bool), String> {
    let stored = match meta.get(CRASH_GEN_KEY).map_err(|e| e.to_string())? {
        Some(v) => v.value().try_into().map(u64::from_le_bytes).unwrap_or(0),
        None => 0,
    };
    let clean = meta
        .get(CLEAN_STOP_KEY)
        .map_err(|e| e.to_string())?
        .is_some();
    let unclean = !clean && read_checkpoint(meta)? > 0;
    Ok((stored + u64::from(unclean), unclean))
}

/// The transaction number the store was last checkpointed at (0 if never).
pub(crate) fn read_checkpoint(
    meta: &impl ReadableTable<&'static [u8], &'static [u8]>,
) -> Result<u64, String> {
    let Some(v) = meta.get(CHECKPOINT_KEY).map_err(|e| e.to_string())? else {
        return Ok(0);
    };
    let b = v.value();
    Ok(b.try_into().map(u64::from_le_bytes).unwrap_or(0))
}

struct Executor {
    journal: Journal,
    transno: u64,
    last_checkpoint: Instant,
}

impl Executor {
    /// Commits a batch, counted for [`MdStore::barrier`].
    fn commit_batch(&mut self, s: &Shared, batch: &mut Vec<Pending>) {
        /// Ends the batch however it ends, a panic included: a barrier never waits for
        /// good.
        struct Ended<'a>(&'a Batches);
        impl Drop for Ended<'_> {
            fn drop(&mut self) {
                self.0.ended.fetch_add(1, Ordering::SeqCst);
                self.0.ended_notify.notify_waiters();
            }
        }
        s.batches.begun.fetch_add(1, Ordering::SeqCst);
        let _ended = Ended(&s.batches);
        self.commit_batch_counted(s, batch);
    }

    fn commit_batch_counted(&mut self, s: &Shared, batch: &mut Vec<Pending>) {
        let fail_all = |batch: &mut Vec<Pending>, e: Errno| {
            for p in batch.drain(..) {
                let _ = p.reply.send(Err(e));
            }
        };
        if s.health.is_failed() {
            return fail_all(batch, Errno::EIO);
        }
        let mut wtxn = match s.db.begin_write() {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(target: "osd", "begin write: {e}");
                return fail_all(batch, Errno::EIO);
            }
        };
        let _ = wtxn.set_durability(redb::Durability::None);
        let mut muts = Vec::new();
        let mut answers = Vec::with_capacity(batch.len());
        let sync_all = s.sync_journal.load(Ordering::Acquire);
        {
            let mut tables = Vec::with_capacity(TABLE_COUNT);
            for t in ALL_TABLES {
                match wtxn.open_table(t.def()) {
                    Ok(tab) => tables.push(tab),
                    Err(e) => {
                        tracing::error!(target: "osd", "open table: {e}");
                        drop(tables);
                        return fail_all(batch, Errno::EIO);
                    }
                }
            }
            // Each transaction that changes something gets its own number; the batch's
            // journal record carries the last, so numbers survive a restart.
            let mut next = self.transno;
            for Pending { f, sync, reply } in batch.drain(..) {
                let mark = muts.len();
                let mut tx = Tx {
                    tables: &mut tables,
                    muts: &mut muts,
                    undo: Vec::new(),
                    crash_gen: s.crash_gen,
                };
                let res = f(&mut tx);
                if res.is_err() {
                    tx.rollback(mark);
                }
                let transno = if res.is_ok() && muts.len() > mark {
                    next += 1;
                    next
                } else {
                    0
                };
                answers.push((reply, res, transno, sync || sync_all));
            }
            // Deferred puts: each follows a change committed in an earlier batch, so they
            // are never on disk without it. In a batch with transactions they take no
            // number of their own; alone (at a checkpoint) the batch takes the next one,
            // as a batch whose transactions all failed does.
            let deferred = std::mem::take(&mut *s.deferred.lock());
            if !deferred.is_empty() {
                let mark = muts.len();
                let mut tx = Tx {
                    tables: &mut tables,
                    muts: &mut muts,
                    undo: Vec::new(),
                    crash_gen: s.crash_gen,
                };
                let put = deferred.iter().try_for_each(|(t, k, v)| tx.put(*t, k, v));
                if let Err(e) = put {
                    tx.rollback(mark);
                    tracing::warn!(target: "osd", "{} deferred puts not made: {e}", deferred.len());
                }
            }
        }
        let refuse = |answers: Vec<(oneshot::Sender<Numbered>, Answer, u64, bool)>,
                      errno: Errno| {
            for (reply, _, _, _) in answers {
                let _ = reply.send(Err(errno));
            }
        };
        let mark = self.journal.len();
        let last = answers.iter().map(|a| a.2).max().unwrap_or(0);
        if !muts.is_empty() {
            // Changes of failed transactions were undone: still journaled, under the
            // next number.
            let transno = last.max(self.transno + 1);
            if let Err(e) = self.journal.append(transno, &muts) {
                tracing::error!(target: "osd", "journal write failed: {e}");
                let errno = s.health.io_error("the journal", e);
                let _ = wtxn.abort();
                return refuse(answers, errno);
            }
            self.transno = transno;
            s.stats
                .journal_bytes
                .fetch_add(self.journal.len() - mark, Ordering::Relaxed);
        }
        if let Err(e) = wtxn.commit() {
            // The journal holds the batch but redb refused it: stop accepting changes rather
            // than diverge; a restart replays the journal.
            s.health.fail(format!(
                "metadata store commit failed (the journal keeps it): {e}"
            ));
            return refuse(answers, Errno::EIO);
        }
        s.journaled.store(self.transno, Ordering::Release);
        s.stats.batches.fetch_add(1, Ordering::Relaxed);
        s.stats
            .transactions
            .fetch_add(answers.len() as u64, Ordering::Relaxed);
        // Replies that need a sync wait for the sync thread; the executor goes on.
        let mut waiters = Vec::new();
        for (reply, res, transno, sync) in answers {
            match res {
                Ok(answer) if sync => waiters.push(sync::Waiter {
                    reply,
                    answer,
                    transno,
                    through: self.transno,
                }),
                res => {
                    let _ = reply.send(res.map(|r| (r, transno)));
                }
            }
        }
        s.syncer.push(waiters);
    }

    fn checkpoint(&mut self, s: &Shared) {
        // Deferred puts wait for a checkpoint at most: one that no batch took goes in a
        // batch of its own first.
        if !s.deferred.lock().is_empty() {
            self.commit_batch(s, &mut Vec::new());
        }
        // A failed store keeps its journal for whoever repairs the target.
        if self.journal.is_empty() || s.health.is_failed() {
            self.last_checkpoint = Instant::now();
            return;
        }
        // The sync thread's before-commit work and this one take turns (see `sync`).
        let _turn = s.commit_turn.lock();
        let res = (|| -> Result<(), String> {
            let began = s.run_before_commit().map_err(|e| e.to_string())?;
            let mut wtxn = s.db.begin_write().map_err(|e| e.to_string())?;
            let _ = wtxn.set_durability(redb::Durability::Immediate);
            wtxn.set_quick_repair(true);
            {
                let mut meta = wtxn
                    .open_table(Table::Meta.def())
                    .map_err(|e| e.to_string())?;
                meta.insert(CHECKPOINT_KEY, self.transno.to_le_bytes().as_slice())
                    .map_err(|e| e.to_string())?;
                if let Some(t) = began {
                    meta.insert(BEFORE_COMMIT_KEY, time_bytes(t).as_slice())
                        .map_err(|e| e.to_string())?;
                }
            }
            wtxn.commit().map_err(|e| e.to_string())?;
            self.journal.reset().map_err(|e| e.to_string())
        })();
        match res {
            Ok(()) => {
                s.stats.checkpoints.fetch_add(1, Ordering::Relaxed);
                s.committed.advance(self.transno);
            }
            Err(e) => tracing::error!(target: "osd", "checkpoint failed (journal kept): {e}"),
        }
        self.last_checkpoint = Instant::now();
    }
}

/// A time as [`BEFORE_COMMIT_KEY`] keeps it.
fn time_bytes(t: SystemTime) -> [u8; 8] {
    let ns = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    ns.to_le_bytes()
}

/// Where a store keeps its files.
pub fn store_dir(target_dir: &Path) -> PathBuf {
    target_dir.join("mdstore")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> MdStore {
        let health = Health::open("test-MDT0000", dir).expect("health");
        MdStore::open(dir, cfg(), health).expect("open")
    }

    fn cfg() -> MdStoreConfig {
        MdStoreConfig {
            checkpoint_interval: Duration::from_millis(50),
            ..MdStoreConfig::default()
        }
    }

    /// A barrier waits for a batch whose transaction already ran but which is still being
    /// committed, and a read after it sees the change: the MDT's open looks after one, so
    /// an unlink that found the file not open is seen to have removed it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_barrier_waits_for_the_batch_in_flight() {
        let d = tempfile::tempdir().expect("tmp");
        let s = Arc::new(open(d.path()));
        let (ran_tx, ran_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let w = {
            let s = s.clone();
            tokio::spawn(async move {
                s.write(move |tx| {
                    tx.put(Table::Meta, b"k", b"v")?;
                    let _ = ran_tx.send(());
                    // Held inside its batch: begun, not ended.
                    let _ = go_rx.recv();
                    Ok(())
                })
                .await
            })
        };
        ran_rx.recv().expect("the transaction ran");
        let looked = {
            let s = s.clone();
            tokio::spawn(async move {
                s.barrier().await;
                s.read().and_then(|v| v.get(Table::Meta, b"k"))
            })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !looked.is_finished(),
            "the barrier returned while the batch was committing"
        );
        go_tx.send(()).expect("go");
        w.await.expect("join").expect("write");
        let got = looked.await.expect("join").expect("read");
        assert_eq!(got.as_deref(), Some(&b"v"[..]));
        tokio::time::timeout(Duration::from_secs(1), s.barrier())
            .await
            .expect("an idle store's barrier returns at once");
    }

    /// What a commit vouches for outside the store is made durable first: the hook runs
    /// before every journal sync, and a failing hook fails the sync, whose callers are
    /// told and whose transactions `last_committed` never covers.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn before_commit_runs_first_and_its_failure_fails_the_commit() {
        let d = tempfile::tempdir().expect("tmp");
        let health = Health::open("test-MDT0000", d.path()).expect("health");
        let cfg = MdStoreConfig {
            checkpoint_interval: Duration::from_secs(3600),
            ..MdStoreConfig::default()
        };
        let s = MdStore::open(d.path(), cfg, health).expect("open");
        let (runs, fail) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (r, f) = (runs.clone(), fail.clone());
        s.set_before_commit(Box::new(move || {
            r.fetch_add(1, Ordering::SeqCst);
            if f.load(Ordering::SeqCst) {
                Err(Errno::EIO)
            } else {
                Ok(true)
            }
        }))
        .expect("hook");
        assert_eq!(
            s.set_before_commit(Box::new(|| Ok(true))),
            Err(Errno::EEXIST)
        );
        s.write(|tx| tx.put(Table::Meta, b"a", b"1"))
            .await
            .expect("write");
        assert_eq!(runs.load(Ordering::SeqCst), 0, "no commit yet");
        s.sync().await.expect("sync");
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        let committed = s.last_committed();
        fail.store(true, Ordering::SeqCst);
        s.write(|tx| tx.put(Table::Meta, b"b", b"2"))
            .await
            .expect("write");
        assert_eq!(s.sync().await, Err(Errno::EIO));
        assert_eq!(s.last_committed(), committed, "a failed commit moved it");
        fail.store(false, Ordering::SeqCst);
        s.sync().await.expect("sync");
        assert!(s.last_committed() > committed);
        // The checkpoint interval is bounded.
        assert_eq!(
            s.set_checkpoint_interval(Duration::from_millis(10)),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            s.set_checkpoint_interval(CHECKPOINT_INTERVAL_MAX + Duration::from_secs(1)),
            Err(Errno::EINVAL)
        );
        s.set_checkpoint_interval(Duration::from_secs(7))
            .expect("set");
        assert_eq!(s.checkpoint_interval(), Duration::from_secs(7));
    }

    /// A sync in progress holds up no other write: a plain write commits and answers
    /// while the sync thread is still busy, and the syncs queued meanwhile share the
    /// next journal sync.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_go_on_while_a_sync_runs_and_later_syncs_share_one() {
        let d = tempfile::tempdir().expect("tmp");
        let health = Health::open("test-MDT0000", d.path()).expect("health");
        let cfg = MdStoreConfig {
            checkpoint_interval: Duration::from_secs(3600),
            ..MdStoreConfig::default()
        };
        let s = MdStore::open(d.path(), cfg, health).expect("open");
        // The first sync's before-commit work waits until the test lets it go; later ones
        // find nothing to do.
        let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let gate = Mutex::new(Some((entered_tx, go_rx)));
        s.set_before_commit(Box::new(move || {
            let Some((entered, go)) = gate.lock().take() else {
                return Ok(false);
            };
            let _ = entered.send(());
            let _ = go.recv();
            Ok(true)
        }))
        .expect("hook");
        let first = tokio::spawn({
            let s = s.clone();
            async move { s.write_sync(|tx| tx.put(Table::Meta, b"a", b"1")).await }
        });
        tokio::task::spawn_blocking(move || entered_rx.recv())
            .await
            .expect("join")
            .expect("the sync began");
        let syncs = s.stats().journal_syncs.load(Ordering::Relaxed);
        tokio::time::timeout(
            Duration::from_secs(10),
            s.write(|tx| tx.put(Table::Meta, b"b", b"2")),
        )
        .await
        .expect("a plain write waited for the sync in progress")
        .expect("write");
        let later: Vec<_> = (0..8u8)
            .map(|i| {
                let s = s.clone();
                tokio::spawn(async move {
                    s.write_sync(move |tx| tx.put(Table::Meta, &[i], b"x"))
                        .await
                })
            })
            .collect();
        // Every later sync is queued (committed, waiting for the sync thread) before the
        // first one ends.
        let queued = Instant::now();
        while s.shared.syncer.waiting() < later.len() {
            assert!(
                queued.elapsed() < Duration::from_secs(10),
                "the syncs never queued"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            !first.is_finished(),
            "the first sync ended before its work did"
        );
        go_tx.send(()).expect("go");
        first.await.expect("join").expect("first sync");
        for t in later {
            t.await.expect("join").expect("later sync");
        }
        // The first sync counts once its before-commit work is done: it and one more.
        let used = s.stats().journal_syncs.load(Ordering::Relaxed) - syncs;
        assert_eq!(
            used,
            2,
            "eight queued syncs took {} journal syncs",
            used - 1
        );
        assert_eq!(s.last_committed(), s.last_transno());
        s.close().await;
    }

    /// When the last commit's before-commit work began is on record for the next start:
    /// a journal sync's in a batch of its own that the sync covers, a checkpoint's
    /// durably; a store without such work records none, nor does work with nothing to do.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_start_of_the_last_before_commit_work_is_kept() {
        let d = tempfile::tempdir().expect("tmp");
        let health = Health::open("test-MDT0000", d.path()).expect("health");
        let cfg = MdStoreConfig {
            checkpoint_interval: Duration::from_secs(3600),
            ..MdStoreConfig::default()
        };
        let s = MdStore::open(d.path(), cfg.clone(), health.clone()).expect("open");
        s.sync().await.expect("sync");
        s.write(|tx| tx.put(Table::Meta, b"a", b"1"))
            .await
            .expect("write");
        assert_eq!(s.before_commit_began(), Ok(None), "no work, no record");
        let busy = Arc::new(AtomicBool::new(false));
        let b = busy.clone();
        s.set_before_commit(Box::new(move || Ok(b.load(Ordering::SeqCst))))
            .expect("hook");
        s.write(|tx| tx.put(Table::Meta, b"b", b"2"))
            .await
            .expect("write");
        s.sync().await.expect("sync");
        assert_eq!(
            s.before_commit_began(),
            Ok(None),
            "nothing to do, no record"
        );
        busy.store(true, Ordering::SeqCst);
        s.write(|tx| tx.put(Table::Meta, b"c", b"3"))
            .await
            .expect("write");
        let before = SystemTime::now();
        s.sync().await.expect("sync");
        let synced = s.before_commit_began().expect("read").expect("recorded");
        assert!(before <= synced && synced <= SystemTime::now());
        s.close().await;
        drop(s);
        let s = MdStore::open(d.path(), cfg, health).expect("reopen");
        let closed = s.before_commit_began().expect("read").expect("kept");
        assert!(
            closed >= synced,
            "the closing checkpoint's work is the last"
        );
        s.close().await;
    }

    /// A leader with more batches hands them to a blocking-pool task. When that task
    /// never runs (its runtime shut down first, as a library client's does when it is
    /// dropped), the queue is still committed and later writes do not wait forever.
    #[test]
    fn a_hand_off_whose_runtime_is_gone_still_commits_the_queue() {
        let d = tempfile::tempdir().expect("tmp");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let s = {
            let _in = rt.enter();
            open(d.path())
        };
        let (reply, mut queued) = oneshot::channel();
        {
            let mut q = s.shared.queue.lock();
            q.jobs.push_back(Pending {
                f: Box::new(|tx| {
                    tx.put(Table::Meta, b"queued", b"1")?;
                    Ok(Box::new(()) as Box<dyn Any + Send>)
                }),
                sync: false,
                reply,
            });
            // A caller leads, finds this batch queued behind its own, and hands off.
            q.leader = true;
        }
        let gone = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .expect("runtime");
        let handle = gone.handle().clone();
        gone.shutdown_background();
        {
            let _in = handle.enter();
            hand_off_leadership(&s.shared);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let answer = loop {
            match queued.try_recv() {
                Ok(a) => break a,
                Err(oneshot::error::TryRecvError::Empty) => {
                    assert!(
                        Instant::now() < deadline,
                        "the queued batch was never committed"
                    );
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("the queued batch was dropped: {e}"),
            }
        };
        assert!(answer.is_ok());
        rt.block_on(async {
            tokio::time::timeout(
                Duration::from_secs(5),
                s.write(|tx| tx.put(Table::Meta, b"later", b"2")),
            )
            .await
            .expect("a later write waited forever")
            .expect("later write");
            s.close().await;
        });
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_are_visible_and_failed_ones_leave_nothing() {
        let d = tempfile::tempdir().expect("tmp");
        let s = open(d.path());
        s.write(|tx| tx.put(Table::Inodes, b"a", b"1"))
            .await
            .expect("put");
        let r: Result<(), Errno> = s
            .write(|tx| {
                tx.put(Table::Inodes, b"b", b"2")?;
                tx.delete(Table::Inodes, b"a")?;
                Err(Errno::EEXIST)
            })
            .await;
        assert_eq!(r, Err(Errno::EEXIST));
        let v = s.read().expect("read");
        assert_eq!(
            v.get(Table::Inodes, b"a").expect("get"),
            Some(b"1".to_vec())
        );
        assert_eq!(v.get(Table::Inodes, b"b").expect("get"), None);
        s.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writers_share_batches_and_see_each_other() {
        let d = tempfile::tempdir().expect("tmp");
        let s = open(d.path());
        let mut tasks = Vec::new();
        // The first transaction to run holds its batch up, so the others queue behind it.
        let first = Arc::new(AtomicBool::new(true));
        for i in 0..200u32 {
            let s = s.clone();
            let first = first.clone();
            tasks.push(tokio::spawn(async move {
                s.write(move |tx| {
                    if first.swap(false, Ordering::AcqRel) {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    // A read-modify-write counter: group commit must serialise these.
                    let n = tx
                        .get(Table::Meta, b"counter")?
                        .map(|v| u32::from_le_bytes(v.try_into().unwrap_or([0; 4])))
                        .unwrap_or(0);
                    tx.put(Table::Meta, b"counter", &(n + 1).to_le_bytes())?;
                    tx.put(Table::Dirents, &i.to_be_bytes(), b"x")
                })
                .await
            }));
        }
        for t in tasks {
            t.await.expect("join").expect("write");
        }
        let v = s.read().expect("read");
        assert_eq!(
            v.get(Table::Meta, b"counter").expect("get"),
            Some(200u32.to_le_bytes().to_vec())
        );
        assert_eq!(
            v.range(Table::Dirents, &[0], &[0xff; 5], 1000)
                .expect("range")
                .len(),
            200
        );
        let batches = s.stats().batches.load(Ordering::Relaxed);
        assert!(batches < 200, "200 writers never shared a batch");
        s.close().await;
    }

    /// A stop without the clean-stop mark that `close` leaves (a crash) bumps the crash
    /// generation at the next open; a clean stop does not, nor does a new store's first
    /// open.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unclean_stop_bumps_the_crash_generation() {
        let d = tempfile::tempdir().expect("tmp");
        let s = open(d.path());
        assert_eq!(s.crash_gen(), 0);
        s.write(|tx| tx.put(Table::Inodes, b"a", b"1"))
            .await
            .expect("put");
        s.close().await;
        drop(s);
        let s = open(d.path());
        assert_eq!(s.crash_gen(), 0, "a clean stop counted as a crash");
        s.write(|tx| tx.put(Table::Inodes, b"b", b"2"))
            .await
            .expect("put");
        s.close().await;
        drop(s);
        // What a crash leaves: no clean-stop mark.
        {
            let db = Database::open(d.path().join(DB_FILE)).expect("redb");
            let w = db.begin_write().expect("write");
            w.open_table(Table::Meta.def())
                .expect("meta")
                .remove(CLEAN_STOP_KEY)
                .expect("remove")
                .expect("a clean stop left no mark");
            w.commit().expect("commit");
        }
        let snap = crate::StoreSnapshot::open(d.path()).expect("snapshot");
        assert_eq!(snap.read().expect("read").crash_gen(), 1);
        drop(snap);
        let s = open(d.path());
        assert_eq!(s.crash_gen(), 1);
        let mut v = s.read().expect("read");
        assert_eq!(KvRead::crash_gen(&v), 1);
        assert_eq!(
            KvRead::get(&mut v, Table::Inodes, b"b").expect("get"),
            Some(b"2".to_vec())
        );
        drop(v);
        let seen = s.write(|tx| Ok(tx.crash_gen())).await.expect("tx");
        assert_eq!(seen, 1);
        s.close().await;
        drop(s);
        let s = open(d.path());
        assert_eq!(
            s.crash_gen(),
            1,
            "a clean stop after a crash counted as another"
        );
        s.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn journal_records_survive_a_crash_before_checkpoint() {
        let d = tempfile::tempdir().expect("tmp");
        {
            let s = open(d.path());
            s.write(|tx| tx.put(Table::Inodes, b"kept", b"1"))
                .await
                .expect("put");
            s.close().await;
        }
        // What a killed process leaves: records in the journal that redb never made durable.
        {
            let mut j = Journal::open(&d.path().join("journal")).expect("journal");
            j.append(
                1_000,
                &[
                    Mutation::Put {
                        table: Table::Inodes as u8,
                        key: b"late".to_vec(),
                        val: b"2".to_vec(),
                    },
                    Mutation::Del {
                        table: Table::Inodes as u8,
                        key: b"kept".to_vec(),
                    },
                ],
            )
            .expect("append");
        }
        let s = open(d.path());
        let v = s.read().expect("read");
        assert_eq!(
            v.get(Table::Inodes, b"late").expect("get"),
            Some(b"2".to_vec())
        );
        assert_eq!(v.get(Table::Inodes, b"kept").expect("get"), None);
        // Transaction numbers continue after the replayed ones.
        s.write(|tx| tx.put(Table::Inodes, b"next", b"3"))
            .await
            .expect("put");
        assert!(s.shared.exec.lock().transno > 1_000);
        s.close().await;
        drop(s);
        let s = open(d.path());
        assert_eq!(
            s.read()
                .expect("read")
                .get(Table::Inodes, b"next")
                .expect("get"),
            Some(b"3".to_vec())
        );
        s.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn store_files_are_owner_only() {
        let d = tempfile::tempdir().expect("tmp");
        let target = d.path().join("mdt0");
        crate::create_private_dir(&target).expect("mkdir");
        let dir = store_dir(&target);
        let health = Health::open("test-MDT0000", &target).expect("health");
        let s = MdStore::open(&dir, cfg(), health).expect("open");
        s.write(|tx| tx.put(Table::Inodes, b"a", b"1"))
            .await
            .expect("put");
        tokio::time::sleep(Duration::from_millis(200)).await;
        s.close().await;
        assert!(dir.join(DB_FILE).exists() && dir.join(JOURNAL_FILE).exists());
        let bad = crate::not_private(&d.path().join("mdt0"));
        assert!(bad.is_empty(), "readable by others: {bad:?}");
    }

    /// A wait for a transaction to be on stable storage ends with the sync that makes it
    /// so, and not before; it forces nothing itself.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wait_for_a_commit_ends_when_it_is_durable() {
        let d = tempfile::tempdir().expect("tmp");
        let health = Health::open("test-MDT0000", d.path()).expect("health");
        let hourly = MdStoreConfig {
            checkpoint_interval: Duration::from_secs(3600),
            ..MdStoreConfig::default()
        };
        let s = MdStore::open(d.path(), hourly, health).expect("open");
        s.write(|tx| tx.put(Table::Inodes, b"a", b"1"))
            .await
            .expect("put");
        let t = s.last_transno();
        assert!(s.last_committed() < t, "durable at once");
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.committed_through(t).await }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!waiter.is_finished(), "ended before anything was synced");
        s.sync().await.expect("sync");
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("still waiting after the sync")
            .expect("task");
        assert!(s.last_committed() >= t);
        // Already durable: at once.
        tokio::time::timeout(Duration::from_secs(1), s.committed_through(t))
            .await
            .expect("waited for a durable transaction");
        s.close().await;
    }

    /// A deferred put is committed with the next batch, or by the checkpoint when no
    /// batch comes, and is kept across a restart.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deferred_put_rides_in_the_next_commit_or_the_checkpoint() {
        let d = tempfile::tempdir().expect("tmp");
        let s = open(d.path());
        let get = |s: &MdStore, k: &[u8]| s.read().expect("read").get(Table::Meta, k).expect("get");
        let bytes = |b: &[u8]| b.to_vec();
        s.put_with_next_commit(Table::Meta, bytes(b"r1"), bytes(b"1"))
            .await
            .expect("defer");
        s.write(|tx| tx.put(Table::Inodes, b"a", b"1"))
            .await
            .expect("put");
        assert_eq!(get(&s, b"r1"), Some(bytes(b"1")), "not in the next batch");
        // Nobody commits: the checkpoint (every 50 ms here) does.
        s.put_with_next_commit(Table::Meta, bytes(b"r2"), bytes(b"2"))
            .await
            .expect("defer");
        let t0 = Instant::now();
        while get(&s, b"r2").is_none() {
            assert!(t0.elapsed() < Duration::from_secs(5), "never committed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        s.put_with_next_commit(Table::Meta, bytes(b"r3"), bytes(b"3"))
            .await
            .expect("defer");
        s.close().await;
        drop(s);
        // Past the bound, a put commits a batch of its own (taking every deferred one),
        // here where no checkpoint comes first.
        let e = tempfile::tempdir().expect("tmp");
        let health = Health::open("test-MDT0001", e.path()).expect("health");
        let slow = MdStoreConfig {
            checkpoint_interval: Duration::from_secs(3600),
            ..MdStoreConfig::default()
        };
        let b = MdStore::open(e.path(), slow, health).expect("open");
        for i in 0..DEFERRED_PUTS_MAX {
            b.put_with_next_commit(Table::Meta, format!("q{i:05}").into_bytes(), bytes(b"q"))
                .await
                .expect("defer");
        }
        assert_eq!(get(&b, b"q00000"), None, "committed before any batch");
        let over = format!("q{DEFERRED_PUTS_MAX:05}").into_bytes();
        b.put_with_next_commit(Table::Meta, over.clone(), bytes(b"q"))
            .await
            .expect("over the bound");
        assert_eq!(get(&b, &over), Some(bytes(b"q")), "not committed on return");
        assert_eq!(
            get(&b, b"q00000"),
            Some(bytes(b"q")),
            "the deferred ones wait on"
        );
        assert!(b.shared.deferred.lock().is_empty());
        b.close().await;
        let s = open(d.path());
        for (k, v) in [(b"r1", b"1"), (b"r2", b"2"), (b"r3", b"3")] {
            assert_eq!(get(&s, k), Some(bytes(v)), "after the restart");
        }
        s.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reopening_a_cleanly_closed_store_writes_nothing() {
        let d = tempfile::tempdir().expect("tmp");
        let s = open(d.path());
        s.write(|tx| tx.put(Table::Inodes, b"a", b"1"))
            .await
            .expect("put");
        s.close().await;
        drop(s);
        let journal_before = std::fs::metadata(d.path().join(JOURNAL_FILE)).expect("stat");
        let s = open(d.path());
        let journal_after = std::fs::metadata(d.path().join(JOURNAL_FILE)).expect("stat");
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            (journal_before.mtime(), journal_before.mtime_nsec()),
            (journal_after.mtime(), journal_after.mtime_nsec()),
            "an empty journal was truncated again"
        );
        assert_eq!(s.shared.stats.checkpoints.load(Ordering::Relaxed), 0);
        s.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_removed_store_acknowledges_no_sync_and_commits_nothing_more() {
        let d = tempfile::tempdir().expect("tmp");
        let target = d.path().join("mdt0");
        std::fs::create_dir(&target).expect("mkdir");
        let health = Health::open("test-MDT0000", &target).expect("health");
        let s = MdStore::open(&store_dir(&target), cfg(), health.clone()).expect("open");
        s.write_sync(|tx| tx.put(Table::Inodes, b"a", b"1"))
            .await
            .expect("put");
        std::fs::remove_dir_all(&target).expect("rm -rf");
        // The journal file is still open and syncs, but it is no longer the target's.
        let r = s.write_sync(|tx| tx.put(Table::Inodes, b"b", b"2")).await;
        assert_eq!(r, Err(Errno::EIO));
        assert!(health.is_failed());
        let r = s.write(|tx| tx.put(Table::Inodes, b"c", b"3")).await;
        assert_eq!(r, Err(Errno::EIO));
        assert!(!target.exists(), "the target directory was recreated");
        s.close().await;
        assert!(!target.exists(), "closing recreated the target directory");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn checkpoint_empties_the_journal() {
        let d = tempfile::tempdir().expect("tmp");
        let s = open(d.path());
        s.write(|tx| tx.put(Table::Inodes, b"a", b"1"))
            .await
            .expect("put");
        // The records in the journal (its file keeps its blocks, written ahead).
        let jl = || {
            crate::journal::read_records(&d.path().join("journal"))
                .expect("journal")
                .len()
        };
        assert!(jl() > 0);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(jl(), 0, "idle checkpoint did not run");
        s.close().await;
    }
}
