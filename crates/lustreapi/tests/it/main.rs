//! The integration tests of nacre-lustreapi, one module per subject, in one test binary (one
//! binary per file would link the crate once each).

mod df;
mod dirstripe;
mod find;
mod getstripe_format;
mod lctl;
mod lfsck;
mod lmv_hash;
mod no_panic;
mod setstripe;
