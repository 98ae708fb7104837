//! Sleeping until a port has input: `poll(2)` on the ports' descriptors plus an `eventfd`
//! that other threads use to wake the sleeper.
//!
//! A datapath thread that found nothing to do sleeps in [`Waiter::wait`] instead of a timed
//! park when its ports have descriptors ([`crate::Port::rx_fds`]): input on any of them wakes
//! it at once, and so does [`Waker::wake`] (a control request, an injected frame). A wake
//! that comes before the wait is not lost: the `eventfd` counter stays set until the wait
//! reads it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

/// Wakes a [`Waiter`] from another thread.
#[derive(Debug, Clone)]
pub struct Waker {
    fd: Arc<OwnedFd>,
}

impl Waker {
    /// Makes the waiter's current or next [`Waiter::wait`] return.
    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd; a full counter (EAGAIN)
        // already means "wake", so the result needs no handling.
        unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            );
        }
    }
}

/// Sleeps until input or a wake (module doc).
#[derive(Debug)]
pub struct Waiter {
    fd: Arc<OwnedFd>,
    pollfds: Vec<libc::pollfd>,
}

impl Waiter {
    /// A waiter and its waker.
    pub fn new() -> io::Result<(Waiter, Waker)> {
        // SAFETY: eventfd(2) with constant flags; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nothing else owns.
        let fd = Arc::new(unsafe { OwnedFd::from_raw_fd(raw) });
        Ok((
            Waiter {
                fd: fd.clone(),
                pollfds: Vec::with_capacity(16),
            },
            Waker { fd },
        ))
    }

    /// Sleeps until one of `fds` is readable, a wake, or `timeout`. Returns whether it was
    /// woken by a [`Waker`] (its wake is consumed).
    pub fn wait(&mut self, fds: &[RawFd], timeout: Duration) -> bool {
        self.pollfds.clear();
        self.pollfds.push(libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        self.pollfds.extend(fds.iter().map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        }));
        let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
        // SAFETY: `pollfds` is a live, initialised array of the length passed.
        let r = unsafe {
            libc::poll(
                self.pollfds.as_mut_ptr(),
                self.pollfds.len() as libc::nfds_t,
                ms,
            )
        };
        if r <= 0 || self.pollfds[0].revents & libc::POLLIN == 0 {
            return false;
        }
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from our non-blocking eventfd.
        unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut v as *mut u64).cast(),
                std::mem::size_of::<u64>(),
            );
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_wake_before_the_wait_is_not_lost_and_timeouts_hold() {
        let (mut w, k) = Waiter::new().unwrap();
        k.wake();
        let t = Instant::now();
        assert!(w.wait(&[], Duration::from_secs(5)));
        assert!(t.elapsed() < Duration::from_secs(1));
        assert!(
            !w.wait(&[], Duration::from_millis(20)),
            "the wake was consumed"
        );
    }

    #[test]
    fn input_on_a_descriptor_ends_the_wait() {
        let (mut w, _k) = Waiter::new().unwrap();
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        std::io::Write::write_all(&mut b, b"x").unwrap();
        let t = Instant::now();
        assert!(!w.wait(&[a.as_raw_fd()], Duration::from_secs(5)));
        assert!(t.elapsed() < Duration::from_secs(1));
    }
}
