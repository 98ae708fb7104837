//! The XDP redirect program, its XSKMAP and its attachment, through the raw `bpf(2)` syscall.
//!
//! # Why a program assembled in code
//!
//! The program is five eBPF instructions (below); assembling them here needs no C toolchain,
//! no object file, no libbpf/libxdp and no `aya`/`xdp` dependency, and leaves nothing on disk.
//!
//! ```text
//! r2 = *(u32 *)(r1 + 16)      ; ctx->rx_queue_index
//! r1 = map_fd ll              ; the XSKMAP (BPF_PSEUDO_MAP_FD)
//! r3 = XDP_PASS               ; action when the map has no socket for that queue
//! call bpf_redirect_map       ; r0 = XDP_REDIRECT, or r3 when the slot is empty
//! exit
//! ```
//!
//! # Why a BPF link
//!
//! The program is attached with `BPF_LINK_CREATE` (attach type `BPF_XDP`), not with the older
//! netlink `IFLA_XDP` call: a link belongs to its file descriptor, so the kernel detaches the
//! program when the last descriptor closes — when the port is dropped, and also when the
//! process dies by a signal or a panic. No XDP program is ever left on an interface by a
//! flowswitch that went away. A link also refuses (`EBUSY`/`EEXIST`) to replace a program
//! someone else attached, which is how `attach` detects an interface already taken.
//! Dropping the `Link` also detaches explicitly (`BPF_LINK_DETACH`) before closing: a child
//! process between fork and exec holds copies of all descriptors for a moment, which would
//! otherwise delay the detach past the drop.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_LINK_DETACH: libc::c_long = 34;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const XDP_PASS: i32 = 2;

/// `XDP_FLAGS_SKB_MODE`: generic XDP, in the stack, for any driver.
pub(crate) const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`: native XDP, in the driver.
pub(crate) const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Insn {
    code: u8,
    /// dst_reg in the low nibble, src_reg in the high one.
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0x0f),
        off,
        imm,
    }
}

/// The redirect program for the XSKMAP `map_fd` (see the module doc).
pub(crate) fn redirect_program(map_fd: RawFd) -> [Insn; 6] {
    [
        // BPF_LDX | BPF_MEM | BPF_W: r2 = *(u32 *)(r1 + 16)
        insn(0x61, 2, 1, 16, 0),
        // BPF_LD | BPF_DW | BPF_IMM (two slots): r1 = map
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        // BPF_ALU64 | BPF_MOV | BPF_K: r3 = XDP_PASS
        insn(0xb7, 3, 0, 0, XDP_PASS),
        // BPF_JMP | BPF_CALL
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        // BPF_JMP | BPF_EXIT
        insn(0x95, 0, 0, 0, 0),
    ]
}

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkDetachAttr {
    link_fd: u32,
}

/// `bpf(cmd, attr, size_of::<A>())`, returning the new file descriptor.
fn bpf_fd<A>(cmd: libc::c_long, attr: &mut A) -> io::Result<OwnedFd> {
    let r = bpf(cmd, attr)?;
    // SAFETY: the commands passed here (map create, prog load, link create) return a new
    // file descriptor that nothing else owns; wrapping it makes this the only owner.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// `bpf(cmd, attr, size_of::<A>())`.
fn bpf<A>(cmd: libc::c_long, attr: &mut A) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, exclusively borrowed `#[repr(C)]` prefix of `union bpf_attr`
    // for `cmd` (layouts above follow include/uapi/linux/bpf.h) and the size passed is its
    // size, so the kernel reads and writes only within it. Every pointer stored in it points
    // to memory the caller keeps alive for the duration of the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut A as *mut libc::c_void,
            std::mem::size_of::<A>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn name16(s: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    for (d, b) in n.iter_mut().zip(s.bytes().take(15)) {
        *d = b;
    }
    n
}

/// Creates an XSKMAP with `entries` slots (one per queue).
pub(crate) fn create_xskmap(entries: u32) -> io::Result<OwnedFd> {
    let mut attr = MapCreateAttr {
        map_type: BPF_MAP_TYPE_XSKMAP,
        key_size: 4,
        value_size: 4,
        max_entries: entries,
        map_name: name16("fs_xsks"),
        ..Default::default()
    };
    bpf_fd(BPF_MAP_CREATE, &mut attr)
}

/// Puts the AF_XDP socket `sock` into slot `key` of the XSKMAP `map`.
pub(crate) fn xskmap_set(map: &OwnedFd, key: u32, sock: RawFd) -> io::Result<()> {
    let value = sock as u32;
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: &key as *const u32 as u64,
        value: &value as *const u32 as u64,
        ..Default::default()
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
}

/// Loads the redirect program for `map`. On failure the error carries the verifier's log.
pub(crate) fn load_redirect_program(map: &OwnedFd) -> io::Result<OwnedFd> {
    load_xdp(&redirect_program(map.as_raw_fd()))
}

/// Loads the XDP program `prog`. On failure the error carries the verifier's log.
fn load_xdp(prog: &[Insn]) -> io::Result<OwnedFd> {
    let license: &CStr = c"Apache-2.0";
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: prog.len() as u32,
        insns: prog.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: name16("fs_xsk_redir"),
        expected_attach_type: BPF_XDP,
        ..Default::default()
    };
    match bpf_fd(BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => Ok(fd),
        Err(first) => {
            // Again, with the verifier's log captured into the error.
            let mut log = vec![0u8; 64 * 1024];
            attr.log_level = 1;
            attr.log_size = log.len() as u32;
            attr.log_buf = log.as_mut_ptr() as u64;
            match bpf_fd(BPF_PROG_LOAD, &mut attr) {
                Ok(fd) => Ok(fd),
                Err(e) => {
                    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                    let text = String::from_utf8_lossy(&log[..end]);
                    Err(io::Error::new(
                        e.kind(),
                        format!(
                            "loading the XDP program failed: {first}; verifier log: {}",
                            text.trim()
                        ),
                    ))
                }
            }
        }
    }
}

/// An XDP program attached to an interface through a BPF link; detached on drop.
#[derive(Debug)]
pub(crate) struct Link {
    fd: OwnedFd,
}

impl Drop for Link {
    fn drop(&mut self) {
        // Closing the last descriptor of the link detaches the program. A child process
        // between fork and exec (any `Command` spawned by another thread) briefly holds a copy
        // of every descriptor, which would delay that close; detaching explicitly first
        // (`BPF_LINK_DETACH`, kernel 5.9+) removes the program now. If it fails, the close
        // below still detaches it, at the latest when such a copy goes away.
        let mut attr = LinkDetachAttr {
            link_fd: self.fd.as_raw_fd() as u32,
        };
        let _ = bpf(BPF_LINK_DETACH, &mut attr);
    }
}

/// Attaches `prog` to interface `ifindex` through a BPF link with XDP `flags` (a mode flag).
/// The link owns the attachment: dropping it (or the process dying) detaches the program.
pub(crate) fn attach(prog: &OwnedFd, ifindex: u32, flags: u32) -> io::Result<Link> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags,
    };
    bpf_fd(BPF_LINK_CREATE, &mut attr).map(|fd| Link { fd })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_layouts_match_the_uapi() {
        assert_eq!(std::mem::size_of::<Insn>(), 8);
        assert_eq!(std::mem::size_of::<MapCreateAttr>(), 44);
        assert_eq!(std::mem::size_of::<MapElemAttr>(), 32);
        assert_eq!(std::mem::size_of::<ProgLoadAttr>(), 72);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, expected_attach_type), 68);
        assert_eq!(std::mem::size_of::<LinkCreateAttr>(), 16);
    }

    #[test]
    fn program_encoding() {
        let p = redirect_program(7);
        // ld_imm64 with the map pseudo source register and the fd in imm
        assert_eq!((p[1].code, p[1].regs, p[1].imm), (0x18, 0x11, 7));
        // ctx->rx_queue_index into r2
        assert_eq!((p[0].code, p[0].regs, p[0].off), (0x61, 0x12, 16));
        assert_eq!(p[4].imm, BPF_FUNC_REDIRECT_MAP);
        assert_eq!(p[5].code, 0x95);
    }

    #[test]
    fn a_refused_program_carries_the_verifier_log() {
        if let Some(r) = crate::afxdp::afxdp_missing_reason() {
            testutil::skip(&r);
            return;
        }
        // `exit` with r0 never written: the verifier refuses it.
        let err = load_xdp(&[insn(0x95, 0, 0, 0, 0)]).unwrap_err().to_string();
        assert!(err.contains("verifier log") && err.contains("R0"), "{err}");
        let map = create_xskmap(1).unwrap();
        drop(load_redirect_program(&map).unwrap());
    }
}
