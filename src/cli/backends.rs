//! `graphbug backends`' aten half, and the plugins that add aten backends (libtorch: the
//! `torch` feature).

use std::process::ExitCode;

use anyhow::Result;
use graphbug::backends::plugin::{load_env_plugins, load_plugin};
use graphbug::backends::registry::factories;

/// Loads the plugins named on the command line and in `GRAPHBUG_PLUGINS`.
pub fn load_plugins(paths: &[std::path::PathBuf]) -> Result<()> {
    for p in paths {
        load_plugin(p)?;
    }
    load_env_plugins()?;
    Ok(())
}

/// `graphbug backends`: name, tags and description of each backend.
pub fn backends(all: bool) -> Result<ExitCode> {
    let mut infos = graphbug::backends::list(all);
    if all {
        infos.extend(factories());
    }
    let width = infos.iter().map(|i| i.name.len()).max().unwrap_or(0);
    for i in &infos {
        let tags = if i.tags.is_empty() {
            String::new()
        } else {
            format!("[{}] ", i.tags.join(", "))
        };
        let alias = i
            .alias_of
            .as_ref()
            .map(|t| format!(" (alias of {t})"))
            .unwrap_or_default();
        println!("{:width$}  {tags}{}{alias}", i.name, i.description);
    }
    Ok(ExitCode::SUCCESS)
}
