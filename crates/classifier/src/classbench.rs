//! ClassBench rule sets and header traces: parsing, expansion to value/mask rules, and a
//! trivially correct range-checking reference scan.
//!
//! Rule line (first line = highest priority):
//! `@src/len<TAB>dst/len<TAB>sp_lo : sp_hi<TAB>dp_lo : dp_hi<TAB>0xPP/0xMM<TAB>0xFLAGS/0xMASK`.
//! Trace line: `src dst sport dport proto flags ruleidx`, decimal, whitespace-separated.
//!
//! Mapping onto a [`FlowKey`] (5-tuple only): `dl_type = 0x0800` (implied), source and
//! destination prefixes → `nw_src`/`nw_dst` prefix masks, protocol value/mask → `nw_proto`,
//! port ranges → `tp_src`/`tp_dst` value/mask pairs (the minimal prefix cover of each range;
//! a rule becomes the product of both covers). **The flags field is parsed for syntax and
//! ignored** (not mapped to `tcp_flags`), and so is the last two trace columns.
//!
//! Invariants: [`range_to_prefixes`] covers every value of the range exactly once and nothing
//! outside it (tested exhaustively on small ranges and randomly on 16-bit ones); parsing
//! never panics, it reports the 1-based line number of the first bad line.

use std::fmt;
use std::io::Read;
use std::path::Path;

use flow::{FieldId, FlowKey, FlowMask};

/// One ClassBench rule (5-tuple part).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CbRule {
    /// Source address (host order), already masked to `src_len`.
    pub src: u32,
    /// Source prefix length (0..=32).
    pub src_len: u8,
    /// Destination address, already masked.
    pub dst: u32,
    /// Destination prefix length.
    pub dst_len: u8,
    /// Source port range, inclusive.
    pub sport: (u16, u16),
    /// Destination port range, inclusive.
    pub dport: (u16, u16),
    /// Protocol value (already masked).
    pub proto: u8,
    /// Protocol mask.
    pub proto_mask: u8,
}

/// One trace header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CbHeader {
    /// Source address.
    pub src: u32,
    /// Destination address.
    pub dst: u32,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Protocol.
    pub proto: u8,
}

/// A parse or I/O error, with the 1-based line number where it applies.
#[derive(Debug)]
pub enum Error {
    /// Reading the file failed.
    Io(std::io::Error),
    /// A line could not be parsed.
    Parse {
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        msg: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::Parse { line, msg } => write!(f, "line {line}: {msg}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

fn perr(line: usize, msg: impl Into<String>) -> Error {
    Error::Parse {
        line,
        msg: msg.into(),
    }
}

fn prefix_mask32(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

impl CbRule {
    /// Whether the header matches this rule (direct range checks).
    #[inline]
    pub fn matches(&self, h: &CbHeader) -> bool {
        (h.src & prefix_mask32(self.src_len)) == self.src
            && (h.dst & prefix_mask32(self.dst_len)) == self.dst
            && (self.sport.0..=self.sport.1).contains(&h.sport)
            && (self.dport.0..=self.dport.1).contains(&h.dport)
            && (h.proto & self.proto_mask) == self.proto
    }

    /// The value/mask rules this rule expands to (port ranges → prefix covers, product).
    pub fn expand(&self) -> Vec<(FlowKey, FlowMask)> {
        let mut base_k = FlowKey::ZERO;
        let mut base_m = FlowMask::CATCHALL;
        FieldId::DlType.set(&mut base_k, 0x0800);
        FieldId::DlType.unwildcard(&mut base_m);
        FieldId::NwSrc.set(&mut base_k, u128::from(self.src));
        FieldId::NwSrc.set_mask(&mut base_m, u128::from(prefix_mask32(self.src_len)));
        FieldId::NwDst.set(&mut base_k, u128::from(self.dst));
        FieldId::NwDst.set_mask(&mut base_m, u128::from(prefix_mask32(self.dst_len)));
        FieldId::NwProto.set(&mut base_k, u128::from(self.proto));
        FieldId::NwProto.set_mask(&mut base_m, u128::from(self.proto_mask));
        let sp = range_to_prefixes(self.sport.0, self.sport.1);
        let dp = range_to_prefixes(self.dport.0, self.dport.1);
        let mut out = Vec::with_capacity(sp.len() * dp.len());
        for &(sv, sm) in &sp {
            for &(dv, dm) in &dp {
                let mut k = base_k;
                let mut m = base_m;
                FieldId::TpSrc.set(&mut k, u128::from(sv));
                FieldId::TpSrc.set_mask(&mut m, u128::from(sm));
                FieldId::TpDst.set(&mut k, u128::from(dv));
                FieldId::TpDst.set_mask(&mut m, u128::from(dm));
                out.push((k.masked(&m), m));
            }
        }
        out
    }
}

impl CbHeader {
    /// The flow key of this header (IPv4, 5-tuple; everything else zero).
    pub fn key(&self) -> FlowKey {
        let mut k = FlowKey::ZERO;
        FieldId::DlType.set(&mut k, 0x0800);
        FieldId::NwSrc.set(&mut k, u128::from(self.src));
        FieldId::NwDst.set(&mut k, u128::from(self.dst));
        FieldId::NwProto.set(&mut k, u128::from(self.proto));
        FieldId::TpSrc.set(&mut k, u128::from(self.sport));
        FieldId::TpDst.set(&mut k, u128::from(self.dport));
        k
    }
}

/// The minimal set of (value, mask) prefixes whose union is exactly `lo..=hi` (empty if
/// `lo > hi`).
pub fn range_to_prefixes(lo: u16, hi: u16) -> Vec<(u16, u16)> {
    let mut out = Vec::new();
    if lo > hi {
        return out;
    }
    let (mut lo, hi) = (u32::from(lo), u32::from(hi));
    while lo <= hi {
        // Largest aligned block starting at lo that fits.
        let mut size = if lo == 0 {
            1u32 << 16
        } else {
            1u32 << lo.trailing_zeros()
        };
        while lo + size - 1 > hi {
            size >>= 1;
        }
        let mask = (!(size - 1)) & 0xffff;
        out.push((lo as u16, mask as u16));
        lo += size;
    }
    out
}

/// Reads a whole file, transparently gunzipping it when it starts with the gzip magic.
pub fn read_text(path: &Path) -> Result<String, Error> {
    let raw = std::fs::read(path)?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&raw[..]).read_to_end(&mut out)?;
        out
    } else {
        raw
    };
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not UTF-8: {e}")).into()
    })
}

fn parse_prefix(s: &str, line: usize) -> Result<(u32, u8), Error> {
    let (addr, len) = s
        .split_once('/')
        .ok_or_else(|| perr(line, format!("prefix {s:?} lacks /len")))?;
    let a: std::net::Ipv4Addr = addr
        .trim()
        .parse()
        .map_err(|_| perr(line, format!("bad IPv4 address {addr:?}")))?;
    let len: u8 = len
        .trim()
        .parse()
        .ok()
        .filter(|&l| l <= 32)
        .ok_or_else(|| perr(line, format!("bad prefix length {len:?}")))?;
    Ok((u32::from(a) & prefix_mask32(len), len))
}

fn parse_range(s: &str, line: usize) -> Result<(u16, u16), Error> {
    let (lo, hi) = s
        .split_once(':')
        .ok_or_else(|| perr(line, format!("port range {s:?} lacks ':'")))?;
    let p = |x: &str| {
        x.trim()
            .parse::<u16>()
            .map_err(|_| perr(line, format!("bad port {x:?}")))
    };
    let (lo, hi) = (p(lo)?, p(hi)?);
    if lo > hi {
        return Err(perr(line, format!("empty port range {lo} : {hi}")));
    }
    Ok((lo, hi))
}

fn parse_hex_pair(s: &str, line: usize, bits: u32) -> Result<(u32, u32), Error> {
    let (v, m) = s
        .split_once('/')
        .ok_or_else(|| perr(line, format!("value/mask {s:?} lacks '/'")))?;
    let h = |x: &str| {
        let x = x.trim();
        let digits = x
            .strip_prefix("0x")
            .or_else(|| x.strip_prefix("0X"))
            .ok_or_else(|| perr(line, format!("{x:?} is not 0x-hex")))?;
        u32::from_str_radix(digits, 16)
            .ok()
            .filter(|&v| bits >= 32 || v >> bits == 0)
            .ok_or_else(|| perr(line, format!("bad {bits}-bit hex {x:?}")))
    };
    Ok((h(v)?, h(m)?))
}

/// Parses a rule set (one rule per line, first line highest priority; blank lines skipped).
pub fn parse_rules(text: &str) -> Result<Vec<CbRule>, Error> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = n + 1;
        let l = raw.trim();
        if l.is_empty() {
            continue;
        }
        let l = l
            .strip_prefix('@')
            .ok_or_else(|| perr(line, "rule does not start with '@'"))?;
        let cols: Vec<&str> = l
            .split('\t')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        if cols.len() != 6 {
            return Err(perr(
                line,
                format!("expected 6 tab-separated fields, found {}", cols.len()),
            ));
        }
        let (src, src_len) = parse_prefix(cols[0], line)?;
        let (dst, dst_len) = parse_prefix(cols[1], line)?;
        let sport = parse_range(cols[2], line)?;
        let dport = parse_range(cols[3], line)?;
        let (pv, pm) = parse_hex_pair(cols[4], line, 8)?;
        // Flags: checked for syntax, then ignored (5-tuple only).
        parse_hex_pair(cols[5], line, 16)?;
        out.push(CbRule {
            src,
            src_len,
            dst,
            dst_len,
            sport,
            dport,
            proto: (pv & pm) as u8,
            proto_mask: pm as u8,
        });
    }
    Ok(out)
}

/// Parses a trace (`src dst sport dport proto flags ruleidx` per line; the last two columns
/// are optional and ignored).
pub fn parse_trace(text: &str) -> Result<Vec<CbHeader>, Error> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = n + 1;
        let mut it = raw.split_whitespace();
        let Some(first) = it.next() else { continue };
        let num = |s: Option<&str>, what: &str, max: u64| -> Result<u64, Error> {
            let s = s.ok_or_else(|| perr(line, format!("missing {what}")))?;
            s.parse::<u64>()
                .ok()
                .filter(|&v| v <= max)
                .ok_or_else(|| perr(line, format!("bad {what} {s:?}")))
        };
        let src = num(Some(first), "source address", u64::from(u32::MAX))? as u32;
        let dst = num(it.next(), "destination address", u64::from(u32::MAX))? as u32;
        let sport = num(it.next(), "source port", 0xffff)? as u16;
        let dport = num(it.next(), "destination port", 0xffff)? as u16;
        let proto = num(it.next(), "protocol", 0xff)? as u8;
        out.push(CbHeader {
            src,
            dst,
            sport,
            dport,
            proto,
        });
    }
    Ok(out)
}

/// Reads and parses a rule file (gzip or plain).
pub fn read_rules(path: &Path) -> Result<Vec<CbRule>, Error> {
    parse_rules(&read_text(path)?)
}

/// Reads and parses a trace file (gzip or plain).
pub fn read_trace(path: &Path) -> Result<Vec<CbHeader>, Error> {
    parse_trace(&read_text(path)?)
}

/// The reference: original rules scanned in line order with direct prefix and range checks,
/// laid out column-wise and checked 64 rules at a time so a 100k-rule scan stays tolerable.
#[derive(Debug, Clone, Default)]
pub struct RangeScan {
    src: Vec<u32>,
    src_mask: Vec<u32>,
    dst: Vec<u32>,
    dst_mask: Vec<u32>,
    sp_lo: Vec<u16>,
    sp_hi: Vec<u16>,
    dp_lo: Vec<u16>,
    dp_hi: Vec<u16>,
    proto: Vec<u8>,
    proto_mask: Vec<u8>,
}

impl RangeScan {
    /// Builds the scan over `rules` (in priority order).
    pub fn new(rules: &[CbRule]) -> RangeScan {
        let mut s = RangeScan::default();
        for r in rules {
            s.src.push(r.src);
            s.src_mask.push(prefix_mask32(r.src_len));
            s.dst.push(r.dst);
            s.dst_mask.push(prefix_mask32(r.dst_len));
            s.sp_lo.push(r.sport.0);
            s.sp_hi.push(r.sport.1);
            s.dp_lo.push(r.dport.0);
            s.dp_hi.push(r.dport.1);
            s.proto.push(r.proto);
            s.proto_mask.push(r.proto_mask);
        }
        s
    }

    /// Index of the first rule matching `h`.
    pub fn first_match(&self, h: &CbHeader) -> Option<usize> {
        const CHUNK: usize = 64;
        let n = self.src.len();
        let mut base = 0;
        while base < n {
            let end = (base + CHUNK).min(n);
            let mut bits = 0u64;
            for i in base..end {
                let ok = (h.src & self.src_mask[i]) == self.src[i]
                    && (h.dst & self.dst_mask[i]) == self.dst[i]
                    && h.sport >= self.sp_lo[i]
                    && h.sport <= self.sp_hi[i]
                    && h.dport >= self.dp_lo[i]
                    && h.dport <= self.dp_hi[i]
                    && (h.proto & self.proto_mask[i]) == self.proto[i];
                bits |= u64::from(ok) << (i - base);
            }
            if bits != 0 {
                return Some(base + bits.trailing_zeros() as usize);
            }
            base = end;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn covered(lo: u16, hi: u16) {
        let ps = range_to_prefixes(lo, hi);
        assert!(ps.len() <= 30, "{lo}..{hi}: {} prefixes", ps.len());
        for v in 0..=u16::MAX {
            let n = ps.iter().filter(|&&(pv, pm)| v & pm == pv).count();
            let want = usize::from((lo..=hi).contains(&v));
            assert_eq!(n, want, "value {v} of {lo}..={hi} covered {n} times");
        }
        for &(pv, pm) in &ps {
            assert_eq!(pv & !pm, 0, "value has bits outside its mask");
            assert_eq!(
                pm.leading_ones() + pm.trailing_zeros(),
                16,
                "mask not a prefix"
            );
        }
    }

    #[test]
    fn range_expansion_edges() {
        for (lo, hi) in [
            (0, 65535),
            (0, 0),
            (65535, 65535),
            (1, 65534),
            (1024, 65535),
            (0, 1023),
            (80, 80),
            (1, 1),
            (32767, 32768),
        ] {
            covered(lo, hi);
        }
        assert_eq!(range_to_prefixes(0, 65535), vec![(0, 0)]);
        assert_eq!(range_to_prefixes(1, 65534).len(), 30);
        assert!(range_to_prefixes(5, 4).is_empty());
    }

    #[test]
    fn range_expansion_small_exhaustive() {
        // Every range inside 0..64 (and near the top of the space).
        for lo in 0u16..64 {
            for hi in lo..64 {
                let ps = range_to_prefixes(lo, hi);
                for v in 0u16..128 {
                    let n = ps.iter().filter(|&&(pv, pm)| v & pm == pv).count();
                    assert_eq!(n, usize::from((lo..=hi).contains(&v)));
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn range_expansion_random(a: u16, b: u16) {
            covered(a.min(b), a.max(b));
        }
    }

    const RULES: &str = "@88.7.198.56/32\t237.180.250.233/32\t0 : 65535\t1707 : 1707\t0x06/0xFF\t0x1000/0x1000\t\n\
        @10.0.0.0/8\t0.0.0.0/0\t1024 : 65535\t0 : 1023\t0x00/0x00\t0x0000/0x0000\t\n";

    #[test]
    fn parses_rules_and_expands() {
        let rs = parse_rules(RULES).unwrap();
        assert_eq!(rs.len(), 2);
        assert_eq!(rs[0].src, 0x5807_c638);
        assert_eq!(rs[0].dst_len, 32);
        assert_eq!(rs[0].dport, (1707, 1707));
        assert_eq!((rs[0].proto, rs[0].proto_mask), (6, 0xff));
        assert_eq!(rs[1].src, 0x0a00_0000);
        assert_eq!(rs[0].expand().len(), 1);
        assert_eq!(rs[1].expand().len(), 6);
        let h = CbHeader {
            src: 0x0a01_0203,
            dst: 7,
            sport: 5000,
            dport: 22,
            proto: 17,
        };
        assert!(rs[1].matches(&h) && !rs[0].matches(&h));
        let k = h.key();
        let n = rs[1]
            .expand()
            .iter()
            .filter(|(rk, rm)| k.eq_masked(rk, rm))
            .count();
        assert_eq!(n, 1);
        assert_eq!(RangeScan::new(&rs).first_match(&h), Some(1));
    }

    #[test]
    fn bad_lines_report_line_numbers() {
        for (text, line) in [
            (
                "@1.2.3.4/32\t1.2.3.4/32\t0 : 1\t0 : 1\t0x06/0xFF\t0x0/0x0\n@x",
                2,
            ),
            (
                "@1.2.3.4/33\t1.2.3.4/32\t0 : 1\t0 : 1\t0x06/0xFF\t0x0/0x0",
                1,
            ),
            (
                "\n@1.2.3.4/3\t1.2.3.4/32\t5 : 1\t0 : 1\t0x06/0xFF\t0x0/0x0",
                2,
            ),
            (
                "@1.2.3.4/3\t1.2.3.4/32\t0 : 1\t0 : 70000\t0x06/0xFF\t0x0/0x0",
                1,
            ),
            (
                "@1.2.3.4/3\t1.2.3.4/32\t0 : 1\t0 : 7\t0x106/0xFF\t0x0/0x0",
                1,
            ),
            ("1.2.3.4/3\t1.2.3.4/32\t0 : 1\t0 : 7\t0x6/0xFF\t0x0/0x0", 1),
        ] {
            match parse_rules(text) {
                Err(Error::Parse { line: l, .. }) => assert_eq!(l, line, "{text:?}"),
                other => panic!("{text:?} gave {other:?}"),
            }
        }
        match parse_trace("1 2 3 4 6 0 0\n1 2 3 70000 6 0 0\n") {
            Err(Error::Parse { line: 2, .. }) => {}
            other => panic!("{other:?}"),
        }
        match parse_trace("1 2 3\n") {
            Err(Error::Parse { line: 1, .. }) => {}
            other => panic!("{other:?}"),
        }
        let t = parse_trace("3973340664\t346962228\t65535\t32200\t6\t4294967295\t349\n").unwrap();
        assert_eq!(t[0].src, 3_973_340_664);
        assert_eq!(t[0].dport, 32200);
    }

    fn small_rule() -> impl Strategy<Value = CbRule> {
        // Few distinct addresses and ports so that rules overlap and headers hit them.
        let addr = prop_oneof![Just(0x0a00_0000u32), Just(0x0a01_0200), Just(0xc0a8_0001)];
        let port = prop_oneof![
            Just(0u16),
            Just(79),
            Just(80),
            Just(1023),
            Just(1024),
            any::<u16>()
        ];
        (
            (addr.clone(), 0u8..=32, addr, 0u8..=32),
            (port.clone(), port.clone(), port.clone(), port),
            prop_oneof![Just((0u8, 0u8)), Just((6, 0xff)), Just((17, 0xff))],
        )
            .prop_map(|((s, sl, d, dl), (a, b, c, e), (p, pm))| CbRule {
                src: s & prefix_mask32(sl),
                src_len: sl,
                dst: d & prefix_mask32(dl),
                dst_len: dl,
                sport: (a.min(b), a.max(b)),
                dport: (c.min(e), c.max(e)),
                proto: p,
                proto_mask: pm,
            })
    }

    fn small_header() -> impl Strategy<Value = CbHeader> {
        let addr = prop_oneof![
            Just(0x0a00_0000u32),
            Just(0x0a01_0203),
            Just(0xc0a8_0001),
            any::<u32>()
        ];
        let port = prop_oneof![Just(0u16), Just(79), Just(80), Just(1024), any::<u16>()];
        (
            addr.clone(),
            addr,
            port.clone(),
            port,
            prop_oneof![Just(6u8), Just(17), any::<u8>()],
        )
            .prop_map(|(src, dst, sport, dport, proto)| CbHeader {
                src,
                dst,
                sport,
                dport,
                proto,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The range scan, the linear classifier over the expanded rules and the OpenFlow
        /// table over the expanded rules all give the same first-matching line.
        #[test]
        fn expansion_agrees_with_range_checks(
            rules in prop::collection::vec(small_rule(), 0..24),
            headers in prop::collection::vec(small_header(), 1..40),
        ) {
            let scan = RangeScan::new(&rules);
            let mut lin = crate::LinearClassifier::new();
            let mut of = crate::OfTable::new();
            let n = rules.len() as u32;
            for (line, r) in rules.iter().enumerate() {
                for (k, m) in r.expand() {
                    lin.insert(n - line as u32, &k, &m, line);
                    of.insert(n - line as u32, &k, &m, line);
                }
            }
            for h in &headers {
                let want = rules.iter().position(|r| r.matches(h));
                prop_assert_eq!(scan.first_match(h), want);
                let k = h.key();
                prop_assert_eq!(lin.lookup(&k).map(|r| r.value), want);
                prop_assert_eq!(of.lookup(&k).map(|r| r.value), want);
            }
        }

        /// Parsing never panics on arbitrary text.
        #[test]
        fn parsers_never_panic(s in "[@0-9./:\\t x\\n]{0,120}") {
            let _ = parse_rules(&s);
            let _ = parse_trace(&s);
        }
    }
}
