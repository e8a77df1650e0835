//! nacre's data model, shared by every other crate: FIDs and sequences, file layouts (plain and
//! composite, with Data-on-MDT), directory stripe layouts (LMV) and their name hashes, inode
//! attributes, POSIX ACLs, errno values and the size syntax Lustre's tools accept.
//!
//! This crate owns pure data and the algorithms over it. It must not do I/O, spawn tasks or know
//! about the wire: anything here can be unit-tested without a server.

pub mod acl;
pub mod attr;
pub mod cksum;
pub mod ec;
pub mod errno;
pub mod fid;
pub mod fiemap;
pub mod flock;
pub mod layout;
pub mod layout_rules;
pub mod lmv;
pub mod log_limit;
pub mod pool;
pub mod size;
pub mod target;

pub use attr::{Attr, FileKind, SetAttr, Timespec};
pub use errno::{Errno, Result};
pub use fid::Fid;
pub use layout::{Component, Layout, OstLayout, Pattern, StripeObject};
pub use lmv::{HashType, Lmv};
pub use target::{TargetKind, TargetName};
