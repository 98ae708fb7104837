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
    /// `label=value/mask` to set on commit.
    pub label: Option<(u128, u128)>,
    /// `nat(...)`: translate (on commit) or re-apply the connection's translation.
    pub nat: Option<flow::ofp::Nat>,
}

/// A connection tracker as the PMD sees it: runs one packet (after the actions before `ct`
/// edited it) and updates its metadata. Called on the PMD's thread; time is explicit.
pub trait ConnTracker: Send {
    /// Tracks `pkt`, received on `md.in_port`, in `params.zone`; sets `md.ct_state` (with
    /// [`ct_state::TRACKED`]), `ct_zone`, `ct_mark`, `ct_label` and `ct_orig`.
    fn track(&mut self, pkt: &mut Packet, md: &mut PacketMeta, params: &CtParams, now_ms: u64);

    /// Tracks a flow batch's packets in rx order (`pkts[i]` with `mds[i]`; the slices have
    /// equal lengths), all with the same `params` and time: the same as [`Self::track`] on
    /// each in turn (the PMD calls it for a batch whose actions are `ct(...),recirc(id)`).
    /// Trackers override it to do once per batch what does not depend on the packet.
    fn track_batch(
        &mut self,
        pkts: &mut [Packet],
        mds: &mut [PacketMeta],
        params: &CtParams,
        now_ms: u64,
    ) {
        for (p, md) in pkts.iter_mut().zip(mds) {
            self.track(p, md, params, now_ms);
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
    fn track(&mut self, _pkt: &mut Packet, md: &mut PacketMeta, params: &CtParams, _now: u64) {
        ct_clear(md);
        md.ct_state = ct_state::TRACKED | ct_state::INVALID;
        md.ct_zone = params.zone;
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
    fn untracked_is_trk_inv_in_zone_and_clear_resets() {
        let mut p = Packet::from_slice(&[0u8; 60]).expect("packet");
        let mut md = PacketMeta::port(3);
        md.ct_mark = 7;
        UntrackedConntrack.track(
            &mut p,
            &mut md,
            &CtParams {
                zone: 9,
                commit: true,
                ..CtParams::default()
            },
            0,
        );
        assert_eq!(md.ct_state, ct_state::TRACKED | ct_state::INVALID);
        assert_eq!((md.ct_zone, md.ct_mark), (9, 0));
        ct_clear(&mut md);
        assert_eq!(md, PacketMeta::port(3));
    }
}
