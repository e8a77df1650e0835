//! Writes the seed corpus of every fuzz target (fuzz/seeds/TARGET/seed-N) from real
//! encodings, made by the same encoders the servers use:
//!
//!     cargo run --release -p nacre --example fuzz_seeds -- fuzz/seeds
use nacre_core::acl::{Acl, AclEntry, GROUP_OBJ, MASK, OTHER, USER, USER_OBJ};
use nacre_core::layout::{Component, StripeObject};
use nacre_core::lmv::{Lmv, LmvTemplate};
use nacre_core::{Attr, Fid, FileKind, Layout};
use nacre_mdt::records::{Inode, dirent_key, dirent_value, oi_value};
use nacre_osd::journal::{Mutation, encode_record};
use nacre_rpc::frame::{FLAG_HANDSHAKE, make_header};
use nacre_rpc::msg::{self, Cred, LayoutRequest, OpenFlags, Reply, Request};
use std::path::Path;

fn frame(flags: u32, body: &[u8], bulk: &[u8]) -> Vec<u8> {
    let mut v = make_header(3, 9, flags, body, bulk).encode().to_vec();
    v.extend_from_slice(body);
    v.extend_from_slice(bulk);
    v
}

fn pfl() -> Layout {
    let mut dom = Component::dom(1 << 20);
    dom.id = 1;
    let mut c = Component::raid0(1 << 20, u64::MAX, 2, 1 << 20, -1);
    c.id = 2;
    c.flags = nacre_core::layout::LCME_FL_INIT;
    c.objects = vec![
        StripeObject {
            ost_idx: 0,
            fid: Fid::new(0x100000000, 7, 0),
        },
        StripeObject {
            ost_idx: 1,
            fid: Fid::new(0x100010000, 7, 0),
        },
    ];
    Layout::composite(vec![dom, c])
}

fn lmv() -> Lmv {
    Lmv {
        master_mdt: 0,
        hash_type: 2,
        layout_version: 1,
        stripes: vec![
            (0, Fid::new(0x200000400, 9, 0)),
            (1, Fid::new(0x240000400, 9, 0)),
        ],
    }
}

fn inode() -> Inode {
    Inode {
        attr: Attr {
            fid: Fid::new(0x200000401, 5, 0),
            mode: libc::S_IFREG | 0o644,
            nlink: 1,
            size: 12345,
            ..Attr::default()
        },
        layout: Some(pfl()),
        lmv: None,
        default_layout: None,
        default_lmv: None,
        link: Some((Fid::ROOT, b"file".to_vec())),
        symlink: None,
        lsom_valid: true,
        ino: 0,
    }
}

fn main() {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "fuzz/seeds".to_string());
    let out = Path::new(&out);
    let requests = [
        Request::Ping,
        Request::Lookup {
            parent: Fid::ROOT,
            name: b"hello".to_vec(),
            cred: Cred::root(),
        },
        Request::Create {
            parent: Fid::ROOT,
            name: b"f".to_vec(),
            mode: 0o100644,
            rdev: 0,
            cred: Cred::user(1000, 1000, vec![10, 20], 0),
            symlink: None,
            layout: LayoutRequest::Explicit(pfl()),
            open: Some(OpenFlags::default()),
            exclusive: true,
        },
        Request::OstFallocate {
            obj: Fid::new(0x100000000, 5, 0),
            parent: Fid::ROOT,
            offset: 4096,
            len: 1 << 20,
            mode: 3,
        },
    ];
    let replies = [
        Reply::Ok,
        Reply::Error(nacre_core::Errno::ENOENT),
        Reply::Pong {
            target: "testfs-OST0001".to_string(),
        },
    ];
    let mut seeds: Vec<(&str, Vec<Vec<u8>>)> = Vec::new();
    seeds.push((
        "rpc_request",
        requests
            .iter()
            .map(|m| msg::encode(m).expect("encode"))
            .collect(),
    ));
    seeds.push((
        "rpc_reply",
        replies
            .iter()
            .map(|m| msg::encode(m).expect("encode"))
            .collect(),
    ));
    seeds.push((
        "rpc_frame",
        requests
            .iter()
            .map(|r| frame(0, &msg::encode(r).expect("encode"), b""))
            .chain([frame(
                1,
                &msg::encode(&Reply::Ok).expect("encode"),
                &[7; 100],
            )])
            .collect(),
    ));
    // The client hello is (fsname, client, nonce, proof); postcard writes a struct as
    // its fields in order.
    let hello = postcard::to_allocvec(&(
        "testfs",
        "node1-123",
        [1u8; 32].to_vec(),
        [2u8; 32].to_vec(),
    ))
    .expect("encode");
    let wrong_fs =
        postcard::to_allocvec(&("other", "node1-123", [1u8; 32].to_vec(), vec![0u8; 32]))
            .expect("encode");
    let mut raw = vec![1];
    raw.extend_from_slice(&frame(FLAG_HANDSHAKE, &hello, b""));
    seeds.push((
        "rpc_handshake",
        vec![
            [&[0u8][..], &hello].concat(),
            [&[0u8][..], &wrong_fs].concat(),
            raw,
        ],
    ));
    let muts = vec![
        Mutation::Put {
            table: 1,
            key: b"key".to_vec(),
            val: inode().encode(0).expect("encode"),
        },
        Mutation::Del {
            table: 2,
            key: dirent_key(&Fid::ROOT, b"file"),
        },
    ];
    let mut journal = encode_record(1, &muts).expect("encode");
    journal.extend_from_slice(&encode_record(2, &muts[1..]).expect("encode"));
    seeds.push(("osd_journal", vec![journal]));
    let mut inline = b"NCK\x01\x01\x0c\x00\x00".to_vec();
    inline.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    seeds.push((
        "osd_cksum_table",
        vec![inline, b"NCK\x01\x01\x0c\x01\x00".to_vec()],
    ));
    let mut dir = inode();
    dir.attr.mode = libc::S_IFDIR | 0o755;
    dir.layout = None;
    dir.lmv = Some(lmv());
    dir.default_layout = Some(Layout::plain(1, 4 << 20, -1));
    seeds.push((
        "mdt_inode",
        vec![
            inode().encode(0).expect("encode"),
            dir.encode(0).expect("encode"),
        ],
    ));
    let mut key = dirent_key(&Fid::ROOT, b"file");
    key.truncate(key.len());
    seeds.push((
        "mdt_dirent",
        vec![
            dirent_value(&Fid::new(0x200000401, 5, 0), FileKind::Regular, 42),
            dirent_value(&Fid::new(0x240000401, 5, 0), FileKind::Directory, 0),
            oi_value(42).to_vec(),
            key,
        ],
    ));
    let committed = nacre_mdt::dne::log::Committed {
        participants: vec![1, 2],
        since_ms: 1_700_000_000_000,
    };
    seeds.push((
        "mdt_dne_log",
        vec![nacre_mdt::dne::log::encode_committed(&committed).expect("encode")],
    ));
    let objs = pfl().components[1].objects.clone();
    seeds.push((
        "mdt_llog",
        vec![postcard::to_allocvec(&(Fid::new(0x200000401, 5, 0), objs)).expect("encode")],
    ));
    seeds.push((
        "core_layout",
        vec![
            postcard::to_allocvec(&pfl()).expect("encode"),
            postcard::to_allocvec(&Layout::plain(-1, 1 << 20, 0)).expect("encode"),
        ],
    ));
    let mut lmv_seed = postcard::to_allocvec(&lmv()).expect("encode");
    lmv_seed.extend_from_slice(b"a-name");
    let tmpl = LmvTemplate {
        stripe_count: 2,
        stripe_offset: -1,
        hash_type: 2,
        max_inherit: 3,
        max_inherit_rr: 0,
    };
    seeds.push((
        "core_lmv",
        vec![lmv_seed, postcard::to_allocvec(&tmpl).expect("encode")],
    ));
    let acl = Acl {
        entries: vec![
            AclEntry {
                tag: USER_OBJ,
                perm: 6,
                id: u32::MAX,
            },
            AclEntry {
                tag: USER,
                perm: 4,
                id: 1000,
            },
            AclEntry {
                tag: GROUP_OBJ,
                perm: 4,
                id: u32::MAX,
            },
            AclEntry {
                tag: MASK,
                perm: 4,
                id: u32::MAX,
            },
            AclEntry {
                tag: OTHER,
                perm: 0,
                id: u32::MAX,
            },
        ],
    };
    seeds.push(("core_acl", vec![acl.encode()]));
    let args = |which: u8, a: &[&str]| [&[which][..], a.join("\n").as_bytes()].concat();
    seeds.push((
        "lfs_args",
        vec![
            args(
                0,
                &[
                    "-E", "1M", "-L", "mdt", "-E", "eof", "-c", "4", "-p", "flash", "f",
                ],
            ),
            args(
                2,
                &[
                    "/mnt",
                    "-type",
                    "f",
                    "-size",
                    "+1M",
                    "-name",
                    "*.dat",
                    "-stripe-count",
                    "2",
                ],
            ),
            args(6, &["-c", "2", "-H", "crush", "-i", "0,1", "d"]),
            args(10, &["-P", "osc.*.max_dirty_mb=64"]),
            args(11, &["-t", "namespace", "-C", "-s", "100"]),
        ],
    ));
    seeds.push((
        "lfs_layout_yaml",
        vec![
            b"lcm_layout_gen: 0\nlcm_mirror_count: 1\nlcm_entry_count: 2\ncomponents:\n  - lcme_id: 1\n    lcme_extent.e_start: 0\n    lcme_extent.e_end: 1048576\n    sub_layout:\n      stripe_size: 1048576\n      pattern: mdt\n  - lcme_id: 2\n    lcme_extent.e_start: 1048576\n    lcme_extent.e_end: EOF\n    sub_layout:\n      stripe_count: 4\n      stripe_size: 4194304\n      pattern: raid0\n      stripe_offset: -1\n".to_vec(),
            b"stripe_count: 2\nstripe_size: 1048576\nstripe_offset: -1\n".to_vec(),
        ],
    ));
    seeds.push((
        "lfs_fnmatch",
        vec![b"*.[ch]\0main.c".to_vec(), b"a?[!x]*\\*\0abc*".to_vec()],
    ));
    seeds.push((
        "paf_spec",
        vec![
            b"PAF:70.30,20.40:67005@264M,40M<24253639848".to_vec(),
            b"PaF:10.00".to_vec(),
        ],
    ));
    seeds.push((
        "fio_job_file",
        vec![b"[global]\nioengine=posixaio\niodepth=32\ndirectory=/mnt\n\n[small]\nrw=randwrite\nbs=4k\nsize=16m\nnrfiles=100\n\n[big]\nrw=read\nbs=1m\nsize=64m\n".to_vec()],
    ));
    seeds.push(("dumpe2fs", vec![DUMPE2FS.to_vec()]));
    for (target, inputs) in seeds {
        let dir = out.join(target);
        std::fs::create_dir_all(&dir).expect("seed directory");
        for (i, input) in inputs.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i}")), input).expect("write seed");
        }
    }
}

const DUMPE2FS: &[u8] = b"Filesystem volume name:   <none>
Block count:              262144
Free blocks:              249189
Block size:               4096
Blocks per group:         32768
Inodes per group:         8192
Flex block group size:    16

Group 0: (Blocks 0-32767) csum 0x1234 [ITABLE_ZEROED]
  Primary superblock at 0, Group descriptors at 1-1
  Reserved GDT blocks at 2-128
  Block bitmap at 129 (+129)
  Inode bitmap at 145 (+145)
  Inode table at 161-672 (+161)
  23947 free blocks, 8181 free inodes, 2 directories, 8181 unused inodes
  Free blocks: 8821-32767
  Free inodes: 12-8192
Group 1: (Blocks 32768-65535) csum 0x5678 [INODE_UNINIT, BLOCK_UNINIT]
  Backup superblock at 32768, Group descriptors at 32769-32769
  32639 free blocks, 8192 free inodes, 0 directories, 8192 unused inodes
  Free blocks: 32897-35000, 35010-65535
  Free inodes: 8193-16384
";
