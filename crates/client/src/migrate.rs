//! Layout changes from the client: component add/delete and `lfs migrate`.
//!
//! Migration copies a file's bytes into a volatile file created with the new layout, then
//! asks the MDT to swap the layouts; the file keeps its FID, contents and attributes. The
//! MDT refuses the swap if anyone opened the file for writing meanwhile or its layout
//! changed, and the volatile file then disappears: the old layout stays intact.

use crate::Client;
use crate::file::OpenFile;
use bytes::Bytes;
use nacre_core::attr::SetAttr;
use nacre_core::{Component, Errno, Fid, Layout};
use nacre_rpc::msg::{Cred, InodeInfo, OpenFlags, Reply, Request};
use std::sync::Arc;

/// Bytes copied per step of a migration.
pub const MIGRATE_CHUNK: u64 = 4 << 20;

impl Client {
    pub async fn add_components(
        &self,
        fid: Fid,
        components: Vec<Component>,
        cred: &Cred,
    ) -> Result<InodeInfo, Errno> {
        match self
            .md_call(
                self.mdt_of(&fid),
                Request::AddComponents {
                    fid,
                    components,
                    cred: cred.clone(),
                },
            )
            .await?
        {
            Reply::Inode(i) => Ok(i),
            _ => Err(Errno::EPROTO),
        }
    }

    pub async fn del_components(
        &self,
        fid: Fid,
        id: Option<u32>,
        flags: u32,
        neg: u32,
        cred: &Cred,
    ) -> Result<InodeInfo, Errno> {
        match self
            .md_call(
                self.mdt_of(&fid),
                Request::DelComponents {
                    fid,
                    id,
                    flags,
                    neg,
                    cred: cred.clone(),
                },
            )
            .await?
        {
            Reply::Inode(i) => Ok(i),
            _ => Err(Errno::EPROTO),
        }
    }

    /// Rewrites `fid`'s data into `layout`, keeping its FID, bytes and attributes.
    pub async fn migrate(
        self: &Arc<Self>,
        fid: Fid,
        layout: Layout,
        cred: &Cred,
    ) -> Result<InodeInfo, Errno> {
        let ro = OpenFlags {
            read: true,
            ..OpenFlags::default()
        };
        let (src, info) = self.open(fid, ro, cred).await?;
        let res = self.migrate_open(&src, &info, layout, cred).await;
        let closed = self.release(&src).await;
        let out = res?;
        closed?;
        Ok(out)
    }

    async fn migrate_open(
        self: &Arc<Self>,
        src: &OpenFile,
        info: &InodeInfo,
        layout: Layout,
        cred: &Cred,
    ) -> Result<InodeInfo, Errno> {
        if !info.attr.is_reg() {
            return Err(Errno::EINVAL);
        }
        let fid = src.fid;
        let generation = info.layout.as_ref().map_or(0, |l| l.layout_gen);
        let size = info.attr.size;
        let (vinfo, handle) = match self
            .md_call(
                self.mdt_of(&fid),
                Request::CreateVolatile {
                    fid,
                    layout,
                    cred: cred.clone(),
                },
            )
            .await?
        {
            Reply::Opened { inode, handle, .. } => (inode, handle),
            _ => return Err(Errno::EPROTO),
        };
        let wf = OpenFlags {
            write: true,
            ..OpenFlags::default()
        };
        let vol = OpenFile::new(vinfo.attr.fid, handle, wf, vinfo.layout.clone());
        let copied = self.copy_into(src, &vol, size, cred).await;
        let swapped = match copied {
            Ok(()) => {
                let req = Request::SwapLayouts {
                    fid,
                    volatile: vol.fid,
                    layout_gen: generation,
                    cred: cred.clone(),
                };
                match self.md_call(self.mdt_of(&fid), req).await {
                    Ok(Reply::Inode(i)) => Ok(i),
                    Ok(_) => Err(Errno::EPROTO),
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        };
        // Closing the volatile handle removes it unless it became the file's layout.
        let _ = self.release(&vol).await;
        swapped
    }

    /// Copies `size` bytes, leaving all-zero stretches as holes, and makes the copy durable.
    async fn copy_into(
        self: &Arc<Self>,
        src: &OpenFile,
        dst: &OpenFile,
        size: u64,
        cred: &Cred,
    ) -> Result<(), Errno> {
        let mut off = 0;
        while off < size {
            let n = MIGRATE_CHUNK.min(size - off);
            let data: Bytes = self.read(src, off, n).await?;
            if data.len() as u64 != n {
                // The file shrank under us: someone else is changing it.
                return Err(Errno::EBUSY);
            }
            if data.iter().any(|b| *b != 0) {
                self.write(dst, off, data).await?;
            }
            off += n;
        }
        // A trailing hole still counts in the size.
        let attr = SetAttr {
            size: Some(size),
            ..SetAttr::default()
        };
        self.setattr(dst.fid, attr, cred, Some(dst.handle)).await?;
        self.fsync(dst).await
    }
}
