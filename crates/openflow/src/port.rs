//! Port descriptions (`ofp_phy_port` 1.0, `ofp_port` 1.1–1.3, `ofp_port` 1.4+ with an
//! Ethernet property) as one [`PortDesc`].
//!
//! Port numbers are kept in the OpenFlow 1.1+ 32-bit space (1.0's reserved ports
//! `0xff00..` map to `0xffffff00..`, as [`flow::ofp::OfPort::to_ofp11`] does). Speeds
//! (`curr_speed`, `max_speed`, kbps) exist from 1.1 on and are zero when read from 1.0.
//! Names are UTF-8, at most 16 bytes, NUL padded.

use crate::codec::{Rd, Wr, c_string, put_c_string};
use crate::error::{Error, Result, invalid};
use crate::header::version;
use flow::ofp::OfPort;

/// Size of `ofp_phy_port` (1.0).
pub const PORT10_LEN: usize = 48;
/// Size of `ofp_port` (1.1–1.3).
pub const PORT11_LEN: usize = 64;
/// Size of `ofp_port` (1.4+) with its Ethernet property.
pub const PORT14_LEN: usize = 72;

/// The port state bits OpenFlow 1.0 has (`LINK_DOWN` and the STP state): a 1.1+ bit such
/// as `LIVE` neither goes out nor comes in in 1.0, as OVS's `OFPPS10_ALL`.
const OF10_STATE_BITS: u32 = 0x301;

/// One port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct PortDesc {
    /// Port number (OpenFlow 1.1+ numbering).
    pub port_no: u32,
    /// Ethernet address (low 48 bits).
    pub hw_addr: u64,
    /// Name.
    pub name: String,
    /// `OFPPC_*` bits.
    pub config: u32,
    /// `OFPPS_*` bits.
    pub state: u32,
    /// Current features (`OFPPF_*`).
    pub curr: u32,
    /// Advertised features.
    pub advertised: u32,
    /// Supported features.
    pub supported: u32,
    /// Peer's features.
    pub peer: u32,
    /// Current speed, kbps (1.1+).
    pub curr_speed: u32,
    /// Maximum speed, kbps (1.1+).
    pub max_speed: u32,
}

fn port10_to_11(p: u16) -> u32 {
    OfPort(p).to_ofp11()
}

fn port11_to_10(p: u32) -> Result<u16> {
    OfPort::from_ofp11(p)
        .map(|p| p.0)
        .ok_or_else(|| invalid(format!("port 0x{p:x} has no OpenFlow 1.0 number")))
}

impl PortDesc {
    /// Reads one port description of version `ver` (OpenFlow 1.0's state keeps only the
    /// bits 1.0 defines, as OVS reads it).
    pub(crate) fn decode(r: &mut Rd<'_>, ver: u8) -> Result<PortDesc> {
        let mut p = PortDesc::default();
        if ver == version::OF10 {
            let mut r = r.sub(PORT10_LEN, "ofp_phy_port")?;
            p.port_no = port10_to_11(r.u16()?);
            p.hw_addr = r.mac()?;
            p.name = c_string(r.bytes(16)?, "port name")?;
            p.config = r.u32()?;
            p.state = r.u32()? & OF10_STATE_BITS;
            p.curr = r.u32()?;
            p.advertised = r.u32()?;
            p.supported = r.u32()?;
            p.peer = r.u32()?;
        } else if ver < version::OF14 {
            let mut r = r.sub(PORT11_LEN, "ofp_port")?;
            p.port_no = r.u32()?;
            r.skip(4)?;
            p.hw_addr = r.mac()?;
            r.skip(2)?;
            p.name = c_string(r.bytes(16)?, "port name")?;
            p.config = r.u32()?;
            p.state = r.u32()?;
            p.curr = r.u32()?;
            p.advertised = r.u32()?;
            p.supported = r.u32()?;
            p.peer = r.u32()?;
            p.curr_speed = r.u32()?;
            p.max_speed = r.u32()?;
        } else {
            let len = usize::from(r.peek_u16(4)?);
            if len < 40 || !len.is_multiple_of(8) {
                return Err(Error::BadLength {
                    what: "ofp_port",
                    len,
                });
            }
            let mut r = r.sub(len, "ofp_port")?;
            p.port_no = r.u32()?;
            r.skip(4)?;
            p.hw_addr = r.mac()?;
            r.skip(2)?;
            p.name = c_string(r.bytes(16)?, "port name")?;
            p.config = r.u32()?;
            p.state = r.u32()?;
            let mut seen_eth = false;
            while !r.is_empty() {
                let typ = r.peek_u16(0)?;
                let plen = usize::from(r.peek_u16(2)?);
                if plen < 4 {
                    return Err(Error::BadLength {
                        what: "port property",
                        len: plen,
                    });
                }
                let mut pr = r.sub(plen.next_multiple_of(8), "port property")?;
                pr.skip(4)?;
                if typ == 0 {
                    if seen_eth || plen != 32 {
                        return Err(invalid("port Ethernet property"));
                    }
                    seen_eth = true;
                    pr.skip(4)?;
                    p.curr = pr.u32()?;
                    p.advertised = pr.u32()?;
                    p.supported = pr.u32()?;
                    p.peer = pr.u32()?;
                    p.curr_speed = pr.u32()?;
                    p.max_speed = pr.u32()?;
                }
            }
        }
        Ok(p)
    }

    /// Writes the description in version `ver`.
    pub(crate) fn encode(&self, w: &mut Wr, ver: u8) -> Result<()> {
        if ver == version::OF10 {
            w.u16(port11_to_10(self.port_no)?);
            w.mac(self.hw_addr);
            put_c_string(w, &self.name, 16);
            for v in [
                self.config,
                self.state & OF10_STATE_BITS,
                self.curr,
                self.advertised,
                self.supported,
                self.peer,
            ] {
                w.u32(v);
            }
        } else if ver < version::OF14 {
            w.u32(self.port_no);
            w.zeros(4);
            w.mac(self.hw_addr);
            w.zeros(2);
            put_c_string(w, &self.name, 16);
            for v in [
                self.config,
                self.state,
                self.curr,
                self.advertised,
                self.supported,
                self.peer,
                self.curr_speed,
                self.max_speed,
            ] {
                w.u32(v);
            }
        } else {
            w.u32(self.port_no);
            w.u16(PORT14_LEN as u16);
            w.zeros(2);
            w.mac(self.hw_addr);
            w.zeros(2);
            put_c_string(w, &self.name, 16);
            w.u32(self.config);
            w.u32(self.state);
            w.u16(0);
            w.u16(32);
            w.zeros(4);
            for v in [
                self.curr,
                self.advertised,
                self.supported,
                self.peer,
                self.curr_speed,
                self.max_speed,
            ] {
                w.u32(v);
            }
        }
        Ok(())
    }
}
