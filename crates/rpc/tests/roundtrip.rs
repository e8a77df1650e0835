//! Encode/decode round trips of frames and messages, and what a decoder does with a frame
//! cut short or damaged anywhere.

use nacre_core::layout::Component;
use nacre_core::{Fid, Layout};
use nacre_rpc::frame::{decode_slice, make_header};
use nacre_rpc::msg::{self, Cred, LayoutRequest, OpenFlags, Reply, Request};
use proptest::prelude::*;

fn fid() -> impl Strategy<Value = Fid> {
    (any::<u64>(), any::<u32>(), any::<u32>()).prop_map(|(s, o, v)| Fid::new(s, o, v))
}

fn name() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..300)
}

fn cred() -> impl Strategy<Value = Cred> {
    (
        any::<u32>(),
        any::<u32>(),
        prop::collection::vec(any::<u32>(), 0..16),
        any::<u64>(),
    )
        .prop_map(|(u, g, groups, caps)| Cred::user(u, g, groups, caps))
}

fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![
        (any::<i32>(), any::<u32>(), any::<i32>()).prop_map(|(c, s, o)| Layout::plain(c, s, o)),
        (any::<u32>(), 1u64..1 << 30, any::<i32>()).prop_map(|(s, dom, c)| Layout::composite(
            vec![
                Component::dom(dom),
                Component::raid0(dom, u64::MAX, c, s, -1)
            ]
        )),
    ]
}

fn open_flags() -> impl Strategy<Value = OpenFlags> {
    any::<(bool, bool, bool, bool)>().prop_map(|(write, read, truncate, append)| OpenFlags {
        write,
        read,
        truncate,
        append,
    })
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        Just(Request::Ping),
        Just(Request::Statfs),
        (fid(), name(), cred()).prop_map(|(parent, name, cred)| Request::Lookup {
            parent,
            name,
            cred
        }),
        (
            (fid(), name(), any::<u32>(), any::<u32>(), cred()),
            prop::option::of(name()),
            prop_oneof![
                Just(LayoutRequest::Inherit),
                layout().prop_map(LayoutRequest::Explicit)
            ],
            prop::option::of(open_flags()),
            any::<bool>(),
        )
            .prop_map(
                |((parent, name, mode, rdev, cred), symlink, layout, open, exclusive)| {
                    Request::Create {
                        parent,
                        name,
                        mode,
                        rdev,
                        cred,
                        symlink,
                        layout,
                        open,
                        exclusive,
                    }
                }
            ),
        (fid(), open_flags(), cred()).prop_map(|(fid, flags, cred)| Request::Open {
            fid,
            flags,
            cred
        }),
        (fid(), name(), fid(), name(), any::<u32>(), cred()).prop_map(
            |(sp, sn, dp, dn, flags, cred)| Request::Rename {
                src_parent: sp,
                src_name: sn,
                dst_parent: dp,
                dst_name: dn,
                flags,
                cred
            }
        ),
        (fid(), any::<u64>(), any::<u32>(), cred()).prop_map(|(fid, cookie, max, cred)| {
            Request::Readdir {
                fid,
                cookie,
                max,
                cred,
            }
        }),
        (fid(), fid(), any::<u64>(), any::<u64>(), any::<i32>()).prop_map(
            |(obj, parent, offset, len, mode)| Request::OstFallocate {
                obj,
                parent,
                offset,
                len,
                mode
            }
        ),
    ]
}

fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        Just(Reply::Ok),
        (1i32..200).prop_map(|e| Reply::Error(nacre_core::Errno(e))),
        "[ -~]{0,40}".prop_map(|target| Reply::Pong { target }),
    ]
}

fn frame(flags: u32, body: &[u8], bulk: &[u8]) -> Vec<u8> {
    let mut v = make_header(7, 42, flags, body, bulk).encode().to_vec();
    v.extend_from_slice(body);
    v.extend_from_slice(bulk);
    v
}

proptest! {
    #[test]
    fn requests_round_trip(r in request()) {
        let b = msg::encode(&r).expect("encode");
        prop_assert_eq!(msg::decode::<Request>(&b).expect("decode"), r);
    }

    #[test]
    fn replies_round_trip(r in reply()) {
        let b = msg::encode(&r).expect("encode");
        prop_assert_eq!(msg::decode::<Reply>(&b).expect("decode"), r);
    }

    #[test]
    fn frames_round_trip(
        flags in any::<u32>(),
        body in prop::collection::vec(any::<u8>(), 0..2000),
        bulk in prop::collection::vec(any::<u8>(), 0..5000),
    ) {
        let v = frame(flags, &body, &bulk);
        let (f, used) = decode_slice(&v).expect("valid").expect("complete");
        prop_assert_eq!(used, v.len());
        prop_assert_eq!(f.header.flags, flags);
        prop_assert_eq!(&f.body[..], &body[..]);
        prop_assert_eq!(&f.bulk[..], &bulk[..]);
    }

    #[test]
    fn cut_frames_want_more_bytes(
        body in prop::collection::vec(any::<u8>(), 0..200),
        cut in any::<prop::sample::Index>(),
    ) {
        let v = frame(0, &body, b"");
        let n = cut.index(v.len());
        prop_assert!(matches!(decode_slice(&v[..n]), Ok(None)));
    }

    #[test]
    fn damaged_frames_are_refused(
        r in request(),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let mut v = frame(0, &msg::encode(&r).expect("encode"), b"");
        let i = at.index(v.len());
        v[i] ^= 1 << bit;
        // A damaged length may ask for more bytes than there are; anything else is an error.
        let got = decode_slice(&v);
        prop_assert!(got.is_err() || ((20..28).contains(&i) && matches!(got, Ok(None))));
    }
}
