//! Lustre's layout rules, enforced by the MDT for a client that does not go through `lfs`:
//! a bad layout sent with the native client gets EINVAL and nothing is stored.

use crate::common;

use common::cluster::FILE;
use common::lfsck::Fs;
use nacre_core::layout::{Component, EOF, Layout};
use nacre_core::{Errno, Fid};
use nacre_rpc::msg::{Cred, LayoutRequest};

/// Creates `name` with an explicit layout, as a client bypassing `lfs` would.
async fn create_with(fs: &Fs, dir: Fid, name: &str, l: Layout) -> Result<Fid, Errno> {
    fs.c.create(
        dir,
        name.as_bytes(),
        FILE,
        0,
        &Cred::root(),
        None,
        LayoutRequest::Explicit(l),
        None,
        true,
    )
    .await
    .map(|(i, _)| i.attr.fid)
}

/// Layouts Lustre's MDT refuses, each with why.
fn bad_layouts() -> Vec<(&'static str, Layout)> {
    let mut long_pool = Layout::plain(1, 1 << 20, -1);
    long_pool.components[0].pool = "a-pool-name-over-15".to_string();
    vec![
        ("stripe size not 64K", Layout::plain(1, 4096, -1)),
        ("stripe offset below -1", Layout::plain(1, 1 << 20, -5)),
        ("stripe offset past the OSTs", Layout::plain(1, 1 << 20, 7)),
        ("stripe count over 2000", Layout::plain(3000, 1 << 20, -1)),
        ("pool name too long", long_pool),
        (
            "gap between components",
            Layout::composite(vec![
                Component::raid0(0, 1 << 20, 1, 1 << 20, -1),
                Component::raid0(2 << 20, EOF, 1, 1 << 20, -1),
            ]),
        ),
        (
            "empty component",
            Layout::composite(vec![
                Component::raid0(0, 1 << 20, 1, 1 << 20, -1),
                Component::raid0(1 << 20, 1 << 20, 1, 1 << 20, -1),
                Component::raid0(1 << 20, EOF, 1, 1 << 20, -1),
            ]),
        ),
        (
            "end not a multiple of the stripe size",
            Layout::composite(vec![
                Component::raid0(0, 3 << 20, 1, 2 << 20, -1),
                Component::raid0(3 << 20, EOF, 1, 1 << 20, -1),
            ]),
        ),
        (
            "Data-on-MDT not first",
            Layout::composite(vec![
                Component::raid0(0, 1 << 20, 1, 1 << 20, -1),
                Component {
                    start: 1 << 20,
                    ..Component::dom(2 << 20)
                },
                Component::raid0(2 << 20, EOF, 1, 1 << 20, -1),
            ]),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_layouts_from_a_raw_client_are_refused_and_store_nothing() {
    let mut fs = Fs::new(1, 4).await;
    let root = fs.c.root();
    let cred = Cred::root();
    for (i, (why, l)) in bad_layouts().into_iter().enumerate() {
        let name = format!("f{i}");
        assert_eq!(
            create_with(&fs, root, &name, l.clone()).await,
            Err(Errno::EINVAL),
            "create: {why}"
        );
        assert_eq!(
            fs.c.lookup(root, name.as_bytes(), &cred).await.err(),
            Some(Errno::ENOENT),
            "stored after refusal: {why}"
        );
        // The same layout as a directory's default.
        let d = fs.mkdir(root, &format!("d{i}")).await;
        assert_eq!(
            fs.c.set_default_layout(d, Some(l), &cred).await,
            Err(Errno::EINVAL),
            "directory default: {why}"
        );
        assert_eq!(fs.c.get_default_layout(d).await, Ok(None), "{why}");
    }

    // Components added to a file must follow the same rules.
    let pfl = Layout::composite(vec![Component::raid0(0, 1 << 20, 1, 1 << 20, -1)]);
    let f = create_with(&fs, root, "pfl", pfl).await.expect("good PFL");
    let before = fs.c.getattr(f).await.expect("getattr").layout;
    let bad_adds = [
        (
            "stripe size not 64K",
            Component::raid0(1 << 20, EOF, 1, 100 << 10, -1),
        ),
        (
            "stripe offset below -1",
            Component::raid0(1 << 20, EOF, 1, 1 << 20, -3),
        ),
        (
            "stripe offset past the OSTs",
            Component::raid0(1 << 20, EOF, 1, 1 << 20, 4),
        ),
        (
            "end not stripe aligned",
            Component::raid0(1 << 20, 3 << 20, 1, 2 << 20, -1),
        ),
    ];
    for (why, c) in bad_adds {
        assert_eq!(
            fs.c.add_components(f, vec![c], &cred).await.err(),
            Some(Errno::EINVAL),
            "add: {why}"
        );
        let after = fs.c.getattr(f).await.expect("getattr").layout;
        assert_eq!(after, before, "stored after refusal: {why}");
    }

    let rep = fs.check().await;
    assert!(rep.is_clean(), "{}", rep.summary());
    fs.stop().await;
}
