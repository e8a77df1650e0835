//! The bench commands without the `nacre` binary, mounted as the binary mounts them:
//! `cargo run -p nacre-bench --example nacre-bench -- bench ior -F -t 1m -b 16m -o /tmp/x/ior`.

use clap::Parser;
use nacre_bench::cli::{self, BenchCommand, FragArgs, PafArgs, SeriesArgs};

/// nacre's aging and measurement commands.
#[derive(Parser)]
#[command(name = "nacre")]
enum Nacre {
    /// IOR, mdtest, job mixes, IO500 and side-by-side comparisons.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Populate and Fragment: age a file system.
    Paf(PafArgs),
    /// Fragmentation reports.
    Frag(FragArgs),
    /// PaF then IOR over capacity and fragmentation levels, with plots.
    Series(SeriesArgs),
}

fn main() -> anyhow::Result<()> {
    match Nacre::parse() {
        Nacre::Bench(b) => cli::run_bench(b, None),
        Nacre::Paf(p) => cli::run_paf(p, None),
        Nacre::Frag(f) => cli::run_frag(f, None),
        Nacre::Series(s) => cli::run_series(s, None),
    }
}
