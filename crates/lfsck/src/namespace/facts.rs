//! What the namespace checks know about names and objects, wherever they live.
//!
//! A check reads the MDT it runs on directly (a store snapshot); what lives on another
//! MDT it asks for. A [`FactSource`] answers from the local store at once and answers
//! "unknown" for a remote fact it has not been told yet, noting the question; the
//! checker sends the noted questions in batches and runs the check again with the
//! answers. The offline checker (`nacre check`) reads every MDT's store itself, so its
//! source never answers "unknown": both run the same checks.

use nacre_core::{Errno, Fid, FileKind};
use nacre_mdt::dne::exec::STRIPE_XATTR;
use nacre_mdt::dne::log;
use nacre_mdt::mdd;
use nacre_mdt::records::{self, DirentRec, Inode};
use nacre_osd::{KvRead, ReadView, Table};
use nacre_rpc::lfsck::{DirentFact, NsFact, NsQuery, ObjFacts};
use nacre_rpc::msg::DneUpdate;
use std::collections::{HashMap, HashSet};

/// A fact, or a question still to ask.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fact<T> {
    Known(T),
    Unknown,
}

/// Objects and names distributed operations in flight hold on one MDT: left alone by the
/// checks (their state is an intermediate one every such operation passes through).
#[derive(Clone, Debug, Default)]
pub struct Busy {
    pub fids: HashSet<Fid>,
    pub names: HashSet<(Fid, Vec<u8>)>,
}

impl Busy {
    /// Reads the DNE update log of the store `v` is a snapshot of.
    pub fn read<R: KvRead>(v: &mut R) -> Result<Busy, Errno> {
        let mut b = Busy::default();
        for (_, rec) in log::all(v, Table::DnePending, usize::MAX)? {
            let p = log::decode_pending(&rec)?;
            for u in &p.updates {
                b.fids.insert(u.object());
                match u {
                    DneUpdate::CreateObject(o) => {
                        for (p, n) in &o.links {
                            b.names.insert((*p, n.clone()));
                        }
                    }
                    DneUpdate::InsertName {
                        parent, name, fid, ..
                    }
                    | DneUpdate::DeleteName {
                        parent, name, fid, ..
                    } => {
                        b.names.insert((*parent, name.clone()));
                        b.fids.insert(*fid);
                    }
                    DneUpdate::SetName {
                        parent,
                        name,
                        old,
                        new,
                        ..
                    } => {
                        b.names.insert((*parent, name.clone()));
                        b.fids.insert(old.0);
                        b.fids.insert(new.0);
                    }
                    DneUpdate::AddLink { parent, name, .. }
                    | DneUpdate::DropLink { parent, name, .. } => {
                        b.names.insert((*parent, name.clone()));
                    }
                    DneUpdate::Relink { from, to, .. } => {
                        b.names.insert(from.clone());
                        b.names.insert(to.clone());
                    }
                    DneUpdate::KillDir { .. } => {}
                }
            }
        }
        Ok(b)
    }

    pub fn holds_name(&self, parent: &Fid, name: &[u8]) -> bool {
        // Borrowing a (Fid, &[u8]) key from (Fid, Vec<u8>) needs a probe value.
        !self.names.is_empty() && self.names.contains(&(*parent, name.to_vec()))
    }
}

/// An object of the MDT being checked, as read from its store.
#[derive(Clone, Debug)]
pub struct LocalObj {
    pub ino: Inode,
    pub facts: ObjFacts,
}

/// Reads what the checks need of a local inode.
pub fn obj_facts<R: KvRead>(v: &mut R, ino: &Inode, busy: &Busy) -> Result<ObjFacts, Errno> {
    let links = mdd::all_links(v, ino)?;
    facts_with_links(v, ino, busy, links)
}

/// What the check of the name `parent/name` needs of the local inode it names. A file's
/// `links` hold only that name, if its linkEA records it: the check asks nothing else of
/// them, and reading every link once per name made a file with Lustre's 65,000 links cost
/// 65,000² reads. A directory's hold all (it has one, or a few when it is damaged).
pub fn named_obj_facts<R: KvRead>(
    v: &mut R,
    ino: &Inode,
    busy: &Busy,
    parent: &Fid,
    name: &[u8],
) -> Result<ObjFacts, Errno> {
    if ino.attr.is_dir() {
        return obj_facts(v, ino, busy);
    }
    let links = if mdd::has_link(v, ino, parent, name)? {
        vec![(*parent, name.to_vec())]
    } else {
        Vec::new()
    };
    facts_with_links(v, ino, busy, links)
}

fn facts_with_links<R: KvRead>(
    v: &mut R,
    ino: &Inode,
    busy: &Busy,
    links: Vec<(Fid, Vec<u8>)>,
) -> Result<ObjFacts, Errno> {
    let fid = ino.fid();
    let stripe_of = if ino.attr.is_dir() {
        nacre_mdt::dne::exec::stripe_of(v, &fid)?
    } else {
        None
    };
    // A linkEA's first link is in the record (`links` may hold only some of them).
    let open_unlinked = if ino.attr.nlink == 0 || (ino.link.is_none() && links.is_empty()) {
        v.get(Table::Orphans, &fid.to_bytes())?.is_some()
    } else {
        false
    };
    Ok(ObjFacts {
        fid,
        mode: ino.attr.mode,
        nlink: ino.attr.nlink,
        links,
        stripe_of,
        lmv: ino.lmv.clone(),
        busy: busy.fids.contains(&fid),
        open_unlinked,
    })
}

/// A local name entry, as the checks see it.
pub fn local_entry<R: KvRead>(v: &mut R, parent: &Fid, name: &[u8]) -> Result<DirentFact, Errno> {
    if let Some(d) = mdd::lookup_rec(v, parent, name)? {
        return Ok(DirentFact::Present {
            fid: d.fid,
            kind: d.kind,
        });
    }
    match mdd::get_inode(v, parent) {
        Ok(p) if p.attr.is_dir() && p.lmv.is_none() => Ok(DirentFact::Absent),
        Ok(_) => Ok(DirentFact::NotPlainDir),
        Err(Errno::ENOENT) => Ok(DirentFact::ParentMissing),
        Err(e) => Err(e),
    }
}

/// A local object by FID, with its facts.
pub fn local_object<R: KvRead>(
    v: &mut R,
    fid: &Fid,
    ino_hint: u64,
    busy: &Busy,
) -> Result<Option<LocalObj>, Errno> {
    match mdd::get_inode_hint(v, fid, ino_hint) {
        Ok(ino) => {
            let facts = obj_facts(v, &ino, busy)?;
            Ok(Some(LocalObj { ino, facts }))
        }
        Err(Errno::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether file `parent` (local) holds object `obj` of OST `ost` as stripe `stripe`.
pub fn local_claims<R: KvRead>(
    v: &mut R,
    parent: &Fid,
    ost: u32,
    obj: &Fid,
    stripe: u32,
) -> Result<Option<bool>, Errno> {
    match mdd::get_inode(v, parent) {
        Ok(i) => Ok(Some(i.layout.as_ref().is_some_and(|l| {
            l.components.iter().any(|c| {
                c.objects
                    .get(stripe as usize)
                    .is_some_and(|o| o.ost_idx == ost && o.fid == *obj)
            })
        }))),
        Err(Errno::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Answers one query from a local store (what a peer MDT does for `NsFacts`).
pub fn answer<R: KvRead>(v: &mut R, q: &NsQuery, busy: &Busy) -> NsFact {
    let r = match q {
        NsQuery::Entry { parent, name } => local_entry(v, parent, name).map(NsFact::Entry),
        NsQuery::Object { fid } => {
            local_object(v, fid, 0, busy).map(|o| NsFact::Object(o.map(|o| o.facts)))
        }
        NsQuery::Claims {
            parent,
            ost,
            obj,
            stripe,
        } => local_claims(v, parent, *ost, obj, *stripe).map(NsFact::Claims),
    };
    r.unwrap_or_else(NsFact::Failed)
}

/// Where the checks get their facts.
pub trait FactSource {
    /// The MDT being checked.
    fn me(&self) -> u32;
    /// Its store.
    fn local(&mut self) -> &mut ReadView;
    /// Its busy objects and names.
    fn busy(&self) -> &Busy;
    /// A name entry on any MDT.
    fn entry(&mut self, parent: &Fid, name: &[u8]) -> Result<Fact<DirentFact>, Errno>;
    /// An object on another MDT (local objects are read with [`local_object`]).
    fn remote_object(&mut self, fid: &Fid) -> Result<Fact<Option<ObjFacts>>, Errno>;

    /// An object on any MDT.
    fn object(&mut self, fid: &Fid) -> Result<Fact<Option<ObjFacts>>, Errno> {
        if mdt_of(fid) == self.me() {
            let busy = self.busy().clone();
            return Ok(Fact::Known(
                local_object(self.local(), fid, 0, &busy)?.map(|o| o.facts),
            ));
        }
        self.remote_object(fid)
    }
}

/// The MDT holding `fid`.
pub fn mdt_of(fid: &Fid) -> u32 {
    nacre_core::fid::mdt_of_seq(fid.seq).unwrap_or(0)
}

/// Answers to questions asked of other MDTs, by MDT and question.
pub type FactCache = HashMap<(u32, NsQuery), NsFact>;

/// The online checker's source: the local store, and the answers gathered so far.
pub struct OnlineFacts<'a> {
    pub me: u32,
    pub view: &'a mut ReadView,
    pub busy: &'a Busy,
    pub cache: &'a FactCache,
    /// Questions to ask, by MDT.
    pub wanted: &'a mut Vec<(u32, NsQuery)>,
    /// MDTs that did not answer this run: their facts stay unknown.
    pub gone: &'a HashSet<u32>,
}

impl OnlineFacts<'_> {
    fn ask(&mut self, mdt: u32, q: NsQuery) -> Option<NsFact> {
        let key = (mdt, q);
        if let Some(f) = self.cache.get(&key) {
            return Some(f.clone());
        }
        if !self.gone.contains(&mdt) && !self.wanted.contains(&key) {
            self.wanted.push(key);
        }
        None
    }
}

impl FactSource for OnlineFacts<'_> {
    fn me(&self) -> u32 {
        self.me
    }

    fn local(&mut self) -> &mut ReadView {
        self.view
    }

    fn busy(&self) -> &Busy {
        self.busy
    }

    fn entry(&mut self, parent: &Fid, name: &[u8]) -> Result<Fact<DirentFact>, Errno> {
        let m = mdt_of(parent);
        if m == self.me {
            return Ok(Fact::Known(local_entry(self.view, parent, name)?));
        }
        let q = NsQuery::Entry {
            parent: *parent,
            name: name.to_vec(),
        };
        Ok(match self.ask(m, q) {
            Some(NsFact::Entry(e)) => Fact::Known(e),
            Some(NsFact::Failed(e)) => return Err(e),
            Some(_) => return Err(Errno::EPROTO),
            None => Fact::Unknown,
        })
    }

    fn remote_object(&mut self, fid: &Fid) -> Result<Fact<Option<ObjFacts>>, Errno> {
        let m = mdt_of(fid);
        Ok(match self.ask(m, NsQuery::Object { fid: *fid }) {
            Some(NsFact::Object(o)) => Fact::Known(o),
            Some(NsFact::Failed(e)) => return Err(e),
            Some(_) => return Err(Errno::EPROTO),
            None => Fact::Unknown,
        })
    }
}

/// The offline checker's source: every MDT's store, read directly.
pub struct OfflineFacts<'a> {
    pub me: u32,
    pub views: &'a mut [ReadView],
    pub busy: &'a [Busy],
}

impl FactSource for OfflineFacts<'_> {
    fn me(&self) -> u32 {
        self.me
    }

    fn local(&mut self) -> &mut ReadView {
        &mut self.views[self.me as usize]
    }

    fn busy(&self) -> &Busy {
        &self.busy[self.me as usize]
    }

    fn entry(&mut self, parent: &Fid, name: &[u8]) -> Result<Fact<DirentFact>, Errno> {
        let m = mdt_of(parent) as usize;
        match self.views.get_mut(m) {
            Some(v) => Ok(Fact::Known(local_entry(v, parent, name)?)),
            // An MDT this check was not given: nothing lives there.
            None => Ok(Fact::Known(DirentFact::ParentMissing)),
        }
    }

    fn remote_object(&mut self, fid: &Fid) -> Result<Fact<Option<ObjFacts>>, Errno> {
        let m = mdt_of(fid) as usize;
        let busy = self.busy.get(m).cloned().unwrap_or_default();
        match self.views.get_mut(m) {
            Some(v) => Ok(Fact::Known(
                local_object(v, fid, 0, &busy)?.map(|o| o.facts),
            )),
            None => Ok(Fact::Known(None)),
        }
    }
}

/// A page of a local directory's name entries.
pub struct DirentPage {
    pub entries: Vec<(u64, Vec<u8>, DirentRec)>,
    /// Where the next page starts (`None`: this was the last).
    pub next: Option<Vec<u8>>,
}

/// Up to `limit` name entries of local directory `dir`, from key `start` (`None`: the
/// first). Pages continue by key, so names sharing a hash are never split or skipped.
pub fn dirents<R: KvRead>(
    v: &mut R,
    dir: &Fid,
    start: Option<&[u8]>,
    limit: usize,
) -> Result<DirentPage, Errno> {
    let first = records::dirent_start(dir, 0);
    let rows = v.range(
        Table::Dirents,
        start.unwrap_or(&first),
        &records::dirent_end(dir),
        limit,
    )?;
    let next = if rows.len() == limit {
        rows.last().map(|(k, _)| {
            let mut n = k.clone();
            n.push(0);
            n
        })
    } else {
        None
    };
    let entries = rows
        .into_iter()
        .map(|(k, val)| {
            let (hash, name) = records::dirent_key_parts(&k).ok_or(Errno::EIO)?;
            Ok((hash, name.to_vec(), records::parse_dirent(&val)?))
        })
        .collect::<Result<_, Errno>>()?;
    Ok(DirentPage { entries, next })
}

/// The stripe index a name belongs to in striped directory `lmv` terms.
pub fn stripe_index_of(lmv: &nacre_core::lmv::Lmv, name: &[u8]) -> u32 {
    lmv.hash().stripe_index(name, lmv.stripe_count())
}

/// The name a stripe has in its master's linkEA: `[FID]:index`.
pub fn stripe_link_name(stripe: &Fid, index: u32) -> Vec<u8> {
    format!("{stripe}:{index}").into_bytes()
}

/// Whether `kind` is a directory.
pub fn is_dir(kind: Option<FileKind>) -> bool {
    kind == Some(FileKind::Directory)
}

/// The STRIPE_XATTR key of `fid` (for repairs that rewrite it).
pub fn stripe_xattr_key(fid: &Fid) -> Vec<u8> {
    records::xattr_key(fid, STRIPE_XATTR)
}
