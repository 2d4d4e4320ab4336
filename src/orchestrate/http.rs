//! A minimal blocking HTTP/1.1 GET for readiness and health probes (std only: the orchestrator
//! never measures latency, the collector does).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// GET `path` from `host:port`; returns (status, body).
pub(crate) fn get(
    host: &str,
    port: u16,
    path: &str,
    timeout: Duration,
) -> std::io::Result<(u16, String)> {
    let addr = (host, port).to_socket_addrs()?.next().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("cannot resolve {host}"),
        )
    })?;
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\nAccept: */*\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, "no HTTP status line")
        })?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// True when nothing accepts connections on `host:port` and we can bind it.
pub(crate) fn port_free(host: &str, port: u16) -> bool {
    let listening = (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|addr| TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_ok());
    !listening && std::net::TcpListener::bind((host, port)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_reads_status_and_body_and_port_checks_work() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let t = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 256];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = c.read(&mut buf).unwrap();
                req.extend_from_slice(&buf[..n]);
            }
            c.write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\ndown")
                .unwrap();
            l
        });
        let (code, body) = get("127.0.0.1", port, "/health", Duration::from_secs(2)).unwrap();
        let l = t.join().unwrap();
        assert_eq!((code, body.as_str()), (503, "down"));
        assert!(!port_free("127.0.0.1", port), "a listening port is busy");
        drop(l);
        assert!(port_free("127.0.0.1", port), "a closed port is free");
    }
}
