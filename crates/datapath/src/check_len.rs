//! `check_pkt_len(size=N,gt(...),le(...))` (issue #17, `check_pkt_larger`): which length the
//! datapath compares. OVS's `odp_execute_check_pkt_len` compares the packet's send length
//! less its L2 padding (the bytes after the IP datagram that a minimum-size Ethernet frame
//! carries); our packets have no pending truncation, so that is the frame's length less the
//! padding, found here from the headers as OVS's `miniflow_extract` finds it.

/// The length `check_pkt_len` compares: `frame.len()` less the bytes after an IPv4 datagram's
/// total length or an IPv6 packet's 40 + payload length (VLAN tags skipped).
pub fn check_len_size(frame: &[u8]) -> usize {
    let mut ofs = 12;
    let mut ethertype = match frame.get(12..14) {
        Some(b) => u16::from_be_bytes([b[0], b[1]]),
        None => return frame.len(),
    };
    while matches!(ethertype, 0x8100 | 0x88a8) {
        ofs += 4;
        ethertype = match frame.get(ofs..ofs + 2) {
            Some(b) => u16::from_be_bytes([b[0], b[1]]),
            None => return frame.len(),
        };
    }
    let l3 = ofs + 2;
    let l3_len = match ethertype {
        0x0800 => match frame.get(l3..l3 + 20) {
            Some(h) if h[0] >> 4 == 4 && usize::from(h[0] & 0x0f) >= 5 => {
                let tot = usize::from(u16::from_be_bytes([h[2], h[3]]));
                // OVS takes no padding from a datagram whose lengths do not add up.
                if tot < usize::from(h[0] & 0x0f) * 4 {
                    return frame.len();
                }
                tot
            }
            _ => return frame.len(),
        },
        0x86dd => match frame.get(l3..l3 + 40) {
            Some(h) if h[0] >> 4 == 6 => 40 + usize::from(u16::from_be_bytes([h[4], h[5]])),
            _ => return frame.len(),
        },
        _ => return frame.len(),
    };
    let avail = frame.len() - l3;
    if avail > l3_len {
        frame.len() - (avail - l3_len)
    } else {
        frame.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_is_left_out() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 28]);
        f.resize(14 + 28, 0);
        assert_eq!(check_len_size(&f), 42);
        f.resize(60, 0); // padded to the Ethernet minimum
        assert_eq!(check_len_size(&f), 42);
        // VLAN-tagged IPv6 with 8 bytes of payload and 6 of padding.
        let mut g = vec![0u8; 12];
        g.extend_from_slice(&[0x81, 0x00, 0, 5, 0x86, 0xdd, 0x60, 0, 0, 0, 0, 8]);
        g.resize(18 + 48 + 6, 0);
        assert_eq!(check_len_size(&g), 18 + 48);
        // Not IP, or a datagram longer than the frame: the frame's length.
        assert_eq!(check_len_size(&[0u8; 20]), 20);
        let mut h = f.clone();
        h[17] = 200;
        assert_eq!(check_len_size(&h), 60);
    }
}
