//! `nacre bench checks`: what the MDT's own permission checks cost. The MDT checks every
//! request against the caller's credentials (Lustre's `mdd_permission`), so a client that
//! skips its checks gains nothing; this measures what that costs a client that does not.
//!
//! It brings up a file system (1 MDT, 4 OSTs) in this process, mounted with no name or
//! attribute caching so every lookup and stat reaches the MDT, and runs mdtest's file
//! create, stat and remove phases through the mount with the checks on and off
//! (alternating run by run). Off exists only here: [`nacre_mdt::perm::set_enforced`], in
//! this process, which no client or `lctl` can reach. It runs as root, whose capabilities
//! settle most checks at once, and as an unprivileged user (`nobody` by default), whose
//! every check reads the mode bits, and the ACL where the mode has group bits: the mdtest
//! threads take the user's file system identity (`setfsuid`, `setfsgid`, no
//! supplementary groups), which is what the kernel puts in each FUSE request, and the
//! mount passes on to the MDT.

use super::bench_cost::{self, Cell, CostArgs, MDTEST_PHASES};
use super::bench_fs::BenchFs;
use anyhow::{Context, Result, anyhow, bail};
use nacre_bench::env::RunEnv;
use nacre_bench::rank::World;
use nacre_core::Errno;
use nacre_rpc::msg::{Cred, LayoutRequest};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The goal: the checks cost at most 5% of the create and stat rates.
const GOAL: bench_cost::Goal<'static> = bench_cost::Goal {
    ratio: 0.95,
    ops: &["create", "stat"],
};
/// The directory the runs are made in, under the mount's root.
const TOP: &str = "checks";
/// `nobody` on Debian and most distributions.
const NOBODY: u32 = 65534;

/// mdtest through the mount with the MDT's permission checks on and off.
#[derive(clap::Args, Debug, Clone)]
#[command(
    after_long_help = "Example:\n  nacre bench checks --files 8000 --tasks 4 --reps 5 --json checks.json"
)]
pub struct ChecksBenchArgs {
    #[command(flatten)]
    pub cost: CostArgs,
    /// Who runs mdtest: root, nobody, or UID:GID
    #[arg(long, value_delimiter = ',', default_value = "root,nobody")]
    pub users: Vec<String>,
}

/// A user to run as: its name in the table, uid and gid.
#[derive(Debug, Clone)]
struct User {
    name: String,
    uid: u32,
    gid: u32,
}

fn parse_user(s: &str) -> Result<User> {
    let (uid, gid) = match s {
        "root" => (0, 0),
        "nobody" => (NOBODY, NOBODY),
        _ => {
            let (u, g) = s
                .split_once(':')
                .ok_or_else(|| anyhow!("--users: '{s}' is not root, nobody or UID:GID"))?;
            (
                u.parse()
                    .map_err(|_| anyhow!("--users: bad uid in '{s}'"))?,
                g.parse()
                    .map_err(|_| anyhow!("--users: bad gid in '{s}'"))?,
            )
        }
    };
    Ok(User {
        name: s.to_string(),
        uid,
        gid,
    })
}

/// Makes this thread act on files as `uid`:`gid` with no supplementary groups (and, for
/// a uid other than 0, without root's file capabilities, which the kernel drops with the
/// fsuid). Raw system calls, since they change the calling thread only: glibc's wrappers
/// would change every thread of the process, the servers' too. Threads it starts inherit
/// it.
fn act_as(uid: u32, gid: u32) -> Result<()> {
    // SAFETY: plain system calls on this thread's credentials, with no pointers but a
    // null group list of length 0.
    unsafe {
        if libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) != 0 {
            bail!(
                "cannot drop supplementary groups: {} (needs root)",
                std::io::Error::last_os_error()
            );
        }
        libc::syscall(libc::SYS_setfsgid, gid as libc::c_long);
        libc::syscall(libc::SYS_setfsuid, uid as libc::c_long);
        // Both calls return the previous id whatever happens: an invalid id asks for
        // the current one.
        let fsuid = libc::syscall(libc::SYS_setfsuid, u32::MAX as libc::c_long) as u32;
        let fsgid = libc::syscall(libc::SYS_setfsgid, u32::MAX as libc::c_long) as u32;
        if (fsuid, fsgid) != (uid, gid) {
            bail!("cannot act as {uid}:{gid} (needs root): fsuid {fsuid}, fsgid {fsgid}");
        }
    }
    Ok(())
}

/// Runs `f` on a new thread acting as `user`.
fn run_as<T: Send>(user: &User, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            act_as(user.uid, user.gid)?;
            f()
        })
        .join()
        .map_err(|_| anyhow!("the run as {} panicked", user.name))?
    })
}

/// A directory `user` owns under `top`; checks that a file it makes there is its own
/// (that its identity reaches the MDT).
fn user_dir(top: &Path, name: &str, user: &User) -> Result<PathBuf> {
    let d = top.join(name);
    std::fs::create_dir(&d).with_context(|| format!("mkdir {}", d.display()))?;
    std::os::unix::fs::chown(&d, Some(user.uid), Some(user.gid))
        .with_context(|| format!("chown {}", d.display()))?;
    let probe = d.join("probe");
    let owner = run_as(user, || {
        std::fs::write(&probe, b"")
            .with_context(|| format!("{} cannot create {}", user.name, probe.display()))?;
        let m = std::fs::metadata(&probe)?;
        std::fs::remove_file(&probe)?;
        Ok((m.uid(), m.gid()))
    })?;
    if owner != (user.uid, user.gid) {
        bail!(
            "a file {} made is owned by {}:{}, not {}:{}",
            user.name,
            owner.0,
            owner.1,
            user.uid,
            user.gid
        );
    }
    Ok(d)
}

/// Checks that the MDT's checks are what they are said to be: the unprivileged `nobody`,
/// through the client library (no kernel in the way), may create a file in the top
/// directory (root's, mode 0755) exactly when the checks are off.
fn verify_setting(fs: &BenchFs, on: bool) -> Result<()> {
    let c = &fs.client;
    let nobody = Cred::user(NOBODY, NOBODY, Vec::new(), 0);
    let name = b"checks-probe";
    let r = fs.rt.block_on(async {
        let top = c.lookup(c.root(), TOP.as_bytes(), &Cred::root()).await?;
        let made = c
            .create(
                top.attr.fid,
                name,
                libc::S_IFREG | 0o644,
                0,
                &nobody,
                None,
                LayoutRequest::Inherit,
                None,
                true,
            )
            .await;
        if made.is_ok() {
            c.unlink(top.attr.fid, name, &Cred::root()).await?;
        }
        Ok::<_, Errno>(made.map(drop))
    });
    match (on, r) {
        (true, Ok(Err(Errno::EACCES))) | (false, Ok(Ok(()))) => Ok(()),
        (on, r) => bail!(
            "with the checks {}, nobody creating in a 0755 root directory got {r:?}",
            if on { "on" } else { "off" }
        ),
    }
}

pub fn run(a: ChecksBenchArgs) -> Result<()> {
    let c = &a.cost;
    c.check()?;
    let users = a
        .users
        .iter()
        .map(|u| parse_user(u))
        .collect::<Result<Vec<_>>>()?;
    let fs = BenchFs::up_with("checks", "ckperm", 4, c.workdir.as_deref(), Duration::ZERO)?;
    let top = fs.mnt.join(TOP);
    let world = World::single();
    let env = RunEnv::quiet(Arc::new(nacre_bench::PosixFs::new()), &world);
    let mut cells = Vec::new();
    let res = (|| -> Result<()> {
        std::fs::create_dir(&top).with_context(|| format!("mkdir {}", top.display()))?;
        bench_cost::warm_up(&env, &top.join("warmup"), c)?;
        for rep in 0..c.reps {
            for on in bench_cost::order(rep) {
                nacre_mdt::perm::set_enforced(on);
                verify_setting(&fs, on)?;
                for user in &users {
                    let name = format!("r{rep}-{}-{}", user.name.replace(':', "."), on);
                    let dir = user_dir(&top, &name, user)?;
                    let rates = run_as(user, || {
                        bench_cost::mdtest_rates(&env, &dir, c.files, c.tasks)
                    })?;
                    for (op, rate) in rates {
                        eprintln!(
                            "run {rep}: {} {op} checks {}: {rate:.0} ops/s",
                            user.name,
                            if on { "on" } else { "off" }
                        );
                        cells.push(Cell {
                            case: user.name.clone(),
                            on,
                            op: op.into(),
                            rep,
                            rate,
                        });
                    }
                    std::fs::remove_dir_all(&dir)
                        .with_context(|| format!("rm -r {}", dir.display()))?;
                }
            }
        }
        Ok(())
    })();
    nacre_mdt::perm::set_enforced(true);
    drop(env);
    fs.down();
    res?;
    println!(
        "mdtest -F -u -n {} ({} tasks, {} files a run) through the mount, no attribute cache, \
         the median of {} run(s) each: the MDT's permission checks on against off",
        c.per_task(),
        c.tasks,
        c.files,
        c.reps
    );
    let cases: Vec<String> = users.iter().map(|u| u.name.clone()).collect();
    let ops: Vec<&str> = MDTEST_PHASES.iter().map(|(_, op)| *op).collect();
    bench_cost::print_table(&cells, &cases, &ops, "ops/s", Some(GOAL));
    c.write_json(&cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users() {
        let u = parse_user("nobody").expect("nobody");
        assert_eq!((u.uid, u.gid), (NOBODY, NOBODY));
        let u = parse_user("1000:100").expect("ids");
        assert_eq!((u.uid, u.gid, u.name.as_str()), (1000, 100, "1000:100"));
        assert!(parse_user("alice").is_err());
        assert!(parse_user("1:x").is_err());
    }
}
