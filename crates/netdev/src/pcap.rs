//! pcap files: a reading port, a writing port and whole-file helpers.
//!
//! Reading uses the `pcap-file` crate (v2) at the record level (`next_raw_packet`): the
//! captured bytes of each record are the frame. We do not apply `pcap-file`'s own checks of
//! `orig_len` against the snap length, which reject ordinary truncated captures (`tcpdump -s`);
//! a record shorter than its `orig_len` is delivered as captured. Both byte orders and both
//! timestamp resolutions are read. Only link type Ethernet (1) is accepted; any other link type,
//! and pcapng files, are refused with a clear [`PortError`] when the file is opened.
//!
//! Writing emits classic little-endian microsecond pcap with link type Ethernet and a snap
//! length of [`WRITE_SNAPLEN`]. The global header is written by `pcap-file`; the 16-byte record
//! headers are written here so the port keeps direct access to its writer (to flush it).
//! Timestamps are synthetic by default (record *i* is stamped *i* microseconds), so output is
//! byte-for-byte reproducible; [`PcapWriterPort::with_wallclock`] stamps the time of writing.
//!
//! Hot path: [`PcapReaderPort::rx_burst`] parses records in place in `pcap-file`'s read buffer
//! and copies each frame into a pool packet; [`PcapWriterPort::tx_burst`] writes from the
//! packet's buffer. Neither allocates per packet.

use crate::batch::Batch;
use crate::packet::{Packet, PacketPool};
use crate::port::{Port, PortError, PortStats, RxCopy, rx_copy};
use pcap_file::pcap::{PcapHeader, PcapReader};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// Snap length written into the header of the files we write; frames are never longer.
pub const WRITE_SNAPLEN: u32 = 262_144;

const PCAPNG_MAGIC: [u8; 4] = [0x0A, 0x0D, 0x0D, 0x0A];

fn describe_pcap_error(e: &PcapError) -> String {
    match e {
        PcapError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            "truncated record or header".to_string()
        }
        PcapError::IoError(io) => format!("I/O error: {io}"),
        other => other.to_string(),
    }
}

fn io_err(path: &Path, source: std::io::Error) -> PortError {
    PortError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Opens `path`, refusing pcapng with a clear message.
fn open_classic(path: &Path) -> Result<BufReader<File>, PortError> {
    let mut f = File::open(path).map_err(|e| io_err(path, e))?;
    let mut magic = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match f.read(&mut magic[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err(path, e)),
        }
    }
    if got == 4 && magic == PCAPNG_MAGIC {
        return Err(PortError::Pcap {
            context: path.display().to_string(),
            message: "this is a pcapng file; only classic pcap is supported \
                      (convert with `editcap -F pcap IN OUT`)"
                .to_string(),
        });
    }
    use std::io::Seek;
    f.seek(std::io::SeekFrom::Start(0))
        .map_err(|e| io_err(path, e))?;
    Ok(BufReader::new(f))
}

fn open_reader<R: Read>(reader: R, context: &str) -> Result<PcapReader<R>, PortError> {
    let r = PcapReader::new(reader).map_err(|e| PortError::Pcap {
        context: context.to_string(),
        message: describe_pcap_error(&e),
    })?;
    let dl = r.header().datalink;
    if dl != DataLink::ETHERNET {
        return Err(PortError::UnsupportedLinkType {
            context: context.to_string(),
            linktype: u32::from(dl),
        });
    }
    Ok(r)
}

/// Hands the frames of a classic Ethernet pcap stream to `f` one by one, in order, with their
/// record numbers (1 for the first record, as tcpdump and Wireshark count). Stops at the first
/// error `f` returns, or at a malformed or truncated record — after every good record before
/// it was handed over — with a [`PortError::Pcap`] naming the record. Returns the number of
/// records read.
pub fn read_pcap_each_from<R: Read, E: From<PortError>>(
    reader: R,
    context: &str,
    mut f: impl FnMut(u64, &[u8]) -> Result<(), E>,
) -> Result<u64, E> {
    let mut r = open_reader(reader, context)?;
    let mut n = 0u64;
    while let Some(rec) = r.next_raw_packet() {
        n += 1;
        match rec {
            Ok(raw) => f(n, &raw.data)?,
            Err(e) => {
                return Err(PortError::Pcap {
                    context: format!("{context}: record {n}"),
                    message: describe_pcap_error(&e),
                }
                .into());
            }
        }
    }
    Ok(n)
}

/// [`read_pcap_each_from`] on a file (refusing pcapng; errors name the file).
pub fn read_pcap_each<E: From<PortError>>(
    path: impl AsRef<Path>,
    f: impl FnMut(u64, &[u8]) -> Result<(), E>,
) -> Result<u64, E> {
    let path = path.as_ref();
    read_pcap_each_from(open_classic(path)?, &path.display().to_string(), f)
}

/// Reads every frame of a classic Ethernet pcap stream. A malformed record is an error.
pub fn read_pcap_from<R: Read>(reader: R, context: &str) -> Result<Vec<Vec<u8>>, PortError> {
    let mut frames = Vec::new();
    read_pcap_each_from(reader, context, |_, frame| -> Result<(), PortError> {
        frames.push(frame.to_vec());
        Ok(())
    })?;
    Ok(frames)
}

/// Reads every frame of a classic Ethernet pcap file. A malformed record is an error.
pub fn read_pcap(path: impl AsRef<Path>) -> Result<Vec<Vec<u8>>, PortError> {
    let path = path.as_ref();
    read_pcap_from(open_classic(path)?, &path.display().to_string())
}

/// Writes `frames` as a classic Ethernet pcap stream (synthetic timestamps, see module doc).
pub fn write_pcap_to<W: Write, F: AsRef<[u8]>>(
    writer: W,
    frames: impl IntoIterator<Item = F>,
) -> Result<W, PortError> {
    let mut w = RecordWriter::new(writer).map_err(|e| PortError::Pcap {
        context: "writing pcap header".to_string(),
        message: describe_pcap_error(&e),
    })?;
    for (index, f) in frames.into_iter().enumerate() {
        let f = f.as_ref();
        if f.len() > WRITE_SNAPLEN as usize {
            return Err(PortError::FrameTooLarge {
                index,
                len: f.len(),
                max: WRITE_SNAPLEN as usize,
            });
        }
        w.write(f, Duration::from_micros(index as u64))
            .map_err(|e| PortError::Pcap {
                context: format!("writing record {index}"),
                message: format!("I/O error: {e}"),
            })?;
    }
    Ok(w.inner)
}

/// Writes `frames` to a classic Ethernet pcap file (synthetic timestamps, see module doc).
pub fn write_pcap<F: AsRef<[u8]>>(
    path: impl AsRef<Path>,
    frames: impl IntoIterator<Item = F>,
) -> Result<(), PortError> {
    let path = path.as_ref();
    let f = File::create(path).map_err(|e| io_err(path, e))?;
    let mut w = write_pcap_to(BufWriter::new(f), frames).map_err(|e| match e {
        PortError::Pcap { context, message } => PortError::Pcap {
            context: format!("{}: {context}", path.display()),
            message,
        },
        other => other,
    })?;
    w.flush().map_err(|e| io_err(path, e))
}

/// Writes the global header once, then 16-byte little-endian record headers plus data.
#[derive(Debug)]
struct RecordWriter<W: Write> {
    inner: W,
}

impl<W: Write> RecordWriter<W> {
    fn new(mut inner: W) -> Result<Self, PcapError> {
        let header = PcapHeader {
            snaplen: WRITE_SNAPLEN,
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::MicroSecond,
            endianness: Endianness::Little,
            ..PcapHeader::default()
        };
        header.write_to(&mut inner)?;
        Ok(RecordWriter { inner })
    }

    /// The caller guarantees `data.len() <= WRITE_SNAPLEN`.
    #[inline]
    fn write(&mut self, data: &[u8], ts: Duration) -> std::io::Result<()> {
        let len = data.len() as u32;
        let secs = (ts.as_secs() & 0xFFFF_FFFF) as u32;
        let mut hdr = [0u8; 16];
        hdr[0..4].copy_from_slice(&secs.to_le_bytes());
        hdr[4..8].copy_from_slice(&ts.subsec_micros().to_le_bytes());
        hdr[8..12].copy_from_slice(&len.to_le_bytes());
        hdr[12..16].copy_from_slice(&len.to_le_bytes());
        self.inner.write_all(&hdr)?;
        self.inner.write_all(data)
    }
}

/// A port that receives the frames of a pcap file once, in order, then reports EOF.
/// Transmitted packets are discarded (counted as sent).
pub struct PcapReaderPort<R: Read + Send = BufReader<File>> {
    name: String,
    reader: PcapReader<R>,
    eof: bool,
    error: Option<String>,
    stats: PortStats,
}

impl<R: Read + Send> std::fmt::Debug for PcapReaderPort<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapReaderPort")
            .field("name", &self.name)
            .field("eof", &self.eof)
            .field("error", &self.error)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl PcapReaderPort {
    /// Opens a pcap file; fails on I/O errors, a bad header, pcapng or a non-Ethernet link.
    pub fn open(name: impl Into<String>, path: impl AsRef<Path>) -> Result<Self, PortError> {
        let path = path.as_ref();
        Self::from_reader(name, open_classic(path)?, &path.display().to_string())
    }
}

impl<R: Read + Send> PcapReaderPort<R> {
    /// Wraps a pcap stream; `context` names it in errors.
    pub fn from_reader(
        name: impl Into<String>,
        reader: R,
        context: &str,
    ) -> Result<Self, PortError> {
        Ok(PcapReaderPort {
            name: name.into(),
            reader: open_reader(reader, context)?,
            eof: false,
            error: None,
            stats: PortStats::default(),
        })
    }

    /// The error that stopped reading early, if any (a malformed or truncated record).
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
}

impl<R: Read + Send> Port for PcapReaderPort<R> {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let mut n = 0;
        for _ in 0..batch.room() {
            if self.eof {
                break;
            }
            match self.reader.next_raw_packet() {
                None => self.eof = true,
                Some(Err(e)) => {
                    // The stream cannot be resynchronised after a bad record: stop here.
                    self.stats.rx_errors += 1;
                    self.eof = true;
                    // Records count from 1, as in read_pcap_each_from.
                    self.error = Some(format!(
                        "record {}: {}",
                        self.stats.rx_packets + self.stats.rx_dropped + 1,
                        describe_pcap_error(&e)
                    ));
                }
                Some(Ok(raw)) => match rx_copy(&raw.data, pool, batch, &mut self.stats) {
                    RxCopy::Delivered => n += 1,
                    RxCopy::TooLarge => {}
                    RxCopy::NoBuf => break,
                },
            }
        }
        n
    }

    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PacketPool) -> usize {
        sink_tx(batch, pool, &mut self.stats)
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn rx_eof(&self) -> bool {
        self.eof
    }
}

/// Tx of a port with no output: every packet counts as sent and is freed.
#[inline]
pub(crate) fn sink_tx(batch: &mut Batch, pool: &mut PacketPool, stats: &mut PortStats) -> usize {
    let n = batch.len();
    let bytes: usize = batch.iter().map(Packet::len).sum();
    stats.tx_packets += n as u64;
    stats.tx_bytes += bytes as u64;
    pool.free_batch(batch);
    n
}

/// A port that writes each transmitted packet as a pcap record. Rx delivers nothing.
///
/// After the first write error every later packet is dropped (counted in `tx_errors`): a
/// partially written record cannot be repaired. [`PcapWriterPort::error`] tells what happened.
pub struct PcapWriterPort<W: Write + Send = BufWriter<File>> {
    name: String,
    writer: RecordWriter<W>,
    wallclock: bool,
    written: u64,
    error: Option<String>,
    stats: PortStats,
}

impl<W: Write + Send> std::fmt::Debug for PcapWriterPort<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapWriterPort")
            .field("name", &self.name)
            .field("written", &self.written)
            .field("error", &self.error)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl PcapWriterPort {
    /// Creates (truncates) a pcap file and writes its header.
    pub fn create(name: impl Into<String>, path: impl AsRef<Path>) -> Result<Self, PortError> {
        let path = path.as_ref();
        let f = File::create(path).map_err(|e| io_err(path, e))?;
        Self::from_writer(name, BufWriter::new(f)).map_err(|e| match e {
            PortError::Pcap { message, .. } => PortError::Pcap {
                context: path.display().to_string(),
                message,
            },
            other => other,
        })
    }
}

impl<W: Write + Send> PcapWriterPort<W> {
    /// Wraps a writer and writes the pcap header to it.
    pub fn from_writer(name: impl Into<String>, writer: W) -> Result<Self, PortError> {
        let writer = RecordWriter::new(writer).map_err(|e| PortError::Pcap {
            context: "writing pcap header".to_string(),
            message: describe_pcap_error(&e),
        })?;
        Ok(PcapWriterPort {
            name: name.into(),
            writer,
            wallclock: false,
            written: 0,
            error: None,
            stats: PortStats::default(),
        })
    }

    /// Stamps records with the time of writing instead of synthetic timestamps.
    pub fn with_wallclock(mut self, on: bool) -> Self {
        self.wallclock = on;
        self
    }

    /// The first write error, if any.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Flushes and returns the underlying writer.
    pub fn into_inner(mut self) -> Result<W, PortError> {
        self.flush()?;
        Ok(self.writer.inner)
    }
}

impl<W: Write + Send> Port for PcapWriterPort<W> {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, _pool: &mut PacketPool, _batch: &mut Batch) -> usize {
        0
    }

    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PacketPool) -> usize {
        let now = if self.wallclock {
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
        } else {
            Duration::ZERO
        };
        let mut sent = 0;
        for p in batch.drain() {
            if self.error.is_some() {
                self.stats.count_tx_error();
            } else {
                let ts = if self.wallclock {
                    now
                } else {
                    Duration::from_micros(self.written)
                };
                match self.writer.write(p.data(), ts) {
                    Ok(()) => {
                        self.written += 1;
                        self.stats.count_tx(p.len());
                        sent += 1;
                    }
                    Err(e) => {
                        self.stats.count_tx_error();
                        self.error = Some(format!("write failed: {e}"));
                    }
                }
            }
            pool.free(p);
        }
        sent
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.writer.inner.flush().map_err(|e| PortError::Io {
            path: self.name.clone().into(),
            source: e,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::MAX_FRAME;
    use std::io::Cursor;

    fn frames() -> Vec<Vec<u8>> {
        (0..50usize)
            .map(|i| (0..(i * 37 % 1600)).map(|j| (i + j) as u8).collect())
            .collect()
    }

    #[test]
    fn write_read_round_trip_in_memory() {
        let fs = frames();
        let buf = write_pcap_to(Vec::new(), &fs).unwrap();
        let back = read_pcap_from(Cursor::new(buf), "mem").unwrap();
        assert_eq!(back, fs);
    }

    #[test]
    fn write_read_round_trip_file() {
        let dir = std::env::temp_dir().join(format!("netdev-pcap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rt.pcap");
        let fs = frames();
        write_pcap(&path, &fs).unwrap();
        assert_eq!(read_pcap(&path).unwrap(), fs);

        // Port round trip: reader port -> writer port -> file, same bytes.
        let out = dir.join("rt2.pcap");
        let mut rx = PcapReaderPort::open("in", &path).unwrap();
        let mut tx = PcapWriterPort::create("out", &out).unwrap();
        let mut pool = PacketPool::new(64);
        let mut b = Batch::new();
        let mut bursts = 0;
        while !rx.rx_eof() {
            rx.rx_burst(&mut pool, &mut b);
            assert!(b.len() <= crate::BATCH_MAX);
            tx.tx_burst(&mut b, &mut pool);
            assert!(b.is_empty());
            bursts += 1;
        }
        tx.flush().unwrap();
        assert_eq!(bursts, 2); // 32 + 18 frames; the second burst hits EOF
        assert_eq!(read_pcap(&out).unwrap(), fs);
        assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&path).unwrap());
        assert_eq!(rx.stats().rx_packets, 50);
        assert_eq!(tx.stats().tx_packets, 50);
        assert_eq!(pool.available(), 64);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Builds a pcap header by hand with the given magic (as little-endian bytes) and link type.
    fn header(magic: u32, linktype: u32, big: bool) -> Vec<u8> {
        let w32 = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let w16 = |v: u16| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut h = Vec::new();
        h.extend(w32(magic));
        h.extend(w16(2));
        h.extend(w16(4));
        h.extend(w32(0));
        h.extend(w32(0));
        h.extend(w32(96)); // small snaplen: truncated captures must still read
        h.extend(w32(linktype));
        h
    }

    fn record(data: &[u8], orig: u32, big: bool) -> Vec<u8> {
        let w32 = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut r = Vec::new();
        r.extend(w32(1));
        r.extend(w32(999_999)); // valid for both µs and ns resolution
        r.extend(w32(data.len() as u32));
        r.extend(w32(orig));
        r.extend(data);
        r
    }

    #[test]
    fn reads_big_endian_nanosecond_truncated_captures() {
        let mut f = header(0xA1B2_3C4D, 1, true);
        f.extend(record(&[1; 96], 1500, true));
        f.extend(record(&[2; 60], 60, true));
        let got = read_pcap_from(Cursor::new(f), "t").unwrap();
        assert_eq!(got, vec![vec![1; 96], vec![2; 60]]);
    }

    #[test]
    fn refuses_other_link_types() {
        let f = header(0xA1B2_C3D4, 113, false); // Linux SLL
        let e = read_pcap_from(Cursor::new(f), "sll.pcap").unwrap_err();
        assert!(matches!(
            e,
            PortError::UnsupportedLinkType { linktype: 113, .. }
        ));
        assert!(e.to_string().contains("link type 113"), "{e}");
    }

    #[test]
    fn refuses_garbage_and_pcapng() {
        let e = read_pcap_from(Cursor::new(b"hello world, not a pcap".to_vec()), "g").unwrap_err();
        assert!(matches!(e, PortError::Pcap { .. }), "{e}");
        let e = read_pcap_from(Cursor::new(Vec::new()), "empty").unwrap_err();
        assert!(matches!(e, PortError::Pcap { .. }), "{e}");

        let dir = std::env::temp_dir().join(format!("netdev-pcapng-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.pcapng");
        let mut ng = PCAPNG_MAGIC.to_vec();
        ng.extend([0u8; 40]);
        std::fs::write(&path, ng).unwrap();
        let e = PcapReaderPort::open("ng", &path).unwrap_err();
        assert!(e.to_string().contains("pcapng"), "{e}");
        let e = read_pcap(dir.join("missing.pcap")).unwrap_err();
        assert!(matches!(e, PortError::Io { .. }));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn truncated_record_is_counted_error_not_panic() {
        let mut f = header(0xA1B2_C3D4, 1, false);
        f.extend(record(&[5; 60], 60, false));
        let mut bad = record(&[6; 60], 60, false);
        bad.truncate(40);
        f.extend(bad);
        let e = read_pcap_from(Cursor::new(f.clone()), "t").unwrap_err();
        assert!(e.to_string().contains("t: record 2: "), "{e}");
        // Streaming: the good record is handed over before the error comes back.
        let mut seen = Vec::new();
        let e = read_pcap_each_from(Cursor::new(f.clone()), "t", |i, fr| {
            seen.push((i, fr.to_vec()));
            Ok::<(), PortError>(())
        })
        .unwrap_err();
        assert_eq!(seen, vec![(1, vec![5; 60])]);
        assert!(e.to_string().contains("record 2"), "{e}");
        // A callback error stops the reading.
        let r = read_pcap_each_from(Cursor::new(f.clone()), "t", |_, _| {
            Err(PortError::Config("stop".into()))
        });
        assert!(matches!(r, Err(PortError::Config(_))));

        let mut port = PcapReaderPort::from_reader("t", Cursor::new(f), "t").unwrap();
        let mut pool = PacketPool::new(8);
        let mut b = Batch::new();
        assert_eq!(port.rx_burst(&mut pool, &mut b), 1);
        assert!(port.rx_eof());
        assert_eq!(port.stats().rx_errors, 1);
        assert!(
            port.error().unwrap().contains("record 2"),
            "{:?}",
            port.error()
        );
        assert_eq!(port.rx_burst(&mut pool, &mut b), 0);
        b.free_all(&mut pool);
    }

    #[test]
    fn oversize_records_are_counted_drops() {
        let mut fs = vec![vec![1u8; 60], vec![2u8; MAX_FRAME + 1], vec![3u8; 9000]];
        fs.push(vec![4u8; MAX_FRAME]);
        let buf = write_pcap_to(Vec::new(), &fs).unwrap();
        let mut port = PcapReaderPort::from_reader("t", Cursor::new(buf), "t").unwrap();
        let mut pool = PacketPool::new(8);
        let mut b = Batch::new();
        assert_eq!(port.rx_burst(&mut pool, &mut b), 2);
        let s = port.stats();
        assert_eq!((s.rx_packets, s.rx_too_large, s.rx_dropped), (2, 2, 2));
        assert!(s.is_consistent());
        assert_eq!(b.as_slice()[1].data(), &fs[3][..]);
        b.free_all(&mut pool);
    }

    #[test]
    fn write_errors_are_counted() {
        struct Failing(usize);
        impl Write for Failing {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                if self.0 < buf.len() {
                    return Err(std::io::Error::other("disk full"));
                }
                self.0 -= buf.len();
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        // room for the header and one 60-byte record
        let mut port = PcapWriterPort::from_writer("f", Failing(24 + 16 + 60)).unwrap();
        let mut pool = PacketPool::new(4);
        let mut b = Batch::new();
        for _ in 0..3 {
            let mut p = pool.alloc().unwrap();
            p.set_data(&[0; 60]).unwrap();
            b.push(p).unwrap();
        }
        assert_eq!(port.tx_burst(&mut b, &mut pool), 1);
        assert!(b.is_empty());
        let s = port.stats();
        assert_eq!((s.tx_packets, s.tx_errors, s.tx_dropped), (1, 2, 2));
        assert!(s.is_consistent());
        assert!(port.error().unwrap().contains("disk full"));
        assert_eq!(pool.available(), 4);
    }
}
