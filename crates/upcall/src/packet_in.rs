//! Packet-ins on their way from the datapath to the OpenFlow connections (OVS's
//! `ofproto_async_msg` queue, `ofproto->pins`).
//!
//! A `controller` action becomes a datapath `userspace` action carrying a
//! [`ControllerCookie`]; the PMD that executes it hands a copy of the packet to its upcall
//! handler ([`datapath::Upcall::action_upcall`]), which turns packet, cookie and the frozen
//! translation state the cookie names into a [`PacketIn`] ([`packet_in_of`]) and queues it
//! here, on the PMD's thread. Whoever serves the bridge's OpenFlow connections takes them
//! ([`PacketIns::wait_pop`]) and sends each to the connections that want it.
//!
//! The queue is bounded ([`PACKET_IN_QUEUE_MAX`]): a packet-in over it is dropped and
//! counted, never waited for, so a slow controller costs the datapath nothing. Nothing is
//! queued (and the PMD copies nothing) while no consumer is attached ([`PacketIns::attach`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use flow::FlowKey;
use flow::field::FieldId;
use flow::ofp::{ControllerCookie, Match};

/// Most packet-ins waiting for the connections; more are dropped
/// ([`PacketInCounters::dropped`]).
pub const PACKET_IN_QUEUE_MAX: usize = 1024;

/// One packet for the controllers (OVS `ofproto_packet_in`, before it is encoded for a
/// connection's version and packet-in format).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketIn {
    /// `OFPR_*` reason as OpenFlow 1.4 numbers it (older versions fold 3–5 into 1), or 7
    /// for a table miss (OVS's `OFPR_IMPLICIT_MISS`, `no_match` on the wire).
    pub reason: u8,
    /// Table of the rule that sent it.
    pub table_id: u8,
    /// Cookie of that rule.
    pub cookie: u64,
    /// Connections with this controller id receive it.
    pub controller_id: u16,
    /// Pipeline metadata: `in_port` always, and the registers, `metadata`, `pkt_mark` and
    /// conntrack fields that are not zero, exact (OVS `flow_get_metadata`).
    pub metadata: Match,
    /// The whole frame. The action's `max_len` truncates nothing: it applies to buffered
    /// packets, and like OVS (since 2.7) this switch buffers none.
    pub frame: Vec<u8>,
    /// A `controller(userdata=…)`'s userdata (empty if none).
    pub userdata: Vec<u8>,
    /// A `controller(pause)`'s continuation: the rest of the pipeline (with `unroll_xlate`
    /// markers), which `NXT_RESUME` runs.
    pub continuation: Option<Vec<flow::ofp::Action>>,
    /// The datapath port the packet came in on.
    pub odp_port: u32,
}

/// The pipeline fields a frozen state holds (`metadata`, the registers): a packet-in takes
/// them from the state, and `NXT_RESUME` gives them back.
pub(crate) const PIPELINE_FIELDS: [FieldId; 17] = [
    FieldId::Metadata,
    FieldId::Reg0,
    FieldId::Reg1,
    FieldId::Reg2,
    FieldId::Reg3,
    FieldId::Reg4,
    FieldId::Reg5,
    FieldId::Reg6,
    FieldId::Reg7,
    FieldId::Reg8,
    FieldId::Reg9,
    FieldId::Reg10,
    FieldId::Reg11,
    FieldId::Reg12,
    FieldId::Reg13,
    FieldId::Reg14,
    FieldId::Reg15,
];

/// The packet's own metadata a packet-in reports: the mark and the conntrack fields.
pub(crate) const PACKET_FIELDS: [FieldId; 10] = [
    FieldId::PktMark,
    FieldId::CtState,
    FieldId::CtZone,
    FieldId::CtMark,
    FieldId::CtLabel,
    FieldId::CtNwSrc,
    FieldId::CtNwDst,
    FieldId::CtNwProto,
    FieldId::CtTpSrc,
    FieldId::CtTpDst,
];

/// The packet-in for `frame`, whose key at the `controller` action was `key` (OpenFlow
/// `in_port`), with the pipeline state frozen at the action: table `table` and `frozen`
/// (whose `in_port`, `metadata` and registers win over the key's, as OVS's
/// `frozen_metadata_to_flow`).
pub fn packet_in_of(
    cookie: &ControllerCookie,
    key: &FlowKey,
    table: u8,
    frozen: &FlowKey,
    frame: &[u8],
    userdata: &[u8],
) -> PacketIn {
    let mut m = Match::catchall();
    let in_port = FieldId::InPort.get(frozen);
    m.set_storage(FieldId::InPort, in_port, u128::from(u16::MAX));
    let fields = PIPELINE_FIELDS
        .iter()
        .map(|&f| (f, frozen))
        .chain(PACKET_FIELDS.iter().map(|&f| (f, key)));
    for (f, from) in fields {
        let v = f.get(from);
        if v != 0 {
            m.set_storage(f, v, f.max());
        }
    }
    PacketIn {
        reason: cookie.reason_code(),
        table_id: table,
        cookie: cookie.rule_cookie,
        controller_id: cookie.controller_id,
        metadata: m,
        frame: frame.to_vec(),
        userdata: userdata.to_vec(),
        continuation: None,
        odp_port: 0,
    }
}

/// A rule removed by expiry, for the connections that asked to hear of it (OVS
/// `ofputil_flow_removed`; only rules with `send_flow_rem` are reported, which the OpenFlow
/// side checks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRemoved {
    /// Its table.
    pub table: u8,
    /// Its match.
    pub match_: Match,
    /// Its priority.
    pub priority: u16,
    /// Its cookie.
    pub cookie: u64,
    /// `OFPRR_*`: 0 idle timeout, 1 hard timeout, 2 deleted.
    pub reason: u8,
    /// How long it lived (ms).
    pub duration_ms: u64,
    /// Its idle timeout (s).
    pub idle_timeout: u16,
    /// Its hard timeout (s).
    pub hard_timeout: u16,
    /// Packets it matched.
    pub packets: u64,
    /// Bytes it matched.
    pub bytes: u64,
}

/// An asynchronous message on its way to the OpenFlow connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AsyncMsg {
    /// A packet-in.
    PacketIn(PacketIn),
    /// A removed rule.
    FlowRemoved(FlowRemoved),
}

/// What happened to packet-ins.
#[derive(Debug, Default)]
pub struct PacketInCounters {
    /// Queued for the connections.
    pub queued: AtomicU64,
    /// Dropped: the queue was full.
    pub dropped: AtomicU64,
    /// Not made: no consumer attached, or the cookie's frozen state was gone.
    pub unsent: AtomicU64,
}

/// The bridge's queue of asynchronous messages: packet-ins (see the module doc) and removed
/// rules.
#[derive(Debug, Default)]
pub struct PacketIns {
    q: Mutex<VecDeque<AsyncMsg>>,
    ready: Condvar,
    consumers: AtomicUsize,
    /// What happened to them.
    pub counters: PacketInCounters,
}

impl PacketIns {
    /// Whether anyone takes packet-ins (else the PMD need not make them).
    pub fn wanted(&self) -> bool {
        self.consumers.load(Ordering::Relaxed) != 0
    }

    /// Registers a consumer until the returned guard is dropped.
    pub fn attach(&self) -> Attached<'_> {
        self.consumers.fetch_add(1, Ordering::SeqCst);
        Attached(self)
    }

    /// Queues `p`, or drops it (counted) when the queue is full.
    pub fn push(&self, p: PacketIn) {
        self.push_msg(AsyncMsg::PacketIn(p));
    }

    /// Queues `m`, or drops it (counted) when the queue is full.
    pub fn push_msg(&self, m: AsyncMsg) {
        let mut q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() >= PACKET_IN_QUEUE_MAX {
            drop(q);
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        q.push_back(m);
        drop(q);
        self.counters.queued.fetch_add(1, Ordering::Relaxed);
        self.ready.notify_one();
    }

    /// Counts a packet-in not made.
    pub fn note_unsent(&self) {
        self.counters.unsent.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes everything queued, waiting up to `timeout` for the first one.
    pub fn wait_pop(&self, timeout: Duration) -> Vec<AsyncMsg> {
        let q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        let (mut q, _) = self
            .ready
            .wait_timeout_while(q, timeout, |q| q.is_empty())
            .unwrap_or_else(|e| e.into_inner());
        q.drain(..).collect()
    }

    /// Wakes a consumer waiting in [`Self::wait_pop`] (to stop it).
    pub fn wake(&self) {
        self.ready.notify_all();
    }

    /// Packet-ins waiting.
    pub fn len(&self) -> usize {
        self.q.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether none is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A consumer's registration ([`PacketIns::attach`]).
#[derive(Debug)]
pub struct Attached<'a>(&'a PacketIns);

impl Drop for Attached<'_> {
    fn drop(&mut self) {
        self.0.consumers.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow::ofp::PacketInReason;

    fn cookie() -> ControllerCookie {
        ControllerCookie {
            reason: PacketInReason::Action,
            implicit_miss: false,
            dont_send: false,
            continuation: false,
            recirc_id: 1,
            rule_cookie: 0x1234,
            controller_id: 0,
            max_len: 128,
        }
    }

    #[test]
    fn metadata_takes_frozen_registers_and_packet_conntrack() {
        let mut key = FlowKey::ZERO;
        FieldId::InPort.set(&mut key, 7);
        FieldId::Reg0.set(&mut key, 0x99);
        FieldId::CtState.set(&mut key, 0x21);
        FieldId::CtZone.set(&mut key, 5);
        let mut frozen = FlowKey::ZERO;
        FieldId::InPort.set(&mut frozen, 3);
        FieldId::Reg1.set(&mut frozen, 0x5);
        FieldId::Metadata.set(&mut frozen, 0xabc);
        let p = packet_in_of(&cookie(), &key, 2, &frozen, b"frame", &[9]);
        let m = &p.metadata;
        assert_eq!(
            (m.value(FieldId::InPort), m.mask_of(FieldId::InPort)),
            (3, 0xffff)
        );
        assert_eq!(
            m.mask_of(FieldId::Reg0),
            0,
            "the key's register is not the pipeline's"
        );
        assert_eq!(m.value(FieldId::Reg1), 5);
        assert_eq!(m.value(FieldId::Metadata), 0xabc);
        assert_eq!(m.value(FieldId::CtState), 0x21);
        assert_eq!(m.value(FieldId::CtZone), 5);
        assert_eq!(m.mask_of(FieldId::CtMark), 0, "zero fields stay wild");
        assert_eq!((p.table_id, p.cookie, p.reason), (2, 0x1234, 1));
        assert_eq!(p.userdata, [9]);
    }

    #[test]
    fn queue_is_bounded_and_counts() {
        let q = PacketIns::default();
        assert!(!q.wanted());
        let a = q.attach();
        assert!(q.wanted());
        let p = packet_in_of(&cookie(), &FlowKey::ZERO, 0, &FlowKey::ZERO, b"x", &[]);
        for _ in 0..PACKET_IN_QUEUE_MAX + 3 {
            q.push(p.clone());
        }
        assert_eq!(q.len(), PACKET_IN_QUEUE_MAX);
        assert_eq!(q.counters.dropped.load(Ordering::Relaxed), 3);
        let got = q.wait_pop(Duration::from_millis(1));
        assert_eq!(got.len(), PACKET_IN_QUEUE_MAX);
        assert!(q.wait_pop(Duration::from_millis(1)).is_empty());
        drop(a);
        assert!(!q.wanted());
    }
}
