//! Conversion of xlate's datapath actions ([`OdpAction`], OVS's `Datapath actions:`
//! vocabulary) into what the PMD executes ([`DpAction`]).

use datapath::DpAction;
use ofproto::{OdpAction, format_odp_actions};

/// The PMD's form of `actions`; an error names the first action the datapath cannot execute.
pub fn to_dp_actions(actions: &[OdpAction]) -> Result<Vec<DpAction>, String> {
    let mut dp = Vec::with_capacity(actions.len());
    for a in actions {
        dp.push(match a {
            OdpAction::Output(port) => DpAction::Output(*port),
            // The datapath's TCI is the one on the wire; OVS's carries CFI as "present".
            OdpAction::PushVlan { tpid, tci } => DpAction::PushVlan {
                tpid: *tpid,
                tci: tci & !flow::field::VLAN_CFI,
            },
            OdpAction::PopVlan => DpAction::PopVlan,
            other => {
                return Err(format!(
                    "datapath action not executed yet: {}",
                    format_odp_actions(std::slice::from_ref(other))
                ));
            }
        });
    }
    Ok(dp)
}
