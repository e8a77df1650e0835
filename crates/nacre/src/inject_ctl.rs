//! The process's side of `nacre inject`: faults made on purpose in the targets it serves,
//! asked for through its control socket (see [`crate::ctl`]). Each request names one
//! target and one thing to break there, found by FID; the command picks what to break
//! (walking the mount) and sends each request to the process that serves the target.
//! Inconsistencies go through [`nacre_lfsck::inject`] and [`nacre_osd::inject`]; the fault
//! models are switches the targets honour: a-DevFail in the storage's health
//! ([`nacre_osd::Health::inject_failure`]), c-Network in the request handling
//! ([`nacre_rpc::fault::NetFault`]).

use nacre_core::{Errno, Fid, FileKind, TargetName};
use nacre_lfsck::inject;
use nacre_mdt::Mdt;
use nacre_mgs::Mgs;
use nacre_ost::Ost;
use nacre_rpc::fault::NetFault;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What a request breaks on its target.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum InjectOp {
    /// MDT: the name `parent/name` removed (LFSCK: `lost_dirent`).
    RemoveName {
        parent: Fid,
        name: Vec<u8>,
    },
    /// MDT: the name removed and its object's linkEA emptied (`local_lost_found_moved`).
    OrphanInode {
        parent: Fid,
        name: Vec<u8>,
    },
    /// MDT: the linkEA of `fid` emptied (`linkea`, one per name).
    DropLinks {
        fid: Fid,
    },
    /// MDT: the type the entry `parent/name` records set to a FIFO (`bad_file_type`).
    FlipDirentType {
        parent: Fid,
        name: Vec<u8>,
    },
    /// MDT: the FID in the entry `parent/name` replaced by garbage (`dirent`).
    CorruptDirentFid {
        parent: Fid,
        name: Vec<u8>,
    },
    /// MDT: the link count of `fid` set to `nlink` (`nlinks`).
    SetNlink {
        fid: Fid,
        nlink: u32,
    },
    /// MDT: slot `index` of striped directory `fid`'s LMV corrupted (`striped_dirs`).
    CorruptLmvSlot {
        fid: Fid,
        index: u32,
    },
    /// MDT: the object index entry of `fid` removed (OI scrub: `updated`).
    DropOiEntry {
        fid: Fid,
    },
    /// MDT: the whole object index deleted (OI scrub: one per inode).
    DropOi,
    /// MDT: stripe 0 of `b` made to hold `a`'s stripe 0 object (`multiple_referenced`);
    /// answers with `b`'s own object, which the command then removes so that nothing
    /// else (an orphan) is left to count.
    ShareObject {
        a: Fid,
        b: Fid,
    },
    /// MDT: stripe 0 of `fid` pointed at an object never created; the real one becomes
    /// an orphan LFSCK puts back (`orphan`).
    DetachObject {
        fid: Fid,
    },
    /// MDT and OST `ost` (both served here): an object holding `data` for `parent`, a
    /// file that does not exist (`orphan`).
    OrphanOstObject {
        ost: u32,
        parent: Fid,
        data: Vec<u8>,
    },
    /// OST: object `obj` removed (`dangling`).
    RemoveOstObject {
        obj: Fid,
    },
    /// OST: object `obj` truncated to nothing (`dangling`).
    TruncateOstObject {
        obj: Fid,
    },
    ChangeOstOwner {
        obj: Fid,
        uid: u32,
        gid: u32,
    },
    /// OST: the filter fid of `obj` pointed at a file that does not exist (`unmatched_pair`).
    CorruptFilterFid {
        obj: Fid,
    },
    /// OST: LAST_ID of every sequence rewound to 1 (`others`, one per sequence).
    RewindLastId,
    /// OST: one bit of object `obj` flipped at a random offset (found by checksums).
    FlipBit {
        obj: Fid,
        seed: u64,
    },
    /// Any target: a-DevFail, its storage failed (every request EIO); off with `clear`.
    DevFail {
        clear: bool,
    },
    /// Any target: c-Network, its replies dropped; off with `clear`.
    Network {
        clear: bool,
    },
}

/// One thing a request broke (or a switch it turned).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct InjectedItem {
    pub what: String,
    pub fid: Option<Fid>,
    /// More to say: the object a shared stripe left behind, a flipped bit's place.
    pub detail: String,
}

/// The targets this process serves, for `nacre inject`.
#[derive(Default, Clone)]
pub struct LocalTargets {
    pub mgs: Option<(Arc<Mgs>, Arc<NetFault>)>,
    pub mdts: Vec<(Arc<Mdt>, Arc<NetFault>)>,
    pub osts: Vec<(Arc<Ost>, Arc<NetFault>)>,
}

/// Why a request failed: an errno and what to print.
pub type CtlErr = (Errno, String);

fn item(i: inject::Injected) -> InjectedItem {
    InjectedItem {
        what: i.what.to_string(),
        fid: Some(i.fid),
        detail: String::new(),
    }
}

fn failed(target: &str, e: Errno) -> CtlErr {
    (e, format!("{target}: injection failed: {}", e.describe()))
}

/// What a fault switch says it did.
fn switched(what: &str, clear: bool, was: bool) -> InjectedItem {
    let detail = match (clear, was) {
        (false, false) => "injected",
        (false, true) => "already injected",
        (true, true) => "cleared",
        (true, false) => "was not injected",
    };
    InjectedItem {
        what: what.to_string(),
        fid: None,
        detail: detail.to_string(),
    }
}

const DEV_FAIL: &str = "a-DevFail";
const NETWORK: &str = "c-Network";
/// The reason a target's `health_check` shows while a device failure is injected.
pub const DEV_FAIL_REASON: &str = "device failure injected (nacre inject a-DevFail)";

impl crate::local::LocalCluster {
    /// The targets running now, for [`LocalTargets`].
    pub fn inject_targets(&self) -> LocalTargets {
        LocalTargets {
            mgs: self.mgs_net().map(|n| (self.mgs.clone(), n)),
            mdts: self
                .mdts
                .iter()
                .flatten()
                .filter_map(|s| Some((s.mdt()?.clone(), s.net.clone())))
                .collect(),
            osts: self
                .osts
                .iter()
                .flatten()
                .filter_map(|s| Some((s.ost()?.clone(), s.net.clone())))
                .collect(),
        }
    }
}

impl LocalTargets {
    /// Whether `target` (`MGS`, `MDT0000`, `OST0001`) is served here.
    pub fn serves(&self, target: &str) -> bool {
        match TargetName::parse(target) {
            Some(t) if t.kind == nacre_core::TargetKind::Mdt => self.mdt(t.index).is_some(),
            Some(t) => self.ost(t.index).is_some(),
            None => target == "MGS" && self.mgs.is_some(),
        }
    }

    fn mdt(&self, index: u32) -> Option<&(Arc<Mdt>, Arc<NetFault>)> {
        self.mdts.iter().find(|(m, _)| m.index == index)
    }

    fn ost(&self, index: u32) -> Option<&(Arc<Ost>, Arc<NetFault>)> {
        self.osts.iter().find(|(o, _)| o.index == index)
    }

    /// Applies `op` to `target`; ENODEV when it is not served here.
    pub async fn inject(&self, target: &str, op: InjectOp) -> Result<Vec<InjectedItem>, CtlErr> {
        let not_here = || {
            (
                Errno::ENODEV,
                format!("{target}: not served by this process"),
            )
        };
        if target == "MGS" {
            let (mgs, net) = self.mgs.as_ref().ok_or_else(not_here)?;
            return match op {
                InjectOp::DevFail { clear } => Ok(vec![switched(
                    DEV_FAIL,
                    clear,
                    mgs.set_device_failed(!clear),
                )]),
                InjectOp::Network { clear } => {
                    Ok(vec![switched(NETWORK, clear, net.set_dropping(!clear))])
                }
                _ => Err((
                    Errno::EINVAL,
                    "the MGS holds no file system data: only a-DevFail and c-Network apply"
                        .to_string(),
                )),
            };
        }
        let t = TargetName::parse(target)
            .ok_or_else(|| (Errno::EINVAL, format!("{target}: not a target name")))?;
        if t.kind == nacre_core::TargetKind::Mdt {
            let (mdt, net) = self.mdt(t.index).ok_or_else(not_here)?;
            self.on_mdt(target, mdt, net, op).await
        } else {
            let (ost, net) = self.ost(t.index).ok_or_else(not_here)?;
            on_ost(target, ost, net, op)
        }
    }

    async fn on_mdt(
        &self,
        target: &str,
        mdt: &Mdt,
        net: &NetFault,
        op: InjectOp,
    ) -> Result<Vec<InjectedItem>, CtlErr> {
        let f = |e| failed(target, e);
        let one = |r: Result<inject::Injected, Errno>| r.map(|i| vec![item(i)]).map_err(f);
        match op {
            InjectOp::RemoveName { parent, name } => {
                one(inject::remove_name(mdt, parent, &name).await)
            }
            InjectOp::OrphanInode { parent, name } => {
                one(inject::orphan_object(mdt, parent, &name).await)
            }
            InjectOp::DropLinks { fid } => one(inject::drop_links(mdt, fid).await),
            InjectOp::FlipDirentType { parent, name } => {
                one(inject::set_dirent_type(mdt, parent, &name, FileKind::Fifo).await)
            }
            InjectOp::CorruptDirentFid { parent, name } => {
                one(inject::corrupt_dirent_fid(mdt, parent, &name).await)
            }
            InjectOp::SetNlink { fid, nlink } => one(inject::set_nlink(mdt, fid, nlink).await),
            InjectOp::CorruptLmvSlot { fid, index } => {
                one(inject::corrupt_lmv_slot(mdt, fid, index).await)
            }
            InjectOp::DropOiEntry { fid } => one(inject::drop_oi_entry(mdt, fid).await),
            InjectOp::DropOi => {
                let n = inject::drop_oi(mdt).await.map_err(f)?;
                Ok(vec![InjectedItem {
                    what: "object index deleted".to_string(),
                    fid: None,
                    detail: format!("{n} entries"),
                }])
            }
            InjectOp::ShareObject { a, b } => {
                let own = inject::stripe_object(mdt, b, 0).await.map_err(f)?;
                let mut it = item(inject::share_object(mdt, a, b, 0).await.map_err(f)?);
                it.detail = format!(
                    "its own object {} on OST{:04x} left behind",
                    own.fid, own.ost_idx
                );
                Ok(vec![
                    it,
                    InjectedItem {
                        what: "left behind".to_string(),
                        fid: Some(own.fid),
                        detail: format!("OST{:04x}", own.ost_idx),
                    },
                ])
            }
            InjectOp::DetachObject { fid } => one(inject::detach_object(mdt, fid, 0).await),
            InjectOp::OrphanOstObject { ost, parent, data } => {
                let (o, _) = self.ost(ost).ok_or_else(|| {
                    (
                        Errno::ENODEV,
                        format!(
                            "OST{ost:04x} is not served by the process of {target}: an orphan \
                             object needs both (use `nacre up`)"
                        ),
                    )
                })?;
                one(inject::orphan_ost_object(mdt, o.store(), ost, parent, &data).await)
            }
            InjectOp::DevFail { clear } => Ok(vec![dev_fail(mdt.health(), clear)]),
            InjectOp::Network { clear } => {
                Ok(vec![switched(NETWORK, clear, net.set_dropping(!clear))])
            }
            other => Err((
                Errno::EINVAL,
                format!("{target}: {other:?} is for an OST, not an MDT"),
            )),
        }
    }
}

fn dev_fail(h: &nacre_osd::Health, clear: bool) -> InjectedItem {
    let was = h.is_injected();
    if clear {
        h.clear_injected();
    } else if !was {
        h.inject_failure(DEV_FAIL_REASON);
    }
    switched(DEV_FAIL, clear, was)
}

fn on_ost(
    target: &str,
    ost: &Ost,
    net: &NetFault,
    op: InjectOp,
) -> Result<Vec<InjectedItem>, CtlErr> {
    let f = |e| failed(target, e);
    let store = ost.store();
    let one = |r: Result<inject::Injected, Errno>| r.map(|i| vec![item(i)]).map_err(f);
    match op {
        InjectOp::RemoveOstObject { obj } => one(inject::remove_ost_object(store, obj)),
        InjectOp::TruncateOstObject { obj } => one(inject::truncate_ost_object(store, obj)),
        InjectOp::ChangeOstOwner { obj, uid, gid } => {
            one(inject::change_ost_owner(store, obj, uid, gid))
        }
        InjectOp::CorruptFilterFid { obj } => one(inject::corrupt_filter_fid(store, obj)),
        InjectOp::RewindLastId => {
            let mut out = Vec::new();
            for seq in store.sequences().map_err(f)? {
                out.push(item(inject::rewind_last_id(store, seq, 1).map_err(f)?));
            }
            Ok(out)
        }
        InjectOp::FlipBit { obj, seed } => {
            use rand::{Rng, SeedableRng};
            let (size, _) = store.probe(&obj).map_err(f)?;
            let size = size.filter(|s| *s > 0).ok_or_else(|| {
                (
                    Errno::ENODATA,
                    format!("{target}: object {obj} holds no data to flip"),
                )
            })?;
            let path = store.object_path(&obj);
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let offset = rng.gen_range(0..size);
            let bit = rng.gen_range(0..8u8);
            nacre_osd::inject::flip_bit(&path, offset, bit)
                .map_err(|e| (Errno::EIO, format!("{}: {e}", path.display())))?;
            Ok(vec![InjectedItem {
                what: "bit flipped".to_string(),
                fid: Some(obj),
                detail: format!("offset {offset} bit {bit}"),
            }])
        }
        InjectOp::DevFail { clear } => Ok(vec![dev_fail(ost.health(), clear)]),
        InjectOp::Network { clear } => Ok(vec![switched(NETWORK, clear, net.set_dropping(!clear))]),
        other => Err((
            Errno::EINVAL,
            format!("{target}: {other:?} is for an MDT, not an OST"),
        )),
    }
}
