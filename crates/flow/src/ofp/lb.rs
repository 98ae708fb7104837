//! Load-balancing actions (issue #17, session 13): `multipath(...)` (`NXAST_MULTIPATH`),
//! `bundle(...)`/`bundle_load(...)` (`NXAST_BUNDLE[_LOAD]`), and `sample(...)`
//! (`NXAST_SAMPLE[2|3]`).
//! Text in `text::lb`, wire in `openflow::action_lb`, translation in `ofproto::xlate::lb`.

use crate::ofp::action::Subfield;

/// The header fields a flow hash covers (OVS `enum nx_hash_fields`; the values are the wire
/// codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HashFields {
    /// `eth_src`.
    EthSrc = 0,
    /// `symmetric_l4`.
    SymmetricL4 = 1,
    /// `symmetric_l3l4`.
    SymmetricL3L4 = 2,
    /// `symmetric_l3l4+udp`.
    SymmetricL3L4Udp = 3,
    /// `nw_src`.
    NwSrc = 4,
    /// `nw_dst`.
    NwDst = 5,
    /// `symmetric_l3`.
    SymmetricL3 = 6,
}

impl HashFields {
    /// Every value, in wire-code order.
    pub const ALL: [HashFields; 7] = [
        HashFields::EthSrc,
        HashFields::SymmetricL4,
        HashFields::SymmetricL3L4,
        HashFields::SymmetricL3L4Udp,
        HashFields::NwSrc,
        HashFields::NwDst,
        HashFields::SymmetricL3,
    ];

    /// The text name (OVS `flow_hash_fields_to_str`).
    pub fn name(self) -> &'static str {
        match self {
            HashFields::EthSrc => "eth_src",
            HashFields::SymmetricL4 => "symmetric_l4",
            HashFields::SymmetricL3L4 => "symmetric_l3l4",
            HashFields::SymmetricL3L4Udp => "symmetric_l3l4+udp",
            HashFields::NwSrc => "nw_src",
            HashFields::NwDst => "nw_dst",
            HashFields::SymmetricL3 => "symmetric_l3",
        }
    }

    /// From a text name (case-insensitive, as OVS's `strcasecmp`).
    pub fn from_name(s: &str) -> Option<HashFields> {
        HashFields::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s))
    }

    /// From the wire code.
    pub fn from_code(c: u16) -> Option<HashFields> {
        HashFields::ALL.get(usize::from(c)).copied()
    }
}

/// Multipath link selection (OVS `enum nx_mp_algorithm`; values are the wire codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MpAlgorithm {
    /// `modulo_n`: `hash % n_links`.
    ModuloN = 0,
    /// `hash_threshold`: the hash space cut in `n_links` equal ranges.
    HashThreshold = 1,
    /// `hrw`: highest random weight.
    Hrw = 2,
    /// `iter_hash`: iterated hash modulo a power of two (`arg`).
    IterHash = 3,
}

impl MpAlgorithm {
    /// Every value, in wire-code order.
    pub const ALL: [MpAlgorithm; 4] = [
        MpAlgorithm::ModuloN,
        MpAlgorithm::HashThreshold,
        MpAlgorithm::Hrw,
        MpAlgorithm::IterHash,
    ];

    /// The text name.
    pub fn name(self) -> &'static str {
        match self {
            MpAlgorithm::ModuloN => "modulo_n",
            MpAlgorithm::HashThreshold => "hash_threshold",
            MpAlgorithm::Hrw => "hrw",
            MpAlgorithm::IterHash => "iter_hash",
        }
    }

    /// From a text name (case-insensitive).
    pub fn from_name(s: &str) -> Option<MpAlgorithm> {
        MpAlgorithm::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s))
    }

    /// From the wire code.
    pub fn from_code(c: u16) -> Option<MpAlgorithm> {
        MpAlgorithm::ALL.get(usize::from(c)).copied()
    }
}

/// `multipath(fields,basis,algorithm,n_links,arg,dst)`: hashes `fields` with `basis`, picks a
/// link in `0..=max_link` with `algorithm` (and `arg`), and writes it into `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Multipath {
    /// Hashed fields.
    pub fields: HashFields,
    /// Hash basis.
    pub basis: u16,
    /// Link selection.
    pub algorithm: MpAlgorithm,
    /// Number of links minus one.
    pub max_link: u16,
    /// Algorithm argument (`iter_hash`'s modulo).
    pub arg: u32,
    /// Where the link number goes.
    pub dst: Subfield,
}

/// OVS `multipath_algorithm`, with the hash function OVS's `hash_2words` as `h2`
/// (kept a parameter: the hash functions live in `ofproto`).
pub fn multipath_link(
    hash: u32,
    algorithm: MpAlgorithm,
    n_links: u32,
    arg: u32,
    h2: impl Fn(u32, u32) -> u32,
) -> u16 {
    let iter_hash = |modulo: u32| -> u16 {
        // Our own phrasing of the iterated hash: a power of two at least n_links unless the
        // given modulo is usable (n_links <= modulo <= 2 * n_links + 1).
        let modulo = if modulo < n_links || modulo / 2 > n_links {
            n_links.next_power_of_two()
        } else {
            modulo
        };
        let mut i = 0u32;
        loop {
            let link = (h2(hash, i) % modulo) as u16;
            i = i.wrapping_add(1);
            if u32::from(link) < n_links {
                return link;
            }
        }
    };
    match algorithm {
        MpAlgorithm::ModuloN => (hash % n_links) as u16,
        MpAlgorithm::HashThreshold => {
            if n_links == 1 {
                0
            } else {
                (hash / (u32::MAX / n_links + 1)) as u16
            }
        }
        MpAlgorithm::Hrw => {
            if n_links <= 64 {
                let mut best = 0u16;
                let mut best_w = h2(hash, 0);
                for link in 1..n_links {
                    let w = h2(hash, link);
                    if w > best_w {
                        best = link as u16;
                        best_w = w;
                    }
                }
                best
            } else {
                iter_hash(0)
            }
        }
        MpAlgorithm::IterHash => iter_hash(arg),
    }
}

/// Bundle member selection (OVS `enum nx_bd_algorithm`; values are the wire codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BundleAlgorithm {
    /// `active_backup`: the first live member.
    ActiveBackup = 0,
    /// `hrw`: highest random weight over the live members.
    Hrw = 1,
}

impl BundleAlgorithm {
    /// The text name.
    pub fn name(self) -> &'static str {
        match self {
            BundleAlgorithm::ActiveBackup => "active_backup",
            BundleAlgorithm::Hrw => "hrw",
        }
    }

    /// From a text name (case-insensitive).
    pub fn from_name(s: &str) -> Option<BundleAlgorithm> {
        [BundleAlgorithm::ActiveBackup, BundleAlgorithm::Hrw]
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s))
    }

    /// From the wire code.
    pub fn from_code(c: u16) -> Option<BundleAlgorithm> {
        match c {
            0 => Some(BundleAlgorithm::ActiveBackup),
            1 => Some(BundleAlgorithm::Hrw),
            _ => None,
        }
    }
}

/// Most members a bundle keeps (OVS `BUNDLE_MAX_MEMBERS`; the parser drops the rest).
pub const BUNDLE_MAX_MEMBERS: usize = 2048;

/// `bundle(fields,basis,algorithm,ofport,members:P,...)` (outputs to the chosen member) and
/// `bundle_load(fields,basis,algorithm,ofport,dst,members:P,...)` (writes its port number
/// into `dst`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Bundle {
    /// Hashed fields (`hrw`).
    pub fields: HashFields,
    /// Hash basis.
    pub basis: u16,
    /// Member selection.
    pub algorithm: BundleAlgorithm,
    /// `bundle_load`'s destination; `None` for `bundle`.
    pub dst: Option<Subfield>,
    /// Members, in order (`OFPP_NONE` = [`crate::ofp::OfPort::ANY`] allowed).
    pub members: Vec<crate::ofp::OfPort>,
}

/// `sample(...)`'s direction (`NX_ACTION_SAMPLE_*`; values are the wire codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SampleDirection {
    /// Neither given.
    Default = 0,
    /// `ingress`.
    Ingress = 1,
    /// `egress`.
    Egress = 2,
}

/// `sample(probability=N,collector_set_id=…,obs_domain_id=…,obs_point_id=…[,sampling_port=P][,ingress|egress])`:
/// IPFIX flow sampling (`NXAST_SAMPLE`/`SAMPLE2`/`SAMPLE3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sample {
    /// Packets sampled out of 65535 (never 0).
    pub probability: u16,
    /// Collector set id.
    pub collector_set_id: u32,
    /// Observation domain id.
    pub obs_domain_id: u32,
    /// Observation point id.
    pub obs_point_id: u32,
    /// Sampling port (`OFPP_NONE` = [`crate::ofp::OfPort::ANY`] when not given).
    pub sampling_port: crate::ofp::OfPort,
    /// Direction.
    pub direction: SampleDirection,
}
