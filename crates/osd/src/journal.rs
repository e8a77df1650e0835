//! The MDT's redo journal: an append-only file of committed change sets.
//!
//! Each record is `[len u32][crc32c u32][transno u64][postcard Vec<Mutation>]`. A record is
//! written with one `write(2)` before the transaction becomes visible, so once any request
//! sees it, it survives `kill -9` of the process (the kernel holds it); `fdatasync` makes it
//! survive power loss too (`sync_journal`, or an explicit sync request). Replay stops at the
//! first torn or corrupt record, which can only be the tail an interrupted write left.
//!
//! The file is written ahead with zeros ([`JOURNAL_RESERVE`] past the last record), and a
//! checkpoint starts the journal over at its beginning rather than cutting the file, as a
//! database's write-ahead log does: a record then lands in blocks that already exist
//! inside the file's size, so `fdatasync` writes the record and nothing else, where an
//! append past the end would also wait for the file system to commit the new size and
//! extents (a journal commit of its own on ext4: ten times the cost on a busy disk). What
//! a checkpoint leaves behind the new records is older than the checkpoint, and transaction
//! numbers only grow, so replay stops at the first record not newer than the one before.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// One blind write to one table: replaying a suffix of the journal over a state that already
/// contains it gives the same state, so replay needs no undo.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mutation {
    Put {
        table: u8,
        key: Vec<u8>,
        val: Vec<u8>,
    },
    Del {
        table: u8,
        key: Vec<u8>,
    },
}

const RECORD_HEADER: usize = 16;

/// One replayed record: its transaction number and changes.
pub type Record = (u64, Vec<Mutation>);
/// A record larger than this is corrupt (no transaction batch writes so much).
pub const MAX_RECORD: u32 = 256 << 20;
/// Blocks kept written (with zeros) past the journal's end, so changes that free space
/// (unlinks) can still be journaled when the disk is full (at ~150 bytes per unlink
/// record, room for tens of thousands between checkpoints), and so a record's sync needs
/// no size change. Reads as zeros, which replay takes as the end.
pub const JOURNAL_RESERVE: u64 = 8 << 20;
/// A journal file grown past this by a burst between checkpoints is cut back to
/// [`JOURNAL_RESERVE`] at the next checkpoint.
pub const JOURNAL_KEEP_MAX: u64 = 4 * JOURNAL_RESERVE;
/// Zeros written at a time.
const ZERO_CHUNK: usize = 1 << 20;

pub struct Journal {
    file: File,
    /// The end of the last record: where the next one goes.
    len: u64,
    /// The file's size: records and the zeros written ahead of them (and, after a
    /// checkpoint, older records past the new ones).
    size: u64,
    /// Bytes past the last record found at open are not all zeros: they are cleared
    /// before the first new record goes in (not at open, which writes nothing, so a
    /// target restarts on a full disk).
    stale_tail: bool,
}

impl Journal {
    pub fn open(path: &Path) -> std::io::Result<Journal> {
        let file = crate::private_file()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let mut data = Vec::new();
        (&file).read_to_end(&mut data)?;
        let (_, len) = parse(&data);
        let size = data.len() as u64;
        // Whatever follows the last intact record (a torn write, older records) is
        // cleared before new records follow it, so no stray record can line up behind
        // them.
        let stale_tail = data[len as usize..].iter().any(|b| *b != 0);
        drop(data);
        let mut j = Journal {
            file,
            len,
            size,
            stale_tail,
        };
        j.reserve();
        Ok(j)
    }

    /// Writes zeros over `[from, to)`.
    fn zero(&mut self, from: u64, to: u64) -> std::io::Result<()> {
        let zeros = vec![0u8; ZERO_CHUNK];
        let mut at = from;
        while at < to {
            let n = (to - at).min(ZERO_CHUNK as u64) as usize;
            self.file.write_all_at(&zeros[..n], at)?;
            at += n as u64;
            self.size = self.size.max(at);
        }
        Ok(())
    }

    /// Keeps [`JOURNAL_RESERVE`] written past the end; where the file system cannot (no
    /// space now), the journal simply grows as it goes. The zeros reach the disk with the
    /// next sync.
    fn reserve(&mut self) {
        let want = self.len + JOURNAL_RESERVE;
        if self.size >= want {
            return;
        }
        if let Err(e) = self.zero(self.size, want) {
            tracing::debug!(target: "osd", "journal reserve: {e}");
        }
    }

    /// Every intact record, in order, and the length of the intact prefix.
    pub fn replay(&mut self) -> std::io::Result<(Vec<Record>, u64)> {
        let mut data = Vec::new();
        self.file.seek(SeekFrom::Start(0))?;
        self.file.read_to_end(&mut data)?;
        Ok(parse(&data))
    }

    /// Cuts the journal to `len` bytes (drops a torn tail or a record that failed to
    /// sync): what followed is cleared, its blocks kept.
    pub fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        let end = self.len.min(self.size);
        if len < end {
            self.zero(len, end)?;
        }
        self.len = len;
        Ok(())
    }

    /// Appends one record with a single write; on failure the journal is cut back so a torn
    /// record cannot hide later ones.
    pub fn append(&mut self, transno: u64, muts: &[Mutation]) -> std::io::Result<()> {
        let rec = encode_record(transno, muts)?;
        if self.stale_tail {
            tracing::debug!(target: "osd", "journal: clearing {} bytes past the last record", self.size - self.len);
            self.zero(self.len, self.size)?;
            self.stale_tail = false;
        }
        if let Err(e) = self.file.write_all_at(&rec, self.len) {
            // Clear what part of it was written.
            let end = self.len + rec.len() as u64;
            let _ = self.zero(self.len, end.min(self.size));
            return Err(e);
        }
        self.len += rec.len() as u64;
        self.size = self.size.max(self.len);
        if self.size - self.len < JOURNAL_RESERVE / 2 {
            self.reserve();
        }
        Ok(())
    }

    /// A second handle on the journal's file, to sync it while records are appended
    /// through this one (the file is never replaced, only rewritten in place).
    pub fn sync_handle(&self) -> std::io::Result<File> {
        self.file.try_clone()
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Starts over after a checkpoint made everything durable in the store: the next
    /// record goes at the beginning. The first record's header is cleared now, so a
    /// journal with no new record reads as empty (and if that clearing is lost in a
    /// crash, what it covered was checkpointed anyway).
    pub fn reset(&mut self) -> std::io::Result<()> {
        if self.size > JOURNAL_KEEP_MAX {
            self.file.set_len(JOURNAL_RESERVE)?;
            self.size = JOURNAL_RESERVE;
        }
        let head = RECORD_HEADER as u64;
        self.zero(0, head)?;
        self.len = 0;
        // Older records follow; transaction numbers tell them apart.
        self.stale_tail = false;
        self.reserve();
        Ok(())
    }
}

/// The intact records of the journal at `path`, read without opening it for writing (none
/// if there is no journal): what [`Journal::replay`] would find.
pub fn read_records(path: &Path) -> std::io::Result<Vec<Record>> {
    match std::fs::read(path) {
        Ok(data) => Ok(parse(&data).0),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// One journal record as [`Journal::append`] writes it.
pub fn encode_record(transno: u64, muts: &[Mutation]) -> std::io::Result<Vec<u8>> {
    let payload = postcard::to_allocvec(muts).map_err(std::io::Error::other)?;
    let len = 8 + payload.len();
    let len = u32::try_from(len)
        .ok()
        .filter(|l| *l <= MAX_RECORD)
        .ok_or_else(|| std::io::Error::other(format!("journal record of {len} bytes")))?;
    let mut rec = Vec::with_capacity(RECORD_HEADER + payload.len());
    rec.extend_from_slice(&len.to_le_bytes());
    rec.extend_from_slice(&[0; 4]);
    rec.extend_from_slice(&transno.to_le_bytes());
    rec.extend_from_slice(&payload);
    let crc = crc32c::crc32c(&rec[8..]);
    rec[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(rec)
}

/// The intact records in `data` (a journal's contents), in order, and the length of the
/// intact prefix: what replay finds.
pub fn parse(data: &[u8]) -> (Vec<Record>, u64) {
    let mut out: Vec<Record> = Vec::new();
    let mut pos = 0usize;
    while pos + RECORD_HEADER <= data.len() {
        let len = u32::from_le_bytes([data[pos], data[pos + 1], data[pos + 2], data[pos + 3]]);
        let crc = u32::from_le_bytes([data[pos + 4], data[pos + 5], data[pos + 6], data[pos + 7]]);
        // `len` counts the transno and the payload, not the len and crc words.
        if !(8..=MAX_RECORD).contains(&len) || pos + 8 + len as usize > data.len() {
            break;
        }
        let body = &data[pos + 8..pos + 8 + len as usize];
        if crc32c::crc32c(body) != crc {
            break;
        }
        let transno = u64::from_le_bytes(body[..8].try_into().unwrap_or([0; 8]));
        // Transaction numbers only grow: an older record is one a checkpoint left behind.
        if out.last().is_some_and(|(prev, _)| transno <= *prev) {
            break;
        }
        match postcard::from_bytes::<Vec<Mutation>>(&body[8..]) {
            Ok(m) => out.push((transno, m)),
            Err(_) => break,
        }
        pos += 8 + len as usize;
    }
    (out, pos as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    fn put(k: &[u8]) -> Mutation {
        Mutation::Put {
            table: 1,
            key: k.to_vec(),
            val: b"v".to_vec(),
        }
    }

    #[test]
    fn append_and_replay() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("j");
        let mut j = Journal::open(&p).expect("open");
        j.append(1, &[put(b"a")]).expect("a");
        j.append(
            2,
            &[
                put(b"b"),
                Mutation::Del {
                    table: 1,
                    key: b"a".to_vec(),
                },
            ],
        )
        .expect("b");
        drop(j);
        let mut j = Journal::open(&p).expect("reopen");
        let (recs, len) = j.replay().expect("replay");
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1].0, 2);
        assert_eq!(len, j.len());
    }

    #[test]
    fn torn_tail_is_ignored() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("j");
        let mut j = Journal::open(&p).expect("open");
        j.append(1, &[put(b"a")]).expect("a");
        j.append(2, &[put(b"b")]).expect("b");
        let full = j.len();
        drop(j);
        // Cut the last record in half, then flip a byte in the first.
        let f = OpenOptions::new().write(true).open(&p).expect("open");
        f.set_len(full - 5).expect("cut");
        let mut j = Journal::open(&p).expect("reopen");
        let (recs, good) = j.replay().expect("replay");
        assert_eq!(recs.len(), 1);
        j.truncate(good).expect("truncate");
        j.append(3, &[put(b"c")]).expect("c");
        let (recs, _) = j.replay().expect("replay");
        assert_eq!(recs.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 3]);
        let f = OpenOptions::new().write(true).open(&p).expect("open");
        f.write_all_at(&[0xff], 20).expect("corrupt");
        let (recs, good) = j.replay().expect("replay");
        assert!(recs.is_empty());
        assert_eq!(good, 0);
    }

    #[test]
    fn the_journal_keeps_room_past_its_end_for_a_full_disk() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("j");
        let mut j = Journal::open(&p).expect("open");
        let allocated = |p: &Path| std::fs::metadata(p).expect("stat").blocks() * 512;
        assert!(
            allocated(&p) >= JOURNAL_RESERVE,
            "{} bytes reserved",
            allocated(&p)
        );
        j.append(1, &[put(b"a")]).expect("a");
        j.reset().expect("reset");
        assert!(
            allocated(&p) >= JOURNAL_RESERVE,
            "after a reset: {}",
            allocated(&p)
        );
        // The reserve reads as nothing.
        let (recs, len) = j.replay().expect("replay");
        assert!(recs.is_empty());
        assert_eq!(len, 0);
    }

    /// A record lands inside the file's size (no size change for its sync to commit).
    #[test]
    fn records_go_into_blocks_written_ahead() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("j");
        let mut j = Journal::open(&p).expect("open");
        let size = std::fs::metadata(&p).expect("stat").len();
        assert!(size >= JOURNAL_RESERVE, "{size}");
        for t in 1..=100 {
            j.append(t, &[put(b"k")]).expect("append");
        }
        assert_eq!(std::fs::metadata(&p).expect("stat").len(), size);
        // Near the end, more is written ahead.
        let big = vec![put(&vec![7u8; 1 << 20])];
        for t in 101..=110 {
            j.append(t, &big).expect("append");
        }
        let grown = std::fs::metadata(&p).expect("stat").len();
        assert!(
            grown >= j.len() + JOURNAL_RESERVE / 2,
            "{grown} for {}",
            j.len()
        );
    }

    /// After a checkpoint the journal starts over at its beginning: the older records
    /// behind the new ones are never replayed, nor is anything when there is no new one;
    /// a file grown large is cut back.
    #[test]
    fn a_reset_journal_replays_only_what_came_after() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("j");
        let mut j = Journal::open(&p).expect("open");
        let big = vec![put(&vec![1u8; 12 << 20])];
        for t in 1..=3 {
            j.append(t, &big).expect("append");
        }
        j.reset().expect("reset");
        assert!(std::fs::metadata(&p).expect("stat").len() <= JOURNAL_KEEP_MAX);
        let (recs, _) = j.replay().expect("replay");
        assert!(recs.is_empty(), "{} records after a reset", recs.len());
        for t in 1..=3 {
            j.append(10 + t, &[put(b"x")]).expect("append");
        }
        j.reset().expect("reset");
        j.append(20, &[put(b"new")]).expect("append");
        let (recs, len) = j.replay().expect("replay");
        assert_eq!(recs.iter().map(|r| r.0).collect::<Vec<_>>(), vec![20]);
        assert_eq!(len, j.len());
        drop(j);
        // Reopened, it finds its end where it was, and clears what follows before the
        // next record.
        let mut j = Journal::open(&p).expect("reopen");
        assert_eq!(j.len(), len);
        j.append(21, &[put(b"next")]).expect("append");
        let data = std::fs::read(&p).expect("read");
        let (recs, end) = parse(&data);
        assert_eq!(recs.iter().map(|r| r.0).collect::<Vec<_>>(), vec![20, 21]);
        assert!(data[end as usize..].iter().all(|b| *b == 0));
    }
}
