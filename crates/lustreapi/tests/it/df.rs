//! `lfs df` output (§2.10), rendered by master's `showdf`: fields joined by one space,
//! the mount column as " PATH[TYPE:IDX]", then the state letters.

use nacre_core::target::TargetKind;
use nacre_lustreapi::df::{DfField, TargetStat, df, parse_df, state};

const K: u64 = 1024;

/// A target with blocks = [total, free, avail] in bytes and files = [total, free].
fn t(name: &str, kind: TargetKind, index: u32, blocks: [u64; 3], files: [u64; 2]) -> TargetStat {
    TargetStat {
        name: name.into(),
        kind,
        index,
        blocks: blocks[0],
        bfree: blocks[1],
        bavail: blocks[2],
        files: files[0],
        ffree: files[1],
        state: 0,
        active: true,
        pools: vec![],
    }
}

fn fs() -> Vec<TargetStat> {
    let mut ost1 = t(
        "testfs-OST0001",
        TargetKind::Ost,
        1,
        [10 * K * K * K, 9 * K * K * K, 8 * K * K * K],
        [500_000, 450_000],
    );
    ost1.state = state::DEGRADED;
    ost1.pools = vec!["flash".into()];
    let mut ost2 = t(
        "testfs-OST0002",
        TargetKind::Ost,
        2,
        [10 * K * K * K, 10 * K * K * K, 10 * K * K * K],
        [500_000, 500_000],
    );
    ost2.active = false;
    vec![
        // Given out of order: MDTs print first, each kind by index.
        t(
            "testfs-OST0000",
            TargetKind::Ost,
            0,
            [10 * K * K * K, 5 * K * K * K, 9 * K * K * K / 2],
            [500_000, 400_000],
        ),
        t(
            "testfs-MDT0000",
            TargetKind::Mdt,
            0,
            [1000 * K * K, 900 * K * K, 850 * K * K],
            [1_000_000, 900_000],
        ),
        ost1,
        ost2,
    ]
}

fn run(args: &[&str], targets: &[TargetStat]) -> String {
    let req = parse_df(args).unwrap();
    df(&req.options, "/mnt/lustre", targets).unwrap()
}

#[test]
fn default_report() {
    assert_eq!(
        run(&[], &fs()),
        "UUID                   1K-blocks        Used   Available Use%  Mounted on\n\
testfs-MDT0000_UUID      1024000      102400      870400  11%  /mnt/lustre[MDT:0] \n\
testfs-OST0000_UUID     10485760     5242880     4718592  53%  /mnt/lustre[OST:0] \n\
testfs-OST0001_UUID     10485760     1048576     8388608  12%  /mnt/lustre[OST:1] D\n\
\n\
filesystem_summary:     20971520     6291456    13107200  33%  /mnt/lustre \n\
\n"
    );
}

#[test]
fn verbose_shows_inactive_targets() {
    let out = run(&["-v"], &fs());
    assert!(out.contains("testfs-OST0001_UUID     10485760     1048576     8388608  12%  /mnt/lustre[OST:1] D\nOST0002             : inactive device\n\nfilesystem_summary:"), "{out}");
}

#[test]
fn human_readable() {
    assert_eq!(
        run(&["-h"], &fs()),
        "UUID                       bytes        Used   Available Use%  Mounted on\n\
testfs-MDT0000_UUID    1000.0M    100.0M    850.0M  11%  /mnt/lustre[MDT:0] \n\
testfs-OST0000_UUID      10.0G      5.0G      4.5G  53%  /mnt/lustre[OST:0] \n\
testfs-OST0001_UUID      10.0G   1024.0M      8.0G  12%  /mnt/lustre[OST:1] D\n\
\n\
filesystem_summary:      20.0G      6.0G     12.5G  33%  /mnt/lustre \n\
\n"
    );
}

#[test]
fn inodes() {
    assert_eq!(
        run(&["-i"], &fs()),
        "UUID                      Inodes       IUsed       IFree IUse%  Mounted on\n\
testfs-MDT0000_UUID      1000000      100000      900000  10%  /mnt/lustre[MDT:0] \n\
testfs-OST0000_UUID       500000      100000      400000  20%  /mnt/lustre[OST:0] \n\
testfs-OST0001_UUID       500000       50000      450000  10%  /mnt/lustre[OST:1] D\n\
\n\
filesystem_summary:       950000      100000      850000  11%  /mnt/lustre \n\
\n"
    );
    assert_eq!(
        run(&["-iH"], &fs()),
        "UUID                      Inodes       IUsed       IFree IUse%  Mounted on\n\
testfs-MDT0000_UUID    1000.0k    100.0k    900.0k  10%  /mnt/lustre[MDT:0] \n\
testfs-OST0000_UUID     500.0k    100.0k    400.0k  20%  /mnt/lustre[OST:0] \n\
testfs-OST0001_UUID     500.0k     50.0k    450.0k  10%  /mnt/lustre[OST:1] D\n\
\n\
filesystem_summary:     950.0k    100.0k    850.0k  11%  /mnt/lustre \n\
\n"
    );
}

#[test]
fn mdt_only_file_system_counts_mdt_blocks() {
    let mdt = vec![t(
        "testfs-MDT0000",
        TargetKind::Mdt,
        0,
        [1000 * K * K, 900 * K * K, 850 * K * K],
        [10, 5],
    )];
    let out = run(&[], &mdt);
    assert!(
        out.ends_with(
            "filesystem_summary:      1024000      102400      870400  11%  /mnt/lustre \n\n"
        ),
        "{out}"
    );
}

#[test]
fn selections_and_fields() {
    // -o: OSTs only; -o IDX: one OST and no header or summary.
    let out = run(&["-o"], &fs());
    assert!(
        !out.contains("MDT0000") && out.contains("filesystem_summary"),
        "{out}"
    );
    assert_eq!(
        run(&["--ost=1"], &fs()),
        "testfs-OST0001_UUID     10485760     1048576     8388608  12%  /mnt/lustre[OST:1] D\n"
    );
    assert_eq!(
        run(&["-m0"], &fs()),
        "testfs-MDT0000_UUID      1024000      102400      870400  11%  /mnt/lustre[MDT:0] \n"
    );
    // Only the summary, without blank lines.
    assert_eq!(
        run(&["-s"], &fs()),
        "filesystem_summary:     20971520     6291456    13107200  33%  /mnt/lustre \n"
    );
    // A pool keeps only its OSTs.
    let out = run(&["-p", "testfs.flash"], &fs());
    assert!(
        out.contains("OST0001") && !out.contains("OST0000_UUID"),
        "{out}"
    );
    assert!(
        out.contains("filesystem_summary:     10485760     1048576     8388608  12%"),
        "{out}"
    );
    let req = parse_df(&["-p", "other.flash"]).unwrap();
    assert!(df(&req.options, "/mnt/lustre", &fs()).is_err());
    // --output picks columns in order; the state column shows letters alone.
    let req = parse_df(&["--output=state", "--ost=1", "-N"]).unwrap();
    assert_eq!(req.options.fields, vec![DfField::State]);
    assert_eq!(df(&req.options, "/mnt/lustre", &fs()).unwrap(), "D\n");
    let out = run(&["--output=source,pcent,target", "-N"], &fs());
    assert_eq!(
        out.lines().next(),
        Some("testfs-MDT0000_UUID   11%  /mnt/lustre[MDT:0]")
    );
    assert!(
        parse_df(&["--output=bogus"])
            .unwrap_err()
            .to_string()
            .contains("unknown field 'bogus'")
    );
}

#[test]
fn state_letters() {
    let mut s = fs();
    s[1].state = state::NONROT | state::READONLY;
    let out = run(&[], &s);
    assert!(out.contains("/mnt/lustre[MDT:0] R\n"), "{out}");
    let out = run(&["-v"], &s);
    assert!(out.contains("/mnt/lustre[MDT:0] Rf\n"), "{out}");
    s[1].state = 0x80;
    assert!(run(&[], &s).contains("/mnt/lustre[MDT:0] (0200)\n"));
}

#[test]
fn percentages_round_up_and_survive_bad_numbers() {
    let mut s = vec![t(
        "x-OST0000",
        TargetKind::Ost,
        0,
        [100 * K, 99 * K, 99 * K],
        [0, 0],
    )];
    // 1 KiB used of 100: exactly 1%.
    assert!(run(&[], &s).contains("   1%"));
    s[0].bfree = 98 * K + 512;
    // 1.5 KiB used: rounds up to 2%.
    assert!(run(&[], &s).contains("   2%"));
    // Nonsense from a target must not panic.
    s[0].bfree = u64::MAX;
    s[0].files = 1;
    s[0].ffree = u64::MAX;
    let _ = run(&["-i", "-h"], &s);
    let _ = run(&[], &s);
}
