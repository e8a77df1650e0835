//! DNE through the client library against a real one-process file system with four MDTs:
//! remote and striped directories, placement by Lustre's name hash, merged readdir,
//! operations across MDTs, bad input, and the namespace checker on the stores afterwards.

use crate::common;

use common::cluster::{DIR, FILE, create, mount, quiesce_within, start};
use nacre_client::Client;
use nacre_core::lmv::{HashType, LmvTemplate};
use nacre_core::{Errno, Fid};
use nacre_rpc::msg::{Cred, DirLayoutRequest, LayoutRequest, OpenFlags};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

fn layout(count: i32, offset: i32, hash: HashType) -> DirLayoutRequest {
    DirLayoutRequest {
        stripe_count: count,
        stripe_offset: offset,
        mdts: Vec::new(),
        hash_type: hash as u32,
    }
}

async fn touch(c: &Client, dir: Fid, name: &str) -> Fid {
    create(c, dir, name.as_bytes(), FILE)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"))
        .attr
        .fid
}

async fn mkdir(c: &Client, dir: Fid, name: &str) -> Fid {
    create(c, dir, name.as_bytes(), DIR)
        .await
        .unwrap_or_else(|e| panic!("mkdir {name}: {e}"))
        .attr
        .fid
}

async fn list(c: &Client, dir: Fid, batch: u32) -> Vec<String> {
    let mut out = Vec::new();
    let mut cookie = 0;
    loop {
        let (ents, eof) = c
            .readdir(dir, cookie, batch, &Cred::root())
            .await
            .expect("readdir");
        if let Some(l) = ents.last() {
            cookie = l.cookie;
        }
        out.extend(
            ents.into_iter()
                .map(|e| String::from_utf8_lossy(&e.name).into_owned()),
        );
        if eof {
            return out;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_and_striped_directories() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("warn")
        .with_test_writer()
        .try_init();
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "dnefs", 4, 1).await;
    let c = mount(&cluster).await;
    let root = c.root();
    let cred = Cred::root();

    // A remote directory on MDT2: its inode and its files live there.
    let r2 = c
        .mkdir_with_layout(root, b"r2", 0o755, &cred, layout(1, 2, HashType::Fnv1a64))
        .await
        .expect("lfs mkdir -i 2");
    assert_eq!(c.mdt_of(&r2.attr.fid), 2);
    assert!(r2.lmv.is_none());
    let f = touch(&c, r2.attr.fid, "in-r2").await;
    assert_eq!(c.mdt_of(&f), 2);
    let looked = c
        .lookup(root, b"r2", &Cred::root())
        .await
        .expect("lookup r2");
    assert_eq!(looked.attr.fid, r2.attr.fid);
    assert_eq!(looked.attr.nlink, 2);

    // A directory striped over the four MDTs with fnv_1a_64.
    let s = c
        .mkdir_with_layout(root, b"s", 0o755, &cred, layout(4, 0, HashType::Fnv1a64))
        .await
        .expect("lfs mkdir -c 4");
    let lmv = s.lmv.clone().expect("lmv");
    assert_eq!(lmv.stripe_count(), 4);
    let mdts: Vec<u32> = lmv.stripes.iter().map(|(m, _)| *m).collect();
    assert_eq!(mdts, [0, 1, 2, 3]);
    let sfid = s.attr.fid;
    let n = 400;
    let mut per_mdt: BTreeMap<u32, usize> = BTreeMap::new();
    for i in 0..n {
        let name = format!("f.{i}");
        let fid = touch(&c, sfid, &name).await;
        let want = HashType::Fnv1a64.stripe_index(name.as_bytes(), 4);
        assert_eq!(c.mdt_of(&fid), lmv.stripes[want as usize].0, "{name}");
        *per_mdt.entry(c.mdt_of(&fid)).or_default() += 1;
    }
    assert_eq!(per_mdt.len(), 4, "{per_mdt:?}");
    for k in per_mdt.values() {
        assert!(*k > n / 8, "uneven: {per_mdt:?}");
    }
    // Merged readdir: everything once, in any batch size.
    for batch in [1, 7, 256, 1024] {
        let names = list(&c, sfid, batch).await;
        assert_eq!(names.len(), n, "batch {batch}");
        let uniq: HashSet<_> = names.iter().collect();
        assert_eq!(uniq.len(), n, "duplicates with batch {batch}");
    }
    // Subdirectories count in the merged nlink.
    for i in 0..5 {
        mkdir(&c, sfid, &format!("d{i}")).await;
    }
    let st = c.getattr(sfid).await.expect("stat s");
    assert_eq!(st.attr.nlink, 2 + 5);
    let (d0, _) = c
        .lookup(sfid, b"d0", &Cred::root())
        .await
        .map(|i| (i.attr.fid, ()))
        .expect("d0");
    assert!(c.lookup(sfid, b"f.17", &Cred::root()).await.is_ok());

    // Rename across MDTs (file from a stripe into the remote dir), and back.
    c.rename(sfid, b"f.1", r2.attr.fid, b"moved", 0, &cred)
        .await
        .expect("rename across MDTs");
    assert_eq!(
        c.lookup(sfid, b"f.1", &Cred::root()).await.err(),
        Some(Errno::ENOENT)
    );
    let moved = c
        .lookup(r2.attr.fid, b"moved", &Cred::root())
        .await
        .expect("moved");
    c.rename(r2.attr.fid, b"moved", sfid, b"f.1", 0, &cred)
        .await
        .expect("rename back");
    assert_eq!(
        c.lookup(sfid, b"f.1", &Cred::root())
            .await
            .expect("back")
            .attr
            .fid,
        moved.attr.fid
    );
    // A directory across MDTs, and a loop refused.
    c.rename(sfid, b"d0", r2.attr.fid, b"d0", 0, &cred)
        .await
        .expect("rename dir across MDTs");
    assert_eq!(c.getattr(sfid).await.expect("stat").attr.nlink, 2 + 4);
    assert_eq!(c.getattr(r2.attr.fid).await.expect("stat").attr.nlink, 3);
    assert_eq!(
        c.rename(root, b"r2", d0, b"loop", 0, &cred).await.err(),
        Some(Errno::EINVAL)
    );
    // Replacing a file on another MDT drops its link there.
    let victim = touch(&c, r2.attr.fid, "victim").await;
    let f2 = c
        .lookup(sfid, b"f.2", &Cred::root())
        .await
        .expect("f.2")
        .attr
        .fid;
    c.rename(sfid, b"f.2", r2.attr.fid, b"victim", 0, &cred)
        .await
        .expect("rename over a file");
    assert_eq!(
        c.lookup(r2.attr.fid, b"victim", &Cred::root())
            .await
            .expect("victim")
            .attr
            .fid,
        f2
    );
    assert!(c.lookup(sfid, b"f.2", &Cred::root()).await.is_err());
    assert!(
        c.getattr(victim).await.is_err(),
        "the replaced file lives on"
    );
    // Exchange across MDTs.
    c.rename(sfid, b"f.3", r2.attr.fid, b"in-r2", 2, &cred)
        .await
        .expect("exchange");
    assert_eq!(
        c.lookup(sfid, b"f.3", &Cred::root())
            .await
            .expect("x")
            .attr
            .fid,
        f
    );

    // Hard links across MDTs count, and survive the other name.
    let target = c.lookup(sfid, b"f.4", &Cred::root()).await.expect("f.4");
    let linked = c
        .link(target.attr.fid, r2.attr.fid, b"hard", &cred)
        .await
        .expect("link across MDTs");
    assert_eq!(linked.attr.nlink, 2);
    c.unlink(sfid, b"f.4", &cred)
        .await
        .expect("unlink one name");
    let left = c
        .lookup(r2.attr.fid, b"hard", &Cred::root())
        .await
        .expect("other name");
    assert_eq!(left.attr.nlink, 1);
    c.unlink(r2.attr.fid, b"hard", &cred)
        .await
        .expect("unlink remote inode");
    assert_eq!(c.getattr(target.attr.fid).await.err(), Some(Errno::ESTALE));

    // Open an existing name whose inode is remote.
    let (o, h) = c
        .create(
            r2.attr.fid,
            b"victim",
            FILE,
            0,
            &cred,
            None,
            LayoutRequest::Inherit,
            Some(OpenFlags {
                read: true,
                ..OpenFlags::default()
            }),
            false,
        )
        .await
        .expect("open remote inode by name");
    assert!(h.is_some());
    assert_ne!(c.mdt_of(&o.attr.fid), 2);

    // Bad input.
    for (l, what) in [
        (layout(1, 7, HashType::Fnv1a64), "no MDT7"),
        (layout(5, 0, HashType::Fnv1a64), "5 stripes on 4 MDTs"),
        (
            DirLayoutRequest {
                stripe_count: 2,
                stripe_offset: 0,
                mdts: Vec::new(),
                hash_type: 9,
            },
            "hash type 9",
        ),
    ] {
        assert_eq!(
            c.mkdir_with_layout(root, b"bad", 0o755, &cred, l)
                .await
                .err(),
            Some(Errno::EINVAL),
            "{what}"
        );
    }
    assert_eq!(
        c.lookup(root, b"bad", &Cred::root()).await.err(),
        Some(Errno::ENOENT)
    );

    // rmdir: a non-empty striped directory stays; an empty one goes everywhere.
    assert_eq!(
        c.rmdir(root, b"s", &cred).await.err(),
        Some(Errno::ENOTEMPTY)
    );
    let e = c
        .mkdir_with_layout(
            root,
            b"empty",
            0o755,
            &cred,
            layout(-1, -1, HashType::Crush),
        )
        .await
        .expect("mkdir -c -1");
    assert_eq!(e.lmv.as_ref().map(|l| l.stripe_count()), Some(4));
    c.rmdir(root, b"empty", &cred).await.expect("rmdir striped");
    assert_eq!(c.getattr(e.attr.fid).await.err(), Some(Errno::ESTALE));

    // A default directory layout: new subdirectories are striped, two levels deep.
    let dd = mkdir(&c, root, "dflt").await;
    c.set_default_lmv(
        dd,
        Some(LmvTemplate {
            stripe_count: 2,
            stripe_offset: -1,
            hash_type: HashType::AllChar as u32,
            max_inherit: 2,
            max_inherit_rr: 0,
        }),
        &Cred::root(),
    )
    .await
    .expect("setdirstripe -D");
    let l1 = c.getattr(mkdir(&c, dd, "l1").await).await.expect("l1");
    assert_eq!(l1.lmv.as_ref().map(|l| l.stripe_count()), Some(2));
    assert_eq!(l1.lmv.as_ref().map(|l| l.hash()), Some(HashType::AllChar));
    let l2 = c
        .getattr(mkdir(&c, l1.attr.fid, "l2").await)
        .await
        .expect("l2");
    assert_eq!(l2.lmv.as_ref().map(|l| l.stripe_count()), Some(2));
    let l3 = c
        .getattr(mkdir(&c, l2.attr.fid, "l3").await)
        .await
        .expect("l3");
    assert!(l3.lmv.is_none(), "max_inherit 2 stops after two levels");

    // fid2path through stripes and remote directories.
    let deep = touch(&c, l2.attr.fid, "deep").await;
    assert_eq!(
        c.fid2path(deep).await.expect("fid2path"),
        b"dflt/l1/l2/deep".to_vec()
    );

    quiesce_within(&c, std::time::Duration::from_secs(10)).await;
    c.unmount();
    cluster.stop().await;
    let rep = nacre::check::check_local(dir.path()).expect("check");
    assert!(rep.is_clean(), "{}", rep.summary());
}

/// Names land on the stripe Lustre's hash picks. The expected indexes come from a separate
/// implementation of the algorithms as `lustre-reference.md` §4.2 documents them (FNV-1a
/// 64, the byte sum, CRUSH and CRUSH2 with their temporary-name rules).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_land_on_the_stripe_lustres_hash_picks() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "hashfs", 4, 1).await;
    let c = mount(&cluster).await;
    // name, then stripe index over 4 for fnv_1a_64, all_char, crush, crush2, then over 3
    // for fnv_1a_64 and crush2.
    let known: [(&str, [u32; 6]); 11] = [
        ("a", [0, 1, 2, 2, 1, 2]),
        ("hello", [3, 0, 3, 3, 0, 2]),
        ("file.mdtest.0.17", [2, 3, 3, 3, 0, 0]),
        ("README", [3, 2, 2, 2, 2, 2]),
        ("data.txt~", [3, 2, 3, 3, 0, 2]),
        (".report.pdf.aB3xYz", [0, 1, 1, 1, 2, 1]),
        ("output.6334.log", [2, 3, 3, 3, 2, 1]),
        ("x.bak", [3, 0, 3, 3, 1, 2]),
        ("Makefile.orig", [0, 1, 2, 2, 0, 2]),
        ("dir-42", [1, 2, 1, 1, 2, 1]),
        ("zz9", [0, 1, 0, 0, 2, 0]),
    ];
    let cases = [
        (HashType::Fnv1a64, 4, 0),
        (HashType::AllChar, 4, 1),
        (HashType::Crush, 4, 2),
        (HashType::Crush2, 4, 3),
        (HashType::Fnv1a64, 3, 4),
        (HashType::Crush2, 3, 5),
    ];
    for (hash, count, col) in cases {
        let name = format!("{}-{count}", hash.name());
        let d = c
            .mkdir_with_layout(
                c.root(),
                name.as_bytes(),
                0o755,
                &Cred::root(),
                layout(count, 0, hash),
            )
            .await
            .expect("mkdir");
        let lmv = d.lmv.expect("striped");
        for (n, want) in &known {
            let f = touch(&c, d.attr.fid, n).await;
            // Stripe i is on MDT i (offset 0).
            assert_eq!(
                c.mdt_of(&f),
                lmv.stripes[want[col] as usize].0,
                "{n} with {} over {count}",
                hash.name()
            );
            assert_eq!(hash.stripe_index(n.as_bytes(), count as u32), want[col]);
        }
    }
    c.unmount();
    cluster.stop().await;
}

/// Many clients racing creates, renames, links, unlinks, mkdirs and rmdirs over a few
/// names in striped and remote directories: every operation either happens or fails with
/// a POSIX error, and the namespace is consistent afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_operations_across_mdts_leave_a_consistent_namespace() {
    use rand::{Rng, SeedableRng};
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "racefs", 4, 1).await;
    let c = mount(&cluster).await;
    let cred = Cred::root();
    let mut dirs = Vec::new();
    for (name, l) in [
        ("s4", layout(4, 0, HashType::Fnv1a64)),
        ("s2", layout(2, 2, HashType::Crush)),
        ("r1", layout(1, 1, HashType::Fnv1a64)),
        ("r3", layout(1, 3, HashType::Fnv1a64)),
    ] {
        let d = c
            .mkdir_with_layout(c.root(), name.as_bytes(), 0o755, &cred, l)
            .await
            .expect("mkdir");
        dirs.push(d.attr.fid);
    }
    dirs.push(c.root());
    let dirs = Arc::new(dirs);
    let mut tasks = Vec::new();
    for t in 0..8u64 {
        let c = c.clone();
        let dirs = dirs.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(t);
            let cred = Cred::root();
            let mut done = 0;
            for _ in 0..600 {
                let d1 = dirs[rng.gen_range(0..dirs.len())];
                let d2 = dirs[rng.gen_range(0..dirs.len())];
                let n1 = format!("n{}", rng.gen_range(0..12));
                let n2 = format!("n{}", rng.gen_range(0..12));
                let op = rng.gen_range(0..7);
                let t0 = std::time::Instant::now();
                let r = match op {
                    0 => c
                        .create(
                            d1,
                            n1.as_bytes(),
                            FILE,
                            0,
                            &cred,
                            None,
                            LayoutRequest::Inherit,
                            None,
                            true,
                        )
                        .await
                        .map(|_| ()),
                    1 => c
                        .create(
                            d1,
                            n1.as_bytes(),
                            DIR,
                            0,
                            &cred,
                            None,
                            LayoutRequest::Inherit,
                            None,
                            true,
                        )
                        .await
                        .map(|_| ()),
                    2 | 3 => {
                        c.rename(d1, n1.as_bytes(), d2, n2.as_bytes(), 0, &cred)
                            .await
                    }
                    4 => match c.lookup(d1, n1.as_bytes(), &Cred::root()).await {
                        Ok(i) => c
                            .link(i.attr.fid, d2, n2.as_bytes(), &cred)
                            .await
                            .map(|_| ()),
                        Err(e) => Err(e),
                    },
                    5 => c.unlink(d1, n1.as_bytes(), &cred).await,
                    _ => c.rmdir(d1, n1.as_bytes(), &cred).await,
                };
                match r {
                    Ok(()) => done += 1,
                    Err(
                        Errno::ENOENT
                        | Errno::EEXIST
                        | Errno::ENOTEMPTY
                        | Errno::ENOTDIR
                        | Errno::EISDIR
                        | Errno::EPERM
                        | Errno::EINVAL
                        | Errno::ESTALE,
                    ) => {}
                    Err(e) => panic!("op {op} after {:?}: unexpected {e}", t0.elapsed()),
                }
            }
            done
        }));
    }
    let mut done = 0;
    for t in tasks {
        done += t.await.expect("task");
    }
    assert!(done > 100, "only {done} operations succeeded");
    quiesce_within(&c, std::time::Duration::from_secs(10)).await;
    c.unmount();
    cluster.stop().await;
    let rep = nacre::check::check_local(dir.path()).expect("check");
    assert!(rep.is_clean(), "{}", rep.summary());
}

/// Names under a directory another caller removed are ENOENT for every operation, as on
/// a local file system (a process whose cwd was removed) and in Lustre, whether the
/// directory was plain, remote or striped; the directory itself is ESTALE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_under_a_removed_directory_are_enoent() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "gonefs", 2, 1).await;
    let c = mount(&cluster).await;
    let root = c.root();
    let cred = Cred::root();
    let keep = touch(&c, root, "keep").await;
    let plain = mkdir(&c, root, "plain").await;
    let remote = c
        .mkdir_with_layout(
            root,
            b"remote",
            0o755,
            &cred,
            layout(1, 1, HashType::Fnv1a64),
        )
        .await
        .expect("lfs mkdir -i 1")
        .attr
        .fid;
    let striped = c
        .mkdir_with_layout(
            root,
            b"striped",
            0o755,
            &cred,
            layout(2, 0, HashType::Fnv1a64),
        )
        .await
        .expect("lfs mkdir -c 2")
        .attr
        .fid;
    for (name, d) in [("plain", plain), ("remote", remote), ("striped", striped)] {
        // Seen once, as a caller that cd'd there would have.
        c.getattr(d).await.expect("getattr");
        c.rmdir(root, name.as_bytes(), &cred).await.expect("rmdir");
        let e = |r: Result<(), Errno>| r.err();
        let none = Some(Errno::ENOENT);
        assert_eq!(
            e(c.lookup(d, b"x", &cred).await.map(drop)),
            none,
            "{name}: lookup"
        );
        assert_eq!(
            e(create(&c, d, b"x", FILE).await.map(drop)),
            none,
            "{name}: create"
        );
        assert_eq!(
            e(create(&c, d, b"x", DIR).await.map(drop)),
            none,
            "{name}: mkdir"
        );
        assert_eq!(e(c.unlink(d, b"x", &cred).await), none, "{name}: unlink");
        assert_eq!(e(c.rmdir(d, b"x", &cred).await), none, "{name}: rmdir");
        assert_eq!(
            e(c.rename(d, b"x", root, b"y", 0, &cred).await),
            none,
            "{name}: rename out"
        );
        assert_eq!(
            e(c.rename(root, b"keep", d, b"k", 0, &cred).await),
            none,
            "{name}: rename in"
        );
        assert_eq!(
            e(c.link(keep, d, b"l", &cred).await.map(drop)),
            none,
            "{name}: link"
        );
        assert_eq!(
            e(c.getattr(d).await.map(drop)),
            Some(Errno::ESTALE),
            "{name}: the directory itself"
        );
    }
    // Nothing moved: the file is where it was, with one link.
    let k = c.lookup(root, b"keep", &cred).await.expect("keep");
    assert_eq!((k.attr.fid, k.attr.nlink), (keep, 1));
    c.disconnect().await;
    cluster.stop().await;
}
