//! Hostile datagrams the emulator can mix into its load (`hostile_percent`): what a
//! confused or malicious peer sends a forwarder. Each kind has a known fate: dropped and
//! counted (no answer), or answered once with a given error status.
//!
//! | kind | what | the forwarder |
//! |---|---|---|
//! | truncated | 1-23 bytes | drops it (`truncated_header`) |
//! | bad magic | 24-87 bytes, not CUQR | drops it (`bad_magic`) |
//! | length mismatch | header says 3 bytes more than follow | answers -3 |
//! | unknown function | a function nobody serves | answers -4 |
//! | oversized | header claims 4 GiB | answers -5 |
//! | bad argument | the workload's own function, an argument it refuses (decoders) | answers 1 |
//!
//! A request id with the top bit set marks a hostile datagram (the timed requests use ids
//! below 2^31), so its answer is told apart and checked against its kind.
#![forbid(unsafe_code)]

use qfwd::wire::{self, status, HEADER_LEN};

/// Request ids at and above this belong to hostile datagrams.
pub const HOSTILE_ID_BASE: u32 = 0x8000_0000;

/// The kinds, in the order they are cycled through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Truncated,
    BadMagic,
    LengthMismatch,
    UnknownFunction,
    Oversized,
    BadArgument,
}

impl Kind {
    const ALL: [Kind; 6] = [
        Kind::Truncated,
        Kind::BadMagic,
        Kind::LengthMismatch,
        Kind::UnknownFunction,
        Kind::Oversized,
        Kind::BadArgument,
    ];

    /// The status the forwarder answers with; `None`: no answer (dropped).
    pub fn answer(self) -> Option<i32> {
        match self {
            Kind::Truncated | Kind::BadMagic => None,
            Kind::LengthMismatch => Some(status::LENGTH_MISMATCH),
            Kind::UnknownFunction => Some(status::UNKNOWN_FUNCTION),
            Kind::Oversized => Some(status::OVERSIZED),
            Kind::BadArgument => Some(status::BAD_ARGUMENT),
        }
    }
}

/// Builds the `k`-th hostile datagram and knows each one's expected fate.
pub struct Hostile {
    kinds: Vec<Kind>,
    function_id: u32,
    bad_argument: Option<Vec<u8>>,
    buf: Vec<u8>,
}

impl Hostile {
    /// For a workload calling `function_id`; `bad_argument`: an argument that function
    /// refuses with `BAD_ARGUMENT` (without one, that kind is left out).
    pub fn new(function_id: u32, bad_argument: Option<Vec<u8>>) -> Hostile {
        let kinds = Kind::ALL
            .into_iter()
            .filter(|k| *k != Kind::BadArgument || bad_argument.is_some())
            .collect();
        let room = HEADER_LEN + 88 + bad_argument.as_ref().map_or(0, Vec::len);
        Hostile {
            kinds,
            function_id,
            bad_argument,
            buf: vec![0; room],
        }
    }

    /// The kind of hostile datagram number `k`.
    pub fn kind(&self, k: u32) -> Kind {
        self.kinds[k as usize % self.kinds.len()]
    }

    /// The kind of the datagram whose answer carries `request_id` (a hostile id).
    pub fn kind_of_id(&self, request_id: u32) -> Kind {
        self.kind(request_id - HOSTILE_ID_BASE)
    }

    /// Hostile datagram number `k` (`k` < 2^31).
    pub fn datagram(&mut self, k: u32) -> &[u8] {
        let id = HOSTILE_ID_BASE | k;
        // Bytes that vary with k, so no two are alike.
        let filler = |i: usize| (k as usize).wrapping_mul(31).wrapping_add(i * 7) as u8;
        let kind = self.kind(k);
        let b = &mut self.buf;
        let n = match kind {
            Kind::Truncated => {
                let n = 1 + k as usize % (HEADER_LEN - 1);
                for (i, x) in b[..n].iter_mut().enumerate() {
                    *x = filler(i);
                }
                n
            }
            Kind::BadMagic => {
                let n = HEADER_LEN + k as usize % 64;
                for (i, x) in b[..n].iter_mut().enumerate() {
                    *x = filler(i);
                }
                // Anything but the request magic.
                b[..4].copy_from_slice(&(wire::REQUEST_MAGIC ^ (1 + k % 0xffff)).to_le_bytes());
                n
            }
            Kind::LengthMismatch => {
                let n = request(b, self.function_id, id, &[1, 2, 3, 4]);
                b[8..12].copy_from_slice(&7u32.to_le_bytes());
                n
            }
            Kind::UnknownFunction => request(b, wire::function_id("qfwd-hostile"), id, &[9]),
            Kind::Oversized => {
                let n = request(b, self.function_id, id, &[0; 16]);
                b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
                n
            }
            Kind::BadArgument => {
                let arg = self.bad_argument.as_deref().unwrap_or_default();
                let n = HEADER_LEN + arg.len();
                wire::write_request(&mut b[..n], self.function_id, id, 0, arg)
                    .expect("sized for the argument")
            }
        };
        &self.buf[..n]
    }
}

fn request(buf: &mut [u8], function_id: u32, id: u32, arg: &[u8]) -> usize {
    wire::write_request(buf, function_id, id, 0, arg).expect("room for a small request")
}

#[cfg(test)]
mod tests {
    use super::*;
    use qfwd::handler::Registry;

    #[test]
    fn every_kind_meets_its_fate_in_a_forwarder() {
        use qfwd::backend::CpuBackend;
        use qfwd::forward::{ForwardConfig, Forwarder};
        use qfwd::transport::{inproc, Client};
        let (mut client, server) = inproc::channel(64, 8192).unwrap();
        let config = ForwardConfig::default();
        let backend = CpuBackend::new(config.batch, config.max_request_bytes);
        let mut fwd = Forwarder::new(server, backend, Registry::with_parity(), config);
        // Parity takes any argument: no bad-argument kind.
        let mut h = Hostile::new(wire::function_id("parity"), None);
        let mut buf = [0u8; 256];
        for k in 0..40 {
            let kind = h.kind(k);
            assert!(client.send(h.datagram(k)).unwrap());
            fwd.poll_once().unwrap();
            match (kind.answer(), client.try_recv(&mut buf).unwrap()) {
                (None, None) => {}
                (Some(code), Some(n)) => {
                    let r = wire::parse_response(&buf[..n]).unwrap();
                    assert_eq!(r.header.request_id, HOSTILE_ID_BASE | k);
                    assert_eq!(h.kind_of_id(r.header.request_id), kind);
                    assert_eq!(r.header.status, code, "{kind:?}");
                }
                (want, got) => panic!("{kind:?}: want {want:?}, got {got:?}"),
            }
        }
        assert!(fwd.stats().adds_up());
        assert!(!h.kinds.contains(&Kind::BadArgument));
        let h = Hostile::new(1, Some(vec![0; 5]));
        assert_eq!(h.kind(5), Kind::BadArgument);
    }
}
