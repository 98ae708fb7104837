//! Translation of the load-balancing actions (issue #17, session 13):
//!
//! - `multipath(fields,basis,algorithm,n_links,arg,dst)`: OVS 3.1 `multipath_execute` —
//!   the flow hash of `fields` (`flow_hash_fields`), a link chosen by the algorithm
//!   (`flow::ofp::lb::multipath_link`), the hashed fields un-wildcarded as OVS's
//!   `flow_mask_hash_fields` does, and the link written into `dst` (exact in the megaflow).
//!
//! - `bundle(...)` / `bundle_load(...)`: OVS 3.1 `bundle_execute` — `active_backup` takes the
//!   first live member, `hrw` the live member `i` with the highest `hash_2words(i, hash)`
//!   (the hashed fields un-wildcarded only with more than one member); a member is live when
//!   it is a reserved port OVS counts live (`IN_PORT`, `TABLE`, `NORMAL`, `FLOOD`, `ALL`,
//!   `NONE`) or a port of the bridge (OVS `member_enabled_cb`; our ports are always up, as
//!   select groups' `watch_port`). `bundle` outputs to it (`NONE`: nothing), `bundle_load`
//!   writes its number into `dst`.
//!
//! - `check_pkt_larger(N)->dst`: OVS 3.1 `xlate_check_pkt_larger` for a datapath that has
//!   `check_pkt_len` (OVS's netdev datapath and our PMD): pending changes committed, then
//!   the rest of the current action list and the action set translated twice — with `dst`
//!   = 1 into `gt(...)`, with `dst` = 0 into `le(...)` — each from the flow and datapath
//!   packet as they were (as in OVS, the first branch empties the action set, so the second
//!   starts without it, and the set as it was is restored for the pipeline's end); the list
//!   ends there (its outer lists go on from the flow before the action). `dst` costs no
//!   megaflow bit (OVS writes only the flow).
//!
//! The hash functions are OVS's, from `crate::group`.
//!
//! Where OVS's mask misses a bit its hash reads, we un-wildcard it too (soundness first):
//! `symmetric_l3l4[+udp]` on a non-IP packet hashes the Ethernet addresses and VLAN ids
//! (OVS's `flow_hash_symmetric_l2`) but OVS's mask leaves them wildcarded.

use flow::FieldId;
use flow::field::{FRAG_ANY, FRAG_LATER, VLAN_CFI};
use flow::ofp::lb::{Bundle, BundleAlgorithm, HashFields, Multipath, multipath_link};
use flow::ofp::matching::{ETH_TYPE_IP, ETH_TYPE_IPV6, ipproto};
use flow::ofp::{Action, OfPort, Subfield};

use super::Ctx;
use crate::group::{hash_finish, hash_int, jhash_bytes, mhash_add};
use crate::odp::OdpAction;

/// OVS `hash_add64`: the two halves, low first.
fn hash_add64(h: u32, v: u64) -> u32 {
    mhash_add(mhash_add(h, v as u32), (v >> 32) as u32)
}

impl Ctx<'_> {
    /// OVS `multipath_execute`.
    pub(super) fn multipath(&mut self, mp: &Multipath) {
        let hash = self.flow_hash_fields(mp.fields, u32::from(mp.basis));
        let link = multipath_link(
            hash,
            mp.algorithm,
            u32::from(mp.max_link) + 1,
            mp.arg,
            hash_int,
        );
        self.mask_field(mp.dst.field, mp.dst.mask());
        self.set_field(mp.dst.field, u128::from(link) << mp.dst.ofs, mp.dst.mask());
        self.report_subfield(&mp.dst);
    }

    /// OVS 3.1 `xlate_check_pkt_larger` (see the module doc).
    pub(super) fn check_pkt_larger(&mut self, pkt_len: u16, dst: &Subfield, rest: &[Action]) {
        // Both branches translate the rest of the list, so n of these in a row make 2^n
        // leaves: the actions emitted so far, nested bodies included, are bounded here as
        // at a resubmit (OVS checks only at resubmits and would go on doubling).
        if !self.check_resources() {
            return;
        }
        let old_flow = self.flow;
        let old_skb = self.skb_priority;
        self.commit();
        let old_base = self.base;
        let old_base_skb = self.base_skb_priority;
        let old_vlan_written = self.vlan_written;
        let old_last = self.list_last;
        let old_set = self.action_set.clone();
        let branch = |this: &mut Self, bit: u128| -> Vec<OdpAction> {
            let start = this.odp.len();
            this.set_field(dst.field, bit << dst.ofs, dst.mask());
            this.list_last = true;
            this.do_actions(rest);
            // OVS runs the action set here and empties it: the second branch starts with an
            // empty set, and the set as it was runs again when the pipeline ends.
            if this.hash_freeze.is_some() {
                this.finish_hash_freeze();
            } else {
                this.execute_action_set();
            }
            this.action_set.clear();
            let body: Vec<OdpAction> = this.odp.drain(start..).collect();
            this.nested_odp += body.len();
            this.flow = old_flow;
            this.skb_priority = old_skb;
            this.base = old_base;
            this.base_skb_priority = old_base_skb;
            this.vlan_written = old_vlan_written;
            body
        };
        let gt = branch(self, 1);
        // OVS: an `exit` (or a freeze) in the first branch does not stop the second, but
        // stands afterwards.
        let exit_after_gt = self.exit;
        self.exit = false;
        let le = branch(self, 0);
        self.exit = exit_after_gt;
        self.list_last = old_last;
        self.action_set = old_set;
        self.odp.push(OdpAction::CheckPktLen {
            size: pkt_len,
            gt,
            le,
        });
    }

    /// OVS `member_enabled_cb`.
    fn member_enabled(&self, p: OfPort) -> bool {
        match p {
            OfPort::IN_PORT
            | OfPort::TABLE
            | OfPort::NORMAL
            | OfPort::FLOOD
            | OfPort::ALL
            | OfPort::ANY => true,
            OfPort::CONTROLLER => false,
            _ => self.br.port_is_alive(p),
        }
    }

    /// OVS `xlate_bundle_action` over `bundle_execute`.
    pub(super) fn bundle(&mut self, b: &Bundle) {
        let port = match b.algorithm {
            BundleAlgorithm::ActiveBackup => b
                .members
                .iter()
                .copied()
                .find(|&m| self.member_enabled(m))
                .unwrap_or(OfPort::ANY),
            BundleAlgorithm::Hrw => {
                let saved = self.wc;
                let hash = self.flow_hash_fields(b.fields, u32::from(b.basis));
                if b.members.len() <= 1 {
                    // OVS masks the hashed fields only with more than one member.
                    self.wc = saved;
                }
                let mut best: Option<(OfPort, u32)> = None;
                for (i, &m) in b.members.iter().enumerate() {
                    if self.member_enabled(m) {
                        let h = hash_int(i as u32, hash);
                        if best.is_none_or(|(_, bh)| h > bh) {
                            best = Some((m, h));
                        }
                    }
                }
                best.map_or(OfPort::ANY, |(m, _)| m)
            }
        };
        match &b.dst {
            Some(dst) => {
                self.mask_field(dst.field, dst.mask());
                self.set_field(dst.field, u128::from(port.0) << dst.ofs, dst.mask());
                self.report_subfield(dst);
            }
            None => self.output_action(port, 0),
        }
    }

    fn mac_xor(&self) -> [u8; 6] {
        let s = (self.get(FieldId::DlSrc) as u64).to_be_bytes();
        let d = (self.get(FieldId::DlDst) as u64).to_be_bytes();
        std::array::from_fn(|i| s[2 + i] ^ d[2 + i])
    }

    /// The XOR of the VLAN ids of the tags present (OVS's `vlans[i].tci & VLAN_VID_MASK`).
    fn vid_xor(&self) -> u16 {
        let mut tci = 0u16;
        for (tp, t) in [
            (FieldId::Vlan0Tpid, FieldId::Vlan0Tci),
            (FieldId::Vlan1Tpid, FieldId::Vlan1Tci),
        ] {
            if self.get(tp) != 0 {
                tci ^= self.get(t) as u16 & 0x0fff;
            }
        }
        tci
    }

    /// OVS `flow_hash_fields` + `flow_mask_hash_fields` (see the module note for the one
    /// place we un-wildcard more).
    pub(super) fn flow_hash_fields(&mut self, fields: HashFields, basis: u32) -> u32 {
        let dl = self.dl_type();
        match fields {
            HashFields::EthSrc => {
                self.unwc(FieldId::DlSrc);
                let s = (self.get(FieldId::DlSrc) as u64).to_be_bytes();
                jhash_bytes(&s[2..], basis)
            }
            HashFields::SymmetricL4 => self.symmetric_l4_hash_with(basis),
            HashFields::SymmetricL3L4 | HashFields::SymmetricL3L4Udp => {
                self.symmetric_l3l4_hash(basis, fields == HashFields::SymmetricL3L4Udp)
            }
            HashFields::NwSrc | HashFields::NwDst => {
                let src = fields == HashFields::NwSrc;
                let f = match (dl, src) {
                    (ETH_TYPE_IP, true) => FieldId::NwSrc,
                    (ETH_TYPE_IP, false) => FieldId::NwDst,
                    (ETH_TYPE_IPV6, true) => FieldId::Ipv6Src,
                    (ETH_TYPE_IPV6, false) => FieldId::Ipv6Dst,
                    _ => return basis,
                };
                self.unwc(f);
                if dl == ETH_TYPE_IP {
                    jhash_bytes(&(self.get(f) as u32).to_be_bytes(), basis)
                } else {
                    jhash_bytes(&self.get(f).to_be_bytes(), basis)
                }
            }
            HashFields::SymmetricL3 => {
                // struct { union { be32; in6_addr }; be16 eth_type; } — 20 bytes, zeroed.
                let mut f = [0u8; 20];
                f[16..18].copy_from_slice(&dl.to_be_bytes());
                if dl == ETH_TYPE_IP {
                    self.unwc(FieldId::NwSrc);
                    self.unwc(FieldId::NwDst);
                    let a = (self.get(FieldId::NwSrc) as u32) ^ (self.get(FieldId::NwDst) as u32);
                    f[0..4].copy_from_slice(&a.to_be_bytes());
                } else if dl == ETH_TYPE_IPV6 {
                    self.unwc(FieldId::Ipv6Src);
                    self.unwc(FieldId::Ipv6Dst);
                    let a = self.get(FieldId::Ipv6Src) ^ self.get(FieldId::Ipv6Dst);
                    f[0..16].copy_from_slice(&a.to_be_bytes());
                }
                jhash_bytes(&f, basis)
            }
        }
    }

    /// OVS `flow_hash_symmetric_l3l4` (with its `flow_hash_symmetric_l2` fallback for
    /// non-IP packets) and the mask of `SYMMETRIC_L3L4[_UDP]`.
    fn symmetric_l3l4_hash(&mut self, basis: u32, udp: bool) -> u32 {
        let dl = self.dl_type();
        let mut h = basis;
        if dl == ETH_TYPE_IP {
            self.unwc(FieldId::NwSrc);
            self.unwc(FieldId::NwDst);
            let a = (self.get(FieldId::NwSrc) as u32) ^ (self.get(FieldId::NwDst) as u32);
            // The big-endian word read as a host (little-endian) word.
            h = mhash_add(h, a.swap_bytes());
        } else if dl == ETH_TYPE_IPV6 {
            self.unwc(FieldId::Ipv6Src);
            self.unwc(FieldId::Ipv6Dst);
            let a = (self.get(FieldId::Ipv6Src) ^ self.get(FieldId::Ipv6Dst)).to_be_bytes();
            for half in a.chunks_exact(8) {
                let w = u64::from_le_bytes(half.try_into().unwrap_or([0; 8]));
                h = hash_add64(h, w);
            }
        } else {
            // Not in OVS's mask, but read by its hash: see the module note.
            self.unwc(FieldId::DlSrc);
            self.unwc(FieldId::DlDst);
            for tci in [FieldId::Vlan0Tci, FieldId::Vlan1Tci] {
                self.unwc_bits(tci, u128::from(0x0fff | VLAN_CFI));
            }
            // union { struct { be16 eth_type, vlan_tci; eth_addr; be16 pad; }; u32 word[3]; }
            let mut f = [0u8; 12];
            f[0..2].copy_from_slice(&dl.to_be_bytes());
            f[2..4].copy_from_slice(&self.vid_xor().to_be_bytes());
            f[4..10].copy_from_slice(&self.mac_xor());
            for w in f.chunks_exact(4) {
                h = mhash_add(h, u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
            }
            return hash_finish(h, basis);
        }
        self.unwc(FieldId::NwProto);
        let proto = self.nw_proto();
        let frag = self.get(FieldId::NwFrag) as u8 & (FRAG_ANY | FRAG_LATER) != 0;
        h = mhash_add(h, u32::from(proto));
        let ports =
            proto == ipproto::TCP || proto == ipproto::SCTP || (udp && proto == ipproto::UDP);
        if ports && !frag {
            self.unwc(FieldId::TpSrc);
            self.unwc(FieldId::TpDst);
            let x = (self.get(FieldId::TpSrc) as u16) ^ (self.get(FieldId::TpDst) as u16);
            h = mhash_add(h, u32::from(x.swap_bytes()));
        }
        hash_finish(h, basis)
    }
}
