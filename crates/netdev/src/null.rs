//! The null port: receives nothing, and transmitting frees every packet back to the pool,
//! counted as sent (a `/dev/null` sink, like OVS's dummy netdev with no peer).

use crate::batch::Batch;
use crate::packet::PacketPool;
use crate::pcap::sink_tx;
use crate::port::{Port, PortStats};

/// A port that drops everything it is given (counted as sent) and never receives.
#[derive(Debug)]
pub struct NullPort {
    name: String,
    stats: PortStats,
}

impl NullPort {
    /// A new null port.
    pub fn new(name: impl Into<String>) -> Self {
        NullPort {
            name: name.into(),
            stats: PortStats::default(),
        }
    }
}

impl Port for NullPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, _pool: &mut PacketPool, _batch: &mut Batch) -> usize {
        0
    }

    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PacketPool) -> usize {
        sink_tx(batch, pool, &mut self.stats)
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_frees() {
        let mut pool = PacketPool::new(8);
        let mut b = Batch::new();
        for i in 0..5 {
            let mut p = pool.alloc().unwrap();
            p.set_data(&vec![0; 60 + i]).unwrap();
            b.push(p).unwrap();
        }
        let mut null = NullPort::new("null0");
        assert_eq!(null.rx_burst(&mut pool, &mut b), 0);
        assert_eq!(b.len(), 5);
        assert_eq!(null.tx_burst(&mut b, &mut pool), 5);
        assert!(b.is_empty());
        assert_eq!(pool.available(), 8);
        let s = null.stats();
        assert_eq!((s.tx_packets, s.tx_bytes), (5, 60 * 5 + 10));
        assert_eq!(null.name(), "null0");
        assert!(!null.rx_eof());
    }
}
