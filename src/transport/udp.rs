//! The `udp` transport: kernel UDP sockets, non-blocking and busy-polled.
//!
//! The receive buffer is as large as the largest UDP payload, so the kernel never
//! truncates a datagram behind our back: an oversized request is seen whole and
//! answered with `OVERSIZED`.
//!
//! The forwarder's socket asks the kernel for each datagram's receive timestamp (how long
//! it waited in the socket before the forwarder read it) and the socket's drop counter
//! (datagrams the kernel dropped because the receive buffer was full), so an overloaded
//! forwarder can say so ([`Transport::last_arrival_ns`], [`Transport::drops`]).
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::str::FromStr;

use socket2::{Domain, Protocol, Socket, Type};

use super::{Client, DropCounter, Transport, TransportDrops};
use crate::{sys, Error, Result};

pub use crate::wire::MAX_DATAGRAM;

/// Kernel socket buffer size asked for: room for bursts in open-loop runs.
const SOCKET_BUFFER_BYTES: usize = 4 << 20;

/// One allowlist entry: a whole host, or one host and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowedPeer {
    Host(IpAddr),
    Exact(SocketAddr),
}

impl AllowedPeer {
    /// Whether `peer` is this entry. An IPv4 peer seen on a dual-stack socket
    /// (`::ffff:10.0.0.7`) is the IPv4 host it maps, and matches an IPv4 entry (and the
    /// other way round).
    pub fn matches(&self, peer: &SocketAddr) -> bool {
        let ip = peer.ip().to_canonical();
        match self {
            AllowedPeer::Host(host) => ip == host.to_canonical(),
            AllowedPeer::Exact(addr) => {
                ip == addr.ip().to_canonical() && peer.port() == addr.port()
            }
        }
    }
}

impl FromStr for AllowedPeer {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if let Ok(addr) = s.parse::<SocketAddr>() {
            return Ok(AllowedPeer::Exact(addr));
        }
        s.parse::<IpAddr>()
            .map(AllowedPeer::Host)
            .map_err(|_| format!("allowlist entry {s:?} is neither an IP address nor IP:port"))
    }
}

impl std::fmt::Display for AllowedPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AllowedPeer::Host(ip) => write!(f, "{ip}"),
            AllowedPeer::Exact(a) => write!(f, "{a}"),
        }
    }
}

fn new_socket(addr: SocketAddr) -> Result<Socket> {
    let domain = Domain::for_address(addr);
    let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))
        .map_err(|source| Error::Bind { addr, source })?;
    // Best effort: the kernel caps these at net.core.{r,w}mem_max.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER_BYTES);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER_BYTES);
    socket
        .set_nonblocking(true)
        .map_err(|source| Error::SocketOption {
            addr,
            option: "O_NONBLOCK",
            source,
        })?;
    Ok(socket)
}

/// The forwarder's UDP socket.
pub struct UdpTransport {
    socket: UdpSocket,
    local: SocketAddr,
    allowlist: Vec<AllowedPeer>,
    /// The kernel attaches receive timestamps and the drop counter (else plain receives).
    meta: bool,
    last_arrival_ns: Option<u64>,
    /// Read per datagram (in band) and on demand (`drops`, which catches drops after the
    /// last datagram read).
    overflow: Cell<DropCounter>,
}

impl UdpTransport {
    /// Binds `addr` (port 0 picks a free port). An empty allowlist accepts every peer.
    pub fn bind(addr: SocketAddr, allowlist: Vec<AllowedPeer>) -> Result<UdpTransport> {
        let socket = new_socket(addr)?;
        socket
            .bind(&addr.into())
            .map_err(|source| Error::Bind { addr, source })?;
        let socket: UdpSocket = socket.into();
        let local = socket
            .local_addr()
            .map_err(|source| Error::Bind { addr, source })?;
        // Without them (an old kernel), requests are served without a queue deadline.
        let meta = sys::enable_receive_meta(socket.as_fd()).is_ok();
        Ok(UdpTransport {
            socket,
            local,
            allowlist,
            meta,
            last_arrival_ns: None,
            overflow: Cell::new(DropCounter::default()),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub fn allowlist(&self) -> &[AllowedPeer] {
        &self.allowlist
    }
}

impl Transport for UdpTransport {
    type Peer = SocketAddr;

    fn name(&self) -> &'static str {
        "udp"
    }

    #[inline]
    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<(usize, SocketAddr)>> {
        let got = if self.meta {
            sys::recv_with_meta(self.socket.as_fd(), buf).map(|r| {
                self.last_arrival_ns = r.arrival_ns;
                if let Some(d) = r.drops {
                    let mut c = self.overflow.get();
                    c.observe(d);
                    self.overflow.set(c);
                }
                (r.len, r.peer)
            })
        } else {
            self.socket.recv_from(buf)
        };
        match got {
            Ok((n, peer)) => Ok(Some((n, peer))),
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                Ok(None)
            }
            // ICMP port-unreachable from an earlier send to a peer that went away is
            // reported on the next receive; it says nothing about this socket.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => Ok(None),
            Err(source) => Err(Error::Recv {
                transport: "udp",
                source,
            }),
        }
    }

    #[inline]
    fn is_allowed(&self, peer: &SocketAddr) -> bool {
        self.allowlist.is_empty() || self.allowlist.iter().any(|a| a.matches(peer))
    }

    fn drops(&self) -> TransportDrops {
        let mut c = self.overflow.get();
        if let Ok(raw) = sys::socket_drops(self.socket.as_fd()) {
            c.observe(raw);
            self.overflow.set(c);
        }
        TransportDrops {
            socket_overflow: c.total(),
            ..TransportDrops::default()
        }
    }

    #[inline]
    fn last_arrival_ns(&self) -> Option<u64> {
        self.last_arrival_ns
    }

    #[inline]
    fn send(&mut self, peer: SocketAddr, bytes: &[u8]) -> Result<()> {
        loop {
            match self.socket.send_to(bytes, peer) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(Error::Send {
                        transport: "udp",
                        peer: peer.to_string(),
                        source,
                    })
                }
            }
        }
    }
}

/// The emulator's UDP socket, connected to the forwarder.
pub struct UdpClient {
    socket: UdpSocket,
    target: SocketAddr,
}

impl UdpClient {
    /// Binds an ephemeral port on the target's address family and connects to `target`.
    pub fn connect(target: SocketAddr) -> Result<UdpClient> {
        let local: SocketAddr = if target.is_ipv4() {
            "0.0.0.0:0".parse().expect("literal address")
        } else {
            "[::]:0".parse().expect("literal address")
        };
        let socket = new_socket(local)?;
        socket.bind(&local.into()).map_err(|source| Error::Bind {
            addr: local,
            source,
        })?;
        socket
            .connect(&target.into())
            .map_err(|source| Error::Bind {
                addr: target,
                source,
            })?;
        Ok(UdpClient {
            socket: socket.into(),
            target,
        })
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.socket.local_addr().ok()
    }
}

impl Client for UdpClient {
    #[inline]
    fn send(&mut self, bytes: &[u8]) -> Result<bool> {
        match self.socket.send(bytes) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                Ok(false)
            }
            // Nobody listens yet (forwarder starting): the request is lost like any
            // datagram, and the emulator's accounting will show it.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => Ok(true),
            Err(source) => Err(Error::Send {
                transport: "udp",
                peer: self.target.to_string(),
                source,
            }),
        }
    }

    #[inline]
    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>> {
        match self.socket.recv(buf) {
            Ok(n) => Ok(Some(n)),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::Interrupted | ErrorKind::ConnectionRefused
                ) =>
            {
                Ok(None)
            }
            Err(source) => Err(Error::Recv {
                transport: "udp",
                source,
            }),
        }
    }

    fn describe(&self) -> String {
        format!("udp://{}", self.target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowlist_entries_parse_and_match() {
        let host: AllowedPeer = "127.0.0.1".parse().unwrap();
        let exact: AllowedPeer = "127.0.0.1:4000".parse().unwrap();
        let a: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:4001".parse().unwrap();
        assert!(host.matches(&a) && host.matches(&b));
        assert!(exact.matches(&a) && !exact.matches(&b));
        assert!("not-an-ip".parse::<AllowedPeer>().is_err());
    }

    #[test]
    fn ipv4_mapped_peers_match_ipv4_entries() {
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:4000".parse().unwrap();
        let host: AllowedPeer = "127.0.0.1".parse().unwrap();
        let exact: AllowedPeer = "127.0.0.1:4000".parse().unwrap();
        let other_port: AllowedPeer = "127.0.0.1:4001".parse().unwrap();
        assert!(host.matches(&mapped));
        assert!(exact.matches(&mapped));
        assert!(!other_port.matches(&mapped));
        // A mapped entry matches a plain IPv4 peer too; a real IPv6 peer matches neither.
        let mapped_entry: AllowedPeer = "::ffff:127.0.0.1".parse().unwrap();
        assert!(mapped_entry.matches(&"127.0.0.1:1".parse().unwrap()));
        assert!(!host.matches(&"[::1]:4000".parse().unwrap()));
    }

    #[test]
    fn loopback_round_trip_and_allowlist() {
        let mut server = UdpTransport::bind("127.0.0.1:0".parse().unwrap(), vec![]).unwrap();
        let mut client = UdpClient::connect(server.local_addr()).unwrap();
        assert!(client.send(b"hello").unwrap());
        let mut buf = [0u8; 64];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let (n, peer) = loop {
            if let Some(r) = server.try_recv(&mut buf).unwrap() {
                break r;
            }
            assert!(std::time::Instant::now() < deadline);
            std::thread::yield_now();
        };
        assert_eq!(&buf[..n], b"hello");
        assert!(server.is_allowed(&peer));
        server.send(peer, b"world").unwrap();
        let n = loop {
            if let Some(n) = client.try_recv(&mut buf).unwrap() {
                break n;
            }
            assert!(std::time::Instant::now() < deadline);
            std::thread::yield_now();
        };
        assert_eq!(&buf[..n], b"world");

        let strict = UdpTransport::bind(
            "127.0.0.1:0".parse().unwrap(),
            vec!["10.1.2.3".parse().unwrap()],
        )
        .unwrap();
        assert!(!strict.is_allowed(&peer));
    }
}
