//! Logical router NAT and load-balancing stages: unSNAT, defrag, LB affinity, DNAT, ECMP
//! stateful; egress chk_dnat_local, unDNAT, post-unDNAT, SNAT, post-SNAT.

use super::Ctx;
use crate::lflow::Sink;
use crate::nb::LoadBalancer;

/// A router's own flows in these stages.
pub fn router_dp(_ctx: &Ctx<'_>, _rt: usize, _out: &mut Sink<'_>) {}

/// One router port's flows in these stages.
pub fn router_port(_ctx: &Ctx<'_>, _rt: usize, _port: usize, _out: &mut Sink<'_>) {}

/// One NAT rule's flows.
pub fn router_nat(_ctx: &Ctx<'_>, _rt: usize, _nat: usize, _out: &mut Sink<'_>) {}

/// One load balancer's flows on a router.
pub fn router_lb(_ctx: &Ctx<'_>, _rt: usize, _lb: &LoadBalancer, _out: &mut Sink<'_>) {}
