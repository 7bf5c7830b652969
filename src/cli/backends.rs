//! The plugins that add aten backends (`--plugin`, `GRAPHBUG_PLUGINS`; libtorch: the
//! `torch` feature).

use anyhow::Result;
use graphbug::backends::plugin::{load_env_plugins, load_plugin};

/// Loads the plugins named on the command line and in `GRAPHBUG_PLUGINS`.
pub fn load_plugins(paths: &[std::path::PathBuf]) -> Result<()> {
    for p in paths {
        load_plugin(p)?;
    }
    load_env_plugins()?;
    Ok(())
}
