//! Aging and measurement tools that work on any POSIX directory and, through a backend
//! supplied by the caller, natively through nacre's client library.
//!
//! * [`paf`]: Populate and Fragment, aging a file system to a capacity and fragmentation level.
//! * [`darshan`]: aging from real Darshan logs, the LFSCK study's method.
//! * [`ior`], [`mdtest`], [`mix`], [`io500`], [`compare`]: measurements with the output of the
//!   tools they stand in for.
//! * [`frag`]: fragmentation reports of a tree and of `dumpe2fs` output.
//! * [`series`]: PaF then IOR over capacity and fragmentation levels, with CSV and plots.
//! * [`rank`]: running as one rank of many under mpirun or srun, without MPI.
//! * [`backend`]: the [`backend::FileSystem`] trait all I/O goes through, and its POSIX
//!   implementation.
//!
//! [`cli`] holds the clap commands the `nacre` binary mounts.

pub mod backend;
pub mod cancel;
pub mod cli;
pub mod compare;
pub mod darshan;
pub mod env;
pub mod error;
pub mod frag;
pub mod io500;
pub mod ior;
pub mod mdtest;
pub mod mix;
pub mod paf;
pub mod plot;
pub mod progress;
pub mod rank;
pub mod series;
pub mod shuffle;
pub mod stats;
pub mod units;

pub use backend::{FileSystem, NativeConnector, PosixFs};
pub use error::BenchError;
