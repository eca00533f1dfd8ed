//! The RoCE control plane: before any RDMA traffic, the QPU side and qfwd exchange their
//! queue pair endpoints (QPN, PSN, GID, MTU) and qfwd's request ring (address, rkey, slot
//! geometry) over UDP, then START; STOP ends the session.
//!
//! Every message is a fixed-size, little-endian datagram:
//!
//! ```text
//! u32 magic "QFCP" | u8 version (1) | u8 kind | u16 reserved (0) | body
//! HELLO, HELLO_ACK (kind 1, 2): u32 qpn | u32 psn | [u8; 16] gid | u16 lid | u8 mtu |
//!                               u8 gid_index | u64 ring_addr | u32 rkey | u32 slots |
//!                               u32 slot_bytes                          (48-byte body)
//! START, STOP, ACK (3, 4, 5):   u64 session | u8 acked_kind | [u8; 7] 0  (16-byte body)
//! ERROR (6):                    u32 code | u16 len | len bytes of UTF-8 (len <= 200)
//! ```
//!
//! This module needs no RDMA library: it is built and tested everywhere, and fuzzed
//! (`fuzz/fuzz_targets/control_plane.rs`).
#![forbid(unsafe_code)]

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// `"QFCP"` as a little-endian u32.
pub const MAGIC: u32 = u32::from_le_bytes(*b"QFCP");
pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 8;
pub const ENDPOINT_LEN: usize = 48;
pub const SESSION_LEN: usize = 16;
pub const MAX_ERROR_TEXT: usize = 200;
/// Largest message.
pub const MAX_LEN: usize = HEADER_LEN + 6 + MAX_ERROR_TEXT;

/// One side of a connection: its QP and, for qfwd, the ring the QPU writes requests into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Endpoint {
    pub qpn: u32,
    /// First packet sequence number.
    pub psn: u32,
    /// RoCEv2 GID (an IPv4-mapped or IPv6 address).
    pub gid: [u8; 16],
    /// InfiniBand LID (0 on RoCE).
    pub lid: u16,
    /// Path MTU as `ibv_mtu` (1 = 256 ... 5 = 4096).
    pub mtu: u8,
    pub gid_index: u8,
    /// Request ring address (0 on the QPU side).
    pub ring_addr: u64,
    pub rkey: u32,
    pub slots: u32,
    pub slot_bytes: u32,
}

/// A control-plane message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// QPU -> qfwd: my endpoint.
    Hello(Endpoint),
    /// qfwd -> QPU: mine (with the ring).
    HelloAck(Endpoint),
    /// Start sending requests.
    Start { session: u64 },
    /// Stop; qfwd drains and acknowledges.
    Stop { session: u64 },
    /// Acknowledges `kind` (START or STOP) of `session`.
    Ack { session: u64, kind: u8 },
    /// Refusal, with a reason.
    Error { code: u32, text: String },
}

pub mod kind {
    pub const HELLO: u8 = 1;
    pub const HELLO_ACK: u8 = 2;
    pub const START: u8 = 3;
    pub const STOP: u8 = 4;
    pub const ACK: u8 = 5;
    pub const ERROR: u8 = 6;
}

/// Why bytes are not a control message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    #[error("{len} bytes is shorter than the {HEADER_LEN}-byte header")]
    Truncated { len: usize },
    #[error("bad magic {found:#010x}")]
    BadMagic { found: u32 },
    #[error("unsupported version {found} (this is version {VERSION})")]
    Version { found: u8 },
    #[error("unknown message kind {found}")]
    UnknownKind { found: u8 },
    #[error("message kind {kind} must be {expected} bytes, got {len}")]
    Length {
        kind: u8,
        expected: usize,
        len: usize,
    },
    #[error("reserved bytes are not zero")]
    Reserved,
    #[error("error text is not UTF-8 or longer than {MAX_ERROR_TEXT} bytes")]
    BadText,
    #[error("output buffer of {capacity} bytes cannot hold {needed}")]
    BufferTooSmall { needed: usize, capacity: usize },
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

impl Message {
    pub fn kind(&self) -> u8 {
        match self {
            Message::Hello(_) => kind::HELLO,
            Message::HelloAck(_) => kind::HELLO_ACK,
            Message::Start { .. } => kind::START,
            Message::Stop { .. } => kind::STOP,
            Message::Ack { .. } => kind::ACK,
            Message::Error { .. } => kind::ERROR,
        }
    }

    /// Encoded size.
    pub fn len(&self) -> usize {
        HEADER_LEN
            + match self {
                Message::Hello(_) | Message::HelloAck(_) => ENDPOINT_LEN,
                Message::Start { .. } | Message::Stop { .. } | Message::Ack { .. } => SESSION_LEN,
                Message::Error { text, .. } => 6 + text.len(),
            }
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the message into `out`; returns its length.
    pub fn encode(&self, out: &mut [u8]) -> std::result::Result<usize, ControlError> {
        let n = self.len();
        if let Message::Error { text, .. } = self {
            if text.len() > MAX_ERROR_TEXT {
                return Err(ControlError::BadText);
            }
        }
        if out.len() < n {
            return Err(ControlError::BufferTooSmall {
                needed: n,
                capacity: out.len(),
            });
        }
        let out = &mut out[..n];
        out.fill(0);
        out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        out[4] = VERSION;
        out[5] = self.kind();
        let body = &mut out[HEADER_LEN..];
        match self {
            Message::Hello(e) | Message::HelloAck(e) => {
                body[0..4].copy_from_slice(&e.qpn.to_le_bytes());
                body[4..8].copy_from_slice(&e.psn.to_le_bytes());
                body[8..24].copy_from_slice(&e.gid);
                body[24..26].copy_from_slice(&e.lid.to_le_bytes());
                body[26] = e.mtu;
                body[27] = e.gid_index;
                body[28..36].copy_from_slice(&e.ring_addr.to_le_bytes());
                body[36..40].copy_from_slice(&e.rkey.to_le_bytes());
                body[40..44].copy_from_slice(&e.slots.to_le_bytes());
                body[44..48].copy_from_slice(&e.slot_bytes.to_le_bytes());
            }
            Message::Start { session } | Message::Stop { session } => {
                body[0..8].copy_from_slice(&session.to_le_bytes());
            }
            Message::Ack { session, kind } => {
                body[0..8].copy_from_slice(&session.to_le_bytes());
                body[8] = *kind;
            }
            Message::Error { code, text } => {
                body[0..4].copy_from_slice(&code.to_le_bytes());
                body[4..6].copy_from_slice(&(text.len() as u16).to_le_bytes());
                body[6..].copy_from_slice(text.as_bytes());
            }
        }
        Ok(n)
    }

    /// Parses one datagram; the whole of it must be the message.
    pub fn parse(b: &[u8]) -> std::result::Result<Message, ControlError> {
        if b.len() < HEADER_LEN {
            return Err(ControlError::Truncated { len: b.len() });
        }
        let magic = u32_at(b, 0);
        if magic != MAGIC {
            return Err(ControlError::BadMagic { found: magic });
        }
        if b[4] != VERSION {
            return Err(ControlError::Version { found: b[4] });
        }
        if u16_at(b, 6) != 0 {
            return Err(ControlError::Reserved);
        }
        let k = b[5];
        let body = &b[HEADER_LEN..];
        let exact = |expected: usize| {
            if body.len() == expected {
                Ok(())
            } else {
                Err(ControlError::Length {
                    kind: k,
                    expected: HEADER_LEN + expected,
                    len: b.len(),
                })
            }
        };
        Ok(match k {
            kind::HELLO | kind::HELLO_ACK => {
                exact(ENDPOINT_LEN)?;
                let mut gid = [0u8; 16];
                gid.copy_from_slice(&body[8..24]);
                let e = Endpoint {
                    qpn: u32_at(body, 0),
                    psn: u32_at(body, 4),
                    gid,
                    lid: u16_at(body, 24),
                    mtu: body[26],
                    gid_index: body[27],
                    ring_addr: u64_at(body, 28),
                    rkey: u32_at(body, 36),
                    slots: u32_at(body, 40),
                    slot_bytes: u32_at(body, 44),
                };
                if k == kind::HELLO {
                    Message::Hello(e)
                } else {
                    Message::HelloAck(e)
                }
            }
            kind::START | kind::STOP => {
                exact(SESSION_LEN)?;
                if body[8..].iter().any(|&x| x != 0) {
                    return Err(ControlError::Reserved);
                }
                let session = u64_at(body, 0);
                if k == kind::START {
                    Message::Start { session }
                } else {
                    Message::Stop { session }
                }
            }
            kind::ACK => {
                exact(SESSION_LEN)?;
                if body[9..].iter().any(|&x| x != 0) {
                    return Err(ControlError::Reserved);
                }
                Message::Ack {
                    session: u64_at(body, 0),
                    kind: body[8],
                }
            }
            kind::ERROR => {
                if body.len() < 6 {
                    return Err(ControlError::Length {
                        kind: k,
                        expected: HEADER_LEN + 6,
                        len: b.len(),
                    });
                }
                let n = u16_at(body, 4) as usize;
                if n > MAX_ERROR_TEXT {
                    return Err(ControlError::BadText);
                }
                exact(6 + n)?;
                let text = std::str::from_utf8(&body[6..]).map_err(|_| ControlError::BadText)?;
                Message::Error {
                    code: u32_at(body, 0),
                    text: text.to_string(),
                }
            }
            other => return Err(ControlError::UnknownKind { found: other }),
        })
    }
}

/// A UDP socket speaking the control protocol, with deadlines on every wait.
pub struct ControlSocket {
    socket: UdpSocket,
    buf: [u8; MAX_LEN + 1],
}

impl ControlSocket {
    /// Binds `addr` (port 0: any free port).
    pub fn bind(addr: SocketAddr) -> Result<ControlSocket> {
        let socket = UdpSocket::bind(addr).map_err(|source| Error::Bind { addr, source })?;
        Ok(ControlSocket {
            socket,
            buf: [0; MAX_LEN + 1],
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.socket
            .local_addr()
            .map_err(|source| Error::ControlPlaneIo {
                op: "local_addr",
                peer: "-".into(),
                source,
            })
    }

    pub fn send(&self, to: SocketAddr, msg: &Message) -> Result<()> {
        let mut out = [0u8; MAX_LEN];
        let n = msg.encode(&mut out).map_err(|e| Error::ControlPlane {
            detail: format!("cannot encode {msg:?}: {e}"),
        })?;
        self.socket
            .send_to(&out[..n], to)
            .map_err(|source| Error::ControlPlaneIo {
                op: "send",
                peer: to.to_string(),
                source,
            })?;
        Ok(())
    }

    /// The next well-formed message before `deadline` (malformed datagrams are skipped
    /// and counted in `skipped`); `Ok(None)` at the deadline.
    pub fn recv_until(
        &mut self,
        deadline: Instant,
        skipped: &mut u64,
    ) -> Result<Option<(Message, SocketAddr)>> {
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let wait = (deadline - now).max(Duration::from_millis(1));
            self.socket
                .set_read_timeout(Some(wait))
                .map_err(|source| Error::ControlPlaneIo {
                    op: "set_read_timeout",
                    peer: "-".into(),
                    source,
                })?;
            match self.socket.recv_from(&mut self.buf) {
                Ok((n, from)) => match Message::parse(&self.buf[..n]) {
                    Ok(m) => return Ok(Some((m, from))),
                    Err(_) => *skipped += 1,
                },
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(source) => {
                    return Err(Error::ControlPlaneIo {
                        op: "recv",
                        peer: "-".into(),
                        source,
                    })
                }
            }
        }
    }

    /// qfwd's side of the handshake: waits for a HELLO, calls `on_hello` with the peer's
    /// endpoint (connect the QP there, so it is ready before the peer can send), answers
    /// HELLO_ACK with `ours`, then waits for START and acknowledges it. Returns the peer's
    /// endpoint, its control address and the session. A HELLO repeated by a peer that lost
    /// the answer is answered again (without a second `on_hello`).
    pub fn accept(
        &mut self,
        ours: &Endpoint,
        within: Duration,
        mut on_hello: impl FnMut(&Endpoint) -> Result<()>,
    ) -> Result<(Endpoint, SocketAddr, u64)> {
        let deadline = Instant::now() + within;
        let mut skipped = 0;
        let mut peer: Option<(Endpoint, SocketAddr)> = None;
        while let Some((m, from)) = self.recv_until(deadline, &mut skipped)? {
            match m {
                Message::Hello(e) => {
                    match peer {
                        Some((known, addr)) if known == e && addr == from => {}
                        Some(_) => {
                            self.send(
                                from,
                                &Message::Error {
                                    code: 2,
                                    text: "already connected to another QPU".into(),
                                },
                            )?;
                            continue;
                        }
                        None => {
                            if let Err(err) = on_hello(&e) {
                                let text: String =
                                    err.to_string().chars().take(MAX_ERROR_TEXT).collect();
                                self.send(from, &Message::Error { code: 3, text })?;
                                return Err(err);
                            }
                            peer = Some((e, from));
                        }
                    }
                    self.send(from, &Message::HelloAck(*ours))?;
                }
                Message::Start { session } => {
                    if let Some((e, addr)) = peer.filter(|(_, a)| *a == from) {
                        self.send(
                            from,
                            &Message::Ack {
                                session,
                                kind: kind::START,
                            },
                        )?;
                        return Ok((e, addr, session));
                    }
                    self.send(
                        from,
                        &Message::Error {
                            code: 1,
                            text: "START before HELLO".into(),
                        },
                    )?;
                }
                _ => skipped += 1,
            }
        }
        Err(Error::ControlPlane {
            detail: format!(
                "no QPU completed HELLO/START within {} ms ({skipped} other datagrams)",
                within.as_millis()
            ),
        })
    }

    /// Sends `msg` to `server` every `retry` until `want` accepts an answer from it;
    /// an ERROR answer ends the wait.
    fn request<T>(
        &mut self,
        server: SocketAddr,
        msg: &Message,
        within: Duration,
        retry: Duration,
        mut want: impl FnMut(&Message) -> Option<T>,
    ) -> Result<T> {
        let deadline = Instant::now() + within;
        let mut skipped = 0;
        while Instant::now() < deadline {
            self.send(server, msg)?;
            let until = (Instant::now() + retry).min(deadline);
            while let Some((m, from)) = self.recv_until(until, &mut skipped)? {
                if from != server {
                    skipped += 1;
                    continue;
                }
                if let Message::Error { code, text } = &m {
                    return Err(Error::ControlPlane {
                        detail: format!("{server} refused: error {code}: {text}"),
                    });
                }
                match want(&m) {
                    Some(v) => return Ok(v),
                    None => skipped += 1,
                }
            }
        }
        Err(Error::ControlPlane {
            detail: format!(
                "{server} did not answer {:?} within {} ms ({skipped} other datagrams)",
                msg.kind(),
                within.as_millis()
            ),
        })
    }

    /// The QPU side, step 1: HELLO until HELLO_ACK; returns qfwd's endpoint (connect the
    /// QP to it, then [`start`](Self::start)).
    pub fn hello(
        &mut self,
        server: SocketAddr,
        ours: &Endpoint,
        within: Duration,
        retry: Duration,
    ) -> Result<Endpoint> {
        self.request(server, &Message::Hello(*ours), within, retry, |m| match m {
            Message::HelloAck(e) => Some(*e),
            _ => None,
        })
    }

    /// The QPU side, step 2: START until acknowledged.
    pub fn start(
        &mut self,
        server: SocketAddr,
        session: u64,
        within: Duration,
        retry: Duration,
    ) -> Result<()> {
        self.request(
            server,
            &Message::Start { session },
            within,
            retry,
            |m| match m {
                Message::Ack {
                    session: s,
                    kind: kind::START,
                } if *s == session => Some(()),
                _ => None,
            },
        )
    }

    /// STOP until acknowledged (either side may send it).
    pub fn stop(
        &mut self,
        peer: SocketAddr,
        session: u64,
        within: Duration,
        retry: Duration,
    ) -> Result<()> {
        self.request(
            peer,
            &Message::Stop { session },
            within,
            retry,
            |m| match m {
                Message::Ack {
                    session: s,
                    kind: kind::STOP,
                } if *s == session => Some(()),
                _ => None,
            },
        )
    }

    /// Answers a STOP if one is waiting (non-blocking); returns its session.
    pub fn poll_stop(&mut self) -> Result<Option<u64>> {
        let mut skipped = 0;
        match self.recv_until(Instant::now() + Duration::from_micros(1), &mut skipped)? {
            Some((Message::Stop { session }, from)) => {
                self.send(
                    from,
                    &Message::Ack {
                        session,
                        kind: kind::STOP,
                    },
                )?;
                Ok(Some(session))
            }
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn endpoint() -> impl Strategy<Value = Endpoint> {
        (
            any::<(u32, u32, [u8; 16], u16, u8, u8)>(),
            any::<(u64, u32, u32, u32)>(),
        )
            .prop_map(
                |((qpn, psn, gid, lid, mtu, gid_index), (ring_addr, rkey, slots, slot_bytes))| {
                    Endpoint {
                        qpn,
                        psn,
                        gid,
                        lid,
                        mtu,
                        gid_index,
                        ring_addr,
                        rkey,
                        slots,
                        slot_bytes,
                    }
                },
            )
    }

    fn message() -> impl Strategy<Value = Message> {
        prop_oneof![
            endpoint().prop_map(Message::Hello),
            endpoint().prop_map(Message::HelloAck),
            any::<u64>().prop_map(|session| Message::Start { session }),
            any::<u64>().prop_map(|session| Message::Stop { session }),
            (any::<u64>(), any::<u8>()).prop_map(|(session, kind)| Message::Ack { session, kind }),
            (any::<u32>(), "[a-z ]{0,200}").prop_map(|(code, text)| Message::Error { code, text }),
        ]
    }

    proptest! {
        #[test]
        fn messages_round_trip(m in message()) {
            let mut buf = [0u8; MAX_LEN];
            let n = m.encode(&mut buf).unwrap();
            prop_assert_eq!(n, m.len());
            prop_assert_eq!(Message::parse(&buf[..n]).unwrap(), m);
        }

        #[test]
        fn parser_never_panics_and_what_parses_re_encodes(bytes in proptest::collection::vec(any::<u8>(), 0..260)) {
            if let Ok(m) = Message::parse(&bytes) {
                let mut buf = [0u8; MAX_LEN];
                let n = m.encode(&mut buf).unwrap();
                prop_assert_eq!(&buf[..n], &bytes[..]);
            }
        }
    }

    #[test]
    fn rejects_what_it_should() {
        let mut buf = [0u8; MAX_LEN];
        let n = Message::Start { session: 9 }.encode(&mut buf).unwrap();
        assert_eq!(
            Message::parse(&buf[..3]),
            Err(ControlError::Truncated { len: 3 })
        );
        assert!(matches!(
            Message::parse(&buf[..n - 1]),
            Err(ControlError::Length { .. })
        ));
        let mut bad = buf;
        bad[4] = 2;
        assert_eq!(
            Message::parse(&bad[..n]),
            Err(ControlError::Version { found: 2 })
        );
        let mut bad = buf;
        bad[5] = 99;
        assert_eq!(
            Message::parse(&bad[..n]),
            Err(ControlError::UnknownKind { found: 99 })
        );
        let mut bad = buf;
        bad[0] = 0;
        assert!(matches!(
            Message::parse(&bad[..n]),
            Err(ControlError::BadMagic { .. })
        ));
        let long = Message::Error {
            code: 1,
            text: "x".repeat(201),
        };
        assert_eq!(long.encode(&mut buf), Err(ControlError::BadText));
    }

    #[test]
    fn handshake_over_loopback() {
        let mut server = ControlSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = server.local_addr().unwrap();
        let ours = Endpoint {
            qpn: 0x1c0,
            ring_addr: 0x7f00_0000_1000,
            rkey: 0x1234,
            slots: 64,
            slot_bytes: 4160,
            mtu: 5,
            ..Default::default()
        };
        let qpu = Endpoint {
            qpn: 0x99,
            psn: 7,
            gid: [0xfe; 16],
            ..Default::default()
        };
        let t = std::thread::spawn(move || {
            let mut c = ControlSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
            let (within, retry) = (Duration::from_secs(10), Duration::from_millis(50));
            let theirs = c.hello(addr, &qpu, within, retry).unwrap();
            c.start(addr, 42, within, retry).unwrap();
            theirs
        });
        let mut hellos = 0;
        let (peer, _, session) = server
            .accept(&ours, Duration::from_secs(10), |e| {
                hellos += 1;
                assert_eq!(*e, qpu);
                Ok(())
            })
            .unwrap();
        assert_eq!((peer, session, hellos), (qpu, 42, 1));
        assert_eq!(t.join().unwrap(), ours);
    }

    #[test]
    fn accept_times_out_with_a_clear_error() {
        let mut server = ControlSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let e = server
            .accept(&Endpoint::default(), Duration::from_millis(30), |_| Ok(()))
            .unwrap_err();
        assert!(
            e.to_string().contains("no QPU completed HELLO/START"),
            "{e}"
        );
    }
}
