//! nacre's wire, the room Lustre calls ptlrpc: the only place where bytes become messages.
//!
//! - [`frame`]: the fixed, versioned frame header and its checksum;
//! - [`msg`]: every request and reply the services exchange, serde-encoded with postcard;
//!   [`lfsck`]: the checker's own messages, carried in them;
//! - [`auth`]: the file system's shared key and the handshake that proves a peer holds it;
//! - [`at`]: adaptive timeouts: service estimates, request deadlines and early replies;
//! - [`conn`]: a client connection with many requests in flight and bounded queues;
//! - [`server`]: the accept loop that authenticates peers and dispatches to a [`server::Service`];
//! - [`lo`]: in-process delivery to targets served by the same process;
//! - [`memory`]: the memory budget a process's servers share;
//! - [`stats`]: per-opcode counts and latencies on both ends;
//! - [`target`]: a restarted target's recovery window and transno-ordered replay.
//!
//! Nothing outside this crate reads or writes a socket's bytes.

pub mod at;
pub mod auth;
pub mod conn;
pub mod error;
pub mod exports;
pub mod fault;
pub mod frame;
pub mod import;
pub mod lfsck;
pub mod lo;
pub mod memory;
pub mod mgc;
pub mod msg;
pub mod reconnect;
pub mod server;
pub mod stats;
pub mod target;

pub use auth::Key;
pub use conn::Conn;
pub use error::RpcError;
pub use import::Import;
pub use msg::{Reply, Request};
