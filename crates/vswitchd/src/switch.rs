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
use std::sync::{Arc, RwLock};

use openflow::port::PortDesc;
use tracing::{info, warn};

use crate::bridges::{Bridges, RunningBridge};
use crate::ofconn::{OFPPS_LIVE, OfBridge, PortChange, StaticBridge, port_reason};
use crate::ofserver::OfServer;

/// One bridge as connections and control commands see it: the OpenFlow connections' own
/// [`StaticBridge`], kept in step with the running bridge.
pub type BridgeHandle = StaticBridge;

fn mac_u64(mac: [u8; 6]) -> u64 {
    mac.iter().fold(0, |a, b| (a << 8) | u64::from(*b))
}

fn new_handle(rb: &RunningBridge) -> BridgeHandle {
    let h = StaticBridge::new(&rb.name, rb.dpid, rb.shared.clone());
    refresh(&h, rb);
    h
}

/// Takes the port list and datapath id from `rb`.
/// Brings `h` up to date with `rb`; returns the port changes, as OVS reports them to
/// controllers: a new port is added down and then comes up (`ADD` then `MOD` to
/// `LIVE`), a removed one goes with its last description, a changed one is modified.
fn refresh(h: &BridgeHandle, rb: &RunningBridge) -> Vec<PortChange> {
    let old: BTreeMap<u32, PortDesc> = h.ports().into_iter().map(|p| (p.port_no, p)).collect();
    h.set_datapath_id(rb.dpid);
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
    let mut changes = Vec::new();
    for p in &ports {
        match old.get(&p.port_no) {
            None => {
                let down = PortDesc {
                    state: 0,
                    ..p.clone()
                };
                changes.push(PortChange {
                    reason: port_reason::ADD,
                    old: None,
                    desc: down.clone(),
                });
                changes.push(PortChange {
                    reason: port_reason::MODIFY,
                    old: Some(down),
                    desc: p.clone(),
                });
            }
            Some(o) if o != p => changes.push(PortChange {
                reason: port_reason::MODIFY,
                old: Some(o.clone()),
                desc: p.clone(),
            }),
            Some(_) => {}
        }
    }
    for (no, o) in &old {
        if !ports.iter().any(|p| p.port_no == *no) {
            changes.push(PortChange {
                reason: port_reason::DELETE,
                old: None,
                desc: o.clone(),
            });
        }
    }
    h.set_ports(ports);
    changes
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
    /// `other_config:vlan-limit` as the datapaths apply it (for `ofproto/trace`).
    vlan_limit: std::sync::atomic::AtomicU8,
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
            vlan_limit: std::sync::atomic::AtomicU8::new(1),
        }
    }

    /// The VLAN limit packets are extracted with (1, or 0 for every tag the key holds).
    pub fn vlan_limit(&self) -> u8 {
        self.vlan_limit.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sets what [`Switch::vlan_limit`] returns.
    pub fn set_vlan_limit(&self, limit: u8) {
        self.vlan_limit
            .store(limit, std::sync::atomic::Ordering::Relaxed);
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
                    let changes = refresh(&e.handle, rb);
                    if let Some(s) = &e.server
                        && !changes.is_empty()
                    {
                        s.port_status(&changes);
                    }
                    e.targets != targets || !Arc::ptr_eq(e.handle.shared(), &rb.shared)
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
            let handle = Arc::new(new_handle(rb));
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
