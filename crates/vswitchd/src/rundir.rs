//! The run directory, the pidfile and `--detach`, as OVS's daemons keep them.
//!
//! * [`rundir`]: `$OVS_RUNDIR`, else OVS's compiled-in default `/var/run/openvswitch` — where
//!   `ovs-vsctl` finds `db.sock`, `ovs-ofctl br0` finds `br0.mgmt` and `ovs-appctl` finds
//!   `ovs-vswitchd.pid` and then `ovs-vswitchd.<pid>.ctl`.
//! * [`Pidfile`]: written once the daemon is ready, refused while another live process holds
//!   it, removed on drop (clean exit).
//! * [`detach`]: `--detach` as OVS does it — fork, the child starts a new session and
//!   carries on, the parent waits until the child says it is ready (or failed) and exits
//!   with the matching status, so `flowswitch vswitchd --detach && ovs-vsctl …` works.
//!
//! This is an I/O module: `fork`, `setsid` and `dup2` need `unsafe` (each block says why
//! it is sound).

use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// OVS's run directory: `$OVS_RUNDIR` or `/var/run/openvswitch`.
pub fn rundir() -> PathBuf {
    std::env::var_os("OVS_RUNDIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/run/openvswitch"))
}

/// OVS's log directory: `$OVS_LOGDIR` or `/var/log/openvswitch`.
pub fn logdir() -> PathBuf {
    std::env::var_os("OVS_LOGDIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/log/openvswitch"))
}

/// Creates `dir` (and parents) if missing, owner-only when it is created here.
pub fn ensure_dir(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
}

/// Is `pid` a live process?
fn alive(pid: i32) -> bool {
    pid > 0 && Path::new(&format!("/proc/{pid}")).exists()
}

/// A pidfile that is removed when dropped. As OVS's, it is held open with an `fcntl` write
/// lock for the daemon's life: `ovs-appctl` asks for that lock (`F_GETLK`) to tell a live
/// daemon's pidfile from a stale one, and refuses a pidfile nobody locks.
#[derive(Debug)]
pub struct Pidfile {
    path: PathBuf,
    _file: fs::File,
}

/// `fcntl` whole-file write lock: `F_SETLK` on `file`, or with `probe` `F_GETLK`, which
/// returns the pid holding a conflicting lock (0 when none).
fn write_lock(file: &fs::File, probe: bool) -> io::Result<i32> {
    // SAFETY: an all-zero `flock` is a valid value of this plain C struct.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    let cmd = if probe { libc::F_GETLK } else { libc::F_SETLK };
    // SAFETY: `file` is an open descriptor for the duration of the call and `fl` is a valid,
    // exclusively borrowed `flock` that fcntl(2) reads and (for F_GETLK) writes.
    if unsafe { libc::fcntl(file.as_raw_fd(), cmd, &mut fl) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(if probe && fl.l_type != libc::F_UNLCK as libc::c_short {
        fl.l_pid
    } else {
        0
    })
}

impl Pidfile {
    /// Writes this process's pid to `path`, refusing when the file names another live
    /// process (a second daemon on the same run directory).
    pub fn create(path: &Path) -> io::Result<Pidfile> {
        let locked_by = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .ok()
            .and_then(|f| write_lock(&f, true).ok())
            .filter(|pid| *pid != 0);
        let recorded = fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
            .filter(|pid| *pid != std::process::id() as i32 && alive(*pid));
        if let Some(pid) = locked_by.or(recorded) {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{}: already running as pid {pid}, aborting", path.display()),
            ));
        }
        let tmp = path.with_extension("pid.tmp");
        let mut f = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        write_lock(&f, false)?;
        writeln!(f, "{}", std::process::id())?;
        f.sync_all()?;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o644))?;
        // The lock belongs to the open file, so it stays with it through the rename.
        fs::rename(&tmp, path)?;
        Ok(Pidfile {
            path: path.to_owned(),
            _file: f,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Pidfile {
    fn drop(&mut self) {
        // Only our own pid is removed (a successor may have replaced it).
        if fs::read_to_string(&self.path).is_ok_and(|s| s.trim() == std::process::id().to_string())
        {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// The child's side of `--detach`: tells the waiting parent how start-up went.
#[derive(Debug)]
pub struct Detached {
    pipe: Option<fs::File>,
}

impl Detached {
    /// Not detached: [`Detached::ready`] does nothing.
    pub fn none() -> Detached {
        Detached { pipe: None }
    }

    /// Start-up finished: the parent exits 0 and the daemon's stdio goes to `/dev/null`.
    pub fn ready(&mut self) {
        if let Some(mut p) = self.pipe.take() {
            let _ = p.write_all(&[0]);
            null_stdio();
        }
    }

    /// Start-up failed with `why`: the parent prints it and exits 1.
    pub fn failed(&mut self, why: &str) {
        if let Some(mut p) = self.pipe.take() {
            let _ = p.write_all(&[1]);
            let _ = p.write_all(why.as_bytes());
        }
    }
}

fn null_stdio() {
    let Ok(null) = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    else {
        return;
    };
    for fd in 0..3 {
        // SAFETY: dup2 on a valid open descriptor (`null`, alive for this call) onto the
        // standard descriptors; no Rust object owns fds 0–2 exclusively (std's handles
        // re-read them on each call), so replacing them breaks no ownership.
        unsafe {
            libc::dup2(null.as_raw_fd(), fd);
        }
    }
}

/// `--detach`: forks. In the parent this waits for the child's [`Detached::ready`] or
/// [`Detached::failed`] and exits the process; in the child it returns the handle.
///
/// Must be called before any thread is started (a forked child keeps only the calling
/// thread).
pub fn detach() -> io::Result<Detached> {
    let mut fds = [0i32; 2];
    // Close-on-exec: programs the daemon starts (a private ovsdb-server) must not hold the
    // write end, or the parent would never see it close.
    // SAFETY: `fds` is a valid array of two ints for pipe2(2) to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe(2) succeeded, so both descriptors are open and owned by nobody else.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the caller guarantees no other thread runs (see the doc), so the child is a
    // consistent copy of this single-threaded process.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            drop(rd);
            // SAFETY: setsid(2) has no memory-safety preconditions.
            unsafe {
                libc::setsid();
            }
            Ok(Detached {
                pipe: Some(fs::File::from(wr)),
            })
        }
        child => {
            drop(wr);
            let mut r = fs::File::from(rd);
            let mut first = [0u8; 1];
            let got = r.read(&mut first).unwrap_or(0);
            match (got, first[0]) {
                (1, 0) => std::process::exit(0),
                (1, _) => {
                    let mut buf = vec![first[0]];
                    let _ = r.take(64 * 1024).read_to_end(&mut buf);
                    eprintln!(
                        "flowswitch vswitchd: {}",
                        String::from_utf8_lossy(&buf[1..])
                    );
                    std::process::exit(1)
                }
                _ => {
                    eprintln!("flowswitch vswitchd: daemon (pid {child}) died during start-up");
                    std::process::exit(1)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pidfile_refuses_a_live_owner_and_removes_itself() {
        let dir = std::env::temp_dir().join(format!("fs-pidfile-{}", std::process::id()));
        ensure_dir(&dir).unwrap();
        let p = dir.join("x.pid");
        // A live other process: pid 1 always exists.
        fs::write(&p, "1\n").unwrap();
        assert!(Pidfile::create(&p).is_err());
        // A dead one is replaced.
        fs::write(&p, "999999999\n").unwrap();
        let pf = Pidfile::create(&p).unwrap();
        assert_eq!(
            fs::read_to_string(&p).unwrap().trim(),
            std::process::id().to_string()
        );
        drop(pf);
        assert!(!p.exists());
        let _ = fs::remove_dir_all(&dir);
    }
}
