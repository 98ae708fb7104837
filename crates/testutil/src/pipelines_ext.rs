//! Random pipelines that also use the issue-#17 actions that are not about groups or
//! conjunction (`write_metadata`, `mod_nw_ttl`, `exit`, `clone`, `write_actions`,
//! `clear_actions`, `set_queue`, `enqueue`, `pop_queue`), for the megaflow soundness
//! property (`crates/ofproto/tests/megaflow_soundness_actions.rs`).
//!
//! [`random_pipeline_ext`] draws a [`crate::pipelines::random_pipeline`] and adds rules at
//! priorities 301–399 (above every random rule, below the `ct` rules at 400+) whose matches
//! read `metadata` and the L3 protocol, and whose actions combine the new actions with
//! outputs, resubmits and `goto_table` between the pipeline's tables. Flows respect OVS's
//! rules (`mod_nw_ttl` only on IP matches, `write_metadata` only as the last instruction
//! before an optional `goto_table`, `clear_actions`/`write_actions` only with a
//! `goto_table`, so in OpenFlow 1.3), so every one is accepted. A pure function of the
//! generator state.

use crate::pipelines::{Pipeline, PipelineMix, random_pipeline};
use crate::rng::TestRng;

/// Knobs of [`random_pipeline_ext`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtMix {
    /// Extra rules added (uniform in `1..=max_extra_rules`).
    pub max_extra_rules: u32,
}

impl Default for ExtMix {
    fn default() -> ExtMix {
        ExtMix {
            max_extra_rules: 10,
        }
    }
}

fn n_tables(p: &Pipeline) -> u32 {
    p.flows
        .iter()
        .filter_map(|f| f.strip_prefix("table="))
        .filter_map(|f| f.split(',').next()?.parse::<u32>().ok())
        .max()
        .map_or(1, |t| t + 1)
}

/// A random pipeline (see the module doc) and a short description of what was added.
pub fn random_pipeline_ext(rng: &mut TestRng, mix: &PipelineMix, ext: &ExtMix) -> Pipeline {
    let mut p = random_pipeline(rng, mix);
    let tables = n_tables(&p);
    let metas: Vec<u64> = (0..3).map(|_| rng.range(0, 7)).collect();
    let n = rng.range(1, u64::from(ext.max_extra_rules.max(1)));
    let mut used: Vec<(u32, u64)> = Vec::new();
    for _ in 0..n {
        let table = rng.below(u64::from(tables)) as u32;
        let mut prio = rng.range(301, 399);
        while used.contains(&(table, prio)) {
            prio = 301 + (prio - 300) % 99;
        }
        used.push((table, prio));
        let l3 = *rng
            .pick(&["", "ip", "udp", "tcp", "ipv6", "arp", "icmp"])
            .unwrap_or(&"");
        let mut m = vec![format!("table={table}"), format!("priority={prio}")];
        if !l3.is_empty() {
            m.push(l3.to_string());
        }
        if rng.chance(1, 2) {
            let v = metas[rng.index(metas.len())];
            if rng.chance(1, 2) {
                m.push(format!("metadata={v:#x}"));
            } else {
                m.push(format!("metadata={v:#x}/0x3"));
            }
        }
        let ip = matches!(l3, "ip" | "udp" | "tcp" | "ipv6" | "icmp");
        let mut acts: Vec<String> = Vec::new();
        for _ in 0..rng.range(1, 4) {
            let a = match rng.below(8) {
                0 if ip => format!("mod_nw_ttl:{}", rng.range(0, 255)),
                1 => "exit".to_string(),
                2 => format!("output:{}", rng.range(1, u64::from(mix.n_ports))),
                3 => {
                    let to = rng.below(u64::from(tables));
                    // Only forward, except in rare loops (the depth limit stops them).
                    if to > u64::from(table) || rng.chance(1, 10) {
                        format!("resubmit(,{to})")
                    } else {
                        format!("output:{}", rng.range(1, u64::from(mix.n_ports)))
                    }
                }
                4 => {
                    // clone(...) around reversible actions, or around ct (IP only).
                    let p = rng.range(1, u64::from(mix.n_ports));
                    match rng.below(4) {
                        0 if ip => format!("clone(ct(commit),output:{p})"),
                        1 if ip => format!("clone(mod_nw_ttl:{},output:{p})", rng.range(1, 9)),
                        2 => format!("clone(mod_dl_src:00:00:5e:00:01:0{p},output:{p})"),
                        _ => {
                            let to = rng.below(u64::from(tables));
                            if to > u64::from(table) {
                                format!("clone(resubmit(,{to}))")
                            } else {
                                format!("clone(exit),output:{p}")
                            }
                        }
                    }
                }
                5 => {
                    let p = rng.range(1, u64::from(mix.n_ports));
                    let q = rng.range(0, 9);
                    match rng.below(3) {
                        0 => format!("set_queue:{q}"),
                        1 => format!("enqueue:{p}:{q}"),
                        _ => "pop_queue".to_string(),
                    }
                }
                _ => format!("output:{}", rng.range(1, u64::from(mix.n_ports))),
            };
            acts.push(a);
        }
        let goto = (table + 1 < tables && rng.chance(1, 3))
            .then(|| rng.range(u64::from(table) + 1, u64::from(tables) - 1));
        if goto.is_some() {
            // The action set (OpenFlow 1.1+ instructions, in OVS's order).
            if rng.chance(1, 4) {
                acts.push("clear_actions".to_string());
            }
            if rng.chance(1, 2) {
                let p = rng.range(1, u64::from(mix.n_ports));
                let mut set = Vec::new();
                if ip && rng.chance(1, 2) {
                    set.push(format!("mod_nw_ttl:{}", rng.range(1, 9)));
                }
                if rng.chance(1, 2) {
                    set.push(format!("set_queue:{}", rng.range(1, 9)));
                }
                if rng.chance(1, 3) {
                    set.push("dec_ttl".to_string());
                }
                set.push(match rng.below(3) {
                    0 => format!("output:{p}"),
                    1 => format!("mod_dl_dst:00:00:5e:00:02:0{p}"),
                    _ => format!("resubmit(,{})", rng.below(u64::from(tables))),
                });
                acts.push(format!("write_actions({})", set.join(",")));
            }
        }
        if rng.chance(1, 3) {
            let v = metas[rng.index(metas.len())];
            if rng.chance(1, 2) {
                acts.push(format!("write_metadata:{v:#x}"));
            } else {
                acts.push(format!("write_metadata:{v:#x}/0x3"));
            }
        }
        if let Some(to) = goto {
            acts.push(format!("goto_table:{to}"));
        }
        p.flows
            .push(format!("{},actions={}", m.join(","), acts.join(",")));
    }
    p.description.push_str(&format!(" ext={n}"));
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_uses_the_actions() {
        let mix = PipelineMix::default();
        let a = random_pipeline_ext(&mut TestRng::new(5), &mix, &ExtMix::default());
        let b = random_pipeline_ext(&mut TestRng::new(5), &mix, &ExtMix::default());
        assert_eq!(a, b);
        let mut all = String::new();
        for s in 0..50 {
            let p = random_pipeline_ext(&mut TestRng::new(s), &mix, &ExtMix::default());
            all.push_str(&p.flows.join("\n"));
        }
        for w in [
            "write_metadata:",
            "mod_nw_ttl:",
            "exit",
            "metadata=",
            "clone(",
            "write_actions(",
            "clear_actions",
            "set_queue:",
            "enqueue:",
            "pop_queue",
        ] {
            assert!(all.contains(w), "{w} never generated");
        }
    }
}
