//! The online checker, Lustre's lfsck room: it checks and repairs a live file system
//! while clients keep using it.
//!
//! - [`oi`]: the OI scrub: the object index (FID -> inode) checked against the inodes
//!   and rebuilt, also when it was lost;
//! - [`mdt`]: LFSCK on an MDT: start, stop, query, the records and the run of its
//!   components (hosted by the MDT through [`nacre_rpc::lfsck::LfsckService`]);
//! - [`namespace`]: the namespace checks and repairs (FID-in-dirent, linkEA, dangling
//!   names, orphans, multiply-referenced names, file types, link counts, striped
//!   directories and name hashes, remote entries, unfinished distributed operations);
//! - [`layout`]: the layout checks and repairs (dangling OST references, unmatched
//!   pairs, multiply-referenced objects, orphan objects, LAST_ID);
//! - [`ost`]: LFSCK's side on an OST (probes, object listings, repairs of objects);
//! - [`offline`]: the same checks on the stores of a stopped file system (`nacre check`);
//! - [`offline_layout`]: the layout checks on them, MDT layouts against OST objects;
//! - [`inject`]: making each inconsistency on purpose, for tests and fault injection;
//! - [`control`]: what every running component shares (progress, speed limit,
//!   checkpoints, bounded calls, the repair log, adaptive windows).
//!
//! The status formats and command syntax are Lustre's, in `nacre_lustreapi::lfsck`.

pub mod control;
pub mod inject;
pub mod layout;
pub mod mdt;
pub mod namespace;
pub mod offline;
pub mod offline_layout;
pub mod oi;
pub mod ost;
mod rebuild;

pub use mdt::MdtLfsck;
pub use ost::OstLfsck;
