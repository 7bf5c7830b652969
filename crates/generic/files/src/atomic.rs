//! Durable atomic writes, and the sweep of what killed writers leave behind.
//!
//! A file is written to a hidden sibling (`.<name>.tmp.<pid>.<n>`), synced, renamed over
//! its target and its directory synced: readers see the old file or the new one, never a
//! part, and a power cut after the call keeps the new one. Siblings whose writer died
//! (`kill -9` mid-write) are swept by the next write next to them.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The tags of [`sibling`] paths: temporary files, version directories, links being
/// swapped.
const SIBLING_TAGS: [&str; 3] = ["tmp", "v", "link"];

/// A hidden, unique sibling path of `path` with a tag (`tmp`, `v` or `link`):
/// `.<name>.<tag>.<pid>.<n>`, which [`sweep_stale_siblings`] recognises.
pub fn sibling(path: &Path, tag: &str) -> PathBuf {
    let name = file_name(path);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.{tag}.{}.{n}", std::process::id()))
}

/// Writes `bytes` to `path` atomically and durably: a synced hidden sibling renamed over
/// it, then its directory synced. On failure the sibling is removed; the error names the
/// path. Stale siblings of killed writers are swept first.
pub fn write_file_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("directory {} does not exist", dir.display()),
        ));
    }
    sweep_stale_siblings(path);
    let tmp = sibling(path, "tmp");
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)?;
        sync_dir(&dir)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Syncs a directory, so that the names created or renamed in it survive a power cut.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Removes the hidden siblings of `path` (see [`sibling`]) that a killed writer left:
/// those whose process is gone. The version a symlink at `path` points to stays.
pub fn sweep_stale_siblings(path: &Path) {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let prefix = format!(".{}.", name.to_string_lossy());
    // The version `path` links to is live, whoever wrote it.
    let live = std::fs::read_link(path).ok();
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(rest) = file
            .to_string_lossy()
            .strip_prefix(&prefix)
            .map(str::to_owned)
        else {
            continue;
        };
        // `<tag>.<pid>.<n>`
        let parts: Vec<&str> = rest.split('.').collect();
        let [tag, pid, n] = parts.as_slice() else {
            continue;
        };
        let pid = match (pid.parse::<u32>(), n.parse::<u64>()) {
            (Ok(pid), Ok(_)) if SIBLING_TAGS.contains(tag) => pid,
            _ => continue,
        };
        let stale = entry.path();
        // The writer may still be at work if a process with its pid started before the
        // entry was last touched; a zombie or a later process with the same pid is not it.
        let writer_alive = std::fs::symlink_metadata(&stale)
            .and_then(|m| m.modified())
            .is_ok_and(|at| alive_since(pid, at));
        if pid == std::process::id() || writer_alive || live.as_deref() == Some(Path::new(&file)) {
            continue;
        }
        // Best effort: another sweeper may have removed it first.
        let _ = match std::fs::symlink_metadata(&stale) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&stale),
            Ok(_) => std::fs::remove_file(&stale),
            Err(e) => Err(e),
        };
    }
}

/// Whether process `pid` is running and was started by `at` (give or take the second the
/// kernel's boot time is rounded to): the process that wrote a file stamped `at` may still
/// be at work; a process with its pid started later is another one (the pid was reused),
/// and a zombie holds nothing (an orphan whose parent was killed stays one for good where
/// PID 1 does not reap, as in containers).
pub fn alive_since(pid: u32, at: SystemTime) -> bool {
    match proc_stat(pid) {
        Some(stat) => {
            !stat.zombie
                && stat
                    .started
                    .is_none_or(|s| s <= at + Duration::from_secs(2))
        }
        None => signalable(pid),
    }
}

/// Whether a signal could be sent to `pid`: true for zombies too (the fallback where
/// `/proc` is not mounted).
fn signalable(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// What `/proc/<pid>/stat` says of a process: whether it is a zombie, and when it started.
struct ProcStat {
    zombie: bool,
    started: Option<SystemTime>,
}

/// Reads `/proc/<pid>/stat`; `None` when there is no `/proc` (the process may still
/// exist); a process that does not exist reads as a zombie (one that holds nothing).
fn proc_stat(pid: u32) -> Option<ProcStat> {
    if !Path::new("/proc/self/stat").exists() {
        return None;
    }
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Some(ProcStat {
            zombie: true,
            started: None,
        });
    };
    // `pid (comm) state ppid ...`: comm may hold spaces and parentheses.
    let fields: Vec<&str> = text
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let zombie = matches!(fields.first(), Some(&"Z" | &"X"));
    // Field 22, `starttime`, in clock ticks since boot.
    let started = fields
        .get(19)
        .and_then(|t| t.parse::<u64>().ok())
        .zip(boot_time())
        .map(|(ticks, boot)| {
            // SAFETY: sysconf has no preconditions.
            let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
            boot + Duration::from_millis(ticks * 1000 / hz)
        });
    Some(ProcStat { zombie, started })
}

/// When the machine booted (`btime` of `/proc/stat`, to the second).
fn boot_time() -> Option<SystemTime> {
    static BOOT: OnceLock<Option<SystemTime>> = OnceLock::new();
    *BOOT.get_or_init(|| {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let secs = stat
            .lines()
            .find_map(|l| l.strip_prefix("btime "))?
            .trim()
            .parse::<u64>()
            .ok()?;
        Some(std::time::UNIX_EPOCH + Duration::from_secs(secs))
    })
}

/// Fills a fresh directory with `fill`, then makes `link` (a symlink) point at it in one
/// atomic rename, so readers of `link` see the old directory or the new one, never a mix.
/// The directory `link` pointed at before is removed. A real directory at `link` (a
/// repro directory copied with its links followed: `cp -rL`, an archive, git) is removed
/// when empty and otherwise kept, renamed to `NAME.earlier` (`NAME.earlier.2`, ...): the
/// new version takes its place and nothing in it is lost.
pub fn replace_dir_atomically<E>(
    link: &Path,
    fill: impl FnOnce(&Path) -> Result<(), E>,
    io_error: impl Fn(&Path, String) -> E,
) -> Result<(), E> {
    let parent = link
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| io_error(parent, e.to_string()))?;
    sweep_stale_siblings(link);
    let dir = sibling(link, "v");
    std::fs::create_dir(&dir).map_err(|e| io_error(&dir, e.to_string()))?;
    if let Err(e) = fill(&dir) {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    let old = match std::fs::symlink_metadata(link) {
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::read_link(link).ok().map(|t| parent.join(t))
        }
        Ok(m) if m.is_dir() => {
            // An empty one goes; one with files stays, under another name.
            if std::fs::remove_dir(link).is_err() {
                let earlier = earlier_name(link);
                std::fs::rename(link, &earlier).map_err(|e| io_error(link, e.to_string()))?;
            }
            None
        }
        Ok(_) => return Err(io_error(link, "exists and is not a directory".into())),
        Err(_) => None,
    };
    let tmp_link = sibling(link, "link");
    let target = dir.file_name().expect("sibling paths have a file name");
    std::os::unix::fs::symlink(target, &tmp_link)
        .map_err(|e| io_error(&tmp_link, e.to_string()))?;
    // The new version's names, then the link's, are made durable before the old goes.
    sync_dir(&dir)
        .and_then(|()| std::fs::rename(&tmp_link, link))
        .and_then(|()| sync_dir(parent))
        .map_err(|e| io_error(link, e.to_string()))?;
    if let Some(old) = old {
        let _ = std::fs::remove_dir_all(old);
    }
    Ok(())
}

/// The last part of `path`'s name (`out` for a path without one), as the names beside it
/// are made from it.
fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned())
}

/// The first name beside `link` that nothing has: `NAME.earlier`, then `NAME.earlier.2`, ...
fn earlier_name(link: &Path) -> PathBuf {
    let name = file_name(link);
    (1..)
        .map(|k| match k {
            1 => link.with_file_name(format!("{name}.earlier")),
            k => link.with_file_name(format!("{name}.earlier.{k}")),
        })
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .expect("some name is free")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::Instant;

    #[test]
    fn writes_are_whole_and_leave_no_sibling() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_file_atomically(&path, b"one").unwrap();
        write_file_atomically(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "{names:?}");
        let missing = dir.path().join("no/such/dir/file");
        let err = write_file_atomically(&missing, b"x").unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
    }

    /// A repro directory copied with its links followed is a real directory where the link
    /// was: a new version takes its place, and the copy stays, renamed, with all of the
    /// user's files in it; an empty one just goes.
    #[test]
    fn a_copied_directory_gives_way_to_the_link_and_is_kept() {
        let root = tempfile::tempdir().unwrap();
        let link = root.path().join("minified");
        let io = |p: &Path, m: String| format!("{}: {m}", p.display());
        let fill = |d: &Path| -> Result<(), String> {
            std::fs::write(d.join("graph.py"), "new").unwrap();
            Ok(())
        };
        let names = || {
            let mut n: Vec<String> = std::fs::read_dir(root.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect();
            n.sort();
            n
        };
        std::fs::create_dir(&link).unwrap();
        replace_dir_atomically(&link, fill, io).unwrap();
        assert_eq!(names(), ["minified"]);
        for earlier in ["minified.earlier", "minified.earlier.2"] {
            std::fs::remove_file(&link).unwrap();
            std::fs::create_dir_all(link.join("sub")).unwrap();
            std::fs::write(link.join("sub/notes.txt"), earlier).unwrap();
            replace_dir_atomically(&link, fill, io).unwrap();
            assert!(std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink());
            assert_eq!(
                std::fs::read_to_string(link.join("graph.py")).unwrap(),
                "new"
            );
            let kept = root.path().join(earlier).join("sub/notes.txt");
            assert_eq!(std::fs::read_to_string(kept).unwrap(), earlier);
        }
        assert_eq!(
            names(),
            ["minified", "minified.earlier", "minified.earlier.2"]
        );
    }

    #[test]
    fn stale_siblings_of_dead_writers_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        // A dead writer's temporary file (a pid far from any live one), and a live one's.
        let dead = dir.path().join(".out.tmp.4194000.3");
        let mine = sibling(&path, "tmp");
        std::fs::write(&dead, b"half").unwrap();
        std::fs::write(&mine, b"half").unwrap();
        sweep_stale_siblings(&path);
        assert!(!dead.exists());
        assert!(mine.exists());
    }

    #[test]
    fn zombies_and_reused_pids_are_not_alive() {
        // A child that exited and was not reaped is a zombie: it holds nothing.
        let mut child = Command::new("sh").args(["-c", "exit 0"]).spawn().unwrap();
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| !s.contains(") Z "))
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(signalable(pid), "the zombie is still there to be signalled");
        assert!(
            !alive_since(pid, SystemTime::now()),
            "a zombie counts as alive"
        );
        child.wait().unwrap();
        // This process is alive now, but did not exist long before it started.
        let me = std::process::id();
        assert!(alive_since(me, SystemTime::now()));
        let long_ago = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert!(!alive_since(me, long_ago), "a reused pid counts as alive");
    }
}
