//! `lfs mkdir`/`setdirstripe` parsing and checks, and `lfs getdirstripe` output (§2.11).

use nacre_core::fid::Fid;
use nacre_core::lmv::{HashType, LMV_HASH_FLAG_FIXED, LMV_HASH_FLAG_MIGRATION, Lmv, LmvTemplate};
use nacre_lustreapi::dirstripe::{
    DirStripeEntry, DirStripeOp, getdirstripe, hash_type_string, parse_getdirstripe, parse_mkdir,
    parse_setdirstripe,
};

fn striped() -> DirStripeEntry {
    DirStripeEntry {
        path: "/mnt/lustre/striped".into(),
        fid: Fid::new(0x200000400, 0x2, 0),
        mdt_index: 0,
        lmv: Some(Lmv {
            master_mdt: 0,
            hash_type: HashType::Fnv1a64 as u32,
            layout_version: 0,
            stripes: vec![
                (0, Fid::new(0x200000400, 0x2, 0)),
                (1, Fid::new(0x240000400, 0x2, 0)),
            ],
        }),
        default_lmv: None,
        subdirs: vec![],
    }
}

fn plain_dir(mdt: u32) -> DirStripeEntry {
    DirStripeEntry {
        path: "/mnt/lustre/plain".into(),
        fid: Fid::new(0x240000401, 0x7, 0),
        mdt_index: mdt,
        lmv: None,
        default_lmv: None,
        subdirs: vec![],
    }
}

fn get(args: &[&str], d: &DirStripeEntry) -> String {
    let mut a = args.to_vec();
    a.push(&d.path);
    let r = parse_getdirstripe(&a).unwrap();
    getdirstripe(&r.options, d)
}

#[test]
fn striped_directory() {
    assert_eq!(
        get(&[], &striped()),
        "lmv_stripe_count: 2 lmv_stripe_offset: 0 lmv_hash_type: fnv_1a_64\n\
mdtidx\t\t FID[seq:oid:ver]\n\
\x20    0\t\t [0x200000400:0x2:0x0]\t\t\n\
\x20    1\t\t [0x240000400:0x2:0x0]\t\t\n"
    );
    assert_eq!(get(&["-c"], &striped()), "2\n");
    assert_eq!(get(&["-O", "MDT0003"], &striped()), "");
    assert_eq!(get(&["-i"], &striped()), "0\n");
    assert_eq!(get(&["-H"], &striped()), "fnv_1a_64\n");
    assert_eq!(
        get(&["-c", "-H"], &striped()),
        "lmv_stripe_count: 2 lmv_hash_type: fnv_1a_64\n"
    );
    assert_eq!(get(&["-F"], &striped()), "0x200000400:0x2:0x0\n");
    // -O names the matching directory, then marks the stripe on that MDT.
    let out = get(&["-O", "testfs-MDT0001_UUID"], &striped());
    assert_eq!(
        out,
        "/mnt/lustre/striped\nlmv_stripe_count: 2 lmv_stripe_offset: 0 lmv_hash_type: fnv_1a_64\n\
mdtidx\t\t FID[seq:oid:ver]\n\
\x20    1\t\t [0x240000400:0x2:0x0]\t\t *\n"
    );
}

#[test]
fn striped_directory_verbose_and_yaml() {
    assert_eq!(
        get(&["-v"], &striped()),
        "lmv_fid: 0x200000400:0x2:0x0 lmv_magic: 0xcd20cd0 lmv_stripe_count: 2 lmv_stripe_offset: 0 lmv_hash_type: fnv_1a_64\n\
mdtidx\t\t FID[seq:oid:ver]\n\
\x20    0\t\t [0x200000400:0x2:0x0]\t\t\n\
\x20    1\t\t [0x240000400:0x2:0x0]\t\t\n"
    );
    assert_eq!(
        get(&["-y"], &striped()),
        "lmv_stripe_count:  2
lmv_stripe_offset: 0
lmv_hash_type:     fnv_1a_64
lmv_objects:
      - l_mdt_idx: 0
        l_fid:     0x200000400:0x2:0x0
      - l_mdt_idx: 1
        l_fid:     0x240000400:0x2:0x0
"
    );
}

#[test]
fn plain_directory() {
    assert_eq!(
        get(&[], &plain_dir(3)),
        "lmv_stripe_count: 0 lmv_stripe_offset: 3 lmv_hash_type: none\n"
    );
    assert_eq!(
        get(&["-y"], &plain_dir(3)),
        "lmv_stripe_count:  0\nlmv_stripe_offset: 3\nlmv_hash_type:     none\nlmv_objects:\n      - l_mdt_idx: 3\n        l_fid:     0x240000401:0x7:0x0\n"
    );
}

#[test]
fn default_layout_line() {
    let mut d = plain_dir(0);
    d.default_lmv = Some(LmvTemplate {
        stripe_count: 1,
        stripe_offset: -1,
        hash_type: HashType::Fnv1a64 as u32,
        max_inherit: -1,
        max_inherit_rr: 3,
    });
    assert_eq!(
        get(&["-D"], &d),
        "lmv_stripe_count: 1 lmv_stripe_offset: -1 lmv_hash_type: fnv_1a_64 lmv_max_inherit: -1 lmv_max_inherit_rr: 3\n"
    );
    assert_eq!(get(&["-D", "-X"], &d), "-1\n");
    assert_eq!(
        get(&["-D", "-y"], &d),
        "lmv_stripe_count:  1\nlmv_stripe_offset: -1\nlmv_hash_type:     fnv_1a_64\nlmv_max_inherit:   -1\nlmv_max_inherit_rr: 3\n"
    );
    // No default set: what lfs makes up, unless -R.
    let none = plain_dir(0);
    assert_eq!(
        get(&["-D"], &none),
        "lmv_stripe_count: 0 lmv_stripe_offset: -1 lmv_hash_type: none lmv_max_inherit: -1 lmv_max_inherit_rr: 0\n"
    );
    assert_eq!(get(&["-D", "-R"], &none), "");
}

#[test]
fn recursive_prints_paths() {
    let mut top = plain_dir(0);
    top.path = "/mnt/lustre/a".into();
    let mut sub = striped();
    sub.path = "/mnt/lustre/a/b".into();
    top.subdirs = vec![sub];
    let out = get(&["-r", "-c"], &top);
    assert_eq!(out, "/mnt/lustre/a\n0\n/mnt/lustre/a/b\n2\n");
}

#[test]
fn hash_flags() {
    assert_eq!(
        hash_type_string(HashType::Crush as u32 | LMV_HASH_FLAG_FIXED),
        "crush,fixed"
    );
    assert_eq!(
        hash_type_string(HashType::Fnv1a64 as u32 | LMV_HASH_FLAG_MIGRATION),
        "fnv_1a_64,migrating"
    );
    assert_eq!(hash_type_string(7), "0x7");
    assert_eq!(
        hash_type_string(2 | 0x0040_0000),
        "fnv_1a_64,unknown_400000"
    );
}

#[test]
fn mkdir_requests() {
    let r = parse_mkdir(&["dir"]).unwrap();
    assert_eq!(
        (r.op, r.stripe_offset, r.stripe_count, r.hash),
        (DirStripeOp::Create, -1, 1, None)
    );
    assert_eq!(r.max_inherit_rr, None);
    let r = parse_mkdir(&["-i", "1", "-c", "2", "-H", "crush", "d"]).unwrap();
    assert_eq!(
        (r.stripe_offset, r.stripe_count, r.hash),
        (1, 2, Some(HashType::Crush))
    );
    let r = parse_mkdir(&["-i", "0,2", "d"]).unwrap();
    assert_eq!(
        (r.mdts.clone(), r.stripe_count, r.stripe_offset),
        (vec![0, 2], 2, 0)
    );
    let r = parse_mkdir(&["-c", "-1", "-H", "crush2", "d"]).unwrap();
    assert_eq!(
        (r.stripe_count, r.stripe_offset, r.hash),
        (-1, -1, Some(HashType::Crush2))
    );
    // Numbers name hash types too.
    assert_eq!(
        parse_mkdir(&["-H", "1", "d"]).unwrap().hash,
        Some(HashType::AllChar)
    );
    assert_eq!(
        parse_mkdir(&["-H", "sha1", "d"]).unwrap_err().to_string(),
        "lfs mkdir: bad directory hash type 'sha1'"
    );
    assert_eq!(
        parse_mkdir(&["-c", "2001", "d"]).unwrap_err().to_string(),
        "lfs mkdir: invalid stripe count '2001'"
    );
    assert_eq!(
        parse_mkdir(&["-c", "2"]).unwrap_err().to_string(),
        "lfs mkdir: DIR must be specified"
    );
    let r = parse_mkdir(&["-o", "0750", "d"]).unwrap();
    assert_eq!(r.mode, Some(0o750));
    assert_eq!(
        parse_mkdir(&["-i", "0,1", "-c", "3", "d"])
            .unwrap_err()
            .to_string(),
        "lfs mkdir: stripe count 3 doesn't match the number of MDTs: 2"
    );
}

#[test]
fn default_directory_requests() {
    let r = parse_setdirstripe(&[
        "-D",
        "-i",
        "-1",
        "-c",
        "1",
        "--max-inherit",
        "-1",
        "--max-inherit-rr",
        "3",
        "/mnt/lustre",
    ])
    .unwrap();
    assert_eq!(r.op, DirStripeOp::SetDefault);
    let t = r.template();
    assert_eq!(
        (
            t.stripe_count,
            t.stripe_offset,
            t.max_inherit,
            t.max_inherit_rr
        ),
        (1, -1, -1, 3)
    );
    // Striped defaults are inherited 3 levels unless told otherwise.
    let r = parse_setdirstripe(&["-D", "-c", "4", "d"]).unwrap();
    assert_eq!((r.max_inherit, r.max_inherit_rr), (3, Some(0)));
    let r = parse_setdirstripe(&["-D", "-c", "4", "-X", "0", "d"]).unwrap();
    assert_eq!(r.max_inherit, 0);
    let r = parse_setdirstripe(&["-D", "-c", "4", "-X", "-1", "d"]).unwrap();
    assert_eq!(
        r.warnings,
        vec!["lfs setdirstripe: unrecommended max-inherit=-1 when default stripe-count=4"]
    );
    // -D -i -1 alone means one stripe.
    let r = parse_setdirstripe(&["-D", "-i", "-1", "d"]).unwrap();
    assert_eq!(r.stripe_count, 1);
    let r = parse_setdirstripe(&["-d", "d"]).unwrap();
    assert_eq!(r.op, DirStripeOp::DeleteDefault);
    assert_eq!(
        parse_setdirstripe(&["-d", "-c", "2", "d"])
            .unwrap_err()
            .to_string(),
        "lfs setdirstripe: cannot specify -d with -c or -i options"
    );
    assert_eq!(
        parse_setdirstripe(&["--max-inherit-rr", "2", "-D", "d"])
            .unwrap_err()
            .to_string(),
        "lfs setdirstripe: '--max-inherit-rr' must be specified with '-D'"
    );
    assert_eq!(
        parse_setdirstripe(&["-D", "-i", "1", "--max-inherit-rr", "2", "d"])
            .unwrap_err()
            .to_string(),
        "lfs setdirstripe: max-inherit-rr needs mdt-index=-1, not 1"
    );
    assert_eq!(
        parse_setdirstripe(&["-D", "-X", "251", "d"])
            .unwrap_err()
            .to_string(),
        "lfs setdirstripe: max-inherit 251 exceeds maximum 250"
    );
    assert!(
        parse_setdirstripe(&["-D", "-i", "0,1", "d"])
            .unwrap_err()
            .to_string()
            .contains("unrecommended default striped")
    );
    // Overstriping: several stripes per MDT, inherited twice.
    let r = parse_setdirstripe(&["-C", "-2", "d"]).unwrap();
    assert!(r.overstriped);
    assert_eq!((r.stripe_count, r.max_inherit), (-2, 2));
    assert_eq!(r.hash_type() & 0x0100_0000, 0x0100_0000);
}

#[test]
fn validate_against_mdt_count() {
    let ok = parse_mkdir(&["-i", "1", "-c", "2", "d"]).unwrap();
    assert!(ok.validate(2).is_ok());
    assert_eq!(
        parse_mkdir(&["-i", "3", "d"])
            .unwrap()
            .validate(2)
            .unwrap_err()
            .to_string(),
        "lfs setdirstripe: MDT index 3 does not exist (the file system has 2 MDTs)"
    );
    assert_eq!(
        parse_mkdir(&["-i", "0,4", "d"])
            .unwrap()
            .validate(4)
            .unwrap_err()
            .to_string(),
        "lfs setdirstripe: MDT index 4 does not exist (the file system has 4 MDTs)"
    );
    assert_eq!(
        parse_mkdir(&["-c", "3", "d"])
            .unwrap()
            .validate(2)
            .unwrap_err()
            .to_string(),
        "lfs setdirstripe: stripe count 3 is more than the 2 MDTs of the file system"
    );
    assert!(parse_mkdir(&["-c", "-1", "d"]).unwrap().validate(2).is_ok());
    // Overstriped: up to 5 per MDT.
    assert!(parse_mkdir(&["-C", "10", "d"]).unwrap().validate(2).is_ok());
    assert!(
        parse_mkdir(&["-C", "11", "d"])
            .unwrap()
            .validate(2)
            .is_err()
    );
}
