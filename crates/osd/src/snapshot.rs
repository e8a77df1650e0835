//! A stopped MDT store, read without writing to it (what `nacre check` reads).
//!
//! Opening a store for service writes: redb marks its file in use, replays the journal into
//! it and records its allocator state at close. A checker must not need any of that (a full
//! disk is a reason to check, not a reason to be unable to), so it reads the store as it is:
//! redb read-only when the file was closed cleanly and the journal holds nothing past the
//! checkpoint; otherwise redb's repair and the journal replay run against a copy-on-write
//! view of the file whose changed blocks stay in memory.

use crate::journal::{self, Record};
use crate::mdstore::{
    DB_FILE, JOURNAL_FILE, ReadView, StoreError, Table, apply_records, next_crash_gen,
    read_checkpoint,
};
use nacre_core::Errno;
use parking_lot::Mutex;
use redb::{DatabaseError, ReadableDatabase, StorageBackend};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Block size of the in-memory copy-on-write view (redb's page size).
const COW_BLOCK: u64 = 4096;
/// Changed bytes the in-memory view may hold. A replay changes about as much as the journal
/// holds (a checkpoint is due at 64 MiB, `MdStoreConfig::checkpoint_bytes`) and a repair
/// rewrites redb's allocator state (a few pages per GiB of store); a gibibyte covers both
/// with room to spare and stops a store damaged past that from taking the checker's memory.
pub const SNAPSHOT_MAX_CHANGED: u64 = 1 << 30;

/// A read-only view of a stopped store; see the module documentation.
pub struct StoreSnapshot {
    db: Db,
    /// The crash generation the store's next open will have.
    crash_gen: u64,
}

enum Db {
    /// Closed cleanly, with no journal records past its checkpoint.
    Clean(redb::ReadOnlyDatabase),
    /// Repaired and replayed in memory.
    Replayed(redb::Database),
}

impl StoreSnapshot {
    /// Opens the store in `dir` (see [`crate::mdstore::store_dir`]) for reading.
    pub fn open(dir: &Path) -> Result<StoreSnapshot, StoreError> {
        let open_err = |reason: String| StoreError::Open {
            path: dir.display().to_string(),
            reason,
        };
        let db_path = dir.join(DB_FILE);
        if !db_path.exists() {
            return Err(open_err(
                "there is no store yet (the target never started)".to_string(),
            ));
        }
        let journal_path = dir.join(JOURNAL_FILE);
        let records = journal::read_records(&journal_path).map_err(|e| StoreError::Replay {
            path: journal_path.display().to_string(),
            reason: e.to_string(),
        })?;
        match crate::mdstore::waiting_for_the_lock(|| redb::Builder::new().open_read_only(&db_path))
        {
            Ok(db) => {
                let checkpoint = {
                    let txn = db.begin_read().map_err(|e| open_err(e.to_string()))?;
                    match txn.open_table(Table::Meta.def()) {
                        Ok(meta) => read_checkpoint(&meta).map_err(open_err)?,
                        Err(redb::TableError::TableDoesNotExist(_)) => 0,
                        Err(e) => return Err(open_err(e.to_string())),
                    }
                };
                if records.iter().all(|(transno, _)| *transno <= checkpoint) {
                    return StoreSnapshot::new(Db::Clean(db)).map_err(open_err);
                }
            }
            // Not closed cleanly (a killed server): redb must repair it first.
            Err(DatabaseError::RepairAborted) => {}
            Err(DatabaseError::DatabaseAlreadyOpen) => {
                return Err(open_err(
                    "it is open in a running server (stop the target first)".to_string(),
                ));
            }
            Err(e) => return Err(open_err(e.to_string())),
        }
        let db = replayed(&db_path, records).map_err(open_err)?;
        StoreSnapshot::new(Db::Replayed(db)).map_err(open_err)
    }

    /// The snapshot of `db`, with the crash generation the store's next open will have.
    fn new(db: Db) -> Result<StoreSnapshot, String> {
        let txn = match &db {
            Db::Clean(db) => db.begin_read(),
            Db::Replayed(db) => db.begin_read(),
        }
        .map_err(|e| e.to_string())?;
        let crash_gen = match txn.open_table(Table::Meta.def()) {
            Ok(meta) => next_crash_gen(&meta)?.0,
            Err(redb::TableError::TableDoesNotExist(_)) => 0,
            Err(e) => return Err(e.to_string()),
        };
        drop(txn);
        Ok(StoreSnapshot { db, crash_gen })
    }

    /// Whether the store had to be repaired or replayed (in memory) to be read.
    pub fn replayed(&self) -> bool {
        matches!(self.db, Db::Replayed(_))
    }

    pub fn read(&self) -> Result<ReadView, Errno> {
        let txn = match &self.db {
            Db::Clean(db) => db.begin_read(),
            Db::Replayed(db) => db.begin_read(),
        };
        txn.map(|t| ReadView::new(t, self.crash_gen)).map_err(|e| {
            tracing::error!(target: "osd", "begin read: {e}");
            Errno::EIO
        })
    }
}

/// The store in `db_path` repaired and with `records` replayed, changes held in memory.
fn replayed(db_path: &Path, records: Vec<Record>) -> Result<redb::Database, String> {
    let file = File::open(db_path).map_err(|e| e.to_string())?;
    let backend = CowBackend::new(file, SNAPSHOT_MAX_CHANGED).map_err(|e| e.to_string())?;
    let db = redb::Builder::new()
        .create_with_backend(backend)
        .map_err(|e| e.to_string())?;
    apply_records(&db, records)?;
    Ok(db)
}

/// A file read through, with every write kept in memory by block.
struct CowBackend {
    file: File,
    max_changed: u64,
    state: Mutex<CowState>,
}

struct CowState {
    /// The length redb sees.
    len: u64,
    /// Bytes of the file still visible where no block was written: a shrink hides what
    /// lay past it, even if the view grows again.
    file_len: u64,
    blocks: HashMap<u64, Box<[u8]>>,
}

impl std::fmt::Debug for CowBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.state.lock();
        f.debug_struct("CowBackend")
            .field("len", &st.len)
            .field("changed_blocks", &st.blocks.len())
            .finish()
    }
}

impl CowBackend {
    fn new(file: File, max_changed: u64) -> std::io::Result<CowBackend> {
        let len = file.metadata()?.len();
        Ok(CowBackend {
            file,
            max_changed,
            state: Mutex::new(CowState {
                len,
                file_len: len,
                blocks: HashMap::new(),
            }),
        })
    }

    /// Reads `out.len()` bytes at `offset` from the file as the view shows it: zeros past
    /// its visible length.
    fn read_file(&self, st: &CowState, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        let visible = st.file_len.saturating_sub(offset).min(out.len() as u64) as usize;
        self.file.read_exact_at(&mut out[..visible], offset)?;
        out[visible..].fill(0);
        Ok(())
    }
}

fn out_of_range() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        "access past the end of the store",
    )
}

impl StorageBackend for CowBackend {
    fn len(&self) -> Result<u64, std::io::Error> {
        Ok(self.state.lock().len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        let st = self.state.lock();
        let end = offset
            .checked_add(out.len() as u64)
            .filter(|e| *e <= st.len)
            .ok_or_else(out_of_range)?;
        self.read_file(&st, offset, out)?;
        if st.blocks.is_empty() {
            return Ok(());
        }
        for b in offset / COW_BLOCK..end.div_ceil(COW_BLOCK) {
            let Some(block) = st.blocks.get(&b) else {
                continue;
            };
            let start = (b * COW_BLOCK).max(offset);
            let stop = ((b + 1) * COW_BLOCK).min(end);
            out[(start - offset) as usize..(stop - offset) as usize].copy_from_slice(
                &block[(start - b * COW_BLOCK) as usize..(stop - b * COW_BLOCK) as usize],
            );
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        let mut st = self.state.lock();
        if len < st.len {
            st.file_len = st.file_len.min(len);
            st.blocks.retain(|b, _| b * COW_BLOCK < len);
            // What a shrink cuts from a written block reads as zeros if the view grows again.
            if let Some(block) = st.blocks.get_mut(&(len / COW_BLOCK)) {
                block[(len % COW_BLOCK) as usize..].fill(0);
            }
        }
        st.len = len;
        Ok(())
    }

    fn sync_data(&self) -> Result<(), std::io::Error> {
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        let mut st = self.state.lock();
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|e| *e <= st.len)
            .ok_or_else(out_of_range)?;
        for b in offset / COW_BLOCK..end.div_ceil(COW_BLOCK) {
            if !st.blocks.contains_key(&b) {
                if (st.blocks.len() as u64 + 1) * COW_BLOCK > self.max_changed {
                    return Err(std::io::Error::other(format!(
                        "reading the store in memory would change more than {} MiB of it",
                        self.max_changed >> 20
                    )));
                }
                let mut block = vec![0u8; COW_BLOCK as usize].into_boxed_slice();
                self.read_file(&st, b * COW_BLOCK, &mut block)?;
                st.blocks.insert(b, block);
            }
            let start = (b * COW_BLOCK).max(offset);
            let stop = ((b + 1) * COW_BLOCK).min(end);
            if let Some(block) = st.blocks.get_mut(&b) {
                block[(start - b * COW_BLOCK) as usize..(stop - b * COW_BLOCK) as usize]
                    .copy_from_slice(&data[(start - offset) as usize..(stop - offset) as usize]);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{Journal, Mutation};
    use crate::mdstore::store_dir;
    use crate::{MdStore, MdStoreConfig};

    fn snapshot_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .expect("readdir")
            .map(|e| {
                let e = e.expect("entry");
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).expect("read"),
                )
            })
            .collect();
        v.sort();
        v
    }

    /// A store's lock can outlive its close for a moment (a child forked by another
    /// thread keeps the locked file until it execs): the reader waits for it, but not
    /// for a store that stays open.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lock_let_go_soon_is_waited_for_and_one_held_is_refused() {
        let t = tempfile::tempdir().expect("tmp");
        let d = store_dir(t.path());
        let health = crate::Health::open("fs-MDT0000", t.path()).expect("health");
        let s = MdStore::open(&d, MdStoreConfig::default(), health).expect("open");
        s.write(|tx| tx.put(Table::Inodes, b"kept", b"1"))
            .await
            .expect("put");

        let started = std::time::Instant::now();
        let refused = StoreSnapshot::open(&d)
            .err()
            .expect("an open store is refused");
        assert!(started.elapsed() >= crate::mdstore::STORE_LOCK_WAIT);
        assert!(refused.to_string().contains("running server"), "{refused}");

        // Let go a little later, from another thread, as a forked child's exec would.
        let holder = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime");
            rt.block_on(s.close());
            drop(s);
        });
        let snap = StoreSnapshot::open(&d).expect("the lock was waited for");
        holder.join().expect("holder");
        assert_eq!(
            snap.read()
                .expect("read")
                .get(Table::Inodes, b"kept")
                .expect("get"),
            Some(b"1".to_vec())
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stopped_store_is_read_without_writing_even_after_a_crash() {
        let t = tempfile::tempdir().expect("tmp");
        let d = store_dir(t.path());
        let health = crate::Health::open("fs-MDT0000", t.path()).expect("health");
        let s = MdStore::open(&d, MdStoreConfig::default(), health.clone()).expect("open");
        s.write(|tx| tx.put(Table::Inodes, b"kept", b"1"))
            .await
            .expect("put");
        s.close().await;
        drop(s);
        // Cleanly stopped: read as it is.
        let before = snapshot_files(&d);
        let snap = StoreSnapshot::open(&d).expect("snapshot");
        assert!(!snap.replayed());
        assert_eq!(
            snap.read()
                .expect("read")
                .get(Table::Inodes, b"kept")
                .expect("get"),
            Some(b"1".to_vec())
        );
        drop(snap);
        assert!(snapshot_files(&d) == before, "reading a clean store wrote");

        // What a killed server leaves: redb not closed cleanly, records in the journal
        // (a copy of the files of a store still open, with one more record appended).
        let s = MdStore::open(&d, MdStoreConfig::default(), health).expect("open");
        s.write(|tx| tx.put(Table::Inodes, b"late", b"2"))
            .await
            .expect("put");
        let crashed = t.path().join("crashed");
        std::fs::create_dir(&crashed).expect("mkdir");
        for f in [DB_FILE, JOURNAL_FILE] {
            std::fs::copy(d.join(f), crashed.join(f)).expect("copy");
        }
        s.close().await;
        let d = crashed;
        {
            let mut j = Journal::open(&d.join(JOURNAL_FILE)).expect("journal");
            j.append(
                1_000,
                &[
                    Mutation::Put {
                        table: Table::Dirents as u8,
                        key: b"name".to_vec(),
                        val: b"3".to_vec(),
                    },
                    Mutation::Del {
                        table: Table::Inodes as u8,
                        key: b"kept".to_vec(),
                    },
                ],
            )
            .expect("append");
        }
        let before = snapshot_files(&d);
        let snap = StoreSnapshot::open(&d).expect("snapshot after a crash");
        assert!(snap.replayed());
        let v = snap.read().expect("read");
        assert_eq!(
            v.get(Table::Inodes, b"late").expect("get"),
            Some(b"2".to_vec())
        );
        assert_eq!(
            v.get(Table::Dirents, b"name").expect("get"),
            Some(b"3".to_vec())
        );
        assert_eq!(v.get(Table::Inodes, b"kept").expect("get"), None);
        assert_eq!(v.count(Table::Inodes).expect("count"), 1);
        drop(v);
        drop(snap);
        assert!(
            snapshot_files(&d) == before,
            "reading a crashed store wrote to it"
        );
    }

    #[test]
    fn copy_on_write_view_reads_its_writes_and_keeps_the_file() {
        let t = tempfile::tempdir().expect("tmp");
        let p = t.path().join("f");
        std::fs::write(&p, vec![7u8; 10_000]).expect("write");
        let b = CowBackend::new(File::open(&p).expect("open"), 3 * COW_BLOCK).expect("view");
        b.write(4000, &[1u8; 200])
            .expect("write across a block edge");
        let mut out = vec![0u8; 300];
        b.read(3950, &mut out).expect("read");
        assert!(out[..50].iter().all(|&x| x == 7));
        assert!(out[50..250].iter().all(|&x| x == 1));
        assert!(out[250..].iter().all(|&x| x == 7));
        // A shrink hides the file's bytes past it, also after growing again.
        b.set_len(5000).expect("shrink");
        b.set_len(12_288).expect("grow");
        let mut tail = vec![9u8; 7000];
        b.read(5000, &mut tail).expect("read");
        assert!(tail.iter().all(|&x| x == 0));
        assert!(b.read(12_000, &mut [0u8; 300]).is_err());
        // The bound on changed blocks.
        b.write(8192, &[2u8; 10]).expect("third block");
        b.write(0, &[2u8; 10]).expect("a written block again");
        b.set_len(16_384).expect("grow");
        assert!(
            b.write(12_288, &[2u8; 10]).is_err(),
            "a fourth block is refused"
        );
        assert_eq!(std::fs::read(&p).expect("read"), vec![7u8; 10_000]);
    }
}
