//! Inconsistencies made on purpose, as a bug, a crash or a bad disk would leave them:
//! each function breaks exactly one thing on a live target, through its store, and
//! returns what it broke. The checker's tests use them; a fault-injection command can.
//!
//! Namespace (on an MDT, see [`crate::namespace::check`] for what LFSCK makes of each):
//!
//! | function | leaves | LFSCK counts |
//! | --- | --- | --- |
//! | [`remove_object`] | names pointing at nothing | `dangling` (repaired with `-C`) |
//! | [`remove_name`] | an object whose only name is gone | `lost_dirent` |
//! | [`drop_links`] | a file whose linkEA forgot its names | `linkea` per name |
//! | [`corrupt_link_name`] | a linkEA entry naming nothing | `linkea` twice (the real name added, the bad one dropped) |
//! | [`orphan_object`] | an object nothing names, that knows no name | `local_lost_found_moved` |
//! | [`add_name`] | a second name of a directory | `multiple_referenced` |
//! | [`set_dirent_type`] | an entry whose type is not its object's | `bad_file_type` |
//! | [`set_nlink`] | a wrong link count | `nlinks` |
//! | [`corrupt_dirent_fid`] | an entry whose FID is garbage (its inode number still right) | `dirent` |
//! | [`set_dir_link`] | a directory whose linkEA names the wrong parent | `unmatched_pairs` |
//! | [`corrupt_lmv_slot`] | a striped directory's LMV naming a stripe that does not exist | `striped_dirs` |
//! | [`set_stripe_of`] | a stripe recording the wrong index | `striped_shards` |
//! | [`misplace_name`] | a name in a stripe its hash does not pick | `name_hash` |
//! | [`drop_links`] on a remote entry's object | a remote object without its linkEA | `agent_entries` |
//! | [`stale_dne_record`] | an operation prepared for a coordinator that does not exist | `dne_records` |
//! | [`loop_dirs`] | two directories naming each other, cut off from the root | `nacre check`: disconnected |
//!
//! Object index (FID -> inode, see [`crate::oi`]):
//!
//! | function | leaves | OI scrub counts |
//! | --- | --- | --- |
//! | [`drop_oi_entry`] | an inode its FID does not find | `updated` |
//! | [`misdirect_oi_entry`] | a FID that finds another file's inode | `updated` |
//! | [`stale_oi_entry`] | a FID that finds an inode that does not exist | `updated` |
//! | [`drop_oi`] | no index at all (a deleted table) | `updated`, one per inode |
//!
//! Layout (OST objects and the layouts that reference them, see [`crate::layout`]):
//!
//! | function | leaves | LFSCK counts |
//! | --- | --- | --- |
//! | [`remove_ost_object`] | a layout referencing an object whose data is gone | `dangling` (recreated empty with `-c`) |
//! | [`truncate_ost_object`] | an object emptied although its file's size says it holds data | `dangling` |
//! | [`corrupt_filter_fid`] | an object whose filter fid names a file that does not exist | `unmatched_pair` |
//! | [`change_ost_owner`] | an object whose owner is not its file's | `inconsistent_owner` |
//! | [`share_object`] | two files whose layouts hold the same object | `multiple_referenced` |
//! | [`detach_object`] | a file whose layout lost one object (its slot names one never created) | `orphan` (put back) |
//! | [`orphan_ost_object`] | an object holding data for a file that does not exist | `orphan` (into lost+found with `-o`) |
//! | [`rewind_last_id`] | a LAST_ID behind the objects of its sequence | `others` |

use nacre_core::StripeObject;
use nacre_core::fid::DATA_SEQ_WIDTH;
use nacre_core::{Errno, Fid, FileKind, Timespec};
use nacre_mdt::Mdt;
use nacre_mdt::dne::exec::STRIPE_XATTR;
use nacre_mdt::dne::log;
use nacre_mdt::mdd;
use nacre_mdt::records;
use nacre_osd::{ObjStore, Table};
use nacre_rpc::msg::{DneObject, DneUpdate};

/// What an injection broke.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Injected {
    pub what: &'static str,
    pub fid: Fid,
    pub at: Option<(Fid, Vec<u8>)>,
}

fn hit(what: &'static str, fid: Fid, at: Option<(Fid, &[u8])>) -> Injected {
    Injected {
        what,
        fid,
        at: at.map(|(p, n)| (p, n.to_vec())),
    }
}

/// The entry `parent/name` on `mdt` (the MDT of `parent`).
pub async fn lookup(mdt: &Mdt, parent: Fid, name: &[u8]) -> Result<(Fid, FileKind), Errno> {
    let mut v = mdt.store().read()?;
    mdd::lookup(&mut v, &parent, name)?.ok_or(Errno::ENOENT)
}

/// Removes object `fid` (on `mdt`) and nothing else: the names pointing at it dangle.
/// Its OST objects, if any, are left behind.
pub async fn remove_object(mdt: &Mdt, fid: Fid) -> Result<Injected, Errno> {
    mdt.store()
        .write(move |tx| {
            let ino = mdd::get_inode(tx, &fid)?;
            tx.delete(Table::Inodes, &records::inode_key(ino.ino))?;
            tx.delete(Table::Oi, &fid.to_bytes())?;
            Ok(())
        })
        .await?;
    Ok(hit("object removed", fid, None))
}

/// Removes the object index entry of `fid` (on `mdt`): its inode stays.
pub async fn drop_oi_entry(mdt: &Mdt, fid: Fid) -> Result<Injected, Errno> {
    mdt.store()
        .write(move |tx| {
            if tx.delete(Table::Oi, &fid.to_bytes())? {
                Ok(())
            } else {
                Err(Errno::ENOENT)
            }
        })
        .await?;
    Ok(hit("index entry removed", fid, None))
}

/// Points the object index entry of `fid` (on `mdt`) at the inode of `other`.
pub async fn misdirect_oi_entry(mdt: &Mdt, fid: Fid, other: Fid) -> Result<Injected, Errno> {
    mdt.store()
        .write(move |tx| {
            let ino = mdd::oi_lookup(tx, &other)?.ok_or(Errno::ENOENT)?;
            mdd::oi_lookup(tx, &fid)?.ok_or(Errno::ENOENT)?;
            tx.put(Table::Oi, &fid.to_bytes(), &records::oi_value(ino))
        })
        .await?;
    Ok(hit("index entry misdirected", fid, None))
}

/// An inode number no MDT hands out (they count up from 1).
const NO_SUCH_INODE: u64 = u64::MAX >> 1;

/// Adds an object index entry for `fid` (which must not have one) naming an inode that
/// does not exist, as a crash between removing an inode and its entry would leave.
pub async fn stale_oi_entry(mdt: &Mdt, fid: Fid) -> Result<Injected, Errno> {
    mdt.store()
        .write(move |tx| {
            if mdd::oi_lookup(tx, &fid)?.is_some() {
                return Err(Errno::EEXIST);
            }
            tx.put(
                Table::Oi,
                &fid.to_bytes(),
                &records::oi_value(NO_SUCH_INODE),
            )
        })
        .await?;
    Ok(hit("stale index entry added", fid, None))
}

/// Deletes the whole object index of `mdt`, a batch at a time; returns how many entries
/// it removed.
pub async fn drop_oi(mdt: &Mdt) -> Result<u64, Errno> {
    let mut n = 0;
    loop {
        let rows = mdt
            .store()
            .read()?
            .range(Table::Oi, &[], &[0xff; 17], 4096)?;
        if rows.is_empty() {
            return Ok(n);
        }
        n += rows.len() as u64;
        mdt.store()
            .write(move |tx| {
                for (k, _) in rows {
                    tx.delete(Table::Oi, &k)?;
                }
                Ok(())
            })
            .await?;
    }
}

/// Removes the name `parent/name` (on the MDT of `parent`) and nothing else.
pub async fn remove_name(mdt: &Mdt, parent: Fid, name: &[u8]) -> Result<Injected, Errno> {
    let n = name.to_vec();
    let fid = mdt
        .store()
        .write(move |tx| {
            let (fid, _) = mdd::lookup(tx, &parent, &n)?.ok_or(Errno::ENOENT)?;
            tx.delete(Table::Dirents, &records::dirent_key(&parent, &n))?;
            Ok(fid)
        })
        .await?;
    Ok(hit("name removed", fid, Some((parent, name))))
}

/// Empties the linkEA of `fid` (on `mdt`).
pub async fn drop_links(mdt: &Mdt, fid: Fid) -> Result<Injected, Errno> {
    mdt.store()
        .write(move |tx| {
            let mut i = mdd::get_inode(tx, &fid)?;
            mdd::set_links(tx, &mut i, Vec::new())?;
            mdd::put_inode(tx, &i).map(|_| ())
        })
        .await?;
    Ok(hit("linkEA emptied", fid, None))
}

/// Changes the name in the first linkEA entry of `fid` (on `mdt`) to one that does not
/// exist.
pub async fn corrupt_link_name(mdt: &Mdt, fid: Fid) -> Result<Injected, Errno> {
    let at = mdt
        .store()
        .write(move |tx| {
            let mut i = mdd::get_inode(tx, &fid)?;
            let mut links = mdd::all_links(tx, &i)?;
            let l = links.first_mut().ok_or(Errno::ENOENT)?;
            l.1.extend_from_slice(b".corrupt");
            let at = l.clone();
            mdd::set_links(tx, &mut i, links)?;
            mdd::put_inode(tx, &i)?;
            Ok(at)
        })
        .await?;
    Ok(hit("linkEA entry corrupted", fid, Some((at.0, &at.1))))
}

/// Removes the name `parent/name` and empties its object's linkEA (both on `mdt`): the
/// object is named nowhere and knows no name.
pub async fn orphan_object(mdt: &Mdt, parent: Fid, name: &[u8]) -> Result<Injected, Errno> {
    let r = remove_name(mdt, parent, name).await?;
    drop_links(mdt, r.fid).await?;
    Ok(hit("object orphaned", r.fid, Some((parent, name))))
}

/// Adds the name `dir/name -> target` (on the MDT of `dir`) without telling the target.
pub async fn add_name(
    mdt: &Mdt,
    dir: Fid,
    name: &[u8],
    target: Fid,
    kind: FileKind,
) -> Result<Injected, Errno> {
    let n = name.to_vec();
    mdt.store()
        .write(move |tx| {
            if mdd::lookup(tx, &dir, &n)?.is_some() {
                return Err(Errno::EEXIST);
            }
            mdd::put_dirent(tx, &dir, &n, &target, kind, 0)
        })
        .await?;
    Ok(hit("extra name added", target, Some((dir, name))))
}

/// Sets the type the entry `parent/name` records.
pub async fn set_dirent_type(
    mdt: &Mdt,
    parent: Fid,
    name: &[u8],
    kind: FileKind,
) -> Result<Injected, Errno> {
    let n = name.to_vec();
    let fid = mdt
        .store()
        .write(move |tx| {
            let d = mdd::lookup_rec(tx, &parent, &n)?.ok_or(Errno::ENOENT)?;
            tx.put(
                Table::Dirents,
                &records::dirent_key(&parent, &n),
                &records::dirent_value(&d.fid, kind, d.ino),
            )?;
            Ok(d.fid)
        })
        .await?;
    Ok(hit("entry type changed", fid, Some((parent, name))))
}

/// Sets the link count of `fid` (on `mdt`).
pub async fn set_nlink(mdt: &Mdt, fid: Fid, nlink: u32) -> Result<Injected, Errno> {
    mdt.store()
        .write(move |tx| {
            let mut i = mdd::get_inode(tx, &fid)?;
            i.attr.nlink = nlink;
            mdd::put_inode(tx, &i).map(|_| ())
        })
        .await?;
    Ok(hit("link count changed", fid, None))
}

/// Replaces the FID in the entry `parent/name` by one no object has, keeping the inode
/// number beside it.
pub async fn corrupt_dirent_fid(mdt: &Mdt, parent: Fid, name: &[u8]) -> Result<Injected, Errno> {
    let n = name.to_vec();
    let fid = mdt
        .store()
        .write(move |tx| {
            let d = mdd::lookup_rec(tx, &parent, &n)?.ok_or(Errno::ENOENT)?;
            let bad = Fid::new(d.fid.seq, d.fid.oid ^ 0x00ff_0000, 0x7);
            tx.put(
                Table::Dirents,
                &records::dirent_key(&parent, &n),
                &records::dirent_value(&bad, d.kind, d.ino),
            )?;
            Ok(d.fid)
        })
        .await?;
    Ok(hit("FID-in-dirent corrupted", fid, Some((parent, name))))
}

/// Makes directory `fid`'s linkEA name `parent/name` instead of its real name.
pub async fn set_dir_link(
    mdt: &Mdt,
    fid: Fid,
    parent: Fid,
    name: &[u8],
) -> Result<Injected, Errno> {
    let n = name.to_vec();
    mdt.store()
        .write(move |tx| {
            let mut i = mdd::get_inode(tx, &fid)?;
            if !i.attr.is_dir() {
                return Err(Errno::ENOTDIR);
            }
            mdd::set_links(tx, &mut i, vec![(parent, n)])?;
            mdd::put_inode(tx, &i).map(|_| ())
        })
        .await?;
    Ok(hit(
        "directory linkEA pointed elsewhere",
        fid,
        Some((parent, name)),
    ))
}

/// Replaces slot `index` of striped directory `master`'s LMV by a FID no stripe has.
pub async fn corrupt_lmv_slot(mdt: &Mdt, master: Fid, index: u32) -> Result<Injected, Errno> {
    mdt.store()
        .write(move |tx| {
            let mut i = mdd::get_inode(tx, &master)?;
            let slot = i
                .lmv
                .as_mut()
                .and_then(|l| l.stripes.get_mut(index as usize))
                .ok_or(Errno::EINVAL)?;
            slot.1 = Fid::new(slot.1.seq, slot.1.oid ^ 0x00ff_0000, 0x7);
            mdd::put_inode(tx, &i).map(|_| ())
        })
        .await?;
    Ok(hit("LMV slot corrupted", master, None))
}

/// Makes stripe `fid` (on `mdt`) record `master` and `index`.
pub async fn set_stripe_of(
    mdt: &Mdt,
    fid: Fid,
    master: Fid,
    index: u32,
) -> Result<Injected, Errno> {
    mdt.store()
        .write(move |tx| {
            let v = postcard::to_allocvec(&(master, index)).map_err(|_| Errno::EIO)?;
            tx.put(Table::Xattrs, &records::xattr_key(&fid, STRIPE_XATTR), &v)
        })
        .await?;
    Ok(hit("stripe index changed", fid, None))
}

/// Moves the name `stripe/name` into stripe `to` (another stripe of the same directory),
/// its object's linkEA following: the name is whole, in the wrong stripe. `from_mdt`
/// holds `stripe`, `to_mdt` holds `to`, `obj_mdt` holds the object.
pub async fn misplace_name(
    from_mdt: &Mdt,
    to_mdt: &Mdt,
    obj_mdt: &Mdt,
    stripe: Fid,
    name: &[u8],
    to: Fid,
) -> Result<Injected, Errno> {
    let n = name.to_vec();
    let d = {
        let mut v = from_mdt.store().read()?;
        mdd::lookup_rec(&mut v, &stripe, name)?.ok_or(Errno::ENOENT)?
    };
    let n2 = n.clone();
    to_mdt
        .store()
        .write(move |tx| mdd::put_dirent(tx, &to, &n2, &d.fid, d.kind, 0))
        .await?;
    let n3 = n.clone();
    from_mdt
        .store()
        .write(move |tx| {
            tx.delete(Table::Dirents, &records::dirent_key(&stripe, &n3))
                .map(|_| ())
        })
        .await?;
    let fid = d.fid;
    obj_mdt
        .store()
        .write(move |tx| {
            let mut i = mdd::get_inode(tx, &fid)?;
            let mut links = mdd::all_links(tx, &i)?;
            for l in &mut links {
                if l.0 == stripe && l.1 == n {
                    l.0 = to;
                }
            }
            mdd::set_links(tx, &mut i, links)?;
            mdd::put_inode(tx, &i).map(|_| ())
        })
        .await?;
    Ok(hit("name in the wrong stripe", d.fid, Some((to, name))))
}

/// Records on `mdt` an operation prepared for coordinator MDT `coord` (one the file
/// system does not have), creating an unnamed directory as its prepare would.
pub async fn stale_dne_record(mdt: &Mdt, coord: u32, fid: Fid) -> Result<Injected, Errno> {
    let now = Timespec::now();
    mdt.store()
        .write(move |tx| {
            let obj = DneObject {
                attr: nacre_core::Attr {
                    fid,
                    mode: libc::S_IFDIR | 0o755,
                    nlink: 2,
                    atime: now,
                    mtime: now,
                    ctime: now,
                    btime: now,
                    ..nacre_core::Attr::default()
                },
                lmv: None,
                default_layout: None,
                default_lmv: None,
                links: vec![(Fid::ROOT, format!("never-{fid}").into_bytes())],
                stripe_of: None,
                xattrs: Vec::new(),
            };
            let u = DneUpdate::CreateObject(obj.clone());
            mdd::put_inode(tx, &nacre_mdt::dne::exec::object_inode(&obj))?;
            log::put_pending(
                tx,
                &log::Pending {
                    coord,
                    op: log::op_id(1, u64::from(fid.oid)),
                    updates: vec![u],
                    killed: Vec::new(),
                    since_ms: log::now_ms(),
                },
            )
        })
        .await?;
    Ok(hit("distributed operation left prepared", fid, None))
}

/// Moves directory `parent/name` (whose first subdirectory is `sub/sub_name`) under that
/// subdirectory, both linkEAs consistent: the two name each other and no path from the
/// root reaches them.
pub async fn loop_dirs(mdt: &Mdt, parent: Fid, name: &[u8]) -> Result<Injected, Errno> {
    let n = name.to_vec();
    let fid = mdt
        .store()
        .write(move |tx| {
            let (a, _) = mdd::lookup(tx, &parent, &n)?.ok_or(Errno::ENOENT)?;
            let rows = tx.range(
                Table::Dirents,
                &records::dirent_start(&a, 0),
                &records::dirent_end(&a),
                64,
            )?;
            let sub = rows
                .iter()
                .filter_map(|(_, v)| records::parse_dirent(v).ok())
                .find(|d| d.kind == FileKind::Directory)
                .ok_or(Errno::ENOENT)?;
            tx.delete(Table::Dirents, &records::dirent_key(&parent, &n))?;
            mdd::put_dirent(tx, &sub.fid, &n, &a, FileKind::Directory, 0)?;
            let mut ai = mdd::get_inode(tx, &a)?;
            mdd::set_links(tx, &mut ai, vec![(sub.fid, n.clone())])?;
            mdd::put_inode(tx, &ai)?;
            Ok(a)
        })
        .await?;
    Ok(hit("directories looped", fid, Some((parent, name))))
}

/// Stripe `stripe` (of the first component) of file `fid` on `mdt`.
pub async fn stripe_object(mdt: &Mdt, fid: Fid, stripe: u32) -> Result<StripeObject, Errno> {
    let mut v = mdt.store().read()?;
    let i = mdd::get_inode(&mut v, &fid)?;
    i.layout
        .as_ref()
        .and_then(|l| l.components.first())
        .and_then(|c| c.objects.get(stripe as usize))
        .copied()
        .ok_or(Errno::ENOENT)
}

/// Sets stripe `stripe` (of the first component) of file `fid` on `mdt` to `so`.
async fn set_stripe(mdt: &Mdt, fid: Fid, stripe: u32, so: StripeObject) -> Result<(), Errno> {
    mdt.store()
        .write(move |tx| {
            let mut i = mdd::get_inode(tx, &fid)?;
            let slot = i
                .layout
                .as_mut()
                .and_then(|l| l.components.first_mut())
                .and_then(|c| c.objects.get_mut(stripe as usize))
                .ok_or(Errno::ENOENT)?;
            *slot = so;
            mdd::put_inode(tx, &i).map(|_| ())
        })
        .await
}

/// Removes the OST object `obj` (from `ost`, the store of its OST), its data with it: the
/// layout that references it dangles (a precreated object without a file reads as
/// empty, so the file's data is silently gone).
pub fn remove_ost_object(ost: &ObjStore, obj: Fid) -> Result<Injected, Errno> {
    ost.destroy(&obj)?;
    Ok(hit("OST object removed", obj, None))
}

/// Truncates OST object `obj` (on `ost`) to nothing, keeping the object and its filter
/// fid: the data a file's exact size says it holds is gone.
pub fn truncate_ost_object(ost: &ObjStore, obj: Fid) -> Result<Injected, Errno> {
    ost.probe(&obj)?.0.ok_or(Errno::ENOENT)?;
    ost.punch(&obj, 0).map_err(Errno::from)?;
    Ok(hit("OST object truncated", obj, None))
}

/// Gives OST object `obj` (on `ost`) the owner `uid`:`gid`, as a chown whose passing to
/// the OST was lost leaves the object with an owner that is not its file's (Lustre's
/// `OBD_FAIL_LFSCK_BAD_OWNER`). Only an object with data can have an owner.
pub fn change_ost_owner(ost: &ObjStore, obj: Fid, uid: u32, gid: u32) -> Result<Injected, Errno> {
    if !ost.set_owner(&obj, uid, gid)? {
        return Err(Errno::ENOENT);
    }
    Ok(hit("OST object owner changed", obj, None))
}

/// Points the filter fid of OST object `obj` at a file that does not exist (a FID of the
/// same MDT no file has).
pub fn corrupt_filter_fid(ost: &ObjStore, obj: Fid) -> Result<Injected, Errno> {
    let ff = ost.probe(&obj)?.1.ok_or(Errno::ENODATA)?;
    let bad = Fid::new(ff.seq, ff.oid ^ 0x00ff_0000, ff.ver);
    ost.set_filter_fid(&obj, &bad)?;
    Ok(hit("filter fid corrupted", obj, None))
}

/// Makes stripe `stripe` of file `b` hold the object stripe `stripe` of file `a` holds
/// (both on `mdt`): two layouts share one object. `b`'s own object is left as it was (a
/// file never written has no data on it to orphan).
pub async fn share_object(mdt: &Mdt, a: Fid, b: Fid, stripe: u32) -> Result<Injected, Errno> {
    let so = stripe_object(mdt, a, stripe).await?;
    set_stripe(mdt, b, stripe, so).await?;
    Ok(hit("OST object shared", b, None))
}

/// The object id a detached stripe is given: one no OST ever creates (past the width of
/// a data sequence).
pub const NEVER_CREATED: u32 = DATA_SEQ_WIDTH + 1;

/// Makes stripe `stripe` of file `fid` (on `mdt`) reference an object that was never
/// created: its real object, with the file's data and a filter fid naming it, is an
/// orphan LFSCK can put back.
pub async fn detach_object(mdt: &Mdt, fid: Fid, stripe: u32) -> Result<Injected, Errno> {
    let so = stripe_object(mdt, fid, stripe).await?;
    let gone = StripeObject {
        ost_idx: so.ost_idx,
        fid: Fid::new(so.fid.seq, NEVER_CREATED, 0),
    };
    set_stripe(mdt, fid, stripe, gone).await?;
    Ok(hit("OST object detached", so.fid, None))
}

/// Writes `data` into a new object of OST `ost_idx` (taken from `mdt`'s precreated
/// objects; `ost` is that OST's store) whose filter fid names `parent`, a file that does
/// not exist (as a write that reached an object after its file was removed leaves it).
pub async fn orphan_ost_object(
    mdt: &Mdt,
    ost: &ObjStore,
    ost_idx: u32,
    parent: Fid,
    data: &[u8],
) -> Result<Injected, Errno> {
    let osp = mdt.lod().osp(ost_idx).ok_or(Errno::ENODEV)?;
    let so = osp.take().await?;
    // Handed out as far as the MDT knows, as a file's object whose inode was then lost:
    // not one a power cut took back, which the MDT's next start resets.
    mdt.store()
        .write(move |tx| mdd::note_objects_used(tx, &[so]))
        .await?;
    ost.write(&so.fid, &parent.with_ver(0), 0, data)
        .map_err(Errno::from)?;
    Ok(hit("orphan OST object made", so.fid, None))
}

/// Sets LAST_ID of sequence `seq` on OST store `ost` to `last` (below its objects).
pub fn rewind_last_id(ost: &ObjStore, seq: u64, last: u32) -> Result<Injected, Errno> {
    ost.set_last_id(seq, last)?;
    Ok(hit("LAST_ID rewound", Fid::new(seq, last.max(1), 0), None))
}
