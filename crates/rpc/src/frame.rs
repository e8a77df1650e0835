//! Frames: a fixed 36-byte header, a postcard-encoded body, then raw bulk data.
//!
//! ```text
//! 0      4        6        8     16      20         24         28        30             32      36
//! | magic | version | opcode | xid | flags | body_len | bulk_len | timeout | service_time | cksum |
//! ```
//! All fields little-endian. `cksum` is crc32c over the header bytes before it, the body and
//! the bulk, so data is checked end to end on every hop. `timeout` and `service_time` are
//! the seconds of adaptive timeouts ([`crate::at`]), Lustre's `pb_timeout` and
//! `pb_service_time`: in a request, how long its sender waits for the reply; in a reply,
//! the server's service estimate and how long this request took. Bulk data (file contents) follows the
//! body without being re-encoded, so it is never copied to be framed.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

/// "NCR1".
pub const MAGIC: u32 = 0x3152_434e;
/// Wire protocol version; a peer with another version is refused at the handshake. Bumped
/// when a message changes shape or a variant goes (postcard numbers variants by position).
pub const VERSION: u16 = 9;
pub const HEADER_LEN: usize = 36;
/// Header bytes the checksum covers: all but the checksum itself.
const CHECKED_LEN: usize = HEADER_LEN - 4;
/// Largest body accepted; anything larger is a protocol error, not an allocation.
pub const MAX_BODY: u32 = 16 << 20;
/// Largest bulk payload accepted (one RPC never moves more than this).
pub const MAX_BULK: u32 = 64 << 20;

/// Set on replies.
pub const FLAG_REPLY: u32 = 0x1;
/// Set on handshake frames.
pub const FLAG_HANDSHAKE: u32 = 0x2;
/// Set, beside [`FLAG_REPLY`], on an early reply: the server still works on the request and
/// asks for `timeout` seconds from its arrival ([`crate::at`]); the real reply follows.
pub const FLAG_EARLY: u32 = 0x4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub opcode: u16,
    pub xid: u64,
    pub flags: u32,
    pub body_len: u32,
    pub bulk_len: u32,
    /// Seconds: a request's deadline, or a reply's service estimate.
    pub timeout: u16,
    /// Seconds a request took on the server (replies only).
    pub service_time: u16,
    pub cksum: u32,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("bad magic {0:#x} (not a nacre peer)")]
    BadMagic(u32),
    #[error("protocol version {0} (this side speaks {VERSION})")]
    BadVersion(u16),
    #[error("body of {0} bytes exceeds the {MAX_BODY}-byte limit")]
    BodyTooLarge(u32),
    #[error("bulk of {0} bytes exceeds the {MAX_BULK}-byte limit")]
    BulkTooLarge(u32),
    #[error("a {body}-byte body and {bulk}-byte bulk where at most a {max}-byte body is allowed")]
    TooLargeHere { body: u32, bulk: u32, max: u32 },
    #[error("checksum mismatch: header says {expected:#010x}, data gives {actual:#010x}")]
    Checksum { expected: u32, actual: u32 },
    #[error("connection closed")]
    Closed,
    #[error("read failed: {0}")]
    Io(String),
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&VERSION.to_le_bytes());
        b[6..8].copy_from_slice(&self.opcode.to_le_bytes());
        b[8..16].copy_from_slice(&self.xid.to_le_bytes());
        b[16..20].copy_from_slice(&self.flags.to_le_bytes());
        b[20..24].copy_from_slice(&self.body_len.to_le_bytes());
        b[24..28].copy_from_slice(&self.bulk_len.to_le_bytes());
        b[28..30].copy_from_slice(&self.timeout.to_le_bytes());
        b[30..32].copy_from_slice(&self.service_time.to_le_bytes());
        b[CHECKED_LEN..].copy_from_slice(&self.cksum.to_le_bytes());
        b
    }

    /// Parses and checks a header; the checksum is checked later, once the payload is in.
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Header, FrameError> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let magic = u32_at(0);
        if magic != MAGIC {
            return Err(FrameError::BadMagic(magic));
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        if version != VERSION {
            return Err(FrameError::BadVersion(version));
        }
        let h = Header {
            opcode: u16::from_le_bytes([b[6], b[7]]),
            xid: u64::from_le_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]),
            flags: u32_at(16),
            body_len: u32_at(20),
            bulk_len: u32_at(24),
            timeout: u16::from_le_bytes([b[28], b[29]]),
            service_time: u16::from_le_bytes([b[30], b[31]]),
            cksum: u32_at(CHECKED_LEN),
        };
        if h.body_len > MAX_BODY {
            return Err(FrameError::BodyTooLarge(h.body_len));
        }
        if h.bulk_len > MAX_BULK {
            return Err(FrameError::BulkTooLarge(h.bulk_len));
        }
        Ok(h)
    }
}

/// The checksum a frame must carry.
pub fn checksum(header: &Header, body: &[u8], bulk: &[u8]) -> u32 {
    let mut h = *header;
    h.cksum = 0;
    let enc = h.encode();
    let c = crc32c::crc32c(&enc[..CHECKED_LEN]);
    let c = crc32c::crc32c_append(c, body);
    crc32c::crc32c_append(c, bulk)
}

/// A frame read off the wire.
#[derive(Debug)]
pub struct Frame {
    pub header: Header,
    pub body: Bytes,
    pub bulk: Bytes,
}

/// Builds the header of an outgoing frame, with its checksum.
pub fn make_header(opcode: u16, xid: u64, flags: u32, body: &[u8], bulk: &[u8]) -> Header {
    make_timed_header(opcode, xid, flags, (0, 0), body, bulk)
}

/// [`make_header`] with the adaptive timeout seconds `(timeout, service_time)`.
pub fn make_timed_header(
    opcode: u16,
    xid: u64,
    flags: u32,
    (timeout, service_time): (u16, u16),
    body: &[u8],
    bulk: &[u8],
) -> Header {
    let mut h = Header {
        opcode,
        xid,
        flags,
        body_len: body.len() as u32,
        bulk_len: bulk.len() as u32,
        timeout,
        service_time,
        cksum: 0,
    };
    h.cksum = checksum(&h, body, bulk);
    h
}

/// Checks the sizes of an outgoing frame against the limits its receiver applies (and that
/// they fit the header's fields).
pub fn check_lengths(body: usize, bulk: usize) -> Result<(), FrameError> {
    let as_u32 = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    if body > MAX_BODY as usize {
        return Err(FrameError::BodyTooLarge(as_u32(body)));
    }
    if bulk > MAX_BULK as usize {
        return Err(FrameError::BulkTooLarge(as_u32(bulk)));
    }
    Ok(())
}

/// Reads one frame of at most `max_body` body bytes and no bulk (a handshake frame, from a
/// peer not yet trusted with more), checking its size before allocating.
pub async fn read_small_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max_body: u32,
) -> Result<Frame, FrameError> {
    let header = read_header(r).await?;
    if header.body_len > max_body || header.bulk_len > 0 {
        return Err(FrameError::TooLargeHere {
            body: header.body_len,
            bulk: header.bulk_len,
            max: max_body,
        });
    }
    read_payload(r, header).await
}

/// Reads one whole frame, checking limits before allocating and the checksum after.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> Result<Frame, FrameError> {
    let header = read_header(r).await?;
    read_payload(r, header).await
}

/// Reads and checks a frame header (so a server can reserve memory before the payload).
pub async fn read_header<R: AsyncRead + Unpin>(r: &mut R) -> Result<Header, FrameError> {
    let mut hb = [0u8; HEADER_LEN];
    match r.read_exact(&mut hb).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(FrameError::Closed),
        Err(e) => return Err(FrameError::Io(e.to_string())),
    }
    Header::decode(&hb)
}

/// Reads the body and bulk that `header` announced, and checks the checksum.
pub async fn read_payload<R: AsyncRead + Unpin>(
    r: &mut R,
    header: Header,
) -> Result<Frame, FrameError> {
    let total = header.body_len as usize + header.bulk_len as usize;
    // Filled by read_buf without zeroing first: bulk buffers are megabytes.
    let mut buf = BytesMut::with_capacity(total);
    while buf.len() < total {
        let mut limited = (&mut *r).take((total - buf.len()) as u64);
        match limited.read_buf(&mut buf).await {
            Ok(0) => return Err(FrameError::Closed),
            Ok(_) => {}
            Err(e) => return Err(FrameError::Io(e.to_string())),
        }
    }
    let mut buf = buf.freeze();
    let body = buf.split_to(header.body_len as usize);
    let bulk = buf;
    let actual = checksum(&header, &body, &bulk);
    if actual != header.cksum {
        return Err(FrameError::Checksum {
            expected: header.cksum,
            actual,
        });
    }
    Ok(Frame { header, body, bulk })
}

/// Decodes a frame from a byte slice (used by the fuzzer and tests): the frame and the
/// number of bytes it used, or `Ok(None)` when more bytes are needed.
pub fn decode_slice(b: &[u8]) -> Result<Option<(Frame, usize)>, FrameError> {
    if b.len() < HEADER_LEN {
        return Ok(None);
    }
    let mut hb = [0u8; HEADER_LEN];
    hb.copy_from_slice(&b[..HEADER_LEN]);
    let header = Header::decode(&hb)?;
    let total = HEADER_LEN + header.body_len as usize + header.bulk_len as usize;
    if b.len() < total {
        return Ok(None);
    }
    let body = Bytes::copy_from_slice(&b[HEADER_LEN..HEADER_LEN + header.body_len as usize]);
    let bulk = Bytes::copy_from_slice(&b[HEADER_LEN + header.body_len as usize..total]);
    let actual = checksum(&header, &body, &bulk);
    if actual != header.cksum {
        return Err(FrameError::Checksum {
            expected: header.cksum,
            actual,
        });
    }
    Ok(Some((Frame { header, body, bulk }, total)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(opcode: u16, xid: u64, body: &[u8], bulk: &[u8]) -> Vec<u8> {
        let h = make_header(opcode, xid, 0, body, bulk);
        let mut v = h.encode().to_vec();
        v.extend_from_slice(body);
        v.extend_from_slice(bulk);
        v
    }

    #[test]
    fn round_trip() {
        let v = encode(7, 42, b"body", b"bulkdata");
        let (f, used) = decode_slice(&v).expect("valid").expect("complete");
        assert_eq!(used, v.len());
        assert_eq!(f.header.opcode, 7);
        assert_eq!(f.header.xid, 42);
        assert_eq!(&f.body[..], b"body");
        assert_eq!(&f.bulk[..], b"bulkdata");
    }

    #[test]
    fn adaptive_timeout_seconds_round_trip() {
        let h = make_timed_header(7, 42, FLAG_REPLY | FLAG_EARLY, (600, 17), b"b", b"");
        let mut v = h.encode().to_vec();
        v.push(b'b');
        let (f, _) = decode_slice(&v).expect("valid").expect("complete");
        assert_eq!(f.header, h);
        assert_eq!((f.header.timeout, f.header.service_time), (600, 17));
    }

    #[test]
    fn detects_corruption_anywhere() {
        let v = encode(1, 1, b"abc", b"defgh");
        for i in 0..v.len() {
            let mut c = v.clone();
            c[i] ^= 0x40;
            assert!(
                decode_slice(&c).is_err() || decode_slice(&c).ok().flatten().is_none(),
                "byte {i}"
            );
        }
    }

    #[test]
    fn refuses_oversized_frames_before_allocating() {
        let mut h = make_header(1, 1, 0, b"", b"");
        h.bulk_len = MAX_BULK + 1;
        let enc = h.encode();
        assert_eq!(
            decode_slice(&enc).err(),
            Some(FrameError::BulkTooLarge(MAX_BULK + 1))
        );
        let mut bad = enc;
        bad[0] = 0;
        assert!(matches!(decode_slice(&bad), Err(FrameError::BadMagic(_))));
    }

    #[test]
    fn random_bytes_never_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..20_000 {
            let n = rng.gen_range(0..96);
            let mut v: Vec<u8> = (0..n).map(|_| rng.r#gen()).collect();
            if rng.gen_bool(0.5) && v.len() >= 6 {
                v[0..4].copy_from_slice(&MAGIC.to_le_bytes());
                v[4..6].copy_from_slice(&VERSION.to_le_bytes());
            }
            let _ = decode_slice(&v);
        }
    }
}
