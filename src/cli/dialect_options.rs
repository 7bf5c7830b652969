//! Options only one dialect takes, declared once by the dialect under its help heading
//! (`Options for aten graphs`, see [`graphbug::flow::dialect::options_heading`]). A
//! command on another dialect's file refuses the ones given, by name; no list of them is
//! kept anywhere else.

use std::sync::OnceLock;

use anyhow::{bail, Result};
use clap::parser::ValueSource;
use graphbug::flow::dialect::options_heading;
use graphbug::flow::Dialect;

/// An option given on the command line under a dialect's heading.
struct Given {
    heading: String,
    name: String,
}

/// The options a command line gives under a heading, and the command's name.
pub struct GivenOptions {
    command: String,
    given: Vec<Given>,
}

/// The dialect-specific options of this run's command line.
static GIVEN: OnceLock<GivenOptions> = OnceLock::new();

/// Records which options under a dialect's heading the command line gives (`cli`: the
/// whole command, `matches`: what was parsed). Called once, before the command runs.
pub fn record(cli: &clap::Command, matches: &clap::ArgMatches) {
    if let Some(given) = given_of(cli, matches) {
        let _ = GIVEN.set(given);
    }
}

/// The options under a heading that `matches` (parsed by `cli`) give its command.
pub fn given_of(cli: &clap::Command, matches: &clap::ArgMatches) -> Option<GivenOptions> {
    let (name, sub) = matches.subcommand()?;
    let command = cli.find_subcommand(name)?;
    let given = command
        .get_arguments()
        .chain(cli.get_arguments().filter(|a| a.is_global_set()))
        .filter_map(|arg| {
            let heading = arg.get_help_heading()?;
            let id = arg.get_id().as_str();
            let on_line = sub.try_contains_id(id).unwrap_or(false)
                && sub.value_source(id) == Some(ValueSource::CommandLine);
            on_line.then(|| Given {
                heading: heading.to_string(),
                name: arg
                    .get_long()
                    .map_or_else(|| id.to_string(), |l| format!("--{l}")),
            })
        })
        .collect();
    Some(GivenOptions {
        command: name.to_string(),
        given,
    })
}

/// Refuses the options of every dialect other than `dialect`, given for `what` (`x.hlo
/// is an XLA program`), saying where `--help` lists them.
pub fn refuse_for(dialect: &dyn Dialect, what: &str) -> Result<()> {
    GIVEN
        .get()
        .map_or(Ok(()), |given| refuse_in(given, dialect, what))
}

/// Refuses the options of `given` under another dialect's heading than `dialect`'s.
pub fn refuse_in(given: &GivenOptions, dialect: &dyn Dialect, what: &str) -> Result<()> {
    let GivenOptions { command, given } = given;
    let own = options_heading(dialect);
    let Some(heading) = given
        .iter()
        .map(|g| g.heading.as_str())
        .find(|h| *h != own && h.starts_with("Options for "))
    else {
        return Ok(());
    };
    let names: Vec<&str> = given
        .iter()
        .filter(|g| g.heading == heading)
        .map(|g| g.name.as_str())
        .collect();
    let whose = heading.trim_start_matches("Options for ");
    bail!(
        "{what}; these options are for {whose}: {} (`graphbug {command} --help` lists them under \"{heading}\")",
        names.join(", ")
    )
}
