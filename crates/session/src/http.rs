//! A minimal HTTP/1.1 GET over a plain TCP connection, enough to fetch a file from a
//! debuginfod server. Only `http://` URLs: https is not supported (kerf carries no TLS), nor
//! are redirects, proxies or authentication; each of those is a clear error, never a guess.
//!
//! The server is untrusted: headers are bounded, the body is capped at `max_bytes`, and every
//! read waits at most `timeout`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Longest status or header line, and most header bytes in all, accepted from a server.
const MAX_LINE: usize = 8 << 10;
const MAX_HEADERS: usize = 64 << 10;

/// Why a GET failed. Each names the URL.
#[derive(Debug)]
pub enum HttpError {
    /// Not an `http://host[:port]/path` URL (https included: not supported).
    Url {
        url: String,
        detail: String,
    },
    Connect {
        url: String,
        err: std::io::Error,
    },
    Io {
        url: String,
        err: std::io::Error,
    },
    /// Any status but 200 (404: the server does not have it).
    Status {
        url: String,
        code: u16,
        reason: String,
    },
    TooLarge {
        url: String,
        limit: u64,
    },
    BadResponse {
        url: String,
        detail: String,
    },
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::Url { url, detail } => write!(f, "{url}: {detail}"),
            HttpError::Connect { url, err } => write!(f, "{url}: cannot connect: {err}"),
            HttpError::Io { url, err } => write!(f, "{url}: {err}"),
            HttpError::Status { url, code, reason } => write!(f, "{url}: HTTP {code} {reason}"),
            HttpError::TooLarge { url, limit } => {
                write!(f, "{url}: the response is larger than {limit} bytes")
            }
            HttpError::BadResponse { url, detail } => write!(f, "{url}: bad response: {detail}"),
        }
    }
}

impl std::error::Error for HttpError {}

/// Host, port and path of an `http://` URL.
fn split_url(url: &str) -> Result<(String, u16, String), String> {
    if url.starts_with("https://") {
        return Err("https is not supported (kerf's HTTP client speaks plain http only)".into());
    }
    let rest = url.strip_prefix("http://").ok_or("not an http:// URL")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.contains('@') {
        return Err("user names in URLs are not supported".into());
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or("unclosed [ in the host")?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => p.parse::<u16>().map_err(|_| format!("bad port {p:?}"))?,
        None => 80,
    };
    if host.is_empty() {
        return Err("no host".into());
    }
    if path.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err("spaces or control characters in the path".into());
    }
    Ok((host.to_string(), port, path.to_string()))
}

/// GET `url` and write the body of a 200 response to `out`. Returns the body's length.
pub fn get(
    url: &str,
    timeout: Duration,
    max_bytes: u64,
    out: &mut dyn Write,
) -> Result<u64, HttpError> {
    let (host, port, path) =
        split_url(url).map_err(|detail| HttpError::Url { url: url.into(), detail })?;
    let io = |err: std::io::Error| HttpError::Io { url: url.into(), err };
    let bad = |detail: String| HttpError::BadResponse { url: url.into(), detail };

    // 1. Connect to the first address that answers.
    let addrs = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|err| HttpError::Connect { url: url.into(), err })?;
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address for the host");
    let mut stream = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = e,
        }
    }
    let stream = stream.ok_or(HttpError::Connect { url: url.into(), err: last })?;
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;

    // 2. One request; the server closes the connection after its answer.
    let host_header = if host.contains(':') { format!("[{host}]") } else { host.clone() };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host_header}:{port}\r\nUser-Agent: kerf/{}\r\n\
         Accept: */*\r\nConnection: close\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    );
    (&stream).write_all(request.as_bytes()).map_err(io)?;

    // 3. Status line and headers.
    let mut reader = BufReader::new(stream);
    let status = read_line(&mut reader).map_err(io)?.ok_or_else(|| bad("no status line".into()))?;
    let mut words = status.splitn(3, ' ');
    let (version, code) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let reason = words.next().unwrap_or("").to_string();
    if !version.starts_with("HTTP/1.") {
        return Err(bad(format!("status line {status:?}")));
    }
    let code: u16 = code.parse().map_err(|_| bad(format!("status line {status:?}")))?;
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut header_bytes = 0;
    loop {
        let line = read_line(&mut reader).map_err(io)?.ok_or_else(|| bad("headers cut".into()))?;
        if line.is_empty() {
            break;
        }
        header_bytes += line.len();
        if header_bytes > MAX_HEADERS {
            return Err(bad("headers too long".into()));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(bad(format!("header {line:?}")));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(value.parse().map_err(|_| bad(format!("Content-Length {value:?}")))?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.eq_ignore_ascii_case("chunked");
            if !chunked && !value.eq_ignore_ascii_case("identity") {
                return Err(bad(format!("Transfer-Encoding {value:?} is not supported")));
            }
        }
    }
    if code != 200 {
        return Err(HttpError::Status { url: url.into(), code, reason });
    }

    // 4. The body: chunked, of a stated length, or up to the end of the connection.
    let too_large = || HttpError::TooLarge { url: url.into(), limit: max_bytes };
    let mut total = 0u64;
    if chunked {
        loop {
            let line =
                read_line(&mut reader).map_err(io)?.ok_or_else(|| bad("chunk cut".into()))?;
            let size = line.split(';').next().unwrap_or("").trim();
            let size =
                u64::from_str_radix(size, 16).map_err(|_| bad(format!("chunk size {line:?}")))?;
            if size == 0 {
                // Trailers, then the empty line that ends the message.
                while read_line(&mut reader).map_err(io)?.is_some_and(|l| !l.is_empty()) {}
                break;
            }
            total = total.checked_add(size).filter(|t| *t <= max_bytes).ok_or_else(too_large)?;
            copy_exact(&mut reader, size, out).map_err(io)?;
            if read_line(&mut reader).map_err(io)?.as_deref() != Some("") {
                return Err(bad("no line end after a chunk".into()));
            }
        }
    } else if let Some(len) = length {
        if len > max_bytes {
            return Err(too_large());
        }
        copy_exact(&mut reader, len, out).map_err(io)?;
        total = len;
    } else {
        total = std::io::copy(&mut (&mut reader).take(max_bytes + 1), out).map_err(io)?;
        if total > max_bytes {
            return Err(too_large());
        }
    }
    Ok(total)
}

/// One line without its CRLF; `None` at the end of the stream. Longer than [`MAX_LINE`] or
/// not UTF-8: an error.
fn read_line(r: &mut impl BufRead) -> std::io::Result<Option<String>> {
    let mut buf = Vec::new();
    let n = r.take(MAX_LINE as u64 + 1).read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.len() > MAX_LINE {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "line too long"));
    }
    while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        buf.pop();
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "line is not UTF-8"))
}

/// Copy exactly `len` bytes; a connection that ends sooner is an error.
fn copy_exact(r: &mut impl Read, len: u64, out: &mut dyn Write) -> std::io::Result<()> {
    let n = std::io::copy(&mut r.take(len), out)?;
    if n < len {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("the connection ended after {n} of {len} bytes"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn urls() {
        let ok = |u: &str| split_url(u).unwrap();
        assert_eq!(ok("http://h"), ("h".into(), 80, "/".into()));
        assert_eq!(ok("http://127.0.0.1:8002/x/"), ("127.0.0.1".into(), 8002, "/x/".into()));
        assert_eq!(ok("http://[::1]:9/a"), ("::1".into(), 9, "/a".into()));
        assert!(split_url("https://debuginfod.example/").unwrap_err().contains("https"));
        for bad in ["ftp://h/", "http://:80/", "http://h:99999/", "http://u@h/", "http://h/a b"] {
            assert!(split_url(bad).is_err(), "{bad}");
        }
    }

    /// Serve one canned response on loopback and GET it.
    fn serve(response: &'static [u8], max: u64) -> Result<Vec<u8>, HttpError> {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut req = [0u8; 1024];
            let _ = s.read(&mut req);
            let _ = s.write_all(response);
        });
        let mut out = Vec::new();
        let r = get(&format!("http://127.0.0.1:{port}/f"), Duration::from_secs(5), max, &mut out);
        server.join().unwrap();
        r.map(|n| {
            assert_eq!(n as usize, out.len());
            out
        })
    }

    #[test]
    fn bodies_of_each_framing() {
        let r = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 100).unwrap();
        assert_eq!(r, b"hello");
        let r = serve(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2;x=y\r\nlo\r\n0\r\n\r\n",
            100,
        )
        .unwrap();
        assert_eq!(r, b"hello");
        let r = serve(b"HTTP/1.0 200 OK\r\n\r\nto the end", 100).unwrap();
        assert_eq!(r, b"to the end");
    }

    #[test]
    fn errors_are_named() {
        let e = serve(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", 100).unwrap_err();
        assert!(matches!(e, HttpError::Status { code: 404, .. }), "{e}");
        let e = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\nxx", 100).unwrap_err();
        assert!(matches!(e, HttpError::TooLarge { limit: 100, .. }), "{e}");
        let e = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nxx", 100).unwrap_err();
        assert!(e.to_string().contains("after 2 of 5 bytes"), "{e}");
        let e = serve(b"HTTP/1.1 200 OK\r\n\r\n0123456789", 4).unwrap_err();
        assert!(matches!(e, HttpError::TooLarge { .. }), "{e}");
        let e = serve(b"SSH-2.0-OpenSSH\r\n", 4).unwrap_err();
        assert!(matches!(e, HttpError::BadResponse { .. }), "{e}");
        let e =
            serve(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 9).unwrap_err();
        assert!(e.to_string().contains("chunk size"), "{e}");
    }
}
