//! The subcommands, one module each.

pub mod bench;
pub mod bench_conj;
pub mod bench_control;
pub mod bench_firewall;
pub mod bench_flowmods;
pub mod bench_northd;
pub mod blast;
pub mod classbench;
pub mod demo;
pub mod gen_flows;
pub mod gen_nb;
pub mod gen_pcap;
pub mod northd;
pub mod parse_flow;
pub mod pcap_flows;
pub mod receive;
pub mod switch;
pub mod trace;
pub mod vswitchd;
