//! The tap port: an interface the switch creates for the host (OVS's `internal` port in the
//! userspace datapath). What the host's stack sends on it, the switch receives; what the
//! switch sends to it, the host's stack receives.
//!
//! A [`TapPort`] opens `/dev/net/tun` non-blocking, attaches (or creates) the tap interface
//! of that name without packet information headers (`IFF_TAP | IFF_NO_PI`), and brings it up.
//! The device is not persistent: it disappears when the port closes, also when the process
//! dies, so nothing is left behind. Offloads are not enabled (`TUNSETOFFLOAD` is never
//! called), so the kernel hands us complete frames with their checksums filled in and no
//! aggregates larger than the MTU.
//!
//! The kernel's tap has no batched read or write: rx reads frame by frame until the queue is
//! empty or the burst is full, tx writes frame by frame. A write the device refuses (the
//! interface went down, its queue is full) is a counted tx error.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::batch::Batch;
use crate::netif;
use crate::packet::{MAX_FRAME, PacketPool};
use crate::port::{Port, PortError, PortStats};

/// A tap interface as a port (module doc).
#[derive(Debug)]
pub struct TapPort {
    name: String,
    fd: OwnedFd,
    stats: PortStats,
    buf: Box<[u8; 65_536]>,
}

fn sys_err(name: &str, op: &'static str) -> PortError {
    PortError::Interface {
        name: name.to_owned(),
        op,
        source: io::Error::last_os_error(),
    }
}

impl TapPort {
    /// Creates (or attaches to) the tap interface `name` and brings it up.
    pub fn open(name: &str) -> Result<TapPort, PortError> {
        netif::check_name(name)?;
        let path = c"/dev/net/tun";
        // SAFETY: open(2) of a constant NUL-terminated path; the result is checked.
        let raw = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(sys_err(name, "open /dev/net/tun"));
        }
        // SAFETY: a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut req = netif::ifreq(name);
        req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads and writes the `ifreq` passed, valid for the call.
        let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req) };
        if r < 0 {
            return Err(sys_err(name, "create tap interface"));
        }
        netif::set_up(name)?;
        Ok(TapPort {
            name: name.to_owned(),
            fd,
            stats: PortStats::default(),
            buf: vec![0u8; 65_536]
                .into_boxed_slice()
                .try_into()
                .map_err(|_| PortError::Config("tap buffer".into()))?,
        })
    }

    /// What was attached, for the log.
    pub fn info(&self) -> String {
        format!("tap {}: created, up, no offloads", self.name)
    }
}

impl Port for TapPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let mut n = 0;
        while batch.room() > 0 {
            // SAFETY: reads at most the buffer's length into the buffer we own.
            let r = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                )
            };
            if r <= 0 {
                // EAGAIN: nothing more now. Other errors (the device went away) read as
                // nothing received; the port is dropped when the interface is removed.
                break;
            }
            let frame = &self.buf[..r as usize];
            if frame.len() > MAX_FRAME {
                self.stats.rx_too_large += 1;
                self.stats.rx_dropped += 1;
                continue;
            }
            let Some(mut p) = pool.alloc() else {
                self.stats.rx_nobuf += 1;
                self.stats.rx_dropped += 1;
                break;
            };
            if p.set_data(frame).is_err() {
                pool.free(p);
                self.stats.rx_too_large += 1;
                self.stats.rx_dropped += 1;
                continue;
            }
            self.stats.count_rx(frame.len());
            if let Err(p) = batch.push(p) {
                pool.free(p);
                break;
            }
            n += 1;
        }
        n
    }

    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PacketPool) -> usize {
        let mut sent = 0;
        for p in batch.iter() {
            let d = p.data();
            // SAFETY: writes `d`, a live slice, to our descriptor.
            let r = unsafe { libc::write(self.fd.as_raw_fd(), d.as_ptr().cast(), d.len()) };
            if r == d.len() as isize {
                self.stats.count_tx(d.len());
                sent += 1;
            } else {
                self.stats.count_tx_error();
            }
        }
        batch.free_all(pool);
        sent
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn rx_fds(&self, out: &mut Vec<std::os::fd::RawFd>) {
        out.push(self.fd.as_raw_fd());
    }
}

/// Why tap ports cannot be created here, or `None`.
pub fn tap_missing_reason() -> Option<String> {
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some("/dev/net/tun does not exist".into());
    }
    let name = format!("fstap{}", std::process::id() % 100_000);
    match TapPort::open(&name) {
        Ok(_) => None,
        Err(e) => Some(format!("cannot create a tap interface: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_are_refused() {
        assert!(matches!(TapPort::open(""), Err(PortError::Config(_))));
        assert!(matches!(
            TapPort::open("a-name-far-too-long"),
            Err(PortError::Config(_))
        ));
    }
}
