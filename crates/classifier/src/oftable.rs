//! The OpenFlow-table classifier: tuple-space search over *relaxed* subtables (TupleMerge-style),
//! priority-ordered, with megaflow un-wildcarding and staged lookup.
//!
//! # Structure
//!
//! - Every rule lives in exactly one **subtable**. A subtable has a mask `M_t` that is a subset
//!   of the mask of every rule it holds (a *relaxed* mask, see [`Config`]: prefix fields of 32
//!   bits or more are rounded down to a multiple of 16; narrower fields — ports, protocol,
//!   `dl_type` — are by default dropped from `M_t` even when exact, as TupleMerge does with
//!   ports, so that rules differing only there share a subtable and are told apart by the
//!   per-rule check; a full bucket sends further rules to a finer subtable). Rules are hashed on `key & M_t` into an open-addressing
//!   bucket array; a bucket holds the head of an intrusive singly linked list of entries sorted
//!   by rank (priority descending, then insertion order ascending). Entries of a bucket agree on
//!   the hash of `M_t`'s bits, not necessarily on the bits themselves: every rule is always
//!   checked against its own full mask, so hash collisions cost time, never correctness.
//! - On insert a rule goes to the most specific compatible subtable (`M_t ⊆ M_r`) whose bucket
//!   for the rule has fewer than `collision_limit` rules; if none, a new subtable is made with
//!   the relaxed mask of the rule (or, if that one exists and is full there, the rule's exact
//!   mask). Nothing ever moves between subtables, so insert and delete are a hash probe and a
//!   short list walk plus bookkeeping.
//! - Subtables are kept sorted by the highest rank they hold, so a lookup stops as soon as no
//!   remaining subtable can beat the best match found so far.
//! - Each subtable keeps a **prefilter**: the bits (on its check words) on which all its rules
//!   agree, with their common value. `lookup_wc` uses it: a packet failing it skips the
//!   subtable and the failing field is a cheap proof. The plain `lookup` does not: on
//!   ClassBench it rejected only 1–3% of the subtables visited while costing about as much
//!   as the hash probe it would save.
//! - Optional ([`Config::prefix_tries`]; the OpenFlow tables of `ofproto` turn it on): OVS-style
//!   prefix tries on `nw_dst`/`nw_src`/`ipv6_dst`/`ipv6_src` over all rules (values
//!   left-aligned in 128 bits, lengths 0–128), used only by `lookup_wc` (see below), and for
//!   the IPv6 fields only on IPv6 packets. By default a full bucket only steers new rules
//!   elsewhere; [`Config::split_limit`] turns on a bounded TupleMerge-style split that moves
//!   an over-long list's rules into an existing finer subtable (off: it did not pay on
//!   ClassBench, see docs/BENCHMARKS.md; making *new* subtables for split lists, as
//!   TupleMerge does, measured worse still).
//! - Layout for the lookup's sake: subtables live *inline* in the vector that orders them (their
//!   hashed word indices and mask words inline too), and each subtable keeps its rules' check
//!   data in one flat `u64` array, `2 + cw` words per entry: priority and a subtable-local mask
//!   id, list link and rule index, then the masked key on the subtable's `cw` *check words* (the
//!   union of its rules' word maps). A probe therefore touches the subtable, one bucket and one
//!   entry. `lookup` scans a bucket list with a loop specialised on the number of check
//!   words (1–6, gathered from the packet once per list), and keeps its best match as
//!   (priority, rule index), reading a rule's sequence number from its slot only on a
//!   priority tie, so a hit costs no access to the rule slots until the answer is returned.
//!   Rule slots and entry arrays grow by a quarter at a time (not doubling): they are most
//!   of the memory. Rule masks are interned per subtable (few distinct per subtable) and
//!   globally (one [`FlowMask`] per distinct mask, for [`OfTable::rule_match`] and insert-time
//!   candidate lists). The public [`Rule`]s live in one slab addressed by index (a rule's id
//!   is its slot index and the slot's generation; free slots remember their generation);
//!   nothing is boxed per rule.
//!
//! # Megaflow wildcards ([`OfTable::lookup_wc`])
//!
//! Soundness argument: the result is the winning rule `R` (or none); the mask must hold `R`'s
//! mask and, for every rule `Q` ranking above `R`, at least one bit where the packet differs
//! from `Q`'s match (then every packet equal under the mask matches `R` and no such `Q`). The
//! walk visits every subtable that may hold such a `Q` and adds a *proof* for each:
//!
//! - **Prefilter rejection**: all rules of the subtable agree on the filter bits, so one
//!   failing field suffices; if a failing bit is already in the mask nothing is added, else
//!   the cheapest field of the first failing word, as `proof_bits` shapes it: for address,
//!   port, register and metadata fields the field's masked bits from its top down to the
//!   first differing bit (OVS's prefix shape), for the others (`in_port`, `dl_type`,
//!   `nw_proto`, VLAN, flags, ...) the field's masked bits whole.
//! - **Small subtables** (at most `SMALL_SUBTABLE` rules): every rule is compared; the best
//!   match adds its mask, every rule ranking above it (and above the best so far) adds one
//!   proof as above. No subtable mask is un-wildcarded.
//! - **Prefix tries** (if enabled, subtables whose rules all have prefixes of at least one bit
//!   on a trie field and none of whose prefix lengths matches the packet there): the top bits
//!   the trie walk consulted, which prove every rule with a non-matching prefix differs (for a
//!   small subtable only if cheaper than its per-rule proofs).
//! - Otherwise the subtable's hashed bits (all of `M_t`, or the consulted stages, below), which
//!   rule out every rule of other buckets; in the probed bucket the winner adds its mask and
//!   each compared non-matching rule one proof.
//!
//! **Staged lookup**: a subtable whose mask spans several [`flow::Stage`]s keeps, for every stage
//! but the last, a counted set of the hashes of its rules' keys restricted to the words of the
//! stages up to that one. `lookup_wc` checks those sets in stage order and on the first miss
//! un-wildcards only the subtable's bits of the stages consulted so far (a miss on `dl_type`
//! says nothing about L4 ports, so those stay wildcarded). The plain [`OfTable::lookup`] skips
//! the stage checks (they cost time and cannot change the answer).
//!
//! # Invariants
//!
//! - Every live rule is linked in exactly one bucket list of exactly one subtable, whose mask is
//!   a subset of the rule's mask; lists are sorted by strictly decreasing rank.
//! - A subtable's `max_rank` is at least the highest rank of its rules, and equal to it when
//!   `max_stale` is 0; empty subtables are freed; `order` lists the live subtables by
//!   decreasing `max_rank`. Removing a subtable's top rule would need a scan of its buckets to
//!   find the new maximum; a large subtable instead keeps the old value (an upper bound:
//!   lookups stop later, never wrongly) and rescans once `max_stale` reaches an eighth of its
//!   rules, so removal stays O(1) amortised even when rules are removed in rank order.
//! - Stage sets count, per hash, the rules of the subtable whose stage-prefix hashes to it.
//!
//! # Publishing to lock-free readers
//!
//! An `OfTable` itself is single-writer, not synchronised. Readers never see one being
//! modified: [`crate::double_buffer::DoubleBuffer`] keeps two copies (left-right) of whatever
//! holds the tables — for a datapath, the whole OpenFlow bridge — applies each flow mod to the
//! copy no reader is using, swaps the published pointer (`arc-swap`), and replays the flow mod
//! on the other copy once its last reader has moved on. Lookups never wait for a writer; a
//! writer waits only for readers still holding the copy two writes old. This relies on
//! `insert`/`remove` being deterministic (same operations, same order → same rule ids), which
//! they are: slots and entries are reused in a fixed order and nothing depends on a random
//! seed. Rule versions (OVS `cls_rule` visibility versions) are not needed with whole-copy
//! publication.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::linear::RuleId;
use flow::key::STAGE_START;

/// The stage-prefix hashes of a key in one subtable ([`Subtable::stage_hashes`]): one per
/// stage boundary of its mask, at most one fewer than the stages (a fixed array: the
/// lookup with wildcards computes them for every big subtable it proves, without
/// allocating).
type StageHashes = [u64; STAGE_START.len()];
use flow::{FIELDS, FLOW_WORDS, FieldId, FlowKey, FlowMask, WordMap};

const NONE: u32 = u32::MAX;

/// Subtables with at most this many rules are compared rule by rule in `lookup_wc`, each miss
/// proven by a single bit, instead of un-wildcarding the subtable mask.
const SMALL_SUBTABLE: u32 = 16;

/// Per word and bit: the bits of that word in the same field, and whether a miss there may be
/// proven by a prefix of the field down to the differing bit (addresses, ports, registers,
/// metadata) rather than by the whole field (ids, `dl_type`, `nw_proto`, flags, ...: OVS
/// megaflows hold those whole).
static FIELD_OF_BIT: [[(u64, bool); 64]; FLOW_WORDS] = {
    let mut t = [[(0u64, false); 64]; FLOW_WORDS];
    let mut k = 0;
    while k < FIELDS.len() {
        let d = &FIELDS[k];
        let prefix = (d.bits >= 32
            && !matches!(d.id, FieldId::InPort | FieldId::RecircId | FieldId::CtState))
            || matches!(d.id, FieldId::TpSrc | FieldId::TpDst);
        let mut w = 0;
        while w < 2 {
            let (word, fm) = if d.bits == 128 {
                (d.word + w, u64::MAX)
            } else if d.bits == 64 {
                (d.word, u64::MAX)
            } else {
                (d.word, ((1u64 << d.bits) - 1) << d.shift)
            };
            if word < FLOW_WORDS && (w == 0 || d.bits == 128) {
                let mut b = 0;
                while b < 64 {
                    if fm & (1u64 << b) != 0 {
                        t[word][b] = (fm, prefix);
                    }
                    b += 1;
                }
            }
            w += 1;
        }
        k += 1;
    }
    t
};

/// The bits proving a miss found at `bit` (the most significant differing bit of its field
/// in word `i`), given the word's mask `m` there: the prefix of the field's masked bits down
/// to `bit`, or the field's masked bits whole (see [`FIELD_OF_BIT`]).
#[inline]
fn proof_bits(i: usize, bit: u64, m: u64) -> u64 {
    let (fm, prefix) = FIELD_OF_BIT[i % FLOW_WORDS][bit.trailing_zeros() as usize % 64];
    let sh = fm.trailing_zeros();
    // `vlan_tci` (shift 32) and `vlan1_tci` (shift 0) of the VLAN word.
    if i == flow::key::w::VLANS && fm != 0 && (sh == 0 || sh == 32) {
        // A TCI: the sub-field that differs (PCP, or CFI and VID as OVS's `dl_vlan`), or the
        // CFI bit alone (tagged or not).
        let sub = [0xe000u64, 0x1000, 0x0fff]
            .into_iter()
            .map(|s| s << sh)
            .find(|s| s & bit != 0)
            .unwrap_or(fm);
        return match sub >> sh {
            0x0fff => m & (0x1fff << sh),
            _ => m & sub,
        };
    }
    if fm == 0 {
        bit
    } else if prefix {
        m & fm & !(bit - 1)
    } else {
        m & fm
    }
}

/// Offers, for every field where word `i` of the packet differs (`diff`, under mask `m`),
/// its proof (`proof_bits` at the field's most significant differing bit) to `best`,
/// which keeps the one adding the fewest bits to `wcw` (ties: the later one).
#[inline]
fn offer_proofs(i: usize, diff: u64, m: u64, wcw: u64, best: &mut Option<(usize, u64, u32)>) {
    let mut d = diff;
    while d != 0 {
        let b = 63 - d.leading_zeros();
        let bit = 1u64 << b;
        let (fm, _) = FIELD_OF_BIT[i % FLOW_WORDS][b as usize % 64];
        let proof = proof_bits(i, bit, m);
        let cost = (proof & !wcw).count_ones();
        if best.is_none_or(|(_, _, c)| cost <= c) {
            *best = Some((i, proof, cost));
        }
        d &= !(fm | bit);
    }
}

/// The fields with prefix tries: OVS's default prefix fields and the IPv6 addresses.
const TRIE_FIELDS: [FieldId; 4] = [
    FieldId::NwDst,
    FieldId::NwSrc,
    FieldId::Ipv6Dst,
    FieldId::Ipv6Src,
];

/// Longest prefix a trie field can have (IPv6 addresses).
const MAX_PLEN: usize = 128;

/// A set of prefix lengths `0..=128` (bit `l` of the 192-bit array).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct LenSet([u64; 3]);

impl LenSet {
    fn has(&self, l: u32) -> bool {
        self.0[(l / 64) as usize] & (1 << (l % 64)) != 0
    }
    fn set(&mut self, l: u32, on: bool) {
        let (w, b) = ((l / 64) as usize, 1u64 << (l % 64));
        if on {
            self.0[w] |= b;
        } else {
            self.0[w] &= !b;
        }
    }
    fn intersects(&self, o: &LenSet) -> bool {
        self.0.iter().zip(&o.0).any(|(a, b)| a & b != 0)
    }
}

/// A trie field's value (or mask) left-aligned in 128 bits: bit `d` from the top is the
/// field's bit `d` from its top.
fn aligned(f: FieldId, v: u128) -> u128 {
    v << (128 - f.bits())
}

/// A rule's prefix length on a trie field, or `None` if its mask there is not a prefix.
fn prefix_len(f: FieldId, mask: &FlowMask) -> Option<u32> {
    let m = aligned(f, f.get_mask(mask));
    let len = m.leading_ones();
    (m.count_ones() == len).then_some(len)
}

/// The field mask of the top `n` bits of trie field `f` (`n` in `0..=f.bits()`).
fn top_bits(f: FieldId, n: u32) -> u128 {
    u128::MAX.checked_shl(128 - n).unwrap_or(0) >> (128 - f.bits())
}

/// Whether the packet can have trie field `f` at all (IPv6 tries only for IPv6 packets): the
/// trie is not consulted otherwise. Choosing not to use a shortcut needs no proof.
fn trie_applies(f: FieldId, pkt: &FlowKey) -> bool {
    !matches!(f, FieldId::Ipv6Dst | FieldId::Ipv6Src) || FieldId::DlType.get(pkt) == 0x86dd
}

#[derive(Debug, Clone, Copy)]
struct TrieNode {
    child: [u32; 2],
    /// Rules whose prefix passes through (or ends at) this node.
    refs: u32,
    /// Rules whose prefix ends here.
    end: u32,
}

const EMPTY_NODE: TrieNode = TrieNode {
    child: [NONE; 2],
    refs: 0,
    end: 0,
};

/// A binary trie of the prefixes (value, length) of every rule of the table on one 32-bit
/// field, with reference counts (OVS's prefix tries). Node 0 is the root (length 0); nodes
/// with no reference are unlinked and recycled.
#[derive(Debug, Clone)]
struct PrefixTrie {
    nodes: Vec<TrieNode>,
    free: Vec<u32>,
}

impl PrefixTrie {
    fn new() -> PrefixTrie {
        PrefixTrie {
            nodes: vec![EMPTY_NODE],
            free: Vec::new(),
        }
    }

    /// Adds the prefix of `len` top bits of `value` (left-aligned, see [`aligned`]).
    fn insert(&mut self, value: u128, len: u32) {
        let mut n = 0usize;
        self.nodes[0].refs += 1;
        for d in 0..len {
            let b = ((value >> (127 - d)) & 1) as usize;
            let mut c = self.nodes[n].child[b];
            if c == NONE {
                c = match self.free.pop() {
                    Some(c) => {
                        self.nodes[c as usize] = EMPTY_NODE;
                        c
                    }
                    None => {
                        self.nodes.push(EMPTY_NODE);
                        (self.nodes.len() - 1) as u32
                    }
                };
                self.nodes[n].child[b] = c;
            }
            n = c as usize;
            self.nodes[n].refs += 1;
        }
        self.nodes[n].end += 1;
    }

    /// Removes one (value, len) that `insert` added.
    fn remove(&mut self, value: u128, len: u32) {
        let mut n = 0usize;
        self.nodes[0].refs -= 1;
        for d in 0..len {
            let b = ((value >> (127 - d)) & 1) as usize;
            let c = self.nodes[n].child[b];
            if c == NONE {
                return;
            }
            let cn = &mut self.nodes[c as usize];
            cn.refs -= 1;
            if cn.refs == 0 {
                // The whole subtree below holds no other prefix: unlink and recycle it.
                self.nodes[n].child[b] = NONE;
                let mut stack = vec![c];
                while let Some(x) = stack.pop() {
                    let node = self.nodes[x as usize];
                    stack.extend(node.child.iter().copied().filter(|&y| y != NONE));
                    self.free.push(x);
                }
                return;
            }
            n = c as usize;
        }
        self.nodes[n].end -= 1;
    }

    /// For a packet's field value: the set of lengths `l` (bit `l`) such that some rule's
    /// prefix of length `l` matches it, and the number of top bits that prove every other
    /// prefix does not match (the depth where the packet's path leaves the trie, plus one,
    /// at most `width`), for a left-aligned `value` of a `width`-bit field.
    fn lookup(&self, value: u128, width: u32) -> (LenSet, u32) {
        let mut n = 0usize;
        let mut plens = LenSet::default();
        plens.set(0, self.nodes[0].end > 0);
        for d in 0..width {
            let b = ((value >> (127 - d)) & 1) as usize;
            let c = self.nodes[n].child[b];
            if c == NONE {
                return (plens, d + 1);
            }
            n = c as usize;
            if self.nodes[n].end > 0 {
                plens.set(d + 1, true);
            }
        }
        (plens, width)
    }

    fn bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<TrieNode>() + self.free.capacity() * 4
    }
}

/// Tuning knobs of an [`OfTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Most rules a bucket list may hold before inserts look for (or make) another subtable.
    pub collision_limit: u32,
    /// Prefix fields of 32 bits or more are relaxed to a multiple of this length (1 = exact).
    pub wide_prefix_step: u32,
    /// Prefix fields narrower than 32 bits are relaxed to a multiple of this length.
    pub narrow_prefix_step: u32,
    /// Keep the per-stage hash sets that let `lookup_wc` un-wildcard only consulted stages.
    pub staged: bool,
    /// Place a rule in the compatible subtable with the lowest max rank (instead of the most
    /// specific one).
    pub band_priorities: bool,
    /// Relax exact narrow fields too (an exact `tp_dst` is a 16-bit prefix: with a narrow step
    /// above 16 it leaves the subtable mask and is checked per rule only).
    pub relax_exact_narrow: bool,
    /// Keep OVS-style prefix tries on `nw_dst`/`nw_src`/`ipv6_dst`/`ipv6_src` so that
    /// `lookup_wc` can prove a miss in a subtable with the few top address bits the trie
    /// consulted. Off by default here (the ClassBench figures are plain lookups and inserts):
    /// on acl1 10k it saves ~3.5 of ~99 megaflow bits per packet but halves the `lookup_wc`
    /// and insert rates (the trie walk is pointer chasing). `ofproto`'s tables turn it on.
    pub prefix_tries: bool,
    /// A bounded TupleMerge-style split: when an insert makes a bucket list longer than
    /// this, the list's rules that fit an existing finer subtable move into the one that
    /// spreads them best without passing `collision_limit` there (0 = never; the default).
    pub split_limit: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            collision_limit: 64,
            wide_prefix_step: 16,
            narrow_prefix_step: 17,
            staged: true,
            band_priorities: false,
            relax_exact_narrow: true,
            prefix_tries: false,
            split_limit: 0,
        }
    }
}

/// One rule of an [`OfTable`].
#[derive(Debug, Clone)]
pub struct Rule<T> {
    /// Identity given at insert.
    pub id: RuleId,
    /// Priority: higher wins.
    pub priority: u32,
    /// What the rule carries.
    pub value: T,
    seq: u64,
    table: u32,
    ent: u32,
    class: u32,
}

/// Higher rank wins: priority first, then earlier insertion.
#[inline(always)]
fn rank(priority: u32, seq: u64) -> u128 {
    (u128::from(priority) << 64) | u128::from(!seq)
}

/// An interned rule mask.
#[derive(Debug, Clone)]
struct MaskClass {
    mask: FlowMask,
    live: u32,
    /// Compatible subtables (mask ⊆ this mask), most specific first.
    compat: Vec<u32>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    hash: u32,
    head: u32,
}

const EMPTY_BUCKET: Bucket = Bucket {
    hash: 0,
    head: NONE,
};

/// A pass-through hasher for keys that already are good hashes.
#[derive(Debug, Default, Clone, Copy)]
struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
    fn write_u32(&mut self, x: u32) {
        self.0 = u64::from(x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type CountSet = HashMap<u64, u32, BuildHasherDefault<PreHashed>>;

const K1: u64 = 0x9e37_79b9_7f4a_7c15;

/// One step of the word hash.
#[inline(always)]
fn mix(h: u64, x: u64) -> u64 {
    (h.rotate_left(23) ^ x).wrapping_mul(K1)
}

#[inline(always)]
fn fold(h: u64) -> u32 {
    let h = (h ^ (h >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    (h >> 32) as u32
}

/// Words of entry metadata before the key: `prio << 32 | local mask`, `next << 32 | rule`.
const META: usize = 2;

/// One tuple of the tuple space. Hot fields first (`repr(C)` keeps the order).
#[derive(Debug, Clone)]
#[repr(C)]
struct Subtable {
    max_rank: u128,
    buckets: Vec<Bucket>,
    ents: Vec<u64>,
    lmasks: Vec<u64>,
    nw: u8,
    cw: u8,
    idx: [u8; FLOW_WORDS],
    cidx: [u8; FLOW_WORDS],
    /// Packed probe data, so a probe touches few cache lines: for check word `j`,
    /// `hot[2j]`/`hot[2j+1]` are the prefilter mask/value (every rule has
    /// `key & mask == value` there: bits on which all its rules agree, possibly fewer after
    /// removals, never more); then from `2*cw` the `nw` subtable mask words (order of `idx`).
    hot: [u64; 3 * FLOW_WORDS],
    // Cold.
    tid: u32,
    used: u32,
    n_ents: u32,
    bits: u32,
    mask: FlowMask,
    lmask_class: Vec<u32>,
    lmask_refs: Vec<u32>,
    lmask_free: Vec<u32>,
    lmask_of_class: HashMap<u32, u32, BuildHasherDefault<PreHashed>>,
    /// Positions in `idx` where a stage ends (exclusive), for every stage but the last.
    stage_ends: Box<[u8]>,
    stage_sets: Vec<CountSet>,
    /// Per trie field: rules per prefix length, the set of lengths with rules (bit `l`),
    /// and rules whose mask there is not a prefix.
    plen_count: Box<[[u32; MAX_PLEN + 1]; 4]>,
    plens: [LenSet; 4],
    nonprefix: [u32; 4],
    /// Top rules removed since `max_rank` was last exact (see the invariants).
    max_stale: u32,
}

impl Subtable {
    fn new(tid: u32, mask: FlowMask, staged: bool) -> Subtable {
        let map = mask.map();
        let mut idx = [0u8; FLOW_WORDS];
        let mut hot = [0u64; 3 * FLOW_WORDS];
        let nw = map.len();
        for (j, i) in map.iter().enumerate() {
            idx[j] = i as u8;
            hot[2 * nw + j] = mask.w[i];
        }
        let mut stage_ends = Vec::new();
        if staged {
            let stage_of = |w: u8| STAGE_START.iter().rposition(|&s| s <= usize::from(w));
            for p in 1..nw {
                if stage_of(idx[p]) != stage_of(idx[p - 1]) {
                    stage_ends.push(p as u8);
                }
            }
        }
        Subtable {
            max_rank: 0,
            max_stale: 0,
            nw: nw as u8,
            cw: nw as u8,
            idx,
            cidx: idx,
            buckets: vec![EMPTY_BUCKET; 8],
            ents: Vec::new(),
            lmasks: Vec::new(),
            hot,
            tid,
            used: 0,
            n_ents: 0,
            bits: mask.count_ones(),
            mask,
            lmask_class: Vec::new(),
            lmask_refs: Vec::new(),
            lmask_free: Vec::new(),
            lmask_of_class: HashMap::default(),
            stage_sets: vec![CountSet::default(); stage_ends.len()],
            stage_ends: stage_ends.into_boxed_slice(),
            plen_count: Box::new([[0; MAX_PLEN + 1]; 4]),
            plens: [LenSet::default(); 4],
            nonprefix: [0; 4],
        }
    }

    /// Counts (`add`) or uncounts a rule with mask `mask` in the per-field prefix lengths.
    fn count_plens(&mut self, mask: &FlowMask, add: bool) {
        for (t, &f) in TRIE_FIELDS.iter().enumerate() {
            let c = match prefix_len(f, mask) {
                Some(l) => &mut self.plen_count[t][l as usize],
                None => &mut self.nonprefix[t],
            };
            if add {
                *c += 1;
            } else {
                *c -= 1;
            }
            if let Some(l) = prefix_len(f, mask) {
                self.plens[t].set(l, self.plen_count[t][l as usize] > 0);
            }
        }
    }

    #[inline(always)]
    fn stride(&self) -> usize {
        META + usize::from(self.cw)
    }

    /// The subtable mask words, in `idx` order.
    #[inline(always)]
    fn words(&self) -> &[u64] {
        let at = 2 * usize::from(self.cw);
        &self.hot[at..at + usize::from(self.nw)]
    }

    #[inline(always)]
    fn hash(&self, pkt: &FlowKey) -> u32 {
        let n = usize::from(self.nw);
        let mut h = 0u64;
        for (&i, &m) in self.idx[..n].iter().zip(self.words()) {
            h = mix(h, pkt.w[usize::from(i) % FLOW_WORDS] & m);
        }
        fold(h)
    }

    /// Hashes of the stage prefixes (for every stage end, in `out[..stage_ends.len()]`) and
    /// the full hash.
    fn stage_hashes(&self, pkt: &FlowKey, out: &mut StageHashes) -> u32 {
        let n = usize::from(self.nw);
        let mut h = 0u64;
        let mut e = 0;
        for (p, (&i, &m)) in self.idx[..n].iter().zip(self.words()).enumerate() {
            if e < self.stage_ends.len() && usize::from(self.stage_ends[e]) == p {
                if let Some(o) = out.get_mut(e) {
                    *o = h;
                }
                e += 1;
            }
            h = mix(h, pkt.w[usize::from(i) % FLOW_WORDS] & m);
        }
        fold(h)
    }

    /// The bucket position holding `hash`, if any.
    #[inline(always)]
    fn find(&self, hash: u32) -> Option<usize> {
        let mask = self.buckets.len() - 1;
        let mut p = hash as usize & mask;
        loop {
            let b = self.buckets[p];
            if b.head == NONE {
                return None;
            }
            if b.hash == hash {
                return Some(p);
            }
            p = (p + 1) & mask;
        }
    }

    /// The position for `hash`: existing bucket or the empty slot where it would go.
    fn slot_for(&mut self, hash: u32) -> usize {
        // At most half full: almost every lookup probe is a miss, and a linear-probing miss
        // scans the run up to the next empty slot.
        if (self.used as usize + 1) * 2 > self.buckets.len() {
            self.grow();
        }
        let mask = self.buckets.len() - 1;
        let mut p = hash as usize & mask;
        loop {
            let b = self.buckets[p];
            if b.head == NONE || b.hash == hash {
                return p;
            }
            p = (p + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let n = self.buckets.len() * 2;
        let old = std::mem::replace(&mut self.buckets, vec![EMPTY_BUCKET; n]);
        let mask = n - 1;
        for b in old.into_iter().filter(|b| b.head != NONE) {
            let mut p = b.hash as usize & mask;
            while self.buckets[p].head != NONE {
                p = (p + 1) & mask;
            }
            self.buckets[p] = b;
        }
    }

    /// Removes the bucket at `p` (linear probing, backward-shift deletion).
    fn delete_bucket(&mut self, mut p: usize) {
        let mask = self.buckets.len() - 1;
        self.buckets[p] = EMPTY_BUCKET;
        self.used -= 1;
        let mut q = (p + 1) & mask;
        while self.buckets[q].head != NONE {
            let home = self.buckets[q].hash as usize & mask;
            // Move q back to p if p lies cyclically in [home, q).
            if (q.wrapping_sub(home) & mask) >= (q.wrapping_sub(p) & mask) {
                self.buckets[p] = self.buckets[q];
                self.buckets[q] = EMPTY_BUCKET;
                p = q;
            }
            q = (q + 1) & mask;
        }
    }

    fn stage_add(&mut self, hashes: &[u64]) {
        for (set, &h) in self.stage_sets.iter_mut().zip(hashes) {
            *set.entry(h).or_insert(0) += 1;
        }
    }

    fn stage_remove(&mut self, hashes: &[u64]) {
        for (set, &h) in self.stage_sets.iter_mut().zip(hashes) {
            if let Some(c) = set.get_mut(&h) {
                *c -= 1;
                if *c == 0 {
                    set.remove(&h);
                }
            }
        }
    }

    /// Un-wildcards the subtable's bits in words `idx[..end]`.
    #[inline]
    fn unwildcard(&self, end: usize, wc: &mut FlowMask) {
        for (&i, &m) in self.idx[..end].iter().zip(self.words()) {
            wc.w[usize::from(i) % FLOW_WORDS] |= m;
        }
    }

    fn check_map(&self) -> WordMap {
        let mut m = WordMap::EMPTY;
        for &i in &self.cidx[..usize::from(self.cw)] {
            m.insert(usize::from(i));
        }
        m
    }

    /// Makes the check words cover `extra` too, re-laying out every entry and local mask.
    fn widen(&mut self, extra: WordMap) {
        let old_map = self.check_map();
        let new_map = WordMap(old_map.0 | extra.0);
        if new_map == old_map {
            return;
        }
        let old_cw = usize::from(self.cw);
        let old_cidx = self.cidx;
        let new_cw = new_map.len();
        let mut cidx = [0u8; FLOW_WORDS];
        for (j, i) in new_map.iter().enumerate() {
            cidx[j] = i as u8;
        }
        // Position of each old check word in the new layout.
        let place: Vec<usize> = old_cidx[..old_cw]
            .iter()
            .map(|&w| cidx[..new_cw].iter().position(|&x| x == w).unwrap_or(0))
            .collect();
        let n = self.n_ents as usize;
        let mut ents = vec![0u64; n * (META + new_cw)];
        for e in 0..n {
            let src = &self.ents[e * (META + old_cw)..(e + 1) * (META + old_cw)];
            let dst = &mut ents[e * (META + new_cw)..(e + 1) * (META + new_cw)];
            dst[..META].copy_from_slice(&src[..META]);
            for (j, &pl) in place.iter().enumerate() {
                dst[META + pl] = src[META + j];
            }
        }
        let nl = self.lmask_class.len();
        let mut lmasks = vec![0u64; nl * new_cw];
        for l in 0..nl {
            for (j, &pl) in place.iter().enumerate() {
                lmasks[l * new_cw + pl] = self.lmasks[l * old_cw + j];
            }
        }
        let mut hot = [0u64; 3 * FLOW_WORDS];
        for (j, &pl) in place.iter().enumerate() {
            hot[2 * pl] = self.hot[2 * j];
            hot[2 * pl + 1] = self.hot[2 * j + 1];
        }
        let nw = usize::from(self.nw);
        hot[2 * new_cw..2 * new_cw + nw].copy_from_slice(self.words());
        self.hot = hot;
        self.ents = ents;
        self.lmasks = lmasks;
        self.cidx = cidx;
        self.cw = new_cw as u8;
    }

    /// The local mask id for global class `class` with mask `mask`, made if needed.
    fn local_mask(&mut self, class: u32, mask: &FlowMask) -> u32 {
        if let Some(&l) = self.lmask_of_class.get(&class) {
            self.lmask_refs[l as usize] += 1;
            return l;
        }
        let cw = usize::from(self.cw);
        let l = match self.lmask_free.pop() {
            Some(l) => l,
            None => {
                self.lmask_class.push(NONE);
                self.lmask_refs.push(0);
                self.lmasks.extend(std::iter::repeat_n(0u64, cw));
                (self.lmask_class.len() - 1) as u32
            }
        };
        let base = l as usize * cw;
        for j in 0..cw {
            self.lmasks[base + j] = mask.w[usize::from(self.cidx[j]) % FLOW_WORDS];
        }
        self.lmask_class[l as usize] = class;
        self.lmask_refs[l as usize] = 1;
        self.lmask_of_class.insert(class, l);
        l
    }

    fn release_mask(&mut self, l: u32) {
        let r = &mut self.lmask_refs[l as usize];
        *r -= 1;
        if *r == 0 {
            let class = self.lmask_class[l as usize];
            self.lmask_of_class.remove(&class);
            self.lmask_class[l as usize] = NONE;
            self.lmask_free.push(l);
        }
    }

    /// Narrows the prefilter so that a rule with masked key `key` and mask `mask` passes it.
    fn filter_add(&mut self, key: &FlowKey, mask: &FlowMask) {
        let first = self.n_ents == 0;
        for j in 0..usize::from(self.cw) {
            let i = usize::from(self.cidx[j]) % FLOW_WORDS;
            if first {
                self.hot[2 * j] = mask.w[i];
            } else {
                self.hot[2 * j] &= mask.w[i] & !(self.hot[2 * j + 1] ^ key.w[i]);
            }
            self.hot[2 * j + 1] = key.w[i] & self.hot[2 * j];
        }
    }

    /// Whether `pkt` passes the prefilter (a `false` means no rule here can match).
    #[inline(always)]
    fn filter_pass(&self, pkt: &FlowKey) -> bool {
        let cw = usize::from(self.cw);
        let mut diff = 0u64;
        for (&i, mv) in self.cidx[..cw]
            .iter()
            .zip(self.hot[..2 * cw].chunks_exact(2))
        {
            diff |= (pkt.w[usize::from(i) % FLOW_WORDS] & mv[0]) ^ mv[1];
        }
        diff == 0
    }

    /// Whether `pkt` fails the prefilter, and if so the cheapest proof: `Some(None)` if a
    /// failing filter bit is already in `wc`, else `Some(Some((word, bit)))`, the most
    /// significant failing bit of the first failing word. All rules of the subtable agree
    /// on every filter bit, so any one failing bit alone proves none of them matches.
    fn filter_reject(&self, pkt: &FlowKey, wc: &FlowMask) -> Option<Option<(usize, u64)>> {
        let cw = usize::from(self.cw);
        let mut first = None;
        for (&i, mv) in self.cidx[..cw]
            .iter()
            .zip(self.hot[..2 * cw].chunks_exact(2))
        {
            let i = usize::from(i) % FLOW_WORDS;
            let diff = (pkt.w[i] & mv[0]) ^ mv[1];
            if diff & wc.w[i] != 0 {
                return Some(None);
            }
            if first.is_none() {
                offer_proofs(i, diff, mv[0], wc.w[i], &mut first);
            }
        }
        first.map(|(i, bits, _)| Some((i, bits)))
    }

    /// Whether entry `e` matches `pkt`, adding to `wc` a proof of the answer: the rule's mask
    /// if it matches, else one bit where `pkt` differs from it (none if `wc` already holds
    /// one; otherwise the most significant differing bit of the first differing word).
    #[inline]
    fn ent_matches_wc(&self, e: u32, pkt: &FlowKey, wc: &mut FlowMask) -> bool {
        let cw = usize::from(self.cw);
        let base = e as usize * (META + cw);
        let l = (self.ents[base] as u32) as usize * cw;
        let key = &self.ents[base + META..base + META + cw];
        let lm = &self.lmasks[l..l + cw];
        let cidx = &self.cidx[..cw];
        let mut first = None;
        for ((&i, &m), &k) in cidx.iter().zip(lm).zip(key) {
            let i = usize::from(i) % FLOW_WORDS;
            let diff = (pkt.w[i] & m) ^ k;
            if diff & wc.w[i] != 0 {
                return false;
            }
            if first.is_none() {
                offer_proofs(i, diff, m, wc.w[i], &mut first);
            }
        }
        match first {
            Some((i, bit, _)) => {
                wc.w[i] |= bit;
                false
            }
            None => {
                for (&i, &m) in cidx.iter().zip(lm) {
                    wc.w[usize::from(i) % FLOW_WORDS] |= m;
                }
                true
            }
        }
    }

    #[inline(always)]
    fn ent_prio(&self, e: u32) -> u32 {
        (self.ents[e as usize * self.stride()] >> 32) as u32
    }

    #[inline(always)]
    fn ent_next(&self, e: u32) -> u32 {
        (self.ents[e as usize * self.stride() + 1] >> 32) as u32
    }

    #[inline(always)]
    fn ent_rule(&self, e: u32) -> u32 {
        self.ents[e as usize * self.stride() + 1] as u32
    }

    fn set_next(&mut self, e: u32, next: u32) {
        let i = e as usize * self.stride() + 1;
        self.ents[i] = (u64::from(next) << 32) | (self.ents[i] & 0xffff_ffff);
    }

    /// The masked key of entry `e` as a full key (zero outside the check words).
    fn ent_key(&self, e: u32) -> FlowKey {
        let base = e as usize * self.stride() + META;
        let mut k = FlowKey::ZERO;
        for j in 0..usize::from(self.cw) {
            k.w[usize::from(self.cidx[j]) % FLOW_WORDS] = self.ents[base + j];
        }
        k
    }

    /// Whether entry `e` matches `pkt` (full rule mask). Un-wildcarding is
    /// [`Self::ent_matches_wc`]'s job.
    #[inline(always)]
    fn ent_matches(&self, e: u32, pkt: &FlowKey) -> bool {
        let cw = usize::from(self.cw);
        let base = e as usize * (META + cw);
        let l = (self.ents[base] as u32) as usize * cw;
        let key = &self.ents[base + META..base + META + cw];
        let lm = &self.lmasks[l..l + cw];
        let cidx = &self.cidx[..cw];
        let mut diff = 0u64;
        for ((&i, &m), &k) in cidx.iter().zip(lm).zip(key) {
            diff |= (pkt.w[usize::from(i) % FLOW_WORDS] & m) ^ k;
        }
        diff == 0
    }

    fn bytes(&self) -> usize {
        let sets: usize = self
            .stage_sets
            .iter()
            .map(|s| map_bytes(s.capacity(), std::mem::size_of::<(u64, u32)>()))
            .sum();
        self.buckets.capacity() * std::mem::size_of::<Bucket>()
            + self.ents.capacity() * 8
            + self.lmasks.capacity() * 8
            + (self.lmask_class.capacity()
                + self.lmask_refs.capacity()
                + self.lmask_free.capacity())
                * 4
            + map_bytes(self.lmask_of_class.capacity(), 8)
            + self.stage_ends.len()
            + sets
    }
}

/// Counters describing the shape of an [`OfTable`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Live rules.
    pub rules: usize,
    /// Live subtables.
    pub subtables: usize,
    /// Distinct rule masks.
    pub mask_classes: usize,
    /// Longest bucket list.
    pub max_list: usize,
}

/// The OpenFlow-table classifier; see the module docs.
#[derive(Debug, Clone)]
pub struct OfTable<T> {
    cfg: Config,
    /// Rule slots; a rule's id holds its slot index and the slot's generation.
    slots: Vec<Option<Rule<T>>>,
    /// Free slots with the generation of the rule that last used them.
    free_slots: Vec<(u32, u32)>,
    classes: Vec<Option<MaskClass>>,
    free_classes: Vec<u32>,
    class_index: HashMap<FlowMask, u32>,
    /// Live subtables by decreasing max rank.
    order: Vec<Subtable>,
    /// Subtable id → position in `order` (`NONE` if free).
    pos: Vec<u32>,
    free_tids: Vec<u32>,
    table_index: HashMap<FlowMask, u32>,
    next_seq: u64,
    n_rules: usize,
    /// One prefix trie per [`TRIE_FIELDS`] entry over every rule with a prefix mask there.
    tries: [PrefixTrie; 4],
}

impl<T> Default for OfTable<T> {
    fn default() -> Self {
        Self::with_config(Config::default())
    }
}

impl<T> OfTable<T> {
    /// An empty table with the default configuration.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty table with the given configuration.
    pub fn with_config(mut cfg: Config) -> Self {
        cfg.collision_limit = cfg.collision_limit.max(1);
        cfg.wide_prefix_step = cfg.wide_prefix_step.max(1);
        cfg.narrow_prefix_step = cfg.narrow_prefix_step.max(1);
        OfTable {
            cfg,
            slots: Vec::new(),
            free_slots: Vec::new(),
            classes: Vec::new(),
            free_classes: Vec::new(),
            class_index: HashMap::new(),
            order: Vec::new(),
            pos: Vec::new(),
            free_tids: Vec::new(),
            table_index: HashMap::new(),
            next_seq: 0,
            n_rules: 0,
            tries: [
                PrefixTrie::new(),
                PrefixTrie::new(),
                PrefixTrie::new(),
                PrefixTrie::new(),
            ],
        }
    }

    /// The configuration.
    pub fn config(&self) -> Config {
        self.cfg
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.n_rules
    }

    /// Whether the table holds no rule.
    pub fn is_empty(&self) -> bool {
        self.n_rules == 0
    }

    /// Number of live subtables.
    pub fn n_subtables(&self) -> usize {
        self.order.len()
    }

    /// Shape counters.
    pub fn stats(&self) -> Stats {
        let mut max_list = 0;
        for st in &self.order {
            for b in st.buckets.iter().filter(|b| b.head != NONE) {
                let mut n = 0;
                let mut e = b.head;
                while e != NONE {
                    n += 1;
                    e = st.ent_next(e);
                }
                max_list = max_list.max(n);
            }
        }
        Stats {
            rules: self.n_rules,
            subtables: self.order.len(),
            mask_classes: self.class_index.len(),
            max_list,
        }
    }

    /// Estimated heap and inline footprint in bytes (capacities, not lengths).
    pub fn memory_bytes(&self) -> usize {
        let mut n = std::mem::size_of::<Self>();
        n += self.slots.capacity() * std::mem::size_of::<Option<Rule<T>>>();
        n += self.free_slots.capacity() * 8;
        n += (self.free_classes.capacity() + self.free_tids.capacity() + self.pos.capacity()) * 4;
        n += self.order.capacity() * std::mem::size_of::<Subtable>();
        // Each subtable's boxed per-field prefix-length counters.
        n += self.order.len() * std::mem::size_of::<[[u32; MAX_PLEN + 1]; 4]>();
        for st in &self.order {
            n += st.bytes();
        }
        n += self.tries.iter().map(PrefixTrie::bytes).sum::<usize>();
        for c in self.classes.iter().flatten() {
            n += c.compat.capacity() * 4;
        }
        n += self.classes.capacity() * std::mem::size_of::<Option<MaskClass>>();
        // HashMap entries: key + value + one control byte.
        let hm = std::mem::size_of::<(FlowMask, u32)>();
        n +=
            map_bytes(self.class_index.capacity(), hm) + map_bytes(self.table_index.capacity(), hm);
        n
    }

    #[inline(always)]
    fn rule_at(&self, r: u32) -> &Rule<T> {
        match &self.slots[r as usize] {
            Some(rule) => rule,
            None => unreachable_rule(),
        }
    }

    #[inline(always)]
    fn class(&self, c: u32) -> &MaskClass {
        match &self.classes[c as usize] {
            Some(c) => c,
            None => unreachable_rule(),
        }
    }

    #[inline(always)]
    fn table(&self, tid: u32) -> &Subtable {
        &self.order[self.pos[tid as usize] as usize]
    }

    /// The rank of entry `e` of `st`.
    #[inline(always)]
    fn ent_rank(&self, st: &Subtable, e: u32) -> u128 {
        rank(st.ent_prio(e), self.rule_at(st.ent_rule(e)).seq)
    }

    /// The match (key, mask) of a rule of this table.
    pub fn rule_match(&self, rule: &Rule<T>) -> (FlowKey, FlowMask) {
        let st = self.table(rule.table);
        (st.ent_key(rule.ent), self.class(rule.class).mask)
    }

    /// The rule with identity `id`, if present.
    pub fn get(&self, id: RuleId) -> Option<&Rule<T>> {
        let (idx, _) = split_id(id);
        self.slots
            .get(idx as usize)?
            .as_ref()
            .filter(|r| r.id == id)
    }

    /// The relaxation of `m`: prefix-shaped fields shortened to a multiple of the step,
    /// other fields kept, bits outside every field dropped. Always a subset of `m`.
    fn relax(m: &FlowMask, wide_step: u32, narrow_step: u32, exact_narrow: bool) -> FlowMask {
        let mut out = FlowMask::CATCHALL;
        for f in FIELDS.iter() {
            let fm = f.id.get_mask(m);
            if fm == 0 {
                continue;
            }
            let width = f.bits;
            let len = fm.count_ones();
            let top = (fm << (128 - width)).leading_ones();
            let relaxed = if top == len && (len < width || (exact_narrow && width < 32)) {
                let step = if width >= 32 { wide_step } else { narrow_step };
                let l = len - len % step;
                if l == 0 {
                    0
                } else {
                    (f.id.max() >> (width - l)) << (width - l)
                }
            } else {
                fm
            };
            f.id.set_mask(&mut out, relaxed);
        }
        out
    }

    fn intern_class(&mut self, mask: &FlowMask) -> u32 {
        if let Some(&c) = self.class_index.get(mask) {
            return c;
        }
        let mut compat: Vec<(u32, u32)> = self
            .order
            .iter()
            .filter(|st| st.mask.is_subset_of(mask))
            .map(|st| (st.bits, st.tid))
            .collect();
        compat.sort_by_key(|&(bits, _)| std::cmp::Reverse(bits));
        let class = MaskClass {
            mask: *mask,
            live: 0,
            compat: compat.into_iter().map(|(_, t)| t).collect(),
        };
        let c = match self.free_classes.pop() {
            Some(c) => {
                self.classes[c as usize] = Some(class);
                c
            }
            None => {
                self.classes.push(Some(class));
                (self.classes.len() - 1) as u32
            }
        };
        self.class_index.insert(*mask, c);
        c
    }

    fn new_table(&mut self, mask: FlowMask) -> u32 {
        let tid = match self.free_tids.pop() {
            Some(t) => t,
            None => {
                self.pos.push(NONE);
                (self.pos.len() - 1) as u32
            }
        };
        let st = Subtable::new(tid, mask, self.cfg.staged);
        let bits = st.bits;
        self.pos[tid as usize] = self.order.len() as u32;
        self.order.push(st);
        self.table_index.insert(mask, tid);
        // Register with every class whose mask it is compatible with.
        let (order, pos) = (&self.order, &self.pos);
        let bits_of = |t: u32| order[pos[t as usize] as usize].bits;
        for c in self.classes.iter_mut().flatten() {
            if mask.is_subset_of(&c.mask) {
                let at = c.compat.partition_point(|&x| bits_of(x) >= bits);
                c.compat.insert(at, tid);
            }
        }
        tid
    }

    /// Length of the bucket list `key` would join in subtable `tid`, capped at `cap`.
    fn list_len(&self, tid: u32, key: &FlowKey, cap: u32) -> u32 {
        let st = self.table(tid);
        let Some(p) = st.find(st.hash(key)) else {
            return 0;
        };
        let mut n = 0;
        let mut e = st.buckets[p].head;
        while e != NONE && n < cap {
            n += 1;
            e = st.ent_next(e);
        }
        n
    }

    /// Adds a rule and returns its id.
    pub fn insert(&mut self, priority: u32, key: &FlowKey, mask: &FlowMask, value: T) -> RuleId {
        let key = key.masked(mask);
        let seq = self.next_seq;
        self.next_seq += 1;
        let c = self.intern_class(mask);

        // Choose the subtable.
        let limit = self.cfg.collision_limit;
        let chosen = if self.cfg.band_priorities {
            // The non-full compatible subtable with the lowest max rank: subtables then hold
            // priority bands and the lookup's early stop cuts more of them.
            let mut best: Option<(u128, u32)> = None;
            for &t in &self.class(c).compat {
                let mr = self.table(t).max_rank;
                if best.is_some_and(|(b, _)| mr >= b) {
                    continue;
                }
                if self.list_len(t, &key, limit) < limit {
                    best = Some((mr, t));
                }
            }
            best.map(|(_, t)| t)
        } else {
            self.class(c)
                .compat
                .iter()
                .copied()
                .find(|&t| self.list_len(t, &key, limit) < limit)
        };
        let tid = match chosen {
            Some(t) => t,
            None => {
                // Every existing compatible subtable is full for this key: make the coarsest
                // relaxation (halving the steps down to the exact mask) that does not exist.
                let (mut w, mut n) = (self.cfg.wide_prefix_step, self.cfg.narrow_prefix_step);
                let m = loop {
                    let relaxed = Self::relax(mask, w, n, self.cfg.relax_exact_narrow);
                    if !self.table_index.contains_key(&relaxed) || (w == 1 && n == 1) {
                        break relaxed;
                    }
                    (w, n) = ((w / 2).max(1), (n / 2).max(1));
                };
                match self.table_index.get(&m) {
                    Some(&t) => t,
                    None => self.new_table(m),
                }
            }
        };
        if let Some(cl) = &mut self.classes[c as usize] {
            cl.live += 1;
        }

        // Allocate the rule slot.
        let (r, generation) = match self.free_slots.pop() {
            Some((r, g)) => (r, g.wrapping_add(1)),
            None => {
                grow_push(&mut self.slots, None);
                ((self.slots.len() - 1) as u32, 1)
            }
        };
        if self.cfg.prefix_tries {
            for (t, &f) in TRIE_FIELDS.iter().enumerate() {
                if let Some(len) = prefix_len(f, mask) {
                    self.tries[t].insert(aligned(f, f.get(&key)), len);
                }
            }
        }
        let id = make_id(r, generation);
        self.slots[r as usize] = Some(Rule {
            id,
            priority,
            value,
            seq,
            table: tid,
            ent: NONE,
            class: c,
        });
        let h = self.attach(r, tid, &key);
        self.n_rules += 1;
        if self.cfg.split_limit > 0 {
            self.maybe_split(tid, h);
        }
        id
    }

    /// Links rule slot `r` (its priority, sequence number and class set; `key` its masked
    /// key) into subtable `tid`: a new entry, its bucket list (by rank), the stage sets and
    /// the subtable's max rank and place in `order`. Returns the bucket hash.
    fn attach(&mut self, r: u32, tid: u32, key: &FlowKey) -> u32 {
        let (priority, seq, c) = {
            let rule = self.rule_at(r);
            (rule.priority, rule.seq, rule.class)
        };
        let mask = self.class(c).mask;
        let my_rank = rank(priority, seq);
        let mut scratch = StageHashes::default();
        let p_tab = self.pos[tid as usize] as usize;
        let st = &mut self.order[p_tab];
        st.widen(mask.map());
        let l = st.local_mask(c, &mask);
        st.filter_add(key, &mask);
        st.count_plens(&mask, true);
        let e = st.n_ents;
        st.n_ents += 1;
        reserve_slack(&mut st.ents, META + usize::from(st.cw));
        st.ents.push((u64::from(priority) << 32) | u64::from(l));
        st.ents.push((u64::from(NONE) << 32) | u64::from(r));
        for j in 0..usize::from(st.cw) {
            st.ents.push(key.w[usize::from(st.cidx[j]) % FLOW_WORDS]);
        }
        let h = st.stage_hashes(key, &mut scratch);
        st.stage_add(&scratch);
        let p = st.slot_for(h);
        let head = st.buckets[p].head;
        if head == NONE {
            st.used += 1;
            st.buckets[p] = Bucket { hash: h, head: e };
        } else {
            // After every entry of higher rank (all earlier entries of equal priority).
            let slots = &self.slots;
            let seq_of = |st: &Subtable, x: u32| match &slots[st.ent_rule(x) as usize] {
                Some(rule) => rule.seq,
                None => unreachable_rule(),
            };
            let mut prev = NONE;
            let mut cur = head;
            while cur != NONE && rank(st.ent_prio(cur), seq_of(st, cur)) > my_rank {
                prev = cur;
                cur = st.ent_next(cur);
            }
            st.set_next(e, cur);
            if prev == NONE {
                st.buckets[p].head = e;
            } else {
                st.set_next(prev, e);
            }
        }
        let raise = my_rank > st.max_rank;
        if raise {
            st.max_rank = my_rank;
        }
        if let Some(rule) = &mut self.slots[r as usize] {
            rule.table = tid;
            rule.ent = e;
        }
        if raise {
            self.reorder(tid);
        }
        h
    }

    /// A bounded form of TupleMerge's table split: when an insert makes the bucket list of
    /// subtable `tid` for hash `h` longer than `split_limit` (checked each time the length
    /// passes a multiple of it, so the work is amortised), the list's rules that fit an
    /// existing finer subtable move there — the finer subtable that spreads them best (the
    /// longer of what stays and its longest new list, shortest wins; ties: fewer mask
    /// bits). No subtable is made: a new one would cost every lookup a probe (measured:
    /// splitting into new subtables, as TupleMerge does, doubled the subtables probed on
    /// fw1 and lost more than the shorter lists saved). Nothing moves unless the longest
    /// list gets shorter.
    fn maybe_split(&mut self, tid: u32, h: u32) {
        let limit = self.cfg.split_limit as usize;
        let st = self.table(tid);
        let Some(p) = st.find(h) else {
            return;
        };
        let mut n = 0;
        let mut e = st.buckets[p].head;
        while e != NONE {
            n += 1;
            e = st.ent_next(e);
        }
        if n <= limit || !(n - 1).is_multiple_of(limit) {
            return;
        }
        let mut list: Vec<(u32, FlowKey, FlowMask)> = Vec::with_capacity(n);
        let mut e = st.buckets[p].head;
        while e != NONE {
            let r = st.ent_rule(e);
            let rule = self.rule_at(r);
            list.push((r, st.ent_key(e), self.class(rule.class).mask));
            e = st.ent_next(e);
        }
        let base = st.mask;
        let cap = self.cfg.collision_limit as usize;
        let mut best: Option<(usize, u32, u32)> = None;
        let mut hs: Vec<u64> = Vec::with_capacity(n);
        for o in &self.order {
            if o.mask == base || !base.is_subset_of(&o.mask) {
                continue;
            }
            hs.clear();
            for (_, k, m) in &list {
                if o.mask.is_subset_of(m) {
                    hs.push(u64::from(o.hash(k)));
                }
            }
            if hs.is_empty() {
                continue;
            }
            hs.sort_unstable();
            // The new list lengths there, counting the rules already in those lists.
            let mut longest = 0;
            let mut i = 0;
            while i < hs.len() {
                let j = hs[i..].iter().take_while(|&&x| x == hs[i]).count();
                let have = o.find(hs[i] as u32).map_or(0, |q| {
                    let mut c = 0;
                    let mut e = o.buckets[q].head;
                    while e != NONE && c < cap {
                        c += 1;
                        e = o.ent_next(e);
                    }
                    c
                });
                longest = longest.max(have + j);
                i += j;
            }
            if longest > cap {
                continue;
            }
            let key = ((n - hs.len()).max(longest), o.bits);
            if best.is_none_or(|(c, b, _)| key < (c, b)) {
                best = Some((key.0, key.1, o.tid));
            }
        }
        let Some((cost, _, target)) = best else {
            return;
        };
        if cost >= n {
            return;
        }
        let cm = self.table(target).mask;
        for (r, k, m) in &list {
            if cm.is_subset_of(m) {
                self.detach(*r);
                self.attach(*r, target, k);
            }
        }
    }

    /// Moves subtable `tid` to its place in `order` for its (changed) max rank.
    fn reorder(&mut self, tid: u32) {
        let mut p = self.pos[tid as usize] as usize;
        while p > 0 && self.order[p - 1].max_rank < self.order[p].max_rank {
            self.order.swap(p - 1, p);
            self.pos[self.order[p].tid as usize] = p as u32;
            p -= 1;
        }
        while p + 1 < self.order.len() && self.order[p + 1].max_rank > self.order[p].max_rank {
            self.order.swap(p, p + 1);
            self.pos[self.order[p].tid as usize] = p as u32;
            p += 1;
        }
        self.pos[tid as usize] = p as u32;
    }

    /// Position of the bucket of entry `e` and its predecessor in the list (`NONE` if head).
    fn locate(&self, st: &Subtable, e: u32) -> Option<(usize, u32)> {
        let key = st.ent_key(e);
        let p = st.find(st.hash(&key))?;
        let mut prev = NONE;
        let mut cur = st.buckets[p].head;
        while cur != NONE && cur != e {
            prev = cur;
            cur = st.ent_next(cur);
        }
        (cur == e).then_some((p, prev))
    }

    /// Removes a rule; returns its value if it was there.
    pub fn remove(&mut self, id: RuleId) -> Option<T> {
        let (r, generation) = split_id(id);
        self.get(id)?;
        let c = self.rule_at(r).class;
        let key = self.detach(r)?;
        let rmask = self.class(c).mask;
        if self.cfg.prefix_tries {
            for (t, &f) in TRIE_FIELDS.iter().enumerate() {
                if let Some(len) = prefix_len(f, &rmask) {
                    self.tries[t].remove(aligned(f, f.get(&key)), len);
                }
            }
        }

        // Free the rule slot and the class.
        let rule = self.slots[r as usize].take()?;
        self.free_slots.push((r, generation));
        let class_empty = match &mut self.classes[c as usize] {
            Some(cl) => {
                cl.live -= 1;
                cl.live == 0
            }
            None => false,
        };
        if class_empty {
            if let Some(cl) = self.classes[c as usize].take() {
                self.class_index.remove(&cl.mask);
            }
            self.free_classes.push(c);
        }
        self.n_rules -= 1;
        Some(rule.value)
    }

    /// Unlinks rule slot `r` from its subtable (entry, bucket list, stage sets, max rank;
    /// the subtable is dropped when it empties). The slot itself stays. Returns the rule's
    /// masked key.
    fn detach(&mut self, r: u32) -> Option<FlowKey> {
        let (tid, e, c, my_rank) = {
            let rule = self.rule_at(r);
            (
                rule.table,
                rule.ent,
                rule.class,
                rank(rule.priority, rule.seq),
            )
        };
        let p_tab = self.pos[tid as usize] as usize;

        // Unlink from its bucket.
        let (p, prev) = self.locate(&self.order[p_tab], e)?;
        let mut scratch = StageHashes::default();
        let st = &mut self.order[p_tab];
        let next = st.ent_next(e);
        if prev == NONE {
            if next == NONE {
                st.delete_bucket(p);
            } else {
                st.buckets[p].head = next;
            }
        } else {
            st.set_next(prev, next);
        }
        let key = st.ent_key(e);
        st.stage_hashes(&key, &mut scratch);
        st.stage_remove(&scratch);
        let rmask = match &self.classes[c as usize] {
            Some(cl) => cl.mask,
            None => unreachable_rule(),
        };
        let st = &mut self.order[p_tab];
        st.count_plens(&rmask, false);
        let l = (st.ents[e as usize * st.stride()]) as u32;
        st.release_mask(l);

        // Move the last entry into the hole.
        let last = st.n_ents - 1;
        if e != last {
            let (moved_p, moved_prev) = self.locate(&self.order[p_tab], last)?;
            let st = &mut self.order[p_tab];
            let stride = st.stride();
            let (dst, src) = (e as usize * stride, last as usize * stride);
            st.ents.copy_within(src..src + stride, dst);
            if moved_prev == NONE {
                st.buckets[moved_p].head = e;
            } else {
                st.set_next(moved_prev, e);
            }
            let moved_rule = st.ent_rule(e);
            if let Some(rule) = &mut self.slots[moved_rule as usize] {
                rule.ent = e;
            }
        }
        let st = &mut self.order[p_tab];
        st.n_ents -= 1;
        let stride = st.stride();
        st.ents.truncate(st.n_ents as usize * stride);
        let empty = st.n_ents == 0;
        let was_max = st.max_rank == my_rank;
        if let Some(rule) = &mut self.slots[r as usize] {
            rule.ent = NONE;
        }

        if empty {
            self.drop_table(tid);
        } else if was_max {
            let st = &mut self.order[p_tab];
            st.max_stale += 1;
            // Small subtables rescan at once; large ones keep the bound until an eighth of
            // their rules were removed from the top (amortised O(1), module invariants).
            if st.buckets.len() <= 64 || st.max_stale as usize * 8 >= st.n_ents as usize {
                let st = &self.order[p_tab];
                let new_max = st
                    .buckets
                    .iter()
                    .filter(|b| b.head != NONE)
                    .map(|b| self.ent_rank(st, b.head))
                    .max()
                    .unwrap_or(0);
                self.order[p_tab].max_rank = new_max;
                self.order[p_tab].max_stale = 0;
                self.reorder(tid);
            }
        }
        Some(key)
    }

    fn drop_table(&mut self, tid: u32) {
        let p = self.pos[tid as usize] as usize;
        let st = self.order.remove(p);
        for q in p..self.order.len() {
            self.pos[self.order[q].tid as usize] = q as u32;
        }
        self.pos[tid as usize] = NONE;
        self.free_tids.push(tid);
        self.table_index.remove(&st.mask);
        for c in self.classes.iter_mut().flatten() {
            if st.mask.is_subset_of(&c.mask) {
                c.compat.retain(|&x| x != tid);
            }
        }
    }

    /// Walks the list from `e`; returns the first entry that outranks `best` and matches.
    #[inline(always)]
    fn scan_list(
        &self,
        st: &Subtable,
        mut e: u32,
        pkt: &FlowKey,
        best: Option<(u32, u64)>,
        mut wc: Option<&mut FlowMask>,
    ) -> Option<u32> {
        while e != NONE {
            if let Some((bp, bs)) = best {
                let prio = st.ent_prio(e);
                if prio < bp || (prio == bp && self.rule_at(st.ent_rule(e)).seq > bs) {
                    return None;
                }
            }
            let hit = match wc.as_deref_mut() {
                Some(wc) => st.ent_matches_wc(e, pkt, wc),
                None => st.ent_matches(e, pkt),
            };
            if hit {
                return Some(e);
            }
            e = st.ent_next(e);
        }
        None
    }

    /// The winning rule for `pkt`, if any.
    #[inline]
    pub fn lookup(&self, pkt: &FlowKey) -> Option<&Rule<T>> {
        // The best match so far as (priority, rule index): its sequence number (needed only
        // on priority ties) is read from the rule slot lazily, so a hit costs no slot access.
        let mut best: Option<(u32, u32)> = None;
        for st in &self.order {
            if let Some((bp, br)) = best {
                let mp = (st.max_rank >> 64) as u32;
                if mp < bp || (mp == bp && st.max_rank <= rank(bp, self.rule_at(br).seq)) {
                    break;
                }
            }
            // No prefilter here: on ClassBench it rejects 1–3% of the subtables visited and
            // costs about as much as the hash probe, which rejects as well.
            let h = st.hash(pkt);
            let Some(p) = st.find(h) else {
                continue;
            };
            let head = st.buckets[p].head;
            let hit = match st.cw {
                1 => self.scan_fixed::<1>(st, head, pkt, best),
                2 => self.scan_fixed::<2>(st, head, pkt, best),
                3 => self.scan_fixed::<3>(st, head, pkt, best),
                4 => self.scan_fixed::<4>(st, head, pkt, best),
                5 => self.scan_fixed::<5>(st, head, pkt, best),
                6 => self.scan_fixed::<6>(st, head, pkt, best),
                _ => {
                    let b = best.map(|(bp, br)| (bp, self.rule_at(br).seq));
                    self.scan_list(st, head, pkt, b, None)
                }
            };
            if let Some(e) = hit {
                best = Some((st.ent_prio(e), st.ent_rule(e)));
            }
        }
        best.map(|(_, r)| self.rule_at(r))
    }

    /// [`Self::scan_list`] without wildcards for a subtable with exactly `N` check words: the
    /// packet's check words are gathered once, and each entry is compared with a loop of
    /// constant length (no per-word index loads).
    #[inline(always)]
    fn scan_fixed<const N: usize>(
        &self,
        st: &Subtable,
        mut e: u32,
        pkt: &FlowKey,
        best: Option<(u32, u32)>,
    ) -> Option<u32> {
        let mut pw = [0u64; N];
        for (p, &i) in pw.iter_mut().zip(&st.cidx) {
            *p = pkt.w[usize::from(i) % FLOW_WORDS];
        }
        let stride = META + N;
        while e != NONE {
            let base = e as usize * stride;
            let Some(ent) = st.ents.get(base..base + stride) else {
                unreachable_rule()
            };
            if let Some((bp, br)) = best {
                let prio = (ent[0] >> 32) as u32;
                if prio < bp
                    || (prio == bp && self.rule_at(ent[1] as u32).seq > self.rule_at(br).seq)
                {
                    return None;
                }
            }
            let l = (ent[0] as u32) as usize * N;
            let Some(lm) = st.lmasks.get(l..l + N) else {
                unreachable_rule()
            };
            let mut diff = 0u64;
            for j in 0..N {
                diff |= (pw[j] & lm[j]) ^ ent[META + j];
            }
            if diff == 0 {
                return Some(e);
            }
            e = (ent[1] >> 32) as u32;
        }
        None
    }

    /// The winning rule for `pkt`, adding to `wc` every bit the lookup consulted (sound
    /// megaflow mask; see the module docs).
    pub fn lookup_wc(&self, pkt: &FlowKey, wc: &mut FlowMask) -> Option<&Rule<T>> {
        // The winner first (the plain lookup): only rules ranking above it need a proof, so
        // a subtable visited before the winner's is found never proves rules below it.
        let winner = self.lookup(pkt);
        let floor = winner.map(|r| (r.priority, r.seq));
        let floor_rank = floor.map(|(p, s)| rank(p, s));
        let mut partial = StageHashes::default();
        let mut tries: [Option<(LenSet, u32)>; 4] = [None; 4];
        for st in &self.order {
            if floor_rank.is_some_and(|f| st.max_rank <= f) {
                break;
            }
            let reject = st.filter_reject(pkt, wc);
            if reject == Some(None) {
                continue;
            }
            // Prefix tries: if no rule of the subtable can match on a trie field, the top
            // bits the trie consulted prove it (every rule here has a prefix there).
            // (A prefilter rejection costs one field's bits at most: look at the tries then
            // only if they were consulted already.)
            let mut skip: Option<(usize, u128, u32)> = None;
            for (t, &f) in TRIE_FIELDS.iter().enumerate() {
                if !self.cfg.prefix_tries
                    || st.nonprefix[t] != 0
                    || st.plens[t].has(0)
                    || (reject.is_some() && tries[t].is_none())
                    || !trie_applies(f, pkt)
                {
                    continue;
                }
                let (matched, checkbits) = *tries[t]
                    .get_or_insert_with(|| self.tries[t].lookup(aligned(f, f.get(pkt)), f.bits()));
                if !matched.intersects(&st.plens[t]) {
                    let bits = top_bits(f, checkbits);
                    let new = (bits & !f.get_mask(wc)).count_ones();
                    if skip.is_none_or(|(_, _, n)| new < n) {
                        skip = Some((t, bits, new));
                    }
                }
            }
            if skip.is_some_and(|(_, _, n)| n == 0) {
                continue;
            }
            // The cheapest whole-subtable proof, if any: the prefilter's failing field or
            // the trie's top bits (fewest new bits; the prefilter on a tie).
            let reject = reject.flatten().map(|(i, bits)| {
                let cost = (bits & !wc.w[i]).count_ones();
                (cost, Some((i, bits)), None)
            });
            let trie = skip.map(|(t, bits, n)| (n, None, Some((t, bits))));
            let whole = match (reject, trie) {
                (Some(r), Some(t)) => Some(if t.0 < r.0 { t } else { r }),
                (r, t) => r.or(t),
            };
            let Some((cost, rej, trie)) = whole else {
                self.prove_subtable(st, pkt, floor, wc, &mut partial);
                continue;
            };
            // In a small subtable, proving the rules one by one may still cost less (e.g. each
            // misses on a bit already in the mask). A large one's hashed bits rarely do: not
            // worth probing it to find out.
            let mut each_cost = u32::MAX;
            let mut each = FlowMask::CATCHALL;
            if st.n_ents <= SMALL_SUBTABLE {
                each = *wc;
                self.prove_subtable(st, pkt, floor, &mut each, &mut partial);
                each_cost = each
                    .w
                    .iter()
                    .zip(&wc.w)
                    .map(|(a, b)| (a & !b).count_ones())
                    .sum();
            }
            if each_cost < cost {
                *wc = each;
            } else if let Some((i, bits)) = rej {
                wc.w[i] |= bits;
            } else if let Some((t, bits)) = trie {
                let f = TRIE_FIELDS[t];
                let old = f.get_mask(wc);
                f.set_mask(wc, old | bits);
            }
        }
        if let Some(r) = winner {
            wc.union_with(&self.class(r.class).mask);
        }
        winner
    }

    /// Adds to `wc` a proof that no rule of `st` ranking above `floor` (every rule if `None`)
    /// matches `pkt`: for a small subtable one proof per such rule, else the subtable's hashed
    /// bits (only the stages consulted, on a staged miss) and one proof per such rule of the
    /// probed bucket. The caller found the winner with [`Self::lookup`], so none of these
    /// rules matches (a match would add its mask: still sound).
    fn prove_subtable(
        &self,
        st: &Subtable,
        pkt: &FlowKey,
        floor: Option<(u32, u64)>,
        wc: &mut FlowMask,
        partial: &mut StageHashes,
    ) {
        if st.n_ents <= SMALL_SUBTABLE {
            let floor = floor.map(|(p, s)| rank(p, s));
            for e in 0..st.n_ents {
                if floor.is_none_or(|f| self.ent_rank(st, e) > f) {
                    st.ent_matches_wc(e, pkt, wc);
                }
            }
            return;
        }
        let h = st.stage_hashes(pkt, partial);
        for (s, (set, ph)) in st.stage_sets.iter().zip(partial.iter()).enumerate() {
            if !set.contains_key(ph) {
                st.unwildcard(usize::from(st.stage_ends[s]), wc);
                return;
            }
        }
        st.unwildcard(usize::from(st.nw), wc);
        if let Some(p) = st.find(h) {
            self.scan_list(st, st.buckets[p].head, pkt, floor, Some(wc));
        }
    }

    /// Work counters of one lookup of `pkt`: (subtables probed, bucket hits, entries compared).
    pub fn probe_counts(&self, pkt: &FlowKey) -> (usize, usize, usize) {
        self.probe_detail(pkt, &mut [])
    }

    /// [`Self::probe_counts`], also adding per subtable (lookup order, if `per` is long
    /// enough) the probes, hits and entries compared.
    pub fn probe_detail(&self, pkt: &FlowKey, per: &mut [[usize; 3]]) -> (usize, usize, usize) {
        let mut best: Option<(u32, u64)> = None;
        let mut best_rank = 0u128;
        let (mut probed, mut hits, mut compared) = (0, 0, 0);
        for (q, st) in self.order.iter().enumerate() {
            if best.is_some() && st.max_rank <= best_rank {
                break;
            }
            // Like `lookup`: no prefilter, every subtable visited is probed.
            probed += 1;
            let c0 = compared;
            if let Some(x) = per.get_mut(q) {
                x[0] += 1;
            }
            let Some(p) = st.find(st.hash(pkt)) else {
                continue;
            };
            hits += 1;
            if let Some(x) = per.get_mut(q) {
                x[1] += 1;
            }
            let mut e = st.buckets[p].head;
            while e != NONE {
                if let Some((bp, bs)) = best {
                    let prio = st.ent_prio(e);
                    if prio < bp || (prio == bp && self.rule_at(st.ent_rule(e)).seq > bs) {
                        break;
                    }
                }
                compared += 1;
                if st.ent_matches(e, pkt) {
                    let rule = self.rule_at(st.ent_rule(e));
                    best = Some((rule.priority, rule.seq));
                    best_rank = rank(rule.priority, rule.seq);
                    break;
                }
                e = st.ent_next(e);
            }
            if let Some(x) = per.get_mut(q) {
                x[2] += compared - c0;
            }
        }
        (probed, hits, compared)
    }

    /// Per live subtable, in lookup order: its mask, number of rules and highest priority
    /// (for tuning and reports).
    pub fn subtable_summary(&self) -> Vec<(FlowMask, usize, u32)> {
        self.order
            .iter()
            .map(|st| (st.mask, st.n_ents as usize, (st.max_rank >> 64) as u32))
            .collect()
    }

    /// Live rules, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Rule<T>> {
        self.slots.iter().filter_map(Option::as_ref)
    }

    /// Checks the structural invariants (for tests); returns a description of the first
    /// violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut seen = 0usize;
        for (q, st) in self.order.iter().enumerate() {
            let t = st.tid;
            if self.pos[t as usize] as usize != q {
                return Err(format!("pos of table {t} wrong"));
            }
            let mut max = 0u128;
            let mut n = 0u32;
            for b in st.buckets.iter().filter(|b| b.head != NONE) {
                let mut e = b.head;
                let mut last = u128::MAX;
                while e != NONE {
                    let r = st.ent_rule(e);
                    let rule = self.rule_at(r);
                    let (k, m) = self.rule_match(rule);
                    if rule.table != t || rule.ent != e || rule.priority != st.ent_prio(e) {
                        return Err(format!("rule {r} / entry {e} of table {t} disagree"));
                    }
                    if !st.mask.is_subset_of(&m) || m.map().0 & !st.check_map().0 != 0 {
                        return Err(format!("table {t} mask does not fit rule {r}'s"));
                    }
                    if st.hash(&k) != b.hash {
                        return Err(format!("rule {r} in the wrong bucket"));
                    }
                    if !st.filter_pass(&k) {
                        return Err(format!("rule {r} fails its table's prefilter"));
                    }
                    let rk = self.ent_rank(st, e);
                    if rk >= last {
                        return Err(format!("bucket list of table {t} not sorted"));
                    }
                    last = rk;
                    max = max.max(rk);
                    n += 1;
                    e = st.ent_next(e);
                }
            }
            let max_ok = if st.max_stale == 0 {
                max == st.max_rank
            } else {
                max <= st.max_rank
            };
            if n != st.n_ents || n == 0 || !max_ok {
                return Err(format!("table {t} counters wrong"));
            }
            seen += n as usize;
        }
        if seen != self.n_rules || self.iter().count() != seen {
            return Err("rule count mismatch".into());
        }
        if self.order.windows(2).any(|w| w[0].max_rank < w[1].max_rank) {
            return Err("order not sorted".into());
        }
        Ok(())
    }
}

#[cold]
#[inline(never)]
fn unreachable_rule() -> ! {
    // Indices stored in the structure always name live entries (module invariants).
    unreachable!("oftable: dangling internal index")
}

/// Makes room for `extra` more elements, growing by a quarter (not Rust's default doubling):
/// rule storage is most of the table's memory, and a 1.25 growth factor bounds the unused
/// capacity to 20% instead of 50% while keeping pushes amortized O(1).
fn reserve_slack<X>(v: &mut Vec<X>, extra: usize) {
    if v.len() + extra > v.capacity() {
        v.reserve_exact((v.capacity() / 4).max(extra).max(8));
    }
}

/// Heap bytes of a std `HashMap` (hashbrown) of capacity `cap` with `entry`-byte entries:
/// a power-of-two bucket count holding `cap` at 7/8 load (4 or 8 below 8), one control
/// byte per bucket plus a 16-byte group tail. Checked against a heap profiler (DHAT, see
/// the `cb_lookup` example's `LEAK_TABLE`).
fn map_bytes(cap: usize, entry: usize) -> usize {
    if cap == 0 {
        return 0;
    }
    let buckets = if cap < 4 {
        4
    } else if cap < 8 {
        8
    } else {
        (cap * 8 / 7).next_power_of_two()
    };
    buckets * (entry + 1) + 16
}

/// `v.push(x)` with [`reserve_slack`]'s growth.
fn grow_push<X>(v: &mut Vec<X>, x: X) {
    reserve_slack(v, 1);
    v.push(x);
}

fn make_id(idx: u32, generation: u32) -> RuleId {
    RuleId((u64::from(generation) << 32) | u64::from(idx))
}

fn split_id(id: RuleId) -> (u32, u32) {
    (id.0 as u32, (id.0 >> 32) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The top `n` bits of a left-aligned 128-bit value.
    fn top(n: u32) -> u128 {
        u128::MAX.checked_shl(128 - n).unwrap_or(0)
    }

    /// Brute-force twin of [`PrefixTrie::lookup`] over a list of (left-aligned value, len),
    /// for a field of `width` bits.
    fn naive(prefixes: &[(u128, u32)], v: u128, width: u32) -> (LenSet, u32) {
        let mut plens = LenSet::default();
        let mut depth = 0u32;
        for &(p, l) in prefixes {
            let m = top(l);
            if (p ^ v) & m == 0 {
                plens.set(l, true);
            }
            // Bits of the packet's path shared with this prefix (at most its length).
            let lcp = ((p ^ v) & m).leading_zeros().min(l);
            depth = depth.max(lcp + u32::from(lcp < l));
        }
        (plens, depth.clamp(1, width))
    }

    fn rule(fields: &[(FieldId, u128, u128)]) -> (FlowKey, FlowMask) {
        let (mut k, mut m) = (FlowKey::ZERO, FlowMask::CATCHALL);
        for &(f, v, mask) in fields {
            f.set(&mut k, v);
            f.set_mask(&mut m, mask);
        }
        (k.masked(&m), m)
    }

    /// Removing rules in rank order from one large subtable (each removal takes its top rule)
    /// leaves `max_rank` a stale upper bound between rescans; lookups and megaflow lookups
    /// must still agree with the linear twin after every removal, and the invariants hold.
    #[test]
    fn removing_top_rules_of_a_large_subtable_keeps_answers() {
        use crate::LinearClassifier;
        let mut t: OfTable<u32> = OfTable::new();
        let mut lin: LinearClassifier<u32> = LinearClassifier::new();
        let mut ids = Vec::new();
        let n = 600u32;
        for i in 0..n {
            let (k, m) = rule(&[
                (FieldId::DlType, 0x0800, 0xffff),
                (FieldId::NwDst, u128::from(i) << 8, 0xffff_ff00),
            ]);
            ids.push((
                t.insert(1000 - i, &k, &m, i),
                lin.insert(1000 - i, &k, &m, i),
            ));
        }
        // One low-priority rule in another subtable, so lookups go past the large one.
        let (k, m) = rule(&[(FieldId::DlType, 0x0800, 0xffff)]);
        t.insert(1, &k, &m, u32::MAX);
        lin.insert(1, &k, &m, u32::MAX);
        let probe = |i: u32| {
            let (k, _) = rule(&[
                (FieldId::DlType, 0x0800, 0xffff),
                (
                    FieldId::NwDst,
                    (u128::from(i) << 8) | 7,
                    u128::from(u32::MAX),
                ),
            ]);
            k
        };
        for (step, (a, b)) in ids.into_iter().enumerate() {
            assert_eq!(t.remove(a), lin.remove(b));
            t.check_invariants().expect("invariants");
            for i in (0..n).step_by(37).chain([step as u32, step as u32 + 1]) {
                let key = probe(i);
                let want = lin.lookup(&key).map(|r| r.value);
                assert_eq!(
                    t.lookup(&key).map(|r| r.value),
                    want,
                    "step {step} probe {i}"
                );
                let mut wc = FlowMask::CATCHALL;
                assert_eq!(t.lookup_wc(&key, &mut wc).map(|r| r.value), want);
            }
        }
    }

    #[test]
    fn wc_proves_only_rules_above_the_final_winner() {
        // R1 (20) and R3 (5) share the `nw_dst/16` subtable, visited before the catch-all
        // R2 (10) that wins: R3 ranks below the winner, so its `tp_dst` miss needs no proof.
        let mut t: OfTable<u8> = OfTable::new();
        let (k, m) = rule(&[(FieldId::NwDst, 0x0a01_0000, 0xffff_0000)]);
        t.insert(20, &k, &m, 1);
        let (k, m) = rule(&[]);
        t.insert(10, &k, &m, 2);
        let (k, m) = rule(&[
            (FieldId::NwDst, 0x0a03_0000, 0xffff_0000),
            (FieldId::TpDst, 80, 0xffff),
        ]);
        t.insert(5, &k, &m, 3);
        assert_eq!(t.n_subtables(), 2);
        let mut p = FlowKey::ZERO;
        FieldId::NwDst.set(&mut p, 0x0a03_0101);
        FieldId::TpDst.set(&mut p, 22);
        let mut wc = FlowMask::CATCHALL;
        assert_eq!(t.lookup_wc(&p, &mut wc).map(|r| r.value), Some(2));
        assert_eq!(FieldId::TpDst.get_mask(&wc), 0);
        // R1's miss is proven on `nw_dst` (down to the differing bit).
        assert_eq!(FieldId::NwDst.get_mask(&wc), 0xfffe_0000);
    }

    #[test]
    fn wc_takes_per_rule_proofs_when_cheaper_than_the_prefilter() {
        // One subtable (R1's relaxed mask is empty): the rules agree only on `nw_proto` = 17,
        // the prefilter. The packet misses R1 on `dl_type` and R2 on `reg0`; with both
        // already in the mask (as xlate has them) the per-rule proofs cost nothing, the
        // prefilter's `nw_proto` 8 bits.
        let mut t: OfTable<u8> = OfTable::new();
        let (k, m) = rule(&[
            (FieldId::DlType, 0x86dd, 0xffff),
            (FieldId::NwProto, 17, 0xff),
        ]);
        t.insert(10, &k, &m, 1);
        let (k, m) = rule(&[
            (FieldId::DlType, 0x0800, 0xffff),
            (FieldId::NwProto, 17, 0xff),
            (FieldId::Reg0, 5, 0xffff_ffff),
        ]);
        t.insert(10, &k, &m, 2);
        assert_eq!(t.n_subtables(), 1);
        let mut p = FlowKey::ZERO;
        FieldId::DlType.set(&mut p, 0x0800);
        FieldId::NwProto.set(&mut p, 6);
        let mut wc = FlowMask::CATCHALL;
        FieldId::DlType.set_mask(&mut wc, 0xffff);
        FieldId::Reg0.set_mask(&mut wc, 0xffff_ffff);
        let before = wc.count_ones();
        assert!(t.lookup_wc(&p, &mut wc).is_none());
        assert_eq!(wc.count_ones(), before);
        // From an empty mask the per-rule proofs cost 16 + 30 bits: the prefilter wins.
        let mut wc = FlowMask::CATCHALL;
        assert!(t.lookup_wc(&p, &mut wc).is_none());
        assert_eq!(FieldId::NwProto.get_mask(&wc), 0xff);
        assert_eq!(wc.count_ones(), 8);
    }

    proptest! {
        /// IPv6 prefix tries in `lookup_wc`: a table of IPv6 rules with /40–/120 prefixes on
        /// `ipv6_src` and `ipv6_dst` (one large subtable each way, so the trie is what proves
        /// a miss), probed with IPv6 packets that share long prefixes with the rules; every
        /// packet equal to the probe under the mask must get the linear twin's answer.
        #[test]
        fn ipv6_tries_give_sound_megaflows(
            seed in any::<u64>(),
            lens in prop::collection::vec(40u32..121, 24..60),
        ) {
            use crate::LinearClassifier;
            let mut rng = seed | 1;
            let mut next = move || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            let base: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0000;
            let cfg = Config { prefix_tries: true, ..Config::default() };
            let mut t: OfTable<usize> = OfTable::with_config(cfg);
            let mut lin: LinearClassifier<usize> = LinearClassifier::new();
            let mut addrs = Vec::new();
            for (i, &l) in lens.iter().enumerate() {
                // Addresses that differ from each other deep down (bit 40 and below).
                let a = base ^ (u128::from(next()) >> 40) ^ (u128::from(next() as u8) << 80);
                let m = top(l);
                let f = if i % 2 == 0 { FieldId::Ipv6Src } else { FieldId::Ipv6Dst };
                let (k, mk) = rule(&[(FieldId::DlType, 0x86dd, 0xffff), (f, a & m, m)]);
                let prio = 100 + i as u32;
                t.insert(prio, &k, &mk, i);
                lin.insert(prio, &k, &mk, i);
                addrs.push(a);
            }
            for n in 0..60 {
                let a = addrs[n % addrs.len()] ^ 1u128.checked_shl(next() as u32 % 90).unwrap_or(0);
                let b = addrs[(n * 7 + 3) % addrs.len()] ^ 1u128.checked_shl(next() as u32 % 90).unwrap_or(0);
                let (p, _) = rule(&[
                    (FieldId::DlType, 0x86dd, 0xffff),
                    (FieldId::Ipv6Src, a, u128::MAX),
                    (FieldId::Ipv6Dst, b, u128::MAX),
                ]);
                let want = lin.lookup(&p).map(|r| r.value);
                let mut wc = FlowMask::CATCHALL;
                prop_assert_eq!(t.lookup_wc(&p, &mut wc).map(|r| r.value), want);
                for _ in 0..8 {
                    let mut q = p;
                    for i in 0..q.w.len() {
                        let noise = next() & if next() % 2 == 0 { u64::MAX } else { 1 << (next() % 64) };
                        q.w[i] = (p.w[i] & wc.w[i]) | (noise & !wc.w[i]);
                    }
                    prop_assert_eq!(lin.lookup(&q).map(|r| r.value), want, "unsound wc {:?}", wc);
                }
            }
        }
    }

    proptest! {
        /// The trie against the brute-force twin, for 32-bit (IPv4) and 128-bit (IPv6)
        /// fields, after every insert and remove of a random sequence.
        #[test]
        fn trie_matches_naive(
            ipv6 in any::<bool>(),
            ops in prop::collection::vec((any::<bool>(), 0u32..8, 0u32..129, any::<u32>()), 0..60),
            probes in prop::collection::vec(any::<u128>(), 1..20),
        ) {
            let width = if ipv6 { 128 } else { 32 };
            let mut trie = PrefixTrie::new();
            let mut live: Vec<(u128, u32)> = Vec::new();
            for (add, seed, len, flip) in ops {
                let len = len % (width + 1);
                if add || live.is_empty() {
                    let base = [0u128, u128::MAX, 0x5555_5555u128 << 96, 0xa5c3_0f00u128 << 96]
                        [seed as usize % 4];
                    // One bit flipped (none when the draw is past bit 0).
                    let flip = 127u32.checked_sub(flip % 140).map_or(0, |b| 1u128 << b);
                    let v = (base ^ flip) & top(len);
                    trie.insert(v, len);
                    live.push((v, len));
                } else {
                    let (v, l) = live.swap_remove(seed as usize % live.len());
                    trie.remove(v, l);
                }
                for &p in &probes {
                    let p = p & top(width);
                    for v in [p, live.first().map_or(p, |x| x.0 ^ (p & (0xff << 100)))] {
                        let (tp, tc) = trie.lookup(v, width);
                        let (np, nc) = naive(&live, v, width);
                        prop_assert_eq!(tp, np);
                        // The trie may walk deeper than the longest shared prefix + 1 only
                        // through matching prefixes; it must always cover the naive depth.
                        prop_assert!(tc >= nc, "checkbits {} < {}", tc, nc);
                        // And its bits must prove every non-matching prefix differs.
                        for &(pv, pl) in &live {
                            if (pv ^ v) & top(pl) != 0 {
                                prop_assert!((pv ^ v) & top(pl) & top(tc) != 0);
                            }
                        }
                    }
                }
            }
        }
    }
}
