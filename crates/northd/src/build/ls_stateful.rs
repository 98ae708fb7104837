//! Logical switch stateful stages: pre-ACL/LB/stateful, ACL hints, ACLs, QoS, LB affinity,
//! LB, hairpin, ACL-after-LB and stateful, ingress and egress.

use super::Ctx;
use crate::lflow::Sink;
use crate::nb::{Acl, LoadBalancer};

/// A switch's own flows in these stages.
pub fn switch_dp(_ctx: &Ctx<'_>, _sw: usize, _out: &mut Sink<'_>) {}

/// One switch port's flows in these stages.
pub fn switch_port(_ctx: &Ctx<'_>, _sw: usize, _port: usize, _out: &mut Sink<'_>) {}

/// One ACL's flows on a switch.
pub fn switch_acl(_ctx: &Ctx<'_>, _sw: usize, _acl: &Acl, _out: &mut Sink<'_>) {}

/// One load balancer's flows on a switch.
pub fn switch_lb(_ctx: &Ctx<'_>, _sw: usize, _lb: &LoadBalancer, _out: &mut Sink<'_>) {}
