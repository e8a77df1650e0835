//! Paths of files, for reports: an OST asks the MDT that owns a file's FID (by its
//! sequence) for the file's path, as `lfs fid2path` does, over imports it makes when
//! first needed from the file system's configuration.

use nacre_core::fid::mdt_of_seq;
use nacre_core::{Fid, TargetName};
use nacre_osd::scrub::PathResolver;
use nacre_rpc::Import;
use nacre_rpc::conn::ConnConfig;
use nacre_rpc::msg::{FsConfig, Reply, Request};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::watch;

/// A resolver over the MDTs of `config`, connecting as `conn.client`.
pub fn resolver(config: watch::Receiver<FsConfig>, conn: ConnConfig) -> PathResolver {
    let imports: Arc<Mutex<HashMap<u32, Arc<Import>>>> = Arc::default();
    Arc::new(move |fid: Fid| {
        let mdt = mdt_of_seq(fid.seq).unwrap_or(0);
        let imp = imports
            .lock()
            .entry(mdt)
            .or_insert_with(|| {
                Arc::new(Import::new(
                    TargetName::mdt(mdt),
                    conn.clone(),
                    config.clone(),
                ))
            })
            .clone();
        Box::pin(async move {
            match imp
                .call(&Request::Fid2Path { fid }, bytes::Bytes::new())
                .await
            {
                Ok((Reply::Path(p), _)) => {
                    let p = String::from_utf8_lossy(&p).into_owned();
                    Some(if p.starts_with('/') {
                        p
                    } else {
                        format!("/{p}")
                    })
                }
                _ => None,
            }
        })
    })
}
