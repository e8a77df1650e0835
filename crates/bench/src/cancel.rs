//! Stopping a run cleanly. SIGINT (Ctrl-C) or SIGTERM (`kill`, a batch system's time limit)
//! sets a process-wide flag; long loops poll a [`Cancel`] token that sees both that flag and
//! its own, so workers stop at a point where the journal is consistent and `--resume` or
//! `--scrub` can take over, and a benchmark that brought up its own file system still takes
//! it down. A second signal exits at once.

use std::sync::Arc;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

static STOP_SEEN: AtomicBool = AtomicBool::new(false);
static INSTALL: Once = Once::new();

/// The signals that ask a run to stop.
const STOP_SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

extern "C" fn on_stop(_sig: libc::c_int) {
    if STOP_SEEN.swap(true, Ordering::SeqCst) {
        // A second signal: the user wants out now.
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(130) };
    }
}

/// Installs the SIGINT and SIGTERM handler once per process.
pub fn install_stop_handler() {
    INSTALL.call_once(|| {
        for sig in STOP_SIGNALS {
            // SAFETY: `sa` is fully initialised before use; the handler only touches an
            // atomic and calls _exit, both async-signal-safe.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_stop as *const () as usize;
                libc::sigemptyset(&mut sa.sa_mask);
                sa.sa_flags = libc::SA_RESTART;
                if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                    tracing::warn!("could not install the handler of signal {sig}");
                }
            }
        }
    });
}

/// A cancellation token shared by the workers of one run.
#[derive(Debug, Clone, Default)]
pub struct Cancel {
    own: Arc<AtomicBool>,
}

impl Cancel {
    pub fn new() -> Self {
        Cancel::default()
    }

    /// Asks every holder of this token to stop.
    pub fn cancel(&self) {
        self.own.store(true, Ordering::SeqCst);
    }

    /// True once this token was cancelled or SIGINT or SIGTERM arrived.
    pub fn is_cancelled(&self) -> bool {
        self.own.load(Ordering::Relaxed) || STOP_SEEN.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_cancels_its_clones() {
        let c = Cancel::new();
        let d = c.clone();
        assert!(!d.is_cancelled());
        c.cancel();
        assert!(d.is_cancelled());
        assert!(!Cancel::new().is_cancelled());
    }
}
