//! `nacre`: servers, client mount, Lustre-style tools and benchmarks in one binary.

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use nacre::cmd;
use nacre_core::TargetKind;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "nacre",
    version,
    about = "A parallel file system with Lustre's architecture, in user space",
    long_about = "nacre runs a Lustre-style file system (MGS, MDTs, OSTs, clients) entirely in user space.\n\n\
Quick start on one machine:\n  nacre up /tmp/fs --mount /mnt/nacre --background   # format, start, mount\n  \
nacre lfs df -h /mnt/nacre                          # space per target\n  nacre down /tmp/fs                                  # unmount and stop\n\n\
A cluster: `nacre format` each target, `nacre serve` each one on its node, `nacre mount HOST:PORT:/fsname MNT --key KEY` on clients."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Format (if new) and run a whole file system on this machine, mounted at MNT
    #[command(
        long_about = "Formats DIR if it holds no file system (1 MDT and 4 OSTs by default), starts the MGS, MDTs and \
OSTs on 127.0.0.1 in this process and mounts the file system at MNT. It prints the spec other clients mount with \
(HOST:PORT:/fsname). With --background it returns once the mount is ready; `nacre down DIR` stops it.\n\n\
Example: nacre up /tmp/fs --mount /mnt/nacre --osts 2 --background"
    )]
    Up(UpCli),
    /// Unmount and stop a file system started with `nacre up`
    Down {
        /// The directory given to `nacre up`
        dir: PathBuf,
        /// Kill the process if it does not stop within a minute
        #[arg(long)]
        force: bool,
    },
    /// Show a file system's spec, its targets and their state
    Status {
        /// The directory given to `nacre up`
        dir: PathBuf,
    },
    /// Format one target directory (cluster use)
    #[command(
        long_about = "Formats one target for a multi-process or multi-node file system.\n\n\
Example cluster on three shells:\n  nacre format --mgs --fsname demo /srv/mgs          # makes /srv/mgs/key (servers) and client.key (clients)\n  \
nacre format --mdt --index 0 --fsname demo --mgsnode 10.0.0.1:9880 --key /srv/mgs/key /srv/mdt0\n  \
nacre format --ost --index 0 --fsname demo --mgsnode 10.0.0.1:9880 --key /srv/mgs/key /srv/ost0\n  \
nacre serve /srv/mgs --listen 10.0.0.1:9880 ; nacre serve /srv/ost0 ; nacre serve /srv/mdt0"
    )]
    Format(FormatCli),
    /// Serve one formatted target until interrupted (cluster use)
    Serve {
        /// A directory made by `nacre format`
        dir: PathBuf,
        /// Address to listen on (default: the MGS's own address for an MGS, any port otherwise)
        #[arg(long)]
        listen: Option<String>,
        /// The file system key (default: DIR/key)
        #[arg(long)]
        key: Option<PathBuf>,
        /// Memory budget of this server process
        #[arg(long, default_value = "1G", value_parser = cmd::parse_size_arg)]
        memory: u64,
    },
    /// Mount a file system: SPEC is HOST:PORT:/fsname (with --key) or an `up` directory
    Mount {
        spec: String,
        mountpoint: PathBuf,
        /// The client key (`client.key` of the MGS's directory; default for an `up`
        /// directory: its client key)
        #[arg(long)]
        key: Option<PathBuf>,
        /// Return once mounted and keep serving in the background
        #[arg(short, long)]
        background: bool,
        /// Seconds the kernel may cache names and attributes
        #[arg(long, default_value_t = 1.0)]
        attr_timeout: f64,
        #[arg(long = "daemon-child", hide = true)]
        child: bool,
    },
    /// Unmount a client mounted with `nacre mount`
    Umount { mountpoint: PathBuf },
    /// Benchmarks: ior, mdtest, mix, io500, compare, dom, dne, checksums, protection, lfsck (`nacre bench COMMAND --help`)
    Bench {
        #[command(subcommand)]
        cmd: BenchCmd,
    },
    /// Age a file system: PaF populate and fragment (`PAF:70.30@264M`)
    Paf(nacre_bench::cli::PafArgs),
    /// Age a file system from real Darshan logs: the logs' files in random directories,
    /// striped over every OST (`nacre darshan-age LOG --target DIR`)
    DarshanAge(nacre_bench::cli::DarshanAgeArgs),
    /// Fragmentation report of a tree, or of a dumpe2fs listing
    Frag(nacre_bench::cli::FragArgs),
    /// The PaF + IOR measurement series over capacity and fragmentation, with plots
    Series(nacre_bench::cli::SeriesArgs),
    /// Lustre's lctl: get_param, set_param [-P], list_param (`nacre lctl help`)
    #[command(disable_help_flag = true)]
    Lctl {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Lustre's lfs: df, getstripe, setstripe, mkdir, getdirstripe, find ... (`nacre lfs help`)
    #[command(disable_help_flag = true)]
    Lfs {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Fault injection on a live file system: LFSCK's inconsistency classes and the fault
    /// models a-DevFail, c-Network (`nacre inject --help`)
    #[command(long_about = cmd::inject::LONG_ABOUT, after_help = cmd::inject::EXAMPLES)]
    Inject(cmd::inject::InjectArgs),
    /// Check a stopped file system: the namespace across MDTs (dangling names, orphans,
    /// link counts, unfinished distributed operations) and the files' layouts against the
    /// OSTs' objects (dangling, unmatched, shared and orphan objects, LAST_ID)
    Check {
        /// The directory given to `nacre up` (namespace and layouts), or MDT target
        /// directories in index order
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// OST target directories in index order, to check the layouts of the files on
        /// the MDTs given against the OSTs' objects (repeat for each OST)
        #[arg(long = "ost", value_name = "DIR")]
        osts: Vec<PathBuf>,
    },
}

#[derive(Subcommand)]
enum BenchCmd {
    #[command(flatten)]
    Tools(nacre_bench::cli::BenchCommand),
    /// Metadata scaling over MDTs: mdtest create/stat/remove rates with 1, 2 and 4 MDTs in
    /// one shared striped directory and in unique per-task directories, 1k to 100k files,
    /// and the per-MDT distribution of the entries
    Dne(cmd::bench_dne::DneBenchArgs),
    /// What checksums cost: streaming IOR write and read with checksums on and off,
    /// through the mount and the native client, on a file system it brings up
    Checksums(cmd::bench_checksums::ChecksumBenchArgs),
    /// What each protection costs: streaming IOR and the six-job mix on plain and
    /// mirrored layouts, checksums on and off, and a mirrored read with an OST stopped
    Protection(cmd::bench_protection::ProtectionBenchArgs),
    /// LFSCK speed: objects checked per second on a file system aged from a Darshan log,
    /// for namespace, layout and both, coupled against decoupled, over 1, 2 and 4 OSTs,
    /// with what every target served meanwhile
    Lfsck(cmd::bench_lfsck::LfsckBenchArgs),
    /// What the MDT's permission checks cost: mdtest create, stat and remove through the
    /// mount, as root and as an unprivileged user, checks on and off
    Checks(cmd::bench_checks::ChecksBenchArgs),
    /// What recovery costs: mdtest and IOR with replay tracking on and off, and fsync per
    /// file against a local file system
    Recovery(cmd::bench_recovery::RecoveryBenchArgs),
    /// Small-file I/O with Data-on-MDT, one OST stripe and every OST, side by side
    #[command(
        long_about = "Runs the small-file cases of the Data-on-MDT talk: IOR with 8 KiB and 64 KiB \
transfers on 16-transfer files (and 512 KiB for files past the DoM size), file per task, random offsets, a new \
file per iteration, write then read with the page cache dropped, for a DoM layout, a 1-stripe layout and an \
all-OST layout, through the mount and (with --native) the native client. Prints rates and ratios.\n\n\
Example: nacre bench dom /mnt/nacre --native /tmp/fs --files 100"
    )]
    Dom {
        /// A nacre mount point
        mount: PathBuf,
        /// Also run natively: an `up` directory, or HOST:PORT:/fsname with NACRE_KEY set
        #[arg(long)]
        native: Option<String>,
        /// IOR tasks
        #[arg(long, default_value_t = 2)]
        tasks: u32,
        /// Files per task (IOR -i with -m)
        #[arg(long, default_value_t = 100)]
        files: u32,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
struct UpCli {
    /// Directory holding the file system (created and formatted if new)
    dir: PathBuf,
    /// Where to mount it
    #[arg(long)]
    mount: PathBuf,
    /// MDTs of a new file system [default: 1]
    #[arg(long)]
    mdts: Option<u32>,
    /// OSTs of a new file system [default: 4]
    #[arg(long)]
    osts: Option<u32>,
    /// Name of a new file system (at most 8 characters)
    #[arg(long, default_value = "nacre")]
    fsname: String,
    /// MGS port of a new file system [default: 9880, or a free port if taken]
    #[arg(long)]
    port: Option<u16>,
    /// Return once mounted; the file system keeps running in the background
    #[arg(short, long)]
    background: bool,
    /// Memory budget of the whole process
    #[arg(long, default_value = "1G", value_parser = cmd::parse_size_arg)]
    memory: u64,
    /// Seconds the kernel may cache names and attributes
    #[arg(long, default_value_t = 1.0)]
    attr_timeout: f64,
    #[arg(long = "daemon-child", hide = true)]
    child: bool,
}

#[derive(Args)]
#[group(required = true, multiple = false, id = "kind")]
struct KindArgs {
    /// Format a management service
    #[arg(long)]
    mgs: bool,
    /// Format a metadata target
    #[arg(long)]
    mdt: bool,
    /// Format an object storage target
    #[arg(long)]
    ost: bool,
}

#[derive(Args)]
struct FormatCli {
    #[command(flatten)]
    kind: KindArgs,
    /// Target index (MDT or OST)
    #[arg(long, default_value_t = 0)]
    index: u32,
    /// File system name (at most 8 characters)
    #[arg(long)]
    fsname: String,
    /// The MGS address HOST:PORT (for an MGS: the address it will serve on)
    #[arg(long)]
    mgsnode: Option<String>,
    /// The file system key (required for MDTs and OSTs; an MGS makes one if absent)
    #[arg(long)]
    key: Option<PathBuf>,
    /// The target directory
    dir: PathBuf,
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.clamp(0.0, 3600.0))
}

fn init_logging(server: bool) {
    nacre::log::init(if server { "info" } else { "warn" });
}

fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Command::Up(u) => {
            init_logging(u.child);
            cmd::up::run_up(cmd::up::UpArgs {
                dir: u.dir,
                mount: u.mount,
                mdts: u.mdts,
                osts: u.osts,
                fsname: u.fsname,
                port: u.port,
                background: u.background,
                memory: u.memory,
                attr_timeout: secs(u.attr_timeout),
                child: u.child,
            })
        }
        Command::Down { dir, force } => {
            init_logging(false);
            cmd::up::run_down(&dir, force)
        }
        Command::Status { dir } => {
            init_logging(false);
            cmd::up::run_status(&dir)
        }
        Command::Format(f) => {
            init_logging(false);
            let kind = if f.kind.mgs {
                TargetKind::Mgs
            } else if f.kind.mdt {
                TargetKind::Mdt
            } else {
                TargetKind::Ost
            };
            cmd::cluster::run_format(cmd::cluster::FormatArgs {
                dir: f.dir,
                kind,
                index: f.index,
                fsname: f.fsname,
                mgsnode: f.mgsnode,
                key: f.key,
            })
        }
        Command::Serve {
            dir,
            listen,
            key,
            memory,
        } => {
            init_logging(true);
            cmd::cluster::run_serve(cmd::cluster::ServeArgs {
                dir,
                listen,
                key,
                memory,
            })
        }
        Command::Mount {
            spec,
            mountpoint,
            key,
            background,
            attr_timeout,
            child,
        } => {
            init_logging(child);
            cmd::mount::run_mount(cmd::mount::MountArgs {
                spec,
                mountpoint,
                key,
                background,
                attr_timeout: secs(attr_timeout),
                child,
            })
        }
        Command::Umount { mountpoint } => {
            init_logging(false);
            cmd::mount::run_umount(&mountpoint)
        }
        Command::Bench {
            cmd: BenchCmd::Tools(cmd),
        } => {
            init_logging(false);
            nacre_bench::cli::run_bench(cmd, Some(&nacre::native::Connector))
        }
        Command::Bench {
            cmd:
                BenchCmd::Dom {
                    mount,
                    native,
                    tasks,
                    files,
                    json,
                },
        } => {
            init_logging(false);
            cmd::bench_dom::run(cmd::bench_dom::DomBenchArgs {
                mount,
                native,
                tasks,
                files,
                json,
            })
        }
        Command::Bench {
            cmd: BenchCmd::Dne(a),
        } => {
            init_logging(false);
            cmd::bench_dne::run(a)
        }
        Command::Bench {
            cmd: BenchCmd::Checksums(a),
        } => {
            init_logging(false);
            cmd::bench_checksums::run(a)
        }
        Command::Bench {
            cmd: BenchCmd::Protection(a),
        } => {
            init_logging(false);
            cmd::bench_protection::run(a)
        }
        Command::Bench {
            cmd: BenchCmd::Lfsck(a),
        } => {
            init_logging(false);
            cmd::bench_lfsck::run(a)
        }
        Command::Bench {
            cmd: BenchCmd::Checks(a),
        } => {
            init_logging(false);
            cmd::bench_checks::run(a)
        }
        Command::Bench {
            cmd: BenchCmd::Recovery(a),
        } => {
            init_logging(false);
            cmd::bench_recovery::run(a)
        }
        Command::Paf(a) => {
            init_logging(false);
            nacre_bench::cli::run_paf(a, Some(&nacre::native::Connector))
        }
        Command::DarshanAge(a) => {
            init_logging(false);
            nacre_bench::cli::run_darshan_age(
                a,
                Some(&nacre::native::Connector),
                &cmd::darshan_age::set_default_layout,
            )
        }
        Command::Frag(a) => {
            init_logging(false);
            nacre_bench::cli::run_frag(a, Some(&nacre::native::Connector))
        }
        Command::Series(a) => {
            init_logging(false);
            nacre_bench::cli::run_series(a, Some(&nacre::native::Connector))
        }
        Command::Lctl { args } => {
            init_logging(false);
            let rc = cmd::lctl::run(&args)?;
            if rc != 0 {
                std::process::exit(rc.clamp(1, 255));
            }
            Ok(())
        }
        Command::Lfs { args } => {
            init_logging(false);
            let rc = cmd::lfs::run(&args)?;
            if rc != 0 {
                std::process::exit(rc.clamp(1, 255));
            }
            Ok(())
        }
        Command::Inject(a) => {
            init_logging(false);
            let rc = cmd::inject::run(&a)?;
            if rc != 0 {
                std::process::exit(rc.clamp(1, 255));
            }
            Ok(())
        }
        Command::Check { dirs, osts } => {
            init_logging(false);
            let rep = if dirs.len() == 1 && dirs[0].join(nacre::local::LOCAL_FILE).exists() {
                nacre::check::check_local(&dirs[0])?
            } else {
                nacre::check::check_targets(&dirs, &osts)?
            };
            print!("{}", rep.summary());
            for (mdt, n) in &rep.entries_per_mdt {
                println!("MDT{mdt:04x}: {n} entries");
            }
            if !rep.is_clean() {
                std::process::exit(1);
            }
            Ok(())
        }
    }
}

impl Cli {
    /// Whether this process serves (targets or a mount) rather than runs a command and
    /// exits: a background child, or `up`, `mount` and `serve` in the foreground.
    fn serves(&self) -> bool {
        match &self.cmd {
            Command::Up(u) => u.child || !u.background,
            Command::Mount {
                background, child, ..
            } => *child || !*background,
            Command::Serve { .. } => true,
            _ => false,
        }
    }

    fn is_background_child(&self) -> bool {
        match &self.cmd {
            Command::Up(u) => u.child,
            Command::Mount { child, .. } => *child,
            _ => false,
        }
    }
}

fn main() {
    let cli = Cli::parse();
    if cli.is_background_child() {
        nacre::daemon::take_status_pipe();
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            nacre::daemon::report_failure(&format!("{info}"));
            default(info);
        }));
    }
    if !cli.serves() {
        // A command whose reader goes away (`nacre status DIR | head -1`) ends as other
        // command-line tools do, killed by SIGPIPE, instead of panicking in println!.
        // Servers keep ignoring it: a write to a client that went away must fail there,
        // not end the process.
        // SAFETY: at start-up, before any other thread runs.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    if let Err(e) = run(cli) {
        nacre::daemon::report_failure(&format!("{e:#}"));
        // Not eprintln!: an error written to a log on a full disk must not become a panic.
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "nacre: {e:#}");
        std::process::exit(1);
    }
}
