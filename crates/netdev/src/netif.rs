//! Linux network interfaces as the real port kinds need them: index, MTU, MAC, up/down, and
//! the one offload a userspace switch must control on its own end (GRO), through the classic
//! `ioctl`s on a throw-away `AF_INET` datagram socket.
//!
//! Every function takes the interface name as the user wrote it and checks it first
//! ([`check_name`]): at most 15 bytes, no NUL, `/` or whitespace, so a bad name is a clear
//! [`PortError::Config`] and never reaches the kernel. Errors from the kernel become
//! [`PortError::Interface`] naming the interface and the operation.
//!
//! [`GroGuard`] turns GRO off while a port is attached and restores what it found on drop:
//! with GRO on, the kernel would merge received TCP segments into frames far larger than
//! the MTU before a packet socket sees them (OVS's own system tests turn offloads off on
//! veth ends for the same reason).

use std::ffi::c_char;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::port::PortError;

/// Longest interface name (IFNAMSIZ − 1).
pub const MAX_NAME: usize = 15;

/// Checks that `name` can be an interface name.
pub fn check_name(name: &str) -> Result<(), PortError> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(PortError::Config(format!(
            "interface name {name:?} must be 1 to {MAX_NAME} bytes"
        )));
    }
    if name
        .bytes()
        .any(|b| b == 0 || b == b'/' || b == b':' || b.is_ascii_whitespace())
    {
        return Err(PortError::Config(format!(
            "interface name {name:?} contains a character Linux refuses"
        )));
    }
    Ok(())
}

fn os_err(name: &str, op: &'static str, source: io::Error) -> PortError {
    PortError::Interface {
        name: name.to_owned(),
        op,
        source,
    }
}

/// A zeroed `ifreq` naming `name` (checked by the caller).
pub(crate) fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: `ifreq` is a plain C struct (a name array and a union of integers, addresses and
    // a pointer) for which all-zero bytes are a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as c_char;
    }
    req
}

fn ctl_socket(name: &str) -> Result<OwnedFd, PortError> {
    // SAFETY: socket(2) with constant arguments; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(os_err(name, "socket", io::Error::last_os_error()));
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Runs one interface `ioctl` with `req`.
fn ioctl(
    name: &str,
    op: &'static str,
    request: libc::Ioctl,
    req: &mut libc::ifreq,
) -> Result<(), PortError> {
    let sock = ctl_socket(name)?;
    // SAFETY: `request` is one of the interface ioctls, which read and write only the
    // `ifreq` passed, valid and exclusively borrowed for the call.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), request, req as *mut libc::ifreq) };
    if r < 0 {
        return Err(os_err(name, op, io::Error::last_os_error()));
    }
    Ok(())
}

/// The interface's index, or a clear error when it does not exist.
pub fn ifindex(name: &str) -> Result<u32, PortError> {
    check_name(name)?;
    let mut req = ifreq(name);
    ioctl(name, "find interface", libc::SIOCGIFINDEX, &mut req)?;
    // SAFETY: SIOCGIFINDEX succeeded, so the kernel wrote the index member of the union.
    let idx = unsafe { req.ifr_ifru.ifru_ifindex };
    u32::try_from(idx).map_err(|_| PortError::Config(format!("{name}: bad index {idx}")))
}

/// The interface's MTU.
pub fn mtu(name: &str) -> Result<u32, PortError> {
    check_name(name)?;
    let mut req = ifreq(name);
    ioctl(name, "get MTU", libc::SIOCGIFMTU, &mut req)?;
    // SAFETY: SIOCGIFMTU succeeded, so the kernel wrote the MTU member of the union.
    let m = unsafe { req.ifr_ifru.ifru_mtu };
    Ok(m.max(0) as u32)
}

/// The interface's Ethernet address.
pub fn mac(name: &str) -> Result<[u8; 6], PortError> {
    check_name(name)?;
    let mut req = ifreq(name);
    ioctl(name, "get MAC address", libc::SIOCGIFHWADDR, &mut req)?;
    // SAFETY: SIOCGIFHWADDR succeeded, so the kernel wrote the hardware address member.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut m = [0u8; 6];
    for (d, s) in m.iter_mut().zip(sa.sa_data.iter()) {
        *d = *s as u8;
    }
    Ok(m)
}

/// The interface's flags (`IFF_*`).
pub fn flags(name: &str) -> Result<u32, PortError> {
    check_name(name)?;
    let mut req = ifreq(name);
    ioctl(name, "get flags", libc::SIOCGIFFLAGS, &mut req)?;
    // SAFETY: SIOCGIFFLAGS succeeded, so the kernel wrote the flags member of the union.
    Ok(u32::from(unsafe { req.ifr_ifru.ifru_flags } as u16))
}

/// Brings the interface up (no change when it is up already).
pub fn set_up(name: &str) -> Result<(), PortError> {
    let f = flags(name)?;
    if f & libc::IFF_UP as u32 != 0 {
        return Ok(());
    }
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_flags = (f | libc::IFF_UP as u32) as u16 as libc::c_short;
    ioctl(name, "set up", libc::SIOCSIFFLAGS, &mut req)
}

/// `struct ethtool_value` of `<linux/ethtool.h>`.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

const ETHTOOL_GGRO: u32 = 0x2b;
const ETHTOOL_SGRO: u32 = 0x2c;

fn ethtool_value(name: &str, op: &'static str, cmd: u32, data: u32) -> Result<u32, PortError> {
    check_name(name)?;
    let mut v = EthtoolValue { cmd, data };
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_data = (&mut v as *mut EthtoolValue).cast::<c_char>();
    ioctl(name, op, libc::SIOCETHTOOL as libc::Ioctl, &mut req)?;
    Ok(v.data)
}

/// Whether GRO is on.
pub fn gro(name: &str) -> Result<bool, PortError> {
    ethtool_value(name, "get GRO", ETHTOOL_GGRO, 0).map(|d| d != 0)
}

/// Turns GRO on or off.
pub fn set_gro(name: &str, on: bool) -> Result<(), PortError> {
    ethtool_value(name, "set GRO", ETHTOOL_SGRO, u32::from(on)).map(|_| ())
}

/// GRO turned off on an interface for as long as this lives, then restored (module doc).
#[derive(Debug)]
pub struct GroGuard {
    name: String,
    was_on: bool,
}

impl GroGuard {
    /// Turns GRO off on `name` if it is on. `Ok(None)` when it was already off; an error
    /// when it is on and cannot be turned off.
    pub fn off(name: &str) -> Result<Option<GroGuard>, PortError> {
        match gro(name) {
            Ok(true) => {
                set_gro(name, false)?;
                Ok(Some(GroGuard {
                    name: name.to_owned(),
                    was_on: true,
                }))
            }
            Ok(false) => Ok(None),
            // No ethtool support (some virtual devices): nothing to turn off.
            Err(PortError::Interface { source, .. })
                if source.raw_os_error() == Some(libc::EOPNOTSUPP) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

impl Drop for GroGuard {
    fn drop(&mut self) {
        if self.was_on {
            // The interface may be gone already (a deleted veth); nothing to restore then.
            let _ = set_gro(&self.name, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_are_refused_before_the_kernel() {
        for n in ["", "0123456789abcdef", "a/b", "a b", "a\0b", "eth0:1"] {
            assert!(matches!(ifindex(n), Err(PortError::Config(_))), "{n:?}");
        }
    }

    #[test]
    fn loopback_is_found_and_a_missing_interface_is_a_clear_error() {
        let lo = ifindex("lo").expect("lo exists");
        assert!(lo >= 1);
        assert!(mtu("lo").unwrap() >= 1500);
        assert!(flags("lo").unwrap() & libc::IFF_LOOPBACK as u32 != 0);
        let e = ifindex("fsnosuchif0").unwrap_err().to_string();
        assert!(
            e.contains("fsnosuchif0") && e.contains("find interface"),
            "{e}"
        );
    }
}
