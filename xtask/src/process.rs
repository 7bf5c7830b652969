//! Children of `cargo xtask` that cannot outlive it.
//!
//! xtask depends on no crate that needs libtorch; graphbug-run's `process::spawn` starts
//! children itself (from one thread), while xtask's callers configure a `Command` and run
//! it as they like (`status`, `output`, `spawn`), so xtask makes the one call that matters
//! itself: `PR_SET_PDEATHSIG = SIGKILL` in the child, so that `kill -9` of xtask also ends
//! the case generator and the graphbug runs it started.

use std::process::Command;

/// Makes `cmd` start a child that is killed when the thread that started it dies.
pub fn die_with_parent(cmd: &mut Command) -> &mut Command {
    #[cfg(target_os = "linux")]
    {
        use std::io;
        use std::os::unix::process::CommandExt;
        let parent = std::process::id();
        // SAFETY: the closure runs in the forked child before exec and calls only
        // async-signal-safe functions (prctl, getppid, _exit).
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died before prctl took effect.
                if libc::getppid() as u32 != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
    cmd
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    /// The death signal fires when the starting thread ends, as it does when xtask dies.
    #[test]
    fn a_child_dies_with_the_thread_that_started_it() {
        let child = std::thread::spawn(|| {
            let mut cmd = Command::new("sleep");
            cmd.arg("60");
            die_with_parent(&mut cmd).spawn().expect("sleep starts")
        })
        .join()
        .expect("the starting thread ends");
        let mut child = child;
        let started = std::time::Instant::now();
        let status = child.wait().expect("the child is reaped");
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
    }
}
