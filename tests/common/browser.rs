//! A real headless Chromium (Debian's `chromium`, which `cargo xtask setup` installs) for
//! the tests of graphbug's pages: a page is loaded from its file, with the network off,
//! and the test reads what the browser made of it: the DOM after the page's script ran,
//! the console's errors, the load time the page records (`body[data-load-ms]`), and a
//! screenshot. Every run is bounded (`timeout`) and has its own profile directory.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Debian's Chromium.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// What the browser made of a page.
pub struct Loaded {
    /// The DOM after the load event, serialized.
    pub dom: String,
    /// The console's errors (uncaught exceptions, failed loads).
    pub errors: Vec<String>,
    /// The milliseconds from navigation to the load event, as the page recorded them.
    pub load_ms: Option<u64>,
}

/// Chromium's flags: headless, no network of its own, a fresh profile in `profile`.
fn chromium(profile: &Path) -> Command {
    assert!(
        Path::new(CHROMIUM).is_file(),
        "Chromium is not installed at {CHROMIUM}: `cargo xtask setup` installs it (Debian's `chromium`)"
    );
    let mut cmd = Command::new("timeout");
    cmd.args(["120", CHROMIUM])
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()));
    cmd
}

/// The `file://` address of `page`.
fn address(page: &Path) -> String {
    format!(
        "file://{}",
        page.canonicalize().expect("the page exists").display()
    )
}

/// Loads `page` (profile under `scratch`) and returns its DOM, console errors and load time.
pub fn load(page: &Path, scratch: &Path) -> Loaded {
    let o = chromium(&scratch.join("chromium-profile"))
        .arg("--dump-dom")
        .arg(address(page))
        .output()
        .expect("chromium runs");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "chromium failed on {}: {stderr}",
        page.display()
    );
    let dom = String::from_utf8_lossy(&o.stdout).into_owned();
    let errors = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE") && (l.contains("Uncaught") || l.contains("Error")))
        .map(String::from)
        .collect();
    let load_ms = dom
        .split("data-load-ms=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|ms| ms.parse().ok());
    Loaded {
        dom,
        errors,
        load_ms,
    }
}

/// A screenshot of `page` at `width` x `height`; returns the PNG's path.
pub fn screenshot(page: &Path, scratch: &Path, (width, height): (u32, u32)) -> PathBuf {
    let png = scratch.join(format!(
        "{}.png",
        page.file_stem().and_then(|s| s.to_str()).unwrap_or("page")
    ));
    let o = chromium(&scratch.join("chromium-profile"))
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--screenshot={}", png.display()))
        .arg(address(page))
        .output()
        .expect("chromium runs");
    assert!(
        o.status.success() && png.is_file(),
        "no screenshot of {}: {}",
        page.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    png
}

/// The element with id `id` in `dom`, from its start tag to the end of the text `span`
/// bytes on (enough for a node's `<g>` group).
pub fn element<'d>(dom: &'d str, id: &str, span: usize) -> Option<&'d str> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let start = dom[..at].rfind('<')?;
    let mut end = (start + span).min(dom.len());
    while !dom.is_char_boundary(end) {
        end -= 1;
    }
    Some(&dom[start..end])
}
