//! Logical switch L2 stages: port security, FDB, ARP/ND responder, DHCP, DNS, external
//! ports, L2 lookup and unknown; egress port security.

use super::Ctx;
use crate::lflow::Sink;
use crate::nb::LoadBalancer;

/// A switch's own flows in these stages.
pub fn switch_dp(_ctx: &Ctx<'_>, _sw: usize, _out: &mut Sink<'_>) {}

/// One switch port's flows in these stages.
pub fn switch_port(_ctx: &Ctx<'_>, _sw: usize, _port: usize, _out: &mut Sink<'_>) {}

/// One load balancer's flows on a switch in these stages.
pub fn switch_lb(_ctx: &Ctx<'_>, _sw: usize, _lb: &LoadBalancer, _out: &mut Sink<'_>) {}
