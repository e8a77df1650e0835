//! The candidate stores behind one small interface: byte tables, one write transaction per
//! batch (committed without fsync unless it is a checkpoint), read transactions for readers.

use anyhow::{Context, Result, anyhow, bail};
use std::cell::OnceCell;
use std::fmt;
use std::path::Path;

/// The MDT tables the workload touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    Inodes = 0,
    Dirents = 1,
    Meta = 2,
}

const TABLES: [(Table, &str); 3] = [
    (Table::Inodes, "inodes"),
    (Table::Dirents, "dirents"),
    (Table::Meta, "meta"),
];

/// Which store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Redb,
    Fjall,
    Lmdb,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Redb, Kind::Fjall, Kind::Lmdb];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Redb => "redb",
            Kind::Fjall => "fjall",
            Kind::Lmdb => "lmdb",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// A store with its settings: `redb`, `redb:1024` for a 1024 MiB cache, `lmdb` (MDB_NOSYNC),
/// `lmdb:nometasync` (MDB_NOMETASYNC: one fdatasync per commit, crash-consistent).
#[derive(Clone, Debug)]
pub struct Candidate {
    pub kind: Kind,
    pub cache_bytes: usize,
    /// LMDB only: sync data (not the meta page) at every commit instead of never.
    pub lmdb_nometasync: bool,
    pub label: String,
}

impl Candidate {
    pub fn parse(spec: &str, default_cache_bytes: usize) -> Result<Candidate> {
        let (name, option) = match spec.split_once(':') {
            Some((n, o)) => (n, Some(o)),
            None => (spec, None),
        };
        let kind = Kind::parse(name).with_context(|| format!("unknown store {name}"))?;
        let mut c = Candidate {
            kind,
            cache_bytes: default_cache_bytes,
            lmdb_nometasync: false,
            label: spec.to_string(),
        };
        match (kind, option) {
            (_, None) => {}
            (Kind::Lmdb, Some("nometasync")) => c.lmdb_nometasync = true,
            (Kind::Lmdb, Some(o)) => bail!("{spec}: lmdb takes only :nometasync, not :{o}"),
            (_, Some(o)) => {
                let mib: usize = o
                    .parse()
                    .with_context(|| format!("{spec}: cache size is not a number of MiB"))?;
                c.cache_bytes = mib << 20;
            }
        }
        Ok(c)
    }

    /// How the store is configured, for the report.
    pub fn describe(&self) -> String {
        let mib = self.cache_bytes >> 20;
        let what = match self.kind {
            Kind::Redb => format!(
                "redb {}, page cache {mib} MiB; batches Durability::None, \
                 checkpoints Durability::Immediate + quick_repair (as mdstore.rs)",
                version::REDB
            ),
            Kind::Fjall => format!(
                "fjall {}, SingleWriterTxDatabase, block cache {mib} MiB, default keyspace \
                 options (LZ4); batches PersistMode::Buffer, checkpoints PersistMode::SyncAll",
                version::FJALL
            ),
            Kind::Lmdb => format!(
                "LMDB via heed {}, {}, no cache of its own (mmap, OS page cache); \
                 checkpoints commit then mdb_env_sync(force)",
                version::HEED,
                if self.lmdb_nometasync {
                    "MDB_NOMETASYNC (fdatasync of data at every commit)"
                } else {
                    "MDB_NOSYNC (no fsync at commit)"
                }
            ),
        };
        format!("{}: {what}", self.label)
    }

    /// Opens (or creates) the store in `dir`.
    pub fn open(&self, dir: &Path) -> Result<Box<dyn Store>> {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        let store: Box<dyn Store> = match self.kind {
            Kind::Redb => Box::new(RedbStore::open(dir, self.cache_bytes)?),
            Kind::Fjall => Box::new(FjallStore::open(dir, self.cache_bytes)?),
            Kind::Lmdb => Box::new(LmdbStore::open(dir, self.lmdb_nometasync)?),
        };
        Ok(store)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Crate versions, kept in step with Cargo.lock by hand.
pub mod version {
    pub const REDB: &str = "4.5.0";
    pub const FJALL: &str = "3.1.13";
    pub const HEED: &str = "0.23.1";
}

/// One write transaction.
pub trait WriteTx {
    /// Copies the value of `key` into `out`; false when absent.
    fn get(&mut self, t: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool>;
    fn put(&mut self, t: Table, key: &[u8], value: &[u8]) -> Result<()>;
    fn delete(&mut self, t: Table, key: &[u8]) -> Result<()>;
}

/// One read transaction (a consistent view).
pub trait ReadTx {
    /// Copies the value of `key` into `out`; false when absent.
    fn get(&self, t: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool>;
    /// Visits `start..end` in key order; returns the number of entries visited.
    fn scan(
        &self,
        t: Table,
        start: &[u8],
        end: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64>;
}

pub type WriteFn<'a> = &'a mut dyn FnMut(&mut dyn WriteTx) -> Result<()>;
pub type ReadFn<'a> = &'a mut dyn FnMut(&dyn ReadTx) -> Result<()>;

/// An open store.
pub trait Store: Send + Sync {
    /// Runs `f` in one write transaction and commits it. A `durable` commit is the store's
    /// checkpoint (fsync'ed); any other commit is not fsync'ed.
    fn write(&self, durable: bool, f: WriteFn<'_>) -> Result<()>;
    /// Runs `f` in one read transaction.
    fn read(&self, f: ReadFn<'_>) -> Result<()>;
    /// Closes the store and waits until its files are released.
    fn close(self: Box<Self>) -> Result<()>;
}

// ---------------------------------------------------------------------------------------
// redb

type RedbDef = redb::TableDefinition<'static, &'static [u8], &'static [u8]>;

fn redb_def(t: Table) -> RedbDef {
    redb::TableDefinition::new(TABLES[t as usize].1)
}

struct RedbStore {
    db: redb::Database,
}

impl RedbStore {
    fn open(dir: &Path, cache_bytes: usize) -> Result<RedbStore> {
        let db = redb::Builder::new()
            .set_cache_size(cache_bytes)
            .create(dir.join("mdt.redb"))
            .context("open redb")?;
        let wtxn = db.begin_write()?;
        for (t, _) in TABLES {
            wtxn.open_table(redb_def(t))?;
        }
        wtxn.commit()?;
        Ok(RedbStore { db })
    }
}

struct RedbWrite<'a> {
    tables: Vec<redb::Table<'a, &'static [u8], &'static [u8]>>,
}

impl WriteTx for RedbWrite<'_> {
    fn get(&mut self, t: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        use redb::ReadableTable;
        match self.tables[t as usize].get(key)? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(v.value());
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&mut self, t: Table, key: &[u8], value: &[u8]) -> Result<()> {
        self.tables[t as usize].insert(key, value)?;
        Ok(())
    }

    fn delete(&mut self, t: Table, key: &[u8]) -> Result<()> {
        self.tables[t as usize].remove(key)?;
        Ok(())
    }
}

struct RedbRead {
    txn: redb::ReadTransaction,
    tables: [OnceCell<redb::ReadOnlyTable<&'static [u8], &'static [u8]>>; 3],
}

impl RedbRead {
    fn table(&self, t: Table) -> Result<&redb::ReadOnlyTable<&'static [u8], &'static [u8]>> {
        let cell = &self.tables[t as usize];
        if let Some(tab) = cell.get() {
            return Ok(tab);
        }
        let tab = self.txn.open_table(redb_def(t))?;
        Ok(cell.get_or_init(|| tab))
    }
}

impl ReadTx for RedbRead {
    fn get(&self, t: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        match self.table(t)?.get(key)? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(v.value());
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn scan(
        &self,
        t: Table,
        start: &[u8],
        end: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        let mut n = 0;
        for row in self.table(t)?.range::<&[u8]>(start..end)? {
            let (k, v) = row?;
            visit(k.value(), v.value());
            n += 1;
        }
        Ok(n)
    }
}

impl Store for RedbStore {
    fn write(&self, durable: bool, f: WriteFn<'_>) -> Result<()> {
        let mut wtxn = self.db.begin_write()?;
        if durable {
            wtxn.set_durability(redb::Durability::Immediate)?;
            wtxn.set_quick_repair(true);
        } else {
            wtxn.set_durability(redb::Durability::None)?;
        }
        {
            let mut tx = RedbWrite {
                tables: Vec::with_capacity(TABLES.len()),
            };
            for (t, _) in TABLES {
                tx.tables.push(wtxn.open_table(redb_def(t))?);
            }
            f(&mut tx)?;
        }
        wtxn.commit()?;
        Ok(())
    }

    fn read(&self, f: ReadFn<'_>) -> Result<()> {
        use redb::ReadableDatabase;
        let rtxn = RedbRead {
            txn: self.db.begin_read()?,
            tables: Default::default(),
        };
        f(&rtxn)
    }

    fn close(self: Box<Self>) -> Result<()> {
        drop(self);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// fjall

struct FjallStore {
    db: fjall::SingleWriterTxDatabase,
    keyspaces: Vec<fjall::SingleWriterTxKeyspace>,
}

impl FjallStore {
    fn open(dir: &Path, cache_bytes: usize) -> Result<FjallStore> {
        let db = fjall::SingleWriterTxDatabase::builder(dir)
            .cache_size(cache_bytes as u64)
            .open()
            .context("open fjall")?;
        let mut keyspaces = Vec::with_capacity(TABLES.len());
        for (_, name) in TABLES {
            keyspaces.push(db.keyspace(name, fjall::KeyspaceCreateOptions::default)?);
        }
        Ok(FjallStore { db, keyspaces })
    }
}

struct FjallWrite<'a, 'tx> {
    tx: &'a mut fjall::SingleWriterWriteTx<'tx>,
    keyspaces: &'a [fjall::SingleWriterTxKeyspace],
}

impl WriteTx for FjallWrite<'_, '_> {
    fn get(&mut self, t: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        use fjall::Readable;
        match self.tx.get(self.keyspaces[t as usize].inner(), key)? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(&v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&mut self, t: Table, key: &[u8], value: &[u8]) -> Result<()> {
        self.tx.insert(&self.keyspaces[t as usize], key, value);
        Ok(())
    }

    fn delete(&mut self, t: Table, key: &[u8]) -> Result<()> {
        self.tx.remove(&self.keyspaces[t as usize], key);
        Ok(())
    }
}

struct FjallRead<'a> {
    snapshot: fjall::Snapshot,
    keyspaces: &'a [fjall::SingleWriterTxKeyspace],
}

impl ReadTx for FjallRead<'_> {
    fn get(&self, t: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        use fjall::Readable;
        match self.snapshot.get(self.keyspaces[t as usize].inner(), key)? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(&v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn scan(
        &self,
        t: Table,
        start: &[u8],
        end: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        use fjall::Readable;
        let mut n = 0;
        for guard in self
            .snapshot
            .range(self.keyspaces[t as usize].inner(), start..end)
        {
            let (k, v) = guard.into_inner()?;
            visit(&k, &v);
            n += 1;
        }
        Ok(n)
    }
}

impl Store for FjallStore {
    fn write(&self, durable: bool, f: WriteFn<'_>) -> Result<()> {
        let mode = if durable {
            fjall::PersistMode::SyncAll
        } else {
            fjall::PersistMode::Buffer
        };
        let mut tx = self.db.write_tx().durability(Some(mode));
        f(&mut FjallWrite {
            tx: &mut tx,
            keyspaces: &self.keyspaces,
        })?;
        tx.commit()?;
        Ok(())
    }

    fn read(&self, f: ReadFn<'_>) -> Result<()> {
        f(&FjallRead {
            snapshot: self.db.read_tx(),
            keyspaces: &self.keyspaces,
        })
    }

    fn close(self: Box<Self>) -> Result<()> {
        // Dropping the last handle stops the background workers and syncs the journal.
        drop(self);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// LMDB (heed)

type LmdbDb = heed::Database<'static, heed::types::Bytes, heed::types::Bytes>;

struct LmdbStore {
    env: heed::Env<heed::WithoutTls>,
    dbs: [LmdbDb; 3],
}

impl LmdbStore {
    /// Address space reserved for the map; the file only grows as pages are used.
    const MAP_SIZE: usize = 64 << 30;

    fn open(dir: &Path, nometasync: bool) -> Result<LmdbStore> {
        let mut opts = heed::EnvOpenOptions::new().read_txn_without_tls();
        opts.map_size(Self::MAP_SIZE)
            .max_dbs(TABLES.len() as u32)
            .max_readers(126);
        let flags = if nometasync {
            heed::EnvFlags::NO_META_SYNC
        } else {
            heed::EnvFlags::NO_SYNC
        };
        // SAFETY: the directory is ours alone and opened once at a time; the flags only
        // relax fsync at commit (checkpoints sync explicitly).
        let env = unsafe {
            opts.flags(flags);
            opts.open(dir).context("open LMDB")?
        };
        let wtxn = env.write_txn()?;
        let dbs = env
            .create_databases_and_commit(wtxn, |opener, wtxn| -> heed::Result<_> {
                let mut create =
                    |t: Table| opener.create_database(wtxn, Some(TABLES[t as usize].1));
                let dbs = [
                    create(Table::Inodes)?,
                    create(Table::Dirents)?,
                    create(Table::Meta)?,
                ];
                Ok(heed::CommitOrAbort::<_, ()>::Commit(dbs))
            })?
            .unwrap_commit();
        Ok(LmdbStore { env, dbs })
    }
}

struct LmdbWrite<'a, 'e> {
    txn: &'a mut heed::RwTxn<'e>,
    dbs: &'a [LmdbDb],
}

impl WriteTx for LmdbWrite<'_, '_> {
    fn get(&mut self, t: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        match self.dbs[t as usize].get(self.txn, key)? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&mut self, t: Table, key: &[u8], value: &[u8]) -> Result<()> {
        self.dbs[t as usize].put(self.txn, key, value)?;
        Ok(())
    }

    fn delete(&mut self, t: Table, key: &[u8]) -> Result<()> {
        self.dbs[t as usize].delete(self.txn, key)?;
        Ok(())
    }
}

struct LmdbRead<'a, 'e> {
    txn: heed::RoTxn<'e, heed::WithoutTls>,
    dbs: &'a [LmdbDb],
}

impl ReadTx for LmdbRead<'_, '_> {
    fn get(&self, t: Table, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        match self.dbs[t as usize].get(&self.txn, key)? {
            Some(v) => {
                out.clear();
                out.extend_from_slice(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn scan(
        &self,
        t: Table,
        start: &[u8],
        end: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        let mut n = 0;
        use std::ops::Bound;
        let range = (Bound::Included(start), Bound::Excluded(end));
        for row in self.dbs[t as usize].range(&self.txn, &range)? {
            let (k, v) = row?;
            visit(k, v);
            n += 1;
        }
        Ok(n)
    }
}

impl Store for LmdbStore {
    fn write(&self, durable: bool, f: WriteFn<'_>) -> Result<()> {
        let mut txn = self.env.write_txn()?;
        f(&mut LmdbWrite {
            txn: &mut txn,
            dbs: &self.dbs,
        })?;
        txn.commit()?;
        if durable {
            self.env.force_sync()?;
        }
        Ok(())
    }

    fn read(&self, f: ReadFn<'_>) -> Result<()> {
        f(&LmdbRead {
            txn: self.env.read_txn()?,
            dbs: &self.dbs,
        })
    }

    fn close(self: Box<Self>) -> Result<()> {
        let LmdbStore { env, .. } = *self;
        let closing = env.prepare_for_closing();
        if !closing.wait_timeout(std::time::Duration::from_secs(30)) {
            return Err(anyhow!("LMDB environment did not close"));
        }
        Ok(())
    }
}
