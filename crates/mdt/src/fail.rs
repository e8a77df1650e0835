//! Named fault-injection points, as Lustre's `fail_loc`: `NACRE_FAIL_POINT=NAME` in a
//! server's environment makes the process die abruptly (as `kill -9` would) the first time
//! it reaches the point called NAME, so tests can crash a target between any two steps of
//! a distributed operation. `NAME@MDTn` limits the point to MDT n (in a one-process file
//! system, where every MDT shares the environment).
//!
//! Nothing is flushed or closed on the way out: what survives is exactly what a crash at
//! that point would leave.

use std::sync::OnceLock;

/// The environment variable holding the armed point.
pub const ENV: &str = "NACRE_FAIL_POINT";
/// Exit status of a process that died at a fail point (128 + SIGKILL, like `kill -9`).
pub const EXIT_CODE: i32 = 137;

fn armed() -> Option<&'static (String, Option<u32>)> {
    static ARMED: OnceLock<Option<(String, Option<u32>)>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let v = std::env::var(ENV).ok()?;
            let v = v.trim();
            if v.is_empty() {
                return None;
            }
            Some(match v.split_once("@MDT") {
                Some((name, idx)) => (name.to_string(), idx.parse().ok()),
                None => (v.to_string(), None),
            })
        })
        .as_ref()
}

/// Dies here if the point `name` is armed for MDT `mdt`.
pub fn point(name: &str, mdt: u32) {
    if let Some((armed, on)) = armed()
        && armed == name
        && on.is_none_or(|i| i == mdt)
    {
        eprintln!("MDT{mdt:04x}: fail point {name} reached: exiting");
        // SAFETY: _exit ends the process at once; nothing else runs after it.
        unsafe { libc::_exit(EXIT_CODE) };
    }
}
