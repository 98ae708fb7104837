//! Helpers of the `dp_*` tests: made-up configurations, frames, pcap reading.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use ovsdb::Uuid;
use vswitchd::config::{BridgeCfg, Config, IfaceCfg, PortCfg};

/// An interface row.
pub fn iface(
    n: u128,
    name: &str,
    kind: &str,
    ofport: Option<u16>,
    opts: &[(&str, String)],
) -> IfaceCfg {
    IfaceCfg {
        uuid: Uuid::from_u128(n),
        name: name.into(),
        kind: kind.into(),
        options: opts
            .iter()
            .map(|(k, v)| ((*k).to_string(), v.clone()))
            .collect::<BTreeMap<_, _>>(),
        ofport_request: ofport,
        mac: None,
        ofport_in_db: None,
        error_in_db: None,
    }
}

/// A port row holding `i`.
pub fn port(i: IfaceCfg) -> (String, PortCfg) {
    (
        i.name.clone(),
        PortCfg {
            uuid: Uuid::from_u128(i.uuid.0 + 1_000_000),
            name: i.name.clone(),
            tag: None,
            trunks: vec![],
            vlan_mode: None,
            interfaces: vec![i],
        },
    )
}

/// A bridge row named `name` (row id `n`) with `ports`.
pub fn bridge(n: u128, name: &str, dp_type: &str, ports: Vec<(String, PortCfg)>) -> BridgeCfg {
    BridgeCfg {
        uuid: Uuid::from_u128(n),
        name: name.into(),
        datapath_type: dp_type.into(),
        fail_mode: Some("secure".into()),
        datapath_id_request: None,
        hwaddr: None,
        protocols: vec![],
        controllers: vec![],
        datapath_id_in_db: None,
        ports: ports.into_iter().collect(),
    }
}

/// A configuration of `bridges`.
pub fn config(bridges: Vec<BridgeCfg>) -> Config {
    Config {
        bridges: bridges.into_iter().map(|b| (b.name.clone(), b)).collect(),
        ..Config::default()
    }
}

/// A 42-byte UDP frame whose source MAC and UDP source port carry `n`.
pub fn frame(n: u16) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[0, 0, 0, 0, (n >> 8) as u8, n as u8]);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&[
        0x45, 0, 0, 28, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    f.extend_from_slice(&n.to_be_bytes());
    f.extend_from_slice(&[0, 53, 0, 8, 0, 0]);
    f
}

/// The frames of a pcap file, read with `pcap-file` (what a third-party reader sees),
/// as a reader of a file being written sees it: a last record still being written (cut
/// short) is not there yet, as `tcpdump -r` reports a truncated dump.
pub fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    read(path, false)
}

/// [`read_pcap`] of a finished file: a truncated record is a failure.
pub fn read_pcap_strict(path: &Path) -> Vec<Vec<u8>> {
    read(path, true)
}

fn read(path: &Path, strict: bool) -> Vec<Vec<u8>> {
    let Ok(f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let mut r = match pcap_file::pcap::PcapReader::new(f) {
        Ok(r) => r,
        Err(_) if !strict => return Vec::new(),
        Err(e) => panic!("{}: pcap header: {e}", path.display()),
    };
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        match p {
            Ok(p) => v.push(p.data.into_owned()),
            Err(e) if strict => panic!("{}: pcap record: {e}", path.display()),
            Err(_) => break,
        }
    }
    v
}

/// Polls `read_pcap(path)` until it holds `n` frames (or `timeout`); returns them.
pub fn wait_pcap(path: &Path, n: usize, timeout: Duration) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    loop {
        let v = read_pcap(path);
        if v.len() >= n || Instant::now() >= deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A fresh private directory under the system temp dir.
pub fn tempdir(tag: &str) -> std::path::PathBuf {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "flowswitch-dp-{tag}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}
