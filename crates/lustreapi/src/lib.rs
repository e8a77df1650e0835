//! Lustre's user-space formats, as liblustreapi and lfs define them.
