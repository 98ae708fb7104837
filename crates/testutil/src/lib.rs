//! Test utilities for flowswitch (a dev-dependency only; depends on no workspace crate).
//!
//! - [`ovs`]: a private, unprivileged Open vSwitch 3.1 (ovsdb-server + ovs-vswitchd with the
//!   dummy datapath) used as an oracle, and `ovs-ofctl parse-flow` helpers;
//!   [`skip_without_ovs!`] skips a test when OVS is not installed.
//! - [`packets`]: hand-built packets (named builders, seeded random generator), an
//!   independent twin of the `wire` crate.
//! - [`flow_corpus`]: `ovs-ofctl` flow strings, hand-written and generated.
//! - [`golden`]: answers recorded from OVS for those corpora (`data/*.tsv`), with readers.
//! - [`pipelines`]: random OpenFlow pipelines and packets, OVS helpers to run them, and the
//!   pipeline golden file (`data/pipelines_golden.tsv`) for the xlate differential test;
//!   [`pipelines_ext`]: the same with the issue-#17 actions added.
//!   pipeline golden file (`data/pipelines_golden.tsv`) for the xlate differential test.
//! - [`groups`]: random pipelines with OpenFlow groups of every type, and packets for them.
//! - [`ct_oracle`]: conntrack scripts (`<in_port> <hex>` files) run through OVS's userspace
//!   conntrack (dummy ports' `tx_pcap`), the `flowswitch receive` output parser and the
//!   comparison for `crates/flowswitch/tests/ct_vs_ovs.rs`; OVS's answers are recorded in
//!   `data/ct_oracle_answers.txt`, observed facts in `data/ct_oracle_notes.md`.
//! - [`netns`]: network namespaces and veth pairs for tests of real ports (root only),
//!   removed on drop; [`netns::netns_missing_reason`] says why they cannot run here.
//! - [`conj`]: conjunctive flow tables (OVN ACL shapes, random) and packets for them.
//! - [`rng`]: a small self-contained seeded PRNG so corpora never change with a dependency.
//! - [`skip()`]: how a test that cannot run here says so — counted by `scripts/test-all.sh`,
//!   a failure in CI (`FLOWSWITCH_NO_SKIP`).
//!
//! Nothing here is used by production code.

pub mod conj;
pub mod ct_oracle;
pub mod skip;
pub use skip::skip;
pub mod flow_corpus;
pub mod golden;
pub mod groups;
pub mod netns;
pub mod ovn;
pub mod ovs;
pub mod packets;
pub mod pipelines;
pub mod pipelines_ext;
pub mod pipelines_lb;
pub mod rng;

pub use rng::TestRng;
