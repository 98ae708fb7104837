//! The running bridges and the reconciliation from one configuration to the next.
//!
//! [`Bridges::reconcile`] takes the running set to what a [`Config`] asks for — bridges
//! created and destroyed, ports added, removed and re-tagged — and returns what it did as
//! [`Event`]s (the daemon starts and stops OpenFlow listeners on them). It is sans-I/O and
//! deterministic, so tests drive it with made-up configurations.
//!
//! OpenFlow port numbers follow OVS (`ofproto_port_add` / `alloc_ofp_port`): the bridge's
//! own interface (named as the bridge) is `LOCAL`; otherwise `ofport_request` when free,
//! else the number the database already records for the interface (kept across restarts),
//! else the lowest free number from 1. A port keeps its number while it exists.
//! Datapath port numbers are allocated per daemon (one userspace datapath serves every
//! bridge, as OVS's `ovs-netdev`), lowest free from 1, reused after a port goes.
//!
//! Interface kinds ([`IfaceBackend`]): `dummy` is OVS's dummy netdev; `system` (or no type)
//! is the Linux interface of that name through AF_PACKET, and an interface that does not
//! exist gets OVS's `could not open network device NAME (No such device)`; `internal` is a
//! tap interface the daemon creates for the host, except the bridge's own port, which is a
//! dummy (not a host interface yet), and except on a `datapath_type=dummy` bridge; `afxdp`
//! is the Linux interface through AF_XDP; with `--enable-dummy=override` every kind is a
//! dummy, as OVS's test suite runs it. Other kinds (tunnels) get an `error` and `ofport` −1,
//! as OVS gives an interface it cannot open.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flow::ofp::OfPort;
use ofproto::bridge::{Bridge, Port, VlanMode};
use ofproto::table::Backend;
use ovsdb::Uuid;
use upcall::handler::SharedBridge;

use crate::config::{BridgeCfg, Config, IfaceCfg, PortCfg};

/// What the daemon does with interface kinds (`--enable-dummy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DummyMode {
    /// Only `dummy` (and `internal`) interfaces are dummies.
    #[default]
    Off,
    /// Every interface kind is a dummy (OVS `--enable-dummy=override`).
    Override,
}

/// One interface that exists as an OpenFlow port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningIface {
    /// Interface name (the OpenFlow port's name).
    pub name: String,
    /// Its `Port` row's name.
    pub port: String,
    /// `Interface` row.
    pub uuid: Uuid,
    /// `type` as configured.
    pub kind: String,
    /// What it is opened as.
    pub backend: IfaceBackend,
    /// OpenFlow port number.
    pub ofport: OfPort,
    /// Datapath port number.
    pub dp_port: u32,
    /// Hardware address.
    pub mac: [u8; 6],
}

/// What an interface is opened as in the datapath.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfaceBackend {
    /// OVS's `dummy` netdev: frames injected with `netdev-dummy/receive`.
    Dummy,
    /// A dummy standing for an internal port (the bridge's own port; every internal port on
    /// a `dummy` datapath or under `--enable-dummy=override`).
    DummyInternal,
    /// A Linux interface through AF_PACKET (`type=system` or no type).
    AfPacket,
    /// A tap interface the daemon creates for the host (`type=internal`).
    Tap,
    /// A Linux interface through AF_XDP (`type=afxdp`).
    AfXdp,
}

/// An interface that could not be opened, and why (written to its `error` column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedIface {
    /// `Interface` row.
    pub uuid: Uuid,
    /// Why.
    pub error: String,
}

/// A running bridge.
#[derive(Debug)]
pub struct RunningBridge {
    /// Name.
    pub name: String,
    /// `Bridge` row.
    pub uuid: Uuid,
    /// The OpenFlow bridge, shared with OpenFlow connections and the datapath.
    pub shared: Arc<SharedBridge>,
    /// Datapath id.
    pub dpid: u64,
    /// The bridge's hardware address (its LOCAL port's).
    pub mac: [u8; 6],
    /// Interfaces that are OpenFlow ports, by interface name.
    pub ifaces: BTreeMap<String, RunningIface>,
    /// Interfaces configured but not opened, by interface name.
    pub failed: BTreeMap<String, FailedIface>,
    /// The configuration last applied.
    pub cfg: BridgeCfg,
    /// OpenFlow port numbers in use and recently freed.
    alloc: OfportAlloc,
}

/// OpenFlow port numbers as OVS hands them out (`alloc_ofp_port`): a requested number when
/// it is not in use; otherwise a cyclic search after the last number handed out, limited to
/// the lower half of the range, skipping numbers in use and numbers freed less than an hour
/// ago (old flows may still name them), and when every number is taken or recent, the one
/// freed longest ago.
#[derive(Debug, Clone, Default)]
pub struct OfportAlloc {
    /// Last number the cyclic search handed out.
    last: u16,
    /// Numbers in use (`None`) or freed at a time.
    usage: BTreeMap<u16, Option<Instant>>,
}

/// Highest number the cyclic search hands out + 1 (OVS: `MIN(max_ports, 32768)`).
const AUTO_PORT_END: u16 = 32768;
/// How long a freed number is not handed out again by the search.
const REUSE_AFTER: Duration = Duration::from_secs(3600);

impl OfportAlloc {
    /// A number for a new port (`requested` first, if free), or `None` when the bridge is
    /// full.
    pub fn alloc(&mut self, requested: Option<u16>, now: Instant) -> Option<u16> {
        if let Some(r) = requested
            && (1..OfPort::MAX.0).contains(&r)
            && self.usage.get(&r) != Some(&None)
        {
            self.usage.insert(r, None);
            return Some(r);
        }
        let mut lru: Option<(Instant, u16)> = None;
        // One full turn of the range at most (counted: the start may be 0, which the search
        // never visits).
        for _ in 1..AUTO_PORT_END {
            self.last += 1;
            if self.last >= AUTO_PORT_END {
                self.last = 1;
            }
            let usable = match self.usage.get(&self.last) {
                None => true,
                Some(None) => false,
                Some(Some(freed)) => {
                    if lru.is_none_or(|(t, _)| *freed < t) {
                        lru = Some((*freed, self.last));
                    }
                    now.saturating_duration_since(*freed) > REUSE_AFTER
                }
            };
            if usable {
                self.usage.insert(self.last, None);
                return Some(self.last);
            }
        }
        let (_, p) = lru?;
        self.usage.insert(p, None);
        Some(p)
    }

    /// `port` is free again from `now`.
    pub fn dealloc(&mut self, port: u16, now: Instant) {
        self.usage.insert(port, Some(now));
    }
}

impl RunningBridge {
    /// The bridge's ports, by OpenFlow port number.
    pub fn by_ofport(&self) -> BTreeMap<OfPort, &RunningIface> {
        self.ifaces.values().map(|i| (i.ofport, i)).collect()
    }
}

/// What [`Bridges::reconcile`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A bridge was created.
    BridgeAdded(String),
    /// A bridge was destroyed (its OpenFlow listeners must go).
    BridgeRemoved(String),
    /// A port was added.
    PortAdded {
        /// Bridge.
        bridge: String,
        /// Interface name.
        iface: String,
        /// Its number.
        ofport: OfPort,
    },
    /// A port was removed.
    PortRemoved {
        /// Bridge.
        bridge: String,
        /// Interface name.
        iface: String,
        /// Its number.
        ofport: OfPort,
    },
    /// The bridge's controller targets changed.
    ControllersChanged(String),
}

/// The running bridges.
#[derive(Debug, Default)]
pub struct Bridges {
    /// By name.
    pub map: BTreeMap<String, RunningBridge>,
    /// How interface kinds map to backends.
    pub dummy: DummyMode,
    /// Datapath port numbers in use.
    dp_ports: BTreeSet<u32>,
}

/// A locally administered unicast MAC derived from a row id (stable across restarts).
pub fn mac_from_uuid(u: Uuid) -> [u8; 6] {
    let b = u.to_string();
    let h = b.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, c| {
        (h ^ u64::from(c)).wrapping_mul(0x0100_0000_01b3)
    });
    let x = h.to_be_bytes();
    [(x[0] & 0xfe) | 0x02, x[1], x[2], x[3], x[4], x[5]]
}

/// The datapath id OVS derives from a bridge MAC (`dpid_from_mac`).
pub fn dpid_from_mac(mac: [u8; 6]) -> u64 {
    mac.iter().fold(0u64, |d, b| (d << 8) | u64::from(*b))
}

impl Bridges {
    /// No bridges; interface kinds per `dummy`.
    pub fn new(dummy: DummyMode) -> Bridges {
        Bridges {
            dummy,
            ..Bridges::default()
        }
    }

    /// A datapath port number for interface `name`: the lowest free from 1; on a dummy
    /// datapath (OVS's test setup), first the number in the name (`p3` → 3), offset by 100
    /// for names starting `br` (`br0` → 100), as OVS's dummy dpif chooses them so that test
    /// expectations stay predictable.
    fn alloc_dp_port(&mut self, name: &str, dummy_class: bool) -> u32 {
        if dummy_class {
            let start = if name.starts_with("br") { 100 } else { 0 };
            if let Some(i) = name.find(|c: char| c.is_ascii_digit()) {
                let digits: String = name[i..].chars().take_while(char::is_ascii_digit).collect();
                if let Ok(n) = digits.parse::<u32>()
                    && let Some(no) = n.checked_add(start)
                    && no > 0
                    && no <= u32::from(u16::MAX)
                    && !self.dp_ports.contains(&no)
                {
                    self.dp_ports.insert(no);
                    return no;
                }
            }
        }
        let n = (1..).find(|n| !self.dp_ports.contains(n)).unwrap_or(0);
        self.dp_ports.insert(n);
        n
    }

    /// What interface `i` of bridge `bridge` (datapath type `dp_type`) is opened as, or why
    /// it cannot be (module doc).
    fn backend(&self, bridge: &str, dp_type: &str, i: &IfaceCfg) -> Result<IfaceBackend, String> {
        let internal = i.name == bridge || matches!(i.kind.as_str(), "internal" | "dummy-internal");
        if self.dummy == DummyMode::Override {
            return Ok(if internal {
                IfaceBackend::DummyInternal
            } else {
                IfaceBackend::Dummy
            });
        }
        let exists = |b: IfaceBackend| match netdev::netif::ifindex(&i.name) {
            Ok(_) => Ok(b),
            Err(e) => Err(format!(
                "could not open network device {} ({})",
                i.name,
                match &e {
                    netdev::PortError::Interface { source, .. } => source.to_string(),
                    other => other.to_string(),
                }
            )),
        };
        match i.kind.as_str() {
            "dummy" => Ok(IfaceBackend::Dummy),
            "dummy-internal" => Ok(IfaceBackend::DummyInternal),
            _ if i.name == bridge => Ok(IfaceBackend::DummyInternal),
            "internal" if dp_type == "dummy" => Ok(IfaceBackend::DummyInternal),
            "internal" => Ok(IfaceBackend::Tap),
            "" | "system" => exists(IfaceBackend::AfPacket),
            "afxdp" => exists(IfaceBackend::AfXdp),
            other => Err(format!(
                "could not open network device {} (Address family not supported by protocol: interface type {other:?} is not supported by flowswitch)",
                i.name
            )),
        }
    }

    /// Takes the running bridges to `cfg`; returns what changed, in order.
    pub fn reconcile(&mut self, cfg: &Config) -> Vec<Event> {
        self.reconcile_at(cfg, Instant::now())
    }

    /// [`Bridges::reconcile`] at time `now` (port-number reuse depends on time).
    pub fn reconcile_at(&mut self, cfg: &Config, now: Instant) -> Vec<Event> {
        let mut events = Vec::new();
        let gone: Vec<String> = self
            .map
            .keys()
            .filter(|n| !cfg.bridges.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            if let Some(b) = self.map.remove(&name) {
                for i in b.ifaces.values() {
                    self.dp_ports.remove(&i.dp_port);
                }
            }
            events.push(Event::BridgeRemoved(name));
        }
        for (name, bcfg) in &cfg.bridges {
            if !self.map.contains_key(name) {
                let mac = bcfg.hwaddr.unwrap_or_else(|| mac_from_uuid(bcfg.uuid));
                let rb = RunningBridge {
                    name: name.clone(),
                    uuid: bcfg.uuid,
                    shared: SharedBridge::new(Bridge::new(name, Backend::TupleSpace)),
                    dpid: bcfg
                        .datapath_id_request
                        .unwrap_or_else(|| dpid_from_mac(mac)),
                    mac,
                    ifaces: BTreeMap::new(),
                    failed: BTreeMap::new(),
                    cfg: bcfg.clone(),
                    alloc: OfportAlloc::default(),
                };
                self.map.insert(name.clone(), rb);
                events.push(Event::BridgeAdded(name.clone()));
                if !bcfg.controllers.is_empty() {
                    events.push(Event::ControllersChanged(name.clone()));
                }
            }
            self.reconcile_bridge(name, bcfg, now, &mut events);
        }
        events
    }

    fn reconcile_bridge(
        &mut self,
        name: &str,
        bcfg: &BridgeCfg,
        now: Instant,
        events: &mut Vec<Event>,
    ) {
        // Wanted interfaces: name → (port cfg, iface cfg).
        let wanted: BTreeMap<&str, (&PortCfg, &IfaceCfg)> = bcfg
            .ports
            .values()
            .flat_map(|p| p.interfaces.iter().map(move |i| (i.name.as_str(), (p, i))))
            .collect();
        let Some(rb) = self.map.get_mut(name) else {
            return;
        };
        if rb.cfg.controllers != bcfg.controllers
            && !events.contains(&Event::BridgeAdded(name.into()))
        {
            events.push(Event::ControllersChanged(name.to_owned()));
        }
        if let Some(id) = bcfg.datapath_id_request {
            rb.dpid = id;
        } else if rb.cfg.datapath_id_request.is_some() || rb.cfg.hwaddr != bcfg.hwaddr {
            rb.mac = bcfg.hwaddr.unwrap_or_else(|| mac_from_uuid(bcfg.uuid));
            rb.dpid = dpid_from_mac(rb.mac);
        }
        // Fail mode (OVS `connmgr_set_fail_mode`, and `connmgr_flushed` at creation): a
        // standalone bridge without controllers gets `priority=0,actions=NORMAL`; a change of
        // mode without controllers flushes the flow table first.
        let standalone = |c: &BridgeCfg| c.fail_mode.as_deref() != Some("secure");
        let is_new = events.contains(&Event::BridgeAdded(name.into()));
        if is_new || standalone(&rb.cfg) != standalone(bcfg) {
            use ofproto::bridge::FlowModCommand;
            if bcfg.controllers.is_empty() {
                if !is_new {
                    let _ = rb.shared.flow_mod_text(FlowModCommand::Delete, "");
                }
                if standalone(bcfg) {
                    let _ = rb
                        .shared
                        .flow_mod_text(FlowModCommand::Add, "priority=0,actions=NORMAL");
                }
            }
        }
        rb.cfg = bcfg.clone();
        // An interface whose `ofport_request` differs from the number it has is taken down
        // and re-added, and so is the one holding the number it asks for (OVS
        // `bridge_delete_or_reconfigure_ports`): a request that could not be honoured when
        // the port was added is honoured at the next reconfiguration.
        let mut renumber: BTreeSet<String> = BTreeSet::new();
        for i in rb.ifaces.values() {
            let Some((_, ic)) = wanted.get(i.name.as_str()) else {
                continue;
            };
            if let Some(r) = ic.ofport_request
                && r != i.ofport.0
                && ic.uuid == i.uuid
            {
                let holder = rb.ifaces.values().find(|h| h.ofport.0 == r);
                // A holder that itself asked for the number keeps it (and the request
                // stays unhonoured); one that did not is moved out of the way.
                let holder_wants_it = holder.is_some_and(|h| {
                    wanted
                        .get(h.name.as_str())
                        .is_some_and(|(_, hc)| hc.ofport_request == Some(r))
                });
                if holder_wants_it {
                    continue;
                }
                renumber.insert(i.name.clone());
                if let Some(h) = holder {
                    renumber.insert(h.name.clone());
                }
            }
        }
        // Removals first, so their numbers are free for this round's additions.
        let removed: Vec<RunningIface> = rb
            .ifaces
            .values()
            .filter(|i| {
                renumber.contains(&i.name)
                    || wanted
                        .get(i.name.as_str())
                        .is_none_or(|(_, ic)| ic.uuid != i.uuid)
            })
            .cloned()
            .collect();
        rb.failed.retain(|n, f| {
            wanted
                .get(n.as_str())
                .is_some_and(|(_, ic)| ic.uuid == f.uuid)
        });
        for i in removed {
            rb.ifaces.remove(&i.name);
            if i.ofport != OfPort::LOCAL {
                rb.alloc.dealloc(i.ofport.0, now);
            }
            let ofport = i.ofport;
            rb.shared.write(move |b| b.remove_port(ofport).is_some());
            self.dp_ports.remove(&i.dp_port);
            events.push(Event::PortRemoved {
                bridge: name.to_owned(),
                iface: i.name.clone(),
                ofport: i.ofport,
            });
        }
        // Interfaces with a requested number are added first (OVS `bridge_add_ports`).
        let mut order: Vec<(&str, (&PortCfg, &IfaceCfg))> = wanted.into_iter().collect();
        order.sort_by_key(|(_, (_, ic))| ic.ofport_request.is_none());
        for (iname, (pcfg, icfg)) in order {
            let vlan = VlanMode::from_ovs(
                pcfg.tag,
                (!pcfg.trunks.is_empty()).then(|| pcfg.trunks.clone()),
                pcfg.vlan_mode.as_deref(),
            );
            let Some(rb) = self.map.get_mut(name) else {
                return;
            };
            if let Some(ri) = rb.ifaces.get(iname) {
                let ofport = ri.ofport;
                let same = rb
                    .shared
                    .read()
                    .port(ofport)
                    .is_some_and(|p| p.vlan == vlan);
                if !same {
                    rb.shared
                        .write(move |b| b.set_port_vlan(ofport, vlan.clone()));
                }
                continue;
            }
            let open = self.backend(name, &bcfg.datapath_type, icfg);
            let Some(rb) = self.map.get_mut(name) else {
                return;
            };
            let backend = match open {
                Ok(b) => b,
                Err(error) => {
                    rb.failed.insert(
                        iname.to_owned(),
                        FailedIface {
                            uuid: icfg.uuid,
                            error,
                        },
                    );
                    continue;
                }
            };
            rb.failed.remove(iname);
            // OVS asks for ofport_request, else the number the database records.
            let requested = icfg.ofport_request.or_else(|| {
                icfg.ofport_in_db
                    .and_then(|p| u16::try_from(p).ok())
                    .filter(|p| (1..OfPort::MAX.0).contains(p))
            });
            let ofport = if iname == name {
                OfPort::LOCAL
            } else {
                match rb.alloc.alloc(requested, now) {
                    Some(p) => OfPort(p),
                    None => {
                        rb.failed.insert(
                            iname.to_owned(),
                            FailedIface {
                                uuid: icfg.uuid,
                                error: "no free OpenFlow port number".into(),
                            },
                        );
                        continue;
                    }
                }
            };
            let mac = icfg.mac.unwrap_or_else(|| {
                if ofport == OfPort::LOCAL {
                    rb.mac
                } else {
                    mac_from_uuid(icfg.uuid)
                }
            });
            let dummy_class = self.dummy == DummyMode::Override || bcfg.datapath_type == "dummy";
            let dp_port = self.alloc_dp_port(iname, dummy_class);
            let Some(rb) = self.map.get_mut(name) else {
                return;
            };
            let port = Port {
                ofport,
                name: iname.to_owned(),
                dp_port,
                vlan,
                no_flood: false,
            };
            rb.shared.write(move |b| b.add_port(port.clone()));
            rb.ifaces.insert(
                iname.to_owned(),
                RunningIface {
                    name: iname.to_owned(),
                    port: pcfg.name.clone(),
                    uuid: icfg.uuid,
                    kind: icfg.kind.clone(),
                    backend,
                    ofport,
                    dp_port,
                    mac,
                },
            );
            events.push(Event::PortAdded {
                bridge: name.to_owned(),
                iface: iname.to_owned(),
                ofport,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uuid(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn iface(n: u128, name: &str, kind: &str, req: Option<u16>) -> IfaceCfg {
        IfaceCfg {
            uuid: uuid(n),
            name: name.into(),
            kind: kind.into(),
            options: BTreeMap::new(),
            ofport_request: req,
            mac: None,
            ofport_in_db: None,
            error_in_db: None,
        }
    }

    fn port(n: u128, i: IfaceCfg) -> (String, PortCfg) {
        (
            i.name.clone(),
            PortCfg {
                uuid: uuid(n),
                name: i.name.clone(),
                tag: None,
                trunks: vec![],
                vlan_mode: None,
                interfaces: vec![i],
            },
        )
    }

    fn cfg(ports: Vec<(String, PortCfg)>) -> Config {
        let b = BridgeCfg {
            uuid: uuid(1),
            name: "br0".into(),
            datapath_type: "netdev".into(),
            fail_mode: None,
            datapath_id_request: None,
            hwaddr: None,
            protocols: vec![],
            controllers: vec![],
            datapath_id_in_db: None,
            ports: ports.into_iter().collect(),
        };
        Config {
            bridges: [("br0".to_string(), b)].into_iter().collect(),
            ..Config::default()
        }
    }

    #[test]
    fn ofports_follow_requests_then_lowest_free() {
        let mut bs = Bridges::new(DummyMode::Off);
        let c = cfg(vec![
            port(10, iface(11, "br0", "internal", None)),
            port(20, iface(21, "p1", "dummy", Some(5))),
            port(30, iface(31, "p2", "dummy", None)),
            port(40, iface(41, "eth9", "system", None)),
        ]);
        let ev = bs.reconcile(&c);
        assert_eq!(ev[0], Event::BridgeAdded("br0".into()));
        let b = &bs.map["br0"];
        assert_eq!(b.ifaces["br0"].ofport, OfPort::LOCAL);
        assert_eq!(b.ifaces["p1"].ofport, OfPort(5));
        assert_eq!(b.ifaces["p2"].ofport, OfPort(1));
        assert!(b.failed["eth9"].error.contains("eth9"));
        assert_eq!(b.shared.read().ports().count(), 3);
        // Same config again: nothing happens.
        assert!(bs.reconcile(&c).is_empty());
        // Remove p2; p3 does not take p2's number (freed under an hour ago) but the next.
        let c2 = cfg(vec![
            port(10, iface(11, "br0", "internal", None)),
            port(20, iface(21, "p1", "dummy", Some(5))),
            port(50, iface(51, "p3", "dummy", None)),
        ]);
        let ev = bs.reconcile(&c2);
        assert!(ev.contains(&Event::PortRemoved {
            bridge: "br0".into(),
            iface: "p2".into(),
            ofport: OfPort(1)
        }));
        let b = &bs.map["br0"];
        assert_eq!(b.ifaces["p3"].ofport, OfPort(2));
        assert!(b.failed.is_empty());
        // Bridge gone: everything goes.
        let ev = bs.reconcile(&Config::default());
        assert_eq!(ev, vec![Event::BridgeRemoved("br0".into())]);
        assert!(bs.dp_ports.is_empty());
    }

    #[test]
    fn ofport_numbers_as_ovs_hands_them_out() {
        let t0 = Instant::now();
        let mut a = OfportAlloc::default();
        assert_eq!(a.alloc(None, t0), Some(1));
        assert_eq!(a.alloc(Some(3), t0), Some(3));
        a.dealloc(1, t0);
        assert_eq!(a.alloc(None, t0), Some(2));
        a.dealloc(2, t0);
        // 3 is in use, 1 and 2 are recent: 4.
        assert_eq!(a.alloc(None, t0), Some(4));
        // A request for a recently freed number is honoured; one in use is not.
        assert_eq!(a.alloc(Some(1), t0), Some(1));
        assert_eq!(a.alloc(Some(4), t0), Some(5));
        // After an hour a freed number comes round again once the search wraps.
        let mut b = OfportAlloc {
            last: AUTO_PORT_END - 1,
            ..OfportAlloc::default()
        };
        b.dealloc(1, t0);
        assert_eq!(
            b.alloc(None, t0 + REUSE_AFTER + Duration::from_secs(1)),
            Some(1)
        );
        // Every number taken or recent: the least recently freed one.
        let mut c = OfportAlloc::default();
        for p in 1..AUTO_PORT_END {
            c.usage.insert(p, None);
        }
        c.usage.insert(7, Some(t0 + Duration::from_secs(5)));
        c.usage.insert(9, Some(t0));
        assert_eq!(c.alloc(None, t0 + Duration::from_secs(10)), Some(9));
        assert_eq!(c.alloc(None, t0 + Duration::from_secs(10)), Some(7));
        assert_eq!(c.alloc(None, t0 + Duration::from_secs(10)), None);
    }

    #[test]
    fn override_makes_every_kind_a_dummy() {
        let mut bs = Bridges::new(DummyMode::Override);
        bs.reconcile(&cfg(vec![port(40, iface(41, "eth9", "system", Some(3)))]));
        assert_eq!(bs.map["br0"].ifaces["eth9"].ofport, OfPort(3));
    }
}
