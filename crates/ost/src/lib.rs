//! The object storage target (Lustre's ofd): serves object reads, writes, truncates,
//! fallocates, destroys, syncs and statfs over the wire, and precreates objects for the MDTs.
//!
//! It owns the request handling for one OST; the bytes live in [`nacre_osd::ObjStore`]. File
//! I/O runs on tokio's blocking pool so a slow disk never stalls the connection tasks.
//!
//! An OST whose storage failed (see [`nacre_osd::health`]: its directory removed, its
//! device returning errors) answers every request with EIO until it is restarted, rather
//! than serve from files that are gone.

use bytes::Bytes;
use nacre_core::Errno;
use nacre_core::fid::DATA_SEQ_WIDTH;
use nacre_osd::{Health, ObjStore};
use nacre_rpc::lfsck::LfsckService;
use nacre_rpc::msg::{ObjAttr, Reply, Request, StatFs};
use nacre_rpc::server::{RequestCtx, Service};
use std::sync::Arc;

/// Largest read one request may ask for (matches the frame bulk limit with room to spare).
pub const MAX_READ: u32 = 32 << 20;
/// Objects one precreate request may add.
pub const MAX_PRECREATE: u32 = 20_000;

/// A read's length within [`MAX_READ`].
fn check_read(len: u32) -> Result<(), Errno> {
    if len > MAX_READ {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

pub struct Ost {
    pub index: u32,
    store: Arc<ObjStore>,
    /// The checker, attached once the OST has started ([`Ost::set_lfsck`]).
    lfsck: std::sync::OnceLock<Arc<dyn LfsckService>>,
}

impl Ost {
    pub fn new(index: u32, store: ObjStore) -> Ost {
        Ost {
            index,
            store: Arc::new(store),
            lfsck: std::sync::OnceLock::new(),
        }
    }

    pub fn store(&self) -> &Arc<ObjStore> {
        &self.store
    }

    /// Attaches the checker; requests for it go there from now on.
    pub fn set_lfsck(&self, l: Arc<dyn LfsckService>) {
        if self.lfsck.set(l).is_err() {
            tracing::warn!(target: "ost", "OST{:04x}: a checker is already attached", self.index);
        }
    }

    /// The OST is stopping: a running check saves where it was.
    pub async fn stop(&self) {
        if let Some(l) = self.lfsck.get() {
            l.clone().stopping().await;
        }
    }

    /// The health of this OST's storage; its failure and reason, once failed.
    pub fn health(&self) -> &Arc<Health> {
        self.store.health()
    }

    /// `obdfilter.*.health_check`: `healthy` or `NOT HEALTHY: reason`.
    pub fn health_check(&self) -> String {
        self.health().status()
    }

    /// Until `shutdown`: every second, streams that stopped give back the blocks reserved
    /// ahead of them (see `ObjStore::release_idle`), and the storage is checked (see
    /// [`Health::monitor`]).
    pub async fn housekeeping(self: Arc<Self>, shutdown: tokio::sync::watch::Receiver<bool>) {
        let health = self.health().clone().monitor(shutdown.clone());
        let release = async {
            let mut shutdown = shutdown;
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                    _ = shutdown.changed() => return,
                }
                let store = self.store.clone();
                let _ = tokio::task::spawn_blocking(move || store.release_idle()).await;
            }
        };
        tokio::join!(health, release);
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&ObjStore) -> Result<T, Errno> + Send + 'static,
    ) -> Result<T, Errno> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|_| Errno::EIO)?
    }

    // statvfs's field types differ between targets (u32 or u64): the casts are needed there.
    #[allow(clippy::unnecessary_cast)]
    fn statfs(&self) -> Result<StatFs, Errno> {
        let st = self.store.statfs()?;
        let frsize = st.f_frsize as u64;
        Ok(StatFs {
            bsize: 4096,
            blocks: st.f_blocks as u64 * frsize / 4096,
            bfree: st.f_bfree as u64 * frsize / 4096,
            bavail: st.f_bavail as u64 * frsize / 4096,
            files: st.f_files as u64,
            ffree: st.f_ffree as u64,
            namelen: 255,
        })
    }
}

impl Service for Ost {
    /// A read over [`MAX_READ`] is refused before the server reserves its reply.
    fn admit(&self, req: &Request) -> Result<(), Errno> {
        match req {
            Request::OstRead { len, .. } => check_read(*len),
            _ => Ok(()),
        }
    }

    async fn handle(
        self: Arc<Self>,
        _ctx: RequestCtx,
        req: Request,
        bulk: Bytes,
    ) -> Result<(Reply, Bytes), Errno> {
        self.health().ensure()?;
        let r = self.clone().dispatch(req, bulk).await;
        if let Err(e) = r {
            // A storage error may mean the storage is going: check it now, not at the next
            // periodic check.
            let h = self.health().clone();
            let _ = tokio::task::spawn_blocking(move || h.after_error(e)).await;
        }
        r
    }
}

impl Ost {
    async fn dispatch(self: Arc<Self>, req: Request, bulk: Bytes) -> Result<(Reply, Bytes), Errno> {
        let none = Bytes::new();
        match req {
            Request::Ping => Ok((
                Reply::Pong {
                    target: format!("OST{:04x}", self.index),
                },
                none,
            )),
            Request::OstWrite {
                obj,
                parent,
                offset,
            } => {
                offset.checked_add(bulk.len() as u64).ok_or(Errno::EFBIG)?;
                let n = self
                    .blocking(move |s| s.write(&obj, &parent, offset, &bulk))
                    .await?;
                Ok((Reply::Written(n), none))
            }
            Request::OstRead { obj, offset, len } => {
                check_read(len)?;
                let data = self
                    .blocking(move |s| s.read(&obj, offset, len as usize))
                    .await?;
                Ok((Reply::Ok, Bytes::from(data)))
            }
            Request::OstGetattr { objs } => {
                let attrs = self
                    .blocking(move |s| {
                        Ok(objs
                            .iter()
                            .map(|o| {
                                s.getattr(o).ok().map(|(size, blocks, mtime)| ObjAttr {
                                    size,
                                    blocks,
                                    mtime,
                                })
                            })
                            .collect())
                    })
                    .await?;
                Ok((Reply::ObjAttrs(attrs), none))
            }
            Request::OstFiemap { obj } => {
                let ext = self.blocking(move |s| s.extents(&obj)).await?;
                Ok((Reply::ObjExtents(ext), none))
            }
            Request::OstPunch { obj, size } => {
                self.blocking(move |s| s.punch(&obj, size)).await?;
                Ok((Reply::Ok, none))
            }
            Request::OstFallocate {
                obj,
                parent,
                offset,
                len,
                mode,
            } => {
                self.blocking(move |s| s.fallocate(&obj, &parent, offset, len, mode))
                    .await?;
                Ok((Reply::Ok, none))
            }
            Request::OstDestroy { objs } => {
                self.blocking(move |s| {
                    for o in &objs {
                        s.destroy(o)?;
                    }
                    Ok(())
                })
                .await?;
                Ok((Reply::Ok, none))
            }
            Request::OstSync { objs } => {
                self.blocking(move |s| {
                    for o in &objs {
                        match s.sync(o) {
                            Ok(()) | Err(Errno::ENOENT) => {}
                            Err(e) => return Err(e),
                        }
                    }
                    Ok(())
                })
                .await?;
                Ok((Reply::Ok, none))
            }
            Request::OstStatfs | Request::Statfs => Ok((Reply::Statfs(self.statfs()?), none)),
            Request::OstPrecreate { seq, last } => {
                if last > DATA_SEQ_WIDTH || seq < nacre_core::fid::FID_SEQ_NORMAL {
                    return Err(Errno::EINVAL);
                }
                let cur = self.blocking(move |s| s.last_id(seq)).await?;
                if last.saturating_sub(cur) > MAX_PRECREATE {
                    return Err(Errno::EINVAL);
                }
                let id = self.blocking(move |s| s.precreate(seq, last)).await?;
                Ok((Reply::LastId(id), none))
            }
            Request::OstGetLastId { seq } => {
                let id = self.blocking(move |s| s.last_id(seq)).await?;
                Ok((Reply::LastId(id), none))
            }
            Request::Lfsck(r) => {
                if !r.within_bounds() {
                    return Err(Errno::EINVAL);
                }
                let l = self.lfsck.get().cloned().ok_or(Errno::ENOTSUP)?;
                Ok((Reply::Lfsck(l.handle(r).await?), none))
            }
            _ => Err(Errno::EPROTO),
        }
    }
}
