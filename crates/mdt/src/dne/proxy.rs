//! MDT proxies: this MDT's lasting connections to the other MDTs, as Lustre's
//! `osp.<fs>-MDT0001-osp-MDT0000` devices. Addresses come from the MGS configuration, so
//! a restarted MDT is found at its new address.

use bytes::Bytes;
use nacre_core::{Errno, TargetName};
use nacre_rpc::conn::ConnConfig;
use nacre_rpc::msg::{FsConfig, Reply, Request};
use nacre_rpc::{Import, RpcError};
use std::time::Duration;
use tokio::sync::watch;

/// How long a request to another MDT keeps trying before it fails (EIO). Shorter than a
/// client's own wait, so a client hears "that MDT is down" rather than timing out itself.
pub const PROXY_RECOVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// A request's outcome as far as a distributed operation cares.
#[derive(Debug)]
pub enum ProxyError {
    /// The MDT answered with an error: the request did not take effect.
    Errno(Errno),
    /// No answer: the request may or may not have run there.
    Unreachable(String),
}

impl ProxyError {
    pub fn errno(&self) -> Errno {
        match self {
            ProxyError::Errno(e) => *e,
            ProxyError::Unreachable(_) => Errno::EIO,
        }
    }
}

impl From<RpcError> for ProxyError {
    fn from(e: RpcError) -> ProxyError {
        match e {
            RpcError::Errno(e) => ProxyError::Errno(e),
            RpcError::Protocol { reason, .. } => {
                tracing::warn!(target: "mdt::dne", "protocol error from a peer MDT: {reason}");
                ProxyError::Errno(Errno::EPROTO)
            }
            RpcError::Auth { .. } => ProxyError::Errno(Errno::EACCES),
            other => ProxyError::Unreachable(other.to_string()),
        }
    }
}

/// One other MDT, seen from this one.
pub struct MdtProxy {
    pub index: u32,
    import: Import,
}

impl MdtProxy {
    pub fn new(index: u32, conn: ConnConfig, config: watch::Receiver<FsConfig>) -> MdtProxy {
        let import = Import::new(TargetName::mdt(index), conn, config);
        import.set_recovery_timeout(PROXY_RECOVERY_TIMEOUT);
        MdtProxy { index, import }
    }

    /// Lustre's device name: `<fs>-MDT0001-osp-MDT0000`.
    pub fn device_name(&self, fsname: &str, from: u32) -> String {
        format!(
            "{}-osp-MDT{from:04x}",
            TargetName::mdt(self.index).full(fsname)
        )
    }

    pub async fn call(&self, req: &Request) -> Result<Reply, ProxyError> {
        match self.import.call(req, Bytes::new()).await {
            Ok((r, _)) => Ok(r),
            Err(e) => Err(e.into()),
        }
    }

    pub fn set_recovery_timeout(&self, d: Duration) {
        self.import.set_recovery_timeout(d);
    }
}
