//! The datapath's side of connection tracking: what a `ct(...)` action asks for
//! ([`CtParams`]), the tracker the PMD hands packets to ([`ConnTracker`]), and the
//! recirculation limit.
//!
//! A `ct` action does not decide anything by itself: it runs the packet through a
//! connection tracker, which sets the packet's `ct_state`/`ct_zone`/`ct_mark`/`ct_label`
//! metadata (and may commit the connection), and a following `recirc(id)` sends the packet
//! through the datapath again with `recirc_id = id` and that metadata in its flow key, so the
//! OpenFlow pipeline can match on `ct_state=+trk+est` and the like (OVS's model).
//!
//! The tracker is a trait so that the PMD does not depend on how connections are kept: the
//! `conntrack` crate (planned; ARCHITECTURE.md) will implement it with TCP window tracking,
//! expiry and NAT. Until then [`UntrackedConntrack`] answers what a tracker answers for a
//! packet it cannot track: `+trk+inv`. It is an honest placeholder, not a firewall: every
//! pipeline that needs `+new`/`+est` must run with a real tracker.

use flow::extract::PacketMeta;
use flow::field::ct_state;
use netdev::Packet;

/// Most datapath passes one received packet may take (OVS `MAX_RECIRC_DEPTH`): a packet
/// that would recirculate a 6th time is dropped and counted, so a pipeline that recirculates
/// forever cannot spin the PMD.
pub const MAX_RECIRC_DEPTH: u8 = 6;

/// Parameters of one `ct(...)` datapath action (helpers — `alg=` — are refused at
/// conversion: no tracker here implements an ALG).
///
/// The rare, wide parts (`label`, `nat`) are interned ([`CtExt`], [`intern_ext`]) so that a
/// datapath action stays small and 4-byte aligned (`actions::tests::action_is_small`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CtParams {
    /// Conntrack zone.
    pub zone: u16,
    /// Commit the connection (`commit`).
    pub commit: bool,
    /// Commit, replacing a connection of the other direction (`force_commit`).
    pub force: bool,
    /// `mark=value/mask` to set on commit.
    pub mark: Option<(u32, u32)>,
    /// `label=…` and `nat(...)`, interned; `None` when the action has neither.
    pub ext: Option<CtExtId>,
}

impl CtParams {
    /// The label and NAT of the action (both `None` without an extension).
    pub fn ext(&self) -> CtExt {
        self.ext.map(ext).unwrap_or_default()
    }
}

/// The wide, rare parameters of a `ct(...)` action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CtExt {
    /// `label=value/mask` to set on commit.
    pub label: Option<(u128, u128)>,
    /// `nat(...)`: translate (on commit) or re-apply the connection's translation.
    pub nat: Option<flow::ofp::Nat>,
}

/// Handle of an interned [`CtExt`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CtExtId(u32);

/// Most distinct [`CtExt`] values a process interns (each is a few dozen bytes; the table
/// never shrinks, so it is bounded: past it a flow's conversion fails with a message).
pub const MAX_CT_EXTS: usize = 1 << 16;

struct ExtTable {
    index: std::sync::Mutex<std::collections::HashMap<CtExt, u32>>,
    values: arc_swap::ArcSwap<Vec<CtExt>>,
}

fn ext_table() -> &'static ExtTable {
    static T: std::sync::OnceLock<ExtTable> = std::sync::OnceLock::new();
    T.get_or_init(|| ExtTable {
        index: std::sync::Mutex::new(std::collections::HashMap::new()),
        values: arc_swap::ArcSwap::from_pointee(Vec::new()),
    })
}

/// Interns `e` (at translation time, never per packet): the same value always gets the same
/// id. An error when [`MAX_CT_EXTS`] distinct values exist already.
pub fn intern_ext(e: CtExt) -> Result<CtExtId, String> {
    let t = ext_table();
    let mut idx = t.index.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&i) = idx.get(&e) {
        return Ok(CtExtId(i));
    }
    let cur = t.values.load_full();
    if cur.len() >= MAX_CT_EXTS {
        return Err(format!(
            "more than {MAX_CT_EXTS} distinct ct label/nat combinations"
        ));
    }
    let mut next = (*cur).clone();
    next.push(e);
    let i = (next.len() - 1) as u32;
    t.values.store(std::sync::Arc::new(next));
    idx.insert(e, i);
    Ok(CtExtId(i))
}

/// The value behind an id (a lock-free load; ids come only from [`intern_ext`]).
pub fn ext(id: CtExtId) -> CtExt {
    ext_table()
        .values
        .load()
        .get(id.0 as usize)
        .copied()
        .unwrap_or_default()
}

/// What happened to a packet given to [`ConnTracker::track`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum CtVerdict {
    /// The packet continues through the rest of the action list with its new metadata
    /// (every packet of a tracker without fragment reassembly).
    Continue,
    /// The tracker kept the packet (an IP fragment held for reassembly, or the fragment that
    /// completed a datagram, whose frames come back as [`CtRelease`]s): it leaves the
    /// pipeline here, nothing is output for it, its buffer goes back to the pool.
    Held,
}

/// A frame a tracker sends on in addition to the packets it was given: each fragment of a
/// datagram its reassembly completed (with the reassembled packet's conntrack result), or
/// a fragment whose reassembly timed out (`+trk+inv`). It continues through the rest of the
/// action list after the `ct` action — as the packets do — in the order the tracker gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtRelease {
    /// The packet of the call (index into the batch of [`ConnTracker::track_batch`]; 0 for
    /// [`ConnTracker::track`]) whose tracking released the frame: the PMD takes the
    /// recirculation depth from it.
    pub from: usize,
    /// The whole Ethernet frame.
    pub frame: Vec<u8>,
    /// Its metadata (in_port, recirc_id and conntrack fields).
    pub md: PacketMeta,
}

/// What a tracker did with a batch ([`ConnTracker::track_batch`]) beyond updating the
/// packets' metadata. Kept by the PMD across calls (no allocation per batch); a tracker that
/// never holds nor releases leaves it empty, and the PMD checks [`CtOut::is_empty`] once.
#[derive(Debug, Default)]
pub struct CtOut {
    /// Bit `i`: packet `i` of the batch was held ([`CtVerdict::Held`]). A batch is at most
    /// 64 packets (the PMD's are at most `netdev::BATCH_MAX`).
    pub held: u64,
    /// Frames released, in order (by [`CtRelease::from`], then as given): each continues
    /// right after the packet that released it (whether that one continues or is held).
    pub released: Vec<CtRelease>,
}

impl CtOut {
    /// Nothing held, nothing released.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.held == 0 && self.released.is_empty()
    }

    /// Marks packet `i` held (ignored for `i` ≥ 64).
    #[inline]
    pub fn hold(&mut self, i: usize) {
        if i < 64 {
            self.held |= 1 << i;
        }
    }

    /// Whether packet `i` was held.
    #[inline]
    pub fn is_held(&self, i: usize) -> bool {
        i < 64 && self.held & (1 << i) != 0
    }

    /// Empties it (keeping the allocation).
    #[inline]
    pub fn clear(&mut self) {
        self.held = 0;
        self.released.clear();
    }
}

/// A connection tracker as the PMD sees it: runs one packet (after the actions before `ct`
/// edited it) and updates its metadata. Called on the PMD's thread; time is explicit.
///
/// A tracker that reassembles IP fragments (OVS's `ipf`) may also hold packets
/// ([`CtVerdict::Held`]) and release frames ([`CtRelease`]); the PMD runs the released
/// frames through the rest of the action list, as it runs the packets that continue.
pub trait ConnTracker: Send {
    /// Tracks `pkt`, received on `md.in_port`, in `params.zone`; sets `md.ct_state` (with
    /// [`ct_state::TRACKED`]), `ct_zone`, `ct_mark`, `ct_label` and `ct_orig`. Frames
    /// released by this call are appended to `released` (with `from` 0).
    fn track(
        &mut self,
        pkt: &mut Packet,
        md: &mut PacketMeta,
        params: &CtParams,
        now_ms: u64,
        released: &mut Vec<CtRelease>,
    ) -> CtVerdict;

    /// Tracks a flow batch's packets in rx order (`pkts[i]` with `mds[i]`; the slices have
    /// equal lengths, at most 64), all with the same `params` and time: the same as
    /// [`Self::track`] on each in turn, packet `i`'s verdict recorded in `out.held` and its
    /// releases appended to `out.released` with `from = i` (the PMD calls it for a batch
    /// whose actions are `ct(...),recirc(id)`; `out` comes empty). Trackers override it to
    /// do once per batch what does not depend on the packet.
    fn track_batch(
        &mut self,
        pkts: &mut [Packet],
        mds: &mut [PacketMeta],
        params: &CtParams,
        now_ms: u64,
        out: &mut CtOut,
    ) {
        for (i, (p, md)) in pkts.iter_mut().zip(mds).enumerate() {
            let n = out.released.len();
            if self.track(p, md, params, now_ms, &mut out.released) == CtVerdict::Held {
                out.hold(i);
            }
            for r in out.released.get_mut(n..).unwrap_or_default() {
                r.from = i;
            }
        }
    }

    /// Housekeeping between bursts (expiry in bounded slices): called by the PMD once per
    /// poll round with the round's time. Must do a bounded amount of work.
    fn poll_housekeeping(&mut self, _now_ms: u64) {}

    /// True for a tracker that cannot track (the placeholder): the PMD warns once when a
    /// `ct` action meets it.
    fn is_placeholder(&self) -> bool {
        false
    }
}

/// The tracker used until a real one is configured: every packet is `+trk+inv` in the
/// requested zone (what a tracker answers for a packet it cannot follow), nothing is
/// committed.
#[derive(Debug, Default, Clone, Copy)]
pub struct UntrackedConntrack;

impl ConnTracker for UntrackedConntrack {
    fn track(
        &mut self,
        _pkt: &mut Packet,
        md: &mut PacketMeta,
        params: &CtParams,
        _now: u64,
        _released: &mut Vec<CtRelease>,
    ) -> CtVerdict {
        ct_clear(md);
        md.ct_state = ct_state::TRACKED | ct_state::INVALID;
        md.ct_zone = params.zone;
        CtVerdict::Continue
    }

    fn is_placeholder(&self) -> bool {
        true
    }
}

/// `ct_clear`: the packet's conntrack metadata is dropped (untracked again).
pub fn ct_clear(md: &mut PacketMeta) {
    md.ct_state = 0;
    md.ct_zone = 0;
    md.ct_mark = 0;
    md.ct_label = 0;
    md.ct_orig = flow::extract::CtOrigTuple::None;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interned_extensions_round_trip_and_dedup() {
        let a = CtExt {
            label: Some((1 << 100, u128::MAX)),
            nat: None,
        };
        let b = CtExt {
            label: None,
            nat: Some(flow::ofp::Nat {
                kind: Some(flow::ofp::NatKind::Src),
                ports: (1000, 1002),
                ..Default::default()
            }),
        };
        let (ia, ib) = (intern_ext(a).expect("a"), intern_ext(b).expect("b"));
        assert_ne!(ia, ib);
        assert_eq!(intern_ext(a).expect("a again"), ia);
        assert_eq!((ext(ia), ext(ib)), (a, b));
        let p = CtParams {
            ext: Some(ib),
            ..CtParams::default()
        };
        assert_eq!(p.ext(), b);
        assert_eq!(CtParams::default().ext(), CtExt::default());
    }

    #[test]
    fn untracked_is_trk_inv_in_zone_and_clear_resets() {
        let mut p = Packet::from_slice(&[0u8; 60]).expect("packet");
        let mut md = PacketMeta::port(3);
        md.ct_mark = 7;
        let mut rel = Vec::new();
        let v = UntrackedConntrack.track(
            &mut p,
            &mut md,
            &CtParams {
                zone: 9,
                commit: true,
                ..CtParams::default()
            },
            0,
            &mut rel,
        );
        assert_eq!((v, rel.len()), (CtVerdict::Continue, 0));
        assert_eq!(md.ct_state, ct_state::TRACKED | ct_state::INVALID);
        assert_eq!((md.ct_zone, md.ct_mark), (9, 0));
        ct_clear(&mut md);
        assert_eq!(md, PacketMeta::port(3));
    }
}
