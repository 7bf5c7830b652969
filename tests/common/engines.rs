//! Real engines for the worker-launcher tests and benchmarks: a single-node Slurm cluster
//! and an sshd on localhost, run from the Debian packages `cargo xtask setup` installs
//! (`slurmctld`, `slurmd`, `slurm-client`, `munge`, `openssh-server`). Each is private to
//! the process that starts it (its own configuration, ports, state and keys in a temporary
//! directory) and dies with it, even after `kill -9` (the daemons run in the foreground as
//! children with a death signal).

#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Why an engine's tests are skipped: its programs are not installed (setup could not
/// install them here). Anything else that keeps an engine from starting is a failure.
pub fn missing_programs(programs: &[&str]) -> Option<String> {
    let missing: Vec<&str> = programs
        .iter()
        .copied()
        .filter(|p| which(p).is_none())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "not installed: {} (`cargo xtask setup` installs them from Debian's packages where it runs as root with apt)",
            missing.join(", ")
        )
    })
}

/// The path of `program` on `PATH` or in the system directories daemons live in.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin"])
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file());
    found
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts a daemon in the foreground as a child that dies with this process.
fn daemon(mut cmd: Command, log: &Path) -> Result<Child, String> {
    let out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    let shown = format!("{cmd:?}");
    graphbug::run::process::spawn(cmd, true).map_err(|e| format!("{shown}: {e}"))
}

/// Stops daemons: SIGTERM, a moment, then SIGKILL.
fn stop(daemons: &mut Vec<Child>) {
    for d in daemons.iter_mut().rev() {
        graphbug::run::process::end_gracefully(d, true, Duration::from_secs(2));
    }
    daemons.clear();
}

/// The last lines of a log, for a failure message.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

/// This machine's host name, as Slurm's node name.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// A single-node Slurm cluster: `munged`, `slurmctld` and `slurmd` with a configuration of
/// their own (`SLURM_CONF` points clients at it).
pub struct Slurm {
    dir: tempfile::TempDir,
    conf: PathBuf,
    daemons: Vec<Child>,
    /// The CPUs its one node offers.
    pub cpus: usize,
}

impl Slurm {
    /// The programs it needs.
    pub const PROGRAMS: [&'static str; 6] =
        ["munged", "slurmctld", "slurmd", "srun", "squeue", "sinfo"];

    /// Brings the cluster up with `cpus` CPUs on its node and waits until the node is idle.
    pub fn start(cpus: usize) -> Result<Slurm, String> {
        let dir = tempfile::Builder::new()
            .prefix("gb-slurm")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let d = dir.path();
        for sub in ["state", "spool", "munge"] {
            std::fs::create_dir_all(d.join(sub)).map_err(|e| e.to_string())?;
        }
        let key = d.join("munge/key");
        let mut bytes = vec![0u8; 1024];
        std::io::Read::read_exact(
            &mut std::fs::File::open("/dev/urandom").map_err(|e| e.to_string())?,
            &mut bytes,
        )
        .map_err(|e| e.to_string())?;
        std::fs::write(&key, &bytes).map_err(|e| e.to_string())?;
        set_mode(&key, 0o600)?;
        set_mode(&d.join("munge"), 0o700)?;
        let socket = d.join("munge/sock");
        let mut daemons = Vec::new();
        let mut munged = Command::new(which("munged").ok_or("munged is not installed")?);
        munged.arg("-F").arg("--force");
        munged.arg(format!("--key-file={}", key.display()));
        munged.arg(format!("--socket={}", socket.display()));
        munged.arg(format!("--pid-file={}", d.join("munge/pid").display()));
        munged.arg(format!("--seed-file={}", d.join("munge/seed").display()));
        munged.arg(format!("--log-file={}", d.join("munge/log").display()));
        daemons.push(daemon(munged, &d.join("munged.out"))?);
        let host = hostname();
        let conf = d.join("slurm.conf");
        let text = format!(
            "ClusterName=graphbug\nSlurmctldHost={host}\nAuthType=auth/munge\nAuthInfo=socket={sock}\n\
             CredType=cred/munge\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
             SlurmUser=root\nSlurmdUser=root\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
             SlurmctldPidFile={d}/ctld.pid\nSlurmdPidFile={d}/d.pid\n\
             SlurmctldLogFile={d}/ctld.log\nSlurmdLogFile={d}/d.log\n\
             SlurmctldPort={ctld}\nSlurmdPort={slurmd}\nSchedulerType=sched/backfill\n\
             SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\nMpiDefault=none\n\
             JobCompType=jobcomp/none\nAccountingStorageType=accounting_storage/none\n\
             ReturnToService=2\nInactiveLimit=0\nKillWait=5\n\
             NodeName={host} CPUs={cpus} State=UNKNOWN\n\
             PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
            sock = socket.display(),
            d = d.display(),
            ctld = free_port(),
            slurmd = free_port(),
        );
        std::fs::write(&conf, text).map_err(|e| e.to_string())?;
        let mut slurm = Slurm {
            dir,
            conf,
            daemons,
            cpus,
        };
        // munged's socket first, or the Slurm daemons cannot authenticate.
        let d = slurm.dir.path().to_path_buf();
        wait_for(Duration::from_secs(20), || socket.exists())
            .map_err(|_| format!("munged did not start: {}", tail(&d.join("munge/log"))))?;
        for name in ["slurmctld", "slurmd"] {
            let mut cmd = Command::new(which(name).ok_or(format!("{name} is not installed"))?);
            cmd.arg("-D").arg("-f").arg(&slurm.conf);
            slurm
                .daemons
                .push(daemon(cmd, &d.join(format!("{name}.out")))?);
        }
        wait_for(Duration::from_secs(60), || {
            slurm
                .client("sinfo")
                .args(["-h", "-o", "%T"])
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle")
        })
        .map_err(|_| {
            format!(
                "the Slurm node did not become idle within 60 s:\nslurmctld: {}\nslurmd: {}",
                tail(&d.join("ctld.log")),
                tail(&d.join("d.log"))
            )
        })?;
        Ok(slurm)
    }

    /// A Slurm client command (`srun`, `squeue`, ...) talking to this cluster.
    pub fn client(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("SLURM_CONF", &self.conf);
        cmd
    }

    /// The environment its clients need.
    pub fn env(&self) -> (&'static str, String) {
        ("SLURM_CONF", self.conf.display().to_string())
    }

    /// The jobs in its queue (`squeue` lines), or an error when it cannot be asked.
    pub fn queue(&self) -> Result<Vec<String>, String> {
        let out = self
            .client("squeue")
            .args(["-h", "-o", "%i %j %T %r"])
            .output()
            .map_err(|e| format!("squeue: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "squeue failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect())
    }

    /// Waits at most `limit` for the queue to be empty; returns how long it took, or the
    /// jobs still there.
    pub fn wait_empty(&self, limit: Duration) -> Result<Duration, Vec<String>> {
        let started = Instant::now();
        loop {
            let jobs = self.queue().unwrap_or_else(|e| vec![e]);
            if jobs.is_empty() {
                return Ok(started.elapsed());
            }
            if started.elapsed() >= limit {
                return Err(jobs);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Cancels every job (after a failed test, so the next one starts clean).
    pub fn cancel_all(&self) {
        let _ = self.client("scancel").args(["-u", "root"]).output();
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        self.cancel_all();
        stop(&mut self.daemons);
    }
}

/// An sshd on 127.0.0.1 that lets this user in with a key of its own.
pub struct Sshd {
    dir: tempfile::TempDir,
    daemons: Vec<Child>,
    port: u16,
}

impl Sshd {
    /// The programs it needs.
    pub const PROGRAMS: [&'static str; 3] = ["sshd", "ssh", "ssh-keygen"];

    /// Starts it and waits until it takes connections.
    pub fn start() -> Result<Sshd, String> {
        let dir = tempfile::Builder::new()
            .prefix("gb-sshd")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let d = dir.path();
        for key in ["host_key", "client_key"] {
            let out = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(d.join(key))
                .output()
                .map_err(|e| format!("ssh-keygen: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "ssh-keygen failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys"))
            .map_err(|e| e.to_string())?;
        // sshd's privilege separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let port = free_port();
        let conf = d.join("sshd_config");
        std::fs::write(
            &conf,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n\
                 AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
                 StrictModes no\nPidFile {d}/sshd.pid\n",
                d = d.display()
            ),
        )
        .map_err(|e| e.to_string())?;
        let mut cmd = Command::new(which("sshd").ok_or("sshd is not installed")?);
        cmd.arg("-D").arg("-e").arg("-f").arg(&conf);
        let log = d.join("sshd.log");
        let daemons = vec![daemon(cmd, &log)?];
        let sshd = Sshd { dir, daemons, port };
        wait_for(Duration::from_secs(20), || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .map_err(|_| format!("sshd did not start: {}", tail(&log)))?;
        Ok(sshd)
    }

    /// The ssh command line that reaches it (`{cmd}` is appended by the caller).
    pub fn ssh(&self) -> String {
        format!(
            "ssh -p {} -i {} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR 127.0.0.1",
            self.port,
            self.dir.path().join("client_key").display()
        )
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        stop(&mut self.daemons);
    }
}

/// Sets a file's permission bits.
fn set_mode(path: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Polls `ready` until it holds or `limit` passes.
fn wait_for(limit: Duration, mut ready: impl FnMut() -> bool) -> Result<(), ()> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(())
}
