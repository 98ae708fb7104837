//! Thin wrappers over the system calls an AF_XDP port makes: memory mappings, the socket and
//! its options, the wakeup kicks, and the interface facts read on attach (index, MTU, queues,
//! promiscuous membership).
//!
//! Each wrapper turns a C call into an `io::Result` and owns what it creates ([`Mapping`]
//! unmaps on drop, sockets are [`OwnedFd`]s), so the port's modules above hold no raw
//! resources.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// An `mmap`ed region, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a `Mapping` is a plain owned address range; nothing in it is tied to the thread that
// created it, and the port that owns it is moved between threads as a whole, never shared.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Anonymous private memory of `len` bytes, populated (the UMEM).
    pub(crate) fn anonymous(len: usize) -> io::Result<Mapping> {
        Self::map(
            len,
            -1,
            0,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
        )
    }

    /// The ring of socket `fd` at page offset `pgoff`, `len` bytes, shared with the kernel.
    pub(crate) fn ring(fd: RawFd, pgoff: u64, len: usize) -> io::Result<Mapping> {
        Self::map(len, fd, pgoff, libc::MAP_SHARED | libc::MAP_POPULATE)
    }

    fn map(len: usize, fd: RawFd, off: u64, flags: libc::c_int) -> io::Result<Mapping> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty mapping"));
        }
        // SAFETY: a fresh mapping chosen by the kernel (addr NULL) does not alias any Rust
        // object; the arguments are plain integers and the result is checked for MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                off as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }

    /// Start of the region.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned and nothing uses the region after
        // its owner drops it (rings and frame slices borrow from their owner).
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A new socket of `domain`/`ty`/`proto`, close-on-exec.
pub(crate) fn socket(
    domain: libc::c_int,
    ty: libc::c_int,
    proto: libc::c_int,
) -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes integers only; a non-negative result is a new descriptor owned
    // by nobody else, handed to `OwnedFd`.
    let fd = check(unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) })?;
    // SAFETY: see above: `fd` is fresh and owned here only.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(fd, level, name, &value)`.
pub(crate) fn setsockopt<T>(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` is a live `T` and the length passed is its size; the kernel only reads it.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// `getsockopt(fd, level, name)` into a zeroed `T`; errors when the kernel returns less.
pub(crate) fn getsockopt<T: Copy>(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    zero: T,
) -> io::Result<T> {
    let mut v = zero;
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `v` is a live, exclusively borrowed `T` and `len` its size; the kernel writes at
    // most `len` bytes into it and stores the length written.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut v as *mut T).cast(),
            &mut len,
        )
    })?;
    if len as usize != std::mem::size_of::<T>() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "socket option {name}: the kernel returned {len} bytes, expected {}",
                std::mem::size_of::<T>()
            ),
        ));
    }
    Ok(v)
}

/// Binds an AF_XDP socket to queue `queue` of interface `ifindex` with bind `flags`.
pub(crate) fn xdp_bind(fd: &OwnedFd, ifindex: u32, queue: u32, flags: u16) -> io::Result<()> {
    let addr = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    // SAFETY: `addr` is a live sockaddr_xdp and the length passed is its size.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_xdp).cast(),
            std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// Asks the kernel to process the tx ring (`sendto` with no data, never blocking). Transient
/// refusals (the device busy, no buffers) are not errors: the ring is kicked again later.
pub(crate) fn kick_tx(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: a zero-length send with a NULL buffer and no address: the kernel reads nothing.
    let r = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if r >= 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::ENETDOWN) => Ok(()),
        _ => Err(e),
    }
}

/// Asks the kernel to refill from the fill ring (`recvfrom` with no buffer, never blocking).
pub(crate) fn kick_rx(fd: &OwnedFd) {
    // SAFETY: a zero-length receive into a NULL buffer with no address: the kernel writes
    // nothing. Its result does not matter (the fill ring is kicked again on the next burst).
    unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
    }
}

/// The index of interface `name`, or `None` when there is no such interface.
pub(crate) fn ifindex(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

/// Reads `/sys/class/net/NAME/FILE` as a number.
fn sysfs_u32(name: &str, file: &str) -> io::Result<u32> {
    let path = format!("/sys/class/net/{name}/{file}");
    let s = std::fs::read_to_string(&path)?;
    s.trim()
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("{path}: {s:?}")))
}

/// The MTU of interface `name`.
pub(crate) fn mtu(name: &str) -> io::Result<u32> {
    sysfs_u32(name, "mtu")
}

/// The number of rx queues of interface `name` (`/sys/class/net/NAME/queues/rx-*`).
pub(crate) fn rx_queues(name: &str) -> io::Result<u32> {
    let dir = std::fs::read_dir(format!("/sys/class/net/{name}/queues"))?;
    let mut n = 0;
    for e in dir {
        if e?.file_name().to_string_lossy().starts_with("rx-") {
            n += 1;
        }
    }
    Ok(n)
}

/// Puts interface `ifindex` into promiscuous mode for as long as the returned socket lives.
///
/// A `PACKET_MR_PROMISC` membership of an AF_PACKET socket is counted by the kernel and
/// dropped when the socket closes — also when the process dies — so the interface goes back
/// to exactly the promiscuity it had. (Setting `IFF_PROMISC` with an ioctl would stay behind.)
/// The socket has protocol 0, so it receives no frames.
pub(crate) fn promisc_guard(ifindex: u32) -> io::Result<OwnedFd> {
    let fd = socket(libc::AF_PACKET, libc::SOCK_RAW, 0)?;
    let mreq = libc::packet_mreq {
        mr_ifindex: ifindex as libc::c_int,
        mr_type: libc::PACKET_MR_PROMISC as libc::c_ushort,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)?;
    Ok(fd)
}

/// Attaches (`prog` a program fd) or detaches (`-1`) an XDP program the old way, through
/// netlink (`RTM_SETLINK` with `IFLA_XDP`), as another tool would: tests use it to play
/// "someone else's program".
#[cfg(test)]
pub(crate) fn netlink_set_xdp(ifindex: u32, prog: RawFd, flags: u32) -> io::Result<()> {
    const IFLA_XDP: u16 = 43;
    const IFLA_XDP_FD: u16 = 1;
    const IFLA_XDP_FLAGS: u16 = 3;
    const NLA_F_NESTED: u16 = 1 << 15;
    let nl = socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE)?;
    let mut m: Vec<u8> = Vec::new();
    let total: u32 = 16 + 16 + 4 + 8 + 8;
    m.extend(total.to_ne_bytes());
    m.extend((libc::RTM_SETLINK).to_ne_bytes());
    m.extend(((libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16).to_ne_bytes());
    m.extend(1u32.to_ne_bytes()); // seq
    m.extend(0u32.to_ne_bytes()); // pid
    // ifinfomsg: family, pad, type, index, flags, change
    m.extend([libc::AF_UNSPEC as u8, 0]);
    m.extend(0u16.to_ne_bytes());
    m.extend((ifindex as i32).to_ne_bytes());
    m.extend(0u32.to_ne_bytes());
    m.extend(0u32.to_ne_bytes());
    m.extend(20u16.to_ne_bytes());
    m.extend((IFLA_XDP | NLA_F_NESTED).to_ne_bytes());
    m.extend(8u16.to_ne_bytes());
    m.extend(IFLA_XDP_FD.to_ne_bytes());
    m.extend(prog.to_ne_bytes());
    m.extend(8u16.to_ne_bytes());
    m.extend(IFLA_XDP_FLAGS.to_ne_bytes());
    m.extend(flags.to_ne_bytes());
    assert_eq!(m.len(), total as usize);
    // SAFETY: `m` is a live buffer of `m.len()` bytes; no address (the kernel is the default
    // destination of a netlink socket).
    let r = unsafe { libc::send(nl.as_raw_fd(), m.as_ptr().cast(), m.len(), 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut ack = [0u8; 1024];
    // SAFETY: `ack` is a live, writable buffer of its length.
    let r = unsafe { libc::recv(nl.as_raw_fd(), ack.as_mut_ptr().cast(), ack.len(), 0) };
    if r < 20 {
        return Err(io::Error::last_os_error());
    }
    // nlmsgerr: the error code follows the 16-byte header.
    let err = i32::from_ne_bytes([ack[16], ack[17], ack[18], ack[19]]);
    if err != 0 {
        return Err(io::Error::from_raw_os_error(-err));
    }
    Ok(())
}
