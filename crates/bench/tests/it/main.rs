//! The integration tests of nacre-bench, one module per subject, in one test binary (one
//! binary per file would link the crate once each).

mod cli_errors;
mod cli_parse;
mod frag;
mod ior_mdtest;
mod paf;
mod seed_specs;
mod series_mix_io500;
