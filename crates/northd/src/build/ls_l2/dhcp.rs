//! `ls_in_dhcp_options` / `ls_in_dhcp_response` for ports with DHCP options.

use super::super::Ctx;
use crate::addr::LportAddresses;
use crate::lflow::Sink;
use crate::nb::Lsp;

/// A port's DHCPv4/DHCPv6 flows.
pub(super) fn port_flows(_ctx: &Ctx<'_>, _p: &Lsp, _addrs: &[LportAddresses], _out: &mut Sink<'_>) {
}
