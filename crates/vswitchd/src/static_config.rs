//! A configuration from a TOML file, for machines without `ovsdb-server`
//! (`flowswitch vswitchd --config FILE`, and the built-in default).
//!
//! The file describes what `ovs-vsctl` would have put in the database:
//!
//! ```toml
//! [other_config]            # Open_vSwitch:other_config knobs, OVS's names
//! pmd-cpu-mask = "0x2"
//!
//! [[bridge]]
//! name = "br0"
//! fail_mode = "secure"      # optional
//! datapath_id = "00000000000000ab"  # optional, 16 hex digits
//!
//! [[bridge.port]]
//! name = "p1"
//! type = "dummy"            # optional, as Interface:type
//! ofport_request = 1        # optional
//! tag = 10                  # optional access VLAN
//! options = { tx_pcap = "p1.pcap" }
//! ```
//!
//! It is read into the same [`Config`] the database gives (row ids made up, stable per
//! name), so everything downstream is shared. Unknown keys are errors (a typo must not be
//! silently ignored); values are checked as the database reader checks them.

use std::collections::BTreeMap;

use ovsdb::Uuid;
use serde::Deserialize;

use crate::config::{BridgeCfg, Config, DpKnobs, IfaceCfg, PortCfg, Problem};

/// The built-in default: `br0` (fail-mode secure) with dummy ports `p1` and `p2`.
pub const DEFAULT_TOML: &str = r#"
[[bridge]]
name = "br0"
fail_mode = "secure"

[[bridge.port]]
name = "p1"
type = "dummy"
ofport_request = 1

[[bridge.port]]
name = "p2"
type = "dummy"
ofport_request = 2
"#;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    other_config: BTreeMap<String, String>,
    #[serde(default)]
    bridge: Vec<BridgeToml>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BridgeToml {
    name: String,
    #[serde(default)]
    datapath_type: Option<String>,
    #[serde(default)]
    fail_mode: Option<String>,
    #[serde(default)]
    datapath_id: Option<String>,
    #[serde(default)]
    controller: Vec<String>,
    #[serde(default)]
    port: Vec<PortToml>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PortToml {
    name: String,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    ofport_request: Option<u16>,
    #[serde(default)]
    tag: Option<u16>,
    #[serde(default)]
    trunks: Vec<u16>,
    #[serde(default)]
    vlan_mode: Option<String>,
    #[serde(default)]
    mac: Option<String>,
    #[serde(default)]
    options: BTreeMap<String, String>,
}

/// A stable made-up row id for a name (FNV-1a over a kind and the name).
fn uuid_for(kind: &str, name: &str) -> Uuid {
    let mut h: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for b in kind.bytes().chain([0]).chain(name.bytes()) {
        h ^= u128::from(b);
        h = h.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
    }
    Uuid::from_u128(h)
}

/// Reads a TOML configuration; a syntax error or an unknown key is an error, a bad value a
/// [`Problem`] (as from the database).
pub fn parse(text: &str) -> Result<(Config, Vec<Problem>), String> {
    let f: File = toml::from_str(text).map_err(|e| e.to_string())?;
    let mut problems = Vec::new();
    let mut cfg = Config {
        root: None,
        next_cfg: 1,
        cur_cfg: 1,
        knobs: DpKnobs::default(),
        bridges: BTreeMap::new(),
    };
    cfg.knobs = crate::config::knobs_from(&f.other_config, &mut problems);
    for b in f.bridge {
        if b.name.is_empty() || cfg.bridges.contains_key(&b.name) {
            return Err(format!("bridge name {:?} is empty or repeated", b.name));
        }
        let datapath_id_request = match &b.datapath_id {
            None => None,
            Some(v) => match u64::from_str_radix(v.trim_start_matches("0x"), 16) {
                Ok(id) if v.trim_start_matches("0x").len() == 16 => Some(id),
                _ => {
                    return Err(format!(
                        "bridge {}: datapath_id {v:?} is not 16 hex digits",
                        b.name
                    ));
                }
            },
        };
        let mut ports = BTreeMap::new();
        for p in b.port {
            if p.name.is_empty() || ports.contains_key(&p.name) {
                return Err(format!(
                    "bridge {}: port name {:?} is empty or repeated",
                    b.name, p.name
                ));
            }
            if let Some(r) = p.ofport_request
                && !(1..=0xfeff).contains(&r)
            {
                return Err(format!(
                    "port {}: ofport_request {r} is not in 1..65279",
                    p.name
                ));
            }
            if let Some(t) = p.tag.filter(|t| *t >= 4096) {
                return Err(format!("port {}: tag {t} is not a VLAN", p.name));
            }
            let mac =
                match &p.mac {
                    None => None,
                    Some(m) => Some(crate::config::parse_mac(m).ok_or_else(|| {
                        format!("port {}: mac {m:?} is not a MAC address", p.name)
                    })?),
                };
            let iface = IfaceCfg {
                uuid: uuid_for("Interface", &p.name),
                name: p.name.clone(),
                kind: p.kind.unwrap_or_default(),
                options: p.options,
                ofport_request: p.ofport_request,
                mac,
                ofport_in_db: None,
                error_in_db: None,
            };
            ports.insert(
                p.name.clone(),
                PortCfg {
                    uuid: uuid_for("Port", &p.name),
                    name: p.name,
                    tag: p.tag,
                    trunks: p.trunks.into_iter().filter(|t| *t < 4096).collect(),
                    vlan_mode: p.vlan_mode,
                    interfaces: vec![iface],
                },
            );
        }
        // The bridge's own internal port, as `ovs-vsctl add-br` creates it.
        if !ports.contains_key(&b.name) {
            ports.insert(
                b.name.clone(),
                PortCfg {
                    uuid: uuid_for("Port", &b.name),
                    name: b.name.clone(),
                    tag: None,
                    trunks: vec![],
                    vlan_mode: None,
                    interfaces: vec![IfaceCfg {
                        uuid: uuid_for("Interface", &b.name),
                        name: b.name.clone(),
                        kind: "internal".into(),
                        options: BTreeMap::new(),
                        ofport_request: None,
                        mac: None,
                        ofport_in_db: None,
                        error_in_db: None,
                    }],
                },
            );
        }
        cfg.bridges.insert(
            b.name.clone(),
            BridgeCfg {
                uuid: uuid_for("Bridge", &b.name),
                name: b.name,
                datapath_type: b.datapath_type.unwrap_or_else(|| "netdev".into()),
                fail_mode: b.fail_mode,
                datapath_id_request,
                hwaddr: None,
                protocols: vec![],
                controllers: b.controller,
                datapath_id_in_db: None,
                ports,
            },
        );
    }
    Ok((cfg, problems))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_parses_and_errors_are_named() {
        let (c, p) = parse(DEFAULT_TOML).unwrap();
        assert!(p.is_empty());
        let br = &c.bridges["br0"];
        assert_eq!(br.ports.len(), 3);
        assert_eq!(br.ports["p2"].interfaces[0].ofport_request, Some(2));
        assert_eq!(br.ports["br0"].interfaces[0].kind, "internal");
        for (bad, why) in [
            ("[[bridge]]\nname='a'\nfoo=1\n", "unknown field"),
            ("[[bridge]]\nname='a'\n[[bridge]]\nname='a'\n", "repeated"),
            (
                "[[bridge]]\nname='a'\n[[bridge.port]]\nname='p'\nofport_request=0\n",
                "ofport_request",
            ),
            (
                "[[bridge]]\nname='a'\n[[bridge.port]]\nname='p'\ntag=5000\n",
                "VLAN",
            ),
            ("[[bridge]]\nname='a'\ndatapath_id='12'\n", "16 hex"),
            ("[[bridge", "expected"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        let (_, p) = parse("[other_config]\nflow-limit='x'\n").unwrap();
        assert_eq!(p.len(), 1);
    }
}
