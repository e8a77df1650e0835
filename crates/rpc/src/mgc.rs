//! The management client (Lustre's MGC): every node's link to the MGS.
//!
//! It fetches the configuration, then keeps a long poll open so a changed configuration
//! (a target that restarted on a new port, a new OST, a `set_param -P`) reaches the node at
//! once, published on a `watch` channel. Targets also use it to register their address.

use crate::at::{ImportAt, MGS_REQUEST_PORTAL};
use crate::conn::{Conn, ConnConfig};
use crate::error::RpcError;
use crate::msg::{FsConfig, Reply, Request};
use nacre_core::TargetName;
use std::time::Duration;
use tokio::sync::watch;

/// Pause before reconnecting to an MGS that went away.
const RECONNECT_PAUSE: Duration = Duration::from_millis(500);
/// Longest a config poll may take (the MGS answers within its own poll time).
const POLL_TIMEOUT: Duration = Duration::from_secs(60);

pub struct Mgc {
    addr: String,
    cfg: ConnConfig,
    /// Its estimates of the MGS (`mgc.*.timeouts`), kept across reconnects.
    at: std::sync::Arc<ImportAt>,
    conn: tokio::sync::Mutex<Conn>,
    config: watch::Receiver<FsConfig>,
    stop: watch::Sender<bool>,
}

impl Mgc {
    /// Connects, fetches the configuration and starts following it.
    pub async fn connect(addr: &str, cfg: ConnConfig) -> Result<std::sync::Arc<Mgc>, RpcError> {
        let at = std::sync::Arc::new(ImportAt::new(MGS_REQUEST_PORTAL));
        let conn = Conn::connect_tracked(addr, &cfg, 0, at.clone()).await?;
        let first = match conn
            .call(
                &Request::MgsGetConfig { newer_than: None },
                Default::default(),
            )
            .await?
        {
            (Reply::Config(c), _) => c,
            _ => {
                return Err(RpcError::Protocol {
                    peer: addr.to_string(),
                    reason: "MGS answered a config request with something else".to_string(),
                });
            }
        };
        let (tx, rx) = watch::channel(first);
        let (stop, stop_rx) = watch::channel(false);
        let mgc = std::sync::Arc::new(Mgc {
            addr: addr.to_string(),
            cfg,
            at,
            conn: tokio::sync::Mutex::new(conn),
            config: rx,
            stop,
        });
        tokio::spawn(follow(std::sync::Arc::downgrade(&mgc), tx, stop_rx));
        Ok(mgc)
    }

    pub fn config(&self) -> watch::Receiver<FsConfig> {
        self.config.clone()
    }

    /// Its estimates of the MGS's network latency and service time.
    pub fn at(&self) -> &ImportAt {
        &self.at
    }

    /// Lustre's name of this MGC device: `MGC` and the MGS's NID (`MGC192.168.1.1@tcp`).
    pub fn device_name(&self) -> String {
        format!("MGC{}", nacre_core::target::nid_of(&self.addr))
    }

    fn connect_again(&self) -> impl std::future::Future<Output = Result<Conn, RpcError>> + '_ {
        Conn::connect_tracked(&self.addr, &self.cfg, 0, self.at.clone())
    }

    async fn call(&self, req: &Request) -> Result<Reply, RpcError> {
        let conn = self.conn.lock().await.clone();
        match conn.call(req, Default::default()).await {
            Err(e) if e.is_transport() => {
                let c = self.connect_again().await?;
                *self.conn.lock().await = c.clone();
                c.call(req, Default::default()).await.map(|(r, _)| r)
            }
            other => other.map(|(r, _)| r),
        }
    }

    pub async fn register(&self, target: TargetName, addr: &str) -> Result<(), RpcError> {
        self.call(&Request::MgsRegister {
            target,
            addr: addr.to_string(),
        })
        .await
        .map(|_| ())
    }

    pub async fn set_param(&self, name: &str, value: Option<&str>) -> Result<(), RpcError> {
        self.call(&Request::MgsSetParam {
            name: name.to_string(),
            value: value.map(str::to_string),
        })
        .await
        .map(|_| ())
    }

    /// Pings the MGS (`lfs check mgts`).
    pub async fn ping(&self) -> Result<(), RpcError> {
        self.call(&Request::Ping).await.map(|_| ())
    }

    /// `lctl pool_*` (see [`Request::MgsPool`]).
    pub async fn pool(&self, pool: &str, op: nacre_core::pool::PoolOp) -> Result<(), RpcError> {
        self.call(&Request::MgsPool {
            pool: pool.to_string(),
            op,
        })
        .await
        .map(|_| ())
    }

    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }
}

async fn follow(
    mgc: std::sync::Weak<Mgc>,
    tx: watch::Sender<FsConfig>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let Some(m) = mgc.upgrade() else { return };
        let generation = tx.borrow().generation;
        let conn = m.conn.lock().await.clone();
        let req = Request::MgsGetConfig {
            newer_than: Some(generation),
        };
        drop(m);
        let res = tokio::select! {
            r = conn.call_with_timeout(&req, Default::default(), POLL_TIMEOUT) => r,
            _ = stop.changed() => return,
        };
        match res {
            Ok((Reply::Config(c), _)) => {
                if c.generation != generation {
                    let _ = tx.send(c);
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(target: "mgc", "MGS: {e}");
                tokio::time::sleep(RECONNECT_PAUSE).await;
                let Some(m) = mgc.upgrade() else { return };
                if let Ok(c) = m.connect_again().await {
                    *m.conn.lock().await = c;
                }
            }
        }
    }
}
