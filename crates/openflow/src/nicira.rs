//! Nicira (`NX_VENDOR_ID` = `0x00002320`) vendor messages: their subtype numbers and the
//! decoding of `OFPT_VENDOR` / `OFPT_EXPERIMENTER` messages into the `Nx*` [`Body`]
//! variants (bundles of ONF's experimenter id in 1.3 included; other vendors stay
//! [`Body::Experimenter`]). Every Nicira message starts with `vendor:32, subtype:32` after
//! the OpenFlow header.

use crate::bundle::{
    ONF_VENDOR_ID, ONFT_BUNDLE_ADD_MESSAGE, ONFT_BUNDLE_CONTROL, decode_bundle_add,
    decode_bundle_control,
};
use crate::codec::{Rd, Wr};
use crate::error::{Result, invalid};
use crate::flow_mod::FlowMod;
use crate::header::version;
use crate::msg::{Body, done, masks6};
use crate::packet::{FlowRemoved, PacketIn};

/// Nicira's vendor id.
pub const NX_VENDOR_ID: u32 = 0x0000_2320;

/// Nicira message subtypes.
#[allow(missing_docs)]
pub mod nxt {
    pub const ROLE_REQUEST: u32 = 10;
    pub const ROLE_REPLY: u32 = 11;
    pub const SET_FLOW_FORMAT: u32 = 12;
    pub const FLOW_MOD: u32 = 13;
    pub const FLOW_REMOVED: u32 = 14;
    pub const FLOW_MOD_TABLE_ID: u32 = 15;
    pub const SET_PACKET_IN_FORMAT: u32 = 16;
    pub const PACKET_IN: u32 = 17;
    pub const SET_ASYNC_CONFIG: u32 = 19;
    pub const SET_CONTROLLER_ID: u32 = 20;
    pub const RESUME: u32 = 28;
    pub const PACKET_IN2: u32 = 30;
}

/// `NXT_SET_FLOW_FORMAT` values.
#[allow(missing_docs)]
pub mod nx_flow_format {
    pub const OPENFLOW10: u32 = 0;
    pub const NXM: u32 = 2;
}

pub(crate) fn nx_header(w: &mut Wr, sub: u32) {
    w.u32(NX_VENDOR_ID);
    w.u32(sub);
}

pub(crate) fn decode_vendor(r: &mut Rd<'_>, ver: u8) -> Result<Body> {
    let experimenter = r.u32()?;
    let exp_type = r.u32()?;
    if experimenter == ONF_VENDOR_ID && ver == version::OF13 {
        match exp_type {
            ONFT_BUNDLE_CONTROL => return Ok(Body::BundleControl(decode_bundle_control(r)?)),
            ONFT_BUNDLE_ADD_MESSAGE => return Ok(Body::BundleAdd(decode_bundle_add(r, ver)?)),
            _ => {}
        }
    }
    if experimenter != NX_VENDOR_ID {
        return Ok(Body::Experimenter {
            experimenter,
            exp_type,
            body: r.rest().to_vec(),
        });
    }
    let b = match exp_type {
        nxt::FLOW_MOD => Body::NxFlowMod(FlowMod::decode_nx(r.rest(), ver)?),
        nxt::SET_FLOW_FORMAT => {
            let f = r.u32()?;
            done(r, "NXT_SET_FLOW_FORMAT")?;
            Body::NxSetFlowFormat(f)
        }
        nxt::FLOW_MOD_TABLE_ID => {
            let on = r.u8()?;
            r.skip(7)?;
            done(r, "NXT_FLOW_MOD_TABLE_ID")?;
            if on > 1 {
                return Err(invalid(format!("NXT_FLOW_MOD_TABLE_ID set={on}")));
            }
            Body::NxFlowModTableId(on == 1)
        }
        nxt::SET_PACKET_IN_FORMAT => {
            let f = r.u32()?;
            done(r, "NXT_SET_PACKET_IN_FORMAT")?;
            Body::NxSetPacketInFormat(f)
        }
        nxt::PACKET_IN => Body::NxPacketIn(PacketIn::decode_nx(r.rest())?),
        nxt::PACKET_IN2 => Body::NxPacketIn2(PacketIn::decode_nx2(r.rest(), ver)?),
        nxt::RESUME => Body::NxResume(PacketIn::decode_nx2(r.rest(), ver)?),
        nxt::FLOW_REMOVED => Body::NxFlowRemoved(FlowRemoved::decode_nx(r.rest())?),
        nxt::ROLE_REQUEST | nxt::ROLE_REPLY => {
            let role = r.u32()?;
            done(r, "NXT_ROLE")?;
            if exp_type == nxt::ROLE_REQUEST {
                Body::NxRoleRequest(role)
            } else {
                Body::NxRoleReply(role)
            }
        }
        nxt::SET_CONTROLLER_ID => {
            r.skip(6)?;
            let id = r.u16()?;
            done(r, "NXT_SET_CONTROLLER_ID")?;
            Body::NxSetControllerId(id)
        }
        nxt::SET_ASYNC_CONFIG => {
            let m = masks6(r)?;
            done(r, "NXT_SET_ASYNC_CONFIG")?;
            Body::NxSetAsyncConfig(m)
        }
        _ => Body::Experimenter {
            experimenter,
            exp_type,
            body: r.rest().to_vec(),
        },
    };
    Ok(b)
}
