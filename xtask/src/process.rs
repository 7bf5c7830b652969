//! Children of `cargo xtask` that cannot outlive it.
//!
//! xtask depends on no graphbug crate (DESIGN.md), so it has its own copy of the one call
//! graphbug-repro's `process::guard` makes: `PR_SET_PDEATHSIG = SIGKILL` in the child, so
//! that `kill -9` of xtask also ends the case generator and the graphbug runs it started.

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
