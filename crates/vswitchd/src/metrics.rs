//! Prometheus metrics: the text exposition format over a loopback HTTP endpoint.
//!
//! The daemon's counters already live where the packet path keeps them (PMD snapshots,
//! port counters, upcall and revalidator counters); a scrape reads them at that moment
//! through a [`Collect`] callback, so nothing is registered or updated per packet. The
//! text format (`# HELP`, `# TYPE`, `name{label="v"} value`) is three kinds of line, so it is
//! written here rather than through a metrics crate whose registry would hold a second
//! copy of every counter. The HTTP side answers `GET /metrics` (and `/`) with that text and
//! anything else with 404; a request is read with a size and time bound, one at a time.
//!
//! The endpoint binds only where asked (`--metrics=127.0.0.1:PORT`); a non-loopback
//! address is refused unless explicitly allowed, since the counters describe the network.

use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// A metric's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (reset on restart or `pmd-stats-clear`).
    Counter,
    /// Goes up and down.
    Gauge,
}

/// One metric family: a name, help and samples with labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// Name (`flowswitch_pmd_packets_received_total`).
    pub name: String,
    /// One line of help.
    pub help: String,
    /// Type.
    pub kind: Kind,
    /// Samples: labels and value.
    pub samples: Vec<(Vec<(String, String)>, f64)>,
}

impl Family {
    /// An empty family.
    pub fn new(name: &str, help: &str, kind: Kind) -> Family {
        Family {
            name: name.to_owned(),
            help: help.to_owned(),
            kind,
            samples: Vec::new(),
        }
    }

    /// Adds a sample.
    pub fn sample(&mut self, labels: &[(&str, &str)], value: f64) -> &mut Family {
        self.samples.push((
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            value,
        ));
        self
    }
}

/// What a scrape reads.
pub type Collect = Arc<dyn Fn() -> Vec<Family> + Send + Sync>;

fn escape_label(v: &str) -> String {
    let mut o = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// The families in Prometheus's text exposition format (version 0.0.4).
pub fn render(families: &[Family]) -> String {
    let mut o = String::new();
    for f in families {
        let kind = match f.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        let _ = writeln!(o, "# HELP {} {}", f.name, escape_help(&f.help));
        let _ = writeln!(o, "# TYPE {} {kind}", f.name);
        for (labels, v) in &f.samples {
            o.push_str(&f.name);
            if !labels.is_empty() {
                o.push('{');
                for (i, (k, val)) in labels.iter().enumerate() {
                    if i > 0 {
                        o.push(',');
                    }
                    let _ = write!(o, "{k}=\"{}\"", escape_label(val));
                }
                o.push('}');
            }
            if v.fract() == 0.0 && v.abs() < 1e15 {
                let _ = writeln!(o, " {}", *v as i64);
            } else {
                let _ = writeln!(o, " {v}");
            }
        }
    }
    o
}

/// Largest request head read.
const MAX_REQUEST: usize = 8192;

/// The HTTP endpoint.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl MetricsServer {
    /// Serves `collect` at `addr` (loopback only unless `allow_remote`).
    pub fn bind(
        addr: SocketAddr,
        allow_remote: bool,
        collect: Collect,
    ) -> io::Result<MetricsServer> {
        if !addr.ip().is_loopback() && !allow_remote {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("metrics endpoint {addr} is not a loopback address"),
            ));
        }
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || serve(listener, &stop2, &collect))?;
        Ok(MetricsServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving and joins the thread.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}

fn serve(listener: TcpListener, stop: &AtomicBool, collect: &Collect) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((s, _)) => {
                if let Err(e) = answer(s, collect) {
                    tracing::debug!(target: "metrics", "metrics request: {e}");
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                tracing::warn!(target: "metrics", "metrics accept: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn answer(mut s: TcpStream, collect: &Collect) -> io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > MAX_REQUEST {
            return reply(
                &mut s,
                "431 Request Header Fields Too Large",
                "text/plain",
                "",
            );
        }
    }
    let head = String::from_utf8_lossy(&buf);
    let mut first = head.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    if method != "GET" && method != "HEAD" {
        return reply(&mut s, "405 Method Not Allowed", "text/plain", "only GET\n");
    }
    match path.split('?').next().unwrap_or("") {
        "/metrics" | "/" => {
            let body = render(&collect());
            let body = if method == "HEAD" {
                String::new()
            } else {
                body
            };
            reply(
                &mut s,
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                &body,
            )
        }
        _ => reply(
            &mut s,
            "404 Not Found",
            "text/plain",
            "not found; try /metrics\n",
        ),
    }
}

fn reply(s: &mut TcpStream, status: &str, ctype: &str, body: &str) -> io::Result<()> {
    write!(
        s,
        "HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    s.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, req: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(req).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn text_format_and_http() {
        let collect: Collect = Arc::new(|| {
            let mut f = Family::new("fs_packets_total", "Packets.\nAll of them.", Kind::Counter);
            f.sample(&[("port", "p\"1")], 42.0).sample(&[], 1.5);
            vec![f]
        });
        let text = render(&collect());
        assert_eq!(
            text,
            "# HELP fs_packets_total Packets.\\nAll of them.\n# TYPE fs_packets_total counter\nfs_packets_total{port=\"p\\\"1\"} 42\nfs_packets_total 1.5\n"
        );
        let srv = MetricsServer::bind("127.0.0.1:0".parse().unwrap(), false, collect).unwrap();
        let r = get(
            srv.local_addr(),
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        );
        assert!(r.starts_with("HTTP/1.0 200 OK"), "{r}");
        assert!(r.ends_with(&text));
        let r = get(srv.local_addr(), b"GET /nope HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.0 404"), "{r}");
        let r = get(srv.local_addr(), b"POST / HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.0 405"), "{r}");
        // An oversized head is cut off (the client may see the 431 or a reset) and the
        // server carries on.
        {
            let mut s = TcpStream::connect(srv.local_addr()).unwrap();
            let _ = s.write_all(&vec![b'x'; 3 * MAX_REQUEST]);
            let mut out = String::new();
            if s.read_to_string(&mut out).is_ok() {
                assert!(out.is_empty() || out.starts_with("HTTP/1.0 431"), "{out}");
            }
        }
        let r = get(srv.local_addr(), b"GET / HTTP/1.0\r\n\r\n");
        assert!(r.starts_with("HTTP/1.0 200 OK"), "{r}");
        srv.shutdown();
    }

    #[test]
    fn remote_addresses_need_consent() {
        let c: Collect = Arc::new(Vec::new);
        assert!(MetricsServer::bind("0.0.0.0:0".parse().unwrap(), false, c).is_err());
    }
}
