//! The running switch as the daemon's other threads see it: one [`BridgeHandle`] per
//! bridge, published in a [`Switch`] registry, and the OpenFlow listeners kept in step
//! with the bridges ([`Switch::sync`]).
//!
//! The main thread owns the configuration and [`crate::bridges::Bridges`]; after each
//! reconciliation it calls [`Switch::sync`], which creates handles (and their OpenFlow
//! servers on `RUNDIR/<br>.mgmt` plus the bridge's `ptcp:`/`punix:` controller targets)
//! for new bridges, refreshes the port lists and datapath ids of existing ones, restarts a
//! bridge's listeners when its controller targets change, and shuts down those of deleted
//! bridges (their socket files removed). OpenFlow connections and `ovs-appctl` handlers
//! reach a bridge only through its handle: the flow tables through
//! `upcall::handler::SharedBridge` (lock-free reads), the port list through a short
//! read lock never held across I/O.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use flow::ofp::OfPort;
use openflow::packet::PacketOut;
use openflow::port::PortDesc;
use openflow::stats::PortStats;
use tracing::{info, warn};
use upcall::handler::SharedBridge;

use crate::bridges::{Bridges, RunningBridge};
use crate::dp::port::SharedCounters;
use crate::ofconn::{FlowFlags, OFPPS_LIVE, OfBridge, OfpErr};
use crate::ofserver::OfServer;

/// One bridge as connections and control commands see it.
#[derive(Debug)]
pub struct BridgeHandle {
    name: String,
    dpid: AtomicU64,
    shared: Arc<SharedBridge>,
    ports: RwLock<Vec<PortDesc>>,
    frags: AtomicU16,
    created: Instant,
    flags: FlowFlags,
    /// The datapath's published per-port counters, by port name.
    counters: RwLock<BTreeMap<String, Arc<SharedCounters>>>,
}

fn mac_u64(mac: [u8; 6]) -> u64 {
    mac.iter().fold(0, |a, b| (a << 8) | u64::from(*b))
}

impl BridgeHandle {
    fn new(rb: &RunningBridge) -> BridgeHandle {
        let h = BridgeHandle {
            name: rb.name.clone(),
            dpid: AtomicU64::new(rb.dpid),
            shared: rb.shared.clone(),
            ports: RwLock::new(Vec::new()),
            frags: AtomicU16::new(0),
            created: Instant::now(),
            flags: FlowFlags::default(),
            counters: RwLock::new(BTreeMap::new()),
        };
        h.refresh(rb);
        h
    }

    /// Takes the port list and datapath id from `rb`.
    fn refresh(&self, rb: &RunningBridge) {
        self.dpid.store(rb.dpid, Ordering::Relaxed);
        let mut ports: Vec<PortDesc> = rb
            .ifaces
            .values()
            .map(|i| PortDesc {
                port_no: i.ofport.to_ofp11(),
                hw_addr: mac_u64(i.mac),
                name: i.name.clone(),
                config: 0,
                state: OFPPS_LIVE,
                ..PortDesc::default()
            })
            .collect();
        ports.sort_by_key(|p| p.port_no);
        *self.ports.write().unwrap_or_else(|e| e.into_inner()) = ports;
    }
}

impl BridgeHandle {
    /// Takes the datapath's per-port counters (after the datapath changed its ports).
    pub fn set_counters(&self, counters: BTreeMap<String, Arc<SharedCounters>>) {
        *self.counters.write().unwrap_or_else(|e| e.into_inner()) = counters;
    }
}

impl OfBridge for BridgeHandle {
    fn name(&self) -> &str {
        &self.name
    }
    fn datapath_id(&self) -> u64 {
        self.dpid.load(Ordering::Relaxed)
    }
    fn shared(&self) -> &Arc<SharedBridge> {
        &self.shared
    }
    fn ports(&self) -> Vec<PortDesc> {
        self.ports.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
    /// Packet, byte and drop counters from the datapath's ports (zero for a port it has
    /// not opened); the error counters a dummy port does not keep read as unknown (all
    /// ones), as OVS's do. LOCAL first, as `ovs-vswitchd` lists it.
    fn port_stats(&self) -> Vec<PortStats> {
        let age = self.created.elapsed();
        let mut ports = self.ports();
        ports.sort_by_key(|p| p.port_no != OfPort::LOCAL.to_ofp11());
        let counters = self.counters.read().unwrap_or_else(|e| e.into_inner());
        ports
            .iter()
            .map(|p| {
                let c = counters.get(&p.name);
                let get = |f: fn(&SharedCounters) -> &std::sync::atomic::AtomicU64| {
                    c.map_or(0, |c| f(c).load(Ordering::Relaxed))
                };
                PortStats {
                    port_no: p.port_no,
                    rx_packets: get(|c| &c.rx_packets),
                    rx_bytes: get(|c| &c.rx_bytes),
                    tx_packets: get(|c| &c.tx_packets),
                    tx_bytes: get(|c| &c.tx_bytes),
                    rx_dropped: c.map_or(u64::MAX, |c| c.rx_dropped.load(Ordering::Relaxed)),
                    tx_dropped: c.map_or(u64::MAX, |c| c.tx_dropped.load(Ordering::Relaxed)),
                    rx_errors: u64::MAX,
                    tx_errors: u64::MAX,
                    rx_frame_err: u64::MAX,
                    rx_over_err: u64::MAX,
                    rx_crc_err: u64::MAX,
                    collisions: u64::MAX,
                    duration_sec: u32::try_from(age.as_secs()).unwrap_or(u32::MAX),
                    duration_nsec: age.subsec_nanos(),
                }
            })
            .collect()
    }
    fn flow_flags(&self) -> &FlowFlags {
        &self.flags
    }
    fn packet_out(&self, _po: &PacketOut) -> Result<(), OfpErr> {
        Err(OfpErr::Eperm)
    }
    fn frag_mode(&self) -> u16 {
        self.frags.load(Ordering::Relaxed)
    }
    fn set_frag_mode(&self, mode: u16) -> bool {
        // Normal, drop and nx-match are what OVS's userspace datapath does; not reassembly.
        if matches!(mode, 0 | 1 | 3) {
            self.frags.store(mode, Ordering::Relaxed);
            true
        } else {
            false
        }
    }
}

/// A bridge's handle and its OpenFlow listeners.
#[derive(Debug)]
struct Entry {
    handle: Arc<BridgeHandle>,
    server: Option<OfServer>,
    targets: Vec<String>,
}

/// The running switch: bridge handles by name, and their listeners.
#[derive(Debug)]
pub struct Switch {
    rundir: PathBuf,
    handles: RwLock<BTreeMap<String, Arc<BridgeHandle>>>,
    entries: std::sync::Mutex<BTreeMap<String, Entry>>,
}

/// The controller targets a switch listens on (`ptcp:`, `punix:`); active ones (`tcp:`,
/// `unix:`, `ssl:`) are connections out, which flowswitch does not make yet.
fn passive(targets: &[String]) -> (Vec<String>, Vec<String>) {
    targets
        .iter()
        .cloned()
        .partition(|t| t.starts_with("ptcp:") || t.starts_with("punix:"))
}

impl Switch {
    /// No bridges; management sockets go in `rundir`.
    pub fn new(rundir: PathBuf) -> Switch {
        Switch {
            rundir,
            handles: RwLock::new(BTreeMap::new()),
            entries: std::sync::Mutex::new(BTreeMap::new()),
        }
    }

    /// A bridge's handle.
    pub fn bridge(&self, name: &str) -> Option<Arc<BridgeHandle>> {
        self.handles
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Every bridge's handle, by name.
    pub fn bridges(&self) -> Vec<Arc<BridgeHandle>> {
        self.handles
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Brings handles and listeners in step with `bridges` (see the module doc).
    pub fn sync(&self, bridges: &Bridges) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let gone: Vec<String> = entries
            .keys()
            .filter(|n| !bridges.map.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            if let Some(e) = entries.remove(&name)
                && let Some(s) = e.server
            {
                s.shutdown();
            }
            self.handles
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&name);
        }
        for (name, rb) in &bridges.map {
            let targets = rb.cfg.controllers.clone();
            let restart = match entries.get(name) {
                Some(e) => {
                    e.handle.refresh(rb);
                    e.targets != targets || !Arc::ptr_eq(&e.handle.shared, &rb.shared)
                }
                None => true,
            };
            if !restart {
                continue;
            }
            if let Some(old) = entries.remove(name)
                && let Some(s) = old.server
            {
                s.shutdown();
            }
            let handle = Arc::new(BridgeHandle::new(rb));
            let (listen, active) = passive(&targets);
            for t in active {
                warn!(target: "bridge", "bridge {name}: controller {t}: active controller connections are not supported yet; use ptcp: or punix:");
            }
            let server = match OfServer::start_bridge(handle.clone(), &self.rundir, &listen) {
                Ok(s) => {
                    info!(target: "bridge", "bridge {name}: OpenFlow on {:?}", s.addrs());
                    Some(s)
                }
                Err(e) => {
                    warn!(target: "bridge", "bridge {name}: cannot listen for OpenFlow: {e}");
                    None
                }
            };
            self.handles
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name.clone(), handle.clone());
            entries.insert(
                name.clone(),
                Entry {
                    handle,
                    server,
                    targets,
                },
            );
        }
    }

    /// Shuts every listener down (socket files removed).
    pub fn shutdown(&self) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        for (_, e) in std::mem::take(&mut *entries) {
            if let Some(s) = e.server {
                s.shutdown();
            }
        }
        self.handles
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}
