//! The pool's internal queue items: a fixed-size peer prefix (who to answer), then a CUQR
//! request or a CUQS response exactly as on the wire.
#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Bytes of the peer prefix of every queue item.
pub const PEER_BYTES: usize = 32;

/// A transport's peer, written into and read from a queue item's prefix.
pub trait PeerBytes: Copy + Send + 'static {
    fn put(&self, out: &mut [u8; PEER_BYTES]);
    fn get(b: &[u8]) -> Option<Self>;
}

impl PeerBytes for () {
    fn put(&self, out: &mut [u8; PEER_BYTES]) {
        out.fill(0);
    }
    fn get(_: &[u8]) -> Option<()> {
        Some(())
    }
}

/// Bytes 0..4: the link's index.
impl PeerBytes for crate::transport::inproc::Link {
    fn put(&self, out: &mut [u8; PEER_BYTES]) {
        out.fill(0);
        out[..4].copy_from_slice(&self.0.to_le_bytes());
    }
    fn get(b: &[u8]) -> Option<Self> {
        let w: [u8; 4] = b.get(..4)?.try_into().ok()?;
        Some(crate::transport::inproc::Link(u32::from_le_bytes(w)))
    }
}

/// Byte 0: 4 or 6; bytes 2..4: port; bytes 4..20: the address (IPv4 in the first 4).
impl PeerBytes for SocketAddr {
    fn put(&self, out: &mut [u8; PEER_BYTES]) {
        out.fill(0);
        out[2..4].copy_from_slice(&self.port().to_le_bytes());
        match self.ip() {
            IpAddr::V4(a) => {
                out[0] = 4;
                out[4..8].copy_from_slice(&a.octets());
            }
            IpAddr::V6(a) => {
                out[0] = 6;
                out[4..20].copy_from_slice(&a.octets());
            }
        }
    }
    fn get(b: &[u8]) -> Option<SocketAddr> {
        if b.len() < PEER_BYTES {
            return None;
        }
        let port = u16::from_le_bytes([b[2], b[3]]);
        let ip = match b[0] {
            4 => IpAddr::V4(Ipv4Addr::new(b[4], b[5], b[6], b[7])),
            6 => {
                let mut o = [0u8; 16];
                o.copy_from_slice(&b[4..20]);
                IpAddr::V6(Ipv6Addr::from(o))
            }
            _ => return None,
        };
        Some(SocketAddr::new(ip, port))
    }
}

/// The peer prefix and the message of a queue item.
pub fn split(item: &[u8]) -> Option<(&[u8], &[u8])> {
    (item.len() >= PEER_BYTES).then(|| item.split_at(PEER_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::inproc::Link;

    #[test]
    fn peers_round_trip() {
        for a in ["127.0.0.1:9000", "[::1]:65535", "10.1.2.3:1"] {
            let a: SocketAddr = a.parse().unwrap();
            let mut b = [0u8; PEER_BYTES];
            a.put(&mut b);
            assert_eq!(SocketAddr::get(&b), Some(a));
        }
        assert_eq!(SocketAddr::get(&[0u8; PEER_BYTES]), None);
        assert_eq!(split(&[1, 2]), None);
        let mut b = [0u8; PEER_BYTES];
        Link(70_000).put(&mut b);
        assert_eq!(Link::get(&b), Some(Link(70_000)));
    }
}
