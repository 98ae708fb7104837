//! Wire codec of the load-balancing actions (issue #17, session 13).
//!
//! | action | wire (every OpenFlow version) |
//! |---|---|
//! | `multipath(...)` | `NXAST_MULTIPATH` (subtype 10, 32 bytes): fields, basis, 2 pad, algorithm, max_link, arg, 2 pad, ofs_nbits, dst header |

use crate::action::{
    EncodeCtx, enc_ofs_nbits, end_action, nx_start, nxm_hdr, ofs_nbits, put_hdr_u32,
};
use crate::codec::{Rd, Wr};
use crate::error::{Result, invalid};
use flow::ofp::Action;
use flow::ofp::lb::{HashFields, MpAlgorithm, Multipath};

/// `NXAST_MULTIPATH`.
pub const NXAST_MULTIPATH: u16 = 10;

/// Decodes the body of `NXAST_MULTIPATH` (after the subtype), checked as OVS's decoder
/// checks it (`OFPBAC_BAD_ARGUMENT` for unknown fields or algorithm, or a destination too
/// narrow for the links).
pub(crate) fn decode_nx_multipath(a: &mut Rd<'_>) -> Result<Action> {
    let fields = a.u16()?;
    let basis = a.u16()?;
    a.skip(2)?;
    let algorithm = a.u16()?;
    let max_link = a.u16()?;
    let arg = a.u32()?;
    a.skip(2)?;
    let on = a.u16()?;
    let mf = crate::action::read_subfield_header(a)?;
    let dst = ofs_nbits(on, mf)?;
    let fields = HashFields::from_code(fields)
        .ok_or_else(|| invalid(format!("OFPBAC_BAD_ARGUMENT: unsupported fields {fields}")))?;
    let algorithm = MpAlgorithm::from_code(algorithm).ok_or_else(|| {
        invalid(format!(
            "OFPBAC_BAD_ARGUMENT: unsupported algorithm {algorithm}"
        ))
    })?;
    let n_links = u32::from(max_link) + 1;
    // log2 ceiling of n_links
    let min_bits = 32 - (n_links - 1).leading_zeros();
    if dst.n_bits < min_bits {
        return Err(invalid(format!(
            "OFPBAC_BAD_ARGUMENT: multipath action requires at least {min_bits} bits for {n_links} links"
        )));
    }
    Ok(Action::Multipath(Multipath {
        fields,
        basis,
        algorithm,
        max_link,
        arg,
        dst,
    }))
}

/// Encodes an action of this module; `None` for the others.
pub(crate) fn encode_lb(w: &mut Wr, a: &Action, _cx: EncodeCtx) -> Option<Result<()>> {
    Some(match a {
        Action::Multipath(mp) => (|| {
            let d = nxm_hdr(mp.dst.field)?;
            let s = nx_start(w, NXAST_MULTIPATH);
            w.u16(mp.fields as u16);
            w.u16(mp.basis);
            w.zeros(2);
            w.u16(mp.algorithm as u16);
            w.u16(mp.max_link);
            w.u32(mp.arg);
            w.zeros(2);
            w.u16(enc_ofs_nbits(&mp.dst));
            put_hdr_u32(w, d)?;
            end_action(w, s)
        })(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::{decode_actions, encode_action_list};
    use crate::header::version;
    use flow::ofp::{Mf, Subfield};

    fn cx(v: u8) -> EncodeCtx {
        EncodeCtx {
            version: v,
            nw_proto: 0,
        }
    }

    #[test]
    fn multipath_round_trips_and_is_checked() {
        let mp = Multipath {
            fields: HashFields::SymmetricL3L4Udp,
            basis: 1024,
            algorithm: MpAlgorithm::IterHash,
            max_link: 4999,
            arg: 5000,
            dst: Subfield {
                field: Mf::Reg0,
                ofs: 0,
                n_bits: 13,
            },
        };
        for v in [version::OF10, version::OF13] {
            let b = encode_action_list(&[Action::Multipath(mp)], cx(v)).unwrap();
            assert_eq!(b.len(), 32);
            assert_eq!(&b[10..12], &[0, 3]);
            assert_eq!(decode_actions(&b, v).unwrap(), [Action::Multipath(mp)]);
            // Too narrow a destination for the links, unknown fields, unknown algorithm.
            let mut bad = b.clone();
            bad[27] = 11; // n_bits 12 < 13
            assert!(decode_actions(&bad, v).is_err());
            let mut bad = b.clone();
            bad[11] = 7;
            assert!(decode_actions(&bad, v).is_err());
            let mut bad = b.clone();
            bad[17] = 4;
            assert!(decode_actions(&bad, v).is_err());
        }
    }
}
