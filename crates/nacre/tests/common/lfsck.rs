//! Helpers for LFSCK tests on an in-process file system: a population of files whose
//! contents are checked afterwards, runs of the checker to completion, its counters,
//! and `nacre check` on the stopped stores between runs.

use super::cluster::{DIR, FILE, create, mount, pattern, rw, start};
use bytes::Bytes;
use nacre::local::LocalCluster;
use nacre::node::ServerTuning;
use nacre_client::Client;
use nacre_core::{Fid, Layout};
use nacre_lfsck::MdtLfsck;
use nacre_lfsck::offline::CheckReport;
use nacre_lustreapi::lfsck::{
    LPF_ALL_TGT, LPF_BROADCAST, LSV_SPEED_LIMIT, LayoutInconsistency, LayoutStatus, LfsckStatus,
    NamespaceStatus, ScrubFile, ScrubStatus, TYPE_LAYOUT, TYPE_NAMESPACE, TYPE_SCRUB,
};
use nacre_mdt::Mdt;
use nacre_rpc::lfsck::StartArgs;
use nacre_rpc::msg::{Cred, LayoutRequest};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest a check of these small file systems may take.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// A running file system in a temporary directory, with a client.
pub struct Fs {
    pub tmp: tempfile::TempDir,
    pub cl: Option<LocalCluster>,
    pub c: Arc<Client>,
}

/// A file of the population: where it is and what it holds.
pub struct Kept {
    pub fid: Fid,
    pub name: String,
    pub data: Vec<u8>,
}

impl Fs {
    pub async fn new(mdts: u32, osts: u32) -> Fs {
        super::log_to_test_output();
        let tmp = tempfile::tempdir().expect("tmp");
        let cl = start(tmp.path(), "lfsck", mdts, osts).await;
        let c = mount(&cl).await;
        Fs {
            tmp,
            cl: Some(cl),
            c,
        }
    }

    pub fn dir(&self) -> PathBuf {
        self.tmp.path().to_path_buf()
    }

    pub fn cl(&self) -> &LocalCluster {
        self.cl.as_ref().expect("running")
    }

    pub fn mdt(&self, i: u32) -> &Arc<Mdt> {
        self.cl().mdts[i as usize]
            .as_ref()
            .and_then(|s| s.mdt())
            .expect("mdt")
    }

    pub fn checker(&self, i: u32) -> &Arc<MdtLfsck> {
        self.cl().mdts[i as usize]
            .as_ref()
            .and_then(|s| s.lfsck.as_ref())
            .expect("lfsck")
    }

    pub async fn mkdir(&self, parent: Fid, name: &str) -> Fid {
        create(&self.c, parent, name.as_bytes(), DIR)
            .await
            .expect("mkdir")
            .attr
            .fid
    }

    /// A file holding `data`, striped over `stripes` OSTs.
    pub async fn write(&self, parent: Fid, name: &str, data: &[u8], stripes: i32) -> Fid {
        self.write_layout(parent, name, data, Layout::plain(stripes, 65536, -1))
            .await
    }

    /// A file holding `data`, with `layout`.
    pub async fn write_layout(&self, parent: Fid, name: &str, data: &[u8], layout: Layout) -> Fid {
        let (fi, f) = super::cluster::create_open(&self.c, parent, name.as_bytes(), layout).await;
        if !data.is_empty() {
            self.c
                .write(&f, 0, Bytes::from(data.to_vec()))
                .await
                .expect("write");
        }
        self.c.release(&f).await.expect("close");
        fi.attr.fid
    }

    /// Reads the whole of `fid`, or the error the client met.
    pub async fn try_read(&self, fid: Fid) -> Result<Vec<u8>, nacre_core::Errno> {
        let (f, info) = self.c.open(fid, rw(), &Cred::root()).await?;
        let data = self.c.read(&f, 0, info.attr.size.max(1)).await;
        let closed = self.c.release(&f).await;
        let data = data?;
        closed?;
        Ok(data.to_vec())
    }

    /// Creates `parent/name` holding `data` on one stripe, or the error the client met.
    pub async fn try_write(
        &self,
        parent: Fid,
        name: &str,
        data: &[u8],
    ) -> Result<Fid, nacre_core::Errno> {
        let (fi, h) = self
            .c
            .create(
                parent,
                name.as_bytes(),
                FILE,
                0,
                &Cred::root(),
                None,
                LayoutRequest::Inherit,
                Some(rw()),
                true,
            )
            .await?;
        let h = h.ok_or(nacre_core::Errno::EPROTO)?;
        let f = nacre_client::file::OpenFile::new(fi.attr.fid, h, rw(), fi.layout.clone());
        let wrote = self.c.write(&f, 0, Bytes::from(data.to_vec())).await;
        let closed = self.c.release(&f).await;
        wrote?;
        closed?;
        Ok(fi.attr.fid)
    }

    /// Applies `op` to `target` through the control path of `nacre inject`.
    pub async fn inject(
        &self,
        target: &str,
        op: nacre::inject_ctl::InjectOp,
    ) -> Vec<nacre::inject_ctl::InjectedItem> {
        self.cl()
            .inject_targets()
            .inject(target, op)
            .await
            .unwrap_or_else(|(e, m)| panic!("inject on {target}: {e:?}: {m}"))
    }

    pub async fn read(&self, fid: Fid) -> Vec<u8> {
        let (f, info) = self
            .c
            .open(fid, rw(), &nacre_rpc::msg::Cred::root())
            .await
            .expect("open");
        let data = self
            .c
            .read(&f, 0, info.attr.size.max(1))
            .await
            .expect("read");
        self.c.release(&f).await.expect("close");
        data.to_vec()
    }

    /// `n` files of different sizes and contents in a new directory `name`.
    pub async fn populate(&self, name: &str, n: usize) -> Vec<Kept> {
        let d = self.mkdir(self.c.root(), name).await;
        let mut out = Vec::new();
        for i in 0..n {
            let name = format!("keep{i}");
            let data = pattern(1000 + i * 4099, i as u8);
            let fid = self.write(d, &name, &data, 1 + (i % 2) as i32).await;
            out.push(Kept { fid, name, data });
        }
        out
    }

    /// A directory `name` of `n` victims, file `v<i>` holding `victim <i>` on one stripe.
    pub async fn victims(&self, name: &str, n: usize) -> (Fid, Vec<Fid>) {
        let d = self.mkdir(self.c.root(), name).await;
        let mut v = Vec::new();
        for i in 0..n {
            v.push(
                self.write(d, &format!("v{i}"), format!("victim {i}").as_bytes(), 1)
                    .await,
            );
        }
        (d, v)
    }

    /// Every kept file still reads back as written.
    pub async fn verify(&self, kept: &[Kept]) {
        for k in kept {
            assert!(
                self.read(k.fid).await == k.data,
                "{} ({}) changed",
                k.name,
                k.fid
            );
        }
    }

    /// Runs the components `active` (`TYPE_*`) on MDT `i` with `flags` (`LPF_*`) and
    /// waits for the run's end (within [`RUN_LIMIT`]).
    async fn run_to_end(&self, i: u32, active: u16, flags: u16) -> &Arc<MdtLfsck> {
        self.run_args_to_end(
            i,
            StartArgs {
                active,
                flags,
                ..StartArgs::default()
            },
        )
        .await
    }

    /// Starts a run on MDT `i` with `args` and waits for its end (within [`RUN_LIMIT`]).
    async fn run_args_to_end(&self, i: u32, args: StartArgs) -> &Arc<MdtLfsck> {
        let l = self.checker(i);
        l.start(args).await.expect("start");
        let end = Instant::now() + RUN_LIMIT;
        while l.running() {
            assert!(Instant::now() < end, "LFSCK did not end");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        l
    }

    /// Runs namespace and layout together on MDT `i` with `flags` (`LPF_*`) and a speed
    /// limit (`-s`, 0: none), coupled (`mdd.*.lfsck_coupled`) or not, to their end.
    pub async fn lfsck_both(
        &self,
        i: u32,
        flags: u16,
        speed_limit: u32,
        coupled: bool,
    ) -> (NamespaceStatus, LayoutStatus) {
        let l = self.checker(i);
        l.coupled
            .store(coupled, std::sync::atomic::Ordering::Relaxed);
        self.run_args_to_end(
            i,
            StartArgs {
                active: TYPE_NAMESPACE | TYPE_LAYOUT,
                flags,
                valid: LSV_SPEED_LIMIT,
                speed_limit,
                ..StartArgs::default()
            },
        )
        .await;
        let st = l.state.lock();
        assert_eq!(
            st.ns.status,
            LfsckStatus::Completed,
            "{}",
            l.namespace_text()
        );
        assert_eq!(st.lo.status, LfsckStatus::Completed, "{}", l.layout_text());
        (st.ns.clone(), st.lo.clone())
    }

    /// Runs the namespace check on MDT `i` with `flags` (`LPF_*`) to its end.
    pub async fn lfsck(&self, i: u32, flags: u16) -> NamespaceStatus {
        let l = self.run_to_end(i, TYPE_NAMESPACE, flags).await;
        let st = l.state.lock().ns.clone();
        assert!(
            matches!(st.status, LfsckStatus::Completed),
            "status {:?}:\n{}",
            st.status,
            l.namespace_text()
        );
        st
    }

    /// Runs the OI scrub on MDT `i` with `flags` (`LPF_*`) to its end.
    pub async fn oi_scrub(&self, i: u32, flags: u16) -> ScrubFile {
        let l = self.run_to_end(i, TYPE_SCRUB, flags).await;
        let st = l.state.lock().scrub.clone();
        assert_eq!(st.status, ScrubStatus::Completed, "{}", l.oi_scrub_text());
        st
    }

    /// The object store of OST `i`.
    pub fn ost(&self, i: u32) -> &Arc<nacre_osd::ObjStore> {
        self.cl().osts[i as usize]
            .as_ref()
            .and_then(|s| s.ost())
            .expect("ost")
            .store()
    }

    /// Runs the layout check on MDT `i` with `flags` (`LPF_*`) to its end.
    pub async fn lfsck_layout(&self, i: u32, flags: u16) -> LayoutStatus {
        let l = self.run_to_end(i, TYPE_LAYOUT, flags).await;
        let st = l.state.lock().lo.clone();
        assert!(
            matches!(st.status, LfsckStatus::Completed),
            "status {:?}:\n{}",
            st.status,
            l.layout_text()
        );
        st
    }

    /// Runs the namespace check on every MDT (`-A`, sponsored by MDT0) to its end;
    /// returns each MDT's record.
    pub async fn lfsck_all(&self, flags: u16) -> Vec<NamespaceStatus> {
        let mdts = self.cl().mdts.len() as u32;
        // A run is told from the one before by its start time, in seconds: this one starts
        // in a later second than every MDT's last, so a peer the broadcast has not reached
        // yet is not taken for one that finished.
        let before: Vec<i64> = (0..mdts)
            .map(|i| self.checker(i).state.lock().ns.time_latest_start)
            .collect();
        let newest = before.iter().copied().max().unwrap_or(0);
        while nacre_lfsck::control::now_secs() <= newest {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.checker(0)
            .start(StartArgs {
                active: TYPE_NAMESPACE,
                flags: flags | LPF_ALL_TGT | LPF_BROADCAST,
                ..StartArgs::default()
            })
            .await
            .expect("start");
        let end = Instant::now() + RUN_LIMIT;
        let unfinished = |i: u32| {
            let l = self.checker(i);
            let (started, status) = {
                let st = l.state.lock();
                (st.ns.time_latest_start, st.ns.status)
            };
            l.running()
                || started <= before[i as usize]
                || matches!(
                    status,
                    LfsckStatus::Init | LfsckStatus::ScanningPhase1 | LfsckStatus::ScanningPhase2
                )
        };
        while (0..mdts).any(unfinished) {
            assert!(Instant::now() < end, "LFSCK did not end");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (0..mdts)
            .map(|i| {
                let l = self.checker(i);
                let st = l.state.lock().ns.clone();
                assert!(
                    matches!(st.status, LfsckStatus::Completed),
                    "MDT{i}: status {:?}:\n{}",
                    st.status,
                    l.namespace_text()
                );
                st
            })
            .collect()
    }

    /// Stops the file system, runs `nacre check` on its stores, and starts it again.
    pub async fn check(&mut self) -> CheckReport {
        self.c.disconnect().await;
        self.c.unmount();
        if let Some(cl) = self.cl.take() {
            cl.stop().await;
        }
        let rep = nacre::check::check_local(self.tmp.path()).expect("check");
        let cl = LocalCluster::start(self.tmp.path(), ServerTuning::default())
            .await
            .expect("restart");
        self.c = mount(&cl).await;
        self.cl = Some(cl);
        rep
    }

    pub async fn stop(mut self) {
        self.c.disconnect().await;
        self.c.unmount();
        if let Some(cl) = self.cl.take() {
            cl.stop().await;
        }
    }
}

/// The repair counters of a namespace record that are not zero.
pub fn repaired(ns: &NamespaceStatus) -> BTreeMap<&'static str, u64> {
    let all = [
        ("dirent", ns.dirent_repaired),
        ("linkea", ns.linkea_repaired),
        ("nlinks", ns.objs_nlink_repaired),
        ("multiple_linked", ns.mul_linked_repaired),
        ("unmatched_pairs", ns.unmatched_pairs_repaired),
        ("dangling", ns.dangling_repaired),
        ("multiple_referenced", ns.mul_ref_repaired),
        ("bad_file_type", ns.bad_type_repaired),
        ("lost_dirent", ns.lost_dirent_repaired),
        ("local_lost_found_moved", ns.local_lpf_moved),
        ("striped_dirs", ns.striped_dirs_repaired),
        ("striped_shards", ns.striped_shards_repaired),
        ("name_hash", ns.name_hash_repaired),
        ("agent_entries", ns.agent_entries_repaired),
        ("dne_records", ns.dne_records_repaired),
        ("failed_phase1", ns.items_failed),
        ("failed_phase2", ns.objs_failed_phase2),
    ];
    all.into_iter().filter(|(_, v)| *v > 0).collect()
}

/// `[(counter, n)]` as a map, for comparing with [`repaired`].
pub fn counts(want: &[(&'static str, u64)]) -> BTreeMap<&'static str, u64> {
    want.iter().copied().collect()
}

/// The repair counters of several records, added up.
pub fn repaired_all(all: &[NamespaceStatus]) -> BTreeMap<&'static str, u64> {
    let mut out = BTreeMap::new();
    for ns in all {
        for (k, v) in repaired(ns) {
            *out.entry(k).or_default() += v;
        }
    }
    out
}

/// The counters of a layout record that are not zero.
pub fn layout_repaired(lo: &LayoutStatus) -> BTreeMap<&'static str, u64> {
    let mut out: BTreeMap<&'static str, u64> = [
        LayoutInconsistency::Dangling,
        LayoutInconsistency::UnmatchedPair,
        LayoutInconsistency::MultipleReferenced,
        LayoutInconsistency::Orphan,
        LayoutInconsistency::InconsistentOwner,
        LayoutInconsistency::Others,
    ]
    .into_iter()
    .map(|w| (w.name(), lo.repaired[w as usize]))
    .collect();
    out.insert("skipped", lo.skipped);
    out.insert("failed_phase1", lo.failed_phase1);
    out.insert("failed_phase2", lo.failed_phase2);
    out.retain(|_, v| *v > 0);
    out
}
