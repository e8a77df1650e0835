//! Errors of the wire layer.

use nacre_core::Errno;

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum RpcError {
    /// The server handled the request and answered with an errno.
    #[error("{0}")]
    Errno(Errno),
    /// The connection is gone (refused, reset, closed); the request may not have run.
    #[error("connection to {peer} lost: {reason}")]
    Disconnected { peer: String, reason: String },
    /// No reply within the deadline; the request may or may not have run.
    #[error("request to {peer} timed out after {secs}s")]
    Timeout { peer: String, secs: u64 },
    /// The peer does not hold this file system's key, or speaks another protocol.
    #[error("authentication with {peer} failed: {reason}")]
    Auth { peer: String, reason: String },
    /// Malformed or unexpected bytes.
    #[error("protocol error with {peer}: {reason}")]
    Protocol { peer: String, reason: String },
}

impl RpcError {
    /// The errno an application should see for this failure.
    pub fn errno(&self) -> Errno {
        match self {
            RpcError::Errno(e) => *e,
            RpcError::Disconnected { .. } | RpcError::Timeout { .. } => Errno::EIO,
            RpcError::Auth { .. } => Errno::EACCES,
            RpcError::Protocol { .. } => Errno::EPROTO,
        }
    }

    /// Whether the request certainly did not reach a handler, or may safely be sent again
    /// when it is idempotent.
    pub fn is_transport(&self) -> bool {
        matches!(
            self,
            RpcError::Disconnected { .. } | RpcError::Timeout { .. }
        )
    }
}

impl From<Errno> for RpcError {
    fn from(e: Errno) -> RpcError {
        RpcError::Errno(e)
    }
}
