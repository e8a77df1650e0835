//! Errors of the `lfs`/`lctl` parsers and of layout validation, worded as Lustre's tools
//! word them so the `nacre` binary can print them unchanged.

use crate::setstripe::LayoutError;
use nacre_core::Errno;

/// Why a command line was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A command line the tool rejects and answers with its usage text (`CMD_HELP`).
    #[error("{cmd}: {msg}")]
    Usage { cmd: &'static str, msg: String },
    /// A well-formed request that is refused with an errno.
    #[error("{cmd}: {msg}")]
    Invalid {
        cmd: &'static str,
        msg: String,
        errno: Errno,
    },
    /// The layout the options describe is not valid.
    /// As `llapi_layout_sanity_perror` words it.
    #[error("Invalid layout: {0}")]
    Layout(#[from] LayoutError),
}

impl Error {
    pub(crate) fn usage(cmd: &'static str, msg: impl Into<String>) -> Error {
        Error::Usage {
            cmd,
            msg: msg.into(),
        }
    }

    pub(crate) fn invalid(cmd: &'static str, msg: impl Into<String>) -> Error {
        Error::Invalid {
            cmd,
            msg: msg.into(),
            errno: Errno::EINVAL,
        }
    }

    /// The errno the command exits with.
    pub fn errno(&self) -> Errno {
        match self {
            Error::Usage { .. } => Errno::EINVAL,
            Error::Layout(e) => e.errno(),
            Error::Invalid { errno, .. } => *errno,
        }
    }

    /// Whether the caller should print the command's usage after the message.
    pub fn is_usage(&self) -> bool {
        matches!(self, Error::Usage { .. })
    }
}

pub type Result<T> = std::result::Result<T, Error>;
