//! Wire codec of the load-balancing actions (issue #17, session 13).
//!
//! | action | wire (every OpenFlow version) |
//! |---|---|
//! | `multipath(...)` | `NXAST_MULTIPATH` (subtype 10, 32 bytes): fields, basis, 2 pad, algorithm, max_link, arg, 2 pad, ofs_nbits, dst header |
//! | `sample(...)` | `NXAST_SAMPLE` (29, 24 bytes), or `NXAST_SAMPLE2` (38, 32 bytes: + sampling port) with a sampling port, or `NXAST_SAMPLE3` (41: + direction) with a direction, as OVS chooses |
//! | `check_pkt_larger(N)->dst` | `NXAST_CHECK_PKT_LARGER` (49, 24 bytes): pkt_len, the bit offset, the destination's header, zeros |
//! | `bundle(...)` / `bundle_load(...)` | `NXAST_BUNDLE` (12) / `NXAST_BUNDLE_LOAD` (13): algorithm, fields, basis, member type (`NXM_OF_IN_PORT`), n_members, ofs_nbits, dst header (zero for `bundle`), 4 zero bytes, then the members (16 bits each), padded to 8 |

use crate::action::{
    EncodeCtx, enc_ofs_nbits, end_action, nx_start, nxm_hdr, ofs_nbits, put_hdr_u32,
};
use crate::codec::{Rd, Wr};
use crate::error::{Result, invalid};
use flow::ofp::lb::{
    BUNDLE_MAX_MEMBERS, Bundle, BundleAlgorithm, HashFields, MpAlgorithm, Multipath, Sample,
    SampleDirection,
};
use flow::ofp::{Action, OfPort};

/// `NXAST_MULTIPATH`.
pub const NXAST_MULTIPATH: u16 = 10;

/// `NXAST_BUNDLE`.
pub const NXAST_BUNDLE: u16 = 12;
/// `NXAST_BUNDLE_LOAD`.
pub const NXAST_BUNDLE_LOAD: u16 = 13;
/// `NXM_OF_IN_PORT`'s header, the only member type.
const MEMBER_TYPE_IN_PORT: u32 = 0x0000_0002;

/// Decodes the body of `NXAST_BUNDLE` / `NXAST_BUNDLE_LOAD` (after the subtype), checked as
/// OVS's `decode_bundle` (`OFPBAC_BAD_ARGUMENT`, `OFPBAC_BAD_LEN`).
pub(crate) fn decode_nx_bundle(a: &mut Rd<'_>, load: bool) -> Result<Action> {
    let algorithm = a.u16()?;
    let fields = a.u16()?;
    let basis = a.u16()?;
    let member_type = a.u32()?;
    let n = usize::from(a.u16()?);
    let on = a.u16()?;
    let bad = |m: String| invalid(format!("OFPBAC_BAD_ARGUMENT: {m}"));
    let dst = if load {
        let mf = crate::action::read_subfield_header(a)?;
        let d = ofs_nbits(on, mf)?;
        if d.n_bits < 16 {
            return Err(bad(
                "bundle_load action requires at least 16 bit destination".into(),
            ));
        }
        Some(d)
    } else {
        let raw = a.u32()?;
        if on != 0 || raw != 0 {
            return Err(bad("bundle action has nonzero reserved fields".into()));
        }
        None
    };
    if a.bytes(4)?.iter().any(|b| *b != 0) {
        return Err(bad("reserved field is nonzero".into()));
    }
    let fields =
        HashFields::from_code(fields).ok_or_else(|| bad(format!("unsupported fields {fields}")))?;
    if n > BUNDLE_MAX_MEMBERS {
        return Err(bad("too many members".into()));
    }
    let algorithm = BundleAlgorithm::from_code(algorithm)
        .ok_or_else(|| bad(format!("unsupported algorithm {algorithm}")))?;
    if member_type != MEMBER_TYPE_IN_PORT {
        return Err(bad(format!("unsupported member type {member_type}")));
    }
    if a.remaining() < 2 * n {
        return Err(invalid(format!(
            "OFPBAC_BAD_LEN: {} bytes allocated for members, {} required for {n} members",
            a.remaining(),
            2 * n
        )));
    }
    let members = (0..n)
        .map(|_| a.u16().map(OfPort))
        .collect::<Result<Vec<_>>>()?;
    Ok(Action::Bundle(Bundle {
        fields,
        basis,
        algorithm,
        dst,
        members,
    }))
}

/// `NXAST_SAMPLE`.
pub const NXAST_SAMPLE: u16 = 29;
/// `NXAST_SAMPLE2`.
pub const NXAST_SAMPLE2: u16 = 38;
/// `NXAST_SAMPLE3`.
pub const NXAST_SAMPLE3: u16 = 41;

/// Decodes the body of `NXAST_SAMPLE`, `NXAST_SAMPLE2` or `NXAST_SAMPLE3` (after the
/// subtype), checked as OVS's decoders (probability 0 and an unknown direction are
/// `OFPBAC_BAD_ARGUMENT`, non-zero padding of `SAMPLE3` `NXBRC_MUST_BE_ZERO`).
pub(crate) fn decode_nx_sample(a: &mut Rd<'_>, sub: u16) -> Result<Action> {
    let probability = a.u16()?;
    let collector_set_id = a.u32()?;
    let obs_domain_id = a.u32()?;
    let obs_point_id = a.u32()?;
    let mut s = Sample {
        probability,
        collector_set_id,
        obs_domain_id,
        obs_point_id,
        sampling_port: OfPort::ANY,
        direction: SampleDirection::Default,
    };
    if sub != NXAST_SAMPLE {
        s.sampling_port = OfPort(a.u16()?);
        let dir = a.u8()?;
        let zeros = a.bytes(5)?;
        if sub == NXAST_SAMPLE3 {
            if zeros.iter().any(|b| *b != 0) {
                return Err(invalid("NXAST_SAMPLE3: NXBRC_MUST_BE_ZERO"));
            }
            s.direction = match dir {
                0 => SampleDirection::Default,
                1 => SampleDirection::Ingress,
                2 => SampleDirection::Egress,
                d => {
                    return Err(invalid(format!(
                        "OFPBAC_BAD_ARGUMENT: invalid sample direction {d}"
                    )));
                }
            };
        }
    }
    if probability == 0 {
        return Err(invalid("OFPBAC_BAD_ARGUMENT: sample probability 0"));
    }
    Ok(Action::Sample(s))
}

/// `NXAST_CHECK_PKT_LARGER`.
pub const NXAST_CHECK_PKT_LARGER: u16 = 49;

/// Decodes the body of `NXAST_CHECK_PKT_LARGER` (after the subtype): the rest must be zero
/// (`NXBRC_MUST_BE_ZERO`) and the destination writable (`mf_check_dst` without a match).
pub(crate) fn decode_nx_check_pkt_larger(a: &mut Rd<'_>) -> Result<Action> {
    let pkt_len = a.u16()?;
    let ofs = u32::from(a.u16()?);
    let mf = crate::action::read_subfield_header(a)?;
    let dst = crate::action::subfield(mf, ofs, 1)?;
    if a.rest().iter().any(|b| *b != 0) {
        return Err(invalid("NXAST_CHECK_PKT_LARGER: NXBRC_MUST_BE_ZERO"));
    }
    if !mf.def().writable {
        return Err(invalid(
            "OFPBAC_BAD_SET_ARGUMENT: check_pkt_larger destination not writable",
        ));
    }
    Ok(Action::CheckPktLarger { pkt_len, dst })
}

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
        Action::Bundle(b) => (|| {
            let s = nx_start(
                w,
                if b.dst.is_some() {
                    NXAST_BUNDLE_LOAD
                } else {
                    NXAST_BUNDLE
                },
            );
            w.u16(b.algorithm as u16);
            w.u16(b.fields as u16);
            w.u16(b.basis);
            w.u32(MEMBER_TYPE_IN_PORT);
            w.u16(b.members.len() as u16);
            match &b.dst {
                Some(d) => {
                    w.u16(enc_ofs_nbits(d));
                    put_hdr_u32(w, nxm_hdr(d.field)?)?;
                }
                None => {
                    w.u16(0);
                    w.u32(0);
                }
            }
            w.zeros(4);
            for m in &b.members {
                w.u16(m.0);
            }
            end_action(w, s)
        })(),
        Action::Sample(x) => {
            let sub = if x.direction != SampleDirection::Default {
                NXAST_SAMPLE3
            } else if x.sampling_port != OfPort::ANY {
                NXAST_SAMPLE2
            } else {
                NXAST_SAMPLE
            };
            let s = nx_start(w, sub);
            w.u16(x.probability);
            w.u32(x.collector_set_id);
            w.u32(x.obs_domain_id);
            w.u32(x.obs_point_id);
            if sub != NXAST_SAMPLE {
                w.u16(x.sampling_port.0);
                w.u8(x.direction as u8);
                w.zeros(5);
            }
            end_action(w, s)
        }
        Action::CheckPktLarger { pkt_len, dst } => (|| {
            let s = nx_start(w, NXAST_CHECK_PKT_LARGER);
            w.u16(*pkt_len);
            w.u16(dst.ofs as u16);
            put_hdr_u32(w, nxm_hdr(dst.field)?)?;
            w.zeros(6);
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
    fn sample_round_trips_in_the_form_ovs_picks() {
        let mut x = Sample {
            probability: 12345,
            collector_set_id: 23456,
            obs_domain_id: 34567,
            obs_point_id: 45678,
            sampling_port: OfPort::ANY,
            direction: SampleDirection::Default,
        };
        for (port, dir, sub, len) in [
            (OfPort::ANY, SampleDirection::Default, NXAST_SAMPLE, 24),
            (OfPort(7), SampleDirection::Default, NXAST_SAMPLE2, 32),
            (OfPort::ANY, SampleDirection::Egress, NXAST_SAMPLE3, 32),
        ] {
            x.sampling_port = port;
            x.direction = dir;
            let enc = encode_action_list(&[Action::Sample(x)], cx(version::OF13)).unwrap();
            assert_eq!(
                (enc.len(), u16::from_be_bytes([enc[8], enc[9]])),
                (len, sub)
            );
            assert_eq!(
                decode_actions(&enc, version::OF13).unwrap(),
                [Action::Sample(x)]
            );
            let mut bad = enc.clone();
            bad[10..12].copy_from_slice(&[0, 0]);
            assert!(decode_actions(&bad, version::OF13).is_err());
            if sub == NXAST_SAMPLE3 {
                let mut bad = enc.clone();
                bad[26] = 3;
                assert!(decode_actions(&bad, version::OF13).is_err());
            }
        }
    }

    #[test]
    fn check_pkt_larger_round_trips() {
        let a = Action::CheckPktLarger {
            pkt_len: 1500,
            dst: Subfield {
                field: Mf::Reg0,
                ofs: 3,
                n_bits: 1,
            },
        };
        let enc = encode_action_list(std::slice::from_ref(&a), cx(version::OF13)).unwrap();
        assert_eq!(enc.len(), 24);
        assert_eq!(&enc[8..14], &[0, 49, 0x05, 0xdc, 0, 3]);
        assert_eq!(decode_actions(&enc, version::OF13).unwrap(), [a]);
        let mut bad = enc.clone();
        bad[23] = 1;
        assert!(decode_actions(&bad, version::OF13).is_err());
        let mut bad = enc;
        bad[13] = 40; // bit 40 of a 32-bit register
        assert!(decode_actions(&bad, version::OF13).is_err());
    }

    #[test]
    fn bundle_round_trips_and_is_checked() {
        let mut b = Bundle {
            fields: HashFields::SymmetricL4,
            basis: 60,
            algorithm: BundleAlgorithm::Hrw,
            dst: None,
            members: vec![OfPort(4), OfPort(8), OfPort::ANY],
        };
        for v in [version::OF10, version::OF13] {
            let enc = encode_action_list(&[Action::Bundle(b.clone())], cx(v)).unwrap();
            assert_eq!(enc.len(), 40);
            assert_eq!(&enc[8..10], &[0, 12]);
            assert_eq!(
                decode_actions(&enc, v).unwrap(),
                [Action::Bundle(b.clone())]
            );
            let mut bad = enc.clone();
            bad[29] = 1; // reserved bytes
            assert!(decode_actions(&bad, v).is_err());
            let mut bad = enc.clone();
            bad[21] = 9; // 9 members in 8 bytes
            assert!(decode_actions(&bad, v).is_err());
        }
        b.dst = Some(Subfield {
            field: Mf::Reg0,
            ofs: 0,
            n_bits: 16,
        });
        let enc = encode_action_list(&[Action::Bundle(b.clone())], cx(version::OF10)).unwrap();
        assert_eq!(&enc[8..10], &[0, 13]);
        assert_eq!(
            decode_actions(&enc, version::OF10).unwrap(),
            [Action::Bundle(b.clone())]
        );
        b.dst = Some(Subfield {
            field: Mf::Reg0,
            ofs: 0,
            n_bits: 15,
        });
        let enc = encode_action_list(&[Action::Bundle(b)], cx(version::OF10)).unwrap();
        assert!(decode_actions(&enc, version::OF10).is_err());
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
