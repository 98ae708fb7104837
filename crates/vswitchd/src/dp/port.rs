//! The daemon's port kind: OVS's `dummy` netdev (`lib/netdev-dummy.c`), as a [`Port`].
//!
//! Every interface the daemon opens today is one of these (`dummy`, `internal`, the bridge's
//! own port, and every kind under `--enable-dummy=override`). Frames arrive only through
//! [`DummyHandle::receive`] (`ovs-appctl netdev-dummy/receive`) or from a pcap file named by
//! flowswitch's own option; what the switch sends out is counted and, if asked, written to a
//! pcap file. Options, as OVS 3.1 reads them (checked against a running `ovs-vswitchd`):
//!
//! | option | effect |
//! |---|---|
//! | `tx_pcap=FILE` | every frame sent on the port is appended to FILE |
//! | `rxq_pcap=FILE` | every frame received by the port (injected) is appended to FILE, when it is queued |
//! | `pcap=FILE` | both into one FILE (OVS: then `tx_pcap`/`rxq_pcap` are ignored) |
//! | `flowswitch-rx-pcap=FILE` | flowswitch's own: the frames of FILE (classic pcap, Ethernet) are received once, in order, when the port opens, as if injected |
//!
//! Files are opened as OVS opens them (`ovs_pcap_open(FILE, "ab")`): appended to, the
//! 24-byte header written only when the file is new or empty. Records carry the wall-clock
//! time; the header's snap length is 262144 (OVS writes 1518 but records longer frames
//! whole; a snap length below the frames makes strict readers, `pcap-file` among them,
//! refuse them). Each burst's records are flushed before the burst returns (OVS flushes
//! per packet), so `tcpdump -r` sees them while the daemon runs (a reader may find the
//! record being written cut short, as with any live capture file); nothing is left
//! buffered when the port is dropped.
//!
//! The rx queue holds at most [`RX_QUEUE_MAX`] frames (OVS's dummy rx queue drops beyond
//! 100; we refuse the injection instead, so the caller knows).

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use crate::bridges::IfaceBackend;
use crate::ofconn::PortCounters;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use netdev::{Batch, MAX_FRAME, PacketPool, Port, PortStats};

/// Frames an rx queue may hold before injections are refused.
pub const RX_QUEUE_MAX: usize = 65_536;

/// Snap length of the pcap files we create.
pub const PCAP_SNAPLEN: u32 = 262_144;

/// The shortest frame `netdev-dummy/receive` accepts (an Ethernet header; OVS refuses
/// shorter hex as a syntax error).
pub const MIN_FRAME: usize = 14;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A pcap file opened for appending (shared by a port's rx and tx when `pcap=FILE`).
#[derive(Debug)]
pub struct PcapSink {
    path: PathBuf,
    out: BufWriter<File>,
    error: Option<String>,
    written: u64,
}

impl PcapSink {
    /// Opens `path` for appending, writing the header if the file is new or empty.
    pub fn open(path: &Path) -> Result<PcapSink, String> {
        let err = |e: std::io::Error| format!("{}: {e}", path.display());
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(err)?;
        let len = f.seek(SeekFrom::End(0)).map_err(err)?;
        let mut out = BufWriter::new(f);
        if len == 0 {
            let mut h = [0u8; 24];
            h[0..4].copy_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
            h[4..6].copy_from_slice(&2u16.to_le_bytes());
            h[6..8].copy_from_slice(&4u16.to_le_bytes());
            h[16..20].copy_from_slice(&PCAP_SNAPLEN.to_le_bytes());
            h[20..24].copy_from_slice(&1u32.to_le_bytes());
            out.write_all(&h).and_then(|()| out.flush()).map_err(err)?;
        }
        Ok(PcapSink {
            path: path.to_path_buf(),
            out,
            error: None,
            written: 0,
        })
    }

    /// Appends one record (not flushed). False after a write error (the first is kept).
    fn write(&mut self, frame: &[u8]) -> bool {
        if self.error.is_some() {
            return false;
        }
        let t = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let len = frame.len() as u32;
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((t.as_secs() & 0xffff_ffff) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&t.subsec_micros().to_le_bytes());
        h[8..12].copy_from_slice(&len.to_le_bytes());
        h[12..16].copy_from_slice(&len.to_le_bytes());
        match self
            .out
            .write_all(&h)
            .and_then(|()| self.out.write_all(frame))
        {
            Ok(()) => {
                self.written += 1;
                true
            }
            Err(e) => {
                self.error = Some(format!("{}: {e}", self.path.display()));
                false
            }
        }
    }

    fn flush(&mut self) {
        if self.error.is_none()
            && let Err(e) = self.out.flush()
        {
            self.error = Some(format!("{}: {e}", self.path.display()));
        }
    }

    /// Records written by this sink.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The first write error.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
}

/// What a port is, from its `Interface` row (see the module doc).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortSpec {
    /// `dpctl/show` type: `dummy`, or `dummy-internal` for internal ports (the bridge's own).
    pub kind: String,
    /// `tx_pcap`.
    pub tx_pcap: Option<PathBuf>,
    /// `rxq_pcap`.
    pub rxq_pcap: Option<PathBuf>,
    /// `pcap` (rx and tx in one file).
    pub pcap: Option<PathBuf>,
    /// `flowswitch-rx-pcap`.
    pub rx_pcap_input: Option<PathBuf>,
    /// `n_rxq` (AF_XDP: queues to open).
    pub n_rxq: Option<String>,
    /// `xdp-mode` (AF_XDP, OVS's values: `best-effort`, `native-with-zerocopy`, `native`,
    /// `generic`).
    pub xdp_mode: Option<String>,
}

impl PortSpec {
    /// The spec of an interface opened as `backend`, with `options`.
    pub fn from_iface(
        backend: IfaceBackend,
        options: &std::collections::BTreeMap<String, String>,
    ) -> PortSpec {
        let path = |k: &str| options.get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        PortSpec {
            kind: match backend {
                IfaceBackend::Dummy => "dummy",
                IfaceBackend::DummyInternal => "dummy-internal",
                IfaceBackend::AfPacket => "system",
                IfaceBackend::Tap => "tap",
                IfaceBackend::AfXdp => "afxdp",
            }
            .into(),
            n_rxq: options.get("n_rxq").cloned(),
            xdp_mode: options.get("xdp-mode").cloned(),
            tx_pcap: path("tx_pcap"),
            rxq_pcap: path("rxq_pcap"),
            pcap: path("pcap"),
            rx_pcap_input: path("flowswitch-rx-pcap"),
        }
    }

    /// Whether this is a dummy port (frames injected by `netdev-dummy/receive`).
    pub fn is_dummy(&self) -> bool {
        self.kind.starts_with("dummy")
    }
}

/// A port opened for the datapath, of any kind.
pub struct OpenedPort {
    /// The port, for the datapath thread.
    pub port: Box<dyn Port>,
    /// Its counters, published after each burst.
    pub counters: Arc<SharedCounters>,
    /// The injection side, for dummy ports.
    pub dummy: Option<DummyHandle>,
    /// What was attached and how (real ports), for the log.
    pub info: Option<String>,
    /// Problems (the port works without what failed).
    pub problems: Vec<String>,
}

impl std::fmt::Debug for OpenedPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedPort")
            .field("port", &self.port.name())
            .field("info", &self.info)
            .field("problems", &self.problems)
            .finish_non_exhaustive()
    }
}

/// Opens interface `name` per `spec`; `rx` keeps the queue of a dummy port this one
/// replaces. A real port that cannot be opened is an error naming the interface.
pub fn open_port(name: &str, spec: &PortSpec, rx: Option<RxQueue>) -> Result<OpenedPort, String> {
    let linux = |port: Box<dyn Port>, info: String| {
        let counters: Arc<SharedCounters> = Arc::default();
        OpenedPort {
            port: Box::new(LinuxPort {
                inner: port,
                counters: counters.clone(),
            }),
            counters,
            dummy: None,
            info: Some(info),
            problems: Vec::new(),
        }
    };
    match spec.kind.as_str() {
        "system" => {
            let p = netdev::AfPacketPort::open(name, &netdev::AfPacketOptions::default())
                .map_err(|e| format!("could not open network device {name} ({e})"))?;
            let info = p.info().to_owned();
            Ok(linux(Box::new(p), info))
        }
        "afxdp" => {
            let o = afxdp_options(spec).map_err(|e| format!("{name}: {e}"))?;
            let p = netdev::AfXdpPort::open(name, &o)
                .map_err(|e| format!("could not open network device {name} ({e})"))?;
            let info = p.describe().to_owned();
            Ok(linux(Box::new(p), info))
        }
        "tap" => {
            let p = netdev::TapPort::open(name)
                .map_err(|e| format!("could not open network device {name} ({e})"))?;
            let info = p.info();
            Ok(linux(Box::new(p), info))
        }
        _ => {
            let o = DummyPort::open(name, spec, rx);
            Ok(OpenedPort {
                counters: o.handle.counters.clone(),
                port: Box::new(o.port),
                dummy: Some(o.handle),
                info: None,
                problems: o.problems,
            })
        }
    }
}

/// AF_XDP options from OVS's `Interface:options`: `n_rxq` queues; `xdp-mode`
/// `best-effort` (default: zero-copy where the driver can, else copy),
/// `native-with-zerocopy` (zero-copy or fail), `native`/`generic` (copy; the XDP attach
/// mode itself is chosen by the port: driver mode where the driver has XDP, else generic).
pub fn afxdp_options(spec: &PortSpec) -> Result<netdev::AfXdpOptions, String> {
    let mut o = netdev::AfXdpOptions::default();
    if let Some(n) = &spec.n_rxq {
        o.queues = n
            .parse()
            .map_err(|_| format!("n_rxq {n:?}: a number of queues"))?;
    }
    o.mode = match spec.xdp_mode.as_deref() {
        None | Some("") | Some("best-effort") => netdev::XdpMode::Auto,
        Some("native-with-zerocopy") => netdev::XdpMode::ZeroCopy,
        Some("native") | Some("generic") => netdev::XdpMode::Copy,
        Some(other) => {
            return Err(format!(
                "xdp-mode {other:?}: best-effort, native-with-zerocopy, native or generic"
            ));
        }
    };
    o.validate().map_err(|e| e.to_string())?;
    Ok(o)
}

/// A Linux port with its counters published for other threads after every burst that
/// moved something.
struct LinuxPort {
    inner: Box<dyn Port>,
    counters: Arc<SharedCounters>,
}

impl Port for LinuxPort {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn rx_burst(&mut self, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let n = self.inner.rx_burst(pool, batch);
        if n > 0 {
            publish(&self.counters, &self.inner.stats());
        }
        n
    }

    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PacketPool) -> usize {
        let n = self.inner.tx_burst(batch, pool);
        publish(&self.counters, &self.inner.stats());
        n
    }

    fn stats(&self) -> PortStats {
        self.inner.stats()
    }

    fn flush(&mut self) -> Result<(), netdev::PortError> {
        self.inner.flush()
    }

    fn rx_fds(&self, out: &mut Vec<std::os::fd::RawFd>) {
        self.inner.rx_fds(out)
    }
}

/// A port's rx queue, shared by the port and its handles.
pub type RxQueue = Arc<Mutex<VecDeque<Vec<u8>>>>;

/// The port's counters as other threads read them (see [`PortCounters`]).
pub type SharedCounters = PortCounters;

/// Stores the running totals `s` into `c` (after a burst).
fn publish(c: &PortCounters, s: &PortStats) {
    c.rx_packets.store(s.rx_packets, Ordering::Relaxed);
    c.rx_bytes.store(s.rx_bytes, Ordering::Relaxed);
    c.rx_dropped.store(s.rx_dropped, Ordering::Relaxed);
    c.tx_packets.store(s.tx_packets, Ordering::Relaxed);
    c.tx_bytes.store(s.tx_bytes, Ordering::Relaxed);
    c.tx_dropped.store(s.tx_dropped, Ordering::Relaxed);
}

/// The control side of a [`DummyPort`]: queues frames for it to receive.
#[derive(Debug, Clone)]
pub struct DummyHandle {
    rx: RxQueue,
    rxq_pcap: Option<Arc<Mutex<PcapSink>>>,
    counters: Arc<SharedCounters>,
}

impl DummyHandle {
    /// Queues `frames` for the port (all or none), recording them in `rxq_pcap` if set.
    pub fn receive(&self, frames: &[Vec<u8>]) -> Result<(), String> {
        let mut q = lock(&self.rx);
        if q.len() + frames.len() > RX_QUEUE_MAX {
            return Err(format!(
                "rx queue full ({} frames waiting, at most {RX_QUEUE_MAX})",
                q.len()
            ));
        }
        if let Some(s) = &self.rxq_pcap {
            let mut s = lock(s);
            for f in frames {
                s.write(f);
            }
            s.flush();
        }
        q.extend(frames.iter().cloned());
        Ok(())
    }

    /// The rx queue (to hand to a replacement port).
    pub fn rx_queue(&self) -> RxQueue {
        self.rx.clone()
    }

    /// The port's published counters.
    pub fn counters(&self) -> &Arc<SharedCounters> {
        &self.counters
    }

    /// Frames queued and not yet received.
    pub fn pending(&self) -> usize {
        lock(&self.rx).len()
    }
}

/// A dummy port (module doc).
#[derive(Debug)]
pub struct DummyPort {
    name: String,
    rx: RxQueue,
    tx_pcap: Option<Arc<Mutex<PcapSink>>>,
    stats: PortStats,
    counters: Arc<SharedCounters>,
}

/// A port being opened: the port, its handle, and what could not be opened (the port
/// works without it, as OVS's does when a pcap file cannot be opened).
#[derive(Debug)]
pub struct Opened {
    /// The port.
    pub port: DummyPort,
    /// Its control side.
    pub handle: DummyHandle,
    /// Problems, each naming the file.
    pub problems: Vec<String>,
}

impl DummyPort {
    /// Opens port `name` per `spec`; `rx` keeps the queue of a port this one replaces
    /// (options changed), so no queued frame is lost.
    pub fn open(name: &str, spec: &PortSpec, rx: Option<RxQueue>) -> Opened {
        let mut problems = Vec::new();
        let mut sink = |p: &Option<PathBuf>| {
            p.as_ref().and_then(|p| match PcapSink::open(p) {
                Ok(s) => Some(Arc::new(Mutex::new(s))),
                Err(e) => {
                    problems.push(format!("{name}: cannot open pcap file {e}"));
                    None
                }
            })
        };
        let (rxq_pcap, tx_pcap) = if spec.pcap.is_some() {
            let s = sink(&spec.pcap);
            (s.clone(), s)
        } else {
            (sink(&spec.rxq_pcap), sink(&spec.tx_pcap))
        };
        let rx = rx.unwrap_or_default();
        let handle = DummyHandle {
            rx,
            rxq_pcap,
            counters: Arc::default(),
        };
        if let Some(input) = &spec.rx_pcap_input {
            match netdev::read_pcap(input) {
                Ok(frames) => {
                    if let Err(e) = handle.receive(&frames) {
                        problems.push(format!("{name}: {}: {e}", input.display()));
                    }
                }
                Err(e) => problems.push(format!("{name}: flowswitch-rx-pcap: {e}")),
            }
        }
        Opened {
            port: DummyPort {
                name: name.to_owned(),
                rx: handle.rx.clone(),
                tx_pcap,
                stats: PortStats::default(),
                counters: handle.counters.clone(),
            },
            handle,
            problems,
        }
    }
}

impl Port for DummyPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let mut q = lock(&self.rx);
        let mut n = 0;
        while !batch.is_full() {
            let Some(frame) = q.front() else { break };
            if frame.len() > MAX_FRAME {
                q.pop_front();
                self.stats.rx_too_large += 1;
                self.stats.rx_dropped += 1;
                continue;
            }
            // Pool exhausted: the frame stays queued for the next burst.
            let Some(mut p) = pool.alloc() else { break };
            if p.set_data(frame).is_err() {
                pool.free(p);
                break;
            }
            let len = p.len() as u64;
            if let Err(p) = batch.push(p) {
                pool.free(p);
                break;
            }
            q.pop_front();
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += len;
            n += 1;
        }
        drop(q);
        if n > 0 {
            publish(&self.counters, &self.stats);
        }
        n
    }

    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PacketPool) -> usize {
        let mut n = 0;
        let mut sink = self.tx_pcap.as_ref().map(|s| lock(s));
        for p in batch.drain() {
            let ok = sink.as_mut().is_none_or(|s| s.write(p.data()));
            if ok {
                n += 1;
                self.stats.tx_packets += 1;
                self.stats.tx_bytes += p.len() as u64;
            } else {
                self.stats.tx_errors += 1;
                self.stats.tx_dropped += 1;
            }
            pool.free(p);
        }
        if let Some(s) = sink.as_mut() {
            s.flush();
        }
        publish(&self.counters, &self.stats);
        n
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}
