//! The crate's error type. Library code returns [`BenchError`]; the command edges in
//! [`crate::cli`] wrap it in `anyhow` with context for the user.

use std::io;
use std::path::{Path, PathBuf};

use crate::paf::spec::SpecError;

/// Errors the aging and measurement tools report.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The file system is full. Whatever was written so far stays and is recorded.
    #[error(
        "no space left on device while {op} {path}: the file system is full; \
         what was written so far is kept{hint}"
    )]
    NoSpace {
        op: &'static str,
        path: PathBuf,
        /// How to continue or clean up, starting with "; " (may be empty).
        hint: String,
    },
    /// A directory named on the command line does not exist.
    #[error("directory {0} does not exist")]
    MissingDir(PathBuf),
    /// A path named as a directory is something else.
    #[error("{0} is not a directory")]
    NotADirectory(PathBuf),
    /// Any other I/O failure, with what was being done and where.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The run was stopped by SIGINT (Ctrl-C), SIGTERM or a cancel request.
    #[error("interrupted; {0}")]
    Interrupted(String),
    /// `--native` was given but the binary was built without a native client.
    #[error("--native {0}: this build has no native client")]
    NoNative(String),
    /// Rendezvous between ranks failed or timed out.
    #[error("rendezvous: {0}")]
    Rendezvous(String),
    /// A malformed PaF specification.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// Options that make no sense together or out of range.
    #[error("{0}")]
    Usage(String),
    /// A Darshan log could not be read (the helper, its Python package or the log).
    #[error("darshan log: {0}")]
    DarshanLog(String),
    /// A malformed input file (dumpe2fs output, job file, journal).
    #[error("{path}:{line}: {msg}")]
    Parse {
        path: String,
        line: u64,
        msg: String,
    },
}

impl BenchError {
    /// Wraps an I/O error with the operation and path, turning ENOSPC into
    /// [`BenchError::NoSpace`] so every command reports a full disk the same way.
    pub fn io(op: &'static str, path: &Path, source: io::Error) -> Self {
        if source.raw_os_error() == Some(libc::ENOSPC) {
            BenchError::NoSpace {
                op,
                path: path.to_path_buf(),
                hint: String::new(),
            }
        } else {
            BenchError::Io {
                op,
                path: path.to_path_buf(),
                source,
            }
        }
    }

    /// Adds a hint (what to run next) to a [`BenchError::NoSpace`]; other errors pass through.
    pub fn with_space_hint(self, hint: &str) -> Self {
        match self {
            BenchError::NoSpace { op, path, .. } => BenchError::NoSpace {
                op,
                path,
                hint: format!("; {hint}"),
            },
            other => other,
        }
    }

    /// True when the error is a full file system.
    pub fn is_no_space(&self) -> bool {
        matches!(self, BenchError::NoSpace { .. })
    }
}

/// Result alias for the library.
pub type Result<T> = std::result::Result<T, BenchError>;

/// Attaches operation and path context to `io::Result`s.
pub trait IoContext<T> {
    fn ctx(self, op: &'static str, path: &Path) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, op: &'static str, path: &Path) -> Result<T> {
        self.map_err(|e| BenchError::io(op, path, e))
    }
}
