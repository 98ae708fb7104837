//! `controller(pause)`: OVS's continuations. The translation stops at the action; the rest of
//! the pipeline — what follows the action in its list, then what follows the `resubmit` that
//! reached that list in the enclosing one, and so on outwards — is collected with
//! `unroll_xlate` markers (the table and rule cookie the actions after one ran under, put
//! before the actions that depend on them, as OVS's `freeze_unroll_actions`) and frozen with
//! the pipeline state; the datapath action is `userspace(controller(…,continuation=1,…))`.
//! The packet-in carries the collected actions as its continuation, and the controller's
//! `NXT_RESUME` runs them on the packet it sends back. The action set is not frozen (OVS
//! freezes it too).

use flow::ofp::{Action, ControllerCookie, PacketInReason};

use super::Ctx;
use crate::odp::OdpAction;

/// A pause being collected.
#[derive(Debug)]
pub(super) struct PauseFreeze {
    max_len: u16,
    reason: PacketInReason,
    id: u16,
    userdata: Vec<u8>,
    actions: Vec<Action>,
    /// The last `unroll_xlate` put: (table, cookie).
    last: Option<(u8, u64)>,
}

/// Whether `a` reads the table or rule cookie it runs under (a packet-in says both; a
/// `resubmit` without a table goes to the current one).
fn needs_context(a: &Action) -> bool {
    matches!(
        a,
        Action::Output { .. }
            | Action::OutputTrunc { .. }
            | Action::OutputReg { .. }
            | Action::Group(_)
            | Action::Controller { .. }
            | Action::DecTtl(_)
            | Action::Resubmit { table: None, .. }
    )
}

impl Ctx<'_> {
    /// Starts a pause at a `controller(pause)` action.
    pub(super) fn start_pause(
        &mut self,
        max_len: u16,
        reason: PacketInReason,
        id: u16,
        userdata: &[u8],
    ) {
        self.pause = Some(PauseFreeze {
            max_len,
            reason,
            id,
            userdata: userdata.to_vec(),
            actions: Vec::new(),
            last: None,
        });
    }

    /// Collects what follows action `i` of the list being unrolled (see the module doc).
    /// True when the list must stop.
    pub(super) fn unroll_pause(&mut self, actions: &[Action], i: usize) -> bool {
        let (table, cookie) = (self.table_id, self.rule_cookie);
        let Some(p) = &mut self.pause else {
            return false;
        };
        for a in actions.get(i + 1..).unwrap_or(&[]) {
            if needs_context(a) && p.last != Some((table, cookie)) {
                p.actions.push(Action::UnrollXlate { table, cookie });
                p.last = Some((table, cookie));
            }
            p.actions.push(a.clone());
        }
        true
    }

    /// Ends a pause once the translation has unrolled to its top: commits, freezes the state
    /// with the collected actions and emits the packet-in with its continuation (from the
    /// top level's table and cookie, as OVS's).
    pub(super) fn finish_pause(&mut self) {
        let Some(p) = self.pause.take() else {
            return;
        };
        self.commit();
        self.freezing_packet_in = true;
        let recirc_id = self.freeze_with(self.table_id, None, p.actions, &p.userdata);
        self.odp.push(OdpAction::Userspace(ControllerCookie {
            reason: p.reason,
            implicit_miss: false,
            dont_send: !self.side_effects,
            continuation: true,
            recirc_id,
            rule_cookie: self.rule_cookie,
            controller_id: p.id,
            max_len: p.max_len,
        }));
    }
}
