//! The MDT's redo journal: an append-only file of committed change sets.
//!
//! Each record is `[len u32][crc32c u32][transno u64][postcard Vec<Mutation>]`. A record is
//! written with one `write(2)` before the transaction becomes visible, so once any request
//! sees it, it survives `kill -9` of the process (the kernel holds it); `fdatasync` makes it
//! survive power loss too (`sync_journal`, or an explicit sync request). Replay stops at the
//! first torn or corrupt record, which can only be the tail an interrupted write left.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
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
/// Blocks kept allocated past the journal's end, so changes that free space (unlinks) can
/// still be journaled when the disk is full: at ~150 bytes per unlink record, room for
/// tens of thousands between checkpoints. Reads as zeros, which replay takes as the end.
pub const JOURNAL_RESERVE: u64 = 8 << 20;

pub struct Journal {
    file: File,
    len: u64,
}

impl Journal {
    pub fn open(path: &Path) -> std::io::Result<Journal> {
        let file = crate::private_file()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let len = file.metadata()?.len();
        let j = Journal { file, len };
        j.reserve();
        Ok(j)
    }

    /// Keeps [`JOURNAL_RESERVE`] allocated past the end; where the file system cannot
    /// (no space now, no fallocate), the journal simply grows as it goes.
    fn reserve(&self) {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        // Already there (a store reopened after a clean stop): touch nothing.
        if let Ok(m) = self.file.metadata()
            && m.blocks() * 512 >= self.len + JOURNAL_RESERVE
        {
            return;
        }
        // SAFETY: fallocate on our own open descriptor; it changes no data or size.
        let r = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_KEEP_SIZE,
                self.len as libc::off_t,
                JOURNAL_RESERVE as libc::off_t,
            )
        };
        if r != 0 {
            tracing::debug!(target: "osd", "journal reserve: {}", std::io::Error::last_os_error());
        }
    }

    /// Every intact record, in order, and the length of the intact prefix.
    pub fn replay(&mut self) -> std::io::Result<(Vec<Record>, u64)> {
        let mut data = Vec::new();
        self.file.seek(SeekFrom::Start(0))?;
        self.file.read_to_end(&mut data)?;
        Ok(parse(&data))
    }

    /// Cuts the journal to `len` bytes (drops a torn tail).
    pub fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.file.set_len(len)?;
        self.len = len;
        Ok(())
    }

    /// Appends one record with a single write; on failure the journal is cut back so a torn
    /// record cannot hide later ones.
    pub fn append(&mut self, transno: u64, muts: &[Mutation]) -> std::io::Result<()> {
        let rec = encode_record(transno, muts)?;
        if let Err(e) = self.file.write_all_at(&rec, self.len) {
            let _ = self.file.set_len(self.len);
            return Err(e);
        }
        self.len += rec.len() as u64;
        Ok(())
    }

    pub fn sync(&self) -> std::io::Result<()> {
        self.file.sync_data()
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Starts over after a checkpoint made everything durable in the store.
    pub fn reset(&mut self) -> std::io::Result<()> {
        self.file.set_len(0)?;
        self.len = 0;
        self.file.flush()?;
        // Cutting the file gave its reserve back.
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
    let mut out = Vec::new();
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
        assert_eq!(std::fs::metadata(&p).expect("stat").len(), 0);
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
}
