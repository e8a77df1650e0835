//! `lfs getstripe` output compared, byte for byte, with the formats in
//! `lustre-reference.md` §2.7 and liblustreapi's print code.

use nacre_core::fid::Fid;
use nacre_core::layout::{Component, EOF, LCME_FL_INIT, Layout, StripeObject};
use nacre_core::lmv::LmvTemplate;
use nacre_lustreapi::getstripe::{
    FsDefaults, StripeEntry, StripeEntryKind, getstripe, parse_getstripe,
};

const FILE_FID: Fid = Fid::new(0x200000401, 0x1, 0);

fn idif(ost: u32, oid: u32) -> StripeObject {
    StripeObject {
        ost_idx: ost,
        fid: Fid::new(0x1_0000_0000 | (u64::from(ost) << 16), oid, 0),
    }
}

fn run(args: &[&str], entry: &StripeEntry) -> String {
    let mut full: Vec<&str> = args.to_vec();
    full.push(&entry.path);
    let req = parse_getstripe(&full).expect("options parse");
    getstripe(&req.options, entry, &FsDefaults::default())
}

/// A plain two-stripe file, as in §2.7.
fn plain_file(pool: &str) -> StripeEntry {
    let mut l = Layout::plain(2, 4 << 20, 1);
    l.components[0].objects = vec![idif(1, 3), idif(0, 3)];
    l.components[0].pool = pool.to_string();
    StripeEntry::file("/mnt/lustre/file1", FILE_FID, 0, Some(l))
}

/// The DoM + 2-stripe PFL file of §2.7.
fn dom_file() -> StripeEntry {
    let mut dom = Component::dom(1 << 20);
    dom.id = 1;
    dom.flags = LCME_FL_INIT;
    let mut c2 = Component::raid0(1 << 20, EOF, 2, 4 << 20, -1);
    c2.id = 2;
    c2.flags = LCME_FL_INIT;
    c2.objects = vec![idif(0, 2), idif(1, 2)];
    let mut l = Layout::composite(vec![dom, c2]);
    l.layout_gen = 3;
    StripeEntry::file("/mnt/lustre/file2", FILE_FID, 0, Some(l))
}

/// A PFL file whose last component is not instantiated yet.
fn pfl_partial() -> StripeEntry {
    let mut c1 = Component::raid0(0, 4 << 20, 1, 1 << 20, -1);
    c1.id = 1;
    c1.flags = LCME_FL_INIT;
    c1.objects = vec![idif(3, 7)];
    let mut c2 = Component::raid0(4 << 20, EOF, -1, 1 << 20, -1);
    c2.id = 2;
    let mut l = Layout::composite(vec![c1, c2]);
    l.layout_gen = 1;
    StripeEntry::file("/mnt/lustre/pfl", Fid::new(0x200000401, 0x5, 0), 0, Some(l))
}

#[test]
fn plain_file_default() {
    let expected = "/mnt/lustre/file1\n\
lmm_stripe_count:  2\n\
lmm_stripe_size:   4194304\n\
lmm_pattern:       raid0\n\
lmm_layout_gen:    0\n\
lmm_stripe_offset: 1\n\
\tobdidx\t\t objid\t\t objid\t\t group\n\
\t     1\t             3\t          0x3\t             0\n\
\t     0\t             3\t          0x3\t             0\n\
\n";
    assert_eq!(run(&[], &plain_file("")), expected);
}

#[test]
fn plain_file_pool_and_verbose() {
    let out = run(&["-v"], &plain_file("flash"));
    let expected = "/mnt/lustre/file1\n\
lmm_magic:         0x0BD30BD0\n\
lmm_seq:           0x200000401\n\
lmm_object_id:     0x1\n\
lmm_fid:           [0x200000401:0x1:0x0]\n\
lmm_stripe_count:  2\n\
lmm_stripe_size:   4194304\n\
lmm_pattern:       raid0\n\
lmm_layout_gen:    0\n\
lmm_stripe_offset: 1\n\
lmm_pool:          flash\n\
\tobdidx\t\t objid\t\t objid\t\t group\n\
\t     1\t             3\t          0x3\t             0\n\
\t     0\t             3\t          0x3\t             0\n\
\n";
    assert_eq!(out, expected);
    // Without a pool the magic is V1.
    assert!(run(&["-v"], &plain_file("")).contains("lmm_magic:         0x0BD10BD0\n"));
}

#[test]
fn object_groups_and_ost_filter() {
    // Objects of a normal sequence show the sequence in hex as the group.
    let mut l = Layout::plain(2, 1 << 20, 0);
    l.components[0].objects = vec![
        StripeObject {
            ost_idx: 0,
            fid: Fid::new(0x2c0000401, 0x1a, 0),
        },
        StripeObject {
            ost_idx: 5,
            fid: Fid::new(0x300000400, 0x20, 0),
        },
    ];
    let e = StripeEntry::file("/mnt/lustre/f", FILE_FID, 1, Some(l));
    let out = run(&[], &e);
    assert!(
        out.contains("\t     0\t            26\t         0x1a\t   0x2c0000401\n"),
        "{out}"
    );
    assert!(
        out.contains("\t     5\t            32\t         0x20\t   0x300000400\n"),
        "{out}"
    );
    // -O keeps only that OST's row and marks it.
    let out = run(&["-O", "testfs-OST0005_UUID"], &e);
    assert!(
        out.contains("\t     5\t            32\t         0x20\t   0x300000400 *\n"),
        "{out}"
    );
    assert!(!out.contains("0x1a"), "{out}");
    // A file without an object on the OST prints nothing.
    assert_eq!(run(&["-O", "OST0003"], &e), "");
}

#[test]
fn composite_dom_file() {
    let expected = "/mnt/lustre/file2
  lcm_layout_gen:    3
  lcm_mirror_count:  1
  lcm_entry_count:   2
    lcme_id:             1
    lcme_mirror_id:      0
    lcme_flags:          init
    lcme_extent.e_start: 0
    lcme_extent.e_end:   1048576
      lmm_stripe_count:  0
      lmm_stripe_size:   1048576
      lmm_pattern:       mdt
      lmm_layout_gen:    0
      lmm_mdt_index:     0

    lcme_id:             2
    lcme_mirror_id:      0
    lcme_flags:          init
    lcme_extent.e_start: 1048576
    lcme_extent.e_end:   EOF
      lmm_stripe_count:  2
      lmm_stripe_size:   4194304
      lmm_pattern:       raid0
      lmm_layout_gen:    0
      lmm_stripe_offset: 0
      lmm_objects:
      -   0: { l_ost_idx:   0, l_fid: [0x100000000:0x2:0x0] }
      -   1: { l_ost_idx:   1, l_fid: [0x100010000:0x2:0x0] }

";
    assert_eq!(run(&[], &dom_file()), expected);
}

#[test]
fn composite_dom_on_other_mdt_prints_its_index() {
    let mut e = dom_file();
    e.mdt_index = 3;
    assert!(run(&[], &e).contains("      lmm_mdt_index:     3\n"));
}

#[test]
fn composite_verbose() {
    let out = run(&["-v"], &dom_file());
    let expected_head = "/mnt/lustre/file2
composite_header:
  lcm_magic:         0x0BD60BD0
  lcm_size:          240
  lcm_flags:         0
  lcm_layout_gen:    3
  lcm_mirror_count:  1
  lcm_entry_count:   2
components:
  - lcme_id:             1
    lcme_mirror_id:      0
    lcme_flags:          init
    lcme_extent.e_start: 0
    lcme_extent.e_end:   1048576
    lcme_offset:         128
    lcme_size:           32
    sub_layout:
      lmm_magic:         0x0BD10BD0
      lmm_seq:           0x200000401
      lmm_object_id:     0x1
      lmm_fid:           [0x200000401:0x1:0x0]
      lmm_stripe_count:  0
      lmm_stripe_size:   1048576
      lmm_pattern:       mdt
      lmm_layout_gen:    0
      lmm_mdt_index:     0

  - lcme_id:             2
";
    assert!(out.starts_with(expected_head), "{out}");
    assert!(
        out.contains("    lcme_offset:         160\n    lcme_size:           80\n"),
        "{out}"
    );
}

#[test]
fn composite_uninstantiated_component() {
    let out = run(&[], &pfl_partial());
    let expected = "/mnt/lustre/pfl
  lcm_layout_gen:    1
  lcm_mirror_count:  1
  lcm_entry_count:   2
    lcme_id:             1
    lcme_mirror_id:      0
    lcme_flags:          init
    lcme_extent.e_start: 0
    lcme_extent.e_end:   4194304
      lmm_stripe_count:  1
      lmm_stripe_size:   1048576
      lmm_pattern:       raid0
      lmm_layout_gen:    0
      lmm_stripe_offset: 3
      lmm_objects:
      -   0: { l_ost_idx:   3, l_fid: [0x100030000:0x7:0x0] }

    lcme_id:             2
    lcme_mirror_id:      0
    lcme_flags:          0
    lcme_extent.e_start: 4194304
    lcme_extent.e_end:   EOF
      lmm_stripe_count:  -1
      lmm_stripe_size:   1048576
      lmm_pattern:       raid0
      lmm_layout_gen:    0
      lmm_stripe_offset: -1

";
    assert_eq!(out, expected);
}

#[test]
fn single_fields_show_last_instantiated_component() {
    let e = pfl_partial();
    // The last instantiated component is the first one; liblustreapi ends with a blank
    // line after the value.
    assert_eq!(run(&["-c"], &e), "1\n\n");
    assert_eq!(run(&["-S"], &e), "1048576\n\n");
    assert_eq!(run(&["-i"], &e), "3\n\n");
    assert_eq!(run(&["-L"], &e), "raid0\n\n");
    // Two fields bring their labels back.
    assert_eq!(
        run(&["-c", "-S"], &e),
        "      lmm_stripe_count:  1\n      lmm_stripe_size:   1048576\n\n"
    );
    // All instantiated: the last component.
    let d = dom_file();
    assert_eq!(run(&["-c"], &d), "2\n\n");
    assert_eq!(run(&["-i"], &d), "0\n\n");
    // A plain file.
    assert_eq!(run(&["-c"], &plain_file("")), "2\n\n");
    assert_eq!(run(&["--stripe-size"], &plain_file("")), "4194304\n\n");
    assert_eq!(run(&["-p"], &plain_file("flash")), "flash\n\n");
    // -F prints the FID, -g the layout generation.
    assert_eq!(run(&["-F"], &plain_file("")), "[0x200000401:0x1:0x0]\n\n");
    assert_eq!(run(&["-m"], &plain_file("")), "0\n");
}

#[test]
fn component_queries() {
    let e = pfl_partial();
    // The (empty) last-instantiated component that follows adds a blank line.
    assert_eq!(run(&["--component-count"], &e), "2\n\n");
    // A plain layout counts as 0 components.
    assert_eq!(run(&["--component-count"], &plain_file("")), "0\n\n");
    // -I picks one component.
    let out = run(&["-I2"], &e);
    assert!(out.starts_with("/mnt/lustre/pfl\n"), "{out}");
    assert!(out.contains("    lcme_id:             2\n"), "{out}");
    assert!(!out.contains("    lcme_id:             1\n"), "{out}");
    // Flag filters.
    let out = run(&["--component-flags=^init"], &e);
    assert!(
        out.contains("lcme_id:             2") && !out.contains("lcme_id:             1"),
        "{out}"
    );
    // -I with a field prints the field of that component only.
    assert_eq!(run(&["-I1", "-c"], &e), "1\n\n");
    // --component-end filter.
    let out = run(&["--component-end=4M"], &e);
    assert!(
        out.contains("lcme_id:             1") && !out.contains("lcme_id:             2"),
        "{out}"
    );
}

#[test]
fn yaml_composite_and_plain() {
    let out = run(&["-y"], &dom_file());
    let expected = "lcm_layout_gen:    3
lcm_mirror_count:  1
lcm_entry_count:   2
components:
  - lcme_id:             1
    lcme_mirror_id:      0
    lcme_flags:          init
    lcme_extent.e_start: 0
    lcme_extent.e_end:   1048576
    sub_layout:
      lmm_stripe_count:  0
      lmm_stripe_size:   1048576
      lmm_pattern:       mdt
      lmm_layout_gen:    0
      lmm_mdt_index:     0
  - lcme_id:             2
    lcme_mirror_id:      0
    lcme_flags:          init
    lcme_extent.e_start: 1048576
    lcme_extent.e_end:   EOF
    sub_layout:
      lmm_stripe_count:  2
      lmm_stripe_size:   4194304
      lmm_pattern:       raid0
      lmm_layout_gen:    0
      lmm_stripe_offset: 0
      lmm_objects:
      - l_ost_idx: 0
        l_fid:     0x100000000:0x2:0x0
      - l_ost_idx: 1
        l_fid:     0x100010000:0x2:0x0
";
    assert_eq!(out, expected);
    let out = run(&["-y"], &plain_file(""));
    let expected = "lmm_stripe_count:  2
lmm_stripe_size:   4194304
lmm_pattern:       raid0
lmm_layout_gen:    0
lmm_stripe_offset: 1
lmm_objects:
      - l_ost_idx: 1
        l_fid:     0x100010000:0x3:0x0
      - l_ost_idx: 0
        l_fid:     0x100000000:0x3:0x0
";
    assert_eq!(out, expected);
}

#[test]
fn quiet_prints_objects_only() {
    let out = run(&["-q"], &plain_file(""));
    assert_eq!(
        out,
        "/mnt/lustre/file1\n\tobdidx\t\t objid\t\t objid\t\t group\n\t     1\t             3\t          0x3\t             0\n\t     0\t             3\t          0x3\t             0\n\n"
    );
}

fn dir_with(default: Option<Layout>, entries: Vec<StripeEntry>) -> StripeEntry {
    StripeEntry {
        path: "/mnt/lustre/dir".into(),
        fid: Fid::new(0x200000401, 0x2, 0),
        mdt_index: 0,
        kind: StripeEntryKind::Dir {
            default_layout: default,
            default_lmv: None,
            entries,
        },
    }
}

#[test]
fn directory_default_one_line() {
    let d = dir_with(Some(Layout::plain(2, 1 << 20, -1)), vec![]);
    assert_eq!(
        run(&["-d"], &d),
        "stripe_count:  2 stripe_size:   1048576 pattern:       raid0 stripe_offset: -1\n\n"
    );
    // Unset values show the file system defaults.
    let d = dir_with(Some(Layout::plain(0, 0, -1)), vec![]);
    assert_eq!(
        run(&["-d"], &d),
        "stripe_count:  1 stripe_size:   4194304 pattern:       raid0 stripe_offset: -1\n\n"
    );
    // ...unless -R asks for the raw values.
    assert_eq!(
        run(&["-d", "-R"], &d),
        "stripe_count:  0 stripe_size:   0 pattern:       raid0 stripe_offset: -1\n\n"
    );
    // A pool and an explicit offset.
    let mut l = Layout::plain(4, 4 << 20, 2);
    l.components[0].pool = "ssd".into();
    assert_eq!(
        run(&["-d"], &dir_with(Some(l), vec![])),
        "stripe_count:  4 stripe_size:   4194304 pattern:       raid0 stripe_offset: 2 pool:          ssd\n\n"
    );
    // No default layout at all: the file system defaults, no pattern.
    assert_eq!(
        run(&["-d"], &dir_with(None, vec![])),
        "stripe_count:  1 stripe_size:   4194304 pattern:        stripe_offset: -1\n\n"
    );
}

#[test]
fn directory_composite_default() {
    let dom = Component::dom(64 << 10);
    let c2 = Component::raid0(64 << 10, EOF, 1, 0, -1);
    let l = Layout {
        composite: true,
        layout_gen: 0,
        flags: 0,
        components: vec![dom, c2],
    };
    let out = run(&["-d"], &dir_with(Some(l), vec![]));
    let expected = "  lcm_layout_gen:    0
  lcm_mirror_count:  1
  lcm_entry_count:   2
    lcme_id:             N/A
    lcme_mirror_id:      N/A
    lcme_flags:          0
    lcme_extent.e_start: 0
    lcme_extent.e_end:   65536
      stripe_count:  0       stripe_size:   65536       pattern:       mdt       mdt_index:     -1

    lcme_id:             N/A
    lcme_mirror_id:      N/A
    lcme_flags:          0
    lcme_extent.e_start: 65536
    lcme_extent.e_end:   EOF
      stripe_count:  1       stripe_size:   4194304       pattern:       raid0       stripe_offset: -1

";
    assert_eq!(out, expected);
}

#[test]
fn directory_without_d_lists_entries() {
    let sub = dir_with(Some(Layout::plain(1, 1 << 20, -1)), vec![]);
    let sub = StripeEntry {
        path: "/mnt/lustre/dir/sub".into(),
        ..sub
    };
    let nolayout = StripeEntry::file(
        "/mnt/lustre/dir/empty",
        Fid::new(0x200000401, 9, 0),
        0,
        None,
    );
    let mut f = plain_file("");
    f.path = "/mnt/lustre/dir/file1".into();
    let d = dir_with(Some(Layout::plain(2, 1 << 20, -1)), vec![f, sub, nolayout]);
    let out = run(&[], &d);
    let expected = "/mnt/lustre/dir
stripe_count:  2 stripe_size:   1048576 pattern:       raid0 stripe_offset: -1

/mnt/lustre/dir/file1
lmm_stripe_count:  2
lmm_stripe_size:   4194304
lmm_pattern:       raid0
lmm_layout_gen:    0
lmm_stripe_offset: 1
\tobdidx\t\t objid\t\t objid\t\t group
\t     1\t             3\t          0x3\t             0
\t     0\t             3\t          0x3\t             0

/mnt/lustre/dir/sub
stripe_count:  1 stripe_size:   1048576 pattern:       raid0 stripe_offset: -1

/mnt/lustre/dir/empty has no stripe info
";
    assert_eq!(out, expected);
}

#[test]
fn default_lmv_with_capital_d() {
    let mut d = dir_with(None, vec![]);
    if let StripeEntryKind::Dir { default_lmv, .. } = &mut d.kind {
        *default_lmv = Some(LmvTemplate {
            stripe_count: 1,
            stripe_offset: -1,
            hash_type: 2,
            max_inherit: -1,
            max_inherit_rr: 3,
        });
    }
    assert_eq!(
        run(&["-D"], &d),
        "(Default)/mnt/lustre/dir\nlmv_stripe_count: 1 lmv_stripe_offset: -1 lmv_hash_type: fnv_1a_64 lmv_max_inherit: -1 lmv_max_inherit_rr: 3\n"
    );
    // -D -d: no path line.
    assert_eq!(
        run(&["-D", "-d"], &d),
        "lmv_stripe_count: 1 lmv_stripe_offset: -1 lmv_hash_type: fnv_1a_64 lmv_max_inherit: -1 lmv_max_inherit_rr: 3\n"
    );
    // Files have no directory layout to show.
    assert_eq!(run(&["-D"], &plain_file("")), "");
}

#[test]
fn hex_idx_and_mdt_index_verbose() {
    let mut l = Layout::plain(1, 1 << 20, 10);
    l.components[0].objects = vec![idif(10, 4)];
    let e = StripeEntry::file("/mnt/lustre/h", FILE_FID, 2, Some(l));
    let out = run(&["--hex-idx"], &e);
    assert!(out.contains("lmm_stripe_offset: 0xa\n"), "{out}");
    assert!(
        out.contains("\t   0xa\t             4\t          0x4\t             0\n"),
        "{out}"
    );
    assert_eq!(run(&["-v", "-m"], &e), "/mnt/lustre/h\nmdt_index:\t2\n");
    // -v after -m replaces the field selection: the whole layout.
    assert!(run(&["-m", "-v"], &e).contains("lmm_magic:"));
}

/// A layout LFSCK rebuilt with stripe 0's object lost (sanity-lfsck.sh 20a): the pattern
/// says `hole`, the stripe count keeps the lost slot, and the slot prints as zeros.
#[test]
fn a_layout_with_a_lost_stripe_says_hole() {
    let mut l = Layout::plain(3, 1 << 20, -1);
    l.components[0].objects = vec![StripeObject::DUMMY, idif(1, 9), idif(2, 9)];
    let e = StripeEntry::file("/mnt/lustre/f1", FILE_FID, 0, Some(l));
    assert_eq!(run(&["-L"], &e), "raid0,hole\n\n");
    assert_eq!(run(&["-c"], &e), "3\n\n");
    let out = run(&[], &e);
    assert!(out.contains("lmm_pattern:       raid0,hole\n"), "{out}");
    assert!(
        out.contains("\t     0\t             0\t            0\t             0\n"),
        "{out}"
    );
}
