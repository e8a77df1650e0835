//! POSIX error numbers as they travel between client and servers.
//!
//! Every failure a server reports to a client is an errno, because that is what the
//! application behind the FUSE mount will see. Context for humans goes to the server's log.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An errno value (`libc::ENOENT` ...).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Errno(pub i32);

pub type Result<T> = std::result::Result<T, Errno>;

macro_rules! errnos {
    ($($name:ident),* $(,)?) => {
        impl Errno {
            $(pub const $name: Errno = Errno(libc::$name);)*
        }
    };
}

errnos!(
    EPERM,
    ENOENT,
    EIO,
    ENXIO,
    E2BIG,
    EBADF,
    EAGAIN,
    ENOMEM,
    EACCES,
    EFAULT,
    EBUSY,
    EEXIST,
    EXDEV,
    ENODEV,
    ENOTDIR,
    EISDIR,
    EINVAL,
    ENFILE,
    EMFILE,
    ETXTBSY,
    EFBIG,
    ENOSPC,
    ESPIPE,
    EROFS,
    EMLINK,
    ERANGE,
    ENAMETOOLONG,
    ENOSYS,
    ENOTEMPTY,
    ELOOP,
    ENODATA,
    ENOTSUP,
    ESTALE,
    ETIMEDOUT,
    ECONNREFUSED,
    EPROTO,
    EOVERFLOW,
    EDQUOT,
    ENOTCONN,
    EINPROGRESS,
    ESHUTDOWN,
    EALREADY,
    ENOTSOCK,
    EBADMSG,
    EREMOTE,
    EREMCHG,
    EINTR,
    EDEADLK,
    ENOLCK,
    ENOMEDIUM
);

impl Errno {
    /// Stored data failed its checksum (ZFS's ECKSUM, which is EBADE on Linux): a reader
    /// with another copy reads that instead; without one the application gets EIO.
    pub const ECKSUM: Errno = Errno(libc::EBADE);

    pub fn code(self) -> i32 {
        self.0
    }

    /// The C library's description (`strerror`).
    pub fn describe(self) -> String {
        std::io::Error::from_raw_os_error(self.0)
            .to_string()
            .split(" (os error")
            .next()
            .unwrap_or_default()
            .to_string()
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.describe())
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Errno({}: {})", self.0, self.describe())
    }
}

impl std::error::Error for Errno {}

impl From<std::io::Error> for Errno {
    fn from(e: std::io::Error) -> Errno {
        match e.raw_os_error() {
            Some(code) => Errno(code),
            None => match e.kind() {
                std::io::ErrorKind::NotFound => Errno::ENOENT,
                std::io::ErrorKind::PermissionDenied => Errno::EACCES,
                std::io::ErrorKind::AlreadyExists => Errno::EEXIST,
                std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData => Errno::EINVAL,
                std::io::ErrorKind::TimedOut => Errno::ETIMEDOUT,
                std::io::ErrorKind::UnexpectedEof => Errno::EIO,
                _ => Errno::EIO,
            },
        }
    }
}

impl From<Errno> for std::io::Error {
    fn from(e: Errno) -> std::io::Error {
        std::io::Error::from_raw_os_error(e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_like_strerror() {
        assert_eq!(Errno::ENOENT.to_string(), "No such file or directory");
        assert_eq!(
            Errno::from(std::io::Error::from_raw_os_error(libc::ENOSPC)),
            Errno::ENOSPC
        );
    }
}
