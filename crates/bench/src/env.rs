//! What every command runs with: the file system, the world of ranks, progress bars and the
//! cancellation token. Commands receive a [`RunEnv`] so the same code runs in a test, in one
//! process, or as one rank of an MPI or Slurm job.

use std::sync::Arc;

use crate::backend::FileSystem;
use crate::cancel::Cancel;
use crate::progress::Progress;
use crate::rank::World;

/// The surroundings of one command run.
pub struct RunEnv<'a> {
    pub fs: Arc<dyn FileSystem>,
    pub world: &'a World,
    pub progress: Progress,
    pub cancel: Cancel,
}

impl<'a> RunEnv<'a> {
    /// A quiet environment on `fs` in a world of `world` (tests, nested runs).
    pub fn quiet(fs: Arc<dyn FileSystem>, world: &'a World) -> Self {
        RunEnv {
            fs,
            world,
            progress: Progress::hidden(),
            cancel: world.cancel().clone(),
        }
    }

    /// Progress bars only on rank 0.
    pub fn bars(&self) -> Progress {
        if self.world.is_root() {
            self.progress
        } else {
            Progress::hidden()
        }
    }
}
