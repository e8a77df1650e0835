//! `nacre darshan-age`: the layout half. The aging itself is `nacre_bench::darshan`; this
//! sets the tree root's default layout the way `lfs setstripe DIR` does, on a mount or
//! through the native client.

use anyhow::{Context, Result, bail};
use nacre_lustreapi::setstripe::{SetstripeAction, parse_setstripe};
use std::path::Path;

/// Gives `dir` the default layout that `lfs setstripe OPTIONS dir` would.
pub fn set_default_layout(native: Option<&str>, dir: &Path, options: &[String]) -> Result<()> {
    let path = dir.to_string_lossy().into_owned();
    let mut args: Vec<String> = options.to_vec();
    args.push(path.clone());
    match native {
        None => {
            let mut lfs = vec!["setstripe".to_string()];
            lfs.extend(args);
            let rc = super::lfs::run(&lfs)?;
            if rc != 0 {
                bail!(
                    "lfs setstripe {} {path} failed (errno {rc})",
                    options.join(" ")
                );
            }
            Ok(())
        }
        Some(spec) => {
            let req = parse_setstripe(&args)
                .map_err(|e| anyhow::anyhow!("lfs setstripe {}: {e}", options.join(" ")))?;
            let SetstripeAction::SetLayout(layout) = req.action else {
                bail!("{}: not a layout to set", options.join(" "));
            };
            let fs = crate::native::NativeFs::connect(spec)?;
            fs.set_default_layout(dir, layout)
                .with_context(|| format!("setting the default layout of {path}"))
        }
    }
}
