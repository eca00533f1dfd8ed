//! Any sequence of datagrams through the forwarder's whole receive path (allowlist, queue
//! deadline, header parse, size and function checks, the cpu backend running parity and a
//! uf decoder, the response), one at a time. Never a panic; every datagram is counted once
//! (`received` = answered + dropped); a datagram from an allowed peer whose header parses
//! gets exactly one response, echoing its request_id and timestamp, anything else none;
//! a whole request that waited past the queue deadline is answered `OVERLOAD` (a
//! malformed one gets its own error status); a parity answer
//! is the argument's parity.
//!
//! Input: records of `[len_lo, len_hi, flags, bytes...]`; `flags & 3` is the peer (3 is
//! outside the allowlist), `flags & 4` marks a datagram that waited past the deadline.
#![no_main]

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use qfwd::backend::CpuBackend;
use qfwd::decode::dem::chain_text;
use qfwd::decode::{Decoder, DecoderKind};
use qfwd::forward::{ForwardConfig, Forwarder};
use qfwd::handler::{parity, Handler, Registry};
use qfwd::stats::Stats;
use qfwd::transport::{realtime_ns, Transport};
use qfwd::wire::{self, status, HEADER_LEN};

const MAX_REQUEST_BYTES: usize = 64;
const DEADLINE: Duration = Duration::from_millis(10);

#[derive(Default)]
struct Wire {
    queue: VecDeque<(Vec<u8>, u8, Option<u64>)>,
    sent: Vec<(u8, Vec<u8>)>,
    arrival: Option<u64>,
}

impl Transport for Wire {
    type Peer = u8;
    fn name(&self) -> &'static str {
        "fuzz"
    }
    fn try_recv(&mut self, buf: &mut [u8]) -> qfwd::Result<Option<(usize, u8)>> {
        let Some((d, peer, arrival)) = self.queue.pop_front() else {
            return Ok(None);
        };
        let n = d.len().min(buf.len());
        buf[..n].copy_from_slice(&d[..n]);
        self.arrival = arrival;
        Ok(Some((d.len(), peer)))
    }
    fn is_allowed(&self, peer: &u8) -> bool {
        *peer != 3
    }
    fn send(&mut self, peer: u8, bytes: &[u8]) -> qfwd::Result<()> {
        self.sent.push((peer, bytes.to_vec()));
        Ok(())
    }
    fn last_arrival_ns(&self) -> Option<u64> {
        self.arrival
    }
}

fn registry() -> Registry {
    static DECODER: OnceLock<Arc<Decoder>> = OnceLock::new();
    let d = DECODER.get_or_init(|| {
        Arc::new(Decoder::from_dem_text(&chain_text(5), "chain5", DecoderKind::Uf).unwrap())
    });
    let mut r = Registry::with_parity();
    r.register("decode", Handler::Decoder(d.clone())).unwrap();
    r
}

fn expect_one_answer(d: &[u8], peer: u8) -> bool {
    peer != 3 && wire::parse_request_header(d).is_ok()
}

fn forwarder() -> Forwarder<Wire, CpuBackend> {
    let config = ForwardConfig {
        max_request_bytes: MAX_REQUEST_BYTES,
        max_in_flight: 4,
        batch: 4,
        queue_deadline: Some(DEADLINE),
        ..ForwardConfig::default()
    };
    let backend = CpuBackend::new(config.batch, config.max_request_bytes);
    Forwarder::new(Wire::default(), backend, registry(), config)
}

thread_local! {
    /// One forwarder for every input (a new one costs more than most inputs): its
    /// counters carry over, so each input checks what it added.
    static FORWARDER: std::cell::RefCell<Forwarder<Wire, CpuBackend>> =
        std::cell::RefCell::new(forwarder());
}

fuzz_target!(|data: &[u8]| {
    FORWARDER.with(|f| run(&mut f.borrow_mut(), data));
});

fn run(fwd: &mut Forwarder<Wire, CpuBackend>, data: &[u8]) {
    let received_before = fwd.stats().received;
    let mut rest = data;
    let mut fed = 0u64;
    while rest.len() >= 3 {
        let len = (u16::from_le_bytes([rest[0], rest[1]]) as usize).min(rest.len() - 3);
        let flags = rest[2];
        let d = rest[3..3 + len].to_vec();
        rest = &rest[3 + len..];
        let peer = flags & 3;
        let late = flags & 4 != 0;
        // Late: arrived a second ago; else just now (well inside the deadline).
        let arrival = Some(realtime_ns() - if late { 1_000_000_000 } else { 0 });
        // One datagram in, then every answer out.
        fwd.transport_mut()
            .queue
            .push_back((d.clone(), peer, arrival));
        fed += 1;
        while fwd.poll_once().unwrap() {}
        let answers = std::mem::take(&mut fwd.transport_mut().sent);
        if !expect_one_answer(&d, peer) {
            assert!(
                answers.is_empty(),
                "answered a datagram that is not a request"
            );
            continue;
        }
        assert_eq!(answers.len(), 1, "a request gets exactly one answer");
        let (to, bytes) = &answers[0];
        assert_eq!(*to, peer);
        let r = wire::parse_response(bytes).expect("a CUQS response");
        let h = wire::parse_request_header(&d).unwrap();
        assert_eq!(
            (r.header.request_id, r.header.ptp_timestamp),
            (h.request_id, h.ptp_timestamp)
        );
        let whole = h.arg_len as usize + HEADER_LEN == d.len();
        if late && whole {
            assert_eq!(r.header.status, status::OVERLOAD);
        }
        if r.header.status == status::OK && h.function_id == wire::function_id("parity") {
            assert!(whole);
            assert_eq!(r.result, [parity(&d[HEADER_LEN..])]);
        }
        if !whole {
            assert!(matches!(
                r.header.status,
                status::LENGTH_MISMATCH | status::OVERSIZED | status::OVERLOAD
            ));
        }
    }
    let s: &Stats = fwd.stats();
    assert_eq!(s.received - received_before, fed);
    assert!(s.adds_up(), "{s}");
}
