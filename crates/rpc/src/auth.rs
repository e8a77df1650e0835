//! The file system's shared key and the handshake that proves a peer holds it.
//!
//! The key is 32 random bytes made at format time (as Lustre's shared-key security). Every
//! connection starts with a challenge-response in both directions: the server sends a nonce,
//! the client answers with its own nonce and an HMAC-SHA256 over both; the server checks it
//! and answers with its own HMAC, which the client checks. The key never crosses the wire,
//! and a peer without it is refused with a message saying so on both sides.
//!
//! Two keys, two roles. The file system key is the servers'; the client key is derived
//! from it ([`Key::client_key`]), so a server knows both and a client node is given only
//! the second. Which key a peer proved decides its [`PeerRole`]: requests only servers
//! send (DNE updates, object create and destroy, LFSCK, target registration; see
//! [`Request::needs_server_role`](crate::msg::Request::needs_server_role)) are refused to
//! a client, as Lustre's targets tell an MDT's connection from a client's by its connect
//! flags. A node holding the file system key is trusted as a server.

use hmac::{Hmac, Mac};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::fmt;
use std::path::Path;

pub const KEY_LEN: usize = 32;
pub const NONCE_LEN: usize = 32;
/// Longest client name a hello may carry: a host name (at most 64 bytes on Linux) and a
/// process id, with room to spare.
pub const MAX_CLIENT_NAME: usize = 128;
/// Largest handshake frame body either side reads. A hello is two short names and two
/// 32-byte nonces or proofs, a verdict a proof or a one-line reason: a few hundred bytes
/// (a test checks the largest fits). A peer not yet authenticated gets no more than this.
pub const MAX_HELLO: u32 = 512;
/// Characters of a peer's own file system name a refusal quotes back, so the verdict stays
/// within [`MAX_HELLO`] whatever the peer sent.
pub(crate) const QUOTED_FSNAME: usize = 32;
const CLIENT_LABEL: &[u8] = b"nacre-client-v1";
/// What the client key is derived under.
const CLIENT_KEY_LABEL: &[u8] = b"nacre-client-key-v1";

/// Which key a peer proved it holds at the handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerRole {
    /// The file system key: another target, or a tool run with the servers' key.
    Server,
    /// The client key: a mount or a library client.
    Client,
}

impl PeerRole {
    /// The role a holder of `peer` has on a server of file system key `fs`, if any.
    pub fn of(fs: &Key, peer: &Key) -> Option<PeerRole> {
        if peer == fs {
            Some(PeerRole::Server)
        } else if *peer == fs.client_key() {
            Some(PeerRole::Client)
        } else {
            None
        }
    }
}
const SERVER_LABEL: &[u8] = b"nacre-server-v1";

/// The shared key of one file system.
#[derive(Clone, PartialEq, Eq)]
pub struct Key([u8; KEY_LEN]);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(<secret>)")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read key file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot write key file {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("key file {path} is malformed: expected {} hex digits", KEY_LEN * 2)]
    Malformed { path: String },
    #[error(
        "key file {path} has mode {mode:04o}: a file system key must not be readable or \
         writable by others (anyone who can read it can mount the file system); run \
         `chmod 600 {path}`"
    )]
    Exposed { path: String, mode: u32 },
}

impl Key {
    /// The key of this file system's clients: what a client node is given instead of
    /// the file system key, from which it cannot be turned back.
    pub fn client_key(&self) -> Key {
        Key(self.mac(CLIENT_KEY_LABEL, &[]))
    }

    pub fn generate() -> Key {
        let mut k = [0u8; KEY_LEN];
        rand::rngs::OsRng.fill_bytes(&mut k);
        Key(k)
    }

    pub fn from_bytes(b: [u8; KEY_LEN]) -> Key {
        Key(b)
    }

    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn from_hex(s: &str) -> Option<Key> {
        let s = s.trim();
        if s.len() != KEY_LEN * 2 || !s.is_ascii() {
            return None;
        }
        let mut k = [0u8; KEY_LEN];
        for (i, byte) in k.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&s[i * 2..i * 2 + 2], 16).ok()?;
        }
        Some(Key(k))
    }

    /// Reads a key file, refusing one that its group or others may read or write (as ssh
    /// refuses a private key): whoever holds the key is a trusted client or server.
    pub fn load(path: &Path) -> Result<Key, KeyError> {
        use std::io::Read;
        use std::os::unix::fs::PermissionsExt;
        let err = |source| KeyError::Read {
            path: path.display().to_string(),
            source,
        };
        let f = std::fs::File::open(path).map_err(err)?;
        // The mode of the file actually opened, not of whatever the path names later.
        let mode = f.metadata().map_err(err)?.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(KeyError::Exposed {
                path: path.display().to_string(),
                mode,
            });
        }
        let mut text = String::new();
        // A key file is one line of hex; more than a page is not a key.
        f.take(4096).read_to_string(&mut text).map_err(err)?;
        Key::from_hex(&text).ok_or_else(|| KeyError::Malformed {
            path: path.display().to_string(),
        })
    }

    /// Writes the key readable by its owner only.
    pub fn save(&self, path: &Path) -> Result<(), KeyError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let err = |source| KeyError::Write {
            path: path.display().to_string(),
            source,
        };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(err)?;
        writeln!(f, "{}", self.to_hex()).map_err(err)?;
        f.sync_all().map_err(err)
    }

    fn mac(&self, label: &[u8], parts: &[&[u8]]) -> [u8; 32] {
        // HMAC accepts keys of any length; ours is fixed.
        let mut m =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes any key length");
        m.update(label);
        for p in parts {
            m.update(&(p.len() as u32).to_le_bytes());
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }

    pub(crate) fn client_proof(
        &self,
        server_nonce: &[u8],
        client_nonce: &[u8],
        fsname: &str,
    ) -> [u8; 32] {
        self.mac(
            CLIENT_LABEL,
            &[server_nonce, client_nonce, fsname.as_bytes()],
        )
    }

    pub(crate) fn server_proof(
        &self,
        server_nonce: &[u8],
        client_nonce: &[u8],
        fsname: &str,
    ) -> [u8; 32] {
        self.mac(
            SERVER_LABEL,
            &[server_nonce, client_nonce, fsname.as_bytes()],
        )
    }
}

/// Compares MACs in constant time.
pub(crate) fn mac_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(crate) fn nonce() -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    rand::rngs::OsRng.fill_bytes(&mut n);
    n
}

/// First frame, server to client.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ServerHello {
    pub fsname: String,
    pub target: String,
    pub nonce: Vec<u8>,
}

/// Client's answer.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ClientHello {
    pub fsname: String,
    pub client: String,
    pub nonce: Vec<u8>,
    pub proof: Vec<u8>,
    /// The connecting import's id (0: none), so the target can order a reconnect after
    /// the requests of the connection it replaces ([`crate::reconnect`]).
    pub import: u64,
}

/// The reason a server serving `ours` refuses a peer that asked for `theirs`.
pub(crate) fn refusal_for_fsname(ours: &str, theirs: &str) -> String {
    let theirs: String = theirs.chars().take(QUOTED_FSNAME).collect();
    format!("this server serves '{ours}', not '{theirs}'")
}

/// Server's verdict: accepted with its own proof, or refused with a reason.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ServerVerdict {
    Accepted { proof: Vec<u8> },
    Refused { reason: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_files() {
        let k = Key::generate();
        assert_eq!(Key::from_hex(&k.to_hex()), Some(k.clone()));
        assert_eq!(Key::from_hex("abc"), None);
        assert_eq!(Key::from_hex(&"zz".repeat(32)), None);
        let dir = std::env::temp_dir().join(format!("nacre-key-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        k.save(&dir).expect("save");
        assert_eq!(Key::load(&dir).expect("load"), k);
        // Never overwrites an existing key.
        assert!(k.save(&dir).is_err());
        std::fs::remove_file(&dir).expect("cleanup");
        assert!(matches!(Key::load(&dir), Err(KeyError::Read { .. })));
    }

    #[test]
    fn a_key_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let path = std::env::temp_dir().join(format!("nacre-key-open-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let k = Key::generate();
        k.save(&path).expect("save");
        for mode in [0o644, 0o640, 0o604, 0o660, 0o606] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
            let err = Key::load(&path).expect_err("a key others can read must be refused");
            assert!(
                matches!(err, KeyError::Exposed { mode: m, .. } if m == mode),
                "{err}"
            );
            let msg = err.to_string();
            assert!(
                msg.contains(&format!("{mode:04o}")) && msg.contains("chmod 600"),
                "{msg}"
            );
        }
        // The owner's own bits are the owner's business: read-only is fine.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).expect("chmod");
        assert_eq!(Key::load(&path).expect("0400 is private"), k);
        std::fs::remove_file(&path).expect("cleanup");
    }

    #[test]
    fn the_largest_handshake_frames_fit_their_limit() {
        let k = Key::generate();
        let fsname = "x".repeat(nacre_core::target::FSNAME_MAX);
        let hello = ClientHello {
            fsname: fsname.clone(),
            client: "\u{10ffff}".repeat(MAX_CLIENT_NAME / 4),
            nonce: nonce().to_vec(),
            proof: k.client_proof(b"s", b"c", &fsname).to_vec(),
            import: u64::MAX,
        };
        assert_eq!(hello.client.len(), MAX_CLIENT_NAME);
        let n = crate::msg::encode(&hello).expect("encode").len();
        assert!(n <= MAX_HELLO as usize, "client hello of {n} bytes");
        let server = ServerHello {
            fsname: fsname.clone(),
            target: format!("{fsname}-MDT{:04x}", u16::MAX),
            nonce: nonce().to_vec(),
        };
        let n = crate::msg::encode(&server).expect("encode").len();
        assert!(n <= MAX_HELLO as usize, "server hello of {n} bytes");
        // The longest refusal quotes back the most of a peer's name it ever does.
        let quoted: String = "\u{10ffff}".repeat(QUOTED_FSNAME);
        let verdict = ServerVerdict::Refused {
            reason: refusal_for_fsname(&fsname, &quoted),
        };
        let n = crate::msg::encode(&verdict).expect("encode").len();
        assert!(n <= MAX_HELLO as usize, "verdict of {n} bytes");
    }

    #[test]
    fn a_client_key_gives_the_client_role_only() {
        let fs = Key::generate();
        let client = fs.client_key();
        assert_ne!(client, fs);
        assert_eq!(client, fs.client_key(), "derived the same way every time");
        assert_eq!(PeerRole::of(&fs, &fs), Some(PeerRole::Server));
        assert_eq!(PeerRole::of(&fs, &client), Some(PeerRole::Client));
        // A client key is not a file system key: its own derivation is no role.
        assert_eq!(PeerRole::of(&fs, &client.client_key()), None);
        assert_eq!(PeerRole::of(&client, &fs), None);
        assert_eq!(PeerRole::of(&fs, &Key::generate()), None);
    }

    #[test]
    fn proofs_depend_on_key_and_nonces() {
        let a = Key::generate();
        let b = Key::generate();
        assert!(mac_eq(
            &a.client_proof(b"s", b"c", "fs"),
            &a.client_proof(b"s", b"c", "fs")
        ));
        assert!(!mac_eq(
            &a.client_proof(b"s", b"c", "fs"),
            &b.client_proof(b"s", b"c", "fs")
        ));
        assert!(!mac_eq(
            &a.client_proof(b"s", b"c", "fs"),
            &a.client_proof(b"s", b"d", "fs")
        ));
        assert!(!mac_eq(
            &a.client_proof(b"s", b"c", "fs"),
            &a.server_proof(b"s", b"c", "fs")
        ));
    }
}
