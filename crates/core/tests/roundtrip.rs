//! Encode/decode round trips of what core defines and the servers store or send: layouts
//! (plain, PFL, DoM, mirrored), LMVs and their templates (postcard, as in inode records
//! and messages), and ACL xattrs.

use nacre_core::acl::{Acl, AclEntry, GROUP, GROUP_OBJ, MASK, OTHER, UNDEFINED_ID, USER, USER_OBJ};
use nacre_core::layout::{Component, Pattern, StripeObject};
use nacre_core::lmv::{Lmv, LmvTemplate};
use nacre_core::{Fid, Layout};
use proptest::prelude::*;

fn fid() -> impl Strategy<Value = Fid> {
    (any::<u64>(), any::<u32>(), any::<u32>()).prop_map(|(s, o, v)| Fid::new(s, o, v))
}

fn component() -> impl Strategy<Value = Component> {
    (
        (any::<u32>(), any::<u32>(), any::<u64>(), any::<u64>()),
        prop_oneof![Just(Pattern::Raid0), Just(Pattern::Mdt)],
        (any::<u32>(), any::<i32>(), any::<i32>()),
        prop::collection::vec(any::<u32>(), 0..4),
        "[a-z]{0,15}",
        prop::collection::vec(
            (any::<u32>(), fid()).prop_map(|(ost_idx, fid)| StripeObject { ost_idx, fid }),
            0..6,
        ),
        prop::option::of(fid()),
    )
        .prop_map(
            |(
                (id, flags, start, end),
                pattern,
                (size, count, offset),
                ost_list,
                pool,
                objects,
                dom,
            )| {
                Component {
                    id,
                    flags,
                    start,
                    end,
                    pattern,
                    stripe_size: size,
                    stripe_count: count,
                    stripe_offset: offset,
                    ost_list,
                    pool,
                    objects,
                    dom_object: dom,
                }
            },
        )
}

fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![
        (any::<i32>(), any::<u32>(), any::<i32>()).prop_map(|(c, s, o)| Layout::plain(c, s, o)),
        prop::collection::vec(component(), 1..5).prop_map(Layout::composite),
    ]
}

fn lmv() -> impl Strategy<Value = Lmv> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        prop::collection::vec((any::<u32>(), fid()), 0..8),
    )
        .prop_map(|(master_mdt, hash_type, layout_version, stripes)| Lmv {
            master_mdt,
            hash_type,
            layout_version,
            stripes,
        })
}

fn lmv_template() -> impl Strategy<Value = LmvTemplate> {
    (
        any::<i32>(),
        any::<i32>(),
        any::<u32>(),
        any::<i32>(),
        any::<i32>(),
    )
        .prop_map(
            |(stripe_count, stripe_offset, hash_type, max_inherit, max_inherit_rr)| LmvTemplate {
                stripe_count,
                stripe_offset,
                hash_type,
                max_inherit,
                max_inherit_rr,
            },
        )
}

/// A valid ACL: the three base entries, named users and groups in increasing id order,
/// and a mask when there are named entries.
fn acl() -> impl Strategy<Value = Acl> {
    (
        (0u16..8, 0u16..8, 0u16..8, 0u16..8),
        prop::collection::btree_set(0u32..100_000, 0..5),
        prop::collection::btree_set(0u32..100_000, 0..5),
    )
        .prop_map(|((u, g, m, o), users, groups)| {
            let e = |tag, perm, id| AclEntry { tag, perm, id };
            let mut entries = vec![e(USER_OBJ, u, UNDEFINED_ID)];
            entries.extend(users.iter().map(|id| e(USER, 4, *id)));
            entries.push(e(GROUP_OBJ, g, UNDEFINED_ID));
            entries.extend(groups.iter().map(|id| e(GROUP, 5, *id)));
            if !users.is_empty() || !groups.is_empty() {
                entries.push(e(MASK, m, UNDEFINED_ID));
            }
            entries.push(e(OTHER, o, UNDEFINED_ID));
            Acl { entries }
        })
}

proptest! {
    #[test]
    fn layouts_round_trip(l in layout()) {
        let b = postcard::to_allocvec(&l).expect("encode");
        prop_assert_eq!(postcard::from_bytes::<Layout>(&b).expect("decode"), l);
    }

    #[test]
    fn lmvs_round_trip(l in lmv(), t in lmv_template()) {
        let b = postcard::to_allocvec(&l).expect("encode");
        prop_assert_eq!(postcard::from_bytes::<Lmv>(&b).expect("decode"), l);
        let b = postcard::to_allocvec(&t).expect("encode");
        prop_assert_eq!(postcard::from_bytes::<LmvTemplate>(&b).expect("decode"), t);
    }

    #[test]
    fn acls_round_trip(a in acl()) {
        let b = a.encode();
        prop_assert_eq!(Acl::decode(&b), Ok(a));
    }

    #[test]
    fn fids_round_trip(f in fid()) {
        prop_assert_eq!(Fid::from_bytes(&f.to_bytes()), Some(f));
    }

    #[test]
    fn truncated_layouts_are_errors(l in layout(), cut in any::<prop::sample::Index>()) {
        let b = postcard::to_allocvec(&l).expect("encode");
        let n = cut.index(b.len());
        prop_assert!(postcard::from_bytes::<Layout>(&b[..n]).is_err());
    }
}
