//! `lctl` parameter names, wildcards and the get/set/list_param formats (§6.1).

use nacre_lustreapi::lctl::{
    ParamKind, ParamPattern, format_get_param, format_list_param, format_set_param,
    param_display_name, parse_get_param, parse_list_param, parse_set_param, permanent_record,
    split_param_name,
};

#[test]
fn names_split_on_dots_except_nids() {
    assert_eq!(
        split_param_name("osc.testfs-OST0000-osc-ffff88012345.max_dirty_mb"),
        vec!["osc", "testfs-OST0000-osc-ffff88012345", "max_dirty_mb"]
    );
    assert_eq!(
        split_param_name("mgc.MGC192.168.1.1@tcp.import"),
        vec!["mgc", "MGC192.168.1.1@tcp", "import"]
    );
    assert_eq!(
        split_param_name("obdfilter.testfs-OST0000.exports.10.0.0.5@o2ib.stats"),
        vec![
            "obdfilter",
            "testfs-OST0000",
            "exports",
            "10.0.0.5@o2ib",
            "stats"
        ]
    );
    assert_eq!(split_param_name("ldlm.namespaces.*.lru_size").len(), 4);
}

#[test]
fn wildcards_per_component() {
    let p = ParamPattern::new("lod.*.dom_stripesize");
    assert!(p.matches("lod.testfs-MDT0000-mdtlov.dom_stripesize"));
    assert!(p.matches("lod.testfs-MDT0001-mdtlov.dom_stripesize"));
    assert!(!p.matches("lod.testfs-MDT0000-mdtlov.dom_stripesize_max_kb"));
    // '*' does not cross a '.' (it is a path separator).
    assert!(!p.matches("lod.a.b.dom_stripesize"));
    let p = ParamPattern::new("osc.testfs-OST000?-osc-*.max_rpcs_in_flight");
    assert!(p.matches("osc.testfs-OST0003-osc-ffff8803c9c0f000.max_rpcs_in_flight"));
    assert!(!p.matches("osc.testfs-OST0010-osc-ffff8803c9c0f000.max_rpcs_in_flight"));
    assert!(!p.matches("osc.testfs-OST0003-osc-ffff8803c9c0f000.max_dirty_mb"));
    let p = ParamPattern::new("osc.*OST000[0-1]*.active");
    assert!(p.matches("osc.testfs-OST0001-osc-ffff.active"));
    assert!(!p.matches("osc.testfs-OST0002-osc-ffff.active"));
    let p = ParamPattern::new("lod.*MDT0000*.dom_stripesize");
    assert!(p.matches("lod.testfs-MDT0000-mdtlov.dom_stripesize"));
    assert!(!p.matches("lod.testfs-MDT0001-mdtlov.dom_stripesize"));
    // glob(3) without GLOB_PERIOD: wildcards do not match a leading dot.
    assert!(!ParamPattern::new("llite.*").matches("llite..hidden"));
    assert!(ParamPattern::new("timeout").is_literal());
    assert!(!ParamPattern::new("osc.*.x").is_literal());
    // -R lists what lies below a match.
    let p = ParamPattern::new("mdt.*");
    assert!(p.matches_within("mdt.testfs-MDT0000.identity_upcall"));
    assert!(!p.matches_within("mdd.testfs-MDT0000.lfsck_speed_limit"));
}

#[test]
fn get_param_formats() {
    let q = parse_get_param(&["lod.*.dom_stripesize"]).unwrap();
    assert_eq!(q.patterns.len(), 1);
    let o = &q.output;
    assert_eq!(
        format_get_param(o, "lod.testfs-MDT0000-mdtlov.dom_stripesize", "1048576\n"),
        "lod.testfs-MDT0000-mdtlov.dom_stripesize=1048576\n"
    );
    // Multi-line values start on their own line.
    assert_eq!(
        format_get_param(o, "osc.x.stats", "a 1\nb 2\n"),
        "osc.x.stats=\na 1\nb 2\n"
    );
    let n = parse_get_param(&["-n", "timeout"]).unwrap().output;
    assert_eq!(format_get_param(&n, "timeout", "100"), "100\n");
    assert_eq!(format_get_param(&n, "empty", ""), "");
    assert_eq!(format_get_param(o, "empty", ""), "empty=\n");
    let nn = parse_get_param(&["-N", "osc.*.max_dirty_mb"])
        .unwrap()
        .output;
    assert_eq!(
        format_get_param(&nn, "osc.a.max_dirty_mb", "2000"),
        "osc.a.max_dirty_mb\n"
    );
    let h = parse_get_param(&["-H", "osc.x.stats"]).unwrap().output;
    assert_eq!(
        format_get_param(&h, "osc.x.stats", "a 1\nb 2"),
        "osc.x.stats=a 1\nosc.x.stats=b 2\n"
    );
    let y = parse_get_param(&["-y", "osc.x.stats"]).unwrap().output;
    assert_eq!(
        format_get_param(&y, "osc.x.stats", "a 1\nb 2"),
        "osc.x.stats: a 1\nb 2\n"
    );
    assert_eq!(format_get_param(&y, "timeout", "100"), "timeout: 100\n");
    // -F marks writable parameters and directories; the mark is ignored in patterns.
    let f = parse_get_param(&["-F", "osc.*.active="]).unwrap();
    assert!(f.patterns[0].matches("osc.a.active"));
    assert_eq!(
        param_display_name(
            "osc.a.active",
            ParamKind::File { writable: true },
            &f.output
        ),
        "osc.a.active="
    );
    assert!(parse_get_param(&["-n"]).is_err());
    assert!(parse_get_param(&["-Q", "x"]).is_err());
}

#[test]
fn list_param_formats() {
    let q = parse_list_param(&["-R", "-F", "mdt.*"]).unwrap();
    assert!(q.output.recursive && q.output.only_name);
    assert_eq!(
        format_list_param(&q.output, "mdt.testfs-MDT0000", ParamKind::Dir),
        "mdt.testfs-MDT0000/\n"
    );
    assert_eq!(
        format_list_param(&q.output, "llite.fs-ffff", ParamKind::Link),
        "llite.fs-ffff@\n"
    );
    let plain = parse_list_param(&["osc.*"]).unwrap();
    assert_eq!(
        format_list_param(&plain.output, "osc.a", ParamKind::Dir),
        "osc.a\n"
    );
}

#[test]
fn set_param_forms() {
    let r = parse_set_param(&["osc.*.max_dirty_mb=512", "timeout", "40"]).unwrap();
    assert_eq!(
        r.params,
        vec![
            ("osc.*.max_dirty_mb".to_string(), Some("512".to_string())),
            ("timeout".to_string(), Some("40".to_string())),
        ]
    );
    assert_eq!(
        format_set_param(&r, "osc.a.max_dirty_mb", "512"),
        "osc.a.max_dirty_mb=512\n"
    );
    let quiet = parse_set_param(&["-n", "timeout=40"]).unwrap();
    assert_eq!(format_set_param(&quiet, "timeout", "40"), "");
    let p = parse_set_param(&["-P", "lod.*.dom_stripesize=2M"]).unwrap();
    assert!(p.permanent);
    assert_eq!(
        permanent_record(&p.params[0].0, p.params[0].1.as_deref()),
        "lod.*.dom_stripesize=2M"
    );
    let d = parse_set_param(&["-P", "-d", "lod.*.dom_stripesize"]).unwrap();
    assert!(d.delete);
    assert_eq!(d.params, vec![("lod.*.dom_stripesize".to_string(), None)]);
    assert_eq!(
        permanent_record(&d.params[0].0, None),
        "lod.*.dom_stripesize="
    );
    // -d implies -P.
    assert!(parse_set_param(&["-d", "x"]).unwrap().permanent);
    assert_eq!(
        parse_set_param(&["timeout="]).unwrap_err().to_string(),
        "lctl set_param: setting timeout: Invalid argument"
    );
    assert!(parse_set_param(&["timeout"]).is_err());
    assert!(parse_set_param(&["-P", "-C", "x=1"]).is_err());
    let c = parse_set_param(&["-C=testfs", "x=1"]).unwrap();
    assert_eq!(c.client, Some(Some("testfs".to_string())));
}
