//! `lfs find` option parsing and predicate evaluation.

use nacre_core::attr::FileKind;
use nacre_core::fid::Fid;
use nacre_core::layout::{Component, EOF, LCME_FL_INIT, Layout, StripeObject};
use nacre_core::lmv::{HashType, LMV_HASH_FLAG_MIGRATION, Lmv};
use nacre_lustreapi::find::{FindEntry, FindRequest, parse_find};

const DAY: i64 = 86_400;
const NOW: i64 = 1_700_000_000;

fn req(args: &[&str]) -> FindRequest {
    parse_find(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn m(args: &[&str], e: &FindEntry) -> bool {
    let mut a = vec!["/mnt/lustre"];
    a.extend_from_slice(args);
    req(&a).predicate.matches(e, NOW)
}

fn obj(ost: u32) -> StripeObject {
    StripeObject {
        ost_idx: ost,
        fid: Fid::new(0x1_0000_0000 | (u64::from(ost) << 16), 1, 0),
    }
}

fn file(name: &str, size: u64) -> FindEntry {
    let mut e = FindEntry::new(name, FileKind::Regular);
    e.size = size;
    e.mtime = NOW;
    e.atime = NOW;
    e.ctime = NOW;
    let mut l = Layout::plain(2, 1 << 20, 1);
    l.components[0].objects = vec![obj(1), obj(2)];
    e.layout = Some(l);
    e
}

/// DoM [0,1M) + [1M,EOF) over 4 OSTs, the second not yet instantiated.
fn dom_file() -> FindEntry {
    let mut e = file("small.dat", 1000);
    let mut d = Component::dom(1 << 20);
    d.flags = LCME_FL_INIT;
    let c2 = Component::raid0(1 << 20, EOF, 4, 4 << 20, -1);
    e.layout = Some(Layout::composite(vec![d, c2]));
    e
}

#[test]
fn type_and_name_in_every_spelling() {
    let f = file("main.c", 0);
    let d = FindEntry::new("src", FileKind::Directory);
    for args in [
        &["-type", "f"][..],
        &["--type", "f"],
        &["-t", "f"],
        &["--type=f"],
        &["-tf"],
    ] {
        assert!(m(args, &f), "{args:?}");
        assert!(!m(args, &d), "{args:?}");
    }
    for args in [
        &["-name", "*.c"][..],
        &["--name", "*.c"],
        &["-n", "*.c"],
        &["--name=*.c"],
    ] {
        assert!(m(args, &f), "{args:?}");
        assert!(!m(args, &d), "{args:?}");
    }
    assert!(m(&["!", "-type", "d"], &f));
    assert!(!m(&["!", "-name", "*.c"], &f));
    assert!(m(&["-name", "[mn]ain.?"], &f));
    // fnmatch without FNM_PERIOD: '*' matches a leading dot.
    assert!(m(
        &["-name", "*rc"],
        &FindEntry::new(".bashrc", FileKind::Regular)
    ));
    assert_eq!(
        parse_find(&["d", "-type", "x"]).unwrap_err().to_string(),
        "lfs find: bad type 'x'"
    );
}

#[test]
fn sizes_round_like_find() {
    // No suffix: 512-byte blocks, rounded up.
    assert!(m(&["-size", "10"], &file("a", 5120)));
    assert!(m(&["-size", "10"], &file("a", 4609)));
    assert!(!m(&["-size", "10"], &file("a", 4608)));
    assert!(!m(&["-size", "10"], &file("a", 5121)));
    assert!(m(&["-size", "+1M"], &file("a", (1 << 20) + 1)));
    assert!(!m(&["-size", "+1M"], &file("a", 1 << 20)));
    assert!(m(&["--size", "1M"], &file("a", 1 << 20)));
    assert!(m(&["-s", "1M"], &file("a", 1)));
    // "-1M" means "less than one MiB, in MiB units": only empty files.
    assert!(m(&["-size", "-1M"], &file("a", 0)));
    assert!(!m(&["-size", "-1M"], &file("a", 1)));
    assert!(m(&["-size", "-2M"], &file("a", 1 << 20)));
    assert!(m(&["!", "-size", "+1k"], &file("a", 1024)));
    assert!(parse_find(&["d", "-size", "1Q"]).is_err());
}

#[test]
fn layout_predicates() {
    let f = file("f", 0);
    let dom = dom_file();
    assert!(m(&["-L", "mdt"], &dom));
    assert!(!m(&["-L", "mdt"], &f));
    assert!(m(&["!", "-L", "mdt"], &f));
    assert!(m(&["--layout", "raid0"], &f));
    assert!(m(&["-L", "raid0,mdt"], &dom));
    // No layout: neither -L nor ! -L.
    let none = FindEntry::new("x", FileKind::Regular);
    assert!(!m(&["-L", "raid0"], &none) && !m(&["!", "-L", "raid0"], &none));
    // Stripe count and size use the last instantiated component.
    assert!(m(&["-c", "2"], &f));
    assert!(m(&["-c", "+1"], &f));
    assert!(!m(&["-c", "-2"], &f));
    assert!(m(&["--stripe-count", "0"], &dom));
    assert!(m(&["-S", "1M"], &f));
    assert!(m(&["-S", "1024"], &f));
    assert!(m(&["-S", "+512K"], &f));
    assert!(m(&["-S", "1M"], &dom));
    assert!(m(&["--component-count", "2"], &dom));
    assert!(m(&["--component-count", "+1"], &dom));
    assert!(!m(&["--component-count", "+0"], &f));
    assert!(m(&["--component-flags", "^init"], &dom));
    assert!(!m(&["--component-flags", "^init"], &f));
    assert!(m(&["--component-end", "1M"], &dom));
    assert!(m(&["--component-end", "EOF"], &f));
}

#[test]
fn ost_mdt_pool_and_ids() {
    let f = file("f", 0);
    assert!(m(&["-O", "1"], &f));
    assert!(m(&["--ost", "testfs-OST0002_UUID"], &f));
    assert!(m(&["-O", "0-1"], &f));
    assert!(!m(&["-O", "3,4"], &f));
    assert!(m(&["!", "-O", "3"], &f));
    assert!(!m(&["!", "-O", "1"], &f));
    // Only regular files have OST objects to match.
    assert!(!m(
        &["!", "-O", "1"],
        &FindEntry::new("d", FileKind::Directory)
    ));
    // Uninstantiated components have no objects.
    let mut dom = dom_file();
    if let Some(l) = dom.layout.as_mut() {
        l.components[1].objects = vec![obj(3)];
    }
    assert!(!m(&["-O", "3"], &dom));
    let mut on1 = file("f", 0);
    on1.mdt_index = 1;
    assert!(m(&["-m", "1"], &on1));
    assert!(m(&["--mdt", "MDT0001"], &on1));
    assert!(!m(&["--mdt-index", "0"], &on1));
    assert!(m(&["!", "--mdt", "0"], &on1));
    let mut pooled = file("f", 0);
    if let Some(l) = pooled.layout.as_mut() {
        l.components[0].pool = "flash".into();
    }
    assert!(m(&["--pool", "flash"], &pooled));
    assert!(m(&["--pool", "*"], &pooled));
    assert!(!m(&["--pool", "flash"], &f));
    assert!(m(&["--pool", ""], &f));
    let mut owned = file("f", 0);
    owned.uid = 500;
    owned.gid = 100;
    assert!(m(&["-uid", "500", "-gid", "100"], &owned));
    assert!(!m(&["--user", "0"], &owned));
}

#[test]
fn times() {
    let mut e = file("f", 0);
    e.mtime = NOW - 5 * DAY / 2; // two and a half days old
    assert!(m(&["-mtime", "2"], &e));
    assert!(!m(&["-mtime", "3"], &e));
    assert!(m(&["-mtime", "+1"], &e));
    assert!(!m(&["-mtime", "+2"], &e));
    assert!(m(&["-mtime", "-3"], &e));
    assert!(!m(&["-mtime", "-2"], &e));
    assert!(m(&["--mtime", "+59h"], &e));
    assert!(!m(&["-M", "-59h"], &e));
    assert!(m(&["-mtime", "-1w"], &e));
    assert!(m(&["-mtime", "2d12h"], &e));
    assert!(m(&["!", "-mtime", "-1"], &e));
    // A range: older than one day and younger than three.
    assert!(m(&["-mtime", "+1", "-mtime", "-3"], &e));
    assert!(!m(&["-mtime", "+3", "-mtime", "-5"], &e));
    e.atime = NOW - 10;
    assert!(m(&["-atime", "-1"], &e));
    assert!(m(&["-ctime", "0"], &e));
    assert!(parse_find(&["d", "-mtime", "2x"]).is_err());
    // Limits before the epoch match nothing.
    assert!(!m(&["-mtime", "+100000y"], &e));
}

#[test]
fn directories_and_depth() {
    let mut d = FindEntry::new("striped", FileKind::Directory);
    d.lmv = Some(Lmv {
        master_mdt: 0,
        hash_type: HashType::Crush as u32 | LMV_HASH_FLAG_MIGRATION,
        layout_version: 0,
        stripes: vec![
            (0, Fid::new(0x200000400, 2, 0)),
            (1, Fid::new(0x240000400, 2, 0)),
        ],
    });
    assert!(m(&["-T", "2"], &d));
    assert!(m(&["--mdt-count", "+1"], &d));
    assert!(m(&["-H", "crush"], &d));
    assert!(!m(&["-H", "fnv_1a_64"], &d));
    assert!(m(&["-H", "migrating"], &d));
    assert!(!m(&["-H", "^migrating"], &d));
    assert!(!m(&["-T", "0"], &file("f", 0)));
    let mut deep = file("f", 0);
    deep.depth = 3;
    assert!(!m(&["-maxdepth", "2"], &deep));
    assert!(m(&["--maxdepth", "3", "--mindepth", "3"], &deep));
    assert!(!m(&["-mindepth", "4"], &deep));
    let r = req(&["/d", "-maxdepth", "1"]);
    assert!(r.predicate.descend(0) && !r.predicate.descend(1));
    assert!(parse_find(&["d", "-maxdepth", "1", "-mindepth", "2"]).is_err());
}

#[test]
fn command_line_shape() {
    let r = req(&["/mnt/lustre", "-type", "f", "-L", "mdt", "-0"]);
    assert_eq!(r.paths, vec!["/mnt/lustre"]);
    assert!(r.print0);
    assert_eq!(r.format("/mnt/lustre/a"), "/mnt/lustre/a\0");
    assert_eq!(req(&["d", "-print0"]).format("x"), "x\0");
    assert_eq!(req(&["d", "-print"]).format("x"), "x\n");
    // Paths may follow the options too, but not both.
    assert_eq!(req(&["-type", "f", "a", "b"]).paths, vec!["a", "b"]);
    assert_eq!(
        parse_find(&["a", "-type", "f", "b"])
            .unwrap_err()
            .to_string(),
        "lfs find: filename|dirname must either precede options or follow options"
    );
    assert_eq!(
        parse_find(&["-type", "f"]).unwrap_err().to_string(),
        "lfs find: no filename|pathname"
    );
    assert_eq!(
        parse_find(&["d", "-Zap"]).unwrap_err().to_string(),
        "lfs find: unrecognized option '-Zap'"
    );
    assert!(
        parse_find(&["d", "--bogus"])
            .unwrap_err()
            .to_string()
            .contains("unrecognized option")
    );
    assert_eq!(
        parse_find(&["d", "--newer", "x"]).unwrap_err().errno(),
        nacre_core::Errno::ENOTSUP
    );
}
