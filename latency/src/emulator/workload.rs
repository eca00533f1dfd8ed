//! The requests the emulator sends, each with the answer it expects back.

use qfwd::decode::sample::SplitMix64;
use qfwd::handler::parity;
use qfwd::wire::{self, HEADER_LEN};

/// A pool of requests with their known answers, cycled through by the emulator.
pub struct Workload {
    pub(super) function_id: u32,
    /// Encoded datagrams; request_id and timestamp are patched in before each send.
    pub(super) datagrams: Vec<Vec<u8>>,
    pub(super) expected: Vec<Vec<u8>>,
    /// An argument the function refuses with `BAD_ARGUMENT` (for hostile datagrams).
    pub(super) bad_argument: Option<Vec<u8>>,
}

impl Workload {
    /// `count` random arguments of `payload_bytes` bytes for the parity handler.
    pub fn parity(function_name: &str, payload_bytes: usize, count: usize, seed: u64) -> Workload {
        let mut rng = SplitMix64(seed);
        let mut datagrams = Vec::with_capacity(count);
        let mut expected = Vec::with_capacity(count);
        for _ in 0..count.max(1) {
            let arg: Vec<u8> = (0..payload_bytes).map(|_| rng.next_u64() as u8).collect();
            expected.push(vec![parity(&arg)]);
            datagrams.push(encode(wire::function_id(function_name), &arg));
        }
        Workload {
            function_id: wire::function_id(function_name),
            datagrams,
            expected,
            bad_argument: None,
        }
    }

    /// Arbitrary arguments with the answers a reference implementation gave.
    pub fn from_pairs(function_name: &str, pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Workload {
        let fid = wire::function_id(function_name);
        let (datagrams, expected) = pairs.into_iter().map(|(a, e)| (encode(fid, &a), e)).unzip();
        Workload {
            function_id: fid,
            datagrams,
            expected,
            bad_argument: None,
        }
    }

    /// Names an argument the function refuses with `BAD_ARGUMENT`: a hostile load then
    /// sends it too (see [`crate::hostile`]).
    pub fn with_bad_argument(mut self, arg: Vec<u8>) -> Workload {
        self.bad_argument = Some(arg);
        self
    }

    pub fn function_id(&self) -> u32 {
        self.function_id
    }

    /// Argument bytes of the first request (all requests of a workload have the same size).
    pub fn arg_len(&self) -> usize {
        self.datagrams.first().map_or(0, |d| d.len() - HEADER_LEN)
    }

    pub fn len(&self) -> usize {
        self.datagrams.len()
    }

    pub fn is_empty(&self) -> bool {
        self.datagrams.is_empty()
    }

    /// Addresses the k-th request of the pool to `names[k % names.len()]`, spreading the
    /// load round-robin over several functions (patches, routed to several GPUs); the
    /// expected answers do not change. With a pool a multiple of `names.len()` long, the
    /// requests sent go round-robin too. No names: unchanged.
    pub fn spread_over(mut self, names: &[String]) -> Workload {
        if names.is_empty() {
            return self;
        }
        let ids: Vec<u32> = names.iter().map(|n| wire::function_id(n)).collect();
        for (k, d) in self.datagrams.iter_mut().enumerate() {
            // function_id: bytes 4..8 of the CUQR header.
            d[4..8].copy_from_slice(&ids[k % ids.len()].to_le_bytes());
        }
        self.function_id = ids[0];
        self
    }
}

fn encode(function_id: u32, arg: &[u8]) -> Vec<u8> {
    let mut d = vec![0u8; HEADER_LEN + arg.len()];
    wire::write_request(&mut d, function_id, 0, 0, arg).expect("buffer sized for the request");
    d
}
