//! Replay recovery of the OST (Lustre's ofd over `tgt_lastrcvd.c`): a write a client saw
//! answered survives a power cut of the OST as long as that client lives.
//!
//! - **Transnos.** A write, punch or fallocate a client sends tracked
//!   ([`Request::Tracked`](nacre_rpc::msg::Request::Tracked)) is given a transno once it is
//!   done, and answered with it and `last_committed`. The client keeps it, with its data,
//!   until a later answer's `last_committed` covers it.
//! - **Commits.** Every [`COMMIT_INTERVAL`] (ldiskfs's journal commit), when a client asks
//!   (its kept data reached its bound, or it unmounts) and when the OST stops: one
//!   `syncfs` of the store, then `last_committed` (the file `last_rcvd/LAST_COMMITTED`)
//!   moves to the highest transno handed out before the sync began. A transno is handed
//!   out only after its change reached the store, so the sync covers it.
//! - **Records.** A client is recorded (`last_rcvd/<uuid>`, made durably) before its first
//!   tracked change after a commit is answered, and its record goes once a commit covers
//!   everything it was answered. So a restart waits only for the clients that may have
//!   something to replay, and a clean stop (which commits) waits for none. (Lustre keeps a
//!   record per connected client and waits for all of them.)
//! - **Recovery.** After a restart the recorded clients reconnect and replay within the
//!   window ([`nacre_rpc::target::Recovery`], shared with the MDTs), in transno order, before
//!   anything else runs; recovery ends with a commit.

use nacre_core::Errno;
use nacre_osd::ObjStore;
use nacre_rpc::msg::ClientUuid;
use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Before a commit's sync, how far back its start is put (the object store's rule).
pub use nacre_osd::objstore::TORN_MARGIN;
/// For a `LAST_COMMITTED` written before it kept its sync's start: how long before the
/// file's own mtime the sync may have begun.
const OLD_COMMIT_SYNC_MAX: Duration = Duration::from_secs(60);

/// How often the OST commits on its own by default (ldiskfs's journal commit interval,
/// its `commit=` mount option); `obdfilter.*.commit_interval`.
pub const COMMIT_INTERVAL: Duration = Duration::from_secs(5);
/// The longest `commit_interval`, in seconds: what clients keep for replay stays bounded
/// by their own limit meanwhile, and a commit still comes when they ask.
pub const COMMIT_INTERVAL_MAX_SECS: u64 = 3600;
/// The directory of the OST's recovery records, in its target directory.
pub const LAST_RCVD_DIR: &str = "last_rcvd";
/// The file holding `last_committed` (8 bytes, little-endian), then when that commit's
/// sync began (nanoseconds since the epoch, 8 bytes little-endian), in [`LAST_RCVD_DIR`].
const LAST_COMMITTED: &str = "LAST_COMMITTED";

/// One client's tracked changes since the last commit that covered all of them.
#[derive(Default)]
struct Active {
    /// Its record is on disk.
    recorded: bool,
    /// Changes running now (no transno yet): its record must stay.
    running: u32,
    /// The highest transno it was given.
    highest: u64,
}

/// The OST's transnos, commits and client records.
pub struct Transactions {
    dir: PathBuf,
    /// The next transno to hand out.
    next: AtomicU64,
    last_committed: AtomicU64,
    /// See [`Transactions::synced_from`].
    synced_from: SystemTime,
    /// One commit at a time.
    committing: tokio::sync::Mutex<()>,
    /// Seconds between the OST's own commits.
    interval_secs: AtomicU64,
    clients: Mutex<HashMap<ClientUuid, Active>>,
}

fn record_name(c: ClientUuid) -> String {
    format!("{c:016x}")
}

fn sync_dir(dir: &Path) -> Result<(), Errno> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(Errno::from)
}

impl Transactions {
    /// Loads `last_committed` and the recorded clients from `target_dir` (made when
    /// missing). The clients are those a restart must wait for.
    pub fn load(target_dir: &Path) -> std::io::Result<(Transactions, BTreeSet<ClientUuid>)> {
        let dir = target_dir.join(LAST_RCVD_DIR);
        match nacre_osd::private_dir_builder().create(&dir) {
            Ok(()) => {
                File::open(target_dir)?.sync_all()?;
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let (last_committed, synced_from) = match std::fs::read(dir.join(LAST_COMMITTED)) {
            Ok(b) => {
                let n: [u8; 8] = b.get(..8).and_then(|b| b.try_into().ok()).ok_or_else(|| {
                    std::io::Error::new(
                        ErrorKind::InvalidData,
                        format!("{}: not 8 bytes", dir.join(LAST_COMMITTED).display()),
                    )
                })?;
                let from = match b.get(8..16).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
                    Some(t) => UNIX_EPOCH + Duration::from_nanos(u64::from_le_bytes(t)),
                    // Written before it kept the time: its own mtime, less a long sync.
                    None => std::fs::metadata(dir.join(LAST_COMMITTED))?
                        .modified()?
                        .checked_sub(OLD_COMMIT_SYNC_MAX)
                        .unwrap_or(UNIX_EPOCH),
                };
                (u64::from_le_bytes(n), from)
            }
            Err(e) if e.kind() == ErrorKind::NotFound => (0, UNIX_EPOCH),
            Err(e) => return Err(e),
        };
        let mut recorded = BTreeSet::new();
        let mut clients = HashMap::new();
        for e in std::fs::read_dir(&dir)? {
            let e = e?;
            let name = e.file_name();
            let Some(c) = name
                .to_str()
                .filter(|n| n.len() == 16)
                .and_then(|n| u64::from_str_radix(n, 16).ok())
            else {
                continue;
            };
            recorded.insert(c);
            clients.insert(
                c,
                Active {
                    recorded: true,
                    ..Active::default()
                },
            );
        }
        Ok((
            Transactions {
                dir,
                next: AtomicU64::new(last_committed + 1),
                last_committed: AtomicU64::new(last_committed),
                synced_from,
                committing: tokio::sync::Mutex::new(()),
                interval_secs: AtomicU64::new(COMMIT_INTERVAL.as_secs()),
                clients: Mutex::new(clients),
            },
            recorded,
        ))
    }

    /// When the sync of the last commit before this start began (less [`TORN_MARGIN`]):
    /// data changed later may be torn by the crash, if there was one.
    pub fn synced_from(&self) -> SystemTime {
        self.synced_from
    }

    pub fn last_committed(&self) -> u64 {
        self.last_committed.load(Ordering::Acquire)
    }

    /// How long the OST waits between its own commits.
    pub fn commit_interval(&self) -> Duration {
        Duration::from_secs(self.interval_secs.load(Ordering::Relaxed))
    }

    /// Sets `commit_interval` from its parameter value: seconds, 1 to
    /// [`COMMIT_INTERVAL_MAX_SECS`].
    pub fn set_commit_interval(&self, value: &str) -> Result<(), String> {
        let v: u64 = value
            .trim()
            .parse()
            .ok()
            .filter(|v| (1..=COMMIT_INTERVAL_MAX_SECS).contains(v))
            .ok_or_else(|| {
                format!(
                    "commit_interval: '{}' is not a number of seconds from 1 to {COMMIT_INTERVAL_MAX_SECS}",
                    value.trim()
                )
            })?;
        self.interval_secs.store(v, Ordering::Relaxed);
        Ok(())
    }

    /// The highest transno handed out.
    pub fn last_transno(&self) -> u64 {
        self.next.load(Ordering::SeqCst) - 1
    }

    /// A tracked change of `client` is about to run: true when the client has no record
    /// yet, which [`Transactions::record`] must then make before the change is answered.
    /// Pair with [`Transactions::done`].
    pub fn start(&self, client: ClientUuid) -> bool {
        let mut m = self.clients.lock();
        let a = m.entry(client).or_default();
        a.running += 1;
        !a.recorded
    }

    /// Makes `client`'s record, durably (blocking: a file and a directory sync).
    pub fn record(&self, client: ClientUuid) -> Result<(), Errno> {
        nacre_osd::private_file()
            .write(true)
            .create(true)
            .truncate(true)
            .open(self.dir.join(record_name(client)))
            .map_err(Errno::from)
            .and_then(|_| sync_dir(&self.dir))?;
        if let Some(a) = self.clients.lock().get_mut(&client) {
            a.recorded = true;
        }
        Ok(())
    }

    /// The change [`Transactions::start`] began ended: its transno when it changed
    /// something (handed out now, after the change).
    pub fn done(&self, client: ClientUuid, changed: bool) -> u64 {
        let mut m = self.clients.lock();
        let t = if changed {
            self.next.fetch_add(1, Ordering::SeqCst)
        } else {
            0
        };
        if let Some(a) = m.get_mut(&client) {
            a.running = a.running.saturating_sub(1);
            a.highest = a.highest.max(t);
        }
        t
    }

    /// Transnos from now on are above `transno` (after a recovery replayed up to it).
    pub fn advance(&self, transno: u64) {
        self.next.fetch_max(transno + 1, Ordering::SeqCst);
    }

    /// Commits everything answered so far: the store synced, then `last_committed`
    /// moved and kept. Returns it. Records of clients it covers wholly are removed.
    pub async fn commit(self: &Arc<Self>, store: &Arc<ObjStore>) -> Result<u64, Errno> {
        self.commit_as(store, false).await
    }

    /// The commit of a clean stop: made even with nothing new to commit, and it puts its
    /// sync's time after the sync, with no margin (nothing changes after it), so the next
    /// start takes no object as torn.
    pub async fn commit_at_stop(self: &Arc<Self>, store: &Arc<ObjStore>) -> Result<u64, Errno> {
        self.commit_as(store, true).await
    }

    async fn commit_as(self: &Arc<Self>, store: &Arc<ObjStore>, stop: bool) -> Result<u64, Errno> {
        let _one = self.committing.lock().await;
        let me = self.clone();
        let store = store.clone();
        tokio::task::spawn_blocking(move || me.commit_blocking(&store, stop))
            .await
            .map_err(|_| Errno::EIO)?
    }

    fn commit_blocking(&self, store: &ObjStore, stop: bool) -> Result<u64, Errno> {
        let upto = self.last_transno().max(self.last_committed());
        if upto > self.last_committed() || stop {
            let ns = |t: SystemTime| {
                t.duration_since(UNIX_EPOCH)
                    .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            };
            // Data changed before this (less a margin for writes under way) is in the
            // sync: after a crash, only later changes may be torn.
            let before = ns(SystemTime::now()
                .checked_sub(TORN_MARGIN)
                .unwrap_or(UNIX_EPOCH));
            store.sync_all()?;
            let from = if stop { ns(SystemTime::now()) } else { before };
            let path = self.dir.join(LAST_COMMITTED);
            let f = nacre_osd::private_file()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(Errno::from)?;
            let mut rec = [0u8; 16];
            rec[..8].copy_from_slice(&upto.to_le_bytes());
            rec[8..].copy_from_slice(&from.to_le_bytes());
            f.write_all_at(&rec, 0)
                .and_then(|()| f.sync_all())
                .map_err(Errno::from)?;
            // The file's name, the first time.
            sync_dir(&self.dir)?;
            self.last_committed.fetch_max(upto, Ordering::AcqRel);
        }
        self.prune(self.last_committed());
        Ok(self.last_committed())
    }

    /// Removes the records of clients with nothing running and nothing above `upto`
    /// (under the lock, so a change starting now makes its record after this). The
    /// removal need not be durable: a record a crash brings back costs a restart a wait
    /// for a client with nothing to replay.
    fn prune(&self, upto: u64) {
        let mut m = self.clients.lock();
        let gone: Vec<ClientUuid> = m
            .iter()
            .filter(|(_, a)| a.running == 0 && a.highest <= upto)
            .map(|(c, _)| *c)
            .collect();
        for c in gone {
            m.remove(&c);
            match std::fs::remove_file(self.dir.join(record_name(c))) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(target: "ost", "cannot remove the record of client {c:016x}: {e}; a restart will wait for it")
                }
            }
        }
    }

    /// Clients recorded now (for `recovery_status` and tests).
    pub fn recorded(&self) -> usize {
        self.clients.lock().values().filter(|a| a.recorded).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &Path) -> Arc<ObjStore> {
        let health = nacre_osd::Health::open("t-OST0000", dir).expect("health");
        Arc::new(ObjStore::open(dir, nacre_osd::ObjStoreConfig::default(), health).expect("store"))
    }

    /// A client is recorded before its first change is answered and forgotten once a
    /// commit covers it; `last_committed` and the records outlive a restart.
    #[tokio::test]
    async fn records_last_while_changes_are_uncommitted() {
        let d = tempfile::tempdir().expect("tmp");
        let s = store(d.path());
        let (t, recorded) = Transactions::load(d.path()).expect("load");
        let t = Arc::new(t);
        assert!(recorded.is_empty());
        let start = |c| {
            if t.start(c) {
                t.record(c).expect("record");
            }
        };
        start(7);
        let a = t.done(7, true);
        assert!(!t.start(7), "recorded already");
        let b = t.done(7, true);
        assert_eq!((a, b), (1, 2));
        start(9);
        assert_eq!(t.done(9, false), 0, "no change, no transno");
        assert_eq!(t.recorded(), 2);
        // A restart now waits for both (9 had nothing, but its record was made first).
        let (_, recorded) = Transactions::load(d.path()).expect("reload");
        assert_eq!(recorded, [7, 9].into_iter().collect());
        // 7 has a change running through the commit: its record stays.
        start(7);
        assert_eq!(t.commit(&s).await.expect("commit"), 2);
        assert_eq!(t.last_committed(), 2);
        let (_, recorded) = Transactions::load(d.path()).expect("reload");
        assert_eq!(recorded, [7].into_iter().collect());
        let c = t.done(7, true);
        assert_eq!(c, 3);
        assert_eq!(t.commit(&s).await.expect("commit"), 3);
        let (t2, recorded) = Transactions::load(d.path()).expect("reload");
        assert!(recorded.is_empty(), "a clean stop waits for nobody");
        assert_eq!(t2.last_committed(), 3);
        t2.start(5);
        assert_eq!(t2.done(5, true), 4, "numbers go on past last_committed");
    }

    /// A commit keeps when its sync began (less the margin), for the torn window of the
    /// next start, and a clean stop when it ended; a file from before it kept that reads
    /// with its own mtime instead, and no file at all means everything before the start
    /// may be torn.
    #[tokio::test]
    async fn a_commit_keeps_when_its_sync_began() {
        let d = tempfile::tempdir().expect("tmp");
        let s = store(d.path());
        let (t, _) = Transactions::load(d.path()).expect("load");
        assert_eq!(t.synced_from(), UNIX_EPOCH);
        let t = Arc::new(t);
        t.start(7);
        t.done(7, true);
        let before = SystemTime::now();
        t.commit(&s).await.expect("commit");
        let after = SystemTime::now();
        let (t2, _) = Transactions::load(d.path()).expect("reload");
        let from = t2.synced_from();
        assert!(
            from >= before - TORN_MARGIN && from <= after - TORN_MARGIN,
            "{from:?} not within the commit less its margin"
        );
        // A clean stop, with nothing new: its time, with no margin, so nothing written
        // before it counts as torn at the next start.
        let stopping = SystemTime::now();
        assert_eq!(t.commit_at_stop(&s).await.expect("stop"), 1);
        let (t2, _) = Transactions::load(d.path()).expect("reload");
        assert!(t2.synced_from() >= stopping, "a clean stop keeps a margin");
        assert_eq!(t2.last_committed(), 1);
        let path = d.path().join(LAST_RCVD_DIR).join(LAST_COMMITTED);
        std::fs::write(&path, 1u64.to_le_bytes()).expect("old format");
        let mtime = std::fs::metadata(&path)
            .expect("stat")
            .modified()
            .expect("mtime");
        let (t3, _) = Transactions::load(d.path()).expect("reload");
        assert_eq!(t3.last_committed(), 1);
        assert_eq!(t3.synced_from(), mtime - OLD_COMMIT_SYNC_MAX);
    }
}
