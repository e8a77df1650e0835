//! Faults in the middle of streaming I/O on a FUSE mount: a file system run in the test's
//! own process (so a test can stop, restart or damage one OST while threads read or
//! write through the mount), and IOR-style streams paused at fixed points around the
//! fault.

use super::cluster::pattern;
use nacre::cmd::bench_fs::BenchFs;
use nacre_client::Client;
use nacre_core::layout::{Component, EOF, pflr_id};
use nacre_core::{Fid, Layout};
use nacre_rpc::msg::Cred;
use std::io::{Read, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Bytes per read or write call of a stream (IOR -t).
pub const XFER: usize = 1 << 20;
/// Stripe size of the layouts below: several stripes per file, several RPCs per stripe.
pub const STRIPE: u32 = 1 << 20;

/// Two mirrors of `stripes` stripes each (`lfs setstripe -N2 -c N -S 1M`).
pub fn mirrored(stripes: i32) -> Layout {
    let components = (1..=2)
        .map(|m| {
            let mut c = Component::raid0(0, EOF, stripes, STRIPE, -1);
            c.id = pflr_id(m, 0);
            c
        })
        .collect();
    Layout {
        components,
        ..Layout::composite(Vec::new())
    }
}

/// `lfs setstripe -c 4 -S 1M -i 0 --ec 4+2`: every file's data on OSTs 0 to 3, so an OST
/// a test stops holds the same kind of stripe (data or parity) of every file.
pub fn ec42() -> Layout {
    Layout {
        components: nacre_core::ec::with_parity(
            vec![Component::raid0(0, EOF, 4, STRIPE, 0)],
            &[Some((4, 2))],
        ),
        ..Layout::composite(Vec::new())
    }
}

/// A file system of 1 MDT and `osts` OSTs served by this process and mounted with FUSE.
pub struct MountedFs {
    pub fs: Option<BenchFs>,
    _tmp: tempfile::TempDir,
}

impl MountedFs {
    pub fn up(name: &str, osts: u32) -> MountedFs {
        let tmp = tempfile::tempdir().expect("tmp");
        let fs = BenchFs::up(name, name, osts, Some(tmp.path())).expect("file system up");
        MountedFs {
            fs: Some(fs),
            _tmp: tmp,
        }
    }

    fn fs(&self) -> &BenchFs {
        self.fs.as_ref().expect("running")
    }

    pub fn client(&self) -> Arc<Client> {
        self.fs().client.clone()
    }

    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.fs().rt.block_on(f)
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.fs().mnt.join(rel)
    }

    /// The directory of OST `i`'s targets files.
    pub fn ost_dir(&self, i: u32) -> PathBuf {
        self.fs().dir.join(format!("ost{i}"))
    }

    /// Makes directory `name` of the root with `layout` as the default of its files.
    pub fn layout_dir(&self, name: &str, layout: Layout) -> PathBuf {
        let p = self.path(name);
        std::fs::create_dir(&p).expect("mkdir");
        let c = self.client();
        self.block_on(async {
            let d = c.lookup(c.root(), name.as_bytes(), &Cred::root()).await?;
            c.set_default_layout(d.attr.fid, Some(layout), &Cred::root())
                .await
        })
        .expect("default layout");
        p
    }

    /// The FID of `rel` (a path under the mount).
    pub fn fid(&self, rel: &str) -> Fid {
        let c = self.client();
        self.block_on(async {
            let mut fid = c.root();
            for name in rel.split('/').filter(|n| !n.is_empty()) {
                fid = c
                    .lookup(fid, name.as_bytes(), &Cred::root())
                    .await?
                    .attr
                    .fid;
            }
            Ok::<_, nacre_core::Errno>(fid)
        })
        .unwrap_or_else(|e| panic!("lookup {rel}: {e}"))
    }

    /// The layout of `fid` as its MDT has it now.
    pub fn layout(&self, fid: Fid) -> Layout {
        let c = self.client();
        self.block_on(c.getattr(fid))
            .expect("getattr")
            .layout
            .expect("layout")
    }

    pub fn stop_ost(&mut self, i: u32) {
        let fs = self.fs.as_mut().expect("running");
        fs.rt.block_on(fs.cluster.stop_ost(i));
    }

    pub fn start_ost(&mut self, i: u32) {
        let fs = self.fs.as_mut().expect("running");
        fs.rt
            .block_on(fs.cluster.start_ost(i))
            .unwrap_or_else(|e| panic!("restart OST{i}: {e:#}"));
    }

    /// Waits until the MDT's size of `fid` is exact (settled after the last close), so a
    /// stat with an OST down needs no glimpse of it.
    pub fn settled(&self, fid: Fid) {
        let c = self.client();
        let end = Instant::now() + Duration::from_secs(20);
        while Instant::now() < end {
            if self
                .block_on(c.getattr(fid))
                .expect("getattr")
                .size_authoritative
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("size of {fid} never settled");
    }
}

impl Drop for MountedFs {
    fn drop(&mut self) {
        if let Some(fs) = self.fs.take() {
            fs.down();
        }
    }
}

/// Drops the page cache's copy of `p`, so the next read goes to the file system.
pub fn uncache(p: &Path) {
    let f = std::fs::File::open(p).expect("open");
    // SAFETY: a valid descriptor; the advice only drops clean cached pages.
    let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(r, 0, "fadvise {}", p.display());
}

/// What each stream of a faulted run did: its bytes read (or written) and its error.
pub type StreamResult = std::io::Result<Vec<u8>>;

/// Runs one thread per file, each streaming the whole file in [`XFER`] calls: reading it
/// (`write == None`) or writing the given bytes, then fsync and close (IOR -e). Every
/// stream stops at half its length until all have got there; then `fault` runs while the
/// streams go on to three quarters (calls in flight as the fault happens), and the last
/// quarter runs once `fault` returned. Returns each stream's result.
pub fn faulted_streams(
    files: &[PathBuf],
    write: Option<&[Vec<u8>]>,
    len: usize,
    fault: impl FnOnce(),
) -> Vec<StreamResult> {
    let gate_a = Arc::new(Barrier::new(files.len() + 1));
    let gate_b = Arc::new(Barrier::new(files.len() + 1));
    let threads: Vec<_> = files
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let (p, a, b) = (p.clone(), gate_a.clone(), gate_b.clone());
            let data = write.map(|w| w[i].clone());
            std::thread::spawn(move || stream(&p, data, len, &a, &b))
        })
        .collect();
    gate_a.wait();
    fault();
    gate_b.wait();
    threads
        .into_iter()
        .map(|t| t.join().expect("stream thread"))
        .collect()
}

fn stream(
    p: &Path,
    data: Option<Vec<u8>>,
    len: usize,
    gate_a: &Barrier,
    gate_b: &Barrier,
) -> StreamResult {
    let mut f = match &data {
        Some(_) => std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(p),
        None => std::fs::File::open(p),
    };
    let mut out = Vec::with_capacity(len);
    let mut pos = 0usize;
    // Gates are passed even after an error, so no other thread waits forever.
    let mut result = Ok(());
    for (stop, gate) in [
        (len / 2, Some(gate_a)),
        (len * 3 / 4, Some(gate_b)),
        (len, None),
    ] {
        while result.is_ok() && pos < stop {
            let n = XFER.min(stop - pos);
            result = match (&mut f, &data) {
                (Err(e), _) => Err(std::io::Error::new(e.kind(), e.to_string())),
                (Ok(f), Some(d)) => f.write_all(&d[pos..pos + n]),
                (Ok(f), None) => {
                    let mut buf = vec![0u8; n];
                    f.read_exact(&mut buf).map(|()| out.extend_from_slice(&buf))
                }
            };
            pos += n;
        }
        if let Some(g) = gate {
            g.wait();
        }
    }
    result?;
    let f = f?;
    if data.is_some() {
        f.sync_all()?;
    }
    drop(f);
    Ok(out)
}

/// Writes `files` whole through the mount (each `pattern(len, seed + i)`), fsynced, then
/// drops them from the page cache; returns the contents.
pub fn write_files(files: &[PathBuf], len: usize, seed: u8) -> Vec<Vec<u8>> {
    files
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let data = pattern(len, seed.wrapping_add(i as u8));
            let mut f = std::fs::File::create(p).expect("create");
            f.write_all(&data).expect("write");
            f.sync_all().expect("fsync");
            drop(f);
            uncache(p);
            data
        })
        .collect()
}

/// Each stream ended without error and with `want[i]` (a read stream's bytes).
pub fn streams_ok(results: &[StreamResult], want: Option<&[Vec<u8>]>, what: &str) {
    for (i, r) in results.iter().enumerate() {
        let got = r
            .as_ref()
            .unwrap_or_else(|e| panic!("{what}: stream {i} failed: {e}"));
        if let Some(w) = want {
            let first = got.iter().zip(&w[i]).position(|(a, b)| a != b);
            assert!(
                *got == w[i],
                "{what}: stream {i} read other bytes ({} of {}, first difference at {first:?})",
                got.len(),
                w[i].len()
            );
        }
    }
}

/// Each file reads back through the mount (page cache dropped first) as `want[i]`.
pub fn files_read_back(files: &[PathBuf], want: &[Vec<u8>], what: &str) {
    for (p, w) in files.iter().zip(want) {
        uncache(p);
        let got = std::fs::read(p).unwrap_or_else(|e| panic!("{what}: read {}: {e}", p.display()));
        let first = got.iter().zip(w).position(|(a, b)| a != b);
        assert!(
            got == *w,
            "{what}: {} differs ({} of {} bytes, first difference at {first:?})",
            p.display(),
            got.len(),
            w.len()
        );
    }
}
