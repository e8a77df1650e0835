//! Encode/decode round trips of the MDT's stored records: inode records (with layouts,
//! LMVs and the first link), name entries, object-index values and the DNE log.

use nacre_core::lmv::Lmv;
use nacre_core::{Attr, Fid, FileKind, Layout, Timespec};
use nacre_mdt::dne::log::{Committed, decode_committed, encode_committed};
use nacre_mdt::records::{
    Inode, dirent_key, dirent_key_parts, dirent_value, name_hash, oi_value, parse_dirent,
    parse_oi_value,
};
use proptest::prelude::*;

fn fid() -> impl Strategy<Value = Fid> {
    (any::<u64>(), any::<u32>(), any::<u32>()).prop_map(|(s, o, v)| Fid::new(s, o, v))
}

fn time() -> impl Strategy<Value = Timespec> {
    (any::<i64>(), 0u32..1_000_000_000).prop_map(|(sec, nsec)| Timespec { sec, nsec })
}

fn attr() -> impl Strategy<Value = Attr> {
    (
        fid(),
        (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()),
        (any::<u64>(), any::<u64>(), any::<u32>()),
        (time(), time(), time(), time()),
    )
        .prop_map(
            |(fid, (mode, nlink, uid, gid), (size, blocks, rdev), (atime, mtime, ctime, btime))| {
                Attr {
                    fid,
                    mode,
                    nlink,
                    uid,
                    gid,
                    size,
                    blocks,
                    atime,
                    mtime,
                    ctime,
                    btime,
                    rdev,
                }
            },
        )
}

fn lmv() -> impl Strategy<Value = Lmv> {
    (
        any::<u32>(),
        any::<u32>(),
        prop::collection::vec((any::<u32>(), fid()), 0..6),
    )
        .prop_map(|(master_mdt, hash_type, stripes)| Lmv {
            master_mdt,
            hash_type,
            layout_version: 0,
            stripes,
        })
}

fn inode() -> impl Strategy<Value = Inode> {
    let layout =
        (any::<i32>(), any::<u32>(), any::<i32>()).prop_map(|(c, s, o)| Layout::plain(c, s, o));
    let name = prop::collection::vec(any::<u8>(), 1..256);
    (
        attr(),
        prop::option::of(layout.clone()),
        prop::option::of(lmv()),
        prop::option::of(layout),
        prop::option::of((fid(), name.clone())),
        prop::option::of(name),
        any::<bool>(),
    )
        .prop_map(
            |(attr, layout, lmv, default_layout, link, symlink, lsom_valid)| Inode {
                attr,
                layout,
                lmv,
                default_layout,
                default_lmv: None,
                link,
                symlink,
                lsom_valid,
                ino: 0,
            },
        )
}

fn kind() -> impl Strategy<Value = FileKind> {
    prop_oneof![
        Just(FileKind::Regular),
        Just(FileKind::Directory),
        Just(FileKind::Symlink),
        Just(FileKind::CharDevice),
        Just(FileKind::BlockDevice),
        Just(FileKind::Fifo),
        Just(FileKind::Socket),
    ]
}

proptest! {
    #[test]
    fn inode_records_round_trip(i in inode(), crash_gen in any::<u64>()) {
        prop_assert_eq!(Inode::decode(&i.encode(crash_gen).expect("encode"), crash_gen), Ok(i));
    }

    #[test]
    fn cut_inode_records_are_eio(i in inode(), cut in any::<prop::sample::Index>()) {
        let b = i.encode(0).expect("encode");
        let n = cut.index(b.len());
        prop_assert!(Inode::decode(&b[..n], 0).is_err());
    }

    #[test]
    fn dirents_round_trip(f in fid(), k in kind(), ino in any::<u64>(), parent in fid(),
                          name in prop::collection::vec(any::<u8>(), 1..256)) {
        let d = parse_dirent(&dirent_value(&f, k, ino)).expect("parse");
        prop_assert_eq!((d.fid, d.kind, d.ino), (f, k, ino));
        let key = dirent_key(&parent, &name);
        prop_assert_eq!(dirent_key_parts(&key), Some((name_hash(&name), &name[..])));
        prop_assert_eq!(Fid::from_bytes(&key), Some(parent));
    }

    #[test]
    fn oi_values_round_trip(ino in 1u64..) {
        prop_assert_eq!(parse_oi_value(&oi_value(ino)), Ok(ino));
    }

    #[test]
    fn dne_committed_records_round_trip(
        participants in prop::collection::vec(any::<u32>(), 0..16),
        since_ms in any::<u64>(),
    ) {
        let c = Committed { participants, since_ms };
        prop_assert_eq!(decode_committed(&encode_committed(&c).expect("encode")), Ok(c));
    }
}
