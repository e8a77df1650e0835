//! Stopping a run cleanly. SIGINT (Ctrl-C) sets a process-wide flag; long loops poll a
//! [`Cancel`] token that sees both that flag and its own, so workers stop at a point where the
//! journal is consistent and `--resume` or `--scrub` can take over. A second Ctrl-C exits at
//! once.

use std::sync::Arc;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

static SIGINT_SEEN: AtomicBool = AtomicBool::new(false);
static INSTALL: Once = Once::new();

extern "C" fn on_sigint(_sig: libc::c_int) {
    if SIGINT_SEEN.swap(true, Ordering::SeqCst) {
        // Second Ctrl-C: the user wants out now.
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(130) };
    }
}

/// Installs the SIGINT handler once per process.
pub fn install_sigint_handler() {
    INSTALL.call_once(|| {
        // SAFETY: `sa` is fully initialised before use; the handler only touches an atomic and
        // calls _exit, both async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigint as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = libc::SA_RESTART;
            if libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut()) != 0 {
                tracing::warn!("could not install the SIGINT handler");
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

    /// True once this token was cancelled or SIGINT arrived.
    pub fn is_cancelled(&self) -> bool {
        self.own.load(Ordering::Relaxed) || SIGINT_SEEN.load(Ordering::Relaxed)
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
