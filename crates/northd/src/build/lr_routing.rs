//! Logical router forwarding stages: admission, neighbor lookup and learning, IP input,
//! ND RA, routing (pre, routes, ECMP), policies, ARP resolve, packet-length checks, gateway
//! redirect, ARP request; egress loop and delivery.

use super::Ctx;
use crate::lflow::Sink;
use crate::nb::LoadBalancer;

/// A router's own flows in these stages.
pub fn router_dp(_ctx: &Ctx<'_>, _rt: usize, _out: &mut Sink<'_>) {}

/// One router port's flows in these stages.
pub fn router_port(_ctx: &Ctx<'_>, _rt: usize, _port: usize, _out: &mut Sink<'_>) {}

/// One static route's flows.
pub fn router_route(_ctx: &Ctx<'_>, _rt: usize, _route: usize, _out: &mut Sink<'_>) {}

/// One policy's flows.
pub fn router_policy(_ctx: &Ctx<'_>, _rt: usize, _policy: usize, _out: &mut Sink<'_>) {}

/// One NAT rule's flows in these stages (ARP replies, resolve).
pub fn router_nat(_ctx: &Ctx<'_>, _rt: usize, _nat: usize, _out: &mut Sink<'_>) {}

/// One load balancer's flows in these stages.
pub fn router_lb(_ctx: &Ctx<'_>, _rt: usize, _lb: &LoadBalancer, _out: &mut Sink<'_>) {}
