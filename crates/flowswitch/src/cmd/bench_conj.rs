//! `flowswitch bench conj`: ClassBench-derived conjunctive ACLs (issue #17) — flows installed
//! and OpenFlow-table lookup Mpps with `conjunction` vs the same ACLs expanded to a cross
//! product, interleaved in one run, medians.
//!
//! # Workload
//!
//! The rule file's lines (first = highest priority) are cut into ACL groups the way OVN
//! writes an ACL over address sets and a port set: up to `--group` consecutive rules with the
//! same protocol form one ACL whose source address set is the union of their source prefixes,
//! destination set the union of their destination prefixes, and port set the union of their
//! destination port ranges (each range as value/mask prefixes). Source ports are ignored (OVN
//! ACLs rarely match them), as is the ClassBench flags field. Group `g` has priority
//! `65000 - g`, conjunction id `g + 1` and the action `output:(g % 4 + 1)`.
//!
//! - **conjunction**: one rule per source prefix (`conjunction(id,1/n)`), per destination
//!   prefix (`2/n`) and per port prefix (`3/n`), plus `conj_id=id,ip`; a group whose ports
//!   cover everything (or whose protocol is a wildcard) has two clauses.
//! - **expanded**: the cross product, one rule per (source, destination, port) at the group's
//!   priority — what a controller without conjunctions installs.
//!
//! Both tables are `ofproto` tables (tuple-space backend, the default); lookups are
//! [`ofproto::table::FlowTable::lookup_wc`] — the call translation makes, with the megaflow
//! mask — over the ClassBench trace. Every header's answer (the output port, or none) is
//! checked against a direct scan of the groups: `mismatches` counts the headers where the
//! expanded form differs (must be 0), `conj_differs` those where the conjunctive form does —
//! only where OVS's classifier cannot match either (see `run`). Timed passes alternate conj / expanded;
//! the medians are reported. `--write-flows DIR` also writes both tables as
//! `ovs-ofctl add-flows` files (`conj.flows`, `expanded.flows`) for timing OVS.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use classifier::classbench::{self, CbHeader, CbRule, range_to_prefixes};
use flow::ofp::{Action, Match, OfPort};
use flow::{FieldId, FlowKey, FlowMask};
use ofproto::Backend;
use ofproto::table::{FlowTable, OfRule};

/// Arguments of `bench conj`.
#[derive(Debug, clap::Args)]
pub struct ConjArgs {
    /// ClassBench rule file (gzip or plain).
    #[arg(long)]
    rules: PathBuf,
    /// ClassBench trace file (gzip or plain).
    #[arg(long)]
    trace: PathBuf,
    /// Most ClassBench rules per ACL group (1 to 64).
    #[arg(long, default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    group: u32,
    /// Timed passes of each form (interleaved; medians reported), 1 to 101.
    #[arg(long, default_value_t = 7,
          value_parser = clap::value_parser!(u32).range(1..=101))]
    passes: u32,
    /// Refuse a workload whose expanded form would exceed this many rules.
    #[arg(long, default_value_t = 5_000_000)]
    max_expanded: usize,
    /// Write both tables as `ovs-ofctl add-flows` files into this directory.
    #[arg(long)]
    write_flows: Option<PathBuf>,
}

/// One ACL group: the clauses and what it does.
#[derive(Debug, Clone)]
struct Acl {
    priority: u16,
    id: u32,
    port: u16,
    proto: Option<u8>,
    srcs: Vec<(u32, u8)>,
    dsts: Vec<(u32, u8)>,
    /// Destination-port prefixes (value, mask); empty = any port (two clauses).
    dports: Vec<(u16, u16)>,
}

fn mask32(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

impl Acl {
    fn matches(&self, h: &CbHeader) -> bool {
        self.proto.is_none_or(|p| p == h.proto)
            && self.srcs.iter().any(|&(a, l)| h.src & mask32(l) == a)
            && self.dsts.iter().any(|&(a, l)| h.dst & mask32(l) == a)
            && (self.dports.is_empty() || self.dports.iter().any(|&(v, m)| h.dport & m == v))
    }
    fn n_clauses(&self) -> u8 {
        if self.dports.is_empty() { 2 } else { 3 }
    }
    fn n_expanded(&self) -> usize {
        self.srcs.len() * self.dsts.len() * self.dports.len().max(1)
    }
}

fn build_acls(rules: &[CbRule], group: usize) -> Vec<Acl> {
    let mut acls: Vec<Acl> = Vec::new();
    let mut i = 0;
    while i < rules.len() {
        let proto = (rules[i].proto_mask == 0xff).then_some(rules[i].proto);
        let mut j = i;
        let mut acl = Acl {
            priority: 65000u16.saturating_sub(acls.len().min(65000) as u16),
            id: acls.len() as u32 + 1,
            port: (acls.len() % 4) as u16 + 1,
            proto,
            srcs: Vec::new(),
            dsts: Vec::new(),
            dports: Vec::new(),
        };
        let mut any_port = proto.is_none_or(|p| p != 6 && p != 17);
        while j < rules.len()
            && j - i < group
            && (rules[j].proto_mask == 0xff).then_some(rules[j].proto) == proto
        {
            let r = &rules[j];
            if !acl.srcs.contains(&(r.src, r.src_len)) {
                acl.srcs.push((r.src, r.src_len));
            }
            if !acl.dsts.contains(&(r.dst, r.dst_len)) {
                acl.dsts.push((r.dst, r.dst_len));
            }
            if r.dport == (0, 65535) {
                any_port = true;
            }
            for p in range_to_prefixes(r.dport.0, r.dport.1) {
                if !acl.dports.contains(&p) {
                    acl.dports.push(p);
                }
            }
            j += 1;
        }
        if any_port {
            acl.dports.clear();
        }
        acls.push(acl);
        i = j;
    }
    acls
}

fn base(proto: Option<u8>) -> (FlowKey, FlowMask) {
    let mut k = FlowKey::ZERO;
    let mut m = FlowMask::CATCHALL;
    FieldId::DlType.set(&mut k, 0x0800);
    FieldId::DlType.unwildcard(&mut m);
    if let Some(p) = proto {
        FieldId::NwProto.set(&mut k, u128::from(p));
        FieldId::NwProto.unwildcard(&mut m);
    }
    (k, m)
}

fn rule(k: FlowKey, m: FlowMask, priority: u16, actions: Vec<Action>) -> OfRule {
    OfRule {
        match_: Match {
            key: k.masked(&m),
            mask: m,
        },
        priority,
        cookie: 0,
        idle_timeout: 0,
        hard_timeout: 0,
        importance: 0,
        actions,
        created_ms: 0,
        modified_ms: 0,
        used_ms: 0,
        n_packets: 0,
        n_bytes: 0,
    }
}

fn with_src(mut k: FlowKey, mut m: FlowMask, (a, l): (u32, u8)) -> (FlowKey, FlowMask) {
    FieldId::NwSrc.set(&mut k, u128::from(a));
    FieldId::NwSrc.set_mask(&mut m, u128::from(mask32(l)));
    (k, m)
}
fn with_dst(mut k: FlowKey, mut m: FlowMask, (a, l): (u32, u8)) -> (FlowKey, FlowMask) {
    FieldId::NwDst.set(&mut k, u128::from(a));
    FieldId::NwDst.set_mask(&mut m, u128::from(mask32(l)));
    (k, m)
}
fn with_port(mut k: FlowKey, mut m: FlowMask, (v, pm): (u16, u16)) -> (FlowKey, FlowMask) {
    FieldId::TpDst.set(&mut k, u128::from(v));
    FieldId::TpDst.set_mask(&mut m, u128::from(pm));
    (k, m)
}

fn conj_rules(acls: &[Acl]) -> Vec<OfRule> {
    let mut out: Vec<OfRule> = Vec::new();
    // Clause rules with the same match (e.g. `0.0.0.0/0` as a source and as a destination)
    // are one rule carrying both conjunctions, as ovn-controller writes them.
    let mut seen: std::collections::HashMap<(FlowKey, FlowMask, u16), usize> = Default::default();
    let mut push = |out: &mut Vec<OfRule>, r: OfRule| {
        let id = (r.match_.key, r.match_.mask, r.priority);
        match seen.get(&id) {
            Some(&i) => out[i].actions.extend(r.actions),
            None => {
                seen.insert(id, out.len());
                out.push(r);
            }
        }
    };
    for a in acls {
        let n = a.n_clauses();
        let c = |clause| {
            vec![Action::Conjunction {
                id: a.id,
                clause,
                n_clauses: n,
            }]
        };
        let (k, m) = base(a.proto);
        for &s in &a.srcs {
            let (k, m) = with_src(k, m, s);
            push(&mut out, rule(k, m, a.priority, c(0)));
        }
        for &d in &a.dsts {
            let (k, m) = with_dst(k, m, d);
            push(&mut out, rule(k, m, a.priority, c(1)));
        }
        for &p in &a.dports {
            let (k, m) = with_port(k, m, p);
            push(&mut out, rule(k, m, a.priority, c(2)));
        }
        let (mut k, mut m) = base(None);
        FieldId::ConjId.set(&mut k, u128::from(a.id));
        FieldId::ConjId.unwildcard(&mut m);
        push(
            &mut out,
            rule(k, m, a.priority, vec![Action::output(OfPort(a.port))]),
        );
    }
    out
}

fn expanded_rules(acls: &[Acl]) -> Vec<OfRule> {
    let mut out = Vec::new();
    for a in acls {
        let (k, m) = base(a.proto);
        for &s in &a.srcs {
            let (k, m) = with_src(k, m, s);
            for &d in &a.dsts {
                let (k, m) = with_dst(k, m, d);
                let act = vec![Action::output(OfPort(a.port))];
                if a.dports.is_empty() {
                    out.push(rule(k, m, a.priority, act));
                } else {
                    for &p in &a.dports {
                        let (k, m) = with_port(k, m, p);
                        out.push(rule(k, m, a.priority, act.clone()));
                    }
                }
            }
        }
    }
    out
}

/// Inserts `rules` into a fresh table; (table, milliseconds).
fn install(rules: &[OfRule]) -> (FlowTable, f64) {
    let t0 = Instant::now();
    let mut t = FlowTable::new(Backend::TupleSpace);
    for r in rules {
        // Identical (match, priority) pairs replace each other, as an add does.
        if let Some(h) = t.find_strict(&r.match_, r.priority) {
            t.remove(h);
        }
        t.insert(r.clone());
    }
    (t, t0.elapsed().as_secs_f64() * 1e3)
}

fn answer(t: &FlowTable, k: &FlowKey) -> Option<u16> {
    let mut wc = FlowMask::CATCHALL;
    t.lookup_wc(k, &mut wc)
        .and_then(|(_, r)| match r.actions.first() {
            Some(Action::Output { port, .. }) => Some(port.0),
            _ => None,
        })
}

/// One timed pass: Mpps.
fn pass(t: &FlowTable, keys: &[FlowKey]) -> f64 {
    let t0 = Instant::now();
    let mut n = 0u64;
    for k in keys {
        let mut wc = FlowMask::CATCHALL;
        if black_box(t.lookup_wc(black_box(k), &mut wc)).is_some() {
            n += 1;
        }
        black_box(wc);
    }
    black_box(n);
    keys.len() as f64 / t0.elapsed().as_secs_f64() / 1e6
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn flow_text(r: &OfRule) -> String {
    format!(
        "{} actions={}",
        flow::text::format_match_priority(&r.match_, r.priority),
        flow::text::format_actions(&r.actions)
    )
}

/// Runs `bench conj`.
pub fn run(args: ConjArgs) -> anyhow::Result<()> {
    let rules = classbench::read_rules(&args.rules)
        .with_context(|| format!("reading {}", args.rules.display()))?;
    let trace = classbench::read_trace(&args.trace)
        .with_context(|| format!("reading {}", args.trace.display()))?;
    if rules.is_empty() || trace.is_empty() {
        bail!("empty rule file or trace");
    }
    let acls = build_acls(&rules, args.group as usize);
    let n_exp: usize = acls.iter().map(Acl::n_expanded).sum();
    if n_exp > args.max_expanded {
        bail!(
            "the expanded form would have {n_exp} rules (over --max-expanded {}); use a smaller --group",
            args.max_expanded
        );
    }
    let conj = conj_rules(&acls);
    let exp = expanded_rules(&acls);
    if let Some(dir) = &args.write_flows {
        std::fs::create_dir_all(dir)?;
        for (name, rs) in [("conj.flows", &conj), ("expanded.flows", &exp)] {
            let text: String = rs.iter().map(|r| flow_text(r) + "\n").collect();
            std::fs::write(dir.join(name), text)?;
        }
    }
    let (tc, conj_ms) = install(&conj);
    let (te, exp_ms) = install(&exp);
    let keys: Vec<FlowKey> = trace.iter().map(CbHeader::key).collect();
    // Correctness, untimed: both forms against a scan of the groups. The expanded form must
    // agree everywhere. The conjunctive form agrees except where OVS's classifier itself
    // cannot match: a group whose source and destination clauses are the same rule (both
    // `0.0.0.0/0`) is one rule with two conjunctions, and OVS's `find_conjunctive_match`
    // wants at least as many matching rules as clauses (`n_soft_pri`), so such a conjunction
    // is never satisfied there nor here; those headers are counted as `conj_differs`.
    let (mut conj_differs, mut mismatches, mut hits) = (0usize, 0usize, 0usize);
    for (h, k) in trace.iter().zip(&keys) {
        let want = acls.iter().find(|a| a.matches(h)).map(|a| a.port);
        hits += usize::from(want.is_some());
        let (ac, ae) = (answer(&tc, k), answer(&te, k));
        if ae != want {
            if mismatches < 5 {
                eprintln!("mismatch: {h:?}: scan {want:?} expanded {ae:?}");
            }
            mismatches += 1;
        }
        conj_differs += usize::from(ac != want);
    }
    let (mut pc, mut pe) = (Vec::new(), Vec::new());
    for _ in 0..args.passes {
        pc.push(pass(&tc, &keys));
        pe.push(pass(&te, &keys));
    }
    eprintln!(
        "conj passes Mpps: {:?}\nexpanded passes Mpps: {:?}",
        pc.iter()
            .map(|x| (x * 1000.0).round() / 1000.0)
            .collect::<Vec<_>>(),
        pe.iter()
            .map(|x| (x * 1000.0).round() / 1000.0)
            .collect::<Vec<_>>()
    );
    let (mc, me) = (median(&mut pc), median(&mut pe));
    println!(
        "acls={} headers={} hits={} mismatches={} conj_differs={} conj_flows={} expanded_flows={} flow_ratio={:.1} conj_install_ms={:.1} expanded_install_ms={:.1} conj_Mpps={:.3} expanded_Mpps={:.3} conj_vs_expanded={:.2} soft_subtables_rules={}",
        acls.len(),
        keys.len(),
        hits,
        mismatches,
        conj_differs,
        conj.len(),
        exp.len(),
        exp.len() as f64 / conj.len() as f64,
        conj_ms,
        exp_ms,
        mc,
        me,
        mc / me,
        tc.n_soft(),
    );
    if mismatches != 0 {
        bail!("{mismatches} headers classified differently from the group scan");
    }
    Ok(())
}
