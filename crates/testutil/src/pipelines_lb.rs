//! Random pipelines that also use the load-balancing actions of issue #17 (session 13):
//! `multipath(...)` with every hash-field set and algorithm, `bundle(...)` and
//! `bundle_load(...)` (members live, dead and reserved) and `check_pkt_larger(...)`, for the
//! megaflow soundness
//! property (`crates/ofproto/tests/megaflow_soundness_lb.rs`).
//!
//! [`random_pipeline_lb`] draws a [`crate::pipelines::random_pipeline`] and adds rules at
//! priorities 301–399 (above every random rule, below the `ct` rules at 400+) that pick a
//! link and make it visible: written into Ethernet address bits (a `set` action), or into a
//! register copied to an address or matched by an added rule further down the pipeline.
//! Every flow is valid OpenFlow 1.0. A pure function of the generator state.

use crate::pipelines::{Pipeline, PipelineMix, random_pipeline};
use crate::rng::TestRng;

const FIELDS: [&str; 7] = [
    "eth_src",
    "symmetric_l4",
    "symmetric_l3l4",
    "symmetric_l3l4+udp",
    "nw_src",
    "nw_dst",
    "symmetric_l3",
];
const ALGORITHMS: [&str; 4] = ["modulo_n", "hash_threshold", "hrw", "iter_hash"];

fn n_tables(p: &Pipeline) -> u32 {
    p.flows
        .iter()
        .filter_map(|f| f.strip_prefix("table="))
        .filter_map(|f| f.split(',').next()?.parse::<u32>().ok())
        .max()
        .map_or(1, |t| t + 1)
}

/// One `multipath(...)` action writing into `dst` (at least `bits` wide, at most 16).
fn multipath(rng: &mut TestRng, dst: &str, bits: u32) -> String {
    let f = FIELDS[rng.index(FIELDS.len())];
    let a = ALGORITHMS[rng.index(ALGORITHMS.len())];
    let max = 1u64 << bits.min(16);
    let n = if rng.chance(1, 4) {
        rng.range(1, max)
    } else {
        rng.range(1, max.min(9))
    };
    let arg = rng.range(0, 2 * n + 2);
    let basis = rng.below(65536);
    format!("multipath({f},{basis},{a},{n},{arg},{dst})")
}

/// One `bundle(...)` (outputs) or, with `dst`, `bundle_load(...)`: members among the
/// bridge's ports, ports that do not exist and reserved ports.
fn bundle(rng: &mut TestRng, dst: Option<&str>, n_ports: u32) -> String {
    let f = FIELDS[rng.index(FIELDS.len())];
    let a = if rng.chance(1, 2) {
        "hrw"
    } else {
        "active_backup"
    };
    let basis = rng.below(65536);
    let n = rng.range(0, 5);
    let members: Vec<String> = (0..n)
        .map(|_| match rng.below(8) {
            0 => "NONE".to_string(),
            1 => "IN_PORT".to_string(),
            2 => format!("{}", u64::from(n_ports) + rng.range(1, 3)),
            _ => format!("{}", rng.range(1, u64::from(n_ports))),
        })
        .collect();
    let delim = if rng.chance(1, 2) {
        "members"
    } else {
        "slaves"
    };
    match dst {
        Some(d) => format!(
            "bundle_load({f},{basis},{a},ofport,{d},{delim}:{})",
            members.join(",")
        ),
        None => format!(
            "bundle({f},{basis},{a},ofport,{delim}:{})",
            members.join(",")
        ),
    }
}

/// A random pipeline with multipath rules added (see the module doc).
pub fn random_pipeline_lb(rng: &mut TestRng, mix: &PipelineMix, max_extra: u32) -> Pipeline {
    let mut p = random_pipeline(rng, mix);
    let tables = n_tables(&p);
    let n = rng.range(1, u64::from(max_extra.max(1)));
    let mut used: Vec<(u32, u64)> = Vec::new();
    let mut prio_in = |table: u32, rng: &mut TestRng| {
        let mut prio = rng.range(301, 399);
        while used.contains(&(table, prio)) {
            prio = 301 + (prio - 300) % 99;
        }
        used.push((table, prio));
        prio
    };
    for _ in 0..n {
        let table = rng.below(u64::from(tables)) as u32;
        let prio = prio_in(table, rng);
        let l3 = *rng
            .pick(&["", "ip", "udp", "tcp", "ipv6", "arp", "sctp"])
            .unwrap_or(&"");
        let mut m = vec![format!("table={table}"), format!("priority={prio}")];
        if !l3.is_empty() {
            m.push(l3.to_string());
        }
        let port = rng.range(1, u64::from(mix.n_ports));
        let acts = match rng.below(7) {
            6 => {
                // The rest of the list in both branches of a datapath check_pkt_len.
                let to = rng.below(u64::from(tables));
                let tail = if to > u64::from(table) {
                    format!("resubmit(,{to})")
                } else {
                    format!("output:{port}")
                };
                format!(
                    "check_pkt_larger({})->NXM_NX_REG2[0],{tail},output:{}",
                    rng.range(40, 1600),
                    rng.range(1, u64::from(mix.n_ports))
                )
            }
            4 => bundle(rng, None, mix.n_ports),
            5 => format!(
                "{},output:{port}",
                bundle(rng, Some("NXM_OF_ETH_DST[8..23]"), mix.n_ports)
            ),
            0 => format!(
                "{},output:{port}",
                multipath(rng, "NXM_OF_ETH_DST[0..15]", 16)
            ),
            1 => {
                let bits = rng.range(1, 8) as u32;
                let ofs = rng.range(0, u64::from(40 - bits));
                let dst = format!("NXM_OF_ETH_SRC[{ofs}..{}]", ofs + u64::from(bits) - 1);
                format!("{},output:{port}", multipath(rng, &dst, bits))
            }
            2 => format!(
                "{},move:NXM_NX_REG3[0..7]->NXM_OF_ETH_DST[0..7],output:{port}",
                multipath(rng, "NXM_NX_REG3[0..7]", 8)
            ),
            _ => {
                // The link in reg2, matched by rules added to a later table (this one when
                // it is the last, where they only add rules).
                let to = if table + 1 < tables {
                    rng.range(u64::from(table) + 1, u64::from(tables) - 1) as u32
                } else {
                    table
                };
                for k in 0..4u64 {
                    let pr = prio_in(to, rng);
                    p.flows.push(format!(
                        "table={to},priority={pr},reg2={k},actions=output:{}",
                        k % u64::from(mix.n_ports) + 1
                    ));
                }
                let mp = multipath(rng, "NXM_NX_REG2[0..1]", 2);
                if to > table {
                    format!("{mp},resubmit(,{to})")
                } else {
                    format!("{mp},output:{port}")
                }
            }
        };
        p.flows.push(format!("{},actions={acts}", m.join(",")));
    }
    p.description.push_str(&format!(" lb={n}"));
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_uses_multipath_and_bundle() {
        let mix = PipelineMix::default();
        let a = random_pipeline_lb(&mut TestRng::new(9), &mix, 10);
        let b = random_pipeline_lb(&mut TestRng::new(9), &mix, 10);
        assert_eq!(a.flows, b.flows);
        let all: String = (0..20)
            .flat_map(|s| random_pipeline_lb(&mut TestRng::new(s), &mix, 10).flows)
            .collect();
        assert!(
            all.contains("bundle(")
                && all.contains("bundle_load(")
                && all.contains("active_backup")
        );
        for w in FIELDS.iter().chain(ALGORITHMS.iter()) {
            assert!(
                all.contains(&format!("({w},")) || all.contains(&format!(",{w},")),
                "{w}"
            );
        }
    }
}
