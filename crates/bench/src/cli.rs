//! The command-line surface the `nacre` binary mounts: `nacre bench ior|mdtest|mix|io500|compare`,
//! `nacre paf`, `nacre frag` and `nacre series`. Options follow the tools they stand in for
//! (IOR's and mdtest's short options as IOR and mdtest spell them). Every command takes
//! `--json`, `--native SPEC` and the rendezvous options for multi-rank runs.

use std::io::{self, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::ArgAction;
use serde::Serialize;

use crate::backend::{FileSystem, NativeConnector, PosixFs};
use crate::cancel::{self, Cancel};
use crate::compare::{self, CompareOptions, Target};
use crate::env::RunEnv;
use crate::error::BenchError;
use crate::frag::{self, FragOptions, dumpe2fs};
use crate::io500::{self, Io500Options};
use crate::ior::{self, IorConfig};
use crate::mdtest::{self, MdtestConfig};
use crate::mix::{self, MixOptions};
use crate::paf::{self, PafOptions, plan::TreeShape, spec::PafSpec};
use crate::progress::Progress;
use crate::rank::{RendezvousOpts, World};
use crate::series::{self, SeriesOptions};
use crate::units::{self, size_arg};

const RANKS_HELP: &str = "\
Many clients: run the same command under mpirun or srun. Each process takes its rank and the
world size from the launcher (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/PMI_SIZE, SLURM_PROCID/
SLURM_NTASKS, or NACRE_RANK/NACRE_SIZE), the ranks meet at barriers through files in
DIR/.nacre-rdv/<job> (job from NACRE_JOB_ID or SLURM_JOB_ID) or over TCP with
--rendezvous HOST:PORT (rank 0 listens there), and rank 0 gathers and prints the results.";

/// Options every command takes.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CommonArgs {
    /// Print one JSON document instead of text (and no progress bars).
    #[arg(long)]
    pub json: bool,
    /// Run through nacre's native client library, connected with SPEC (e.g. HOST:/fsname);
    /// paths are then paths inside that file system.
    #[arg(long, value_name = "SPEC")]
    pub native: Option<String>,
    /// Meet the other ranks over TCP at HOST:PORT, where rank 0 listens (default: files in a
    /// shared directory; also NACRE_RENDEZVOUS).
    #[arg(long, value_name = "HOST:PORT")]
    pub rendezvous: Option<String>,
    /// Shared directory for the file rendezvous (default: DIR/.nacre-rdv).
    #[arg(long, value_name = "DIR")]
    pub rendezvous_dir: Option<PathBuf>,
    /// Seconds a rank waits for the others at one barrier.
    #[arg(long, value_name = "SECS", default_value_t = 86_400)]
    pub rendezvous_timeout: u64,
    /// No progress bars.
    #[arg(long)]
    pub quiet: bool,
}

/// `nacre bench …`
#[derive(clap::Subcommand, Debug, Clone)]
pub enum BenchCommand {
    /// Bulk bandwidth, IOR-style (IOR's options, its Results and Summary tables).
    Ior(IorArgs),
    /// Metadata rates, mdtest-style (mdtest's options and SUMMARY rate table).
    Mdtest(MdtestArgs),
    /// A realistic mix of concurrent fio-like jobs (the seed's six by default).
    Mix(MixArgs),
    /// The IO500 phases, scaled, with IO500's scoring.
    Io500(Io500Args),
    /// Directories side by side: streaming write, cold read, create/stat/remove rates.
    Compare(CompareArgs),
}

const IOR_EXAMPLES: &str = "\
Examples:
  # the seed's measurement: file per task, 64 MiB transfers, O_DIRECT, write then read
  nacre bench ior -v -F -t 64m -b 10g -B -w -r -i 5 -o /mnt/nacre/ior
  # a quick look on any directory, 4 tasks, 3 repetitions, JSON
  nacre bench ior -F -t 1m -b 16m -s 1 -w -r -i 3 -N 4 -o /tmp/x/ior --json
  # shared file, random offsets, read another task's data (-C), keep the file
  nacre bench ior -t 47008 -b 47008 -s 1000 -z -C -k -o /mnt/nacre/hard
  # many clients: 16 nodes x 16 tasks
  mpirun -np 256 nacre bench ior -F -t 8m -b 1g -B -o /mnt/nacre/ior

Notes: -B is IOR 2.x/3.2's O_DIRECT; IOR 3.3+ spells it --posix.odirect (both work here, as
does -O useO_DIRECT=1). Tasks are threads: -N tasks are spread evenly over the ranks.";

/// Bulk bandwidth, IOR-style, with IOR's options as IOR spells them.
#[derive(clap::Args, Debug, Clone)]
#[command(after_long_help = format!("{IOR_EXAMPLES}\n\n{RANKS_HELP}"))]
pub struct IorArgs {
    /// File per process (default: one shared file).
    #[arg(short = 'F')]
    pub file_per_proc: bool,
    /// Transfer size per I/O call (e.g. 1m, 64m, 47008).
    #[arg(short = 't', value_name = "SIZE", value_parser = size_arg, default_value = "256k")]
    pub xfer: u64,
    /// Contiguous bytes per task per segment.
    #[arg(short = 'b', value_name = "SIZE", value_parser = size_arg, default_value = "1m")]
    pub block: u64,
    /// Segments (file size = segments x block x tasks).
    #[arg(short = 's', value_name = "N", default_value_t = 1)]
    pub segments: u64,
    /// Write (with neither -w nor -r, both).
    #[arg(short = 'w')]
    pub write: bool,
    /// Read.
    #[arg(short = 'r')]
    pub read: bool,
    /// Repetitions.
    #[arg(short = 'i', value_name = "N", default_value_t = 1)]
    pub reps: u32,
    /// Test file (with -F, a .NNNNNNNN task suffix is added).
    #[arg(short = 'o', value_name = "PATH", default_value = "testFile")]
    pub test_file: PathBuf,
    /// fsync after the write phase.
    #[arg(short = 'e')]
    pub fsync: bool,
    /// fsync after every write.
    #[arg(short = 'Y')]
    pub fsync_per_write: bool,
    /// Constant task reordering for the read-back (read another node's data).
    #[arg(short = 'C')]
    pub reorder: bool,
    /// Task offset for -C and -Z.
    #[arg(short = 'Q', value_name = "N", default_value_t = 1)]
    pub task_per_node_offset: u32,
    /// Random task reordering for the read-back; twice to shuffle all tasks.
    #[arg(short = 'Z', action = ArgAction::Count)]
    pub reorder_random: u8,
    /// Seed for -Z (negative: -seed + repetition).
    #[arg(
        short = 'X',
        value_name = "SEED",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub reorder_seed: i32,
    /// Random offsets within the file; twice for possibly overlapping offsets.
    #[arg(short = 'z', action = ArgAction::Count)]
    pub random_offset: u8,
    /// Keep the files.
    #[arg(short = 'k')]
    pub keep: bool,
    /// Use existing files (do not remove them before writing).
    #[arg(short = 'E')]
    pub use_existing: bool,
    /// A new file per repetition.
    #[arg(short = 'm')]
    pub multi_file: bool,
    /// O_DIRECT (IOR 2.x / 3.2).
    #[arg(short = 'B')]
    pub direct: bool,
    /// O_DIRECT (IOR 3.3+ spelling).
    #[arg(long = "posix.odirect")]
    pub posix_odirect: bool,
    /// Total tasks (default: one per rank).
    #[arg(short = 'N', long = "tasks", value_name = "N")]
    pub tasks: Option<usize>,
    /// Verbose; repeat for more.
    #[arg(short = 'v', action = ArgAction::Count)]
    pub verbose: u8,
    /// API (POSIX only).
    #[arg(short = 'a', value_name = "API", default_value = "POSIX")]
    pub api: String,
    /// IOR directives: useO_DIRECT=1, summaryFormat=JSON.
    #[arg(short = 'O', value_name = "KEY=VALUE")]
    pub directives: Vec<String>,
    /// Intra-test barriers (every phase here already starts at a barrier).
    #[arg(short = 'g')]
    pub barriers: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

const MDTEST_EXAMPLES: &str = "\
Examples:
  # 1000 files and directories per task, 3 iterations, a directory per task
  nacre bench mdtest -n 1000 -i 3 -u -d /mnt/nacre/md
  # files only, a tree 2 deep with 3 branches and 10 items per directory
  nacre bench mdtest -F -z 2 -b 3 -I 10 -d /tmp/md --json
  # IO500's mdtest-hard: 3901-byte files in one shared directory, 16 ranks
  mpirun -np 16 nacre bench mdtest -n 1000 -F -w 3901 -e 3901 -d /mnt/nacre/hard";

/// Metadata rates, mdtest-style, with mdtest's options as mdtest spells them.
#[derive(clap::Args, Debug, Clone)]
#[command(after_long_help = format!("{MDTEST_EXAMPLES}\n\n{RANKS_HELP}"))]
pub struct MdtestArgs {
    /// Items (files and/or directories) per task.
    #[arg(short = 'n', value_name = "N")]
    pub items: Option<u64>,
    /// Items per directory of the tree.
    #[arg(short = 'I', value_name = "N")]
    pub items_per_dir: Option<u64>,
    /// Iterations.
    #[arg(short = 'i', value_name = "N", default_value_t = 1)]
    pub iterations: u32,
    /// The directory to test in (must exist).
    #[arg(short = 'd', value_name = "DIR", required = true)]
    pub dir: PathBuf,
    /// Tree depth.
    #[arg(short = 'z', value_name = "N", default_value_t = 0)]
    pub depth: u32,
    /// Branching factor of the tree.
    #[arg(short = 'b', value_name = "N", default_value_t = 1)]
    pub branch: u32,
    /// A working directory per task.
    #[arg(short = 'u')]
    pub unique_dir: bool,
    /// Files only.
    #[arg(short = 'F')]
    pub files_only: bool,
    /// Directories only.
    #[arg(short = 'D')]
    pub dirs_only: bool,
    /// Create only.
    #[arg(short = 'C')]
    pub create_only: bool,
    /// Stat only.
    #[arg(short = 'T')]
    pub stat_only: bool,
    /// Read only.
    #[arg(short = 'E')]
    pub read_only: bool,
    /// Remove only.
    #[arg(short = 'r')]
    pub remove_only: bool,
    /// Directory rename phase.
    #[arg(short = 'U')]
    pub rename_dirs: bool,
    /// Bytes to write to each file.
    #[arg(short = 'w', value_name = "BYTES", value_parser = size_arg, default_value = "0")]
    pub write_bytes: u64,
    /// Bytes to read from each file.
    #[arg(short = 'e', value_name = "BYTES", value_parser = size_arg, default_value = "0")]
    pub read_bytes: u64,
    /// fsync each file after writing.
    #[arg(short = 'y')]
    pub sync_file: bool,
    /// Stat/read/remove the items of the task N away (1 defeats a client cache).
    #[arg(short = 'N', value_name = "N", default_value_t = 0)]
    pub stride: usize,
    /// Print the time table too.
    #[arg(short = 'P')]
    pub print_rate_and_time: bool,
    /// Verbose: per-iteration rates.
    #[arg(short = 'v', action = ArgAction::Count)]
    pub verbose: u8,
    /// Total tasks (default: one per rank); tasks are threads.
    #[arg(long = "tasks", value_name = "N")]
    pub tasks: Option<usize>,
    #[command(flatten)]
    pub common: CommonArgs,
}

const MIX_EXAMPLES: &str = "\
Examples:
  # the seed's six jobs at 1% of their size (the full mix writes and reads about 86 GB)
  nacre bench mix /mnt/nacre/mix --scale 0.01
  # your own mix, in fio's job-file syntax (rw, bs, filesize, nrfiles, size, numjobs,
  # random_distribution=zipf:1.2, direct)
  nacre bench mix /tmp/x --job-file mymix.fio --json
The six jobs: 1M random writes on 10,000 2MB files; 32K zipf(1.2) reads on 100,000 64KB files;
16K writes on 100,000 64KB files; 8K writes on 100,000 32KB files; 1M reads on 10,000 3MB
files; 256K writes on 10,000 2MB files. All run at once; each reports its own bandwidth.";

/// A realistic mix of concurrent fio-like jobs (the seed's six by default).
#[derive(clap::Args, Debug, Clone)]
#[command(after_long_help = format!("{MIX_EXAMPLES}\n\n{RANKS_HELP}"))]
pub struct MixArgs {
    /// Directory to run in.
    pub dir: PathBuf,
    /// A job file (fio syntax subset) instead of the seed's mix.
    #[arg(long, value_name = "FILE")]
    pub job_file: Option<PathBuf>,
    /// Multiply every job's file count (1 = the seed's full size).
    #[arg(long, value_name = "FACTOR", default_value_t = 0.01)]
    pub scale: f64,
    /// O_DIRECT for every job.
    #[arg(long)]
    pub direct: bool,
    /// Keep the files.
    #[arg(long)]
    pub keep: bool,
    /// Seed for the random orders.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Remove what an interrupted mix left in DIR (DIR/mix) and exit.
    #[arg(long)]
    pub scrub: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

const IO500_EXAMPLES: &str = "\
Examples:
  # a small IO500 on a laptop
  nacre bench io500 /tmp/io500 --tasks 2 --easy-size 64m --hard-records 200 --easy-files 500 --hard-files 500
  # 8 nodes x 16 tasks
  srun -N 8 -n 128 nacre bench io500 /mnt/nacre/io500 --easy-size 4g --hard-records 10000";

/// The IO500 phases, scaled, with IO500's scoring.
#[derive(clap::Args, Debug, Clone)]
#[command(after_long_help = format!("{IO500_EXAMPLES}\n\n{RANKS_HELP}"))]
pub struct Io500Args {
    /// Directory to run in.
    pub dir: PathBuf,
    /// Total tasks (default: one per rank).
    #[arg(long, value_name = "N")]
    pub tasks: Option<usize>,
    /// ior-easy bytes per task.
    #[arg(long, value_name = "SIZE", value_parser = size_arg, default_value = "256m")]
    pub easy_size: u64,
    /// ior-easy transfer size.
    #[arg(long, value_name = "SIZE", value_parser = size_arg, default_value = "2m")]
    pub easy_xfer: u64,
    /// ior-hard 47,008-byte records per task.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub hard_records: u64,
    /// mdtest-easy files per task.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub easy_files: u64,
    /// mdtest-hard files per task.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub hard_files: u64,
    /// O_DIRECT for ior-easy.
    #[arg(long)]
    pub direct: bool,
    /// Keep the files.
    #[arg(long)]
    pub keep: bool,
    /// Remove what an interrupted run left in DIR (DIR/io500) and exit.
    #[arg(long)]
    pub scrub: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

const COMPARE_EXAMPLES: &str = "\
Examples:
  # local disk against a nacre FUSE mount, watching the daemon's memory
  nacre bench compare /tmp/local /mnt/nacre --watch-pid $(pidof nacre)
  # 4 tasks, 1 GiB each, 5000 files each
  nacre bench compare /tmp/local /mnt/nacre --tasks 4 --size 1g --files 5000 --json
  # through the native client: prefix the directory with native:
  nacre bench compare /tmp/local native:/bench --native HOST:/fsname
Cold reads: each file is fsync'd, then `sync; echo 3 > /proc/sys/vm/drop_caches` (needs root);
when that is not permitted the report says the read may be warm.";

/// Directories side by side: streaming write, cold read, create/stat/remove rates.
#[derive(clap::Args, Debug, Clone)]
#[command(after_long_help = format!("{COMPARE_EXAMPLES}\n\n{RANKS_HELP}"))]
pub struct CompareArgs {
    /// Directories; ratios are to the first. Prefix with native: to use --native.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<String>,
    /// Bytes each task writes and reads.
    #[arg(long, value_name = "SIZE", value_parser = size_arg, default_value = "256m")]
    pub size: u64,
    /// Tasks (threads) per rank.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub tasks: usize,
    /// Files each task creates, stats and removes.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub files: u64,
    /// Transfer size.
    #[arg(long, value_name = "SIZE", value_parser = size_arg, default_value = "1m")]
    pub xfer: u64,
    /// Sample this process's VmRSS/VmHWM during the run and report its peak.
    #[arg(long, value_name = "PID")]
    pub watch_pid: Option<u32>,
    /// Do not try to drop the page cache before reading.
    #[arg(long)]
    pub no_drop_caches: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

const PAF_EXAMPLES: &str = "\
Examples:
  # fill to 70% of the free space with 264 MiB files, then remove 30% of them at random
  nacre paf PAF:70.30@264M /mnt/nacre
  # two generations, repeatable (seed 67005), 264 MiB then 40 MiB files, capacity given
  nacre paf PAF:70.30,20.40:67005@264M,40M<24253639848 /mnt/nacre --threads 16
  # see the plan without writing
  nacre paf PAF:70.30@264M /mnt/nacre --dry-run
  # continue after Ctrl-C or a full disk, or remove everything PaF made
  nacre paf --resume /mnt/nacre
  nacre paf --scrub /mnt/nacre
  # 12 nodes x 16 threads, as the seed ran it
  srun -N 12 -n 12 nacre paf PAF:20.40@264M /mnt/nacre --threads 16

The spec: PAF:CAP.FRAG[,CAP.FRAG...][:SEED]@SIZE[,SIZE...][<N]. Each generation writes
CAP% of the capacity in SIZE files then removes FRAG% of them; sizes pair with generations
(the last repeats); <N is the capacity in free 1K-blocks (statfs when omitted); a SEED makes
the removals repeatable. Files are named by global thread number and sequence
(AAAA00000000001) in DIR/paf/<thread>/bNNNNN/dNNNNN, at most MAXD entries per directory and
MAXB files per branch. The journal in DIR/.nacre-paf makes runs resumable.";

/// Populate and Fragment: age a file system to a capacity and fragmentation level.
#[derive(clap::Args, Debug, Clone)]
#[command(after_long_help = format!("{PAF_EXAMPLES}\n\n{RANKS_HELP}"))]
pub struct PafArgs {
    /// SPEC DIR, or just DIR with --resume / --scrub.
    #[arg(value_name = "[SPEC] DIR", num_args = 1..=2, required = true)]
    pub args: Vec<String>,
    /// Writer threads per rank.
    #[arg(short = 'T', long, value_name = "N", default_value_t = 4)]
    pub threads: usize,
    /// Bytes per write call.
    #[arg(long, value_name = "SIZE", value_parser = size_arg, default_value = "1m")]
    pub xfer: u64,
    /// Most entries per directory.
    #[arg(long, value_name = "N", default_value_t = paf::plan::DEFAULT_MAXD)]
    pub maxd: u64,
    /// Most files per branch.
    #[arg(long, value_name = "N", default_value_t = paf::plan::DEFAULT_MAXB)]
    pub maxb: u64,
    /// Continue the run recorded in DIR's journal.
    #[arg(long)]
    pub resume: bool,
    /// Remove everything PaF made in DIR.
    #[arg(long, conflicts_with_all = ["resume", "dry_run"])]
    pub scrub: bool,
    /// Print the plan (files, bytes, removals per generation) and exit.
    #[arg(long)]
    pub dry_run: bool,
    /// Write with O_DIRECT.
    #[arg(long)]
    pub direct: bool,
    /// fsync every file.
    #[arg(long)]
    pub fsync: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

const FRAG_EXAMPLES: &str = "\
Examples:
  # extents per file of a tree (as filefrag), the worst 20, and the device's free space
  nacre frag /mnt/ost0/paf --top 20
  # a nacre file system: each file's OST objects mapped on their OSTs, with a per-OST table
  # (FIEMAP does not pass through FUSE, so a tree on a nacre mount is read natively)
  nacre frag --native /tmp/fs /paf
  # summarise a dumpe2fs of an OST (a 400 MB dump streams in bounded memory)
  dumpe2fs /dev/sdb 2>/dev/null | nacre frag dumpe2fs -
  nacre frag dumpe2fs ost0.dumpe2fs.txt --json";

/// Fragmentation reports of a tree (extents per file, free space) or of dumpe2fs output.
#[derive(clap::Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true, after_long_help = FRAG_EXAMPLES)]
pub struct FragArgs {
    #[command(subcommand)]
    pub command: Option<FragCommand>,
    /// The tree to report on.
    pub dir: Option<PathBuf>,
    /// How many of the most fragmented files to list.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Skip the free-space report of the backing device.
    #[arg(long)]
    pub no_free_space: bool,
    /// Device for the free-space report (default: from the mount table).
    #[arg(long, value_name = "DEV")]
    pub device: Option<PathBuf>,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `nacre frag` subcommands.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum FragCommand {
    /// Summarise dumpe2fs output: free blocks and inodes, block groups by free inodes, and
    /// the free-extent histogram.
    Dumpe2fs(Dumpe2fsArgs),
}

/// Summarise dumpe2fs output (a file, or - for standard input).
#[derive(clap::Args, Debug, Clone)]
pub struct Dumpe2fsArgs {
    /// dumpe2fs output, or - for standard input.
    pub file: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

const SERIES_EXAMPLES: &str = "\
Examples:
  # the seed's Series 1: 8 capacities x 8 fragmentation levels x 7 transfer sizes x 5 runs
  nacre series /mnt/nacre --capacities 10,20,30,40,50,60,70,80 --frags 0,10,20,30,40,50,60,70 \\
      --file-size 264m --xfers 1m,2m,4m,8m,16m,32m,64m --block 10g --iterations 5 -B
  # its Series 2: 20% capacity, 33 MiB fragments
  nacre series /mnt/nacre --capacities 20 --frags 10,20,30,40,50,60,70 --file-size 33m --xfers 8m,64m
  # a small one to try it out, continued after an interruption
  nacre series /tmp/x --capacity-kb 1048576 --capacities 10,20 --frags 0,50 --file-size 16m \\
      --xfers 1m,4m --block 64m --iterations 3 --resume
Results: DIR/series-results/series.csv (every run), series-summary.csv/.json (mean, stddev,
CV), and SVG+PNG plots: bandwidth vs capacity per transfer size, bandwidth vs fragmentation,
the coefficient of variation, and the largest transfer per fragmentation level.";

/// PaF then IOR over capacity and fragmentation levels, with CSV, JSON and plots.
#[derive(clap::Args, Debug, Clone)]
#[command(after_long_help = format!("{SERIES_EXAMPLES}\n\n{RANKS_HELP}"))]
pub struct SeriesArgs {
    /// Directory to age and measure.
    pub dir: PathBuf,
    /// Where results and plots go (default: DIR/series-results).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Capacity levels in percent.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "10,20,30,40,50,60,70,80"
    )]
    pub capacities: Vec<u32>,
    /// Fragmentation levels in percent.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "0,10,20,30,40,50,60,70"
    )]
    pub frags: Vec<u32>,
    /// PaF file size.
    #[arg(long, value_name = "SIZE", value_parser = size_arg, default_value = "264m")]
    pub file_size: u64,
    /// IOR transfer sizes.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = size_arg, default_value = "1m,2m,4m,8m,16m,32m,64m")]
    pub xfers: Vec<u64>,
    /// IOR block per task.
    #[arg(long, value_name = "SIZE", value_parser = size_arg, default_value = "1g")]
    pub block: u64,
    /// IOR iterations per transfer size.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub iterations: u32,
    /// IOR tasks in total (default: one per rank).
    #[arg(long, value_name = "N")]
    pub tasks: Option<usize>,
    /// PaF threads per rank.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub paf_threads: usize,
    /// Capacity in free 1K-blocks for every cell (default: statfs at the start).
    #[arg(long, value_name = "N")]
    pub capacity_kb: Option<u64>,
    /// PaF seed, for repeatable cells.
    #[arg(long)]
    pub seed: Option<u64>,
    /// O_DIRECT for IOR (the seed's -B).
    #[arg(short = 'B', long)]
    pub direct: bool,
    /// Most entries per directory in PaF's tree.
    #[arg(long, value_name = "N", default_value_t = paf::plan::DEFAULT_MAXD)]
    pub maxd: u64,
    /// Most files per branch in PaF's tree.
    #[arg(long, value_name = "N", default_value_t = paf::plan::DEFAULT_MAXB)]
    pub maxb: u64,
    /// Capacity level of the bandwidth-vs-fragmentation plot (default: the first level).
    #[arg(long, value_name = "PCT")]
    pub plot_capacity: Option<u32>,
    /// Continue the series recorded in the results directory.
    #[arg(long)]
    pub resume: bool,
    /// Remove what an interrupted series left in DIR (aged tree, IOR files; results stay)
    /// and exit.
    #[arg(long, conflicts_with = "resume")]
    pub scrub: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Resolves the backend: POSIX, or the native client when `--native` is given.
fn backend(
    spec: Option<&str>,
    native: Option<&dyn NativeConnector>,
) -> anyhow::Result<Arc<dyn FileSystem>> {
    match (spec, native) {
        (None, _) => Ok(Arc::new(PosixFs::new())),
        (Some(s), Some(n)) => n
            .connect(s)
            .with_context(|| format!("connecting the native client to {s}")),
        (Some(s), None) => Err(BenchError::NoNative(s.to_string()).into()),
    }
}

/// Everything a command needs: backend, world, env; finishes the world when done.
struct Invocation {
    fs: Arc<dyn FileSystem>,
    world: World,
    progress: Progress,
    cancel: Cancel,
    json: bool,
}

impl Invocation {
    fn open(
        common: &CommonArgs,
        base: &Path,
        native: Option<&dyn NativeConnector>,
    ) -> anyhow::Result<Invocation> {
        let fs = backend(common.native.as_deref(), native)?;
        Invocation::open_on(common, base, fs)
    }

    /// Joins the world through `fs`, where `base` (the command's DIR) lives.
    fn open_on(
        common: &CommonArgs,
        base: &Path,
        fs: Arc<dyn FileSystem>,
    ) -> anyhow::Result<Invocation> {
        cancel::install_stop_handler();
        let cancel = Cancel::new();
        let mut opts = RendezvousOpts {
            timeout: Duration::from_secs(common.rendezvous_timeout.max(1)),
            dir: common.rendezvous_dir.clone(),
            ..RendezvousOpts::default()
        };
        if let Some(t) = &common.rendezvous {
            opts.tcp = Some(t.clone());
        }
        let world = World::from_launcher(&opts, fs.clone(), base, cancel.clone())
            .context("joining the other ranks")?;
        Ok(Invocation {
            fs,
            progress: Progress::new(!common.json && !common.quiet && world.is_root()),
            world,
            cancel,
            json: common.json,
        })
    }

    fn env(&self) -> RunEnv<'_> {
        RunEnv {
            fs: self.fs.clone(),
            world: &self.world,
            progress: self.progress,
            cancel: self.cancel.clone(),
        }
    }

    /// Prints `report` on rank 0 (JSON or text), then leaves the world.
    fn finish<T: Serialize>(
        self,
        report: Option<&T>,
        text: impl FnOnce(&T, &mut dyn Write) -> io::Result<()>,
    ) -> anyhow::Result<()> {
        if let Some(r) = report
            && self.world.is_root()
        {
            emit(r, self.json, text)?;
        }
        self.world.finish().context("leaving the other ranks")
    }
}

fn emit<T: Serialize>(
    report: &T,
    json: bool,
    text: impl FnOnce(&T, &mut dyn Write) -> io::Result<()>,
) -> anyhow::Result<()> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if json {
        serde_json::to_writer_pretty(&mut out, report).context("writing JSON")?;
        writeln!(out)?;
    } else {
        text(report, &mut out)?;
    }
    out.flush()?;
    Ok(())
}

fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// Applies IOR's -O directives.
fn ior_directives(args: &IorArgs, cfg: &mut IorConfig, json: &mut bool) -> anyhow::Result<()> {
    for d in &args.directives {
        let (k, v) = d
            .split_once('=')
            .with_context(|| format!("-O {d}: expected KEY=VALUE"))?;
        match k.trim() {
            "useO_DIRECT" | "posix.odirect" => cfg.direct = v.trim() == "1",
            "summaryFormat" => match v.trim().to_ascii_lowercase().as_str() {
                "json" => *json = true,
                "default" => {}
                other => bail!("-O summaryFormat={other}: JSON or default"),
            },
            other => bail!("-O {other}: unsupported directive (useO_DIRECT, summaryFormat)"),
        }
    }
    Ok(())
}

fn ior_config(args: &IorArgs) -> IorConfig {
    let (write, read) = if !args.write && !args.read {
        (true, true)
    } else {
        (args.write, args.read)
    };
    IorConfig {
        test_file: args.test_file.clone(),
        file_per_proc: args.file_per_proc,
        xfer: args.xfer,
        block: args.block,
        segments: args.segments,
        write,
        read,
        reps: args.reps,
        fsync: args.fsync,
        fsync_per_write: args.fsync_per_write,
        reorder: args.reorder,
        task_per_node_offset: args.task_per_node_offset,
        reorder_random: args.reorder_random,
        reorder_seed: args.reorder_seed,
        random_offset: args.random_offset,
        keep: args.keep,
        use_existing: args.use_existing,
        multi_file: args.multi_file,
        direct: args.direct || args.posix_odirect,
        tasks: args.tasks,
        verbose: args.verbose,
        command_line: command_line(),
    }
}

fn mdtest_config(a: &MdtestArgs) -> MdtestConfig {
    MdtestConfig {
        dir: a.dir.clone(),
        items: a.items,
        items_per_dir: a.items_per_dir,
        iterations: a.iterations,
        depth: a.depth,
        branch: a.branch,
        unique_dir: a.unique_dir,
        files_only: a.files_only,
        dirs_only: a.dirs_only,
        create_only: a.create_only,
        stat_only: a.stat_only,
        read_only: a.read_only,
        remove_only: a.remove_only,
        rename_dirs: a.rename_dirs,
        write_bytes: a.write_bytes,
        read_bytes: a.read_bytes,
        sync_file: a.sync_file,
        stride: a.stride,
        tasks: a.tasks,
        print_rate_and_time: a.print_rate_and_time,
        verbose: a.verbose,
        command_line: command_line(),
    }
}

fn parent_dir(p: &Path) -> PathBuf {
    p.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

/// Runs `nacre bench …`.
pub fn run_bench(cmd: BenchCommand, native: Option<&dyn NativeConnector>) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Ior(args) => {
            if !args.api.eq_ignore_ascii_case("POSIX") {
                bail!("-a {}: only the POSIX API is available", args.api);
            }
            let mut cfg = ior_config(&args);
            let mut common = args.common.clone();
            ior_directives(&args, &mut cfg, &mut common.json)?;
            let s = Invocation::open(&common, &parent_dir(&cfg.test_file), native)?;
            let report = ior::run(&s.env(), &cfg).context("IOR")?;
            s.finish(report.as_ref(), ior::print_text)
        }
        BenchCommand::Mdtest(args) => {
            let cfg = mdtest_config(&args);
            let s = Invocation::open(&args.common, &cfg.dir, native)?;
            let report = mdtest::run(&s.env(), &cfg).context("mdtest")?;
            s.finish(report.as_ref(), mdtest::print_text)
        }
        BenchCommand::Mix(args) => {
            if args.scale.is_nan() || args.scale <= 0.0 {
                bail!("--scale must be greater than 0");
            }
            let jobs = match &args.job_file {
                Some(p) => {
                    let text = std::fs::read_to_string(p)
                        .with_context(|| format!("reading job file {}", p.display()))?;
                    mix::parse_job_file(&text, &p.display().to_string())?
                }
                None => mix::seed_mix(),
            };
            let mut jobs = mix::scale(&jobs, args.scale);
            if args.direct {
                for j in &mut jobs {
                    j.direct = true;
                }
            }
            let s = Invocation::open(&args.common, &args.dir, native)?;
            if args.scrub {
                let n = if s.world.is_root() {
                    mix::scrub(s.fs.as_ref(), &args.dir)?
                } else {
                    0
                };
                return s.finish(Some(&n), |n, out| writeln!(out, "removed {n} entries"));
            }
            let opts = MixOptions {
                keep: args.keep,
                seed: args.seed,
            };
            let report = mix::run(&s.env(), &args.dir, &jobs, &opts).context("job mix")?;
            s.finish(report.as_ref(), mix::print_text)
        }
        BenchCommand::Io500(args) => {
            let opts = Io500Options {
                tasks: args.tasks,
                easy_block: args.easy_size,
                easy_xfer: args.easy_xfer,
                hard_segments: args.hard_records,
                md_easy_files: args.easy_files,
                md_hard_files: args.hard_files,
                direct: args.direct,
                keep: args.keep,
            };
            if !opts.easy_block.is_multiple_of(opts.easy_xfer.max(1)) {
                bail!("--easy-size must be a multiple of --easy-xfer");
            }
            let s = Invocation::open(&args.common, &args.dir, native)?;
            if args.scrub {
                let n = if s.world.is_root() {
                    io500::scrub(s.fs.as_ref(), &args.dir)?
                } else {
                    0
                };
                return s.finish(Some(&n), |n, out| writeln!(out, "removed {n} entries"));
            }
            let report = io500::run(&s.env(), &args.dir, &opts).context("IO500")?;
            s.finish(report.as_ref(), io500::print_text)
        }
        BenchCommand::Compare(args) => run_compare(args, native),
    }
}

fn run_compare(args: CompareArgs, native: Option<&dyn NativeConnector>) -> anyhow::Result<()> {
    let posix: Arc<dyn FileSystem> = Arc::new(PosixFs::new());
    let mut native_fs: Option<Arc<dyn FileSystem>> = None;
    let mut targets = Vec::new();
    for d in &args.dirs {
        if let Some(rest) = d.strip_prefix("native:") {
            let fs = match &native_fs {
                Some(fs) => fs.clone(),
                None => {
                    let spec =
                        args.common.native.as_deref().with_context(|| {
                            format!("{d}: a native: directory needs --native SPEC")
                        })?;
                    let fs = backend(Some(spec), native)?;
                    native_fs = Some(fs.clone());
                    fs
                }
            };
            targets.push(Target {
                dir: PathBuf::from(rest),
                fs,
            });
        } else {
            targets.push(Target {
                dir: PathBuf::from(d),
                fs: posix.clone(),
            });
        }
    }
    if args.common.native.is_some() && native_fs.is_none() {
        bail!("--native was given but no directory uses it: prefix one with native:");
    }
    // The ranks meet in the first directory, through its backend.
    let first = &targets[0];
    let s = Invocation::open_on(&args.common, &first.dir, first.fs.clone())?;
    let opts = CompareOptions {
        size: args.size,
        tasks: args.tasks,
        files: args.files,
        xfer: args.xfer,
        drop_caches: !args.no_drop_caches,
    };
    let report = compare::run(&s.env(), &targets, &opts, args.watch_pid).context("compare")?;
    s.finish(report.as_ref(), compare::print_text)
}

/// Runs `nacre paf …`.
pub fn run_paf(args: PafArgs, native: Option<&dyn NativeConnector>) -> anyhow::Result<()> {
    let (spec_text, dir) = match args.args.as_slice() {
        [dir] => (None, PathBuf::from(dir)),
        [spec, dir] => (Some(spec.as_str()), PathBuf::from(dir)),
        _ => bail!("give SPEC DIR, or DIR with --resume or --scrub"),
    };
    if spec_text.is_none() && !args.resume && !args.scrub {
        bail!(
            "a PaF spec is needed (e.g. nacre paf PAF:70.30@264M {}), or --resume / --scrub",
            dir.display()
        );
    }
    let spec = spec_text.map(PafSpec::parse).transpose()?;
    let s = Invocation::open(&args.common, &dir, native)?;
    let env = s.env();
    if args.scrub {
        let r = paf::scrub(&env, &dir, args.threads).context("PaF scrub")?;
        return s.finish(Some(&r), |r, out| {
            writeln!(
                out,
                "scrubbed {}: {} entries removed in {:.2} s{}",
                r.dir.display(),
                r.entries_removed,
                r.secs,
                if r.foreign_entries_kept > 0 {
                    format!(
                        "; {} entries PaF did not make were left in place",
                        r.foreign_entries_kept
                    )
                } else {
                    String::new()
                }
            )
        });
    }
    let shape = TreeShape {
        maxd: args.maxd,
        maxb: args.maxb,
    };
    if args.dry_run {
        let spec = spec.context("--dry-run needs a spec")?;
        crate::backend::check_dir(s.fs.as_ref(), &dir)?;
        let plan = paf::plan_for(
            s.fs.as_ref(),
            &dir,
            &spec,
            (s.world.size() * args.threads) as u64,
            shape,
        )?;
        #[derive(Serialize)]
        struct DryGen {
            generation: usize,
            capacity_pct: u32,
            frag_pct: u32,
            file_size: u64,
            target_bytes: u64,
            files: u64,
            removals: u64,
        }
        let gens: Vec<DryGen> = plan
            .gens
            .iter()
            .enumerate()
            .map(|(g, gp)| DryGen {
                generation: g + 1,
                capacity_pct: gp.capacity_pct,
                frag_pct: gp.frag_pct,
                file_size: gp.file_size,
                target_bytes: gp.target_bytes,
                files: gp.files,
                removals: (0..plan.threads_total)
                    .map(|t| plan.removals_of(g, t))
                    .sum(),
            })
            .collect();
        #[derive(Serialize)]
        struct Dry {
            spec: String,
            kind: String,
            capacity_kb: u64,
            seed: u64,
            threads_total: u64,
            generations: Vec<DryGen>,
        }
        let d = Dry {
            spec: plan.spec.to_string(),
            kind: plan.spec.kind(),
            capacity_kb: plan.capacity_kb,
            seed: plan.seed,
            threads_total: plan.threads_total,
            generations: gens,
        };
        return s.finish(Some(&d), |d, out| {
            writeln!(out, "plan for {} ({})", d.spec, d.kind)?;
            writeln!(
                out,
                "  capacity {} 1K-blocks ({}), seed {}, {} threads",
                d.capacity_kb,
                units::human_bytes(d.capacity_kb as f64 * 1024.0),
                d.seed,
                d.threads_total
            )?;
            for g in &d.generations {
                writeln!(
                    out,
                    "  gen {}: {}% = {} in {} files of {}, then remove {} ({}%)",
                    g.generation,
                    g.capacity_pct,
                    units::human_bytes(g.target_bytes as f64),
                    g.files,
                    units::short_size(g.file_size),
                    g.removals,
                    g.frag_pct
                )?;
            }
            Ok(())
        });
    }
    let opts = PafOptions {
        threads: args.threads,
        xfer: args.xfer,
        shape,
        direct: args.direct,
        fsync: args.fsync,
        resume: args.resume,
    };
    let r = paf::run(&env, &dir, spec.as_ref(), &opts).context("PaF")?;
    s.finish(Some(&r), paf::print_summary)
}

/// Runs `nacre frag …`.
pub fn run_frag(args: FragArgs, native: Option<&dyn NativeConnector>) -> anyhow::Result<()> {
    if let Some(FragCommand::Dumpe2fs(d)) = &args.command {
        let name = d.file.display().to_string();
        let summary = if name == "-" {
            dumpe2fs::parse(io::stdin().lock(), "<stdin>")?
        } else {
            let f = std::fs::File::open(&d.file)
                .with_context(|| format!("opening dumpe2fs output {name}"))?;
            dumpe2fs::parse(BufReader::with_capacity(1 << 20, f), &name)?
        };
        return emit(&summary, d.json || args.common.json, dumpe2fs::print_text);
    }
    let dir = args.dir.clone().context(
        "give a directory (nacre frag DIR) or a dumpe2fs output (nacre frag dumpe2fs FILE)",
    )?;
    let s = Invocation::open(&args.common, &dir, native)?;
    let opts = FragOptions {
        top: args.top,
        free_space: !args.no_free_space,
        device: args.device.clone(),
    };
    // One rank walks the tree; the others wait for it.
    let r = if s.world.is_root() {
        Some(frag::tree_report(&s.env(), &dir, &opts))
    } else {
        None
    };
    let r = match r {
        Some(res) => Some(s.world.agree("frag", res)?),
        None => {
            s.world.agree("frag", Ok(()))?;
            None
        }
    };
    s.finish(r.as_ref(), frag::print_tree)
}

/// Runs `nacre series …`.
pub fn run_series(args: SeriesArgs, native: Option<&dyn NativeConnector>) -> anyhow::Result<()> {
    // Results and plots are local files; with --native, DIR is not a local path.
    let out = match (&args.out, &args.common.native) {
        (Some(o), _) => o.clone(),
        (None, None) => args.dir.join("series-results"),
        (None, Some(_)) => {
            bail!("with --native, give --out: a local directory for the results and plots")
        }
    };
    let opts = SeriesOptions {
        capacities: args.capacities.clone(),
        frags: args.frags.clone(),
        file_size: args.file_size,
        xfers: args.xfers.clone(),
        block: args.block,
        iterations: args.iterations,
        tasks: args.tasks,
        paf_threads: args.paf_threads,
        capacity_kb: args.capacity_kb,
        seed: args.seed,
        direct: args.direct,
        shape: TreeShape {
            maxd: args.maxd,
            maxb: args.maxb,
        },
        plot_capacity: args.plot_capacity,
    };
    let s = Invocation::open(&args.common, &args.dir, native)?;
    if args.scrub {
        let n = series::scrub(&s.env(), &args.dir, args.paf_threads).context("series scrub")?;
        return s.finish(Some(&n), |n, out| {
            writeln!(out, "removed {n} entries; results kept")
        });
    }
    let r = series::run(&s.env(), &args.dir, &out, &opts, args.resume).context("series")?;
    let is_root = s.world.is_root();
    s.finish(is_root.then_some(&r), series::print_text)
}

const DARSHAN_AGE_EXAMPLES: &str = "\
Examples:
  # what a real log would make, without writing (a log shipped with the darshan package)
  nacre darshan-age sample:sample-badost.darshan --plan
  # age a mount with it: files in random directories, every OST in 1 MiB stripes
  nacre darshan-age sample:sample-badost.darshan --target /mnt/nacre
  # a million files or more from a few logs, repeatable
  nacre darshan-age job1.darshan job2.darshan --files 1000000 --seed 7 --target /mnt/nacre
  # another layout, or the directory's own default
  nacre darshan-age job.darshan --target /mnt/nacre --stripe-count 2 --stripe-size 4M
  nacre darshan-age job.darshan --target /mnt/nacre --layout '-E 64K -L mdt -E -1 -c -1'
  nacre darshan-age job.darshan --target /tmp/x --layout none

How the tree is made (the LFSCK study's method): every POSIX file record of the logs is one
file, of its size at open plus the bytes the job wrote, cut to --max-size (8 MiB); the
files fill directories of random depth (--depth, 1-10) with a random number of files each
(--dir-files, 1-100), in DIR/darshan/p<r>/.../d<k>/f<i>; DIR/darshan gets the default
layout `lfs setstripe -c -1 -S 1M` before any file is made. --scale N repeats every record N
times, --files N cycles through them to N files. The same logs, options and --seed make the
same tree, byte for byte.

Logs are read with the darshan Python package (pip install darshan; scripts/install-deps.sh
installs it), run with python3 or NACRE_PYTHON. Darshan 3 logs do not record the size at
open: it is taken as the bytes read past anything the job wrote (POSIX_MAX_BYTE_READ).
sample:NAME names a log shipped with the package (sample-badost.darshan, dxt.darshan,
sample-dxt-simple.darshan, ior_hdf5_example.darshan, ...).";

/// Age a file system from real Darshan logs: files of the logs' sizes in random directories.
#[derive(clap::Args, Debug, Clone)]
#[command(after_long_help = format!("{DARSHAN_AGE_EXAMPLES}\n\n{RANKS_HELP}"))]
pub struct DarshanAgeArgs {
    /// Darshan logs, or sample:NAME for a log shipped with the darshan package.
    #[arg(value_name = "LOG", required = true)]
    pub logs: Vec<String>,
    /// The directory to age; the tree is made in DIR/darshan, which must not exist.
    #[arg(
        long,
        short = 'o',
        value_name = "DIR",
        required_unless_present = "plan"
    )]
    pub target: Option<PathBuf>,
    /// Repeat every file record N times.
    #[arg(long, value_name = "N", default_value_t = 1, conflicts_with = "files")]
    pub scale: u64,
    /// Make exactly N files, cycling through the records.
    #[arg(long, value_name = "N")]
    pub files: Option<u64>,
    /// Seed of the directories (random when omitted; the report prints it).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Depths of the directories below DIR/darshan, MIN-MAX.
    #[arg(long, value_name = "MIN-MAX", default_value = "1-10", value_parser = range_arg)]
    pub depth: (u32, u32),
    /// Files per directory, MIN-MAX.
    #[arg(long, value_name = "MIN-MAX", default_value = "1-100", value_parser = range_arg)]
    pub dir_files: (u32, u32),
    /// Larger files are made this size.
    #[arg(long, value_name = "SIZE", value_parser = size_arg, default_value = "8m")]
    pub max_size: u64,
    /// Stripe count of the tree's default layout (-1: every OST).
    #[arg(short = 'c', long, value_name = "N", default_value_t = -1, allow_negative_numbers = true)]
    pub stripe_count: i64,
    /// Stripe size of the tree's default layout.
    #[arg(short = 'S', long, value_name = "SIZE", default_value = "1M")]
    pub stripe_size: String,
    /// The whole default layout as `lfs setstripe` options, or `none` to keep the
    /// directory's own (any file system).
    #[arg(long, value_name = "OPTIONS", conflicts_with_all = ["stripe_count", "stripe_size"])]
    pub layout: Option<String>,
    /// Print the population (files, bytes, sizes, directories, depths) and exit.
    #[arg(long, alias = "dry-run")]
    pub plan: bool,
    /// Writer threads per rank.
    #[arg(short = 'T', long, value_name = "N", default_value_t = 4)]
    pub threads: usize,
    /// Bytes per write call.
    #[arg(long, value_name = "SIZE", value_parser = size_arg, default_value = "1m")]
    pub xfer: u64,
    /// fsync every file.
    #[arg(long)]
    pub fsync: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

impl DarshanAgeArgs {
    /// The `lfs setstripe` options the tree root gets, or None to leave its default.
    pub fn setstripe_options(&self) -> Option<Vec<String>> {
        match self.layout.as_deref().map(str::trim) {
            Some("none") => None,
            Some(l) => Some(l.split_whitespace().map(String::from).collect()),
            None => Some(vec![
                "-c".into(),
                self.stripe_count.to_string(),
                "-S".into(),
                self.stripe_size.clone(),
            ]),
        }
    }
}

fn range_arg(s: &str) -> Result<(u32, u32), String> {
    let parse = |p: &str| {
        p.trim()
            .parse::<u32>()
            .map_err(|e| format!("{s}: {e} (give MIN-MAX, e.g. 1-10)"))
    };
    match s.split_once('-') {
        Some((a, b)) => Ok((parse(a)?, parse(b)?)),
        None => parse(s).map(|n| (n, n)),
    }
}

/// Sets a directory's default layout from `lfs setstripe` options: the binary that knows
/// the file system supplies it. Gets the `--native` spec when there is one.
pub type SetDefaultLayout<'a> =
    &'a (dyn Fn(Option<&str>, &Path, &[String]) -> anyhow::Result<()> + Sync);

/// Runs `nacre darshan-age …`.
pub fn run_darshan_age(
    args: DarshanAgeArgs,
    native: Option<&dyn NativeConnector>,
    set_layout: SetDefaultLayout<'_>,
) -> anyhow::Result<()> {
    use crate::darshan::{self, log, population};
    let paths = args
        .logs
        .iter()
        .map(|l| log::resolve(l))
        .collect::<Result<Vec<_>, _>>()?;
    let read = log::read(&paths).context("reading the Darshan logs")?;
    let shape = population::TreeShape {
        depth: args.depth,
        dir_files: args.dir_files,
        cap: args.max_size,
    };
    let seed = args.seed.unwrap_or_else(paf::random_seed);
    let pop = match args.files {
        Some(n) => population::Population::new(read.records, n, seed, shape)?,
        None => population::Population::scaled(read.records, args.scale, seed, shape)?,
    };
    let summary = pop.summary();
    if args.plan {
        #[derive(Serialize)]
        struct Plan<'a> {
            logs: &'a [log::LogInfo],
            population: &'a population::PopulationSummary,
        }
        let p = Plan {
            logs: &read.logs,
            population: &summary,
        };
        return emit(&p, args.common.json, |p, out| {
            darshan::print_population(p.logs, p.population, out)
        });
    }
    let dir = args
        .target
        .clone()
        .context("give the directory to age with --target DIR")?;
    let setstripe = args.setstripe_options();
    let s = Invocation::open(&args.common, &dir, native)?;
    let spec = args.common.native.clone();
    let prepare = |root: &Path| -> crate::error::Result<()> {
        match &setstripe {
            Some(o) => set_layout(spec.as_deref(), root, o).map_err(|e| {
                BenchError::Usage(format!("setting the layout of {}: {e:#}", root.display()))
            }),
            None => Ok(()),
        }
    };
    let opts = darshan::AgeOptions {
        threads: args.threads,
        xfer: args.xfer,
        fsync: args.fsync,
    };
    let r = darshan::run(&s.env(), &dir, &pop, &opts, &prepare).context("Darshan aging")?;
    let mib = r.made.bytes as f64 / units::MIB as f64;
    let out = darshan::AgeSummary {
        logs: read.logs,
        tree: r.tree,
        layout: setstripe.map(|o| o.join(" ")),
        population: summary,
        files_made: r.made.files,
        bytes_made: r.made.bytes,
        dirs_made: r.made.dirs,
        ranks: s.world.size(),
        threads_per_rank: args.threads,
        secs: r.secs,
        files_per_sec: if r.secs > 0.0 {
            r.made.files as f64 / r.secs
        } else {
            0.0
        },
        mib_per_sec: if r.secs > 0.0 { mib / r.secs } else { 0.0 },
    };
    s.finish(Some(&out), darshan::print_summary)
}
