//! Property-style checks: random argument lists and random layouts never make a parser,
//! printer or validator panic.

use nacre_core::attr::FileKind;
use nacre_core::fid::Fid;
use nacre_core::layout::{Component, Layout, Pattern, StripeObject};
use nacre_core::lmv::{Lmv, LmvTemplate};
use nacre_core::target::TargetKind;
use nacre_lustreapi::df::{TargetStat, df, parse_df};
use nacre_lustreapi::dirstripe::{
    DirStripeEntry, getdirstripe, parse_getdirstripe, parse_mkdir, parse_setdirstripe,
};
use nacre_lustreapi::find::{FindEntry, parse_find};
use nacre_lustreapi::getstripe::{
    FsDefaults, StripeEntry, StripeEntryKind, getstripe, parse_getstripe,
};
use nacre_lustreapi::lctl::{
    ParamPattern, format_get_param, parse_get_param, parse_list_param, parse_set_param,
};
use nacre_lustreapi::setstripe::{
    LayoutCtx, parse_migrate, parse_setstripe, rebase_added_components, validate,
};

/// xorshift64*: deterministic, so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn pick<'a>(&mut self, v: &'a [&'a str]) -> &'a str {
        v[self.below(v.len() as u64) as usize]
    }
}

const WORDS: &[&str] = &[
    "-c",
    "-C",
    "-S",
    "-i",
    "-o",
    "-p",
    "-L",
    "-E",
    "-I",
    "-d",
    "-D",
    "-y",
    "-v",
    "-q",
    "-r",
    "-R",
    "-m",
    "-n",
    "-b",
    "-H",
    "-X",
    "-N",
    "-z",
    "-F",
    "-g",
    "-O",
    "-T",
    "-t",
    "-s",
    "-M",
    "-A",
    "-0",
    "-h",
    "-l",
    "-u",
    "-P",
    "-cx",
    "-c4",
    "-I2",
    "-E-1",
    "!",
    "--",
    "-",
    "--component-add",
    "--component-del",
    "--comp-flags",
    "--component-flags=^init",
    "--component-count",
    "--component-start=+1M",
    "--component-end",
    "--stripe-count=2",
    "--stripe-size",
    "--layout",
    "--yaml",
    "--copy",
    "--mode",
    "--max-inherit",
    "--max-inherit-rr",
    "--mdt-hash",
    "--type",
    "--name",
    "--size",
    "--mtime",
    "--maxdepth",
    "--mindepth",
    "--ost",
    "--mdt",
    "--pool",
    "--output=state,pcent",
    "--output",
    "--hex-idx",
    "--mirror-index",
    "--mirror-id",
    "-type",
    "-name",
    "-size",
    "-mtime",
    "-print0",
    "-maxdepth",
    "--foreign",
    "--dryrun=on",
    "--window-size",
    "--path",
    "-coff",
    "-Con",
    "namespace,layout",
    "scrub",
    "all",
    "abort",
    "--ec",
    "0",
    "1",
    "-1",
    "2",
    "4",
    "64",
    "4096",
    "1M",
    "4M",
    "64K",
    "1G",
    "2G",
    "eof",
    "EOF",
    "-2",
    "0x10",
    "010",
    "2001",
    "65504",
    "+1",
    "-3",
    "1,2-4,7",
    "3-1",
    ",",
    "1,,2",
    "mdt",
    "raid0",
    "init",
    "^init",
    "prefer",
    "crush",
    "crush2",
    "fnv_1a_64",
    "all_char",
    "sha",
    "f",
    "d",
    "x",
    "*.c",
    "[a-",
    "\\",
    "2d12h",
    "5y",
    "3x",
    "testfs-OST0001_UUID",
    "OST0002",
    "0-3",
    "file",
    "/mnt/lustre/dir",
    "",
    "=",
    "a=b",
    "a=",
    "lod.*.dom_stripesize",
    "osc.*OST000?*.x",
    "mgc.MGC1.2.3.4@tcp.import",
    "é",
    "\u{0}",
    "fs.flash",
    "OST[0-3]",
    "OST[ffffffff-ffffffff/7]",
    "OST[0-ffffffff]",
    "OST[1,",
    "OSTaaaé",
    "fs-OST0001_UUID",
    "--nowait",
];

fn random_args(rng: &mut Rng) -> Vec<String> {
    let n = rng.below(9);
    (0..n)
        .map(|_| {
            if rng.below(10) == 0 {
                // Random bytes, lossily made UTF-8.
                let len = rng.below(6) as usize;
                let bytes: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                String::from_utf8_lossy(&bytes).into_owned()
            } else if rng.below(4) == 0 {
                format!("{}{}", rng.pick(WORDS), rng.pick(WORDS))
            } else {
                rng.pick(WORDS).to_string()
            }
        })
        .collect()
}

fn random_component(rng: &mut Rng, start: u64) -> Component {
    let ends = [
        0,
        64 << 10,
        1 << 20,
        100 << 10,
        4 << 20,
        1 << 30,
        2 << 30,
        u64::MAX,
        start,
        start.saturating_add(1),
    ];
    let end = ends[rng.below(ends.len() as u64) as usize];
    let mut c = if rng.below(4) == 0 {
        Component::dom(end)
    } else {
        Component::raid0(
            start,
            end,
            rng.below(7) as i32 - 2,
            [0, 65536, 1 << 20, 100, u32::MAX][rng.below(5) as usize],
            rng.below(6) as i32 - 1,
        )
    };
    c.start = if rng.below(5) == 0 {
        rng.below(1 << 22)
    } else {
        start
    };
    c.id = [0, 1, 2, 0x1_0001, 0x2_0003, u32::MAX][rng.below(6) as usize];
    c.flags = rng.next() as u32 & if rng.below(2) == 0 { 0x7ff } else { u32::MAX };
    if rng.below(3) == 0 {
        c.pool =
            ["", "ssd", "ignore", "a_pool_name_that_is_too_long"][rng.below(4) as usize].into();
    }
    if rng.below(3) == 0 {
        c.ost_list = (0..rng.below(4)).map(|_| rng.below(8) as u32).collect();
    }
    let nobj = rng.below(4);
    c.objects = (0..nobj)
        .map(|_| StripeObject {
            ost_idx: rng.below(9) as u32,
            fid: Fid::new(
                [0, 5, 0x1_0003_0000, 0x2_0000_0400, u64::MAX][rng.below(5) as usize],
                rng.next() as u32,
                rng.below(3) as u32,
            ),
        })
        .collect();
    if rng.below(10) == 0 {
        c.pattern = Pattern::Mdt;
    }
    c
}

fn random_layout(rng: &mut Rng) -> Layout {
    let n = rng.below(5);
    let mut comps = Vec::new();
    let mut start = 0;
    for _ in 0..n {
        let c = random_component(rng, start);
        start = c.end;
        comps.push(c);
    }
    Layout {
        composite: rng.below(3) != 0,
        layout_gen: rng.next() as u32,
        flags: rng.next() as u16,
        components: comps,
    }
}

#[test]
fn parsers_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..20_000 {
        let args = random_args(&mut rng);
        let _ = parse_setstripe(&args);
        let _ = parse_migrate(&args);
        let _ = parse_mkdir(&args);
        let _ = parse_setdirstripe(&args);
        let _ = parse_df(&args);
        let _ = parse_get_param(&args);
        let _ = parse_list_param(&args);
        let _ = parse_set_param(&args);
        if let Ok(o) = nacre_lustreapi::devices::parse_dl(&args) {
            let _ = nacre_lustreapi::devices::format_dl(&[], o);
        }
        for cmd in [
            "pool_new",
            "pool_add",
            "pool_remove",
            "pool_destroy",
            "pool_list",
        ] {
            if let Some(c) = nacre_lustreapi::pool::PoolCmd::of(cmd) {
                let _ = nacre_lustreapi::pool::parse(c, &args);
            }
        }
        if let Ok(r) = nacre_lustreapi::lfsck::parse_start(&args) {
            let _ = nacre_lustreapi::lfsck::format_started("fs-MDT0000", r.active);
        }
        let _ = nacre_lustreapi::lfsck::parse_stop(&args);
        let _ = nacre_lustreapi::lfsck::parse_query(&args);
        if let Ok(r) = parse_find(&args) {
            let mut e = FindEntry::new("f.c", FileKind::Regular);
            e.layout = Some(random_layout(&mut rng));
            e.mtime = rng.next() as i64;
            let _ = r.predicate.matches(&e, rng.next() as i64);
            e.kind = FileKind::Directory;
            e.lmv = Some(Lmv {
                master_mdt: 1,
                hash_type: rng.next() as u32,
                layout_version: 0,
                stripes: vec![(1, Fid::ZERO)],
            });
            let _ = r.predicate.matches(&e, 0);
        }
        if let Ok(r) = parse_getstripe(&args) {
            let l = random_layout(&mut rng);
            let mut dir = StripeEntry::dir("/d", Fid::ROOT, 0, Some(random_layout(&mut rng)));
            if let StripeEntryKind::Dir {
                entries,
                default_lmv,
                ..
            } = &mut dir.kind
            {
                entries.push(StripeEntry::file(
                    "/d/f",
                    Fid::new(0x200000401, 1, 0),
                    1,
                    Some(l),
                ));
                entries.push(StripeEntry::file(
                    "/d/g",
                    Fid::new(0x200000401, 2, 0),
                    1,
                    None,
                ));
                *default_lmv = Some(LmvTemplate {
                    stripe_count: -1,
                    stripe_offset: -1,
                    hash_type: rng.next() as u32,
                    max_inherit: 3,
                    max_inherit_rr: 0,
                });
            }
            let _ = getstripe(&r.options, &dir, &FsDefaults::default());
        }
        if let Ok(r) = parse_getdirstripe(&args) {
            let d = DirStripeEntry {
                path: "/d".into(),
                fid: Fid::ROOT,
                mdt_index: 0,
                lmv: Some(Lmv {
                    master_mdt: 0,
                    hash_type: rng.next() as u32,
                    layout_version: 0,
                    stripes: vec![(0, Fid::ROOT), (7, Fid::ZERO)],
                }),
                default_lmv: None,
                subdirs: vec![],
            };
            let _ = getdirstripe(&r.options, &d);
        }
        if let Ok(r) = parse_df(&args) {
            let t = TargetStat {
                name: "fs-OST0000".into(),
                kind: TargetKind::Ost,
                index: 0,
                blocks: rng.next(),
                bfree: rng.next(),
                bavail: rng.next(),
                files: rng.next(),
                ffree: rng.next(),
                state: rng.next() as u32,
                active: rng.below(2) == 0,
                pools: vec![],
            };
            let _ = df(&r.options, "/mnt", &[t]);
        }
        if let Ok(q) = parse_get_param(&args) {
            for p in &q.patterns {
                let _ = p.matches("a.b.c");
                let _ = format_get_param(&q.output, p.as_str(), "x\ny\n");
            }
        }
        let _ = ParamPattern::new(&args.concat()).matches("osc.a.b");
        let _ = nacre_lustreapi::setstripe::parse_layout_yaml(&args.join("\n"));
        let _ = nacre_lustreapi::setstripe::parse_layout_yaml(&args.join(": "));
    }
}

#[test]
fn validation_and_rebasing_never_panic() {
    let mut rng = Rng(42);
    let ctx = LayoutCtx::with_ost_count(4);
    for _ in 0..20_000 {
        let l = random_layout(&mut rng);
        let _ = validate(&l, &ctx);
        let _ = validate(&l, &LayoutCtx::default());
        let added = random_layout(&mut rng).components;
        let _ = rebase_added_components(&l, added);
    }
}

#[test]
fn printers_never_panic_on_odd_layouts() {
    let mut rng = Rng(7);
    let option_sets: &[&[&str]] = &[
        &[],
        &["-v"],
        &["-y"],
        &["-c"],
        &["-S"],
        &["-i"],
        &["-L"],
        &["-p"],
        &["-g"],
        &["-F"],
        &["-q"],
        &["-d"],
        &["-O", "1"],
        &["--component-count"],
        &["-I1"],
        &["-I"],
        &["-v", "-y"],
        &["-z"],
        &["--hex-idx", "-v"],
        &["-R", "-d"],
        &["--component-flags=init"],
        &["-E"],
        &["--component-start=+0"],
        &["--mirror-id=1"],
        &["--mirror-index=+0"],
        &["-N"],
        &["-m"],
        &["-r"],
        &["-D"],
    ];
    for _ in 0..3_000 {
        for opts in option_sets {
            let mut args: Vec<&str> = opts.to_vec();
            args.push("/d");
            let r = parse_getstripe(&args).expect("fixed option sets parse");
            let mut dir = StripeEntry::dir("/d", Fid::ROOT, 0, Some(random_layout(&mut rng)));
            if let StripeEntryKind::Dir { entries, .. } = &mut dir.kind {
                entries.push(StripeEntry::file(
                    "/d/f",
                    Fid::new(0x200000401, 1, 0),
                    1,
                    Some(random_layout(&mut rng)),
                ));
                entries.push(StripeEntry::dir("/d/e", Fid::ROOT, 2, None));
            }
            let _ = getstripe(
                &r.options,
                &dir,
                &FsDefaults {
                    stripe_count: -1,
                    stripe_size: 0,
                },
            );
        }
    }
}
