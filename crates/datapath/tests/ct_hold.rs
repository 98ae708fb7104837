//! The tracker's hold/release protocol in the PMD (what IP fragment reassembly needs): a
//! held packet leaves the pipeline (no output, not an action drop, buffer back in the pool);
//! released frames run the rest of the action list after the `ct`, in the tracker's order,
//! with the metadata it gave, right after the packet that released them — on both
//! execution paths (the `ct(...),recirc(id)` batch path and the general per-packet
//! executor); a released frame without a buffer is a counted drop.

use std::sync::Arc;

use datapath::pmd::{ActionTable, PmdConfig, Upcall, UpcallError};
use datapath::{
    ActionsId, ConnTracker, CtParams, CtRelease, CtVerdict, DpAction, Dpcls, DpclsConfig, PmdStats,
};
use flow::extract::PacketMeta;
use flow::field::{FieldId, ct_state};
use flow::{FlowKey, FlowMask};
use netdev::Packet;

mod common;

/// Frame `i`: UDP to 10.0.0.i (the tracker's rules look at `i`).
fn frame(i: u8) -> Vec<u8> {
    testutil::packets::udp4([10, 0, 0, 1], [10, 0, 0, i], 1000 + u16::from(i), 53, 10)
}

/// The `i` of a frame (last byte of the IPv4 destination).
fn tag(f: &[u8]) -> u8 {
    f.get(33).copied().unwrap_or(0)
}

/// The "expired fragment" frame the tracker releases on rule 3.
const EXPIRED: u8 = 0xee;

/// A fake reassembler, by `i % 4` of the frame: 1 → held (kept); 2 → held, and every kept
/// frame then this one are released `+trk+new` (a "completed datagram"; with `burst`, that
/// many copies of this one instead); 3 → continues `+trk+new` and releases one
/// [`EXPIRED`] frame `+trk+inv`; 0 → continues `+trk+new`.
#[derive(Default)]
struct FakeIpf {
    kept: Vec<Vec<u8>>,
    burst: usize,
}

impl ConnTracker for FakeIpf {
    fn track(
        &mut self,
        pkt: &mut Packet,
        md: &mut PacketMeta,
        params: &CtParams,
        _now: u64,
        released: &mut Vec<CtRelease>,
    ) -> CtVerdict {
        md.ct_state = ct_state::TRACKED | ct_state::NEW;
        md.ct_zone = params.zone;
        let rel = |frame: Vec<u8>, md: PacketMeta| CtRelease { from: 0, frame, md };
        match tag(pkt.data()) % 4 {
            1 => {
                self.kept.push(pkt.data().to_vec());
                CtVerdict::Held
            }
            2 => {
                if self.burst > 0 {
                    for _ in 0..self.burst {
                        released.push(rel(pkt.data().to_vec(), *md));
                    }
                } else {
                    for f in self.kept.drain(..) {
                        released.push(rel(f, *md));
                    }
                    released.push(rel(pkt.data().to_vec(), *md));
                }
                CtVerdict::Held
            }
            3 => {
                let mut e = *md;
                e.ct_state = ct_state::TRACKED | ct_state::INVALID;
                released.push(rel(frame(EXPIRED), e));
                CtVerdict::Continue
            }
            _ => CtVerdict::Continue,
        }
    }
}

/// recirc_id 0: `head` (a `ct(zone=5)` list); recirc_id 7: `+new` → port 2, `+inv` → 3.
struct Pipeline {
    head: Vec<DpAction>,
}

impl Upcall for Pipeline {
    fn upcall(
        &mut self,
        key: &FlowKey,
        actions: &ActionTable,
    ) -> Result<(FlowMask, ActionsId), UpcallError> {
        let state = FieldId::CtState.get(key) as u32;
        let acts = match FieldId::RecircId.get(key) {
            0 => self.head.clone(),
            _ if state & ct_state::INVALID != 0 => vec![DpAction::Output(3)],
            _ if state & ct_state::NEW != 0 => vec![DpAction::Output(2)],
            _ => vec![DpAction::Drop],
        };
        let mut m = FlowMask::CATCHALL;
        m.w[0] = u64::MAX;
        FieldId::CtState.set_mask(&mut m, u128::from(u32::MAX));
        Ok((m, actions.intern(&acts).ok_or(UpcallError::ActionsFull)?))
    }
}

fn ct() -> DpAction {
    DpAction::Ct(CtParams {
        zone: 5,
        ..CtParams::default()
    })
}

/// Sends `bursts` (each one rx burst) through a PMD with `head` and `tracker`; the frames
/// out of ports 2 and 3 (by tag) and the counters.
fn run(head: Vec<DpAction>, tracker: FakeIpf, bursts: &[Vec<u8>]) -> (Vec<u8>, Vec<u8>, PmdStats) {
    let cfg = PmdConfig {
        emc_insert_inv_prob: 1,
        pool_size: 64,
        ..PmdConfig::default()
    };
    let (mut pmd, h) = common::pmd_on_three_ports(
        cfg,
        Arc::new(Dpcls::new(DpclsConfig::default())),
        Box::new(Pipeline { head }),
    );
    pmd.set_conntrack(Box::new(tracker));
    let (mut to2, mut to3) = (Vec::new(), Vec::new());
    for burst in bursts {
        for &i in burst {
            h[0].inject(frame(i));
        }
        while h[0].rx_pending() > 0 {
            pmd.poll_once();
        }
        for f in h[1].take_tx() {
            assert_eq!(f, frame(tag(&f)), "bytes unchanged");
            to2.push(tag(&f));
        }
        for f in h[2].take_tx() {
            to3.push(tag(&f));
        }
    }
    let mut st = pmd.stats().clone();
    (st.idle_cycles, st.processing_cycles, st.upcall_cycles) = (0, 0, 0);
    assert_eq!(st.classified(), st.packets_received + st.recirculations);
    assert_eq!(pmd.pool().outstanding(), 0, "every buffer back in the pool");
    (to2, to3, st)
}

#[test]
fn released_frames_take_the_actions_after_ct_in_order() {
    // `ct,output:2`: the general executor; released frames take `output:2` (expired ones
    // too: this list does not look at ct_state).
    let burst: Vec<u8> = (0..8).collect();
    let (to2, to3, st) = run(
        vec![ct(), DpAction::Output(2)],
        FakeIpf::default(),
        std::slice::from_ref(&burst),
    );
    assert_eq!(to2, vec![0, 1, 2, 3, EXPIRED, 4, 5, 6, 7, EXPIRED]);
    assert!(to3.is_empty());
    assert_eq!(
        (st.ct_held, st.ct_released, st.ct_release_dropped),
        (4, 6, 0)
    );
    assert_eq!((st.action_drops, st.output_errors), (0, 0), "{st:?}");
    assert_eq!(st.tx_packets, 10);
}

#[test]
fn held_packets_produce_nothing() {
    let (to2, to3, st) = run(
        vec![ct(), DpAction::Output(2)],
        FakeIpf::default(),
        &[vec![1, 5, 9], vec![13]],
    );
    assert!(to2.is_empty() && to3.is_empty());
    assert_eq!((st.ct_held, st.ct_released), (4, 0));
    assert_eq!((st.action_drops, st.tx_packets), (0, 0), "{st:?}");
}

#[test]
fn released_frames_recirculate_with_the_trackers_metadata_on_both_paths() {
    let bursts: Vec<Vec<u8>> = vec![
        (0..8).collect(),
        vec![1, 4, 3],
        vec![2, 0],
        (9..40).collect(),
    ];
    let batch = run(vec![ct(), DpAction::Recirc(7)], FakeIpf::default(), &bursts);
    let general = run(
        vec![ct(), DpAction::Recirc(7), DpAction::Drop],
        FakeIpf::default(),
        &bursts,
    );
    let (to2, to3, st) = &batch;
    // The second pass sees the released frames' metadata: `+new` → 2, `+inv` → 3.
    assert_eq!(&to2[..8], &[0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(
        &to2[8..11],
        &[4, 3, 1],
        "held 1 of burst 2 completes in burst 3"
    );
    assert_eq!(to3.len(), 2 + 1 + 8);
    assert!(to3.iter().all(|&t| t == EXPIRED));
    assert!(st.ct_held > 0 && st.ct_released > 0);
    assert_eq!(
        st.recirculations,
        st.packets_received - st.ct_held + st.ct_released
    );
    // The batch path (`ct_recirc_batch`) and the per-packet executor agree exactly.
    assert_eq!(batch, general);
}

#[test]
fn released_frames_without_a_buffer_are_counted_drops() {
    // One frame releases 200 copies into the recirculation queue: the 64-buffer pool runs
    // out; the rest are counted, nothing leaks, nothing panics. Both paths: the batch path
    // and (`ct_clear` first) the general executor.
    for head in [
        vec![ct(), DpAction::Recirc(7)],
        vec![DpAction::CtClear, ct(), DpAction::Recirc(7)],
    ] {
        let (to2, _, st) = run(
            head,
            FakeIpf {
                burst: 200,
                ..FakeIpf::default()
            },
            &[vec![2]],
        );
        assert_eq!(st.ct_released, 200);
        assert!(st.ct_release_dropped > 0, "{st:?}");
        assert_eq!(
            to2.len() as u64 + st.recirc_dropped,
            200 - st.ct_release_dropped,
            "{st:?}"
        );
    }
}
