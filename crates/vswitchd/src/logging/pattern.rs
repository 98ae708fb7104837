//! OVS's log line patterns (`vlog/set PATTERN:destination:pattern`, `vlog/list-pattern`).
//!
//! Escapes, as in `ovs-vswitchd(8)`: `%A` program name, `%B` syslog priority, `%c` module,
//! `%d`/`%D` time as `%Y-%m-%d %H:%M:%S.###`, `%d{FMT}`/`%D{FMT}` time in a strftime
//! subset (`%Y %y %m %d %e %H %M %S %T %F %b %h %j %Z %s %%`; `###`… after the seconds: that
//! many digits of the fraction), `%E` host name, `%m` message, `%N` message number, `%n` new
//! line, `%p` level, `%P` pid, `%r` milliseconds since start, `%t` thread name (`main` for
//! the main thread), `%T` `(thread)` unless main, `%%`. A width (`%5N`), left justification
//! (`%-10c`) and zero padding (`%05N`) apply to any escape. Unknown escapes are copied.
//! Difference from OVS: `%d` (local time in OVS) is UTC here, as `%D` is.

use super::Level;
use std::fmt::Write;
use std::time::{SystemTime, UNIX_EPOCH};

/// Everything a pattern may show about one message.
#[derive(Debug)]
pub struct Record<'a> {
    /// Program name (`%A`).
    pub program: &'a str,
    /// Host name (`%E`).
    pub hostname: &'a str,
    /// Syslog priority, facility * 8 + severity (`%B`).
    pub priority: u32,
    /// Module (`%c`).
    pub module: &'a str,
    /// Level (`%p`).
    pub level: Level,
    /// The message (`%m`).
    pub message: &'a str,
    /// Message number (`%N`).
    pub seq: u64,
    /// Process id (`%P`).
    pub pid: u32,
    /// Milliseconds since start (`%r`).
    pub uptime_ms: u64,
    /// The logging thread's name, `None` if unnamed.
    pub thread: Option<&'a str>,
    /// When.
    pub time: SystemTime,
}

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Lit(String),
    Spec {
        left: bool,
        zero: bool,
        width: usize,
        c: char,
        time_fmt: Option<String>,
    },
}

/// A parsed pattern.
#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    src: String,
    pieces: Vec<Piece>,
}

/// The default format of console lines.
pub const CONSOLE_DEFAULT: &str = "%D{%Y-%m-%dT%H:%M:%SZ}|%05N|%c%T|%p|%m";
/// The default format of file lines.
pub const FILE_DEFAULT: &str = "%D{%Y-%m-%dT%H:%M:%S.###Z}|%05N|%c%T|%p|%m";
/// The default format of syslog messages (after [`SYSLOG_PREFIX`]).
pub const SYSLOG_DEFAULT: &str = "ovs|%05N|%c%T|%p|%m";
/// What precedes the format in a syslog datagram (not settable, as in OVS).
pub const SYSLOG_PREFIX: &str = "<%B> %D{%h %e %T} %E %A:";

impl Pattern {
    /// Parses `src` (never fails: what is not an escape is literal text).
    pub fn parse(src: &str) -> Pattern {
        let mut pieces = Vec::new();
        let mut lit = String::new();
        let mut it = src.chars().peekable();
        while let Some(ch) = it.next() {
            if ch != '%' {
                lit.push(ch);
                continue;
            }
            let mut left = false;
            let mut zero = false;
            if it.peek() == Some(&'-') {
                left = true;
                it.next();
            }
            if it.peek() == Some(&'0') {
                zero = true;
                it.next();
            }
            let mut width = 0usize;
            while let Some(d) = it.peek().and_then(|c| c.to_digit(10)) {
                width = width
                    .saturating_mul(10)
                    .saturating_add(d as usize)
                    .min(1024);
                it.next();
            }
            let Some(c) = it.next() else {
                lit.push('%');
                break;
            };
            let mut time_fmt = None;
            if matches!(c, 'd' | 'D') && it.peek() == Some(&'{') {
                it.next();
                let mut f = String::new();
                for x in it.by_ref() {
                    if x == '}' {
                        break;
                    }
                    f.push(x);
                }
                time_fmt = Some(f);
            }
            if !lit.is_empty() {
                pieces.push(Piece::Lit(std::mem::take(&mut lit)));
            }
            pieces.push(Piece::Spec {
                left,
                zero,
                width,
                c,
                time_fmt,
            });
        }
        if !lit.is_empty() {
            pieces.push(Piece::Lit(lit));
        }
        Pattern {
            src: src.to_string(),
            pieces,
        }
    }

    /// The pattern's text.
    pub fn as_str(&self) -> &str {
        &self.src
    }

    /// Appends `r` formatted by this pattern to `out`.
    pub fn render(&self, r: &Record<'_>, out: &mut String) {
        let mut field = String::new();
        for p in &self.pieces {
            let (left, zero, width, c, time_fmt) = match p {
                Piece::Lit(s) => {
                    out.push_str(s);
                    continue;
                }
                Piece::Spec {
                    left,
                    zero,
                    width,
                    c,
                    time_fmt,
                } => (*left, *zero, *width, *c, time_fmt),
            };
            field.clear();
            match c {
                'A' => field.push_str(r.program),
                'B' => {
                    let _ = write!(field, "{}", r.priority);
                }
                'c' => field.push_str(r.module),
                'd' | 'D' => {
                    strftime(
                        time_fmt.as_deref().unwrap_or("%Y-%m-%d %H:%M:%S.###"),
                        r.time,
                        &mut field,
                    );
                }
                'E' => field.push_str(r.hostname),
                'm' => field.push_str(r.message),
                'N' => {
                    let _ = write!(field, "{}", r.seq);
                }
                'n' => field.push('\n'),
                'p' => field.push_str(r.level.name()),
                'P' => {
                    let _ = write!(field, "{}", r.pid);
                }
                'r' => {
                    let _ = write!(field, "{}", r.uptime_ms);
                }
                't' => field.push_str(r.thread.unwrap_or("main")),
                'T' => {
                    if let Some(t) = r.thread.filter(|t| *t != "main") {
                        let _ = write!(field, "({t})");
                    }
                }
                '%' => field.push('%'),
                other => {
                    field.push('%');
                    field.push(other);
                }
            }
            let n = field.chars().count();
            if n >= width {
                out.push_str(&field);
            } else if left {
                out.push_str(&field);
                out.extend(std::iter::repeat_n(' ', width - n));
            } else {
                let pad = if zero { '0' } else { ' ' };
                out.extend(std::iter::repeat_n(pad, width - n));
                out.push_str(&field);
            }
        }
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Days since 1970-01-01 to (year, month 1-12, day 1-31) (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// (year, month, day) to days since 1970-01-01.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Formats `t` (UTC) by the strftime subset in the module doc.
pub fn strftime(fmt: &str, t: SystemTime, out: &mut String) {
    let (secs, nanos) = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(_) => (0, 0),
    };
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, s) = (sod / 3600, sod / 60 % 60, sod % 60);
    let yday = days - days_from_civil(y, 1, 1) + 1;
    let chars: Vec<char> = fmt.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '#' {
            let mut n = 0;
            while i < chars.len() && chars[i] == '#' {
                n += 1;
                i += 1;
            }
            let digits = format!("{nanos:09}");
            out.push_str(&digits[..n.min(9)]);
            out.extend(std::iter::repeat_n('0', n.saturating_sub(9)));
            continue;
        }
        if c != '%' || i + 1 >= chars.len() {
            out.push(c);
            i += 1;
            continue;
        }
        let spec = chars[i + 1];
        i += 2;
        let _ = match spec {
            'Y' => write!(out, "{y}"),
            'y' => write!(out, "{:02}", y.rem_euclid(100)),
            'm' => write!(out, "{mo:02}"),
            'd' => write!(out, "{d:02}"),
            'e' => write!(out, "{d:2}"),
            'H' => write!(out, "{h:02}"),
            'M' => write!(out, "{mi:02}"),
            'S' => write!(out, "{s:02}"),
            'T' => write!(out, "{h:02}:{mi:02}:{s:02}"),
            'F' => write!(out, "{y}-{mo:02}-{d:02}"),
            'b' | 'h' => write!(out, "{}", MONTHS[(mo - 1) as usize]),
            'j' => write!(out, "{yday:03}"),
            'Z' => write!(out, "UTC"),
            's' => write!(out, "{secs}"),
            '%' => write!(out, "%"),
            other => write!(out, "%{other}"),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rec(time: SystemTime) -> Record<'static> {
        Record {
            program: "ovs-vswitchd",
            hostname: "host",
            priority: 30,
            module: "bridge",
            level: Level::Info,
            message: "hello",
            seq: 7,
            pid: 42,
            uptime_ms: 1234,
            thread: Some("handler1"),
            time,
        }
    }

    fn render(p: &str, r: &Record<'_>) -> String {
        let mut s = String::new();
        Pattern::parse(p).render(r, &mut s);
        s
    }

    #[test]
    fn default_patterns() {
        // 2026-11-26T00:47:12.345Z
        let t = UNIX_EPOCH + Duration::from_millis(1_795_654_032_345);
        let r = rec(t);
        assert_eq!(
            render(FILE_DEFAULT, &r),
            "2026-11-26T00:47:12.345Z|00007|bridge(handler1)|INFO|hello"
        );
        assert_eq!(
            render(CONSOLE_DEFAULT, &r),
            "2026-11-26T00:47:12Z|00007|bridge(handler1)|INFO|hello"
        );
        assert_eq!(
            render(SYSLOG_PREFIX, &r),
            "<30> Nov 26 00:47:12 host ovs-vswitchd:"
        );
        let r = Record {
            thread: Some("main"),
            ..rec(UNIX_EPOCH)
        };
        assert_eq!(
            render("%-8c|%5p|%05N|%t|%T|%P|%r|%%|%q|%d|%D{%j %F %y}|%", &r),
            "bridge  | INFO|00007|main||42|1234|%|%q|1970-01-01 00:00:00.000|001 1970-01-01 70|%"
        );
    }

    #[test]
    fn dates() {
        for (days, want) in [
            (0, (1970, 1, 1)),
            (59, (1970, 3, 1)),
            (11_016, (2000, 2, 29)),
            (-1, (1969, 12, 31)),
        ] {
            assert_eq!(civil_from_days(days), want);
        }
        let mut s = String::new();
        strftime(
            "%j",
            UNIX_EPOCH + Duration::from_secs(11_016 * 86_400),
            &mut s,
        );
        assert_eq!(s, "060");
    }
}
