//! Helpers for tests that drive the client library against a file system in the test's
//! own process (`LocalCluster`).

use nacre::local::{self, LocalCluster};
use nacre::node::ServerTuning;
use nacre_client::{Client, MountSpec};
use nacre_core::{Errno, Fid};
use nacre_rpc::msg::{Cred, InodeInfo, LayoutRequest, OpenFlags};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const FILE: u32 = libc::S_IFREG | 0o644;
pub const DIR: u32 = libc::S_IFDIR | 0o755;

/// Formats a file system of `mdts` MDTs and `osts` OSTs in `dir` and starts it.
pub async fn start(dir: &Path, fsname: &str, mdts: u32, osts: u32) -> LocalCluster {
    local::format(dir, fsname, mdts, osts, 0).expect("format");
    LocalCluster::start(dir, ServerTuning::default())
        .await
        .expect("start")
}

pub async fn mount(c: &LocalCluster) -> Arc<Client> {
    let spec = MountSpec::parse(&c.spec(), c.key.clone(), "test-client").expect("spec");
    Client::mount(spec).await.expect("mount")
}

/// Mounts with the client key, as `nacre mount` does: a client-role peer.
pub async fn mount_as_client(c: &LocalCluster) -> Arc<Client> {
    let spec = MountSpec::parse(&c.spec(), c.key.client_key(), "test-client").expect("spec");
    Client::mount(spec).await.expect("mount")
}

/// Creates `name` in `dir` as root (`mode`: [`FILE`], [`DIR`], ...) with what it inherits.
pub async fn create(c: &Client, dir: Fid, name: &[u8], mode: u32) -> Result<InodeInfo, Errno> {
    c.create(
        dir,
        name,
        mode,
        0,
        &Cred::root(),
        None,
        LayoutRequest::Inherit,
        None,
        true,
    )
    .await
    .map(|(i, _)| i)
}

/// Creates `name` in `dir` with `layout`, open for reading and writing, as root.
#[allow(dead_code)]
pub async fn create_open(
    c: &Client,
    dir: Fid,
    name: &[u8],
    layout: nacre_core::Layout,
) -> (InodeInfo, nacre_client::file::OpenFile) {
    let (fi, h) = c
        .create(
            dir,
            name,
            FILE,
            0,
            &Cred::root(),
            None,
            LayoutRequest::Explicit(layout),
            Some(rw()),
            true,
        )
        .await
        .expect("create");
    let f = nacre_client::file::OpenFile::new(
        fi.attr.fid,
        h.expect("an open handle"),
        rw(),
        fi.layout.clone(),
    );
    (fi, f)
}

pub fn rw() -> OpenFlags {
    OpenFlags {
        read: true,
        write: true,
        ..OpenFlags::default()
    }
}

/// Bytes that differ from position to position and from seed to seed.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Waits until no MDT has a distributed operation left to finish, at most `limit`.
pub async fn quiesce_within(c: &Client, limit: Duration) {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if c.dne_status().await.iter().all(|r| matches!(r, Ok((0, 0)))) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("DNE operations left unfinished: {:?}", c.dne_status().await);
}
