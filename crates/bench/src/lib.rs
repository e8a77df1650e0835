//! Aging and measurement tools that work on any POSIX directory and, through a backend
//! supplied by the caller, natively through nacre's client library.
