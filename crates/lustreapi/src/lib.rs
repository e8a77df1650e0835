//! Lustre's user-space formats, as `lfs`, `lctl` and liblustreapi define them: the option
//! syntax of the commands, layout validation, and the exact text `lfs getstripe`,
//! `lfs getdirstripe`, `lfs df`, `lfs osts`, `lfs getname`, `lfs check` and the pool
//! commands print, plus `lfs find` predicates, `lctl` parameter-name matching, `lctl dl`'s device list and LFSCK's
//! commands and status files.
//!
//! Everything here is pure: parsers take argument lists and return requests, printers take
//! data (layouts from `nacre_core`, target statistics) and return strings. Servers and the
//! `nacre` binary do the I/O.

pub mod devices;
pub mod df;
pub mod dirstripe;
pub mod error;
pub mod find;
pub mod fnmatch;
pub mod getstripe;
pub mod lctl;
pub mod lfsck;
pub mod pool;
pub mod setstripe;
pub mod size;
pub mod tgts;

mod cnum;
mod getopt;

pub use error::{Error, Result};
