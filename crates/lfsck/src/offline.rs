//! The namespace checks on the stores of a stopped file system (`nacre check`): every
//! MDT's phase 1 and phase 2 as a dry run, reading the other MDTs' stores directly
//! instead of asking them, plus what only a whole-file-system view can see (directories
//! no path from the root reaches).
//!
//! Nothing is "busy" here: a distributed operation a crash left half done shows as what
//! it left (a pending record, and an object its name never reached).

use crate::namespace::check::{self, Finding, Kind, Opts, Repair, Scan};
use crate::namespace::facts::{Busy, LocalObj, OfflineFacts, obj_facts};
use nacre_core::{Errno, Fid};
use nacre_mdt::records::{self, Inode};
use nacre_osd::{ReadView, Table};
use nacre_rpc::lfsck::NsRepair;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

/// What the checker found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CheckReport {
    pub dirs: u64,
    pub files: u64,
    /// Names whose object exists nowhere: (directory, name, child).
    pub dangling: Vec<(Fid, Vec<u8>, Fid)>,
    /// Objects no name points to (not counting open-unlinked files awaiting last close):
    /// those LFSCK would put back under the name their linkEA remembers, and those it
    /// would move to lost+found.
    pub orphans: Vec<Fid>,
    /// What each orphan is: its type, link count and the links it believes it has.
    pub orphan_details: Vec<String>,
    /// Objects that have names but that no path from the root reaches (a directory loop).
    pub disconnected: Vec<Fid>,
    /// Objects whose nlink is not what the names say: (object, stored, counted).
    pub bad_nlink: Vec<(Fid, u32, u32)>,
    /// linkEA entries without their name, and names missing from their object's linkEA:
    /// (object, directory, name).
    pub bad_links: Vec<(Fid, Fid, Vec<u8>)>,
    /// Name entries whose FID or inode number disagrees with the object's own FID.
    pub bad_dirents: Vec<(Fid, Vec<u8>)>,
    /// Name entries whose type is not their object's.
    pub bad_types: Vec<(Fid, Vec<u8>)>,
    /// Extra names of a directory.
    pub multiply_referenced: Vec<(Fid, Vec<u8>)>,
    /// Striped directories and stripes that disagree with each other.
    pub bad_stripes: Vec<Fid>,
    /// Names in a stripe their hash does not pick.
    pub misplaced_names: Vec<(Fid, Vec<u8>)>,
    /// Entries on each MDT: names held by its directories and directory stripes.
    pub entries_per_mdt: BTreeMap<u32, u64>,
    /// Unfinished distributed operations: prepared (participant side) and committed
    /// with participants to tell (coordinator side).
    pub pending: u64,
    pub committed: u64,
    /// The layout checks, when the OSTs' stores were given ([`crate::offline_layout`]).
    pub layout: Option<crate::offline_layout::LayoutReport>,
}

impl CheckReport {
    /// Nothing is inconsistent and nothing is left to recover.
    pub fn is_clean(&self) -> bool {
        self.dangling.is_empty()
            && self.orphans.is_empty()
            && self.disconnected.is_empty()
            && self.bad_nlink.is_empty()
            && self.bad_links.is_empty()
            && self.bad_dirents.is_empty()
            && self.bad_types.is_empty()
            && self.multiply_referenced.is_empty()
            && self.bad_stripes.is_empty()
            && self.misplaced_names.is_empty()
            && self.pending == 0
            && self.committed == 0
            && self.layout.as_ref().is_none_or(|l| l.is_clean())
    }

    pub fn summary(&self) -> String {
        use std::fmt::Write;
        let mut s = format!(
            "{} directories, {} files; {} dangling names, {} orphans, {} disconnected, {} bad link counts, {} bad linkEA entries, {} pending and {} committed DNE records; {} bad FID-in-dirent, {} bad file types, {} multiply-referenced names, {} striped-directory inconsistencies, {} names in the wrong stripe\n",
            self.dirs,
            self.files,
            self.dangling.len(),
            self.orphans.len(),
            self.disconnected.len(),
            self.bad_nlink.len(),
            self.bad_links.len(),
            self.pending,
            self.committed,
            self.bad_dirents.len(),
            self.bad_types.len(),
            self.multiply_referenced.len(),
            self.bad_stripes.len(),
            self.misplaced_names.len(),
        );
        let name = |n: &[u8]| String::from_utf8_lossy(n).into_owned();
        for (p, n, c) in &self.dangling {
            let _ = writeln!(s, "  dangling: {p}/{} -> {c}", name(n));
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
            let _ = writeln!(s, "  link {p}/{} of {f} disagrees", name(n));
        }
        for (p, n) in &self.bad_dirents {
            let _ = writeln!(s, "  FID-in-dirent of {p}/{} is wrong", name(n));
        }
        for (p, n) in &self.bad_types {
            let _ = writeln!(s, "  type of {p}/{} is wrong", name(n));
        }
        for (p, n) in &self.multiply_referenced {
            let _ = writeln!(s, "  {p}/{} is an extra name of a directory", name(n));
        }
        for f in &self.bad_stripes {
            let _ = writeln!(s, "  striped directory {f} and its stripes disagree");
        }
        for (p, n) in &self.misplaced_names {
            let _ = writeln!(s, "  {p}/{} is in the wrong stripe", name(n));
        }
        if let Some(l) = &self.layout {
            s.push_str(&l.summary());
        }
        s
    }
}

/// Checks the namespace held by `views` (index = MDT index).
pub fn check(views: &mut [ReadView]) -> Result<CheckReport, Errno> {
    let mut rep = CheckReport::default();
    let n = views.len();
    let busy = vec![Busy::default(); n];
    let opts = Opts {
        dryrun: true,
        create_mdtobj: false,
    };
    let mut findings: Vec<Finding> = Vec::new();
    let mut traced: Vec<Vec<Fid>> = vec![Vec::new(); n];
    let mut extra: Vec<HashMap<Fid, crate::namespace::Links>> = vec![HashMap::new(); n];
    let mut objects: HashMap<Fid, Inode> = HashMap::new();
    let mut object_links: HashMap<Fid, crate::namespace::Links> = HashMap::new();
    for me in 0..n {
        rep.pending += views[me].count(Table::DnePending)?;
        rep.committed += views[me].count(Table::DneCommitted)?;
        let entries = views[me].count(Table::Dirents)?;
        rep.entries_per_mdt.insert(me as u32, entries);
        let mut start = records::inode_key(0).to_vec();
        loop {
            let rows =
                views[me].range(Table::Inodes, &start, &records::inode_key(u64::MAX), 4096)?;
            let Some((last, _)) = rows.last() else { break };
            start = last.clone();
            start.push(0);
            for (k, v) in rows {
                let mut ino = Inode::decode(&v, views[me].crash_gen())?;
                ino.ino = records::parse_inode_key(&k).ok_or(Errno::EIO)?;
                if ino.attr.is_dir() {
                    rep.dirs += 1;
                } else {
                    rep.files += 1;
                }
                let facts = obj_facts(&mut views[me], &ino, &busy[me])?;
                object_links.insert(ino.fid(), facts.links.clone());
                let x = LocalObj {
                    ino: ino.clone(),
                    facts,
                };
                objects.insert(ino.fid(), ino);
                let mut f = OfflineFacts {
                    me: me as u32,
                    views,
                    busy: &busy,
                };
                let mut scan = Scan::default();
                check::phase1(&mut f, &x, &opts, &mut scan)?;
                traced[me].extend(scan.trace.iter().copied());
                for fd in scan.findings {
                    // A link a repair would make: its object's phase 2 counts it.
                    if let Some((mdt, fid, parent, name)) = &fd.dry_trace
                        && let Some(e) = extra.get_mut(*mdt as usize)
                    {
                        e.entry(*fid).or_default().push((*parent, name.clone()));
                    }
                    findings.push(fd);
                }
            }
        }
    }
    for me in 0..n {
        let mut todo: Vec<Fid> = traced[me].clone();
        todo.extend(extra[me].keys().copied());
        todo.sort();
        todo.dedup();
        for fid in todo {
            let busy_me = busy[me].clone();
            let Some(x) = crate::namespace::facts::local_object(&mut views[me], &fid, 0, &busy_me)?
            else {
                continue;
            };
            let more = extra[me].get(&fid).cloned().unwrap_or_default();
            let mut f = OfflineFacts {
                me: me as u32,
                views,
                busy: &busy,
            };
            let mut scan = Scan::default();
            check::phase2(&mut f, &x, &more, &opts, &mut scan)?;
            findings.extend(scan.findings);
        }
    }
    for f in findings {
        let at = f.at.clone().unwrap_or((Fid::ZERO, Vec::new()));
        match f.kind {
            Kind::Dangling => rep.dangling.push((at.0, at.1, f.fid)),
            Kind::LostDirent | Kind::LostFound => {
                if !rep.orphans.contains(&f.fid) {
                    rep.orphans.push(f.fid);
                }
            }
            Kind::Nlink => {
                if let Repair::Ns {
                    op: NsRepair::SetNlink { old, nlink, fid },
                    ..
                } = &f.repair
                {
                    rep.bad_nlink.push((*fid, *old, *nlink));
                }
            }
            Kind::Linkea | Kind::UnmatchedPair | Kind::AgentEntry => {
                rep.bad_links.push((f.fid, at.0, at.1))
            }
            Kind::Dirent => rep.bad_dirents.push(at),
            Kind::BadType => rep.bad_types.push(at),
            Kind::MultipleReferenced => rep.multiply_referenced.push(at),
            Kind::StripedDir | Kind::StripedShard => rep.bad_stripes.push(f.fid),
            Kind::NameHash => rep.misplaced_names.push(at),
            // Counted as pending/committed records already.
            Kind::DneRecord => {}
        }
    }
    rep.disconnected = disconnected(views, &objects, &rep.orphans)?;
    rep.dangling.sort();
    rep.dangling.dedup();
    rep.orphans.sort();
    rep.orphan_details = rep
        .orphans
        .iter()
        .map(|f| match objects.get(f) {
            Some(i) => {
                let links: Vec<String> = object_links
                    .get(f)
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .map(|(p, n)| format!("{p}/{}", String::from_utf8_lossy(n)))
                    .collect();
                format!(
                    "({}, nlink {}, links [{}])",
                    if i.attr.is_dir() { "dir" } else { "file" },
                    i.attr.nlink,
                    links.join(", ")
                )
            }
            None => String::new(),
        })
        .collect();
    rep.bad_nlink.sort();
    rep.bad_nlink.dedup();
    rep.bad_links.sort();
    rep.bad_links.dedup();
    rep.bad_dirents.sort();
    rep.bad_types.sort();
    rep.multiply_referenced.sort();
    rep.bad_stripes.sort();
    rep.bad_stripes.dedup();
    rep.misplaced_names.sort();
    Ok(rep)
}

/// Objects some name points to that no path from the root reaches.
fn disconnected(
    views: &mut [ReadView],
    objects: &HashMap<Fid, Inode>,
    orphans: &[Fid],
) -> Result<Vec<Fid>, Errno> {
    let mut children: HashMap<Fid, Vec<Fid>> = HashMap::new();
    let mut named: HashSet<Fid> = HashSet::new();
    for v in views.iter_mut() {
        v.for_each(Table::Dirents, &[], &[0xff; 25], |k, val| {
            let dir = Fid::from_bytes(k).ok_or(Errno::EIO)?;
            let child = records::parse_dirent(val)?.fid;
            children.entry(dir).or_default().push(child);
            named.insert(child);
            Ok(())
        })?;
    }
    let mut seen: HashSet<Fid> = HashSet::new();
    let mut queue = VecDeque::from([Fid::ROOT]);
    while let Some(f) = queue.pop_front() {
        if !seen.insert(f) {
            continue;
        }
        if let Some(i) = objects.get(&f)
            && let Some(l) = &i.lmv
        {
            queue.extend(l.stripes.iter().map(|(_, s)| *s));
        }
        if let Some(c) = children.get(&f) {
            queue.extend(c.iter().copied());
        }
    }
    let mut out: Vec<Fid> = objects
        .keys()
        .filter(|f| named.contains(f) && !seen.contains(f) && !orphans.contains(f))
        .copied()
        .collect();
    out.sort();
    Ok(out)
}
