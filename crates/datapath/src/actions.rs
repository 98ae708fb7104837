//! Datapath actions and the packet edits they make.
//!
//! [`DpAction`] is what a megaflow's action list holds (interned in the PMD's
//! [`crate::pmd::ActionTable`]); the functions here edit one packet in place. The PMD
//! executes lists per flow batch (see [`crate::pmd`]).

use netdev::Packet;

/// One datapath action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DpAction {
    /// Send to the datapath port with this number (a copy if more actions follow).
    Output(u32),
    /// Drop the packet (the remaining actions are not executed).
    Drop,
    /// Push an 802.1Q/802.1ad tag: `tpid` (0x8100 or 0x88a8) and the wire TCI (pcp:3, dei:1,
    /// vid:12; not the flow key's TCI with the "present" bit).
    PushVlan {
        /// Tag protocol id.
        tpid: u16,
        /// Tag control information as sent on the wire.
        tci: u16,
    },
    /// Pop the outermost VLAN tag (no effect on an untagged frame).
    PopVlan,
}

/// Inserts a VLAN tag after the MAC addresses; false (packet unchanged) if the frame is
/// shorter than two MACs or the headroom is short.
pub fn push_vlan(p: &mut Packet, tpid: u16, tci: u16) -> bool {
    if p.len() < 12 || p.push_front(4).is_none() {
        return false;
    }
    let d = p.data_mut();
    d.copy_within(4..16, 0);
    if let Some(t) = d.get_mut(12..16) {
        t[..2].copy_from_slice(&tpid.to_be_bytes());
        t[2..].copy_from_slice(&tci.to_be_bytes());
    }
    true
}

/// Removes the outermost VLAN tag (TPID 0x8100 or 0x88a8); false if there is none.
pub fn pop_vlan(p: &mut Packet) -> bool {
    let d = p.data_mut();
    let tpid = match d.get(12..14) {
        Some(&[a, b]) => u16::from_be_bytes([a, b]),
        _ => return false,
    };
    if d.len() < 18 || (tpid != 0x8100 && tpid != 0x88a8) {
        return false;
    }
    d.copy_within(0..12, 4);
    p.pull_front(4).is_some()
}

/// Applies one packet-editing action (everything but `Output` and `Drop`, which the PMD
/// executes itself); false if the packet was left unchanged because the edit did not apply
/// (no tag to pop, frame too short, no headroom).
pub fn apply_edit(p: &mut Packet, a: &DpAction) -> bool {
    match *a {
        DpAction::PushVlan { tpid, tci } => push_vlan(p, tpid, tci),
        DpAction::PopVlan => pop_vlan(p),
        DpAction::Output(_) | DpAction::Drop => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vlan_push_pop_round_trip() {
        let frame: Vec<u8> = (0u8..40).collect();
        let mut p = Packet::from_slice(&frame).unwrap();
        assert!(push_vlan(&mut p, 0x8100, 0x2005));
        assert_eq!(p.len(), 44);
        assert_eq!(&p.data()[..12], &frame[..12]);
        assert_eq!(&p.data()[12..16], &[0x81, 0x00, 0x20, 0x05]);
        assert_eq!(&p.data()[16..], &frame[12..]);
        assert!(pop_vlan(&mut p));
        assert_eq!(p.data(), &frame[..]);
        // Untagged (type 0x0c0d here): nothing to pop.
        assert!(!pop_vlan(&mut p));
        assert_eq!(p.data(), &frame[..]);
        let mut short = Packet::from_slice(&[1, 2, 3]).unwrap();
        assert!(!push_vlan(&mut short, 0x8100, 1));
        assert!(!pop_vlan(&mut short));
        assert_eq!(short.data(), &[1, 2, 3]);
    }
}
