//! Bundles: `OFPT_BUNDLE_CONTROL` / `OFPT_BUNDLE_ADD_MESSAGE` (OpenFlow 1.4+), which OVS also
//! accepts in 1.3 as ONF experimenter messages (`ONFT_BUNDLE_CONTROL` 2300,
//! `ONFT_BUNDLE_ADD_MESSAGE` 2301) with the same body. A bundled message is a whole message
//! of the envelope's version, kept decoded.

use crate::codec::Rd;
use crate::error::{Result, invalid};
use crate::msg::{Body, Msg};

/// ONF's experimenter id (bundles in OpenFlow 1.3).
pub const ONF_VENDOR_ID: u32 = 0x4f4e_4600;
/// `ONFT_BUNDLE_CONTROL`.
pub const ONFT_BUNDLE_CONTROL: u32 = 2300;
/// `ONFT_BUNDLE_ADD_MESSAGE`.
pub const ONFT_BUNDLE_ADD_MESSAGE: u32 = 2301;
/// `OFPT_BUNDLE_CONTROL` (1.4+).
pub const OFPT_BUNDLE_CONTROL: u8 = 33;
/// `OFPT_BUNDLE_ADD_MESSAGE` (1.4+).
pub const OFPT_BUNDLE_ADD_MESSAGE: u8 = 34;

/// A bundle control request or reply.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BundleControl {
    /// Bundle id.
    pub bundle_id: u32,
    /// `OFPBCT_*`: 0 open request, 1 open reply, 2 close request, 3 close reply, 4 commit
    /// request, 5 commit reply, 6 discard request, 7 discard reply.
    pub ctrl_type: u16,
    /// `OFPBF_ATOMIC` = 1, `OFPBF_ORDERED` = 2.
    pub flags: u16,
    /// Properties, raw.
    pub props: Vec<u8>,
}

/// A message added to a bundle.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BundleAdd {
    /// Bundle id.
    pub bundle_id: u32,
    /// Flags (as in the bundle's open request).
    pub flags: u16,
    /// The message (same version as the envelope).
    pub msg: Box<Msg>,
    /// What follows the message (padding and properties), raw.
    pub props: Vec<u8>,
}

pub(crate) fn decode_bundle_control(r: &mut Rd<'_>) -> Result<BundleControl> {
    Ok(BundleControl {
        bundle_id: r.u32()?,
        ctrl_type: r.u16()?,
        flags: r.u16()?,
        props: r.rest().to_vec(),
    })
}

pub(crate) fn decode_bundle_add(r: &mut Rd<'_>, ver: u8) -> Result<BundleAdd> {
    let bundle_id = r.u32()?;
    r.skip(2)?;
    let flags = r.u16()?;
    let len = usize::from(r.peek_u16(2)?);
    let inner = r.bytes(len)?;
    let msg = Msg::decode(inner)?;
    if msg.version != ver {
        return Err(invalid("bundled message of another version"));
    }
    if matches!(msg.body, Body::BundleAdd(_)) {
        return Err(invalid("bundle add inside bundle add"));
    }
    Ok(BundleAdd {
        bundle_id,
        flags,
        msg: Box::new(msg),
        props: r.rest().to_vec(),
    })
}
