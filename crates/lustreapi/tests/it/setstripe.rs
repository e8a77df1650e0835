//! `lfs setstripe` / `lfs migrate` parsing and layout validation.

use nacre_core::Errno;
use nacre_core::fid::Fid;
use nacre_core::layout::{Component, EOF, LCME_FL_INIT, Layout, Pattern, StripeObject};
use nacre_core::lmv::HashType;
use nacre_lustreapi::Error;
use nacre_lustreapi::setstripe::{
    ComponentSelector, LayoutCtx, LayoutError, MigrateRequest, SetstripeAction, parse_migrate,
    parse_setstripe, rebase_added_components, validate,
};

const M: u64 = 1 << 20;

fn layout(args: &[&str]) -> Layout {
    match parse_setstripe(args).expect("parses").action {
        SetstripeAction::SetLayout(l) => l,
        other => panic!("not a layout: {other:?}"),
    }
}

fn err(args: &[&str]) -> String {
    parse_setstripe(args)
        .expect_err("must be refused")
        .to_string()
}

#[test]
fn plain_layout_options() {
    let l = layout(&[
        "-c",
        "4",
        "-S",
        "1M",
        "-i",
        "2",
        "-p",
        "flash",
        "/mnt/lustre/f",
    ]);
    assert!(!l.composite);
    let c = &l.components[0];
    assert_eq!(
        (
            c.start,
            c.end,
            c.stripe_count,
            c.stripe_size,
            c.stripe_offset
        ),
        (0, EOF, 4, 1 << 20, 2)
    );
    assert_eq!(c.pool, "flash");
    assert_eq!(c.pattern, Pattern::Raid0);
    // Attached values, long forms with '=' or a separate value are all the same.
    for args in [
        &["-c4", "-S1M", "f"][..],
        &["--stripe-count=4", "--stripe-size=1M", "f"],
        &["--stripe-count", "4", "--stripe-size", "1M", "f"],
        &["--stripe_count", "4", "--stripe_size", "1048576", "f"],
    ] {
        let c = layout(args).components[0].clone();
        assert_eq!((c.stripe_count, c.stripe_size), (4, 1 << 20), "{args:?}");
    }
    // Nothing given: all defaults.
    let c = layout(&["f"]).components[0].clone();
    assert_eq!((c.stripe_count, c.stripe_size, c.stripe_offset), (0, 0, -1));
    // -i -1 is "the MDS chooses"; -c -1 is "all OSTs".
    let c = layout(&["-i", "-1", "-c", "-1", "f"]).components[0].clone();
    assert_eq!((c.stripe_count, c.stripe_offset), (-1, -1));
    // Hex and octal as strtol reads them.
    assert_eq!(layout(&["-c", "0x10", "f"]).components[0].stripe_count, 16);
    // "-p inherit" and "-p ''" mean no pool of our own.
    assert_eq!(layout(&["-p", "inherit", "f"]).components[0].pool, "");
    assert_eq!(layout(&["-p", "", "f"]).components[0].pool, "");
}

#[test]
fn bare_stripe_size_below_4096_is_kib() {
    assert_eq!(
        layout(&["-S", "64", "f"]).components[0].stripe_size,
        64 << 10
    );
    assert_eq!(
        layout(&["-S", "4096K", "f"]).components[0].stripe_size,
        4 << 20
    );
    assert_eq!(
        layout(&["-S", "65536", "f"]).components[0].stripe_size,
        64 << 10
    );
    assert_eq!(
        err(&["-S", "4096", "f"]),
        "lfs setstripe: invalid stripe size '4096'"
    );
    assert_eq!(
        err(&["-S", "100K", "f"]),
        "lfs setstripe: invalid stripe size '100K'"
    );
    assert_eq!(
        err(&["-S", "4G", "f"]),
        "lfs setstripe: invalid stripe size '4G'"
    );
    assert_eq!(
        err(&["-S", "1X", "f"]),
        "lfs setstripe: invalid stripe size '1X'"
    );
}

#[test]
fn invalid_stripe_count_and_index() {
    assert_eq!(
        err(&["-c", "2001", "f"]),
        "lfs setstripe: invalid stripe count '2001'"
    );
    assert_eq!(
        err(&["-c", "-2", "f"]),
        "lfs setstripe: invalid stripe count '-2'"
    );
    assert_eq!(
        err(&["-c", "abc", "f"]),
        "lfs setstripe: invalid stripe count 'abc'"
    );
    assert_eq!(
        err(&["-c", "", "f"]),
        "lfs setstripe: invalid stripe count ''"
    );
    assert_eq!(
        err(&["-i", "-2", "f"]),
        "lfs setstripe: invalid stripe offset '-2'"
    );
    assert_eq!(
        err(&["-i", "65504", "f"]),
        "lfs setstripe: invalid stripe offset '65504'"
    );
    assert_eq!(
        err(&["-c"]),
        "lfs setstripe: option '-c' requires an argument"
    );
    assert_eq!(
        err(&["--stripe-count"]),
        "lfs setstripe: option '--stripe-count' requires an argument"
    );
}

#[test]
fn ost_lists() {
    let c = layout(&["-o", "1,2-4,7", "f"]).components[0].clone();
    assert_eq!(c.ost_list, vec![1, 2, 3, 4, 7]);
    assert_eq!((c.stripe_count, c.stripe_offset), (5, 1));
    // -o may be repeated; -i picks a start within the list.
    let c = layout(&["-o", "1", "--ost", "3,5", "-i", "3", "f"]).components[0].clone();
    assert_eq!((c.ost_list.clone(), c.stripe_offset), (vec![1, 3, 5], 3));
    assert_eq!(
        err(&["-o", "1,2", "-c", "3", "f"]),
        "lfs setstripe: stripe_count(3) != nr_tgts(2)"
    );
    assert_eq!(
        err(&["-o", "1,2", "-i", "5", "f"]),
        "lfs setstripe: Invalid stripe offset '5', not in the target list"
    );
    assert_eq!(
        err(&["-o", "3-1", "f"]),
        "lfs setstripe: invalid OST target(s) '3-1'"
    );
    assert_eq!(
        err(&["-o", "1,,2", "f"]),
        "lfs setstripe: invalid OST target(s) '1,,2'"
    );
    assert_eq!(
        err(&["-o", "x", "f"]),
        "lfs setstripe: invalid OST target(s) 'x'"
    );
    let e = parse_setstripe(&["-o", "1,1", "f"]).unwrap_err();
    assert_eq!(e.errno(), Errno::ENOTSUP);
}

#[test]
fn composite_inherits_count_and_size() {
    let l = layout(&[
        "-E", "4M", "-c", "1", "-S", "1M", "-E", "64M", "-c", "4", "-E", "-1", "f",
    ]);
    assert!(l.composite);
    let got: Vec<_> = l
        .components
        .iter()
        .map(|c| (c.start, c.end, c.stripe_count, c.stripe_size))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, 4 * M, 1, 1 << 20),
            (4 * M, 64 * M, 4, 1 << 20),
            (64 * M, EOF, 4, 1 << 20)
        ]
    );
    // Ids are left for the MDT to assign.
    assert!(l.components.iter().all(|c| c.id == 0 && c.flags == 0));
    // The pool is inherited, the offset is not.
    let l = layout(&["-E", "1M", "-p", "ssd", "-i", "1", "-E", "eof", "f"]);
    assert_eq!(
        (l.components[1].pool.as_str(), l.components[1].stripe_offset),
        ("ssd", -1)
    );
    // The reference's PFL example.
    let l = layout(&[
        "-E", "4M", "-c", "1", "-E", "64M", "-c", "4", "-E", "-1", "-c", "-1", "f",
    ]);
    let counts: Vec<_> = l.components.iter().map(|c| c.stripe_count).collect();
    assert_eq!(counts, vec![1, 4, -1]);
    // EOF spellings.
    for eof in ["-1", "eof", "EOF"] {
        assert_eq!(layout(&["-E", "1M", "-E", eof, "f"]).components[1].end, EOF);
    }
    // -E with a bare number below 4096 is KiB.
    assert_eq!(
        layout(&["-E", "1024", "-E", "eof", "f"]).components[0].end,
        M
    );
}

#[test]
fn dom_layouts_from_the_seed() {
    // Seed 001: "lfs setstripe -E 1M -L mdt -E EOF -c 4 <file>".
    let l = layout(&["-E", "1M", "-L", "mdt", "-E", "EOF", "-c", "4", "file"]);
    let d = &l.components[0];
    assert_eq!(
        (d.pattern, d.start, d.end, d.stripe_size, d.stripe_count),
        (Pattern::Mdt, 0, M, 1 << 20, 0)
    );
    let c = &l.components[1];
    assert_eq!(
        (c.pattern, c.start, c.end, c.stripe_count, c.stripe_size),
        (Pattern::Raid0, M, EOF, 4, 0)
    );
    // Seed 001: "lfs setstripe -E 64K -L mdt -E 64M -c 1 -E -1 -c -1 -S 4M <dir>".
    let l = layout(&[
        "-E", "64K", "-L", "mdt", "-E", "64M", "-c", "1", "-E", "-1", "-c", "-1", "-S", "4M", "dir",
    ]);
    let got: Vec<_> = l
        .components
        .iter()
        .map(|c| (c.pattern, c.start, c.end, c.stripe_count, c.stripe_size))
        .collect();
    assert_eq!(
        got,
        vec![
            (Pattern::Mdt, 0, 64 << 10, 0, 64 << 10),
            // The DoM size is not inherited by the next component.
            (Pattern::Raid0, 64 << 10, 64 * M, 1, 0),
            (Pattern::Raid0, 64 * M, EOF, -1, 4 << 20),
        ]
    );
    // The reference's DoM example.
    let l = layout(&[
        "-E", "1M", "-L", "mdt", "-E", "-1", "-S", "4M", "-c", "-1", "f",
    ]);
    assert_eq!(l.components[1].stripe_size, 4 << 20);
    // DoM only.
    let l = layout(&["-E", "1M", "-L", "mdt", "f"]);
    assert_eq!(l.components.len(), 1);
}

#[test]
fn dom_refusals() {
    assert_eq!(
        err(&["-E", "1M", "-c", "2", "-L", "mdt", "f"]),
        "lfs setstripe: Option 'stripe-count' can't be specified with Data-on-MDT component: 2"
    );
    assert_eq!(
        err(&["-E", "1M", "-L", "mdt", "-p", "ssd", "-E", "eof", "f"]),
        "lfs setstripe: Option 'pool' can't be specified with Data-on-MDT component: 'ssd'"
    );
    assert_eq!(
        err(&["-E", "1M", "-L", "mdt", "-S", "2M", "-E", "eof", "f"]),
        "lfs setstripe: Option 'stripe-size' can't be specified with Data-on-MDT component: 2097152"
    );
    assert_eq!(
        err(&["-E", "1M", "-L", "mdt", "-i", "3", "-E", "eof", "f"]),
        "lfs setstripe: Option 'stripe-offset' can't be specified with Data-on-MDT component: 3"
    );
    assert_eq!(
        err(&["-E", "1M", "-L", "mdt", "-o", "1", "f"]),
        "lfs setstripe: -o|--ost incompatible with DoM layout"
    );
    let e = parse_setstripe(&["-E", "2G", "-L", "mdt", "-E", "eof", "f"]).unwrap_err();
    assert_eq!(e.to_string(), "lfs setstripe: 'mdt' layout size is too big");
    assert_eq!(e.errno(), Errno::EFBIG);
    assert_eq!(
        err(&["-E", "1M", "-E", "2M", "-L", "mdt", "-E", "eof", "f"]),
        "lfs setstripe: 'mdt' layout can be only the first one"
    );
    assert_eq!(
        err(&["-L", "mdt", "f"]),
        "lfs setstripe: Invalid pattern: '-L mdt', must be specified with -E"
    );
    // -L mdt before -E escapes lfs's size check, not validation.
    assert!(matches!(
        parse_setstripe(&["-L", "mdt", "-E", "2G", "-E", "eof", "f"]),
        Err(Error::Layout(LayoutError::DomTooLarge { comp: 1, .. }))
    ));
    assert_eq!(
        err(&["-L", "raid1", "f"]),
        "lfs setstripe: layout 'raid1' is unknown, supported layouts are: 'mdt', 'raid0'"
    );
}

#[test]
fn component_end_rules() {
    assert_eq!(
        err(&["-E", "100K", "f"]),
        "lfs setstripe: invalid component end '100K'"
    );
    assert_eq!(
        err(&["-E", "1", "-E", "eof", "f"]),
        "lfs setstripe: invalid component end '1'"
    );
    assert_eq!(
        err(&["-E", "x", "f"]),
        "lfs setstripe: invalid component end 'x'"
    );
    assert_eq!(
        err(&["-E", "4M", "-E", "2M", "f"]),
        "lfs setstripe: component extent [4194304, 2097152) ends before it starts"
    );
    // An end that is not a multiple of the stripe size.
    assert!(matches!(
        parse_setstripe(&["-E", "1M", "-S", "4M", "-E", "eof", "f"]),
        Err(Error::Layout(LayoutError::EndNotStripeAligned { comp: 1, end, size })) if end == M && size == 4 << 20
    ));
    assert_eq!(
        err(&["-E", "1M", "-S", "4M", "-E", "eof", "f"]),
        "Invalid layout: component 1: end 1048576 is not a multiple of its stripe size 4194304"
    );
    assert!(matches!(
        parse_setstripe(&["-E", "4M", "-E", "4M", "f"]),
        Err(Error::Layout(LayoutError::NotIncreasing { comp: 2, .. }))
    ));
}

#[test]
fn delete_and_component_requests() {
    let r = parse_setstripe(&["-d", "/mnt/lustre/dir"]).unwrap();
    assert_eq!(r.action, SetstripeAction::DeleteDefault);
    assert_eq!(r.paths, vec!["/mnt/lustre/dir"]);
    assert_eq!(
        err(&["-d", "-c", "1", "dir"]),
        "lfs setstripe: option -d is mutually exclusive with -s, -c, -o, -p, -I, -F and -E options"
    );
    let r = parse_setstripe(&["--component-del", "-I", "2", "f"]).unwrap();
    assert_eq!(
        r.action,
        SetstripeAction::DeleteComponents(ComponentSelector::Id(2))
    );
    let r = parse_setstripe(&["--comp-del", "--comp-flags=^init", "f"]).unwrap();
    assert_eq!(
        r.action,
        SetstripeAction::DeleteComponents(ComponentSelector::Flags {
            flags: 0,
            neg_flags: LCME_FL_INIT
        })
    );
    assert_eq!(
        err(&["--component-del", "-I", "1", "--component-flags=init", "f"]),
        "lfs setstripe: options -I and -F are mutually exclusive when used with --component-del"
    );
    assert_eq!(
        err(&["--component-del", "f"]),
        "lfs setstripe: neither flags nor component ID is specified"
    );
    assert_eq!(
        err(&["--component-del", "-c", "1", "-I", "1", "f"]),
        "lfs setstripe: options --component-del and --component-set are mutually exclusive when used with -c, -E, -o, -p, or -s"
    );
    assert_eq!(
        err(&["-I", "2", "f"]),
        "lfs setstripe: option -I can only be used with --component-del or --component-set or lfs mirror split"
    );
    assert_eq!(
        err(&["-I", "0", "f"]),
        "lfs setstripe: invalid component ID '0'"
    );
    assert_eq!(
        err(&["--component-flags=bogus", "f"]),
        "lfs setstripe: component flag 'bogus' not supported"
    );
    let r = parse_setstripe(&["--component-add", "-E", "8M", "-c", "2", "-E", "eof", "f"]).unwrap();
    let SetstripeAction::AddComponents(added) = r.action else {
        panic!()
    };
    assert_eq!(added.len(), 2);
    assert_eq!(
        err(&["--component-add", "-c", "2", "f"]),
        "lfs setstripe: option -E must be specified with --component-add"
    );
    assert_eq!(
        err(&["--component-add", "-d", "-E", "1M", "f"]),
        "lfs setstripe: options --component-set, --component-del, --component-add and -d are mutually exclusive"
    );
}

#[test]
fn adding_components_after_the_file_end() {
    let mut c1 = Component::raid0(0, 4 * M, 1, 1 << 20, -1);
    c1.id = 1;
    let existing = Layout {
        composite: true,
        layout_gen: 1,
        flags: 0,
        components: vec![c1],
    };
    let r = parse_setstripe(&["--component-add", "-E", "64M", "-c", "4", "-E", "-1", "f"]).unwrap();
    let SetstripeAction::AddComponents(added) = r.action else {
        panic!()
    };
    let placed = rebase_added_components(&existing, added.clone()).unwrap();
    assert_eq!(
        (placed[0].start, placed[0].end, placed[0].id),
        (4 * M, 64 * M, 2)
    );
    assert_eq!(
        (placed[1].start, placed[1].end, placed[1].id),
        (64 * M, EOF, 3)
    );
    // The added extent must reach past the current end.
    let r = parse_setstripe(&["--component-add", "-E", "2M", "f"]).unwrap();
    let SetstripeAction::AddComponents(short) = r.action else {
        panic!()
    };
    assert_eq!(
        rebase_added_components(&existing, short)
            .unwrap_err()
            .to_string(),
        "lfs setstripe: first extent [0, 2097152) not adjacent with extent end 4194304"
    );
    // Nothing can follow an EOF component, and plain files cannot grow components.
    let full = Layout::composite(vec![Component::raid0(0, EOF, 1, 0, -1)]);
    assert!(rebase_added_components(&full, added.clone()).is_err());
    assert!(rebase_added_components(&Layout::plain(1, 0, -1), added).is_err());
}

#[test]
fn templates_and_unknown_options() {
    let r = parse_setstripe(&["--yaml", "/tmp/t.lyl", "f"]).unwrap();
    assert_eq!(r.action, SetstripeAction::FromYaml("/tmp/t.lyl".into()));
    let r = parse_setstripe(&["-y", "/tmp/t.lyl", "f"]).unwrap();
    assert_eq!(r.action, SetstripeAction::FromYaml("/tmp/t.lyl".into()));
    assert_eq!(
        err(&["-y", "t", "-c", "2", "f"]),
        "lfs setstripe: can't specify --yaml or --copy with -c, S, -i, -o, -p or -E options."
            .replace(" S,", " -S,")
    );
    let r = parse_setstripe(&["--copy", "src", "dst"]).unwrap();
    assert_eq!(r.action, SetstripeAction::CopyLayout("src".into()));
    assert_eq!(
        err(&["--foo", "f"]),
        "lfs setstripe: unrecognized option '--foo'"
    );
    assert_eq!(err(&["-Z", "f"]), "lfs setstripe: unrecognized option '-Z'");
    assert_eq!(err(&["-c", "1"]), "lfs setstripe: FILE must be specified");
    assert_eq!(
        err(&["--component-add=1", "f"]),
        "lfs setstripe: option '--component-add' doesn't allow an argument"
    );
    assert_eq!(
        err(&["--comp", "f"]),
        "lfs setstripe: option '--comp' is ambiguous"
    );
    // Unique prefixes are accepted, as getopt_long does.
    assert_eq!(layout(&["--stripe-c=3", "f"]).components[0].stripe_count, 3);
    assert_eq!(
        err(&["-b", "f"]),
        "lfs setstripe: -b|--block valid only for migrate command"
    );
    assert_eq!(
        err(&["-m", "1", "f"]),
        "lfs setstripe: -m|--mdt-index is valid only for migrate command"
    );
    assert_eq!(
        parse_setstripe(&["-N", "--mirror-id", "1", "f"])
            .unwrap_err()
            .errno(),
        Errno::ENOTSUP
    );
    // Options may follow the paths; every operand is a path.
    let r = parse_setstripe(&["f1", "-c", "2", "f2"]).unwrap();
    assert_eq!(r.paths, vec!["f1", "f2"]);
    let r = parse_setstripe(&["--mode", "0600", "f"]).unwrap();
    assert_eq!(r.mode, Some(0o600));
}

#[test]
fn migrate_requests() {
    match parse_migrate(&["-m", "1", "/mnt/lustre/dir"]).unwrap() {
        MigrateRequest::Mdt(m) => {
            assert_eq!(m.mdts, vec![1]);
            assert_eq!(m.paths, vec!["/mnt/lustre/dir"]);
        }
        other => panic!("{other:?}"),
    }
    match parse_migrate(&["-m", "0,1", "-c", "2", "-H", "crush", "-d", "dir"]).unwrap() {
        MigrateRequest::Mdt(m) => {
            assert_eq!(
                (m.mdts, m.stripe_count, m.hash, m.directory_only),
                (vec![0, 1], Some(2), Some(HashType::Crush), true)
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        parse_migrate(&["-m", "0,1", "-c", "3", "dir"])
            .unwrap_err()
            .to_string(),
        "lfs migrate: stripe count 3 doesn't match the number of MDTs: 2"
    );
    match parse_migrate(&["-n", "-c", "2", "f"]).unwrap() {
        MigrateRequest::Ost(o) => {
            assert!(o.non_block);
            assert_eq!(o.layout.map(|l| l.components[0].stripe_count), Some(2));
        }
        other => panic!("{other:?}"),
    }
    // Without stripe options the file keeps its layout.
    match parse_migrate(&["-D", "f"]).unwrap() {
        MigrateRequest::Ost(o) => assert!(o.layout.is_none() && o.non_direct),
        other => panic!("{other:?}"),
    }
    // To and from DoM.
    match parse_migrate(&["-E", "1M", "-L", "mdt", "-E", "eof", "f"]).unwrap() {
        MigrateRequest::Ost(o) => assert_eq!(
            o.layout.map(|l| l.components[0].pattern),
            Some(Pattern::Mdt)
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        parse_migrate(&["-b", "-n", "f"]).unwrap_err().to_string(),
        "lfs migrate: options --non-block and --block are mutually exclusive"
    );
    assert_eq!(
        parse_migrate(&["-c", "2"]).unwrap_err().to_string(),
        "lfs migrate: at least one of FILE/--null/--files-from=LIST_FILE must be specified"
    );
    assert_eq!(
        parse_migrate(&["-H", "bogus", "-m", "0", "d"])
            .unwrap_err()
            .to_string(),
        "lfs migrate: bad stripe hash type 'bogus'"
    );
}

fn raid0(start: u64, end: u64, count: i32, size: u32) -> Component {
    Component::raid0(start, end, count, size, -1)
}

fn composite(components: Vec<Component>) -> Layout {
    Layout {
        composite: true,
        layout_gen: 0,
        flags: 0,
        components,
    }
}

#[test]
fn validate_extents() {
    let ctx = LayoutCtx::default();
    let ok = composite(vec![
        Component::dom(M),
        raid0(M, 64 * M, 1, 0),
        raid0(64 * M, EOF, -1, 4 << 20),
    ]);
    assert_eq!(validate(&ok, &ctx), Ok(()));
    let e = validate(&composite(vec![raid0(M, EOF, 1, 0)]), &ctx).unwrap_err();
    assert_eq!(e, LayoutError::FirstNotAtZero { comp: 1, start: M });
    assert_eq!(
        e.to_string(),
        "component 1: the first component of a mirror must start at 0, not 1048576"
    );
    let e = validate(
        &composite(vec![raid0(0, 4 * M, 1, 0), raid0(2 * M, EOF, 1, 0)]),
        &ctx,
    )
    .unwrap_err();
    assert_eq!(
        e,
        LayoutError::Overlap {
            comp: 2,
            start: 2 * M,
            prev_end: 4 * M
        }
    );
    let e = validate(
        &composite(vec![raid0(0, 4 * M, 1, 0), raid0(8 * M, EOF, 1, 0)]),
        &ctx,
    )
    .unwrap_err();
    assert_eq!(
        e,
        LayoutError::Gap {
            comp: 2,
            start: 8 * M,
            prev_end: 4 * M
        }
    );
    assert!(e.to_string().contains("contiguous"));
    let e = validate(&composite(vec![raid0(0, 0, 1, 0)]), &ctx).unwrap_err();
    assert_eq!(
        e,
        LayoutError::NotIncreasing {
            comp: 1,
            start: 0,
            end: 0
        }
    );
    let e = validate(
        &composite(vec![raid0(0, 100 << 10, 1, 0), raid0(100 << 10, EOF, 1, 0)]),
        &ctx,
    )
    .unwrap_err();
    assert_eq!(
        e,
        LayoutError::EndNotAligned {
            comp: 1,
            end: 100 << 10
        }
    );
    assert_eq!(
        e.to_string(),
        "component 1: end 102400 is not a multiple of 64KiB"
    );
    let e = validate(&composite(vec![raid0(0, EOF, 1, 100 << 10)]), &ctx).unwrap_err();
    assert_eq!(
        e,
        LayoutError::StripeSizeNotAligned {
            comp: 1,
            size: 100 << 10
        }
    );
    assert!(matches!(
        validate(&composite(vec![]), &ctx),
        Err(LayoutError::NoComponents)
    ));
    // A plain layout is one [0, EOF) component.
    let mut plain = Layout::plain(1, 0, -1);
    plain.components[0].end = 4 * M;
    assert!(matches!(
        validate(&plain, &ctx),
        Err(LayoutError::PlainShape(_))
    ));
}

#[test]
fn validate_dom() {
    let ctx = LayoutCtx::default();
    let e = validate(
        &composite(vec![raid0(0, M, 1, 0), {
            let mut d = Component::dom(2 * M);
            d.start = M;
            d
        }]),
        &ctx,
    )
    .unwrap_err();
    assert_eq!(e, LayoutError::DomNotFirst { comp: 2 });
    let e = validate(
        &composite(vec![Component::dom(2 << 30), raid0(2 << 30, EOF, 1, 0)]),
        &ctx,
    )
    .unwrap_err();
    assert_eq!(
        e,
        LayoutError::DomTooLarge {
            comp: 1,
            size: 2 << 30
        }
    );
    assert_eq!(
        e.to_string(),
        "component 1: Data-on-MDT size 2147483648 is over the 1GiB limit"
    );
    let mut second = Component::dom(2 * M);
    second.start = M;
    let e = validate(&composite(vec![Component::dom(M), second]), &ctx).unwrap_err();
    assert_eq!(
        e,
        LayoutError::MultipleDom {
            first: 1,
            second: 2
        }
    );
    // 1 GiB itself is allowed.
    assert_eq!(
        validate(&composite(vec![Component::dom(1 << 30)]), &ctx),
        Ok(())
    );
    let mut d = Component::dom(M);
    d.stripe_size = 64 << 10;
    assert!(matches!(
        validate(&composite(vec![d]), &ctx),
        Err(LayoutError::DomStripeSize { .. })
    ));
}

#[test]
fn validate_against_the_file_system() {
    let ctx = LayoutCtx::with_ost_count(4);
    assert_eq!(validate(&Layout::plain(4, 0, 3), &ctx), Ok(()));
    assert_eq!(validate(&Layout::plain(-1, 0, -1), &ctx), Ok(()));
    // More stripes than OSTs: Lustre's MDT gives the file every OST, so it passes.
    assert_eq!(validate(&Layout::plain(16, 0, -1), &ctx), Ok(()));
    let e = validate(&Layout::plain(1, 0, -2), &ctx).unwrap_err();
    assert_eq!(
        e,
        LayoutError::InvalidStripeOffset {
            comp: 1,
            offset: -2
        }
    );
    let mut l = Layout::plain(1, 0, -1);
    l.components[0].pool = "po\0ol".to_string();
    assert!(matches!(
        validate(&l, &ctx),
        Err(LayoutError::PoolNameInvalid { comp: 1, .. })
    ));
    let e = validate(&Layout::plain(1, 0, 4), &ctx).unwrap_err();
    assert_eq!(e, LayoutError::UnknownOst { comp: 1, ost: 4 });
    assert_eq!(e.to_string(), "component 1: OST index 4 does not exist");
    let mut l = Layout::plain(2, 0, 1);
    l.components[0].ost_list = vec![1, 6];
    assert_eq!(
        validate(&l, &ctx),
        Err(LayoutError::UnknownOst { comp: 1, ost: 6 })
    );
    l.components[0].ost_list = vec![1, 1];
    assert_eq!(
        validate(&l, &ctx),
        Err(LayoutError::DuplicateOst { comp: 1, ost: 1 })
    );
    // An OST set with a hole: index 2 is gone.
    let holes = LayoutCtx {
        osts: Some(vec![0, 1, 3]),
        pools: None,
    };
    assert!(validate(&Layout::plain(1, 0, 2), &holes).is_err());
    let mut inst = Layout::plain(1, 0, -1);
    inst.components[0].flags = LCME_FL_INIT;
    inst.components[0].objects = vec![StripeObject {
        ost_idx: 2,
        fid: Fid::new(0x100020000, 1, 0),
    }];
    assert_eq!(
        validate(&inst, &holes),
        Err(LayoutError::UnknownOst { comp: 1, ost: 2 })
    );
    // Stripe counts beyond Lustre's limits.
    assert!(matches!(
        validate(&Layout::plain(-2, 0, -1), &LayoutCtx::default()),
        Err(LayoutError::InvalidStripeCount { .. })
    ));
    assert!(matches!(
        validate(&Layout::plain(2001, 0, -1), &LayoutCtx::default()),
        Err(LayoutError::InvalidStripeCount { .. })
    ));
    let mut p = Layout::plain(1, 0, -1);
    p.components[0].pool = "a_very_long_pool_name".into();
    assert!(matches!(
        validate(&p, &ctx),
        Err(LayoutError::PoolNameTooLong { .. })
    ));
}

#[test]
fn validate_mirrors() {
    let ctx = LayoutCtx::default();
    let mut a = raid0(0, EOF, 1, 0);
    a.id = 0x1_0001;
    let mut b1 = raid0(0, 4 * M, 1, 0);
    b1.id = 0x2_0002;
    let mut b2 = raid0(4 * M, EOF, 1, 0);
    b2.id = 0x2_0003;
    assert_eq!(
        validate(&composite(vec![a.clone(), b1.clone(), b2]), &ctx),
        Ok(())
    );
    let e = validate(&composite(vec![a, b1]), &ctx).unwrap_err();
    assert_eq!(
        e,
        LayoutError::IncompleteMirror {
            comp: 2,
            mirror: 2,
            end: 4 * M
        }
    );
}

#[test]
fn yaml_templates_round_trip_getstripe_output() {
    use nacre_lustreapi::getstripe::{FsDefaults, StripeEntry, getstripe, parse_getstripe};
    use nacre_lustreapi::setstripe::parse_layout_yaml;
    // A DoM + PFL file, printed with -y, read back as a template.
    let mut dom = Component::dom(M);
    dom.id = 1;
    dom.flags = LCME_FL_INIT;
    let mut c2 = Component::raid0(M, 64 * M, 2, 1 << 20, -1);
    c2.id = 2;
    c2.flags = LCME_FL_INIT;
    c2.objects = vec![
        StripeObject {
            ost_idx: 3,
            fid: Fid::new(0x100030000, 5, 0),
        },
        StripeObject {
            ost_idx: 0,
            fid: Fid::new(0x100000000, 5, 0),
        },
    ];
    let mut c3 = Component::raid0(64 * M, EOF, -1, 4 << 20, -1);
    c3.id = 3;
    c3.pool = "flash".into();
    let file = StripeEntry::file(
        "/f",
        Fid::new(0x200000401, 1, 0),
        0,
        Some(Layout::composite(vec![dom, c2, c3])),
    );
    let opts = parse_getstripe(&["-y", "/f"]).unwrap().options;
    let text = getstripe(&opts, &file, &FsDefaults::default());
    let l = parse_layout_yaml(&text).unwrap();
    assert!(l.composite);
    let got: Vec<_> = l
        .components
        .iter()
        .map(|c| {
            (
                c.pattern,
                c.start,
                c.end,
                c.stripe_count,
                c.stripe_size,
                c.stripe_offset,
                c.ost_list.clone(),
                c.pool.clone(),
                c.flags,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (Pattern::Mdt, 0, M, 0, 1 << 20, -1, vec![], String::new(), 0),
            // The OSTs in use become an explicit list, starting at the first.
            (
                Pattern::Raid0,
                M,
                64 * M,
                2,
                1 << 20,
                3,
                vec![3, 0],
                String::new(),
                0
            ),
            (
                Pattern::Raid0,
                64 * M,
                EOF,
                -1,
                4 << 20,
                -1,
                vec![],
                "flash".into(),
                0
            ),
        ]
    );
    // A plain file's YAML.
    let mut plain = Layout::plain(1, 1 << 20, 0);
    plain.components[0].objects = vec![StripeObject {
        ost_idx: 0,
        fid: Fid::new(0x100000000, 9, 0),
    }];
    let text = getstripe(
        &opts,
        &StripeEntry::file("/p", Fid::new(0x200000401, 2, 0), 0, Some(plain)),
        &FsDefaults::default(),
    );
    let l = parse_layout_yaml(&text).unwrap();
    assert!(!l.composite);
    assert_eq!(
        (
            l.components[0].stripe_count,
            l.components[0].stripe_size,
            l.components[0].ost_list.clone()
        ),
        (1, 1 << 20, vec![0])
    );
    // Template flags survive; instantiation does not.
    let l = parse_layout_yaml("components:\n  - lcme_id: 1\n    lcme_flags: init,prefer\n    lcme_extent.e_end: EOF\n    sub_layout:\n      lmm_stripe_count: 1\n").unwrap();
    assert_eq!(l.components[0].flags, 0x6);
    assert!(parse_layout_yaml("lmm_stripe_size: big\n").is_err());
    assert!(parse_layout_yaml("lcm_mirror_count: 2\n").is_err());
}

/// (mirror id, component extent, stripe count, flags) of each component.
fn mirrors_of(l: &Layout) -> Vec<(u32, u64, u64, i32, u32)> {
    l.components
        .iter()
        .map(|c| (c.mirror_id(), c.start, c.end, c.stripe_count, c.flags))
        .collect()
}

#[test]
fn mirrors_take_their_own_options_or_the_previous_mirror_s() {
    use nacre_core::layout::LCME_FL_PREF_RW;
    // -N2 alone: two mirrors of the file system default.
    let l = layout(&["-N2", "f"]);
    assert!(l.composite);
    assert_eq!(mirrors_of(&l), vec![(1, 0, EOF, 0, 0), (2, 0, EOF, 0, 0)]);
    // Each -N its own options; a -N without options repeats the one before.
    let l = layout(&[
        "-N",
        "-E",
        "1M",
        "-c",
        "1",
        "-E",
        "eof",
        "-c",
        "2",
        "-N",
        "-c",
        "3",
        "--flags=prefer",
        "-N",
        "f",
    ]);
    assert_eq!(
        mirrors_of(&l),
        vec![
            (1, 0, M, 1, 0),
            (1, M, EOF, 2, 0),
            (2, 0, EOF, 3, LCME_FL_PREF_RW),
            (3, 0, EOF, 3, 0),
        ]
    );
    // `lfs mirror create` is the same, and needs a -N.
    let r = nacre_lustreapi::setstripe::parse_mirror_create(&["-N3", "-S", "1M", "f"]).unwrap();
    let SetstripeAction::SetLayout(l) = r.action else {
        panic!("not a layout")
    };
    assert_eq!(l.mirror_ids(), vec![1, 2, 3]);
    assert!(l.components.iter().all(|c| c.stripe_size == M as u32));
    assert!(nacre_lustreapi::setstripe::parse_mirror_create(&["-c", "1", "f"]).is_err());
}

#[test]
fn mirror_counts_and_options_lustre_refuses() {
    assert_eq!(err(&["-N0", "f"]), "lfs setstripe: bad mirror count: 0");
    assert_eq!(err(&["-N17", "f"]), "lfs setstripe: bad mirror count: 17");
    assert!(err(&["-N9", "-N9", "f"]).contains("too many mirrors: 18"));
    assert!(err(&["-c", "2", "-N2", "f"]).contains("must follow -N"));
    // Every mirror reaches EOF.
    assert!(err(&["-N", "-E", "1M", "-N", "f"]).contains("every mirror must extend to EOF"));
    assert!(err(&["-N", "--flags=init", "f"]).contains("only 'prefer'"));
    let e = parse_setstripe(&["-N2", "-E", "1M", "-L", "mdt", "-E", "eof", "f"]).unwrap_err();
    assert_eq!(e.errno(), Errno::ENOTSUP, "{e}");
}
