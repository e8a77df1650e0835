//! LFSCK's user-space side: the options of `lctl lfsck_start`, `lfsck_stop` and
//! `lfsck_query` (`lustre/utils/lustre_lfsck.c`), and the status files the servers show
//! as `mdd.*.lfsck_namespace`, `mdd.*.lfsck_layout`, `obdfilter.*.lfsck_layout` and
//! `osd-*.*.oi_scrub`, field for field and in Lustre's order (`lfsck_namespace_dump`,
//! `lfsck_layout_dump`, `scrub_dump`).
//!
//! The status records are also what the targets keep on disk between runs (they are
//! serde types), so a stopped or crashed run resumes from its last checkpoint.

use crate::error::{Error, Result};
use crate::getopt::{HasArg, LongOpt, OptSpec, Parsed, getopt, lo, owned};
use nacre_core::Fid;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// `LFSCK_TYPE_LAYOUT`: MDT-OST consistency.
pub const TYPE_LAYOUT: u16 = 0x0001;
/// `LFSCK_TYPE_NAMESPACE`: FID-in-dirent, linkEA, names across MDTs.
pub const TYPE_NAMESPACE: u16 = 0x0004;
/// The OI scrub. Lustre's `LFSCK_TYPE_SCRUB` is 0 (it always runs with the others);
/// nacre gives it a bit of its own so `-t scrub` alone runs only the scrub.
pub const TYPE_SCRUB: u16 = 0x0100;
/// `LFSCK_TYPES_SUPPORTED` with nacre's scrub bit.
pub const TYPES_SUPPORTED: u16 = TYPE_SCRUB | TYPE_LAYOUT | TYPE_NAMESPACE;

/// `lfsck_param_flags`.
pub const LPF_RESET: u16 = 0x0001;
pub const LPF_FAILOUT: u16 = 0x0002;
pub const LPF_DRYRUN: u16 = 0x0004;
pub const LPF_ALL_TGT: u16 = 0x0008;
pub const LPF_BROADCAST: u16 = 0x0010;
pub const LPF_OST_ORPHAN: u16 = 0x0020;
pub const LPF_CREATE_OSTOBJ: u16 = 0x0040;
pub const LPF_CREATE_MDTOBJ: u16 = 0x0080;
pub const LPF_WAIT: u16 = 0x0100;
pub const LPF_DELAY_CREATE_OSTOBJ: u16 = 0x0200;

/// `lfsck_start_valid`: which fields of a start request were given.
pub const LSV_SPEED_LIMIT: u32 = 0x01;
pub const LSV_ERROR_HANDLE: u32 = 0x02;
pub const LSV_DRYRUN: u32 = 0x04;
pub const LSV_ASYNC_WINDOWS: u32 = 0x08;
pub const LSV_CREATE_OSTOBJ: u32 = 0x10;
pub const LSV_CREATE_MDTOBJ: u32 = 0x20;
pub const LSV_DELAY_CREATE_OSTOBJ: u32 = 0x40;

/// `LFSCK_SPEED_NO_LIMIT`.
pub const SPEED_NO_LIMIT: u32 = 0;
/// `LFSCK_ASYNC_WIN_DEFAULT`: in-flight layout requests.
pub const ASYNC_WIN_DEFAULT: u32 = 1024;
/// `LFSCK_ASYNC_WIN_MAX`.
pub const ASYNC_WIN_MAX: u32 = 65535;

/// `lfsck_flags_names`, by bit.
pub const FLAG_SCANNED_ONCE: u32 = 0x01;
pub const FLAG_INCONSISTENT: u32 = 0x02;
pub const FLAG_UPGRADE: u32 = 0x04;
pub const FLAG_INCOMPLETE: u32 = 0x08;
pub const FLAG_CRASHED_LASTID: u32 = 0x10;
const FLAG_NAMES: &[Option<&str>] = &[
    Some("scanned-once"),
    Some("inconsistent"),
    Some("upgrade"),
    Some("incomplete"),
    Some("crashed_lastid"),
];
/// `lfsck_param_names`, by bit of [`LPF_RESET`] and the rest.
const PARAM_NAMES: &[Option<&str>] = &[
    None,
    Some("failout"),
    Some("dryrun"),
    Some("all_targets"),
    Some("broadcast"),
    Some("orphan"),
    Some("create_ostobj"),
    Some("create_mdtobj"),
    None,
    Some("delay_create_ostobj"),
];

/// `LFSCK_NAMESPACE_MAGIC` (V3).
pub const NAMESPACE_MAGIC: u32 = 0xA062_49FF;
/// `LFSCK_LAYOUT_MAGIC` (V4).
pub const LAYOUT_MAGIC: u32 = 0xB173_2FED;
/// `SCRUB_MAGIC_V2`.
pub const SCRUB_MAGIC: u32 = 0x4C5F_D253;
/// `LFSCK_VERSION_V2`, printed as the bookmark version.
pub const VERSION: u32 = 2;

/// `enum lfsck_status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LfsckStatus {
    #[default]
    Init,
    ScanningPhase1,
    ScanningPhase2,
    Completed,
    Failed,
    Stopped,
    Paused,
    Crashed,
    Partial,
    CoFailed,
    CoStopped,
    CoPaused,
}

/// `LS_MAX`: statuses `lfsck_query` counts (and one "unknown" past them).
pub const LS_MAX: usize = 12;

impl LfsckStatus {
    pub const ALL: [LfsckStatus; LS_MAX] = [
        LfsckStatus::Init,
        LfsckStatus::ScanningPhase1,
        LfsckStatus::ScanningPhase2,
        LfsckStatus::Completed,
        LfsckStatus::Failed,
        LfsckStatus::Stopped,
        LfsckStatus::Paused,
        LfsckStatus::Crashed,
        LfsckStatus::Partial,
        LfsckStatus::CoFailed,
        LfsckStatus::CoStopped,
        LfsckStatus::CoPaused,
    ];

    /// `lfsck_status2name`.
    pub fn name(self) -> &'static str {
        match self {
            LfsckStatus::Init => "init",
            LfsckStatus::ScanningPhase1 => "scanning-phase1",
            LfsckStatus::ScanningPhase2 => "scanning-phase2",
            LfsckStatus::Completed => "completed",
            LfsckStatus::Failed => "failed",
            LfsckStatus::Stopped => "stopped",
            LfsckStatus::Paused => "paused",
            LfsckStatus::Crashed => "crashed",
            LfsckStatus::Partial => "partial",
            LfsckStatus::CoFailed => "co-failed",
            LfsckStatus::CoStopped => "co-stopped",
            LfsckStatus::CoPaused => "co-paused",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// Still scanning.
    pub fn is_running(self) -> bool {
        matches!(
            self,
            LfsckStatus::ScanningPhase1 | LfsckStatus::ScanningPhase2
        )
    }
}

/// The name of a type bit, as `lfsck_type2name`.
pub fn type_name(t: u16) -> Option<&'static str> {
    match t {
        TYPE_LAYOUT => Some("layout"),
        TYPE_NAMESPACE => Some("namespace"),
        TYPE_SCRUB => Some("scrub"),
        _ => None,
    }
}

/// Where a scan is: the object-table cookie, and the directory being read with its
/// cookie (`struct lfsck_position`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LfsckPosition {
    pub oit_cookie: u64,
    pub dir_parent: Option<Fid>,
    pub dir_cookie: u64,
}

impl LfsckPosition {
    pub fn at(cookie: u64) -> LfsckPosition {
        LfsckPosition {
            oit_cookie: cookie,
            ..LfsckPosition::default()
        }
    }

    pub fn is_zero(&self) -> bool {
        self.oit_cookie == 0 && self.dir_parent.is_none()
    }
}

/// `lfsck_pos_dump`.
fn pos_dump(m: &mut String, pos: &LfsckPosition, prefix: &str) {
    match pos.dir_parent {
        None if pos.oit_cookie == 0 => {
            let _ = writeln!(m, "{prefix}: N/A, N/A, N/A");
        }
        None => {
            let _ = writeln!(m, "{prefix}: {}, N/A, N/A", pos.oit_cookie);
        }
        Some(p) => {
            let _ = writeln!(
                m,
                "{prefix}: {}, {p}, {:#x}",
                pos.oit_cookie, pos.dir_cookie
            );
        }
    }
}

/// `lfsck_bits_dump`: `prefix: a,b,c` (unnamed bits skipped), or `prefix:` when empty.
fn bits_dump(m: &mut String, bits: u32, names: &[Option<&str>], prefix: &str) {
    let shown: Vec<&str> = names
        .iter()
        .enumerate()
        .filter(|(i, _)| bits & (1 << i) != 0)
        .filter_map(|(_, n)| *n)
        .collect();
    if bits == 0 {
        let _ = writeln!(m, "{prefix}:");
    } else {
        let _ = writeln!(m, "{prefix}: {}", shown.join(","));
    }
}

/// `lfsck_time_dump`.
fn time_dump(m: &mut String, time: i64, now: i64, name: &str) {
    if time == 0 {
        let _ = writeln!(m, "{name}_time: N/A");
        let _ = writeln!(m, "time_since_{name}: N/A");
    } else {
        let _ = writeln!(m, "{name}_time: {time}");
        let _ = writeln!(m, "time_since_{name}: {} seconds", now - time);
    }
}

/// What a running scan adds to its last checkpoint: items checked since then, how long
/// ago that was, and where the scan is now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveScan {
    pub new_checked: u64,
    pub since_checkpoint: i64,
    pub position: LfsckPosition,
    /// Phase 2: the object being handled.
    pub phase2_fid: Fid,
}

fn per_sec(n: u64, secs: i64) -> u64 {
    if secs > 0 { n / secs as u64 } else { n }
}

/// The namespace component's record (`struct lfsck_namespace`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceStatus {
    pub status: LfsckStatus,
    pub flags: u32,
    /// `LPF_*` of the run (the bookmark's parameters).
    pub param: u16,
    pub time_last_complete: i64,
    pub time_latest_start: i64,
    pub time_last_checkpoint: i64,
    pub pos_latest_start: LfsckPosition,
    pub pos_last_checkpoint: LfsckPosition,
    pub pos_first_inconsistent: LfsckPosition,
    pub items_checked: u64,
    pub items_repaired: u64,
    pub items_failed: u64,
    pub dirs_checked: u64,
    pub objs_checked_phase2: u64,
    pub objs_repaired_phase2: u64,
    pub objs_failed_phase2: u64,
    pub objs_nlink_repaired: u64,
    pub dirent_repaired: u64,
    pub linkea_repaired: u64,
    pub mul_linked_checked: u64,
    pub mul_linked_repaired: u64,
    pub unknown_inconsistency: u64,
    pub unmatched_pairs_repaired: u64,
    pub dangling_repaired: u64,
    pub mul_ref_repaired: u64,
    pub bad_type_repaired: u64,
    pub lost_dirent_repaired: u64,
    pub local_lpf_scanned: u64,
    pub local_lpf_moved: u64,
    pub local_lpf_skipped: u64,
    pub local_lpf_failed: u64,
    pub striped_dirs_scanned: u64,
    pub striped_dirs_repaired: u64,
    pub striped_dirs_failed: u64,
    pub striped_dirs_disabled: u64,
    pub striped_dirs_skipped: u64,
    pub striped_shards_scanned: u64,
    pub striped_shards_repaired: u64,
    pub striped_shards_failed: u64,
    pub striped_shards_skipped: u64,
    pub name_hash_repaired: u64,
    pub linkea_overflow_cleared: u64,
    pub agent_entries_repaired: u64,
    /// nacre: distributed-operation records no recovery can finish (their coordinator or
    /// participant is not part of the file system).
    pub dne_records_repaired: u64,
    pub success_count: u32,
    pub run_time_phase1: i64,
    pub run_time_phase2: i64,
}

impl NamespaceStatus {
    /// Every `*_repaired` counter, summed (what `lfsck_query` reports).
    pub fn repaired(&self) -> u64 {
        self.dirent_repaired
            + self.linkea_repaired
            + self.objs_nlink_repaired
            + self.mul_linked_repaired
            + self.unmatched_pairs_repaired
            + self.dangling_repaired
            + self.mul_ref_repaired
            + self.bad_type_repaired
            + self.lost_dirent_repaired
            + self.local_lpf_moved
            + self.striped_dirs_repaired
            + self.striped_shards_repaired
            + self.name_hash_repaired
            + self.linkea_overflow_cleared
            + self.agent_entries_repaired
            + self.dne_records_repaired
    }

    fn statistics(&self, m: &mut String, checked1: u64, checked2: u64, t1: i64, t2: i64) {
        let dry = self.param & LPF_DRYRUN != 0;
        let post = if dry { "inconsistent" } else { "repaired" };
        let upd = if dry { "inconsistent" } else { "updated" };
        let cleared = if dry { "inconsistent" } else { "cleared" };
        let lines: [(String, u64); 38] = [
            ("checked_phase1".into(), checked1),
            ("checked_phase2".into(), checked2),
            (format!("{upd}_phase1"), self.items_repaired),
            (format!("{upd}_phase2"), self.objs_repaired_phase2),
            ("failed_phase1".into(), self.items_failed),
            ("failed_phase2".into(), self.objs_failed_phase2),
            ("directories".into(), self.dirs_checked),
            (format!("dirent_{post}"), self.dirent_repaired),
            (format!("linkea_{post}"), self.linkea_repaired),
            (format!("nlinks_{post}"), self.objs_nlink_repaired),
            ("multiple_linked_checked".into(), self.mul_linked_checked),
            (format!("multiple_linked_{post}"), self.mul_linked_repaired),
            ("unknown_inconsistency".into(), self.unknown_inconsistency),
            (
                format!("unmatched_pairs_{post}"),
                self.unmatched_pairs_repaired,
            ),
            (format!("dangling_{post}"), self.dangling_repaired),
            (format!("multiple_referenced_{post}"), self.mul_ref_repaired),
            (format!("bad_file_type_{post}"), self.bad_type_repaired),
            (format!("lost_dirent_{post}"), self.lost_dirent_repaired),
            ("local_lost_found_scanned".into(), self.local_lpf_scanned),
            ("local_lost_found_moved".into(), self.local_lpf_moved),
            ("local_lost_found_skipped".into(), self.local_lpf_skipped),
            ("local_lost_found_failed".into(), self.local_lpf_failed),
            ("striped_dirs_scanned".into(), self.striped_dirs_scanned),
            (format!("striped_dirs_{post}"), self.striped_dirs_repaired),
            ("striped_dirs_failed".into(), self.striped_dirs_failed),
            ("striped_dirs_disabled".into(), self.striped_dirs_disabled),
            ("striped_dirs_skipped".into(), self.striped_dirs_skipped),
            ("striped_shards_scanned".into(), self.striped_shards_scanned),
            (
                format!("striped_shards_{post}"),
                self.striped_shards_repaired,
            ),
            ("striped_shards_failed".into(), self.striped_shards_failed),
            ("striped_shards_skipped".into(), self.striped_shards_skipped),
            (format!("name_hash_{post}"), self.name_hash_repaired),
            (
                format!("linkea_overflow_{cleared}"),
                self.linkea_overflow_cleared,
            ),
            (format!("agent_entries_{post}"), self.agent_entries_repaired),
            (format!("dne_records_{post}"), self.dne_records_repaired),
            ("success_count".into(), u64::from(self.success_count)),
            ("run_time_phase1".into(), t1 as u64),
            ("run_time_phase2".into(), t2 as u64),
        ];
        for (k, v) in &lines {
            if k.starts_with("run_time") {
                let _ = writeln!(m, "{k}: {v} seconds");
            } else {
                let _ = writeln!(m, "{k}: {v}");
            }
        }
    }

    /// `lfsck_namespace_dump`: what `lctl get_param -n mdd.*.lfsck_namespace` prints.
    /// `now` is the wall clock in seconds; `live` is given while a scan runs.
    pub fn format(&self, now: i64, live: Option<&LiveScan>) -> String {
        let mut m = String::new();
        let _ = writeln!(m, "name: lfsck_namespace");
        let _ = writeln!(m, "magic: {NAMESPACE_MAGIC:#x}");
        let _ = writeln!(m, "version: {VERSION}");
        let _ = writeln!(m, "status: {}", self.status.name());
        bits_dump(&mut m, self.flags, FLAG_NAMES, "flags");
        bits_dump(&mut m, u32::from(self.param), PARAM_NAMES, "param");
        time_dump(&mut m, self.time_last_complete, now, "last_completed");
        time_dump(&mut m, self.time_latest_start, now, "latest_start");
        time_dump(&mut m, self.time_last_checkpoint, now, "last_checkpoint");
        pos_dump(&mut m, &self.pos_latest_start, "latest_start_position");
        pos_dump(
            &mut m,
            &self.pos_last_checkpoint,
            "last_checkpoint_position",
        );
        pos_dump(
            &mut m,
            &self.pos_first_inconsistent,
            "first_failure_position",
        );
        match (self.status, live) {
            (LfsckStatus::ScanningPhase1, Some(l)) => {
                let checked = self.items_checked + l.new_checked;
                let rtime = self.run_time_phase1 + l.since_checkpoint;
                self.statistics(&mut m, checked, 0, rtime, 0);
                let speed = per_sec(checked, rtime);
                let _ = writeln!(m, "average_speed_phase1: {speed} items/sec");
                let _ = writeln!(m, "average_speed_phase2: N/A");
                let _ = writeln!(m, "average_speed_total: {speed} items/sec");
                let _ = writeln!(
                    m,
                    "real_time_speed_phase1: {} items/sec",
                    per_sec(l.new_checked, l.since_checkpoint)
                );
                let _ = writeln!(m, "real_time_speed_phase2: N/A");
                pos_dump(&mut m, &l.position, "current_position");
            }
            (LfsckStatus::ScanningPhase2, Some(l)) => {
                let checked = self.objs_checked_phase2 + l.new_checked;
                let rtime = self.run_time_phase2 + l.since_checkpoint;
                let mut time0 = self.run_time_phase1 + rtime;
                let speed1 = if self.run_time_phase1 != 0 {
                    self.items_checked / self.run_time_phase1 as u64
                } else {
                    if self.items_checked != 0 {
                        time0 += 1;
                    }
                    self.items_checked
                };
                let speed2 = if rtime != 0 {
                    checked / rtime as u64
                } else {
                    if checked != 0 {
                        time0 += 1;
                    }
                    checked
                };
                let speed0 = per_sec(self.items_checked + checked, time0);
                self.statistics(
                    &mut m,
                    self.items_checked,
                    checked,
                    self.run_time_phase1,
                    rtime,
                );
                let _ = writeln!(m, "average_speed_phase1: {speed1} items/sec");
                let _ = writeln!(m, "average_speed_phase2: {speed2} objs/sec");
                let _ = writeln!(m, "average_speed_total: {speed0} items/sec");
                let _ = writeln!(m, "real_time_speed_phase1: N/A");
                let _ = writeln!(
                    m,
                    "real_time_speed_phase2: {} objs/sec",
                    per_sec(l.new_checked, l.since_checkpoint)
                );
                let _ = writeln!(m, "current_position: {}", l.phase2_fid);
            }
            _ => {
                let mut time0 = self.run_time_phase1 + self.run_time_phase2;
                let speed1 = if self.run_time_phase1 != 0 {
                    self.items_checked / self.run_time_phase1 as u64
                } else {
                    if self.items_checked != 0 {
                        time0 += 1;
                    }
                    self.items_checked
                };
                let speed2 = if self.run_time_phase2 != 0 {
                    self.objs_checked_phase2 / self.run_time_phase2 as u64
                } else {
                    if self.objs_checked_phase2 != 0 {
                        time0 += 1;
                    }
                    self.objs_checked_phase2
                };
                let speed0 = per_sec(self.items_checked + self.objs_checked_phase2, time0);
                self.statistics(
                    &mut m,
                    self.items_checked,
                    self.objs_checked_phase2,
                    self.run_time_phase1,
                    self.run_time_phase2,
                );
                let _ = writeln!(m, "average_speed_phase1: {speed1} items/sec");
                let _ = writeln!(m, "average_speed_phase2: {speed2} objs/sec");
                let _ = writeln!(m, "average_speed_total: {speed0} items/sec");
                let _ = writeln!(m, "real_time_speed_phase1: N/A");
                let _ = writeln!(m, "real_time_speed_phase2: N/A");
                let _ = writeln!(m, "current_position: N/A");
            }
        }
        m
    }
}

/// `enum lfsck_layout_inconsistency_type`, less "none": index into
/// [`LayoutStatus::repaired`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LayoutInconsistency {
    Dangling = 0,
    UnmatchedPair = 1,
    MultipleReferenced = 2,
    Orphan = 3,
    InconsistentOwner = 4,
    Others = 5,
}

impl LayoutInconsistency {
    pub fn name(self) -> &'static str {
        match self {
            LayoutInconsistency::Dangling => "dangling",
            LayoutInconsistency::UnmatchedPair => "unmatched_pair",
            LayoutInconsistency::MultipleReferenced => "multiple_referenced",
            LayoutInconsistency::Orphan => "orphan",
            LayoutInconsistency::InconsistentOwner => "inconsistent_owner",
            LayoutInconsistency::Others => "others",
        }
    }
}

/// The layout component's record (`struct lfsck_layout`), on MDTs and OSTs alike.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutStatus {
    pub status: LfsckStatus,
    pub flags: u32,
    pub param: u16,
    pub time_last_complete: i64,
    pub time_latest_start: i64,
    pub time_last_checkpoint: i64,
    pub pos_latest_start: u64,
    pub pos_last_checkpoint: u64,
    pub pos_first_inconsistent: u64,
    pub success_count: u32,
    /// By [`LayoutInconsistency`].
    pub repaired: [u64; 6],
    pub skipped: u64,
    pub failed_phase1: u64,
    pub failed_phase2: u64,
    pub checked_phase1: u64,
    pub checked_phase2: u64,
    pub run_time_phase1: i64,
    pub run_time_phase2: i64,
}

impl LayoutStatus {
    pub fn repaired_total(&self) -> u64 {
        self.repaired.iter().sum()
    }

    pub fn count(&mut self, what: LayoutInconsistency) {
        self.repaired[what as usize] += 1;
    }

    /// `lfsck_layout_dump`.
    pub fn format(&self, now: i64, live: Option<&LiveScan>) -> String {
        let mut m = String::new();
        let prefix = if self.param & LPF_DRYRUN != 0 {
            "inconsistent"
        } else {
            "repaired"
        };
        let _ = writeln!(m, "name: lfsck_layout");
        let _ = writeln!(m, "magic: {LAYOUT_MAGIC:#x}");
        let _ = writeln!(m, "version: {VERSION}");
        let _ = writeln!(m, "status: {}", self.status.name());
        bits_dump(&mut m, self.flags, FLAG_NAMES, "flags");
        bits_dump(&mut m, u32::from(self.param), PARAM_NAMES, "param");
        time_dump(&mut m, self.time_last_complete, now, "last_completed");
        time_dump(&mut m, self.time_latest_start, now, "latest_start");
        time_dump(&mut m, self.time_last_checkpoint, now, "last_checkpoint");
        let _ = writeln!(m, "latest_start_position: {}", self.pos_latest_start);
        let _ = writeln!(m, "last_checkpoint_position: {}", self.pos_last_checkpoint);
        let _ = writeln!(m, "first_failure_position: {}", self.pos_first_inconsistent);
        let _ = writeln!(m, "success_count: {}", self.success_count);
        for what in [
            LayoutInconsistency::Dangling,
            LayoutInconsistency::UnmatchedPair,
            LayoutInconsistency::MultipleReferenced,
            LayoutInconsistency::Orphan,
            LayoutInconsistency::InconsistentOwner,
            LayoutInconsistency::Others,
        ] {
            let _ = writeln!(
                m,
                "{prefix}_{}: {}",
                what.name(),
                self.repaired[what as usize]
            );
        }
        let _ = writeln!(m, "skipped: {}", self.skipped);
        let _ = writeln!(m, "failed_phase1: {}", self.failed_phase1);
        let _ = writeln!(m, "failed_phase2: {}", self.failed_phase2);
        match (self.status, live) {
            (LfsckStatus::ScanningPhase1, Some(l)) => {
                let checked = self.checked_phase1 + l.new_checked;
                let rtime = self.run_time_phase1 + l.since_checkpoint;
                let _ = writeln!(m, "checked_phase1: {checked}");
                let _ = writeln!(m, "checked_phase2: {}", self.checked_phase2);
                let _ = writeln!(m, "run_time_phase1: {rtime} seconds");
                let _ = writeln!(m, "run_time_phase2: {} seconds", self.run_time_phase2);
                let _ = writeln!(
                    m,
                    "average_speed_phase1: {} items/sec",
                    per_sec(checked, rtime)
                );
                let _ = writeln!(m, "average_speed_phase2: N/A");
                let _ = writeln!(
                    m,
                    "real_time_speed_phase1: {} items/sec",
                    per_sec(l.new_checked, l.since_checkpoint)
                );
                let _ = writeln!(m, "real_time_speed_phase2: N/A");
                let _ = writeln!(m, "current_position: {}", l.position.oit_cookie);
            }
            (LfsckStatus::ScanningPhase2, Some(l)) => {
                let checked = self.checked_phase2 + l.new_checked;
                let rtime = self.run_time_phase2 + l.since_checkpoint;
                let speed1 = if self.run_time_phase1 != 0 {
                    self.checked_phase1 / self.run_time_phase1 as u64
                } else {
                    self.checked_phase1
                };
                let _ = writeln!(m, "checked_phase1: {}", self.checked_phase1);
                let _ = writeln!(m, "checked_phase2: {checked}");
                let _ = writeln!(m, "run_time_phase1: {} seconds", self.run_time_phase1);
                let _ = writeln!(m, "run_time_phase2: {rtime} seconds");
                let _ = writeln!(m, "average_speed_phase1: {speed1} items/sec");
                let _ = writeln!(
                    m,
                    "average_speed_phase2: {} items/sec",
                    per_sec(checked, rtime)
                );
                let _ = writeln!(m, "real_time_speed_phase1: N/A");
                let _ = writeln!(
                    m,
                    "real_time_speed_phase2: {} items/sec",
                    per_sec(l.new_checked, l.since_checkpoint)
                );
                let _ = writeln!(m, "current_position: {}", l.phase2_fid);
            }
            _ => {
                let _ = writeln!(m, "checked_phase1: {}", self.checked_phase1);
                let _ = writeln!(m, "checked_phase2: {}", self.checked_phase2);
                let _ = writeln!(m, "run_time_phase1: {} seconds", self.run_time_phase1);
                let _ = writeln!(m, "run_time_phase2: {} seconds", self.run_time_phase2);
                let _ = writeln!(
                    m,
                    "average_speed_phase1: {} items/sec",
                    per_sec(self.checked_phase1, self.run_time_phase1)
                );
                let _ = writeln!(
                    m,
                    "average_speed_phase2: {} objs/sec",
                    per_sec(self.checked_phase2, self.run_time_phase2)
                );
                let _ = writeln!(m, "real_time_speed_phase1: N/A");
                let _ = writeln!(m, "real_time_speed_phase2: N/A");
                let _ = writeln!(m, "current_position: N/A");
            }
        }
        m
    }
}

/// `enum scrub_status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScrubStatus {
    #[default]
    Init,
    Scanning,
    Completed,
    Failed,
    Stopped,
    Paused,
    Crashed,
}

impl ScrubStatus {
    pub fn name(self) -> &'static str {
        match self {
            ScrubStatus::Init => "init",
            ScrubStatus::Scanning => "scanning",
            ScrubStatus::Completed => "completed",
            ScrubStatus::Failed => "failed",
            ScrubStatus::Stopped => "stopped",
            ScrubStatus::Paused => "paused",
            ScrubStatus::Crashed => "crashed",
        }
    }
}

/// `scrub_flags_names`.
pub const SF_RECREATED: u32 = 0x1;
pub const SF_INCONSISTENT: u32 = 0x2;
pub const SF_AUTO: u32 = 0x4;
pub const SF_UPGRADE: u32 = 0x8;
const SCRUB_FLAG_NAMES: &[Option<&str>] = &[
    Some("recreated"),
    Some("inconsistent"),
    Some("auto"),
    Some("upgrade"),
];
/// `scrub_param_names`.
pub const SP_FAILOUT: u16 = 0x1;
pub const SP_DRYRUN: u16 = 0x2;
const SCRUB_PARAM_NAMES: &[Option<&str>] = &[Some("failout"), Some("dryrun")];

/// The OI scrub's record (`struct scrub_file`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrubFile {
    pub status: ScrubStatus,
    pub flags: u32,
    pub param: u16,
    pub oi_files: u32,
    pub time_last_complete: i64,
    pub time_latest_start: i64,
    pub time_last_checkpoint: i64,
    pub pos_latest_start: u64,
    pub pos_last_checkpoint: u64,
    pub pos_first_inconsistent: u64,
    pub items_checked: u64,
    pub items_updated: u64,
    pub items_failed: u64,
    pub items_updated_prior: u64,
    pub items_noscrub: u64,
    pub items_igif: u64,
    pub success_count: u32,
    pub run_time: i64,
}

/// What a running scrub adds to its record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveScrub {
    pub new_checked: u64,
    pub since_checkpoint: i64,
    pub position: u64,
    pub in_prior: bool,
    pub full_speed: bool,
    pub partial_scan: bool,
}

fn scrub_time_dump(m: &mut String, time: i64, now: i64, prefix: &str) {
    if time != 0 {
        let _ = writeln!(m, "{prefix}: {} seconds", now - time);
    } else {
        let _ = writeln!(m, "{prefix}: N/A");
    }
}

fn scrub_pos_dump(m: &mut String, pos: u64, prefix: &str) {
    if pos != 0 {
        let _ = writeln!(m, "{prefix}: {pos}");
    } else {
        let _ = writeln!(m, "{prefix}: N/A");
    }
}

impl ScrubFile {
    /// `scrub_dump`: what `lctl get_param -n osd-*.*.oi_scrub` prints.
    pub fn format(&self, now: i64, live: Option<&LiveScrub>) -> String {
        let mut m = String::new();
        let _ = writeln!(m, "name: OI_scrub");
        let _ = writeln!(m, "magic: {SCRUB_MAGIC:#x}");
        let _ = writeln!(m, "oi_files: {}", self.oi_files);
        let _ = writeln!(m, "status: {}", self.status.name());
        bits_dump(&mut m, self.flags, SCRUB_FLAG_NAMES, "flags");
        bits_dump(&mut m, u32::from(self.param), SCRUB_PARAM_NAMES, "param");
        scrub_time_dump(
            &mut m,
            self.time_last_complete,
            now,
            "time_since_last_completed",
        );
        scrub_time_dump(
            &mut m,
            self.time_latest_start,
            now,
            "time_since_latest_start",
        );
        scrub_time_dump(
            &mut m,
            self.time_last_checkpoint,
            now,
            "time_since_last_checkpoint",
        );
        scrub_pos_dump(&mut m, self.pos_latest_start, "latest_start_position");
        scrub_pos_dump(&mut m, self.pos_last_checkpoint, "last_checkpoint_position");
        scrub_pos_dump(
            &mut m,
            self.pos_first_inconsistent,
            "first_failure_position",
        );
        let checked = self.items_checked + live.map_or(0, |l| l.new_checked);
        let upd = if self.param & SP_DRYRUN != 0 {
            "inconsistent"
        } else {
            "updated"
        };
        let _ = writeln!(m, "checked: {checked}");
        let _ = writeln!(m, "{upd}: {}", self.items_updated);
        let _ = writeln!(m, "failed: {}", self.items_failed);
        let _ = writeln!(m, "prior_{upd}: {}", self.items_updated_prior);
        let _ = writeln!(m, "noscrub: {}", self.items_noscrub);
        let _ = writeln!(m, "igif: {}", self.items_igif);
        let _ = writeln!(m, "success_count: {}", self.success_count);
        let yes = |b: bool| if b { "yes" } else { "no" };
        match live {
            Some(l) => {
                let rtime = self.run_time + l.since_checkpoint;
                let _ = writeln!(m, "run_time: {rtime} seconds");
                let _ = writeln!(m, "average_speed: {} objects/sec", per_sec(checked, rtime));
                let _ = writeln!(
                    m,
                    "real_time_speed: {} objects/sec",
                    per_sec(l.new_checked, l.since_checkpoint)
                );
                let _ = writeln!(m, "current_position: {}", l.position);
                let _ = writeln!(m, "scrub_in_prior: {}", yes(l.in_prior));
                let _ = writeln!(m, "scrub_full_speed: {}", yes(l.full_speed));
                let _ = writeln!(m, "partial_scan: {}", yes(l.partial_scan));
            }
            None => {
                let _ = writeln!(m, "run_time: {} seconds", self.run_time);
                let _ = writeln!(
                    m,
                    "average_speed: {} objects/sec",
                    per_sec(checked, self.run_time)
                );
                let _ = writeln!(m, "real_time_speed: N/A");
                let _ = writeln!(m, "current_position: N/A");
            }
        }
        m
    }
}

/// How many targets of each kind are in each status, per type, and what each type
/// repaired (`struct lfsck_query`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryCounts {
    /// Per type: (type bit, MDT counts by status, OST counts by status, repaired).
    pub types: Vec<(u16, [u32; LS_MAX + 1], [u32; LS_MAX + 1], u64)>,
}

impl QueryCounts {
    /// Adds one target's status of type `t`.
    pub fn add(&mut self, t: u16, is_mdt: bool, status: LfsckStatus, repaired: u64) {
        let pos = match self.types.iter().position(|e| e.0 == t) {
            Some(p) => p,
            None => {
                self.types.push((t, [0; LS_MAX + 1], [0; LS_MAX + 1], 0));
                self.types.sort_by_key(|e| e.0);
                self.types.iter().position(|e| e.0 == t).unwrap_or(0)
            }
        };
        let e = &mut self.types[pos];
        if is_mdt {
            e.1[status.index()] += 1;
        } else {
            e.2[status.index()] += 1;
        }
        e.3 += repaired;
    }

    /// A target that did not answer counts under "unknown" (past `LS_MAX`).
    pub fn add_unknown(&mut self, t: u16, is_mdt: bool) {
        self.add(t, is_mdt, LfsckStatus::Init, 0);
        if let Some(e) = self.types.iter_mut().find(|e| e.0 == t) {
            let arr = if is_mdt { &mut e.1 } else { &mut e.2 };
            arr[LfsckStatus::Init.index()] -= 1;
            arr[LS_MAX] += 1;
        }
    }

    /// Whether any counted target still scans.
    pub fn running(&self) -> bool {
        self.types.iter().any(|(_, m, o, _)| {
            [LfsckStatus::ScanningPhase1, LfsckStatus::ScanningPhase2]
                .iter()
                .any(|s| m[s.index()] > 0 || o[s.index()] > 0)
        })
    }

    /// What `lctl lfsck_query` prints, types in bit order as `jt_lfsck_query` walks them.
    pub fn format(&self, types: u16) -> String {
        let mut out = String::new();
        for (t, mdts, osts, repaired) in &self.types {
            if types & t == 0 || *t == TYPE_SCRUB {
                continue;
            }
            let Some(name) = type_name(*t) else { continue };
            for (kind, arr) in [("mdts", mdts), ("osts", osts)] {
                for (j, n) in arr.iter().enumerate() {
                    let s = LfsckStatus::ALL.get(j).map_or("unknown", |s| s.name());
                    let _ = writeln!(out, "{name}_{kind}_{s}: {n}");
                }
            }
            let _ = writeln!(out, "{name}_repaired: {repaired}");
        }
        out
    }
}

/// Error handling of a run (`-e`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorMode {
    Continue,
    Abort,
}

/// A parsed `lctl lfsck_start` (`struct lfsck_start` plus the device).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StartRequest {
    /// `-M`.
    pub device: Option<String>,
    /// `-h`: print the usage and do nothing.
    pub help: bool,
    /// `LSV_*`.
    pub valid: u32,
    pub speed_limit: u32,
    /// Type bits; 0 means "not given" (the types of the last incomplete run, else all).
    pub active: u16,
    /// `LPF_*`.
    pub flags: u16,
    pub async_windows: u16,
    /// nacre's `--path DIR`: check the subtree under DIR only.
    pub path: Option<String>,
}

/// A parsed `lctl lfsck_stop`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StopRequest {
    pub device: Option<String>,
    pub help: bool,
    pub all: bool,
}

/// A parsed `lctl lfsck_query`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueryRequest {
    pub device: Option<String>,
    pub help: bool,
    pub types: u16,
    pub wait: bool,
}

const OPT_PATH: u32 = 256;

const fn c(ch: char) -> u32 {
    ch as u32
}

const START_LONG: &[LongOpt] = &[
    lo("all", HasArg::No, c('A')),
    lo("create_ostobj", HasArg::Optional, c('c')),
    lo("create-ostobj", HasArg::Optional, c('c')),
    lo("create_mdtobj", HasArg::Optional, c('C')),
    lo("create-mdtobj", HasArg::Optional, c('C')),
    lo("delay_create_ostobj", HasArg::Optional, c('d')),
    lo("delay-create-ostobj", HasArg::Optional, c('d')),
    lo("error", HasArg::Required, c('e')),
    lo("help", HasArg::No, c('h')),
    lo("device", HasArg::Required, c('M')),
    lo("dryrun", HasArg::Optional, c('n')),
    lo("orphan", HasArg::No, c('o')),
    lo("reset", HasArg::No, c('r')),
    lo("speed", HasArg::Required, c('s')),
    lo("type", HasArg::Required, c('t')),
    lo("window_size", HasArg::Required, c('w')),
    lo("window-size", HasArg::Required, c('w')),
    lo("path", HasArg::Required, OPT_PATH),
];

const STOP_LONG: &[LongOpt] = &[
    lo("all", HasArg::No, c('A')),
    lo("help", HasArg::No, c('h')),
    lo("device", HasArg::Required, c('M')),
];

const QUERY_LONG: &[LongOpt] = &[
    lo("help", HasArg::No, c('h')),
    lo("device", HasArg::Required, c('M')),
    lo("type", HasArg::Required, c('t')),
    lo("wait", HasArg::No, c('w')),
];

/// `MAX_OBD_NAME`: the longest device name `-M` takes.
pub const MAX_OBD_NAME: usize = 128;

fn device(cmd: &'static str, arg: Option<String>) -> Result<String> {
    let d = arg.unwrap_or_default();
    if d.len() + 1 > MAX_OBD_NAME {
        return Err(Error::invalid(
            cmd,
            format!("device name is too long. Valid length should be less than {MAX_OBD_NAME}"),
        ));
    }
    Ok(d)
}

/// An `on`/`off` switch attached to its option (`-coff`); no value means on.
fn switch(cmd: &'static str, opt: char, arg: Option<&str>) -> Result<bool> {
    match arg {
        None | Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(other) => Err(Error::invalid(
            cmd,
            format!(
                "invalid switch: -{opt} '{other}'. valid switches are:\nempty ('on'), or 'off' without space. For example:\n'-{opt}', '-{opt}on', '-{opt}off'"
            ),
        )),
    }
}

/// `-t a,b,c`, as `lfsck_name2type` reads each.
fn parse_types(cmd: &'static str, arg: &str) -> Result<u16> {
    let mut t = 0;
    for name in arg.split(',') {
        t |= match name {
            "layout" => TYPE_LAYOUT,
            "namespace" => TYPE_NAMESPACE,
            "scrub" => TYPE_SCRUB,
            "all" | "default" => TYPES_SUPPORTED,
            _ => {
                return Err(Error::invalid(
                    cmd,
                    format!(
                        "invalid check type -t '{name}'. valid types are:\nlayout,namespace,scrub,all,default"
                    ),
                ));
            }
        };
    }
    Ok(t)
}

/// Parses `lctl lfsck_start` (`jt_lfsck_start`).
pub fn parse_start<S: AsRef<str>>(args: &[S]) -> Result<StartRequest> {
    let cmd = "lfsck_start";
    let spec = OptSpec {
        short: "Ac::C::d::e:hM:n::ors:t:w:",
        long: START_LONG,
        in_order: false,
        long_only: false,
    };
    let mut r = StartRequest::default();
    for item in getopt(cmd, &spec, &owned(args))? {
        let (val, arg, text) = match item {
            Parsed::Operand(p) => {
                return Err(Error::usage(cmd, format!("unexpected argument '{p}'")));
            }
            Parsed::Opt { val, arg, text } => (val, arg, text),
        };
        if val == OPT_PATH {
            r.path = arg;
            continue;
        }
        match char::from_u32(val).unwrap_or('\0') {
            'A' => r.flags |= LPF_ALL_TGT | LPF_BROADCAST,
            'c' => {
                if switch(cmd, 'c', arg.as_deref())? {
                    r.flags |= LPF_CREATE_OSTOBJ;
                }
                r.valid |= LSV_CREATE_OSTOBJ;
            }
            'C' => {
                if switch(cmd, 'C', arg.as_deref())? {
                    r.flags |= LPF_CREATE_MDTOBJ;
                }
                r.valid |= LSV_CREATE_MDTOBJ;
            }
            'd' => {
                if switch(cmd, 'd', arg.as_deref())? {
                    r.flags |= LPF_DELAY_CREATE_OSTOBJ;
                }
                r.valid |= LSV_DELAY_CREATE_OSTOBJ;
            }
            'e' => {
                match arg.as_deref() {
                    Some("abort") => r.flags |= LPF_FAILOUT,
                    Some("continue") => {}
                    other => {
                        return Err(Error::invalid(
                            cmd,
                            format!(
                                "invalid error mode: -e '{}'.valid modes are: 'continue' or 'abort'.",
                                other.unwrap_or_default()
                            ),
                        ));
                    }
                }
                r.valid |= LSV_ERROR_HANDLE;
            }
            'h' => r.help = true,
            'M' => r.device = Some(device(cmd, arg)?),
            'n' => {
                if switch(cmd, 'n', arg.as_deref())? {
                    r.flags |= LPF_DRYRUN;
                }
                r.valid |= LSV_DRYRUN;
            }
            'o' => r.flags |= LPF_ALL_TGT | LPF_BROADCAST | LPF_OST_ORPHAN,
            'r' => r.flags |= LPF_RESET,
            's' => {
                let v = crate::cnum::atoi(arg.as_deref().unwrap_or_default());
                r.speed_limit = u32::try_from(v).unwrap_or(0);
                r.valid |= LSV_SPEED_LIMIT;
            }
            't' => r.active |= parse_types(cmd, arg.as_deref().unwrap_or_default())?,
            'w' => {
                let v = crate::cnum::atoi(arg.as_deref().unwrap_or_default());
                if v < 1 || v > i64::from(ASYNC_WIN_MAX) {
                    return Err(Error::invalid(
                        cmd,
                        format!(
                            "Invalid async window size that may cause memory issues. The valid range is [1 - {ASYNC_WIN_MAX}]."
                        ),
                    ));
                }
                r.async_windows = v as u16;
                r.valid |= LSV_ASYNC_WINDOWS;
            }
            _ => {
                return Err(Error::usage(
                    cmd,
                    format!("Invalid option '{text}', '-h' for help."),
                ));
            }
        }
    }
    Ok(r)
}

/// Parses `lctl lfsck_stop`.
pub fn parse_stop<S: AsRef<str>>(args: &[S]) -> Result<StopRequest> {
    let cmd = "lfsck_stop";
    let spec = OptSpec {
        short: "AhM:",
        long: STOP_LONG,
        in_order: false,
        long_only: false,
    };
    let mut r = StopRequest::default();
    for item in getopt(cmd, &spec, &owned(args))? {
        match item {
            Parsed::Operand(p) => {
                return Err(Error::usage(cmd, format!("unexpected argument '{p}'")));
            }
            Parsed::Opt { val, arg, text } => match char::from_u32(val).unwrap_or('\0') {
                'A' => r.all = true,
                'h' => r.help = true,
                'M' => r.device = Some(device(cmd, arg)?),
                _ => {
                    return Err(Error::usage(
                        cmd,
                        format!("Invalid option '{text}', '-h' for help."),
                    ));
                }
            },
        }
    }
    Ok(r)
}

/// Parses `lctl lfsck_query`.
pub fn parse_query<S: AsRef<str>>(args: &[S]) -> Result<QueryRequest> {
    let cmd = "lfsck_query";
    let spec = OptSpec {
        short: "hM:t:w",
        long: QUERY_LONG,
        in_order: false,
        long_only: false,
    };
    let mut r = QueryRequest {
        types: TYPE_LAYOUT | TYPE_NAMESPACE,
        ..QueryRequest::default()
    };
    let mut typed = false;
    for item in getopt(cmd, &spec, &owned(args))? {
        match item {
            Parsed::Operand(p) => {
                return Err(Error::usage(cmd, format!("unexpected argument '{p}'")));
            }
            Parsed::Opt { val, arg, text } => match char::from_u32(val).unwrap_or('\0') {
                'h' => r.help = true,
                'M' => r.device = Some(device(cmd, arg)?),
                't' => {
                    if !typed {
                        r.types = 0;
                        typed = true;
                    }
                    r.types |= parse_types(cmd, arg.as_deref().unwrap_or_default())?;
                }
                'w' => r.wait = true,
                _ => {
                    return Err(Error::usage(
                        cmd,
                        format!("Invalid option '{text}', '-h' for help."),
                    ));
                }
            },
        }
    }
    Ok(r)
}

/// What `lfsck_start` prints: "scrub" always first (the OI scrub runs with every LFSCK),
/// then the other types in the order of `lfsck_types_names`.
pub fn format_started(device: &str, active: u16) -> String {
    let mut s = format!("Started LFSCK on the device {device}: scrub");
    for t in [TYPE_LAYOUT, TYPE_NAMESPACE] {
        if active & t != 0
            && let Some(n) = type_name(t)
        {
            s.push(' ');
            s.push_str(n);
        }
    }
    let rest = active & !(TYPE_LAYOUT | TYPE_NAMESPACE | TYPE_SCRUB);
    if rest != 0 {
        let _ = write!(s, " unknown({rest:#x})");
    }
    s.push('\n');
    s
}

pub const START_USAGE: &str = "start LFSCK
usage:
lfsck_start [-M | --device {MDT,OST}_device]
            [-A | --all] [-c | --create_ostobj [on | off]]
            [-C | --create_mdtobj [on | off]]
            [-d | --delay_create_ostobj [on | off]]
            [-e | --error {continue | abort}] [-h | --help]
            [-n | --dryrun [on | off]] [-o | --orphan]
            [-r | --reset] [-s | --speed ops_per_sec_limit]
            [-t | --type check_type[,check_type...]]
            [-w | --window_size size] [--path DIR]
options:
-M: device to start LFSCK/scrub on
-A: start LFSCK on all nodes via the specified MDT device (see \"-M\" option) by single LFSCK command
-c: create the lost OST-object for dangling LOV EA (default 'off', or 'on')
-C: create the lost MDT-object for dangling name entry (default 'off', or 'on')
-d: delay create the lost OST-object for dangling LOV EA until orphan OST-objects handled (default 'off', or 'on')
-e: error handle mode (default 'continue', or 'abort')
-h: this help message
-n: check with no modification (default 'off', or 'on')
-o: repair orphan OST-objects
-r: reset scanning to the start of the device
-s: maximum items to be scanned per second (default '0' = no limit)
-t: check type(s) to be performed (default all)
-w: window size for async requests pipeline
--path: check only the subtree under DIR (a path on a nacre mount)
";

pub const STOP_USAGE: &str = "stop LFSCK
usage:
lfsck_stop [-M | --device {MDT,OST}_device]
           [-A | --all] [-h | --help]
options:
-M: device to stop LFSCK/scrub on
-A: stop LFSCK on all nodes via the specified MDT device (see \"-M\" option) by single LFSCK command
-h: this help message
";

pub const QUERY_USAGE: &str = "check the LFSCK global status
usage:
lfsck_query [-M | --device MDT_device] [-h | --help]
            [-t | --type check_type[,check_type...]]
            [-w | --wait]
options:
-M: device to query LFSCK on
-t: LFSCK type(s) to be queried (default is all)
-h: this help message
-w: do not return until LFSCK not running
";
