//! The namespace checks: what is inconsistent and which repair fixes it, decided from
//! facts (see [`super::facts`]), so the online checker and `nacre check` decide alike.
//!
//! Phase 1 visits every object of an MDT once (Lustre's object-table iteration with
//! "hybrid" directory traversal: a directory's entries are checked when the directory
//! is met, without recursing):
//! - an object's links (linkEA) are compared with the names they claim; an object whose
//!   links do not all hold, whose link count disagrees with them, or that has none is
//!   traced for phase 2, which decides once every name in the file system was seen;
//! - a directory's entries: the FID and inode number in each entry against the object
//!   they reach (`dirent`), names whose object is missing (`dangling`), entry types
//!   against the object's mode (`bad_file_type`), entries the object's linkEA does not
//!   record (`linkea`, or for a directory a second name: `multiple_referenced`, or a
//!   wrong parent: `unmatched_pairs`), names in the wrong stripe (`name_hash`), and the
//!   directory's own link count (2 + its subdirectories);
//! - striped directories: every stripe of a master's LMV must record that master and
//!   index, and every stripe must sit in its master's LMV at its index.
//!
//! Phase 2 handles the traced objects: stale links go, a lost name entry is put back
//! when it was the object's only name (`lost_dirent`), link counts follow the names, and
//! objects no name reaches go to `.lustre/lost+found/MDTxxxx` (`local_lost_found_moved`).
//!
//! Repairs of names or objects on another MDT count as `agent_entries` (Lustre's agent
//! entries are the local stand-ins of remote objects).

use super::facts::{
    Fact, FactSource, LocalObj, dirents, mdt_of, stripe_index_of, stripe_link_name,
};
use nacre_core::lmv::Lmv;
use nacre_core::{Errno, Fid, FileKind};
use nacre_mdt::dne::log;
use nacre_mdt::mdd;
use nacre_osd::{KvRead, Table};
use nacre_rpc::lfsck::{DirentFact, NsRepair};

/// Name entries read per page of a directory.
pub const DIR_PAGE: usize = 4096;

/// Which counter an inconsistency counts under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Dirent,
    Linkea,
    Nlink,
    UnmatchedPair,
    Dangling,
    MultipleReferenced,
    BadType,
    LostDirent,
    LostFound,
    StripedDir,
    StripedShard,
    NameHash,
    AgentEntry,
    DneRecord,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Dirent => "FID-in-dirent",
            Kind::Linkea => "linkEA",
            Kind::Nlink => "link count",
            Kind::UnmatchedPair => "unmatched pair",
            Kind::Dangling => "dangling name",
            Kind::MultipleReferenced => "multiply-referenced name",
            Kind::BadType => "bad file type",
            Kind::LostDirent => "lost name entry",
            Kind::LostFound => "orphan",
            Kind::StripedDir => "striped directory LMV",
            Kind::StripedShard => "directory stripe",
            Kind::NameHash => "name in the wrong stripe",
            Kind::AgentEntry => "remote entry linkEA",
            Kind::DneRecord => "unfinished distributed operation",
        }
    }
}

/// What fixes an inconsistency.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Repair {
    /// A repair MDT `mdt` makes.
    Ns { mdt: u32, op: NsRepair },
    /// Moves `stripe/name` to stripe `to` (a distributed operation of this MDT).
    MoveName {
        stripe: Fid,
        to: Fid,
        name: Vec<u8>,
        fid: Fid,
        kind: FileKind,
    },
    /// Puts back `parent/name -> fid` and drops the object's other (stale) links.
    LostDirent {
        parent: Fid,
        name: Vec<u8>,
        fid: Fid,
        kind: FileKind,
        stale: Vec<(Fid, Vec<u8>)>,
    },
    /// Moves an object no name reaches into `.lustre/lost+found/MDTxxxx` as
    /// `[FID]-<kind>-N`, dropping its stale links.
    LostFound {
        fid: Fid,
        kind: char,
        stale: Vec<(Fid, Vec<u8>)>,
    },
    /// Undoes what this MDT prepared for an operation whose coordinator is gone.
    AbortPending { coord: u32, op: u64 },
    /// Keeps a committed operation's record for the participants that exist.
    NarrowCommitted { op: u64, left: Vec<u32> },
    /// Reported, not repaired (a dangling name without `-C`).
    None,
}

/// An inconsistency: what it is, where, and its repair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub kind: Kind,
    /// The object concerned.
    pub fid: Fid,
    /// The name concerned, if any: (directory, name).
    pub at: Option<(Fid, Vec<u8>)>,
    pub repair: Repair,
    /// What a dry run tells phase 2 instead of repairing: the repair would make this
    /// name a valid link of this object (MDT, object, directory, name).
    pub dry_trace: Option<(u32, Fid, Fid, Vec<u8>)>,
}

/// How a run checks.
#[derive(Clone, Copy, Debug)]
pub struct Opts {
    pub dryrun: bool,
    /// `-C`: create the object of a dangling name.
    pub create_mdtobj: bool,
}

/// What checking some objects found.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    pub findings: Vec<Finding>,
    /// Local objects phase 2 must look at.
    pub trace: Vec<Fid>,
    pub dirs: u64,
    pub striped_dirs: u64,
    pub shards: u64,
    pub mul_linked: u64,
}

impl Scan {
    pub fn merge(&mut self, o: Scan) {
        self.findings.extend(o.findings);
        self.trace.extend(o.trace);
        self.dirs += o.dirs;
        self.striped_dirs += o.striped_dirs;
        self.shards += o.shards;
        self.mul_linked += o.mul_linked;
    }

    fn find(&mut self, kind: Kind, fid: Fid, at: Option<(Fid, &[u8])>, repair: Repair) {
        self.findings.push(Finding {
            kind,
            fid,
            at: at.map(|(p, n)| (p, n.to_vec())),
            repair,
            dry_trace: None,
        });
    }

    /// As [`Scan::find`], for a repair that makes `at` a valid link of `fid` (on MDT
    /// `mdt`): a dry run tells `fid`'s phase 2 so.
    fn find_link(&mut self, kind: Kind, mdt: u32, fid: Fid, at: (Fid, &[u8]), repair: Repair) {
        self.findings.push(Finding {
            kind,
            fid,
            at: Some((at.0, at.1.to_vec())),
            repair,
            dry_trace: Some((mdt, fid, at.0, at.1.to_vec())),
        });
    }
}

fn is_dir_kind(k: Option<FileKind>) -> bool {
    k == Some(FileKind::Directory)
}

/// Phase 1 for one local object. `Ok(false)`: facts from another MDT are missing (they
/// were noted); run it again once they are known, with a fresh [`Scan`].
pub fn phase1(
    f: &mut dyn FactSource,
    x: &LocalObj,
    o: &Opts,
    out: &mut Scan,
) -> Result<bool, Errno> {
    let xf = &x.facts;
    if xf.busy {
        return Ok(true);
    }
    let mut done = true;
    if let Some((m, i)) = xf.stripe_of {
        done &= check_stripe(f, x, m, i, out)?;
    }
    if let Some(lmv) = &xf.lmv {
        done &= check_master(f, x, lmv, out)?;
    }
    if xf.stripe_of.is_none() && xf.fid != Fid::ROOT {
        done &= check_links(f, x, out)?;
    }
    if x.ino.attr.is_dir() && xf.nlink > 0 {
        done &= check_entries(f, x, o, out)?;
    }
    Ok(done)
}

/// An object's links against the names they claim: anything short of every link naming
/// it, and (files) a link count equal to its links, goes to phase 2.
fn check_links(f: &mut dyn FactSource, x: &LocalObj, out: &mut Scan) -> Result<bool, Errno> {
    let xf = &x.facts;
    let is_dir = x.ino.attr.is_dir();
    if xf.links.is_empty() {
        // A removed directory whose name is gone, and open-unlinked files, have none.
        if !(xf.open_unlinked || is_dir && xf.nlink == 0) {
            out.trace.push(xf.fid);
        }
        return Ok(true);
    }
    let mut valid = 0;
    let mut known = true;
    for (p, n) in &xf.links {
        match f.entry(p, n)? {
            Fact::Unknown => known = false,
            Fact::Known(DirentFact::Present { fid, .. }) if fid == xf.fid => valid += 1,
            Fact::Known(_) => {}
        }
    }
    if !known {
        return Ok(false);
    }
    if !is_dir && xf.links.len() > 1 {
        out.mul_linked += 1;
    }
    let consistent = valid == xf.links.len()
        && if is_dir {
            xf.links.len() == 1
        } else {
            xf.nlink as usize == xf.links.len()
        };
    if !consistent {
        out.trace.push(xf.fid);
    }
    Ok(true)
}

/// A directory stripe against its master's LMV.
fn check_stripe(
    f: &mut dyn FactSource,
    x: &LocalObj,
    master: Fid,
    index: u32,
    out: &mut Scan,
) -> Result<bool, Errno> {
    let xf = &x.facts;
    out.shards += 1;
    let mf = match f.object(&master)? {
        Fact::Unknown => return Ok(false),
        Fact::Known(m) => m,
    };
    let slot = mf
        .as_ref()
        .and_then(|m| m.lmv.as_ref())
        .and_then(|l| l.stripes.get(index as usize).copied());
    let listed = mf
        .as_ref()
        .and_then(|m| m.lmv.as_ref())
        .is_some_and(|l| l.stripes.iter().any(|(_, s)| *s == xf.fid));
    match slot {
        // Listed at another index: the master's check makes this stripe's record agree.
        Some((_, s)) if s != xf.fid && listed => {}
        Some((_, s)) if s == xf.fid => {
            let want = vec![(master, stripe_link_name(&xf.fid, index))];
            if xf.links != want {
                out.find(
                    Kind::StripedShard,
                    xf.fid,
                    None,
                    Repair::Ns {
                        mdt: f.me(),
                        op: NsRepair::SetDirLink {
                            fid: xf.fid,
                            parent: master,
                            name: stripe_link_name(&xf.fid, index),
                        },
                    },
                );
            }
        }
        Some((_, other)) => match f.object(&other)? {
            Fact::Unknown => return Ok(false),
            // The master's slot names a stripe that does not exist: this one belongs
            // there (a dry run tells the master's phase 2 the slot is taken).
            Fact::Known(None) => out.findings.push(Finding {
                kind: Kind::StripedDir,
                fid: master,
                at: None,
                repair: Repair::Ns {
                    mdt: mdt_of(&master),
                    op: NsRepair::SetLmvSlot {
                        master,
                        index,
                        old: other,
                        stripe: xf.fid,
                        mdt: f.me(),
                    },
                },
                dry_trace: Some((mdt_of(&master), master, xf.fid, slot_claim(index))),
            }),
            // Another stripe holds the slot: this one is an orphan (phase 2).
            Fact::Known(Some(_)) => out.trace.push(xf.fid),
        },
        None => out.trace.push(xf.fid),
    }
    Ok(true)
}

/// A striped directory's master: every stripe must record it. Slots naming a stripe
/// that does not exist wait for phase 2 (a stripe may claim the slot meanwhile).
fn check_master(
    f: &mut dyn FactSource,
    x: &LocalObj,
    lmv: &Lmv,
    out: &mut Scan,
) -> Result<bool, Errno> {
    let xf = &x.facts;
    out.striped_dirs += 1;
    let mut known = true;
    for (i, (m, s)) in lmv.stripes.iter().enumerate() {
        match f.object(s)? {
            Fact::Unknown => known = false,
            Fact::Known(None) => {
                if !out.trace.contains(&xf.fid) {
                    out.trace.push(xf.fid);
                }
            }
            Fact::Known(Some(sf)) => {
                let mine = Some((xf.fid, i as u32));
                // A stripe that knows another master holding it is not ours to take.
                let claimable = match sf.stripe_of {
                    None => true,
                    Some((mm, _)) => mm == xf.fid,
                };
                if sf.stripe_of != mine && claimable && !sf.busy {
                    out.find(
                        Kind::StripedShard,
                        *s,
                        None,
                        Repair::Ns {
                            mdt: *m,
                            op: NsRepair::SetStripeOf {
                                fid: *s,
                                master: xf.fid,
                                index: i as u32,
                            },
                        },
                    );
                }
            }
        }
    }
    Ok(known)
}

/// A directory's entries, and its link count.
fn check_entries(
    f: &mut dyn FactSource,
    x: &LocalObj,
    o: &Opts,
    out: &mut Scan,
) -> Result<bool, Errno> {
    let xf = &x.facts;
    let dir = xf.fid;
    out.dirs += 1;
    // In a stripe, every name must hash to the stripe's place in its master's LMV.
    let placement = match xf.stripe_of {
        Some((m, _)) => match f.object(&m)? {
            Fact::Unknown => return Ok(false),
            Fact::Known(mf) => mf.and_then(|mf| mf.lmv).and_then(|l| {
                let i = l.stripes.iter().position(|(_, s)| *s == dir)?;
                Some((l, i as u32))
            }),
        },
        None => None,
    };
    let mut subdirs = 0u32;
    let mut known = true;
    let mut start: Option<Vec<u8>> = None;
    loop {
        let page = dirents(f.local(), &dir, start.as_deref(), DIR_PAGE)?;
        for (_, name, rec) in &page.entries {
            if let Some((lmv, i)) = &placement {
                let want = stripe_index_of(lmv, name);
                if want != *i
                    && let Some((_, to)) = lmv.stripes.get(want as usize)
                {
                    out.find(
                        Kind::NameHash,
                        rec.fid,
                        Some((dir, name)),
                        Repair::MoveName {
                            stripe: dir,
                            to: *to,
                            name: name.clone(),
                            fid: rec.fid,
                            kind: rec.kind,
                        },
                    );
                    continue;
                }
            }
            match check_entry(f, x, name, rec, o, out)? {
                Some(sub) => subdirs += u32::from(sub),
                None => known = false,
            }
        }
        match page.next {
            Some(n) => start = Some(n),
            None => break,
        }
    }
    if !known {
        return Ok(false);
    }
    let want = if xf.lmv.is_some() { 2 } else { 2 + subdirs };
    if xf.nlink != want {
        out.find(
            Kind::Nlink,
            dir,
            None,
            Repair::Ns {
                mdt: f.me(),
                op: NsRepair::SetNlink {
                    fid: dir,
                    old: xf.nlink,
                    nlink: want,
                },
            },
        );
    }
    Ok(true)
}

/// One name entry; `Some(whether it names a subdirectory)`, or `None` when facts from
/// another MDT are missing.
fn check_entry(
    f: &mut dyn FactSource,
    x: &LocalObj,
    name: &[u8],
    rec: &nacre_mdt::records::DirentRec,
    o: &Opts,
    out: &mut Scan,
) -> Result<Option<bool>, Errno> {
    let me = f.me();
    let dir = x.facts.fid;
    let c = rec.fid;
    let cm = mdt_of(&c);
    let here = Some((dir, name));
    let busy = f.busy().clone();
    if busy.holds_name(&dir, name) {
        return Ok(Some(rec.kind == FileKind::Directory));
    }
    let cf = if cm == me {
        // The entry's inode number and FID against the inode's own FID (the LMA).
        let by_ino = if rec.ino != 0 {
            mdd::inode_at(f.local(), rec.ino)?
        } else {
            None
        };
        match by_ino {
            Some(i) if i.fid() == c => Some(super::facts::named_obj_facts(
                f.local(),
                &i,
                &busy,
                &dir,
                name,
            )?),
            _ => match super::facts::local_object(f.local(), &c, 0, &busy)? {
                Some(obj) => {
                    let k = obj.ino.kind().unwrap_or(rec.kind);
                    out.find(
                        Kind::Dirent,
                        c,
                        here,
                        Repair::Ns {
                            mdt: me,
                            op: NsRepair::SetName {
                                parent: dir,
                                name: name.to_vec(),
                                old: c,
                                new: c,
                                kind: k,
                            },
                        },
                    );
                    Some(obj.facts)
                }
                None => {
                    // The FID is wrong but the inode number still names an inode that
                    // claims this name: the FID is what went bad.
                    if let Some(i) = by_ino
                        && mdd::all_links(f.local(), &i)?
                            .iter()
                            .any(|(p, n)| *p == dir && n == name)
                        && let Some(k) = i.kind()
                    {
                        out.find_link(
                            Kind::Dirent,
                            me,
                            i.fid(),
                            (dir, name),
                            Repair::Ns {
                                mdt: me,
                                op: NsRepair::SetName {
                                    parent: dir,
                                    name: name.to_vec(),
                                    old: c,
                                    new: i.fid(),
                                    kind: k,
                                },
                            },
                        );
                        return Ok(Some(k == FileKind::Directory));
                    }
                    None
                }
            },
        }
    } else {
        match f.remote_object(&c)? {
            Fact::Unknown => return Ok(None),
            Fact::Known(cf) => cf,
        }
    };
    let Some(cf) = cf else {
        let repair = if o.create_mdtobj {
            Repair::Ns {
                mdt: cm,
                op: NsRepair::CreateObject {
                    fid: c,
                    kind: rec.kind,
                    parent: dir,
                    name: name.to_vec(),
                    uid: x.ino.attr.uid,
                    gid: x.ino.attr.gid,
                    stripe_of: None,
                },
            }
        } else {
            Repair::None
        };
        out.find(Kind::Dangling, c, here, repair);
        return Ok(Some(rec.kind == FileKind::Directory));
    };
    if cf.busy {
        return Ok(Some(rec.kind == FileKind::Directory));
    }
    let ck = cf.kind();
    if let Some(k) = ck
        && k != rec.kind
    {
        out.find(
            Kind::BadType,
            c,
            here,
            Repair::Ns {
                mdt: me,
                op: NsRepair::SetName {
                    parent: dir,
                    name: name.to_vec(),
                    old: c,
                    new: c,
                    kind: k,
                },
            },
        );
    }
    let sub = is_dir_kind(ck);
    if cf.stripe_of.is_some() || cf.links.iter().any(|(p, n)| *p == dir && n == name) {
        return Ok(Some(sub));
    }
    let remote = cm != me;
    if sub {
        // A directory has one name: another that holds makes this one extra.
        let mut other_valid = false;
        for (p, n) in &cf.links {
            match f.entry(p, n)? {
                Fact::Unknown => return Ok(None),
                Fact::Known(DirentFact::Present { fid, .. }) if fid == c => other_valid = true,
                Fact::Known(_) => {}
            }
        }
        if other_valid {
            out.find(
                Kind::MultipleReferenced,
                c,
                here,
                Repair::Ns {
                    mdt: me,
                    op: NsRepair::DeleteName {
                        parent: dir,
                        name: name.to_vec(),
                        fid: c,
                    },
                },
            );
        } else {
            out.find_link(
                if remote {
                    Kind::AgentEntry
                } else {
                    Kind::UnmatchedPair
                },
                cm,
                c,
                (dir, name),
                Repair::Ns {
                    mdt: cm,
                    op: NsRepair::SetDirLink {
                        fid: c,
                        parent: dir,
                        name: name.to_vec(),
                    },
                },
            );
        }
        return Ok(Some(true));
    }
    // A file's name its linkEA lacks: the name is real, the linkEA learns it (a dry run
    // tells phase 2 on the object's MDT, so it counts the name as a link).
    let _ = o;
    out.find_link(
        if remote {
            Kind::AgentEntry
        } else {
            Kind::Linkea
        },
        cm,
        c,
        (dir, name),
        Repair::Ns {
            mdt: cm,
            op: NsRepair::AddLink {
                fid: c,
                parent: dir,
                name: name.to_vec(),
            },
        },
    );
    Ok(Some(false))
}

/// The trace entry saying a stripe claimed slot `index` of a master's LMV (names never
/// start with NUL, so it cannot be a link).
pub fn slot_claim(index: u32) -> Vec<u8> {
    format!("\0lmv:{index}").into_bytes()
}

/// Phase 2 for one traced local object, with the links a dry run's phase 1 found that its
/// linkEA lacks (`extra`). `Ok(false)`: facts from another MDT are missing.
pub fn phase2(
    f: &mut dyn FactSource,
    x: &LocalObj,
    extra: &[(Fid, Vec<u8>)],
    _o: &Opts,
    out: &mut Scan,
) -> Result<bool, Errno> {
    let xf = &x.facts;
    if xf.busy || xf.fid == Fid::ROOT {
        return Ok(true);
    }
    let is_dir = x.ino.attr.is_dir();
    if is_dir && xf.nlink == 0 {
        return Ok(true);
    }
    let (claims, extra): (Vec<_>, Vec<_>) = extra
        .iter()
        .cloned()
        .partition(|(_, n)| n.first() == Some(&0));
    let extra = extra.as_slice();
    if let Some((m, _)) = xf.stripe_of {
        let mf = match f.object(&m)? {
            Fact::Unknown => return Ok(false),
            Fact::Known(mf) => mf,
        };
        // Listed anywhere in its master's LMV: the master's check fixes the index.
        let claimed = mf
            .and_then(|m| m.lmv)
            .is_some_and(|l| l.stripes.iter().any(|(_, s)| *s == xf.fid));
        if !claimed {
            out.find(
                Kind::LostFound,
                xf.fid,
                None,
                Repair::LostFound {
                    fid: xf.fid,
                    kind: 'S',
                    stale: xf.links.clone(),
                },
            );
        }
        return Ok(true);
    }
    if let Some(lmv) = &xf.lmv {
        for (i, (m, s)) in lmv.stripes.iter().enumerate() {
            // A stripe claimed this slot in phase 1 (a dry run did not repair it).
            if claims.iter().any(|(_, n)| *n == slot_claim(i as u32)) {
                continue;
            }
            match f.object(s)? {
                Fact::Unknown => return Ok(false),
                Fact::Known(Some(_)) => {}
                // Still no stripe: make an empty one (its names are lost with it).
                Fact::Known(None) => out.find(
                    Kind::StripedShard,
                    *s,
                    None,
                    Repair::Ns {
                        mdt: *m,
                        op: NsRepair::CreateObject {
                            fid: *s,
                            kind: FileKind::Directory,
                            parent: xf.fid,
                            name: stripe_link_name(s, i as u32),
                            uid: x.ino.attr.uid,
                            gid: x.ino.attr.gid,
                            stripe_of: Some((xf.fid, i as u32)),
                        },
                    },
                ),
            }
        }
    }
    if xf.open_unlinked {
        return Ok(true);
    }
    // Links phase 1's repairs made (or, in a dry run, would have made) hold; a
    // directory's replace its linkEA, a file's are added to it.
    let mut links = if is_dir && !extra.is_empty() {
        extra.to_vec()
    } else {
        xf.links.clone()
    };
    for l in extra {
        if !links.contains(l) {
            links.push(l.clone());
        }
    }
    let mut valid = Vec::new();
    let mut invalid = Vec::new();
    for (p, n) in &links {
        if extra.iter().any(|(ep, en)| ep == p && en == n) {
            valid.push((*p, n.clone()));
            continue;
        }
        match f.entry(p, n)? {
            Fact::Unknown => return Ok(false),
            Fact::Known(DirentFact::Present { fid, .. }) if fid == xf.fid => {
                valid.push((*p, n.clone()))
            }
            Fact::Known(other) => invalid.push(((*p, n.clone()), other)),
        }
    }
    let kind = x.ino.kind().unwrap_or(FileKind::Regular);
    if valid.is_empty() {
        // The object's only name is gone: put it back where a live directory had it...
        let lost = invalid
            .iter()
            .find(|(_, fact)| *fact == DirentFact::Absent)
            .map(|(l, _)| l.clone());
        if let Some((p, n)) = lost {
            let stale = invalid
                .iter()
                .map(|(l, _)| l.clone())
                .filter(|l| *l != (p, n.clone()))
                .collect();
            out.find(
                Kind::LostDirent,
                xf.fid,
                Some((p, &n)),
                Repair::LostDirent {
                    parent: p,
                    name: n.clone(),
                    fid: xf.fid,
                    kind,
                    stale,
                },
            );
        } else {
            // ... else nothing names it: lost+found.
            out.find(
                Kind::LostFound,
                xf.fid,
                None,
                Repair::LostFound {
                    fid: xf.fid,
                    kind: if is_dir { 'D' } else { 'O' },
                    stale: invalid.into_iter().map(|(l, _)| l).collect(),
                },
            );
        }
        return Ok(true);
    }
    for ((p, n), _) in &invalid {
        if !xf.links.contains(&(*p, n.clone())) {
            continue;
        }
        out.find(
            Kind::Linkea,
            xf.fid,
            Some((*p, n)),
            Repair::Ns {
                mdt: f.me(),
                op: NsRepair::RemoveLink {
                    fid: xf.fid,
                    parent: *p,
                    name: n.clone(),
                },
            },
        );
    }
    if is_dir {
        // A directory keeps its first name; others are extra names of it.
        for (p, n) in valid.iter().skip(1) {
            out.find(
                Kind::MultipleReferenced,
                xf.fid,
                Some((*p, n)),
                Repair::Ns {
                    mdt: mdt_of(p),
                    op: NsRepair::DeleteName {
                        parent: *p,
                        name: n.clone(),
                        fid: xf.fid,
                    },
                },
            );
            out.find(
                Kind::Linkea,
                xf.fid,
                Some((*p, n)),
                Repair::Ns {
                    mdt: f.me(),
                    op: NsRepair::RemoveLink {
                        fid: xf.fid,
                        parent: *p,
                        name: n.clone(),
                    },
                },
            );
        }
    } else {
        if valid.len() > 1 {
            out.mul_linked += 1;
        }
        let want = valid.len() as u32;
        if xf.nlink != want {
            out.find(
                Kind::Nlink,
                xf.fid,
                None,
                Repair::Ns {
                    mdt: f.me(),
                    op: NsRepair::SetNlink {
                        fid: xf.fid,
                        old: xf.nlink,
                        nlink: want,
                    },
                },
            );
        }
    }
    Ok(true)
}

/// Distributed-operation records that recovery can never finish: a prepared operation
/// whose coordinator is not part of the file system (abort it), and a committed one that
/// waits for participants that are not (forget them).
pub fn dne_records<R: KvRead>(v: &mut R, mdt_count: u32) -> Result<Vec<Finding>, Errno> {
    let mut out = Vec::new();
    for (_, rec) in log::all(v, Table::DnePending, usize::MAX)? {
        let p = log::decode_pending(&rec)?;
        if p.coord >= mdt_count {
            let fid = p.updates.first().map_or(Fid::ZERO, |u| u.object());
            out.push(Finding {
                kind: Kind::DneRecord,
                fid,
                at: None,
                repair: Repair::AbortPending {
                    coord: p.coord,
                    op: p.op,
                },
                dry_trace: None,
            });
        }
    }
    for (k, rec) in log::all(v, Table::DneCommitted, usize::MAX)? {
        let Some(op) = k.try_into().ok().map(u64::from_be_bytes) else {
            continue;
        };
        let c = log::decode_committed(&rec)?;
        let left: Vec<u32> = c
            .participants
            .iter()
            .copied()
            .filter(|m| *m < mdt_count)
            .collect();
        if left.len() != c.participants.len() {
            out.push(Finding {
                kind: Kind::DneRecord,
                fid: Fid::ZERO,
                at: None,
                repair: Repair::NarrowCommitted { op, left },
                dry_trace: None,
            });
        }
    }
    Ok(out)
}
