//! A misbehaving HTTP proxy on loopback for fault tests: in front of a real server it
//! answers some connections with `503 Slow Down`, cuts others right after the request
//! starts, and cuts forwarded connections after a short life. It counts what it did and
//! stops when dropped (all loops are bounded by that flag and by socket timeouts).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A listener on a loopback port of its own whose accepted connections go to a handler,
/// each on a thread of its own; dropping it stops the accepting (a blocking accept woken by
/// one connection to itself, no polling).
struct Serving {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl Serving {
    /// `stop` is set when it is dropped (the handlers' own loops may watch it too).
    fn start(stop: Arc<AtomicBool>, handler: impl Fn(TcpStream) + Send + 'static) -> Serving {
        let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind proxy");
        let port = listener.local_addr().expect("addr").port();
        let s = stop.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    return;
                }
                if let Ok(client) = client {
                    handler(client);
                }
            }
        });
        Serving { port, stop }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

#[derive(Default)]
pub struct Counters {
    pub connections: AtomicUsize,
    pub answered_503: AtomicUsize,
    pub cut: AtomicUsize,
    pub forwarded: AtomicUsize,
}

pub struct FaultyProxy {
    pub port: u16,
    pub counters: Arc<Counters>,
    _serving: Serving,
}

impl FaultyProxy {
    /// Proxies 127.0.0.1:<port> → 127.0.0.1:`upstream`. Connection n: n % 4 == 1 gets a
    /// 503, n % 4 == 2 is cut after the request head, the rest are forwarded and live at
    /// most `max_life`.
    pub fn start(upstream: u16, max_life: Duration) -> FaultyProxy {
        let counters = Arc::new(Counters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (counters.clone(), stop.clone());
        let serving = Serving::start(stop, move |client| {
            let n = c.connections.fetch_add(1, Ordering::Relaxed);
            let (c2, s2) = (c.clone(), s.clone());
            std::thread::spawn(move || handle(client, n, upstream, max_life, &c2, &s2));
        });
        FaultyProxy {
            port: serving.port,
            counters,
            _serving: serving,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

fn read_head(client: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 64 * 1024 || client.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    Some(head)
}

fn handle(
    mut client: TcpStream,
    n: usize,
    upstream: u16,
    max_life: Duration,
    c: &Counters,
    stop: &AtomicBool,
) {
    let _ = client.set_nonblocking(false);
    let _ = client.set_read_timeout(Some(Duration::from_secs(10)));
    let Some(head) = read_head(&mut client) else {
        return;
    };
    match n % 4 {
        1 => {
            c.answered_503.fetch_add(1, Ordering::Relaxed);
            let body =
                "<Error><Code>SlowDown</Code><Message>injected by the test proxy</Message></Error>";
            let _ = write!(
                client,
                "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = client.shutdown(Shutdown::Both);
        }
        2 => {
            c.cut.fetch_add(1, Ordering::Relaxed);
            let _ = client.shutdown(Shutdown::Both);
        }
        _ => {
            c.forwarded.fetch_add(1, Ordering::Relaxed);
            let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                return;
            };
            if server.write_all(&head).is_err() {
                return;
            }
            let started = Instant::now();
            let (Ok(mut c_in), Ok(mut s_out)) = (client.try_clone(), server.try_clone()) else {
                return;
            };
            let _ = c_in.set_read_timeout(Some(Duration::from_millis(200)));
            let _ = server.set_read_timeout(Some(Duration::from_millis(200)));
            let up = std::thread::spawn(move || pump(&mut c_in, &mut s_out, started, max_life));
            let _ = pump(&mut server, &mut client, started, max_life);
            let _ = up.join();
            if started.elapsed() >= max_life && !stop.load(Ordering::Relaxed) {
                c.cut.fetch_add(1, Ordering::Relaxed);
            }
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
        }
    }
}

/// Copies until EOF, an error, or the connection's life is over.
fn pump(
    from: &mut TcpStream,
    to: &mut TcpStream,
    started: Instant,
    max_life: Duration,
) -> std::io::Result<()> {
    let mut buf = [0u8; 16 * 1024];
    while started.elapsed() < max_life {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => to.write_all(&buf[..n])?,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
    Ok(())
}

/// A proxy in front of an S3 server that answers as S3 does for an expired session token
/// (`400 ExpiredToken`, the body S3 sends) to every connection whose first request carries
/// the token set as stale, and forwards the others. Stops when dropped.
pub struct ExpiredTokenProxy {
    pub port: u16,
    pub refused: Arc<AtomicUsize>,
    stale: Arc<std::sync::Mutex<Option<String>>>,
    _serving: Serving,
}

impl ExpiredTokenProxy {
    pub fn start(upstream: u16) -> ExpiredTokenProxy {
        let refused = Arc::new(AtomicUsize::new(0));
        let stale: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
        let (r, st) = (refused.clone(), stale.clone());
        let serving = Serving::start(Arc::default(), move |client| {
            let token = st.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let r2 = r.clone();
            std::thread::spawn(move || expire_or_forward(client, upstream, token.as_deref(), &r2));
        });
        ExpiredTokenProxy {
            port: serving.port,
            refused,
            stale,
            _serving: serving,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// From now on, requests signed with this session token are refused as expired.
    pub fn expire(&self, token: &str) {
        *self.stale.lock().unwrap_or_else(|e| e.into_inner()) = Some(token.to_string());
    }
}

fn expire_or_forward(
    mut client: TcpStream,
    upstream: u16,
    stale: Option<&str>,
    refused: &AtomicUsize,
) {
    let _ = client.set_nonblocking(false);
    let _ = client.set_read_timeout(Some(Duration::from_secs(10)));
    let Some(head) = read_head(&mut client) else {
        return;
    };
    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let is_stale = stale.is_some_and(|t| {
        text.contains(&format!("x-amz-security-token: {}", t.to_ascii_lowercase()))
    });
    if is_stale {
        let length: usize = text
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        let _ = client.read_exact(&mut body);
        refused.fetch_add(1, Ordering::Relaxed);
        let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message><RequestId>PGATEST</RequestId></Error>";
        let _ = write!(
            client,
            "HTTP/1.1 400 Bad Request\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{xml}",
            xml.len()
        );
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)) else {
        return;
    };
    if server.write_all(&head).is_err() {
        return;
    }
    let started = Instant::now();
    let life = Duration::from_secs(120);
    let (Ok(mut c_in), Ok(mut s_out)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let _ = c_in.set_read_timeout(Some(Duration::from_millis(200)));
    let _ = server.set_read_timeout(Some(Duration::from_millis(200)));
    let up = std::thread::spawn(move || pump(&mut c_in, &mut s_out, started, life));
    let _ = pump(&mut server, &mut client, started, life);
    let _ = up.join();
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
}

/// A proxy in front of an S3 server that flips one byte of the body of the first `times`
/// GET responses whose path contains `needle` (what a bad network card or a broken cache
/// does to a download), and forwards everything else. Each request is made to close its
/// connection, so every request is seen; GETs are counted by path. Stops when dropped.
pub struct CorruptingProxy {
    pub port: u16,
    pub corrupted: Arc<AtomicUsize>,
    pub gets: Arc<std::sync::Mutex<std::collections::BTreeMap<String, usize>>>,
    _serving: Serving,
}

impl CorruptingProxy {
    pub fn start(upstream: u16, needle: &str, times: usize) -> CorruptingProxy {
        let corrupted = Arc::new(AtomicUsize::new(0));
        let gets: Arc<std::sync::Mutex<std::collections::BTreeMap<String, usize>>> = Arc::default();
        let left = Arc::new(AtomicUsize::new(times));
        let (c, g, n) = (corrupted.clone(), gets.clone(), needle.to_string());
        let serving = Serving::start(Arc::default(), move |client| {
            let (c2, g2, l2, n2) = (c.clone(), g.clone(), left.clone(), n.clone());
            std::thread::spawn(move || corrupt_or_forward(client, upstream, &n2, &l2, &c2, &g2));
        });
        CorruptingProxy {
            port: serving.port,
            corrupted,
            gets,
            _serving: serving,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

fn corrupt_or_forward(
    mut client: TcpStream,
    upstream: u16,
    needle: &str,
    left: &AtomicUsize,
    corrupted: &AtomicUsize,
    gets: &std::sync::Mutex<std::collections::BTreeMap<String, usize>>,
) {
    let _ = client.set_nonblocking(false);
    let _ = client.set_read_timeout(Some(Duration::from_secs(10)));
    let Some(head) = read_head(&mut client) else {
        return;
    };
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut words = text.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("").to_string();
    let flip = method == "GET"
        && path.contains(needle)
        && left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
    if method == "GET" {
        *gets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(path)
            .or_insert(0) += 1;
    }
    // One request per connection: its own `Connection: close`.
    let mut lines: Vec<&str> = text
        .trim_end_matches("\r\n")
        .split("\r\n")
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
        .collect();
    lines.push("Connection: close");
    let head = format!("{}\r\n\r\n", lines.join("\r\n"));
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)) else {
        return;
    };
    if server.write_all(head.as_bytes()).is_err() {
        return;
    }
    let started = Instant::now();
    let life = Duration::from_secs(60);
    let (Ok(mut c_in), Ok(mut s_out)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let _ = c_in.set_read_timeout(Some(Duration::from_millis(200)));
    let up = std::thread::spawn(move || pump(&mut c_in, &mut s_out, started, life));
    let _ = server.set_read_timeout(Some(Duration::from_secs(10)));
    // The response's head as it is, then the body with its first byte flipped.
    if let Some(response_head) = read_head(&mut server) {
        let _ = client.write_all(&response_head);
        if flip {
            let mut byte = [0u8; 1];
            if server.read_exact(&mut byte).is_ok() {
                byte[0] ^= 0xff;
                corrupted.fetch_add(1, Ordering::Relaxed);
                let _ = client.write_all(&byte);
            }
        }
        let _ = server.set_read_timeout(Some(Duration::from_millis(200)));
        let _ = pump(&mut server, &mut client, started, life);
    }
    let _ = up.join();
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
}
