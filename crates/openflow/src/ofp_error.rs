//! OpenFlow error numbers (the error types, and the codes a switch commonly sends, as
//! constants) and [`error_reply`], the `OFPT_ERROR` answering a request.

use crate::header::{Header, version};
use crate::msg::{Body, ErrorMsg, Msg};

/// `OFPET_HELLO_FAILED`.
pub const HELLO_FAILED: u16 = 0;
/// `OFPHFC_INCOMPATIBLE`.
pub const HELLO_INCOMPATIBLE: u16 = 0;
/// `OFPET_BAD_REQUEST`.
pub const BAD_REQUEST: u16 = 1;
/// `OFPBRC_BAD_VERSION`.
pub const BAD_REQUEST_BAD_VERSION: u16 = 0;
/// `OFPBRC_BAD_TYPE`.
pub const BAD_REQUEST_BAD_TYPE: u16 = 1;
/// `OFPBRC_BAD_STAT` (`BAD_MULTIPART`).
pub const BAD_REQUEST_BAD_STAT: u16 = 2;
/// `OFPBRC_BAD_VENDOR` (`BAD_EXPERIMENTER`).
pub const BAD_REQUEST_BAD_VENDOR: u16 = 3;
/// `OFPBRC_BAD_SUBTYPE` (`BAD_EXP_TYPE`).
pub const BAD_REQUEST_BAD_SUBTYPE: u16 = 4;
/// `OFPBRC_BAD_LEN`.
pub const BAD_REQUEST_BAD_LEN: u16 = 6;
/// `OFPET_BAD_ACTION`.
pub const BAD_ACTION: u16 = 2;
/// `OFPBAC_BAD_TYPE`.
pub const BAD_ACTION_BAD_TYPE: u16 = 0;
/// `OFPBAC_BAD_LEN`.
pub const BAD_ACTION_BAD_LEN: u16 = 1;
/// `OFPBAC_BAD_VENDOR_TYPE`.
pub const BAD_ACTION_BAD_VENDOR_TYPE: u16 = 3;
/// `OFPBAC_BAD_ARGUMENT`.
pub const BAD_ACTION_BAD_ARGUMENT: u16 = 5;
/// `OFPBAC_BAD_OUT_PORT`.
pub const BAD_ACTION_BAD_OUT_PORT: u16 = 4;
/// 1.1+ (`OFPET_BAD_INSTRUCTION`).
pub const BAD_INSTRUCTION: u16 = 3;
/// 1.2+ (`OFPET_BAD_MATCH`).
pub const BAD_MATCH: u16 = 4;
/// `OFPBMC_BAD_FIELD`.
pub const BAD_MATCH_BAD_FIELD: u16 = 6;
/// `OFPBMC_BAD_PREREQ`.
pub const BAD_MATCH_BAD_PREREQ: u16 = 9;
/// `OFPBMC_DUP_FIELD`.
pub const BAD_MATCH_DUP_FIELD: u16 = 10;
/// `OFPET_FLOW_MOD_FAILED` in 1.0.
pub const FLOW_MOD_FAILED_10: u16 = 3;
/// `OFPET_FLOW_MOD_FAILED` in 1.1+.
pub const FLOW_MOD_FAILED_11: u16 = 5;

/// An `OFPT_ERROR` answering `request` (its first 64 bytes are echoed, as OVS does), with
/// the request's version and xid when its header is readable.
pub fn error_reply(request: &[u8], typ: u16, code: u16, fallback_version: u8) -> Msg {
    let (version, xid) = match Header::parse(request) {
        Ok(h) if (version::OF10..=version::OF15).contains(&h.version) => (h.version, h.xid),
        Ok(h) => (fallback_version, h.xid),
        Err(_) => (fallback_version, 0),
    };
    Msg::new(
        version,
        xid,
        Body::Error(ErrorMsg {
            typ,
            code,
            data: request[..request.len().min(64)].to_vec(),
        }),
    )
}
