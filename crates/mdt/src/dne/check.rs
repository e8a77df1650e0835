//! The namespace checker across MDTs (the DNE part of LFSCK's namespace phase), run on the
//! stores of a file system that is not being served.
//!
//! It walks the tree from the root through every MDT (names of striped directories in
//! their stripes) and reports what breaks the namespace invariants: names pointing at no
//! inode, inodes no name reaches (orphans), link counts and linkEA entries that disagree
//! with the names, and distributed operations not yet finished (DNE update log records).

use super::exec::stripe_of;
use crate::records::{self, Inode};
use nacre_core::{Errno, Fid, FileKind};
use nacre_osd::{ReadView, Table};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

/// What the checker found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CheckReport {
    pub dirs: u64,
    pub files: u64,
    /// Names whose inode exists nowhere: (directory, name, child).
    pub dangling: Vec<(Fid, Vec<u8>, Fid)>,
    /// Inodes no name points to (not counting open-unlinked files awaiting last close).
    pub orphans: Vec<Fid>,
    /// What each orphan is: its type, link count and the links it believes it has.
    pub orphan_details: Vec<String>,
    /// Inodes that have names but that no path from the root reaches (a directory loop).
    pub disconnected: Vec<Fid>,
    /// Inodes whose nlink is not what the names say: (inode, stored, counted).
    pub bad_nlink: Vec<(Fid, u32, u32)>,
    /// linkEA entries without their name, and names missing from their inode's linkEA.
    pub bad_links: Vec<(Fid, Fid, Vec<u8>)>,
    /// Entries on each MDT: names held by its directories and directory stripes.
    pub entries_per_mdt: BTreeMap<u32, u64>,
    /// Unfinished distributed operations: prepared (participant side) and committed
    /// with participants to tell (coordinator side).
    pub pending: u64,
    pub committed: u64,
}

impl CheckReport {
    /// Nothing is inconsistent and nothing is left to recover.
    pub fn is_clean(&self) -> bool {
        self.dangling.is_empty()
            && self.orphans.is_empty()
            && self.disconnected.is_empty()
            && self.bad_nlink.is_empty()
            && self.bad_links.is_empty()
            && self.pending == 0
            && self.committed == 0
    }

    pub fn summary(&self) -> String {
        use std::fmt::Write;
        let mut s = format!(
            "{} directories, {} files; {} dangling names, {} orphans, {} disconnected, {} bad link counts, {} bad linkEA entries, {} pending and {} committed DNE records\n",
            self.dirs,
            self.files,
            self.dangling.len(),
            self.orphans.len(),
            self.disconnected.len(),
            self.bad_nlink.len(),
            self.bad_links.len(),
            self.pending,
            self.committed
        );
        for (p, n, c) in &self.dangling {
            let _ = writeln!(s, "  dangling: {p}/{} -> {c}", String::from_utf8_lossy(n));
        }
        for (f, d) in self.orphans.iter().zip(&self.orphan_details) {
            let _ = writeln!(s, "  orphan: {f} {d}");
        }
        for f in &self.disconnected {
            let _ = writeln!(s, "  disconnected from the root: {f}");
        }
        for (f, have, want) in &self.bad_nlink {
            let _ = writeln!(s, "  nlink of {f}: {have}, names say {want}");
        }
        for (f, p, n) in &self.bad_links {
            let _ = writeln!(
                s,
                "  link {p}/{} of {f} disagrees",
                String::from_utf8_lossy(n)
            );
        }
        s
    }
}

struct Obj {
    ino: Inode,
    stripe_of: Option<(Fid, u32)>,
}

/// Checks the namespace held by `views` (index = MDT index).
pub fn check(views: &[ReadView]) -> Result<CheckReport, Errno> {
    let mut rep = CheckReport::default();
    let mut objs: HashMap<Fid, Obj> = HashMap::new();
    // (dir, name) -> (child, kind), with the MDT holding it.
    let mut names: HashMap<Fid, Vec<(Vec<u8>, Fid, FileKind)>> = HashMap::new();
    let mut open_orphans: HashSet<Fid> = HashSet::new();
    // Each inode's linkEA: (parent, name) of every link it records, first link first.
    let mut links: HashMap<Fid, Vec<(Fid, Vec<u8>)>> = HashMap::new();
    for (mdt, v) in views.iter().enumerate() {
        let mut v = ViewRef(v);
        for (_, val) in v.0.range(Table::Inodes, &[], &[0xff; 17], usize::MAX)? {
            let ino = Inode::decode(&val)?;
            let fid = ino.fid();
            if let Some(l) = &ino.link {
                links.entry(fid).or_default().insert(0, l.clone());
            }
            let so = stripe_of(&mut v, &fid)?;
            objs.insert(fid, Obj { ino, stripe_of: so });
        }
        for (k, val) in v.0.range(Table::Dirents, &[], &[0xff; 25], usize::MAX)? {
            let dir = Fid::from_bytes(&k).ok_or(Errno::EIO)?;
            let (_, name) = records::dirent_key_parts(&k).ok_or(Errno::EIO)?;
            let (child, kind) = records::parse_dirent_value(&val)?;
            names
                .entry(dir)
                .or_default()
                .push((name.to_vec(), child, kind));
            *rep.entries_per_mdt.entry(mdt as u32).or_default() += 1;
        }
        for (k, _) in v.0.range(Table::Links, &[], &[0xff; 17], usize::MAX)? {
            let (child, parent, name) = records::link_key_parts(&k).ok_or(Errno::EIO)?;
            links
                .entry(child)
                .or_default()
                .push((parent, name.to_vec()));
        }
        for (k, _) in v.0.range(Table::Orphans, &[], &[0xff; 17], usize::MAX)? {
            open_orphans.insert(Fid::from_bytes(&k).ok_or(Errno::EIO)?);
        }
        rep.pending += v.0.count(Table::DnePending)?;
        rep.committed += v.0.count(Table::DneCommitted)?;
    }
    // Names per inode, and subdirectories per directory object.
    let mut named: HashMap<Fid, Vec<(Fid, Vec<u8>)>> = HashMap::new();
    let mut subdirs: HashMap<Fid, u32> = HashMap::new();
    for (dir, ents) in &names {
        for (name, child, kind) in ents {
            if !objs.contains_key(child) {
                rep.dangling.push((*dir, name.clone(), *child));
                continue;
            }
            named.entry(*child).or_default().push((*dir, name.clone()));
            if *kind == FileKind::Directory {
                *subdirs.entry(*dir).or_default() += 1;
            }
        }
    }
    // Reachability from the root; a striped directory reaches its stripes.
    let mut seen: HashSet<Fid> = HashSet::new();
    let mut queue = VecDeque::from([Fid::ROOT]);
    while let Some(f) = queue.pop_front() {
        if !seen.insert(f) {
            continue;
        }
        let Some(o) = objs.get(&f) else { continue };
        if let Some(l) = &o.ino.lmv {
            queue.extend(l.stripes.iter().map(|(_, s)| *s));
        }
        if let Some(ents) = names.get(&f) {
            queue.extend(ents.iter().map(|(_, c, _)| *c));
        }
    }
    for (fid, o) in &objs {
        let a = &o.ino.attr;
        if a.is_dir() {
            rep.dirs += 1;
        } else {
            rep.files += 1;
        }
        if !seen.contains(fid) && !open_orphans.contains(fid) {
            if named.contains_key(fid) {
                rep.disconnected.push(*fid);
            } else {
                rep.orphans.push(*fid);
            }
            continue;
        }
        if open_orphans.contains(fid) {
            continue;
        }
        let my_names = named.get(fid).cloned().unwrap_or_default();
        let want = if a.is_dir() {
            2 + subdirs.get(fid).copied().unwrap_or(0)
        } else {
            my_names.len() as u32
        };
        if a.nlink != want {
            rep.bad_nlink.push((*fid, a.nlink, want));
        }
        if o.stripe_of.is_some() {
            continue;
        }
        let my_links = links.get(fid).map(Vec::as_slice).unwrap_or_default();
        for (p, n) in my_links {
            if !my_names.iter().any(|(mp, mn)| mp == p && mn == n) {
                rep.bad_links.push((*fid, *p, n.clone()));
            }
        }
        for (p, n) in &my_names {
            if !my_links.iter().any(|(lp, ln)| lp == p && ln == n) {
                rep.bad_links.push((*fid, *p, n.clone()));
            }
        }
    }
    // Links of inodes that exist nowhere.
    for (fid, ls) in &links {
        if !objs.contains_key(fid) {
            rep.bad_links
                .extend(ls.iter().map(|(p, n)| (*fid, *p, n.clone())));
        }
    }
    rep.dangling.sort();
    rep.orphans.sort();
    rep.orphan_details = rep
        .orphans
        .iter()
        .map(|f| {
            let o = &objs[f];
            let links: Vec<String> = links
                .get(f)
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .map(|(p, n)| format!("{p}/{}", String::from_utf8_lossy(n)))
                .collect();
            format!(
                "({}, nlink {}, links [{}])",
                if o.ino.attr.is_dir() { "dir" } else { "file" },
                o.ino.attr.nlink,
                links.join(", ")
            )
        })
        .collect();
    rep.disconnected.sort();
    rep.bad_nlink.sort();
    rep.bad_links.sort();
    Ok(rep)
}

/// A `KvRead` over a shared view.
struct ViewRef<'a>(&'a ReadView);

impl nacre_osd::KvRead for ViewRef<'_> {
    fn get(&mut self, t: Table, key: &[u8]) -> Result<Option<Vec<u8>>, Errno> {
        self.0.get(t, key)
    }

    fn range(
        &mut self,
        t: Table,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<nacre_osd::mdstore::KvPairs, Errno> {
        self.0.range(t, start, end, limit)
    }
}
