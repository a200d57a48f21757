//! `--serve ADDR`: the live tool's metrics over HTTP, in the OpenMetrics text format, for
//! Prometheus to scrape (`GET /metrics`). A thread of its own answers each connection with the
//! latest sample (`kerf_tools::openmetrics`); the tool's loop puts the samples in.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the server shows: the tool, the target, and the latest sample.
#[derive(Default)]
struct Shown {
    tool: String,
    target: String,
    sample: Option<serde_json::Value>,
}

/// The serving side the tool's loop updates.
#[derive(Clone)]
pub struct Server {
    shown: Arc<Mutex<Shown>>,
}

impl Server {
    /// Listen on `addr` (before anything is done to a target) and answer from a thread.
    pub fn start(addr: &str, tool: &str, target: &str) -> Result<Server, crate::Error> {
        let listener = TcpListener::bind(addr)
            .map_err(|source| crate::Error::Serve { addr: addr.to_string(), source })?;
        let shown = Arc::new(Mutex::new(Shown {
            tool: tool.to_string(),
            target: target.to_string(),
            sample: None,
        }));
        let s = shown.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                // One slow or broken client must not stop the others for long.
                let _ = answer(conn, &s);
            }
        });
        Ok(Server { shown })
    }

    /// The tool's latest sample.
    pub fn update(&self, sample: &serde_json::Value) {
        if let Ok(mut s) = self.shown.lock() {
            s.sample = Some(sample.clone());
        }
    }
}

/// One request: `GET /metrics` gets the exposition, anything else a 404.
fn answer(mut conn: TcpStream, shown: &Mutex<Shown>) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    // The request line and headers, at most 16 KiB.
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 16 * 1024 {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&req);
    let line = line.lines().next().unwrap_or("");
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, ctype, body) = if method == "GET" && (path == "/metrics" || path == "/") {
        let s = shown.lock().map_err(|_| std::io::Error::other("poisoned"))?;
        let body = kerf_tools::openmetrics::render(&s.tool, &s.target, s.sample.as_ref());
        ("200 OK", kerf_tools::openmetrics::CONTENT_TYPE, body)
    } else {
        ("404 Not Found", "text/plain; charset=utf-8", "kerf serves /metrics\n".to_string())
    };
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}
