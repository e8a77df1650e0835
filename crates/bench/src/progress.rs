//! Progress bars on stderr. They are drawn only when stderr is a terminal, the run is not
//! printing JSON and this is rank 0, so logs and pipes stay clean.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Whether bars are drawn in this run.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    enabled: bool,
}

impl Progress {
    /// Bars on when `wanted` and stderr is a terminal.
    pub fn new(wanted: bool) -> Self {
        Progress {
            enabled: wanted && std::io::stderr().is_terminal(),
        }
    }

    /// No bars at all.
    pub fn hidden() -> Self {
        Progress { enabled: false }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    fn bar(&self, len: u64, template: &str, msg: &str) -> ProgressBar {
        if !self.enabled {
            return ProgressBar::hidden();
        }
        let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(template) {
            pb.set_style(style.progress_chars("=> "));
        }
        pb.set_message(msg.to_string());
        pb.enable_steady_tick(Duration::from_millis(200));
        pb
    }

    /// A bar counting bytes.
    pub fn bytes(&self, len: u64, msg: &str) -> ProgressBar {
        self.bar(
            len,
            "{msg:>18} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
            msg,
        )
    }

    /// A counter of unknown total (files walked).
    pub fn counter(&self, msg: &str) -> ProgressBar {
        if !self.enabled {
            return ProgressBar::hidden();
        }
        let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {pos} {per_sec}") {
            pb.set_style(style);
        }
        pb.set_message(msg.to_string());
        pb.enable_steady_tick(Duration::from_millis(200));
        pb
    }

    /// A bar counting items (files, operations, cells).
    pub fn items(&self, len: u64, msg: &str) -> ProgressBar {
        self.bar(
            len,
            "{msg:>18} [{bar:30}] {pos}/{len} {per_sec} eta {eta}",
            msg,
        )
    }
}
