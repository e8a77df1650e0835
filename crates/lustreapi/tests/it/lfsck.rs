//! `lctl lfsck_start/stop/query` options and the LFSCK status files, as Lustre prints
//! them (§5.2, §5.3).

use nacre_core::Fid;
use nacre_lustreapi::lfsck::*;

#[test]
fn start_options_as_lustre_reads_them() {
    let r = parse_start(&["-M", "fs-MDT0000", "-A", "-t", "all", "-r"]).expect("parse");
    assert_eq!(r.device.as_deref(), Some("fs-MDT0000"));
    assert_eq!(r.flags, LPF_ALL_TGT | LPF_BROADCAST | LPF_RESET);
    assert_eq!(r.active, TYPES_SUPPORTED);

    let r = parse_start(&["-t", "namespace,layout", "-n", "-s", "100", "-w", "16"]).expect("parse");
    assert_eq!(r.active, TYPE_NAMESPACE | TYPE_LAYOUT);
    assert_eq!(r.flags, LPF_DRYRUN);
    assert_eq!(r.valid, LSV_DRYRUN | LSV_SPEED_LIMIT | LSV_ASYNC_WINDOWS);
    assert_eq!((r.speed_limit, r.async_windows), (100, 16));

    // Switches take their value attached only; -o implies all targets.
    let r = parse_start(&["-coff", "-C", "-don", "-o", "-e", "abort"]).expect("parse");
    assert_eq!(
        r.flags,
        LPF_CREATE_MDTOBJ
            | LPF_DELAY_CREATE_OSTOBJ
            | LPF_ALL_TGT
            | LPF_BROADCAST
            | LPF_OST_ORPHAN
            | LPF_FAILOUT
    );
    assert_eq!(
        r.valid,
        LSV_CREATE_OSTOBJ | LSV_CREATE_MDTOBJ | LSV_DELAY_CREATE_OSTOBJ | LSV_ERROR_HANDLE
    );
    let r = parse_start(&["--dryrun=off", "--path", "/mnt/nacre/dir"]).expect("parse");
    assert_eq!(r.flags & LPF_DRYRUN, 0);
    assert_eq!(r.valid, LSV_DRYRUN);
    assert_eq!(r.path.as_deref(), Some("/mnt/nacre/dir"));
    // No -t: the target decides (the last incomplete run's types, else all).
    assert_eq!(parse_start::<&str>(&[]).expect("parse").active, 0);

    for bad in [
        &["-t", "bogus"][..],
        &["-w", "0"],
        &["-w", "65536"],
        &["-e", "retry"],
        &["-cyes"],
        &["extra"],
    ] {
        assert!(parse_start(bad).is_err(), "{bad:?} accepted");
    }
    let long = "x".repeat(MAX_OBD_NAME);
    assert!(parse_start(&["-M", long.as_str()]).is_err());
}

#[test]
fn stop_and_query_options() {
    let s = parse_stop(&["-M", "fs-MDT0001", "-A"]).expect("parse");
    assert_eq!((s.device.as_deref(), s.all), (Some("fs-MDT0001"), true));
    let q = parse_query::<&str>(&[]).expect("parse");
    assert_eq!((q.types, q.wait), (TYPE_LAYOUT | TYPE_NAMESPACE, false));
    let q = parse_query(&["-t", "layout", "-w"]).expect("parse");
    assert_eq!((q.types, q.wait), (TYPE_LAYOUT, true));
    assert!(parse_query(&["-t", "nope"]).is_err());
    assert!(parse_stop(&["-t", "layout"]).is_err());
}

#[test]
fn started_line_lists_scrub_then_types_in_table_order() {
    assert_eq!(
        format_started("fs-MDT0000", TYPE_NAMESPACE | TYPE_LAYOUT | TYPE_SCRUB),
        "Started LFSCK on the device fs-MDT0000: scrub layout namespace\n"
    );
    assert_eq!(
        format_started("fs-OST0001", TYPE_SCRUB),
        "Started LFSCK on the device fs-OST0001: scrub\n"
    );
}

fn keys(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split(':').next().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn namespace_status_has_lustres_fields_in_lustres_order() {
    let st = NamespaceStatus {
        status: LfsckStatus::Completed,
        flags: FLAG_SCANNED_ONCE,
        param: LPF_ALL_TGT | LPF_BROADCAST,
        time_last_complete: 1000,
        time_latest_start: 990,
        time_last_checkpoint: 1000,
        items_checked: 500,
        dangling_repaired: 3,
        success_count: 2,
        run_time_phase1: 5,
        run_time_phase2: 1,
        objs_checked_phase2: 10,
        ..NamespaceStatus::default()
    };
    let out = st.format(1010, None);
    let want = [
        "name",
        "magic",
        "version",
        "status",
        "flags",
        "param",
        "last_completed_time",
        "time_since_last_completed",
        "latest_start_time",
        "time_since_latest_start",
        "last_checkpoint_time",
        "time_since_last_checkpoint",
        "latest_start_position",
        "last_checkpoint_position",
        "first_failure_position",
        "checked_phase1",
        "checked_phase2",
        "updated_phase1",
        "updated_phase2",
        "failed_phase1",
        "failed_phase2",
        "directories",
        "dirent_repaired",
        "linkea_repaired",
        "nlinks_repaired",
        "multiple_linked_checked",
        "multiple_linked_repaired",
        "unknown_inconsistency",
        "unmatched_pairs_repaired",
        "dangling_repaired",
        "multiple_referenced_repaired",
        "bad_file_type_repaired",
        "lost_dirent_repaired",
        "local_lost_found_scanned",
        "local_lost_found_moved",
        "local_lost_found_skipped",
        "local_lost_found_failed",
        "striped_dirs_scanned",
        "striped_dirs_repaired",
        "striped_dirs_failed",
        "striped_dirs_disabled",
        "striped_dirs_skipped",
        "striped_shards_scanned",
        "striped_shards_repaired",
        "striped_shards_failed",
        "striped_shards_skipped",
        "name_hash_repaired",
        "linkea_overflow_cleared",
        "agent_entries_repaired",
        "dne_records_repaired",
        "success_count",
        "run_time_phase1",
        "run_time_phase2",
        "average_speed_phase1",
        "average_speed_phase2",
        "average_speed_total",
        "real_time_speed_phase1",
        "real_time_speed_phase2",
        "current_position",
    ];
    assert_eq!(keys(&out), want, "{out}");
    assert!(out.contains("magic: 0xa06249ff\n"), "{out}");
    assert!(out.contains("status: completed\n"));
    assert!(out.contains("flags: scanned-once\n"));
    assert!(out.contains("param: all_targets,broadcast\n"));
    assert!(out.contains("time_since_last_completed: 10 seconds\n"));
    assert!(out.contains("latest_start_position: N/A, N/A, N/A\n"));
    assert!(out.contains("dangling_repaired: 3\n"));
    assert!(out.contains("average_speed_phase1: 100 items/sec\n"));
    assert!(out.contains("average_speed_phase2: 10 objs/sec\n"));
    assert!(out.contains("average_speed_total: 85 items/sec\n"));
    assert!(out.contains("run_time_phase1: 5 seconds\n"));
    assert!(out.contains("current_position: N/A\n"));
    assert_eq!(st.repaired(), 3);

    // A dry run says "inconsistent" where a repair says "repaired"/"updated"/"cleared".
    let dry = NamespaceStatus {
        param: LPF_DRYRUN,
        ..st.clone()
    };
    let out = dry.format(1010, None);
    assert!(out.contains("inconsistent_phase1: 0\n") && out.contains("dangling_inconsistent: 3\n"));
    assert!(out.contains("linkea_overflow_inconsistent: 0\n") && out.contains("param: dryrun\n"));

    // While scanning: live counts, real-time speed and where it is.
    let run = NamespaceStatus {
        status: LfsckStatus::ScanningPhase1,
        flags: 0,
        items_checked: 100,
        run_time_phase1: 2,
        ..NamespaceStatus::default()
    };
    let live = LiveScan {
        new_checked: 50,
        since_checkpoint: 1,
        position: LfsckPosition {
            oit_cookie: 77,
            dir_parent: Some(Fid::ROOT),
            dir_cookie: 0x1f,
        },
        phase2_fid: Fid::ZERO,
    };
    let out = run.format(1010, Some(&live));
    assert!(out.contains("flags:\n"));
    assert!(out.contains("checked_phase1: 150\n"));
    assert!(out.contains("average_speed_phase1: 50 items/sec\n"));
    assert!(out.contains("real_time_speed_phase1: 50 items/sec\n"));
    assert!(out.contains("real_time_speed_phase2: N/A\n"));
    assert!(
        out.contains("current_position: 77, [0x200000007:0x1:0x0], 0x1f\n"),
        "{out}"
    );
}

#[test]
fn layout_status_has_lustres_fields_in_lustres_order() {
    let mut st = LayoutStatus {
        status: LfsckStatus::Partial,
        checked_phase1: 40,
        run_time_phase1: 4,
        pos_latest_start: 9,
        ..LayoutStatus::default()
    };
    st.count(LayoutInconsistency::Orphan);
    st.count(LayoutInconsistency::Orphan);
    let out = st.format(100, None);
    let want = [
        "name",
        "magic",
        "version",
        "status",
        "flags",
        "param",
        "last_completed_time",
        "time_since_last_completed",
        "latest_start_time",
        "time_since_latest_start",
        "last_checkpoint_time",
        "time_since_last_checkpoint",
        "latest_start_position",
        "last_checkpoint_position",
        "first_failure_position",
        "success_count",
        "repaired_dangling",
        "repaired_unmatched_pair",
        "repaired_multiple_referenced",
        "repaired_orphan",
        "repaired_inconsistent_owner",
        "repaired_others",
        "skipped",
        "failed_phase1",
        "failed_phase2",
        "checked_phase1",
        "checked_phase2",
        "run_time_phase1",
        "run_time_phase2",
        "average_speed_phase1",
        "average_speed_phase2",
        "real_time_speed_phase1",
        "real_time_speed_phase2",
        "current_position",
    ];
    assert_eq!(keys(&out), want, "{out}");
    assert!(out.contains("magic: 0xb1732fed\n") && out.contains("status: partial\n"));
    assert!(out.contains("latest_start_position: 9\n"));
    assert!(
        out.contains("repaired_orphan: 2\n")
            && out.contains("average_speed_phase1: 10 items/sec\n")
    );
    assert_eq!(st.repaired_total(), 2);
    st.param = LPF_DRYRUN;
    assert!(st.format(100, None).contains("inconsistent_orphan: 2\n"));
}

#[test]
fn oi_scrub_status_has_lustres_fields_in_lustres_order() {
    let sf = ScrubFile {
        status: ScrubStatus::Completed,
        oi_files: 1,
        time_last_complete: 90,
        items_checked: 200,
        items_updated: 7,
        run_time: 2,
        success_count: 1,
        ..ScrubFile::default()
    };
    let out = sf.format(100, None);
    let want = [
        "name",
        "magic",
        "oi_files",
        "status",
        "flags",
        "param",
        "time_since_last_completed",
        "time_since_latest_start",
        "time_since_last_checkpoint",
        "latest_start_position",
        "last_checkpoint_position",
        "first_failure_position",
        "checked",
        "updated",
        "failed",
        "prior_updated",
        "noscrub",
        "igif",
        "success_count",
        "run_time",
        "average_speed",
        "real_time_speed",
        "current_position",
    ];
    assert_eq!(keys(&out), want, "{out}");
    assert!(out.contains("name: OI_scrub\n") && out.contains("status: completed\n"));
    assert!(out.contains("time_since_last_completed: 10 seconds\n"));
    assert!(out.contains("time_since_latest_start: N/A\n"));
    assert!(out.contains("updated: 7\n") && out.contains("average_speed: 100 objects/sec\n"));
    let live = LiveScrub {
        new_checked: 10,
        since_checkpoint: 1,
        position: 55,
        ..LiveScrub::default()
    };
    let running = ScrubFile {
        status: ScrubStatus::Scanning,
        param: SP_DRYRUN,
        ..sf
    };
    let out = running.format(100, Some(&live));
    assert!(out.contains("checked: 210\n") && out.contains("inconsistent: 7\n"));
    assert!(out.contains("current_position: 55\n") && out.ends_with("partial_scan: no\n"));
}

#[test]
fn query_counts_every_status_and_unknown() {
    let mut q = QueryCounts::default();
    q.add(TYPE_NAMESPACE, true, LfsckStatus::Completed, 4);
    q.add(TYPE_LAYOUT, true, LfsckStatus::ScanningPhase1, 1);
    q.add(TYPE_LAYOUT, false, LfsckStatus::Completed, 2);
    q.add_unknown(TYPE_LAYOUT, false);
    assert!(q.running());
    let out = q.format(TYPE_LAYOUT | TYPE_NAMESPACE);
    let lines: Vec<&str> = out.lines().collect();
    // Per type: 13 MDT lines, 13 OST lines, the repaired count; layout first.
    assert_eq!(lines.len(), 2 * 27);
    assert_eq!(lines[0], "layout_mdts_init: 0");
    assert_eq!(lines[1], "layout_mdts_scanning-phase1: 1");
    assert_eq!(lines[12], "layout_mdts_unknown: 0");
    assert_eq!(lines[16], "layout_osts_completed: 1");
    assert_eq!(lines[25], "layout_osts_unknown: 1");
    assert_eq!(lines[26], "layout_repaired: 3");
    assert_eq!(lines[27], "namespace_mdts_init: 0");
    assert_eq!(lines[53], "namespace_repaired: 4");
    assert_eq!(q.format(TYPE_NAMESPACE).lines().count(), 27);
}
