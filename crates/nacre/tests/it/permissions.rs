//! The MDT checks permissions itself: a caller of the client library (which checks
//! nothing) acting as an unprivileged user gets from the MDT every denial the kernel would
//! give — search, create, unlink, rename, the sticky bit, setattr, open modes, xattrs —
//! with POSIX ACLs; and root is squashed by `mdt.*.root_squash` unless its NID is listed
//! in `mdt.*.nosquash_nids`.

use crate::common;

use common::cluster::{DIR, FILE, create, mount, start};
use common::{UpFs, as_nobody, ok, param, require_fuse, require_root, run};
use nacre_client::Client;
use nacre_core::acl::{self, Acl, AclEntry};
use nacre_core::attr::{SetAttr, SetTime};
use nacre_core::{Errno, Fid, Layout, Timespec};
use nacre_rpc::msg::{Cred, DirLayoutRequest, InodeInfo, LayoutRequest, OpenFlags, cap};

const ALICE: u32 = 1000;
const BOB: u32 = 1001;
/// A group Bob belongs to as a supplementary group only.
const STAFF: u32 = 50;

fn alice() -> Cred {
    Cred::user(ALICE, ALICE, Vec::new(), 0)
}

fn bob() -> Cred {
    Cred::user(BOB, BOB, vec![STAFF], 0)
}

async fn make(
    c: &Client,
    dir: Fid,
    name: &[u8],
    mode: u32,
    who: &Cred,
) -> Result<InodeInfo, Errno> {
    c.create(
        dir,
        name,
        mode,
        0,
        who,
        None,
        LayoutRequest::Inherit,
        None,
        true,
    )
    .await
    .map(|(i, _)| i)
}

async fn chmod(c: &Client, fid: Fid, mode: u32) {
    let a = SetAttr {
        mode: Some(mode),
        ..SetAttr::default()
    };
    c.setattr(fid, a, &Cred::root(), None).await.expect("chmod");
}

async fn chown(c: &Client, fid: Fid, uid: u32, gid: u32) {
    let a = SetAttr {
        uid: Some(uid),
        gid: Some(gid),
        ..SetAttr::default()
    };
    c.setattr(fid, a, &Cred::root(), None).await.expect("chown");
}

fn reading() -> OpenFlags {
    OpenFlags {
        read: true,
        ..OpenFlags::default()
    }
}

fn writing() -> OpenFlags {
    OpenFlags {
        write: true,
        ..OpenFlags::default()
    }
}

/// An access or default ACL from (tag, perm, id) triples.
fn acl_xattr(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    Acl {
        entries: entries
            .iter()
            .map(|&(tag, perm, id)| AclEntry { tag, perm, id })
            .collect(),
    }
    .encode()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mdt_refuses_what_the_caller_may_not_do() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "permfs", 1, 1).await;
    let c = mount(&cluster).await;
    let root = c.root();
    let a = alice();

    // Search: nothing under a directory without x for the caller.
    let private = create(&c, root, b"private", DIR).await.expect("mkdir");
    chmod(&c, private.attr.fid, 0o700).await;
    let inner = create(&c, private.attr.fid, b"f", FILE).await.expect("f");
    assert_eq!(
        c.lookup(private.attr.fid, b"f", &a).await.err(),
        Some(Errno::EACCES),
        "lookup without search permission"
    );
    assert_eq!(
        c.readdir(private.attr.fid, 0, 16, &a).await.err(),
        Some(Errno::EACCES),
        "readdir without read permission"
    );

    // Create, mkdir, mknod, symlink and link in a directory the caller cannot write.
    let ro = create(&c, root, b"ro", DIR).await.expect("mkdir ro");
    let rofid = ro.attr.fid;
    let f = create(&c, rofid, b"f", FILE).await.expect("ro/f");
    for (name, mode) in [(&b"new"[..], FILE), (b"newdir", DIR)] {
        assert_eq!(
            make(&c, rofid, name, mode, &a).await.err(),
            Some(Errno::EACCES),
            "{}",
            String::from_utf8_lossy(name)
        );
    }
    let sym = c
        .create(
            rofid,
            b"sym",
            libc::S_IFLNK | 0o777,
            0,
            &a,
            Some(b"f"),
            LayoutRequest::Inherit,
            None,
            true,
        )
        .await;
    assert_eq!(sym.err(), Some(Errno::EACCES), "symlink");
    assert_eq!(
        c.link(f.attr.fid, rofid, b"hard", &a).await.err(),
        Some(Errno::EACCES),
        "link"
    );
    // Unlink, rmdir and rename in it.
    assert_eq!(c.unlink(rofid, b"f", &a).await.err(), Some(Errno::EACCES));
    create(&c, rofid, b"sub", DIR).await.expect("ro/sub");
    assert_eq!(c.rmdir(rofid, b"sub", &a).await.err(), Some(Errno::EACCES));
    assert_eq!(
        c.rename(rofid, b"f", rofid, b"g", 0, &a).await.err(),
        Some(Errno::EACCES)
    );
    // Out of it into a directory of the caller's own.
    let mine = make(&c, root, b"alice", DIR, &Cred::root())
        .await
        .expect("alice");
    chown(&c, mine.attr.fid, ALICE, ALICE).await;
    assert_eq!(
        c.rename(rofid, b"f", mine.attr.fid, b"g", 0, &a)
            .await
            .err(),
        Some(Errno::EACCES)
    );
    // A device needs CAP_MKNOD, even in one's own directory.
    assert_eq!(
        make(&c, mine.attr.fid, b"dev", libc::S_IFCHR | 0o600, &a)
            .await
            .err(),
        Some(Errno::EPERM)
    );
    make(&c, mine.attr.fid, b"own", FILE, &a)
        .await
        .expect("in one's own directory");

    // Open modes: 0644 reads, does not write or truncate.
    let (h, _) = c
        .open(f.attr.fid, reading(), &a)
        .await
        .expect("open for reading");
    c.release(&h).await.expect("close");
    assert_eq!(
        c.open(f.attr.fid, writing(), &a).await.err(),
        Some(Errno::EACCES)
    );
    let trunc = OpenFlags {
        read: true,
        truncate: true,
        ..OpenFlags::default()
    };
    assert_eq!(
        c.open(f.attr.fid, trunc, &a).await.err(),
        Some(Errno::EACCES)
    );
    assert_eq!(
        c.open(private.attr.fid, writing(), &Cred::root())
            .await
            .err(),
        Some(Errno::EISDIR)
    );

    // Setattr: chmod, chown, chgrp, explicit times by the owner only; truncate and
    // times-to-now by a writer.
    let denied = [
        (
            SetAttr {
                mode: Some(0o777),
                ..SetAttr::default()
            },
            Errno::EPERM,
        ),
        (
            SetAttr {
                uid: Some(ALICE),
                ..SetAttr::default()
            },
            Errno::EPERM,
        ),
        (
            SetAttr {
                gid: Some(ALICE),
                ..SetAttr::default()
            },
            Errno::EPERM,
        ),
        (
            SetAttr {
                size: Some(0),
                ..SetAttr::default()
            },
            Errno::EACCES,
        ),
        (
            SetAttr {
                mtime: Some(SetTime::Now),
                ..SetAttr::default()
            },
            Errno::EACCES,
        ),
        (
            SetAttr {
                mtime: Some(SetTime::At(Timespec::default())),
                ..SetAttr::default()
            },
            Errno::EPERM,
        ),
    ];
    for (attr, e) in denied {
        let what = format!("{attr:?}");
        assert_eq!(
            c.setattr(f.attr.fid, attr, &a, None).await.err(),
            Some(e),
            "{what}"
        );
    }
    // The owner may not give a file away, nor take a group it is not in.
    let own = c.lookup(mine.attr.fid, b"own", &a).await.expect("own");
    let give = SetAttr {
        uid: Some(BOB),
        ..SetAttr::default()
    };
    assert_eq!(
        c.setattr(own.attr.fid, give, &a, None).await.err(),
        Some(Errno::EPERM)
    );
    let chgrp = SetAttr {
        gid: Some(STAFF),
        ..SetAttr::default()
    };
    assert_eq!(
        c.setattr(own.attr.fid, chgrp.clone(), &a, None).await.err(),
        Some(Errno::EPERM)
    );
    let member = Cred::user(ALICE, ALICE, vec![STAFF], 0);
    c.setattr(own.attr.fid, chgrp, &member, None)
        .await
        .expect("chgrp to a group of one's own");
    // CAP_CHOWN and CAP_FOWNER are what root has, and enough alone.
    let chowner = Cred::user(BOB, BOB, Vec::new(), 1 << cap::CHOWN);
    let give = SetAttr {
        uid: Some(BOB),
        ..SetAttr::default()
    };
    c.setattr(own.attr.fid, give, &chowner, None)
        .await
        .expect("CAP_CHOWN");

    // Xattrs: user.* follows read and write permission, trusted.* is CAP_SYS_ADMIN's.
    assert_eq!(
        c.setxattr(f.attr.fid, b"user.a", b"1", 0, &a).await.err(),
        Some(Errno::EACCES)
    );
    c.setxattr(f.attr.fid, b"user.a", b"1", 0, &Cred::root())
        .await
        .expect("root");
    assert_eq!(
        c.getxattr(f.attr.fid, b"user.a", &a).await.ok(),
        Some(b"1".to_vec())
    );
    assert_eq!(
        c.removexattr(f.attr.fid, b"user.a", &a).await.err(),
        Some(Errno::EACCES)
    );
    c.setxattr(f.attr.fid, b"trusted.t", b"1", 0, &Cred::root())
        .await
        .expect("trusted");
    assert_eq!(
        c.getxattr(f.attr.fid, b"trusted.t", &a).await.err(),
        Some(Errno::ENODATA)
    );
    assert_eq!(
        c.setxattr(f.attr.fid, b"trusted.t", b"2", 0, &a)
            .await
            .err(),
        Some(Errno::EPERM)
    );
    let names = c.listxattr(f.attr.fid, &a).await.expect("listxattr");
    assert!(
        !names.iter().any(|n| n.starts_with(b"trusted.")),
        "{names:?}"
    );
    chmod(&c, f.attr.fid, 0o600).await;
    assert_eq!(
        c.getxattr(f.attr.fid, b"user.a", &a).await.err(),
        Some(Errno::EACCES)
    );

    // A layout is changed by the owner only.
    assert_eq!(
        c.set_default_layout(rofid, Some(Layout::plain(1, 1 << 20, -1)), &a)
            .await
            .err(),
        Some(Errno::EPERM)
    );
    assert_eq!(inner.attr.uid, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sticky_bit_keeps_others_entries() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "stickyfs", 1, 1).await;
    let c = mount(&cluster).await;
    let tmp = create(&c, c.root(), b"tmp", DIR).await.expect("tmp");
    chmod(&c, tmp.attr.fid, 0o1777).await;
    let t = tmp.attr.fid;
    make(&c, t, b"hers", FILE, &alice()).await.expect("alice's");
    make(&c, t, b"his", FILE, &bob()).await.expect("bob's");
    assert_eq!(c.unlink(t, b"hers", &bob()).await.err(), Some(Errno::EPERM));
    assert_eq!(
        c.rename(t, b"hers", t, b"x", 0, &bob()).await.err(),
        Some(Errno::EPERM)
    );
    // Nor replaced by a rename onto it.
    assert_eq!(
        c.rename(t, b"his", t, b"hers", 0, &bob()).await.err(),
        Some(Errno::EPERM)
    );
    // user.* xattrs in a sticky directory: its owner's (or the entry's owner) only.
    let sub = make(&c, t, b"bobs-dir", DIR, &bob())
        .await
        .expect("bob's dir");
    chmod(&c, sub.attr.fid, 0o1777).await;
    assert_eq!(
        c.setxattr(sub.attr.fid, b"user.x", b"1", 0, &alice())
            .await
            .err(),
        Some(Errno::EPERM)
    );
    c.unlink(t, b"hers", &alice())
        .await
        .expect("the owner removes it");
    c.unlink(
        t,
        b"his",
        &Cred::user(ALICE, ALICE, Vec::new(), 1 << cap::FOWNER),
    )
    .await
    .expect("CAP_FOWNER removes it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_hold_across_mdts() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "dneperm", 2, 1).await;
    let c = mount(&cluster).await;
    let root = c.root();
    let on1 = DirLayoutRequest {
        stripe_count: 1,
        stripe_offset: 1,
        mdts: Vec::new(),
        hash_type: 0,
    };
    // A root-owned directory on MDT1 and one of Alice's on MDT0.
    let remote = c
        .mkdir_with_layout(root, b"remote", 0o755, &Cred::root(), on1.clone())
        .await
        .expect("lfs mkdir -i 1");
    assert_eq!(c.mdt_of(&remote.attr.fid), 1);
    let f = create(&c, remote.attr.fid, b"f", FILE).await.expect("f");
    let mine = create(&c, root, b"alice", DIR).await.expect("alice");
    chown(&c, mine.attr.fid, ALICE, ALICE).await;
    let a = alice();
    assert_eq!(
        c.rename(remote.attr.fid, b"f", mine.attr.fid, b"g", 0, &a)
            .await
            .err(),
        Some(Errno::EACCES),
        "out of a directory on another MDT the caller cannot write"
    );
    assert_eq!(
        c.link(f.attr.fid, remote.attr.fid, b"l", &a).await.err(),
        Some(Errno::EACCES)
    );
    assert_eq!(
        c.mkdir_with_layout(remote.attr.fid, b"d", 0o755, &a, on1)
            .await
            .err(),
        Some(Errno::EACCES)
    );
    // A remote directory of root's inside Alice's: hers to search, not to write into.
    let sticky = c
        .mkdir_with_layout(
            mine.attr.fid,
            b"shared",
            0o1777,
            &Cred::root(),
            DirLayoutRequest {
                stripe_count: 1,
                stripe_offset: 1,
                mdts: Vec::new(),
                hash_type: 0,
            },
        )
        .await
        .expect("remote sticky dir");
    chmod(&c, sticky.attr.fid, 0o1777).await;
    make(&c, sticky.attr.fid, b"bobs", FILE, &bob())
        .await
        .expect("bob's");
    assert_eq!(
        c.rename(sticky.attr.fid, b"bobs", mine.attr.fid, b"took", 0, &a)
            .await
            .err(),
        Some(Errno::EPERM),
        "the sticky bit across MDTs"
    );
    c.rename(sticky.attr.fid, b"bobs", mine.attr.fid, b"took", 0, &bob())
        .await
        .expect_err("bob cannot write Alice's directory");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_allow_deny_inherit_and_follow_chmod() {
    let dir = tempfile::tempdir().expect("tmp");
    let cluster = start(dir.path(), "aclfs", 1, 1).await;
    let c = mount(&cluster).await;
    let (a, b) = (alice(), bob());
    use acl::{GROUP, GROUP_OBJ, MASK, OTHER, UNDEFINED_ID as U, USER, USER_OBJ};

    // Allow: a 0640 root file readable by Alice through a named entry.
    let f = create(&c, c.root(), b"f", FILE).await.expect("f");
    chmod(&c, f.attr.fid, 0o640).await;
    assert_eq!(
        c.open(f.attr.fid, reading(), &a).await.err(),
        Some(Errno::EACCES)
    );
    let allow = acl_xattr(&[
        (USER_OBJ, 6, U),
        (USER, 4, ALICE),
        (GROUP_OBJ, 4, U),
        (MASK, 4, U),
        (OTHER, 0, U),
    ]);
    assert_eq!(
        c.setxattr(f.attr.fid, acl::XATTR_ACCESS, &allow, 0, &a)
            .await
            .err(),
        Some(Errno::EPERM),
        "only the owner sets an ACL"
    );
    c.setxattr(f.attr.fid, acl::XATTR_ACCESS, &allow, 0, &Cred::root())
        .await
        .expect("setfacl");
    assert_eq!(
        c.getxattr(f.attr.fid, acl::XATTR_ACCESS, &a).await.ok(),
        Some(allow.clone()),
        "getfacl round trip"
    );
    let (h, _) = c
        .open(f.attr.fid, reading(), &a)
        .await
        .expect("allowed by the ACL");
    c.release(&h).await.expect("close");
    assert_eq!(
        c.open(f.attr.fid, writing(), &a).await.err(),
        Some(Errno::EACCES)
    );
    // Bob's supplementary group, by a named group entry.
    assert_eq!(
        c.open(f.attr.fid, reading(), &b).await.err(),
        Some(Errno::EACCES)
    );
    let by_group = acl_xattr(&[
        (USER_OBJ, 6, U),
        (GROUP_OBJ, 0, U),
        (GROUP, 6, STAFF),
        (MASK, 6, U),
        (OTHER, 0, U),
    ]);
    c.setxattr(f.attr.fid, acl::XATTR_ACCESS, &by_group, 0, &Cred::root())
        .await
        .expect("setfacl");
    let (h, _) = c
        .open(f.attr.fid, writing(), &b)
        .await
        .expect("by group entry");
    c.release(&h).await.expect("close");
    // The mask limits named entries: chmod g-w takes write from the group entry.
    chmod(&c, f.attr.fid, 0o640).await;
    assert_eq!(
        c.open(f.attr.fid, writing(), &b).await.err(),
        Some(Errno::EACCES)
    );
    let (h, _) = c.open(f.attr.fid, reading(), &b).await.expect("read kept");
    c.release(&h).await.expect("close");

    // Deny: others may read, but a named entry with nothing denies Alice.
    let g = create(&c, c.root(), b"g", FILE).await.expect("g");
    let deny = acl_xattr(&[
        (USER_OBJ, 6, U),
        (USER, 0, ALICE),
        (GROUP_OBJ, 4, U),
        (MASK, 4, U),
        (OTHER, 4, U),
    ]);
    c.setxattr(g.attr.fid, acl::XATTR_ACCESS, &deny, 0, &Cred::root())
        .await
        .expect("setfacl");
    assert_eq!(
        c.open(g.attr.fid, reading(), &a).await.err(),
        Some(Errno::EACCES)
    );
    let (h, _) = c
        .open(g.attr.fid, reading(), &b)
        .await
        .expect("others read");
    c.release(&h).await.expect("close");
    // A malformed ACL is refused (a named entry needs a mask).
    let bad = acl_xattr(&[
        (USER_OBJ, 6, U),
        (USER, 0, ALICE),
        (GROUP_OBJ, 4, U),
        (OTHER, 4, U),
    ]);
    assert_eq!(
        c.setxattr(g.attr.fid, acl::XATTR_ACCESS, &bad, 0, &Cred::root())
            .await
            .err(),
        Some(Errno::EINVAL)
    );

    // Default ACL: a root directory where Alice may create, and what she creates
    // inherits the default (the umask does not apply).
    let d = create(&c, c.root(), b"d", DIR).await.expect("d");
    let dflt = acl_xattr(&[
        (USER_OBJ, 7, U),
        (USER, 7, ALICE),
        (GROUP_OBJ, 5, U),
        (MASK, 7, U),
        (OTHER, 5, U),
    ]);
    c.setxattr(d.attr.fid, acl::XATTR_ACCESS, &dflt, 0, &Cred::root())
        .await
        .expect("access");
    c.setxattr(d.attr.fid, acl::XATTR_DEFAULT, &dflt, 0, &Cred::root())
        .await
        .expect("default");
    let mut masked = a.clone();
    masked.umask = 0o077;
    let nf = make(&c, d.attr.fid, b"nf", libc::S_IFREG | 0o666, &masked)
        .await
        .expect("create by ACL");
    assert_eq!(
        nf.attr.mode & 0o777,
        0o664,
        "the default ACL, not the umask"
    );
    let inherited = c
        .getxattr(nf.attr.fid, acl::XATTR_ACCESS, &a)
        .await
        .expect("inherited");
    let got = Acl::decode(&inherited).expect("acl");
    // The named entry is kept; the mask takes the mode's group bits (rw-).
    assert!(
        got.entries
            .iter()
            .any(|e| e.tag == USER && e.id == ALICE && e.perm == 7),
        "{got:?}"
    );
    assert!(
        got.entries.iter().any(|e| e.tag == MASK && e.perm == 6),
        "{got:?}"
    );
    let nd = make(&c, d.attr.fid, b"nd", DIR, &masked)
        .await
        .expect("mkdir by ACL");
    assert!(
        c.getxattr(nd.attr.fid, acl::XATTR_DEFAULT, &a)
            .await
            .is_ok(),
        "a subdirectory inherits the default"
    );
    let deeper = make(&c, nd.attr.fid, b"x", libc::S_IFREG | 0o666, &masked)
        .await
        .expect("x");
    assert_eq!(deeper.attr.mode & 0o777, 0o664, "and passes it on");
    // Without a default ACL, the umask applies.
    c.removexattr(d.attr.fid, acl::XATTR_DEFAULT, &Cred::root())
        .await
        .expect("setfacl -k");
    let p2 = make(&c, d.attr.fid, b"p2", libc::S_IFREG | 0o666, &masked)
        .await
        .expect("p2");
    assert_eq!(p2.attr.mode & 0o777, 0o600);
}

/// setfacl and getfacl through a FUSE mount, enforced for a user the kernel and the MDT
/// both check.
#[test]
fn setfacl_through_the_mount() {
    if !require_fuse() || !require_root() {
        return;
    }
    let fs = UpFs::new(&[]);
    let d = fs.path("d");
    std::fs::create_dir(&d).expect("mkdir");
    common::chmod(&d, 0o700);
    let ds = d.to_str().expect("utf8");
    let touch = |p: &str| as_nobody(&["touch", p], &[]);
    let inside = format!("{ds}/x");
    assert!(!touch(&inside).status.success(), "0700 root directory");
    let o = std::process::Command::new("setfacl")
        .args(["-m", "u:nobody:rwx", ds])
        .output()
        .expect("setfacl");
    assert!(
        o.status.success(),
        "setfacl: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = std::process::Command::new("getfacl")
        .args(["-c", ds])
        .output()
        .expect("getfacl");
    let acl = String::from_utf8_lossy(&o.stdout);
    assert!(acl.contains("user:nobody:rwx"), "{acl}");
    assert!(acl.contains("mask::rwx"), "{acl}");
    let o = touch(&inside);
    assert!(
        o.status.success(),
        "allowed by ACL: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = std::process::Command::new("setfacl")
        .args(["-m", "u:nobody:r-x", ds])
        .output()
        .expect("setfacl");
    assert!(o.status.success());
    assert!(!touch(&format!("{ds}/y")).status.success(), "denied by ACL");
}

/// `lctl set_param mdt.*.root_squash` makes root `nobody` on the MDT (the kernel lets
/// root through; the MDT does not), and `nosquash_nids` exempts listed clients.
#[test]
fn root_squash_and_nosquash_nids() {
    if !require_fuse() || !require_root() {
        return;
    }
    let fs = UpFs::new(&[]);
    let pat = "mdt.*.root_squash";
    assert_eq!(param(pat), "0:0");
    assert_eq!(param("mdt.*.nosquash_nids"), "NONE");
    std::fs::create_dir(fs.path("open")).expect("mkdir");
    common::chmod(&fs.path("open"), 0o777);
    ok(&["lctl", "set_param", "mdt.*.root_squash=65534:65534"]);
    assert_eq!(param(pat), "65534:65534");
    let err = std::fs::create_dir(fs.path("squashed")).expect_err("root is nobody");
    assert_eq!(err.raw_os_error(), Some(libc::EACCES), "{err}");
    // Squashed root owns what it makes as nobody.
    std::fs::write(fs.path("open/f"), b"x").expect("in a world-writable directory");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        std::fs::metadata(fs.path("open/f")).expect("stat").uid(),
        65534
    );
    // Lustre's syntax: bad values are refused.
    for bad in [
        "mdt.*.root_squash=65534",
        "mdt.*.nosquash_nids=10.0.0.[3-1]@tcp",
    ] {
        assert!(!run(&["lctl", "set_param", bad]).status.success(), "{bad}");
    }
    ok(&[
        "lctl",
        "set_param",
        "mdt.*.nosquash_nids=192.168.0.[1-9]@tcp 127.0.0.[1-2]@tcp",
    ]);
    assert_eq!(
        param("mdt.*.nosquash_nids"),
        "192.168.0.[1-9]@tcp 127.0.0.[1-2]@tcp"
    );
    std::fs::create_dir(fs.path("exempt")).expect("root again, from a listed NID");
    ok(&["lctl", "set_param", "mdt.*.nosquash_nids=NONE"]);
    ok(&["lctl", "set_param", "mdt.*.root_squash=0:0"]);
    std::fs::create_dir(fs.path("unsquashed")).expect("root again");
}
