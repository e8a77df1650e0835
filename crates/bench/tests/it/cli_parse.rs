//! The command line accepts IOR's and mdtest's options exactly as they spell them.

use clap::{CommandFactory, Parser};
use nacre_bench::cli::{BenchCommand, FragArgs, FragCommand, PafArgs, SeriesArgs};

#[derive(Parser, Debug)]
#[command(name = "nacre")]
enum Nacre {
    #[command(subcommand)]
    Bench(BenchCommand),
    Paf(PafArgs),
    Frag(FragArgs),
    Series(SeriesArgs),
}

fn parse(args: &[&str]) -> Nacre {
    match Nacre::try_parse_from(args) {
        Ok(n) => n,
        Err(e) => panic!("{args:?}: {e}"),
    }
}

#[test]
fn clap_definitions_are_consistent() {
    Nacre::command().debug_assert();
}

#[test]
fn ior_short_options() {
    let n = parse(&[
        "nacre",
        "bench",
        "ior",
        "-F",
        "-t",
        "1m",
        "-b",
        "16m",
        "-s",
        "1",
        "-w",
        "-r",
        "-i",
        "3",
        "-o",
        "/mnt/x/ior",
    ]);
    let Nacre::Bench(BenchCommand::Ior(a)) = n else {
        panic!("not ior")
    };
    assert!(a.file_per_proc && a.write && a.read);
    assert_eq!(
        (a.xfer, a.block, a.segments, a.reps),
        (1 << 20, 16 << 20, 1, 3)
    );
    assert_eq!(a.test_file.to_str(), Some("/mnt/x/ior"));

    let n = parse(&[
        "nacre", "bench", "ior", "-v", "-F", "-t", "64m", "-b", "10g", "-B", "-w", "-r", "-o",
        "/d/f", "-e", "-C", "-z", "-z", "-k", "-E", "-m", "-Z", "-Z", "-N", "4", "-X", "-7",
    ]);
    let Nacre::Bench(BenchCommand::Ior(a)) = n else {
        panic!("not ior")
    };
    assert!(a.direct && a.fsync && a.reorder && a.keep && a.use_existing && a.multi_file);
    assert_eq!((a.random_offset, a.reorder_random, a.verbose), (2, 2, 1));
    assert_eq!(a.tasks, Some(4));
    assert_eq!(a.reorder_seed, -7);
    assert_eq!(a.block, 10 << 30);

    let n = parse(&[
        "nacre",
        "bench",
        "ior",
        "--posix.odirect",
        "--tasks",
        "2",
        "-O",
        "summaryFormat=JSON",
    ]);
    let Nacre::Bench(BenchCommand::Ior(a)) = n else {
        panic!("not ior")
    };
    assert!(a.posix_odirect);
    assert_eq!(a.tasks, Some(2));
    assert_eq!(a.directives, vec!["summaryFormat=JSON".to_string()]);
}

#[test]
fn mdtest_short_options() {
    let n = parse(&[
        "nacre", "bench", "mdtest", "-n", "1000", "-i", "3", "-d", "/mnt/md", "-z", "2", "-b", "3",
        "-u", "-F", "-I", "10",
    ]);
    let Nacre::Bench(BenchCommand::Mdtest(a)) = n else {
        panic!("not mdtest")
    };
    assert_eq!(
        (a.items, a.items_per_dir, a.iterations),
        (Some(1000), Some(10), 3)
    );
    assert_eq!((a.depth, a.branch), (2, 3));
    assert!(a.unique_dir && a.files_only && !a.dirs_only);
    let n = parse(&[
        "nacre", "bench", "mdtest", "-D", "-n", "5", "-d", "/x", "-w", "3901", "-e", "3901", "-N",
        "1",
    ]);
    let Nacre::Bench(BenchCommand::Mdtest(a)) = n else {
        panic!("not mdtest")
    };
    assert!(a.dirs_only);
    assert_eq!((a.write_bytes, a.read_bytes, a.stride), (3901, 3901, 1));
}

#[test]
fn paf_frag_series_and_the_rest() {
    let n = parse(&[
        "nacre",
        "paf",
        "PAF:70.30,20.40:67005@264M,40M<24253639848",
        "/mnt/x",
        "--threads",
        "16",
    ]);
    let Nacre::Paf(a) = n else { panic!("not paf") };
    assert_eq!(a.args.len(), 2);
    assert_eq!(a.threads, 16);
    let n = parse(&["nacre", "paf", "--scrub", "/mnt/x"]);
    let Nacre::Paf(a) = n else { panic!("not paf") };
    assert!(a.scrub);
    assert_eq!(a.args, vec!["/mnt/x".to_string()]);

    let n = parse(&["nacre", "frag", "dumpe2fs", "-", "--json"]);
    let Nacre::Frag(a) = n else {
        panic!("not frag")
    };
    let Some(FragCommand::Dumpe2fs(d)) = a.command else {
        panic!("no subcommand")
    };
    assert!(d.json);
    assert_eq!(d.file.to_str(), Some("-"));
    let n = parse(&["nacre", "frag", "/mnt/ost0", "--top", "3"]);
    let Nacre::Frag(a) = n else {
        panic!("not frag")
    };
    assert!(a.command.is_none());
    assert_eq!(a.top, 3);

    let n = parse(&[
        "nacre",
        "series",
        "/x",
        "--capacities",
        "10,20",
        "--xfers",
        "1m,64m",
        "-B",
    ]);
    let Nacre::Series(a) = n else {
        panic!("not series")
    };
    assert_eq!(a.capacities, vec![10, 20]);
    assert_eq!(a.xfers, vec![1 << 20, 64 << 20]);
    assert!(a.direct);
    assert_eq!(a.frags, vec![0, 10, 20, 30, 40, 50, 60, 70]);

    parse(&["nacre", "bench", "mix", "/x", "--scale", "0.5"]);
    parse(&["nacre", "bench", "io500", "/x", "--tasks", "2"]);
    parse(&["nacre", "bench", "compare", "/a", "/b", "--watch-pid", "1"]);
}

#[test]
fn long_help_teaches_with_examples() {
    let mut cmd = Nacre::command();
    for sub in ["paf", "series", "frag"] {
        let help = cmd
            .find_subcommand_mut(sub)
            .map(|c| c.render_long_help().to_string())
            .unwrap_or_default();
        assert!(help.contains("Examples:"), "{sub}: {help}");
    }
    let bench = cmd.find_subcommand_mut("bench").expect("bench");
    let ior = bench
        .find_subcommand_mut("ior")
        .map(|c| c.render_long_help().to_string())
        .unwrap_or_default();
    assert!(
        ior.contains("--posix.odirect") && ior.contains("mpirun"),
        "{ior}"
    );
}
