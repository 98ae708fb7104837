//! `conntrack`: flowswitch's connection tracker, with the packet-by-packet semantics of
//! Open vSwitch 3.1's userspace conntrack (`lib/conntrack*.c`), sans-I/O.
//!
//! What it owns: keying packets into connections (zones, IPv4/IPv6, TCP/UDP ports, ICMP
//! echo ids, related ICMP errors), the per-protocol state machines (the pf-derived TCP
//! window tracker, UDP/other, ICMP), commit with `ct_mark`/`ct_label`, limits (global and
//! per zone), expiry and bounded sweeping, NAT (address/port allocation and header
//! rewrite), `dpctl/dump-conntrack` text, flush, counters, and the per-PMD established fast
//! path ([`FastCache`]). What it does not own: clocks, threads, I/O (time is passed in as
//! `now_ms`; the caller runs [`Conntrack::sweep`] from wherever it likes), recirculation
//! and the `ct(...)` action text (the datapath adapter maps those to [`CtAction`]), ALGs
//! (FTP/TFTP helpers) and timeout policies other than OVS's default. IP fragment reassembly
//! is the separate [`ipf`] module, run by the datapath adapter before [`Conntrack::execute`]
//! (which itself marks any fragment it is given `+inv`, see [`parse`]).
//!
//! How a packet goes through ([`Conntrack::execute`], OVS's `process_one`):
//! 1. `ct_state` is cleared if the packet was tracked in another zone.
//! 2. The frame is parsed and keyed ([`parse`]); failure → `+inv+trk`, mark/label 0, no
//!    original tuple.
//! 3. Lookup in the zone from either direction (a packet already NATed in this zone is
//!    looked up by its reversed key). `force` on a reply-direction packet expires the old
//!    connection and treats the packet as new.
//! 4. Known connection: ICMP errors get `+rel` (`+rpl` in the reply direction) without a
//!    protocol update; otherwise the protocol tracker ([`l4`]) says valid (`+est`, `+rpl`
//!    for replies), still-new (`+new`), invalid (`+inv` only — mark/label/original tuple
//!    still reported from the connection) or "closed, start again" (TCP SYN after both
//!    ends closed). With `nat`, the connection's translation is applied unless this zone
//!    already translated the packet.
//! 5. Unknown: a related ICMP error is `+inv`; a packet that may not open a connection
//!    (SYN+ACK, bad TCP flags, ICMP replies) is `+inv`; otherwise `+new`, and with `commit`
//!    the connection is stored — unless the zone limit or the global limit is reached (the
//!    packet stays `+new`, nothing stored, counted) or NAT finds no free tuple (same).
//! 6. `ct_zone`, `ct_mark`, `ct_label`, `ct_orig` are written (`+trk` always); a given
//!    mark/label (value, mask) is then applied to the connection, if there is one.
//!
//! Differences from OVS we know of (each deliberate, each documented where it lives):
//! NAT choices inside
//! an address or explicit port range use a fixed hash (OVS's is seeded randomly per
//! process); OVS caches the connection in the packet's metadata across recirculations and
//! then skips the protocol update on a second `ct` in the same zone — our API has no such
//! per-packet slot, so a second `ct` re-runs the (idempotent for retransmits) update; an
//! expired-but-unswept NAT connection is simply absent here, where OVS answers a reply
//! hitting its stale reverse entry with `+inv`; `check_orig_tuple` (finding a connection
//! through `ct_orig` after NAT) is not implemented; an expired entry is replaced at once by
//! a new commit of the same key (OVS keeps it counted until its sweeper runs); when a
//! non-NAT commit's reply key is already held by a live (NATed) connection, OVS keeps both
//! in one hash bucket and whichever comes first answers, here the older one keeps the key;
//! [`Conntrack::dump`] judges expiry at the latest `now_ms` it was given (OVS: wall clock).
//! Same as OVS, though surprising: ICMP echo ids are not rewritten by NAT; plain `nat` on a
//! new commit stores a reply key with source address 0 and (TCP/UDP) destination port 0;
//! the default zone limit is one pool shared by all zones without their own limit; a zone
//! limit of 0 refuses every commit.
//!
//! Concurrency (the `table` module has the lock order): one [`Conntrack`] is shared by every PMD
//! through `Arc`; lookups take no table-wide lock; per-connection state is updated under
//! the connection's mutex; commits and removals serialise on one commit lock.
//!
//! The fast path ([`FastCache`], invariant 6 of ARCHITECTURE.md): a per-PMD direct-mapped
//! array of `Arc<Conn>` references. A hit is validated (same key, entry not removed, not
//! expired) and then runs exactly the code of the full path from step 4 on; only the index
//! lookup is skipped. No connection state is copied into the cache.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod build;
pub mod cache;
pub mod dump;
pub mod fuzzing;
pub mod ipf;
mod key;
pub mod l4;
mod nat;
pub mod parse;
mod table;

pub use cache::FastCache;
pub use dump::{ConnDump, DumpTuple, FlushTuple};
pub use flow::ofp::action::NatKind;
pub use l4::Timeouts;
pub use parse::InvalidReason;

use flow::extract::{CtOrigTuple, PacketMeta};
use flow::field::ct_state as cs;
use key::ConnKey;
use l4::{L4State, Update};
use parse::Parsed;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use table::{Conn, ConnMut, Table};

/// Tracker configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Most connections (OVS `n_conn_limit`, default 3,000,000).
    pub max_conns: u32,
    /// Skip TCP sequence checking (OVS `tcp_seq_chk=false`; OVS default: checking on).
    pub tcp_liberal: bool,
    /// Timeout policy (OVS's default policy).
    pub timeouts: Timeouts,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_conns: 3_000_000,
            tcp_liberal: false,
            timeouts: Timeouts::default(),
        }
    }
}

/// `nat(...)` of a `ct` action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NatAction {
    /// `src`/`dst`; `None` for plain `nat` (apply the connection's existing NAT).
    pub kind: Option<NatKind>,
    /// Address range (min, max); max below min is taken as min.
    pub addrs: Option<(IpAddr, IpAddr)>,
    /// Port range (min, max); max below min is taken as min; min 0 means none.
    pub ports: Option<(u16, u16)>,
    /// `persistent` (accepted, no effect in OVS's userspace datapath either).
    pub persistent: bool,
    /// `hash` (accepted, no effect).
    pub hash: bool,
    /// `random` (accepted, no effect).
    pub random: bool,
}

/// One `ct(...)` execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CtAction {
    /// Zone.
    pub zone: u16,
    /// `commit`.
    pub commit: bool,
    /// `force` (with commit): a reply-direction packet replaces the connection.
    pub force: bool,
    /// `ct_mark` (value, mask) to set.
    pub mark: Option<(u32, u32)>,
    /// `ct_label` (value, mask) to set.
    pub label: Option<(u128, u128)>,
    /// `nat(...)`.
    pub nat: Option<NatAction>,
}

/// Counters (a snapshot).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CtStats {
    /// Packets run through the tracker.
    pub packets: u64,
    /// Packets that left with `+new`.
    pub new: u64,
    /// Packets that left with `+est`.
    pub established: u64,
    /// Packets that left with `+rel`.
    pub related: u64,
    /// Packets that left with `+inv`, total.
    pub invalid: u64,
    /// `+inv` by reason, in [`InvalidReason::ALL`] order.
    pub invalid_by_reason: Vec<(InvalidReason, u64)>,
    /// Connections committed.
    pub committed: u64,
    /// Commits refused by the global limit.
    pub refused_global_limit: u64,
    /// Commits refused by a zone limit.
    pub refused_zone_limit: u64,
    /// Commits refused because NAT found no free tuple.
    pub nat_exhausted: u64,
    /// Connections removed by `sweep` after expiring.
    pub expired: u64,
    /// Connections removed by `flush`.
    pub flushed: u64,
    /// Connections replaced (`force` from the reply side, TCP reopen) or overwritten after
    /// expiring before a sweep reached them.
    pub replaced: u64,
}

/// Per-packet counters. The shared stripes are bumped with atomic adds; a [`FastCache`]'s own
/// stripe has a single writer (its PMD) and is bumped with a plain load and store.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Stripe {
    packets: AtomicU64,
    new: AtomicU64,
    est: AtomicU64,
    rel: AtomicU64,
}

const STRIPES: usize = 16;

fn stripe_index() -> usize {
    use std::cell::Cell;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static IDX: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    IDX.with(|c| {
        if c.get() == usize::MAX {
            c.set(NEXT.fetch_add(1, Ordering::Relaxed) as usize % STRIPES);
        }
        c.get()
    })
}

#[derive(Debug, Default)]
struct Counters {
    stripes: [Stripe; STRIPES],
    invalid: [AtomicU64; InvalidReason::COUNT],
    committed: AtomicU64,
    refused_global: AtomicU64,
    refused_zone: AtomicU64,
    nat_exhausted: AtomicU64,
    expired: AtomicU64,
    flushed: AtomicU64,
    replaced: AtomicU64,
    /// The stripes of the fast caches bound to this tracker, and the sums of those whose
    /// cache was dropped.
    cache_stripes: Mutex<(Vec<Arc<Stripe>>, [u64; 4])>,
}

impl Stripe {
    fn load(&self) -> [u64; 4] {
        let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
        [
            ld(&self.packets),
            ld(&self.new),
            ld(&self.est),
            ld(&self.rel),
        ]
    }

    /// Counts a packet that left with `state`. Only for a stripe with one writer (a cache's).
    pub(crate) fn count_single_writer(&self, state: u32) {
        let bump = |a: &AtomicU64, on: bool| {
            a.store(a.load(Ordering::Relaxed) + u64::from(on), Ordering::Relaxed);
        };
        bump(&self.packets, true);
        bump(&self.new, state & cs::NEW != 0);
        bump(&self.est, state & cs::ESTABLISHED != 0);
        bump(&self.rel, state & cs::RELATED != 0);
    }
}

#[derive(Debug, Clone, Copy)]
struct ZoneLimit {
    limit: u32,
    count: u32,
    seq: u32,
}

/// State behind the commit lock.
#[derive(Debug)]
struct Locked {
    /// By zone; [`DEFAULT_ZONE`] is the default limit.
    zone_limits: HashMap<i32, ZoneLimit>,
    next_zone_seq: u32,
    /// Sweep cursor: (shard, index).
    cursor: (usize, usize),
}

/// Key of the default zone limit (OVS `DEFAULT_ZONE`).
const DEFAULT_ZONE: i32 = -1;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The connection tracker. `Send + Sync`; share it through `Arc`.
#[derive(Debug)]
pub struct Conntrack {
    id: u64,
    cfg: Config,
    tcp_liberal: AtomicBool,
    max_conns: AtomicU32,
    nconns: AtomicU32,
    table: Table,
    locked: Mutex<Locked>,
    counters: Counters,
    /// Latest `now_ms` seen (dumps treat connections expired at that time as gone).
    last_now: AtomicU64,
}

/// What the first lookup found: the connection and whether the packet is a reply.
type Found = Option<(Arc<Conn>, bool)>;

impl Conntrack {
    /// A tracker with `cfg` and a random hash seed.
    pub fn new(cfg: Config) -> Self {
        // A per-tracker hash seed; it only spreads keys over shards and buckets.
        let seed = {
            use std::hash::{BuildHasher, RandomState};
            RandomState::new().hash_one(0x5eed_u64)
        };
        Self::with_seed(cfg, seed)
    }

    /// A tracker with `cfg` and hash seed `seed`: two trackers with the same seed and the
    /// same operations have the same table layout (used by the differential tests, whose
    /// sweeps must remove the same entries).
    pub fn with_seed(cfg: Config, seed: u64) -> Self {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        Conntrack {
            id,
            cfg,
            tcp_liberal: AtomicBool::new(cfg.tcp_liberal),
            max_conns: AtomicU32::new(cfg.max_conns),
            nconns: AtomicU32::new(0),
            table: Table::new(seed),
            locked: Mutex::new(Locked {
                zone_limits: HashMap::new(),
                next_zone_seq: 1,
                cursor: (0, 0),
            }),
            counters: Counters::default(),
            last_now: AtomicU64::new(0),
        }
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    fn lock(&self) -> MutexGuard<'_, Locked> {
        self.locked.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn note_now(&self, now: u64) {
        // Load first: the shared line is written only when time moves on.
        if now > self.last_now.load(Ordering::Relaxed) {
            self.last_now.fetch_max(now, Ordering::Relaxed);
        }
    }

    pub(crate) fn table_lookup(&self, k: &ConnKey, now: u64) -> Found {
        self.table.lookup(k, now)
    }

    /// Switches TCP sequence checking off (`true`) or on.
    pub fn set_tcp_liberal(&self, on: bool) {
        self.tcp_liberal.store(on, Ordering::Relaxed);
    }

    /// A counter stripe for a fast cache binding to this tracker (the stripes of dropped
    /// caches are folded into the retired sums here).
    pub(crate) fn register_stripe(&self) -> Arc<Stripe> {
        let mut g = self
            .counters
            .cache_stripes
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let (list, retired) = &mut *g;
        list.retain(|st| {
            if Arc::strong_count(st) > 1 {
                return true;
            }
            for (r, v) in retired.iter_mut().zip(st.load()) {
                *r += v;
            }
            false
        });
        let st = Arc::new(Stripe::default());
        list.push(Arc::clone(&st));
        st
    }

    /// Runs `frame` through the tracker (the full path). See the crate doc.
    pub fn execute(&self, frame: &mut [u8], md: &mut PacketMeta, act: &CtAction, now_ms: u64) {
        self.run(frame, md, act, now_ms, None);
    }

    /// Same result as [`Conntrack::execute`], with the first lookup served by `cache`.
    pub fn execute_cached(
        &self,
        cache: &mut FastCache,
        frame: &mut [u8],
        md: &mut PacketMeta,
        act: &CtAction,
        now_ms: u64,
    ) {
        self.run(frame, md, act, now_ms, Some(cache));
    }

    fn count_invalid(&self, r: InvalidReason) {
        self.counters.invalid[r as usize].fetch_add(1, Ordering::Relaxed);
    }

    fn run(
        &self,
        frame: &mut [u8],
        md: &mut PacketMeta,
        act: &CtAction,
        now: u64,
        mut cache: Option<&mut FastCache>,
    ) {
        self.note_now(now);
        if let Some(c) = cache.as_deref_mut() {
            c.bind(self);
        }
        let zone = act.zone;
        if md.ct_state != 0 && md.ct_zone != zone {
            md.ct_state = 0;
        }
        let mut reason = None;
        // The common shape takes the straight-line parser; anything else, or anything it
        // refuses, the general one (same answer where both answer: twin-tested).
        // One call site of `process` (inlined here).
        let parsed = match parse::parse_fast(frame, zone) {
            Some(p) => Ok(p),
            None => parse::parse(frame, zone),
        };
        match parsed {
            Ok(p) => self.process(frame, md, act, now, cache.as_deref_mut(), &p, &mut reason),
            Err(r) => {
                reason = Some(r);
                md.ct_state = cs::INVALID;
                write_md(md, zone, None, None, None, None);
            }
        }
        if let Some(r) = reason {
            self.count_invalid(r);
        }
        if let Some(c) = cache {
            c.stripe().count_single_writer(md.ct_state);
            return;
        }
        let s = &self.counters.stripes[stripe_index()];
        s.packets.fetch_add(1, Ordering::Relaxed);
        if md.ct_state & cs::NEW != 0 {
            s.new.fetch_add(1, Ordering::Relaxed);
        }
        if md.ct_state & cs::ESTABLISHED != 0 {
            s.est.fetch_add(1, Ordering::Relaxed);
        }
        if md.ct_state & cs::RELATED != 0 {
            s.rel.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Steps 3–6 of the crate doc for a keyed packet.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn process(
        &self,
        frame: &mut [u8],
        md: &mut PacketMeta,
        act: &CtAction,
        now: u64,
        cache: Option<&mut FastCache>,
        p: &Parsed,
        reason: &mut Option<InvalidReason>,
    ) {
        let zone = act.zone;
        let natted = md.ct_state & (cs::SRC_NAT | cs::DST_NAT) != 0;
        let mut key = &p.key;
        // A packet this zone already NATed is looked up by its reversed key. The cache
        // answers with a reference into its slot (no refcount traffic); a table answer is
        // kept alive in `table_hit`.
        let rk;
        let lk = if natted {
            rk = key.reversed();
            &rk
        } else {
            key
        };
        let table_hit: Found;
        let mut found: Option<(&Arc<Conn>, bool)> = match cache {
            Some(c) => c.lookup(self, lk, now),
            None => {
                table_hit = self.table_lookup(lk, now);
                table_hit.as_ref().map(|(c, r)| (c, *r))
            }
        };
        if natted && let Some((c, reply)) = &mut found {
            *reply = !*reply;
            key = if *reply { &c.rev_key } else { &c.key };
        }

        if act.force
            && let Some((c, true)) = &found
        {
            c.force_expire();
            self.counters.replaced.fetch_add(1, Ordering::Relaxed);
            found = None;
        }

        let mut create = false;
        let mut conn: Option<&Arc<Conn>> = None;
        // The connection's lock, kept from the protocol update to `write_md` (one critical
        // section per packet; nothing else is acquired while it is held).
        let mut guard: Option<MutexGuard<'_, ConnMut>> = None;
        let created: Option<Arc<Conn>>;
        if let Some((c, reply)) = found {
            if p.related {
                md.ct_state |= cs::RELATED;
                if reply {
                    md.ct_state |= cs::REPLY_DIR;
                }
            } else {
                let liberal = self.tcp_liberal.load(Ordering::Relaxed);
                let mut m = c.lock();
                let (res, tm) = m.l4.update(p, frame, reply, liberal);
                if let Some(tm) = tm {
                    c.expiration.store(
                        now.saturating_add(u64::from(tm.attr(&self.cfg.timeouts)) * 1000),
                        Ordering::Relaxed,
                    );
                }
                guard = Some(m);
                match res {
                    Update::Valid => {
                        md.ct_state |= cs::ESTABLISHED;
                        md.ct_state &= !cs::NEW;
                        if reply {
                            md.ct_state |= cs::REPLY_DIR;
                        }
                    }
                    Update::Invalid(r) => {
                        md.ct_state = cs::INVALID;
                        *reason = Some(r);
                    }
                    Update::New => {
                        guard = None;
                        c.force_expire();
                        self.counters.replaced.fetch_add(1, Ordering::Relaxed);
                        create = true;
                    }
                    Update::ValidNew => md.ct_state |= cs::NEW,
                }
            }
            if act.nat.is_some() && !create {
                self.handle_nat(frame, md, p, c, zone, reply);
            }
            conn = Some(c);
        } else if p.related {
            md.ct_state = cs::INVALID;
            *reason = Some(InvalidReason::RelatedNoConn);
        } else {
            create = true;
        }

        if create {
            let mut l = self.lock();
            // One probe under the lock: a live entry means another PMD committed this
            // connection since our lookup (OVS's re-check); an expired one is replaced.
            let indexed = self.table.get_any(key);
            if !indexed.as_ref().is_some_and(|c| c.live(now)) {
                created = self.conn_not_found(&mut l, frame, md, act, now, p, key, indexed, reason);
                conn = created.as_ref();
            }
        }

        // write_ct_md, then set_mark/set_label (OVS takes the connection's lock for each;
        // one critical section here, same result).
        write_md(md, zone, conn.map(|c| &**c), guard, Some(key), Some(act));
    }

    fn handle_nat(
        &self,
        frame: &mut [u8],
        md: &mut PacketMeta,
        p: &Parsed,
        c: &Conn,
        zone: u16,
        reply: bool,
    ) {
        let bits = cs::SRC_NAT | cs::DST_NAT;
        if c.nat != 0 && (md.ct_state & bits == 0 || zone != md.ct_zone) {
            md.ct_state &= !bits;
            md.ct_state |= nat::nat_packet(frame, p, &c.key, &c.rev_key, c.nat, reply);
        }
    }

    /// OVS `conn_not_found`. Holds the commit lock.
    #[allow(clippy::too_many_arguments)]
    fn conn_not_found(
        &self,
        l: &mut Locked,
        frame: &mut [u8],
        md: &mut PacketMeta,
        act: &CtAction,
        now: u64,
        p: &Parsed,
        key: &ConnKey,
        indexed: Option<Arc<Conn>>,
        reason: &mut Option<InvalidReason>,
    ) -> Option<Arc<Conn>> {
        if !l4::valid_new(p) {
            md.ct_state = cs::INVALID;
            *reason = Some(
                if p.key.proto == 6 && p.tcp.is_some_and(|t| l4::tcp_invalid_flags(t.flags)) {
                    InvalidReason::TcpFlags
                } else {
                    InvalidReason::NotValidNew
                },
            );
            return None;
        }
        md.ct_state = cs::NEW;
        if !(act.commit || act.force) {
            return None;
        }
        // OVS `zone_limit_lookup_or_default`: the zone's own limit, else the default one
        // (one pool shared by every zone without its own limit, as in OVS 3.1).
        let zl_key = if l.zone_limits.contains_key(&i32::from(key.zone)) {
            i32::from(key.zone)
        } else {
            DEFAULT_ZONE
        };
        let zl = l.zone_limits.get(&zl_key).copied();
        if let Some(z) = zl
            && z.count >= z.limit
        {
            self.counters.refused_zone.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        if self.nconns.load(Ordering::Relaxed) >= self.max_conns.load(Ordering::Relaxed) {
            self.counters.refused_global.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let (l4, tm) = L4State::new_conn(p, frame);
        let mut rev_key = key.reversed();
        let mut nat_bits = 0u8;
        if let Some(na) = &act.nat {
            let info = nat::NatInfo::from_action(na);
            let table = &self.table;
            let got = nat::unique_tuple(key, &info, &mut |k| table.lookup(k, now).is_some());
            match got {
                Some(r) => rev_key = r,
                None => {
                    self.counters.nat_exhausted.fetch_add(1, Ordering::Relaxed);
                    return None;
                }
            }
            nat_bits = info.action;
        }
        // An entry still indexed under either key is expired (the original key was just
        // looked up): drop it. One exception: without NAT the reply key is not checked for
        // collisions (OVS does not either), and a *live* connection may hold it (e.g. a NATed
        // connection whose original key is this reply key). OVS then has both in one hash
        // bucket; here the older connection keeps the key and the new one is indexed under
        // its original key only.
        let mut reply_indexed = true;
        // The original key's entry is the caller's probe (`indexed`, under this lock: not
        // live, or the caller would not be here).
        for (i, old) in [indexed, self.table.get_any(&rev_key)]
            .into_iter()
            .enumerate()
        {
            if let Some(old) = old {
                if old.live(now) && i == 1 {
                    reply_indexed = false;
                } else if self.remove_locked(l, &old) {
                    self.counters.replaced.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        let (admit_zone, admit_seq) = match zl {
            Some(z) => (zl_key, z.seq),
            None => (0, 0),
        };
        let c = Arc::new(Conn {
            key: *key,
            rev_key,
            nat: nat_bits,
            admit_zone,
            admit_seq,
            expiration: AtomicU64::new(
                now.saturating_add(u64::from(tm.attr(&self.cfg.timeouts)) * 1000),
            ),
            dead: AtomicBool::new(false),
            m: Mutex::new(ConnMut {
                l4,
                mark: 0,
                label: [0, 0],
            }),
        });
        if nat_bits != 0 {
            md.ct_state |= nat::nat_packet(frame, p, &c.key, &c.rev_key, nat_bits, false);
        }
        self.table.insert(&c, reply_indexed);
        self.nconns.fetch_add(1, Ordering::Relaxed);
        if zl.is_some()
            && let Some(z) = l.zone_limits.get_mut(&zl_key)
        {
            z.count += 1;
        }
        self.counters.committed.fetch_add(1, Ordering::Relaxed);
        Some(c)
    }

    /// Removes `c` from the index (commit lock held). False if it was already removed.
    fn remove_locked(&self, l: &mut Locked, c: &Arc<Conn>) -> bool {
        if c.dead.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.table.unindex(c);
        self.nconns.fetch_sub(1, Ordering::Relaxed);
        if c.admit_seq != 0
            && let Some(z) = l.zone_limits.get_mut(&c.admit_zone)
            && z.seq == c.admit_seq
        {
            z.count = z.count.saturating_sub(1);
        }
        true
    }

    /// Examines at most `budget` index slots from where the last call stopped, removing
    /// connections expired at `now_ms`; returns how many were removed.
    ///
    /// Call it regularly from a non-PMD thread or in small slices between bursts: expired
    /// entries are already invisible to lookups but, as in OVS, count against the global and
    /// zone limits until removed (OVS's cleaner wakes every 20 s at most, and goes on in
    /// 200 ms steps while it finds more than `max_conns / 64` entries).
    pub fn sweep(&self, now_ms: u64, budget: usize) -> usize {
        self.note_now(now_ms);
        let mut l = self.lock();
        let mut removed = 0;
        let (mut shard, mut idx) = l.cursor;
        // At most one lap per call: every shard once from the cursor on, and the cursor's
        // shard again from its start. (Going round until the budget is spent made a call on
        // a nearly empty table take ~budget × SHARDS shard locks.)
        let mut shard_steps = 0;
        let mut examined = 0;
        while examined < budget && shard_steps <= table::SHARDS {
            match self.table.at(shard, idx) {
                None => {
                    shard = (shard + 1) % table::SHARDS;
                    idx = 0;
                    shard_steps += 1;
                }
                Some((k, c)) => {
                    examined += 1;
                    if k == c.key && c.expired(now_ms) && self.remove_locked(&mut l, &c) {
                        removed += 1;
                        // The slot now holds another entry (swap-remove): look again.
                    } else {
                        idx += 1;
                    }
                }
            }
        }
        l.cursor = (shard, idx);
        self.counters
            .expired
            .fetch_add(removed as u64, Ordering::Relaxed);
        removed
    }

    /// The connections (in `zone`, or all), sorted, as `dpctl/dump-conntrack` lists them;
    /// connections expired at the latest time the tracker was given are left out.
    pub fn dump(&self, zone: Option<u16>) -> Vec<ConnDump> {
        self.dump_at(zone, self.last_now.load(Ordering::Relaxed))
    }

    /// [`Conntrack::dump`] at an explicit time.
    pub fn dump_at(&self, zone: Option<u16>, now_ms: u64) -> Vec<ConnDump> {
        let mut conns = Vec::new();
        self.table.for_each_primary(|c| {
            if zone.is_none_or(|z| z == c.key.zone) && c.live(now_ms) {
                conns.push(Arc::clone(c));
            }
        });
        let mut out: Vec<ConnDump> = conns.iter().map(|c| dump::to_dump(c, now_ms)).collect();
        out.sort();
        out
    }

    /// Removes connections: all, those of `zone`, or the one whose original tuple (or, for a
    /// connection without NAT, reply tuple) is `tuple` in `zone` (default 0). Returns how
    /// many were removed.
    pub fn flush(&self, zone: Option<u16>, tuple: Option<&FlushTuple>) -> usize {
        let mut l = self.lock();
        let mut victims = Vec::new();
        match tuple {
            Some(t) => {
                let Some(k) = t.key_in(zone.unwrap_or(0)) else {
                    return 0;
                };
                if let Some(c) = self.table.get_any(&k)
                    && (c.key == k || c.nat == 0)
                {
                    victims.push(c);
                }
            }
            None => self.table.for_each_primary(|c| {
                if zone.is_none_or(|z| z == c.key.zone) {
                    victims.push(Arc::clone(c));
                }
            }),
        }
        let mut n = 0;
        for c in &victims {
            if self.remove_locked(&mut l, c) {
                n += 1;
            }
        }
        self.counters.flushed.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// Counters.
    pub fn stats(&self) -> CtStats {
        let c = &self.counters;
        let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut s = CtStats::default();
        let mut add = |v: [u64; 4]| {
            s.packets += v[0];
            s.new += v[1];
            s.established += v[2];
            s.related += v[3];
        };
        c.stripes.iter().for_each(|st| add(st.load()));
        {
            let g = c.cache_stripes.lock().unwrap_or_else(|e| e.into_inner());
            g.0.iter().for_each(|st| add(st.load()));
            add(g.1);
        }
        s.invalid_by_reason = InvalidReason::ALL
            .iter()
            .map(|&r| (r, ld(&c.invalid[r as usize])))
            .collect();
        s.invalid = s.invalid_by_reason.iter().map(|(_, n)| n).sum();
        s.committed = ld(&c.committed);
        s.refused_global_limit = ld(&c.refused_global);
        s.refused_zone_limit = ld(&c.refused_zone);
        s.nat_exhausted = ld(&c.nat_exhausted);
        s.expired = ld(&c.expired);
        s.flushed = ld(&c.flushed);
        s.replaced = ld(&c.replaced);
        s
    }

    /// Sets the global limit (existing connections stay).
    pub fn set_maxconns(&self, n: u32) {
        self.max_conns.store(n, Ordering::Relaxed);
    }

    /// The global limit.
    pub fn maxconns(&self) -> u32 {
        self.max_conns.load(Ordering::Relaxed)
    }

    /// Connections stored (expired ones not yet swept included, as in OVS).
    pub fn nconns(&self) -> u32 {
        self.nconns.load(Ordering::Relaxed)
    }

    /// Sets (or with `None` removes) the limit of `zone`. As in OVS, changing an existing
    /// limit keeps its count; a new limit counts only connections committed from now on;
    /// a limit of 0 refuses every commit in the zone.
    pub fn set_zone_limit(&self, zone: u16, limit: Option<u32>) {
        self.set_limit(i32::from(zone), limit);
    }

    /// Sets (or removes) the default zone limit: in OVS 3.1 it is one pool shared by every
    /// zone that has no limit of its own.
    pub fn set_default_zone_limit(&self, limit: Option<u32>) {
        self.set_limit(DEFAULT_ZONE, limit);
    }

    /// The default zone limit and its count.
    pub fn default_zone_limit(&self) -> Option<(u32, u32)> {
        self.lock()
            .zone_limits
            .get(&DEFAULT_ZONE)
            .map(|z| (z.limit, z.count))
    }

    fn set_limit(&self, zone: i32, limit: Option<u32>) {
        let mut l = self.lock();
        match limit {
            None => {
                l.zone_limits.remove(&zone);
            }
            Some(n) => {
                if let Some(z) = l.zone_limits.get_mut(&zone) {
                    z.limit = n;
                } else {
                    let seq = l.next_zone_seq;
                    l.next_zone_seq = l.next_zone_seq.wrapping_add(1).max(1);
                    l.zone_limits.insert(
                        zone,
                        ZoneLimit {
                            limit: n,
                            count: 0,
                            seq,
                        },
                    );
                }
            }
        }
    }

    /// (zone, limit, count) of every zone with a limit, by zone.
    pub fn zone_limits(&self) -> Vec<(u16, u32, u32)> {
        let l = self.lock();
        let mut v: Vec<_> = l
            .zone_limits
            .iter()
            .filter_map(|(z, zl)| Some((u16::try_from(*z).ok()?, zl.limit, zl.count)))
            .collect();
        v.sort_unstable();
        v
    }

    /// Estimated bytes per stored connection: the entry (with its `Arc` header and
    /// allocator rounding) plus two index slots (key, hash, pointer, control byte, at the
    /// maps' average load and growth slack).
    pub fn bytes_per_conn() -> usize {
        let entry = std::mem::size_of::<Conn>() + 2 * std::mem::size_of::<usize>();
        // glibc malloc: 8 bytes of header, 16-byte granularity.
        let entry_alloc = (entry + 8).div_ceil(16) * 16;
        // An indexmap slot: entry (hash + key + Arc) in a Vec that grows by doubling
        // (×1.5 on average) plus a hashbrown index (usize + 1 control byte at 7/8 load, ×1.5).
        let slot_entry = std::mem::size_of::<usize>()
            + std::mem::size_of::<key::TableKey>()
            + std::mem::size_of::<usize>();
        let slot = slot_entry * 3 / 2 + (std::mem::size_of::<usize>() + 1) * 8 / 7 * 3 / 2;
        entry_alloc + 2 * slot
    }

    /// Index slots in use (for tests and memory accounting).
    pub fn index_slots(&self) -> usize {
        self.table.slots()
    }
}

/// OVS `write_ct_md`.
/// OVS `write_ct_md`, followed — when `act` carries them and there is a connection — by
/// `set_mark`/`set_label` (value | (current & !mask), stored in the connection).
/// `guard`, when given, is `conn`'s lock, already held.
fn write_md(
    md: &mut PacketMeta,
    zone: u16,
    conn: Option<&Conn>,
    guard: Option<MutexGuard<'_, ConnMut>>,
    key: Option<&ConnKey>,
    act: Option<&CtAction>,
) {
    md.ct_state |= cs::TRACKED;
    md.ct_zone = zone;
    let k = match conn {
        Some(c) => {
            let mut m = match guard {
                Some(g) => g,
                None => c.lock(),
            };
            md.ct_mark = m.mark;
            md.ct_label = u128::from(m.label[0]) | u128::from(m.label[1]) << 64;
            if let Some(a) = act {
                if let Some((v, mask)) = a.mark {
                    md.ct_mark = v | (md.ct_mark & !mask);
                    m.mark = md.ct_mark;
                }
                if let Some((v, mask)) = a.label {
                    md.ct_label = v | (md.ct_label & !mask);
                    m.label = [md.ct_label as u64, (md.ct_label >> 64) as u64];
                }
            }
            Some(&c.key)
        }
        None => {
            md.ct_mark = 0;
            md.ct_label = 0;
            key
        }
    };
    md.ct_orig = match k {
        Some(k) => orig_tuple(k),
        None => CtOrigTuple::None,
    };
}

fn orig_tuple(k: &ConnKey) -> CtOrigTuple {
    let (tp_src, tp_dst) = if k.is_icmp() {
        (u16::from(k.stype), 0)
    } else {
        (k.sport, k.dport)
    };
    if k.v6 {
        CtOrigTuple::V6 {
            proto: k.proto,
            tp_src,
            tp_dst,
        }
    } else {
        CtOrigTuple::V4 {
            src: u32::from_be_bytes([k.src[0], k.src[1], k.src[2], k.src[3]]),
            dst: u32::from_be_bytes([k.dst[0], k.dst[1], k.dst[2], k.dst[3]]),
            proto: k.proto,
            tp_src,
            tp_dst,
        }
    }
}
