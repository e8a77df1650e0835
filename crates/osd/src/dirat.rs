//! Stat and xattr reads of files named relative to an open directory. LFSCK probes
//! objects by the thousand; through a whole path each call walks every component
//! again, which costs more than the call itself. Relative to the object's subdirectory
//! only its name is looked up.
//!
//! `getxattrat`/`listxattrat` came with Linux 6.13; on an older kernel (ENOSYS) the
//! xattr calls fall back to the whole path, once found missing never tried again.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the kernel lacks the `*xattrat` calls (set on the first ENOSYS).
static NO_XATTRAT: AtomicBool = AtomicBool::new(false);

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const SYS_GETXATTRAT: libc::c_long = 464;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const SYS_LISTXATTRAT: libc::c_long = 465;

/// `struct xattr_args` of `getxattrat(2)`.
#[repr(C)]
struct XattrArgs {
    value: u64,
    size: u32,
    flags: u32,
}

/// A directory open for lookups of the names in it.
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

fn cstr(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn ret(r: libc::c_long) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// What an `*xattrat` call returned, or `None` when the kernel lacks it (never tried
/// again then).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn xattrat(r: libc::c_long) -> Option<io::Result<usize>> {
    match ret(r) {
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
            NO_XATTRAT.store(true, Ordering::Relaxed);
            None
        }
        r => Some(r),
    }
}

impl Dir {
    pub fn open(path: &Path) -> io::Result<Dir> {
        let c = cstr(path.as_os_str().as_bytes())?;
        // SAFETY: a valid C string; the descriptor returned is owned here.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Dir {
            // SAFETY: `fd` was just opened and nothing else owns it.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            path: path.to_path_buf(),
        })
    }

    /// The whole path of `name`, for the fallbacks and for error messages.
    pub fn path_of(&self, name: &CStr) -> PathBuf {
        self.path.join(std::ffi::OsStr::from_bytes(name.to_bytes()))
    }

    /// The size of regular file `name`.
    pub fn size(&self, name: &CStr) -> io::Result<u64> {
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: an open directory, a valid C string and room for a stat.
        let r = unsafe { libc::fstatat(self.fd.as_raw_fd(), name.as_ptr(), st.as_mut_ptr(), 0) };
        ret(r as libc::c_long)?;
        // SAFETY: fstatat succeeded, so it filled `st`.
        Ok(unsafe { st.assume_init() }.st_size as u64)
    }

    /// The NUL-separated names of `name`'s xattrs into `buf`: their length.
    pub fn list_xattrs(&self, name: &CStr, buf: &mut [u8]) -> io::Result<usize> {
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        if !NO_XATTRAT.load(Ordering::Relaxed) {
            // SAFETY: an open directory, a valid C string and a buffer of that length.
            let r = unsafe {
                libc::syscall(
                    SYS_LISTXATTRAT,
                    self.fd.as_raw_fd(),
                    name.as_ptr(),
                    0u32,
                    buf.as_mut_ptr(),
                    buf.len(),
                )
            };
            if let Some(r) = xattrat(r) {
                return r;
            }
        }
        let p = cstr(self.path_of(name).as_os_str().as_bytes())?;
        // SAFETY: a valid C string and a buffer of that length.
        ret(
            unsafe { libc::listxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) }
                as libc::c_long,
        )
    }

    /// Xattr `attr` of `name` into `buf`: its length.
    pub fn get_xattr(&self, name: &CStr, attr: &CStr, buf: &mut [u8]) -> io::Result<usize> {
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        if !NO_XATTRAT.load(Ordering::Relaxed) {
            let args = XattrArgs {
                value: buf.as_mut_ptr() as u64,
                size: buf.len() as u32,
                flags: 0,
            };
            // SAFETY: an open directory, valid C strings, and arguments that point at a
            // buffer of the length they give.
            let r = unsafe {
                libc::syscall(
                    SYS_GETXATTRAT,
                    self.fd.as_raw_fd(),
                    name.as_ptr(),
                    0u32,
                    attr.as_ptr(),
                    &args as *const XattrArgs,
                    std::mem::size_of::<XattrArgs>(),
                )
            };
            if let Some(r) = xattrat(r) {
                return r;
            }
        }
        let p = cstr(self.path_of(name).as_os_str().as_bytes())?;
        // SAFETY: valid C strings and a buffer of that length.
        ret(unsafe {
            libc::getxattr(
                p.as_ptr(),
                attr.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        } as libc::c_long)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_match_whole_path_reads() {
        let d = tempfile::tempdir().expect("tmp");
        let f = d.path().join("17");
        std::fs::write(&f, b"hello").expect("write");
        let c = cstr(f.as_os_str().as_bytes()).expect("c");
        let attr = c"user.probe";
        // SAFETY: valid C strings and a value of that length.
        let r = unsafe { libc::setxattr(c.as_ptr(), attr.as_ptr(), b"v1".as_ptr().cast(), 2, 0) };
        assert_eq!(r, 0, "{}", io::Error::last_os_error());
        let dir = Dir::open(d.path()).expect("open");
        let name = c"17";
        assert_eq!(dir.size(name).expect("size"), 5);
        let mut buf = [0u8; 64];
        let n = dir.list_xattrs(name, &mut buf).expect("list");
        assert!(buf[..n].split(|b| *b == 0).any(|x| x == b"user.probe"));
        let n = dir.get_xattr(name, attr, &mut buf).expect("get");
        assert_eq!(&buf[..n], b"v1");
        let e = dir
            .get_xattr(name, c"user.none", &mut buf)
            .expect_err("none");
        assert_eq!(e.raw_os_error(), Some(libc::ENODATA));
        let e = dir.size(c"18").expect_err("missing");
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        // The same through the fallback.
        NO_XATTRAT.store(true, Ordering::Relaxed);
        let n = dir.get_xattr(name, attr, &mut buf).expect("get");
        assert_eq!(&buf[..n], b"v1");
        NO_XATTRAT.store(false, Ordering::Relaxed);
    }
}
