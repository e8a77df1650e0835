//! Object storage devices (Lustre's osd layer): where targets keep their bytes.
//!
//! - [`mdstore`]: the MDT's store. A redb B-tree holds the tables; a journal of physical
//!   changes makes every committed transaction survive a killed process, and group commit
//!   lets concurrent requests share one journal write.
//! - [`objstore`]: the OST's store. Each object is a file under `O/<seq>/d<oid % 32>/<oid>`
//!   (ldiskfs's O/ tree), with its filter fid (parent FID and stripe index) in an xattr.
//!
//! - [`health`]: whether a target's storage is still there and working, checked at start,
//!   periodically and after errors; both stores report to it.
//!
//! Nothing here knows about the namespace or the wire: the MDT and OST crates give meaning to
//! keys and objects.

pub mod health;
pub mod journal;
pub mod mdstore;
pub mod objstore;

pub use health::Health;
pub use mdstore::{KvRead, MdStore, MdStoreConfig, ReadView, Table, Tx};
pub use objstore::{ObjStore, ObjStoreConfig};
