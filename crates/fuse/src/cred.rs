//! The caller's credentials for the MDT's permission checks. A FUSE request carries only
//! the caller's fsuid, fsgid and pid; the supplementary groups and effective capabilities
//! the MDT also checks (as Lustre's llite sends `suppgids` and `cr_cap`) are read from
//! `/proc/PID/status`, and kept a short while, since one process makes many requests.

use nacre_rpc::msg::{Cred, MAX_GROUPS, cap};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Processes whose credentials are kept: more than a node's busy callers at once; past
/// it the oldest half goes.
const CACHED_CALLERS: usize = 1024;
/// How long read credentials are used: a process changes its groups or capabilities
/// rarely, and the kernel has checked with its current ones (`default_permissions`).
const CRED_TTL: Duration = Duration::from_secs(1);

/// A caller: pid, fsuid, fsgid (a reused pid under another identity misses).
type Caller = (u32, u32, u32);

#[derive(Default)]
pub(crate) struct Creds {
    cache: Mutex<HashMap<Caller, (Instant, Cred)>>,
}

impl Creds {
    pub(crate) fn of(&self, pid: u32, uid: u32, gid: u32) -> Cred {
        let key = (pid, uid, gid);
        let now = Instant::now();
        if let Some((at, c)) = self.cache.lock().get(&key)
            && now.duration_since(*at) < CRED_TTL
        {
            return c.clone();
        }
        let c = caller_cred(pid, uid, gid);
        let mut m = self.cache.lock();
        if m.len() >= CACHED_CALLERS {
            let mut ages: Vec<Instant> = m.values().map(|(t, _)| *t).collect();
            ages.sort_unstable();
            let cut = ages[ages.len() / 2];
            m.retain(|_, (t, _)| *t > cut);
        }
        m.insert(key, (now, c.clone()));
        c
    }
}

/// A caller whose process is gone (or the kernel itself, pid 0): root keeps root's
/// capabilities, anyone else has its uid and gid only.
fn fallback(uid: u32, gid: u32) -> Cred {
    let caps = if uid == 0 { cap::ALL } else { 0 };
    Cred::user(uid, gid, Vec::new(), caps)
}

/// The credentials of process `pid` acting as `uid`:`gid` (of any process that calls the
/// client library directly, too): its groups and capabilities, or only its ids when
/// `/proc` does not show that process under them.
pub fn caller_cred(pid: u32, uid: u32, gid: u32) -> Cred {
    read_proc(pid, uid, gid).unwrap_or_else(|| fallback(uid, gid))
}

fn read_proc(pid: u32, uid: u32, gid: u32) -> Option<Cred> {
    if pid == 0 {
        return None;
    }
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_status(&s, uid, gid)
}

/// The groups and effective capabilities in a `/proc/PID/status`, if its fsuid and
/// fsgid (the fourth `Uid:` and `Gid:` fields) are the request's.
fn parse_status(s: &str, uid: u32, gid: u32) -> Option<Cred> {
    let mut groups = Vec::new();
    let mut caps = None;
    let mut ids_match = 0;
    for line in s.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        match k {
            "Uid" | "Gid" => {
                let fs = v.split_whitespace().nth(3)?.parse::<u32>().ok()?;
                if fs != if k == "Uid" { uid } else { gid } {
                    return None;
                }
                ids_match += 1;
            }
            "Groups" => {
                groups = v
                    .split_whitespace()
                    .take(MAX_GROUPS)
                    .filter_map(|g| g.parse().ok())
                    .collect();
            }
            "CapEff" => caps = u64::from_str_radix(v.trim(), 16).ok(),
            _ => {}
        }
    }
    (ids_match == 2).then_some(Cred::user(uid, gid, groups, caps?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tsh\nUid:\t1000\t1000\t1000\t1000\nGid:\t100\t100\t100\t100\n\
        Groups:\t4 24 27 \nCapEff:\t0000000000000008\n";

    #[test]
    fn groups_and_capabilities_of_the_caller() {
        let c = parse_status(STATUS, 1000, 100).expect("parsed");
        assert_eq!(c.groups, vec![4, 24, 27]);
        assert!(c.capable(cap::FOWNER));
        assert!(!c.capable(cap::CHOWN));
        assert!(
            parse_status(STATUS, 1001, 100).is_none(),
            "another identity"
        );
        assert_eq!(fallback(0, 0).cap, cap::ALL);
        let me = Creds::default();
        let pid = std::process::id();
        let m = std::fs::metadata("/proc/self").expect("/proc/self");
        let (uid, gid) = (
            std::os::unix::fs::MetadataExt::uid(&m),
            std::os::unix::fs::MetadataExt::gid(&m),
        );
        assert_eq!(me.of(pid, uid, gid).uid, uid);
    }
}
