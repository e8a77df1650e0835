//! nacre's integration tests against real servers, real sockets and real FUSE mounts, one
//! module per subject (`cargo test -p nacre --test it lfsck::` runs one of them).
//!
//! They are one test binary rather than one per file: each binary links the whole of
//! nacre, and building thirty-odd of them took most of a CI run. Two suites stay apart
//! because they change the whole process: `checksums_tcp` turns the in-process transport
//! off in the environment, and `health` installs the log subscriber it reads back.

#[path = "../common/mod.rs"]
mod common;

mod bench_costs;
mod bench_lfsck;
mod bench_protection;
mod checksums;
mod checksums_mount;
mod client_ops;
mod coherence;
mod darshan_age;
mod dne;
mod dne_crash;
mod dne_mount;
mod dom_replay;
mod ec;
mod file_limits;
mod file_locks;
mod fsync;
mod full_disk;
mod hardening;
mod hostile_client;
mod layout_rules;
mod layouts;
mod lfsck;
mod lfsck_faults;
mod lfsck_layout;
mod lfsck_serve;
mod links;
mod mirrors;
mod mount;
mod netns;
mod oi_scrub;
mod ost_replay;
mod owner_log;
mod permissions;
mod pools;
mod posix_ops;
mod power_cut;
mod reconnect;
mod redundancy_faults;
mod replay;
mod tools;
