//! Tests that cannot run on this machine say so where `cargo xtask test` lists it, instead
//! of passing silently: a missing PJRT plugin, engine (Slurm, sshd) or device (CUDA).

use std::io::Write;

/// The environment variable naming the file `cargo xtask test` collects these notes in.
pub const NOT_RUN_ENV: &str = "GRAPHBUG_TEST_NOT_RUN";

/// Records that `what` (a test, or a part of one) did not run here because `why`: on
/// standard error, and as a line of the file [`NOT_RUN_ENV`] names, for the summary of
/// `cargo xtask test`. Lines are appended whole, so tests running side by side do not mix.
pub fn not_run_here(what: &str, why: &str) {
    let line = format!("{what}: {why}");
    eprintln!("not run here: {line}");
    let Some(file) = std::env::var_os(NOT_RUN_ENV) else {
        return;
    };
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
        .and_then(|mut f| f.write_all(format!("{}\n", line.replace('\n', " ")).as_bytes()));
    if let Err(e) = appended {
        eprintln!(
            "cannot record it in {}: {e}",
            std::path::Path::new(&file).display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_appended_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-run.txt");
        std::env::set_var(NOT_RUN_ENV, &file);
        std::thread::scope(|s| {
            for k in 0..8 {
                s.spawn(move || not_run_here(&format!("test {k}"), "no plugin\nhere"));
            }
        });
        std::env::remove_var(NOT_RUN_ENV);
        let text = std::fs::read_to_string(&file).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort();
        let want: Vec<String> = (0..8)
            .map(|k| format!("test {k}: no plugin here"))
            .collect();
        assert_eq!(lines, want);
    }
}
