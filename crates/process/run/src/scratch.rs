//! Scratch directories that never outlive a run, not even a killed one.
//!
//! Each [`Scratch`] is a directory under `$TMPDIR/graphbug-scratch/` holding a `.lock`
//! file that its process keeps locked (`flock`) while it lives. The kernel drops the lock
//! when the process dies, however it dies, so the next [`Scratch::new`] (of any graphbug
//! process) can tell an abandoned directory from a live one and remove it. A directory
//! is filled in under a hidden name and renamed into place only once its lock is held,
//! so the sweep never sees a live directory without its lock. The hidden name carries its
//! maker's process id and start time, so a directory whose maker was killed while setting
//! it up goes at the next start too (a process id reused by another process since does
//! not keep it: the start time differs).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// A scratch directory that cannot be made: the path, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ScratchError {
    /// The file or directory.
    pub path: String,
    /// What went wrong.
    pub message: String,
}

impl ScratchError {
    fn io(path: &Path, err: impl std::fmt::Display) -> Self {
        ScratchError {
            path: path.display().to_string(),
            message: err.to_string(),
        }
    }
}

/// What making a scratch directory gives.
pub type Result<T> = std::result::Result<T, ScratchError>;

/// The lock file inside each scratch directory.
const LOCK_FILE: &str = ".lock";
/// Hidden names of directories being set up.
const NEW_PREFIX: &str = ".new-";
/// A directory still without its lock this long after it was made is abandoned, where its
/// maker's life cannot be told (no `/proc`, or a name not of graphbug's making).
const SETUP_GRACE: Duration = Duration::from_secs(600);

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A scratch directory, removed on drop (and, after a crash, by the next run).
#[derive(Debug)]
pub struct Scratch {
    dir: PathBuf,
    _lock: File,
}

/// Where scratch directories live.
pub fn scratch_root() -> PathBuf {
    std::env::temp_dir().join("graphbug-scratch")
}

impl Scratch {
    /// A fresh directory named after `tag`, after removing the directories that dead
    /// graphbug processes left behind.
    pub fn new(tag: &str) -> Result<Scratch> {
        Scratch::new_in(&scratch_root(), tag)
    }

    /// [`Scratch::new`] under `root` instead of the default root.
    pub fn new_in(root: &Path, tag: &str) -> Result<Scratch> {
        std::fs::create_dir_all(root).map_err(|e| ScratchError::io(root, e))?;
        sweep(root);
        let name = format!(
            "{tag}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let maker = maker_key(std::process::id()).unwrap_or_default();
        let staging = root.join(format!("{NEW_PREFIX}{maker}.{name}"));
        std::fs::create_dir(&staging).map_err(|e| ScratchError::io(&staging, e))?;
        let lock_path = staging.join(LOCK_FILE);
        let lock = File::create(&lock_path).map_err(|e| ScratchError::io(&lock_path, e))?;
        lock.lock().map_err(|e| ScratchError::io(&lock_path, e))?;
        let dir = root.join(name);
        std::fs::rename(&staging, &dir).map_err(|e| ScratchError::io(&dir, e))?;
        Ok(Scratch { dir, _lock: lock })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

/// Hidden names of directories being removed.
const DEAD_PREFIX: &str = ".dead-";

impl Drop for Scratch {
    fn drop(&mut self) {
        // Renamed away first: a child still ending (a worker given its grace period) can
        // add no file under the old name while the directory goes, which would leave it
        // behind (the removal meeting an entry made after it listed the directory). What
        // is left after all (its lock free once this process is gone) goes at the next
        // start.
        let dead = self.dir.file_name().map(|name| {
            self.dir
                .with_file_name(format!("{DEAD_PREFIX}{}", name.to_string_lossy()))
        });
        let gone = match dead {
            Some(dead) if std::fs::rename(&self.dir, &dead).is_ok() => dead,
            _ => self.dir.clone(),
        };
        let _ = std::fs::remove_dir_all(&gone);
    }
}

/// Removes the scratch directories under `root` whose owners are gone.
fn sweep(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if let Some(setup) = name.strip_prefix(NEW_PREFIX) {
            // Being set up: abandoned once its maker is gone.
            let abandoned = match maker_alive(setup) {
                Some(alive) => !alive,
                None => older_than(&path, SETUP_GRACE),
            };
            if abandoned {
                let _ = std::fs::remove_dir_all(&path);
            }
            continue;
        }
        // Being removed by its owner (see `Drop`), or left half removed by an owner killed
        // meanwhile: either way it goes (two removals of it do no harm).
        if name.starts_with(DEAD_PREFIX) {
            let _ = std::fs::remove_dir_all(&path);
            continue;
        }
        match File::open(path.join(LOCK_FILE)) {
            // The lock is free: its owner died. Holding it while removing keeps two
            // sweepers from racing.
            Ok(lock) => {
                if lock.try_lock().is_ok() {
                    let _ = std::fs::remove_dir_all(&path);
                }
            }
            // A live directory has its lock from before it got its name; one without
            // (a removal an older graphbug was killed in the middle of) is abandoned.
            Err(_) => {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }
}

/// `<pid>-<start>` for process `pid`, its start time in clock ticks since boot (field 22
/// of `/proc/<pid>/stat`): a key no later process with the same id has. `None` where
/// there is no `/proc` or no such process.
fn maker_key(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold anything, spaces too.
    let after = &stat[stat.rfind(')')? + 1..];
    let start = after.split_whitespace().nth(19)?;
    Some(format!("{pid}-{start}"))
}

/// Whether the maker that a staging name (`<pid>-<start>.<name>`) records still lives;
/// `None` when the name records none or this machine cannot tell.
fn maker_alive(staging: &str) -> Option<bool> {
    let (key, _) = staging.split_once('.')?;
    let (pid, _) = key.split_once('-')?;
    let pid: u32 = pid.parse().ok()?;
    maker_key(std::process::id())?;
    Some(maker_key(pid).as_deref() == Some(key))
}

fn older_than(path: &Path, age: Duration) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_some_and(|d| d > age)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_directories_stay_and_abandoned_ones_go() {
        let root = tempfile::tempdir().unwrap();
        let a = Scratch::new_in(root.path(), "a").unwrap();
        std::fs::write(a.path().join("data"), "x").unwrap();
        // A live one survives another's sweep.
        let b = Scratch::new_in(root.path(), "b").unwrap();
        assert!(a.path().join("data").exists());
        // An abandoned one (its lock free, as after kill -9) is removed by the next start.
        let dead = root.path().join("dead-1-0");
        std::fs::create_dir(&dead).unwrap();
        File::create(dead.join(LOCK_FILE)).unwrap();
        let c = Scratch::new_in(root.path(), "c").unwrap();
        assert!(!dead.exists());
        assert!(a.path().exists() && b.path().exists() && c.path().exists());
        let a_path = a.path().to_path_buf();
        drop(a);
        assert!(!a_path.exists());
        let mut names: Vec<String> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn a_killed_process_leaves_nothing_after_the_next_start() {
        let root = tempfile::tempdir().unwrap();
        // Another process takes a scratch directory and is killed with SIGKILL.
        let script = format!(
            "mkdir -p {r}/.new-x-$$-0 && exec 9>{r}/.new-x-$$-0/.lock && flock 9 && mv {r}/.new-x-$$-0 {r}/x-$$-0 && echo ready && exec sleep 100",
            r = root.path().display()
        );
        let mut child = std::process::Command::new("sh")
            .args(["-c", &script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "ready");
        let held = root.path().join(format!("x-{}-0", child.id()));
        assert!(held.exists());
        // While it lives, its directory stays.
        drop(Scratch::new_in(root.path(), "probe").unwrap());
        assert!(held.exists());
        child.kill().unwrap();
        child.wait().unwrap();
        drop(Scratch::new_in(root.path(), "probe").unwrap());
        assert!(!held.exists());
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_removal_cut_short_leaves_nothing_after_the_next_start() {
        let root = tempfile::tempdir().unwrap();
        // Killed while its directory went: renamed away and half removed, or (an older
        // graphbug) half removed under its own name, its lock file already gone.
        for name in [format!("{DEAD_PREFIX}x-1-0"), "y-2-0".to_string()] {
            let dir = root.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("data"), "x").unwrap();
        }
        // And a live one's removal leaves nothing behind either.
        let live = Scratch::new_in(root.path(), "live").unwrap();
        std::fs::write(live.path().join("data"), "x").unwrap();
        drop(live);
        drop(Scratch::new_in(root.path(), "probe").unwrap());
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_process_killed_while_setting_up_leaves_nothing_after_the_next_start() {
        let root = tempfile::tempdir().unwrap();
        // A process that made its staging directory and was killed before locking it.
        let mut child = std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .unwrap();
        let key = maker_key(child.id()).expect("this machine has /proc");
        let staging = root
            .path()
            .join(format!("{NEW_PREFIX}{key}.x-{}-0", child.id()));
        std::fs::create_dir(&staging).unwrap();
        File::create(staging.join(LOCK_FILE)).unwrap();
        // While its maker lives it stays (the maker may be about to lock it).
        drop(Scratch::new_in(root.path(), "probe").unwrap());
        assert!(staging.exists());
        child.kill().unwrap();
        child.wait().unwrap();
        drop(Scratch::new_in(root.path(), "probe").unwrap());
        assert!(!staging.exists());
        // A live process id whose start time differs (the id reused since) keeps nothing.
        let reused = root.path().join(format!(
            "{NEW_PREFIX}{}-1.y-{}-0",
            std::process::id(),
            std::process::id()
        ));
        std::fs::create_dir(&reused).unwrap();
        drop(Scratch::new_in(root.path(), "probe").unwrap());
        assert!(!reused.exists());
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
    }
}
