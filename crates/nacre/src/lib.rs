//! The `nacre` binary's library: formatting targets, running them (one process for a
//! laptop, one per target for a cluster), and the command line.
//!
//! - [`target`]: a target directory's identity file and formatting;
//! - [`node`]: starting MGS, MDT and OST servers on a listener;
//! - [`local`]: a whole file system in one process, as `nacre up` runs it (and tests do).

pub mod check;
pub mod cmd;
pub mod ctl;
pub mod ctl_server;
pub mod daemon;
pub mod inject_ctl;
pub mod lfsck_ctl;
pub mod local;
pub mod log;
pub mod memory;
pub mod native;
pub mod node;
pub mod params;
pub mod target;
