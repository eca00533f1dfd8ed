//! The mailbox protocol end to end, host side against the CPU double of the persistent
//! kernel (no GPU needed): round trips, wrap-around, full ring, oversized requests, torn
//! writes both ways, stop sentinel, stall control, several requests in flight, both
//! `rx_completion` modes.

use std::time::{Duration, Instant};

use qfwd::backend::{Backend, Topology};
use qfwd::handler::{parity, Handler};
use qfwd::mailbox::layout::{device_code, tag_for, CHUNK_BYTES, MAX_STALL_US};
use qfwd::mailbox::protocol;
use qfwd::mailbox::{
    CpuDouble, Layout, MailboxBackend, MailboxDevice, PollerCounters, RxCompletion,
};
use qfwd::shm::SharedRegion;
use qfwd::wire::status;

const WAIT: Duration = Duration::from_secs(10);

fn layout(slots: usize, max_arg: usize, rx: RxCompletion) -> Layout {
    Layout::new(slots, Layout::req_slot_bytes_for(max_arg, rx), 64, rx).unwrap()
}

fn backend(
    slots: usize,
    max_arg: usize,
    rx: RxCompletion,
    pollers: usize,
) -> MailboxBackend<CpuDouble> {
    MailboxBackend::new(CpuDouble::start(layout(slots, max_arg, rx), pollers).unwrap())
}

type Done = (u32, i32, Vec<u8>);

/// Polls until `n` completions arrived (or panics at the deadline), yielding while idle.
fn collect<B: Backend>(b: &mut B, n: usize) -> Vec<Done> {
    let deadline = Instant::now() + WAIT;
    let mut got = Vec::new();
    while got.len() < n {
        assert!(
            Instant::now() < deadline,
            "only {} of {n} completions",
            got.len()
        );
        if b.poll(|c| got.push((c.token, c.status, c.result.to_vec()))) == 0 {
            std::thread::yield_now();
        }
    }
    got
}

/// Polls for `window` and returns what completed (expected: nothing).
fn poll_for<B: Backend>(b: &mut B, window: Duration) -> Vec<Done> {
    let until = Instant::now() + window;
    let mut got = Vec::new();
    while Instant::now() < until {
        b.poll(|c| got.push((c.token, c.status, c.result.to_vec())));
        std::thread::yield_now();
    }
    got
}

fn arg_of(seed: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed as usize * 31 + i * 7 + 3) as u8)
        .collect()
}

#[test]
fn round_trip_in_both_modes_for_every_length() {
    for rx in RxCompletion::ALL {
        let mut b = backend(8, 1024, rx, 1);
        assert_eq!(b.topology(), Topology::GpuPersistent);
        assert!(b.max_arg_len() >= 1024);
        for len in [0usize, 1, 4, 11, 12, 13, 31, 32, 100, 1024] {
            let arg = arg_of(len as u32, len);
            b.submit(len as u32, &Handler::Parity, &arg).unwrap();
            assert_eq!(
                collect(&mut b, 1),
                vec![(len as u32, 0, vec![parity(&arg)])],
                "{rx} {len}"
            );
        }
        let counters = b.shutdown(WAIT).unwrap();
        assert_eq!(PollerCounters::total(&counters).served, 10);
    }
}

#[test]
fn wraps_around_many_times_with_several_in_flight() {
    for rx in RxCompletion::ALL {
        let mut b = backend(4, 64, rx, 2);
        let mut expected = std::collections::HashMap::new();
        let mut done = 0usize;
        let total = 5_000u32;
        let mut next = 0u32;
        let deadline = Instant::now() + WAIT * 3;
        while done < total as usize {
            assert!(Instant::now() < deadline, "{rx}: stuck at {done}");
            while next < total {
                let arg = arg_of(next, (next % 60) as usize);
                match b.submit(next, &Handler::Parity, &arg) {
                    Ok(()) => {
                        expected.insert(next, parity(&arg));
                        next += 1;
                    }
                    Err(code) => {
                        assert_eq!(code, status::OVERLOAD);
                        break;
                    }
                }
            }
            let n = b.poll(|c| {
                assert_eq!(c.status, 0);
                let want = expected
                    .remove(&c.token)
                    .expect("unknown or duplicate token");
                assert_eq!(c.result, &[want]);
            });
            done += n;
            if n == 0 {
                std::thread::yield_now();
            }
        }
        assert!(expected.is_empty());
        assert_eq!(b.in_flight(), 0);
        let c = PollerCounters::total(&b.shutdown(WAIT).unwrap());
        assert_eq!(c.served, total as u64, "{rx}");
    }
}

/// Pollers in groups (each group serves every G-th request), with and without several
/// pollers per slot, keep every request exactly once across many laps.
#[test]
fn grouped_pollers_serve_every_request_once() {
    for (pollers, per_slot) in [(2, 1), (4, 2), (3, 3)] {
        for rx in RxCompletion::ALL {
            let l = layout(5, 64, rx);
            let double = CpuDouble::start_grouped(l, pollers, per_slot).unwrap();
            let mut b = MailboxBackend::new(double);
            let total = 3_000u32;
            let (mut next, mut done) = (0u32, 0usize);
            let mut expected = std::collections::HashMap::new();
            let deadline = Instant::now() + WAIT * 3;
            while done < total as usize {
                assert!(
                    Instant::now() < deadline,
                    "{pollers}/{per_slot} {rx}: stuck at {done}"
                );
                while next < total {
                    let arg = arg_of(next, (next % 50) as usize);
                    if b.submit(next, &Handler::Parity, &arg).is_err() {
                        break;
                    }
                    expected.insert(next, parity(&arg));
                    next += 1;
                }
                let n = b.poll(|c| {
                    assert_eq!(c.status, 0);
                    assert_eq!(c.result, &[expected.remove(&c.token).expect("duplicate")]);
                });
                done += n;
                if n == 0 {
                    std::thread::yield_now();
                }
            }
            assert_eq!(b.device().claimed(), total as u64);
            let counters = b.shutdown(WAIT).unwrap();
            assert_eq!(counters.len(), pollers);
            assert_eq!(PollerCounters::total(&counters).served, total as u64);
        }
    }
    assert!(CpuDouble::start_grouped(layout(2, 16, RxCompletion::Inline), 4, 3).is_err());
}

#[test]
fn full_ring_is_overload_and_frees_after_poll() {
    let mut b = backend(3, 16, RxCompletion::Inline, 1);
    // A stall holds the first slot, so nothing completes meanwhile.
    b.submit_stall(100, MAX_STALL_US).unwrap();
    b.submit(1, &Handler::Parity, &[1]).unwrap();
    b.submit(2, &Handler::Parity, &[3]).unwrap();
    assert_eq!(b.in_flight(), 3);
    assert_eq!(b.submit(3, &Handler::Parity, &[1]), Err(status::OVERLOAD));
    b.release_stalls();
    let mut got = collect(&mut b, 3);
    got.sort();
    assert_eq!(
        got,
        vec![(1, 0, vec![1]), (2, 0, vec![0]), (100, 0, vec![])]
    );
    assert_eq!(b.submit(3, &Handler::Parity, &[1]), Ok(()));
    assert_eq!(collect(&mut b, 1), vec![(3, 0, vec![1])]);
}

#[test]
fn oversized_is_refused_not_truncated() {
    for rx in RxCompletion::ALL {
        let mut b = backend(2, 40, rx, 1);
        let max = b.max_arg_len();
        assert_eq!(
            b.submit(1, &Handler::Parity, &vec![1u8; max + 1]),
            Err(status::OVERSIZED)
        );
        assert_eq!(b.in_flight(), 0);
        let arg = vec![1u8; max];
        b.submit(2, &Handler::Parity, &arg).unwrap();
        assert_eq!(collect(&mut b, 1), vec![(2, 0, vec![parity(&arg)])]);
    }
}

#[test]
fn unknown_device_code_gets_unknown_function() {
    let mut b = backend(2, 16, RxCompletion::Inline, 1);
    b.submit_code(5, 0x1234, &[1, 2]).unwrap();
    assert_eq!(
        collect(&mut b, 1),
        vec![(5, status::UNKNOWN_FUNCTION, vec![])]
    );
}

/// The double sees nothing until every chunk carries the tag; a request left with one stale
/// chunk is never served, whichever chunk it is.
#[test]
fn torn_inline_request_is_never_accepted() {
    let l = layout(2, 200, RxCompletion::Inline);
    let arg = arg_of(9, 150);
    let chunks = (8 + arg.len()).div_ceil(12); // 14
    for missing in [0, 1, 7, chunks - 1] {
        let double = CpuDouble::start(l, 1).unwrap();
        let r = double.region();
        // Seq 2 (lap 1, tag 2) in slot 0, written over a complete lap-0 request: the stale
        // chunk carries the previous lap's tag.
        protocol::write_request(r, &l, 0, tag_for(0, 2), device_code::PARITY, &arg);
        protocol::write_request(r, &l, 1, tag_for(1, 2), device_code::PARITY, &arg);
        let deadline = Instant::now() + WAIT;
        while double.claimed() < 2 {
            assert!(Instant::now() < deadline);
            std::thread::yield_now();
        }
        let tag = tag_for(2, 2);
        assert_eq!(tag, 2);
        protocol::write_request_chunks(r, &l, 0, tag, device_code::PARITY, &arg, |k| k != missing);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(double.claimed(), 2, "accepted with chunk {missing} stale");
        // Complete it: now it is served.
        protocol::write_request_chunks(r, &l, 0, tag, device_code::PARITY, &arg, |k| k == missing);
        let mut out = vec![0u8; l.max_result_len()];
        let got = loop {
            if let Some(got) = protocol::read_response(r, &l, 0, tag, &mut out) {
                break got;
            }
            assert!(Instant::now() < deadline);
            std::thread::yield_now();
        };
        assert_eq!(got, (0, 1));
        assert_eq!(out[0], parity(&arg));
    }
}

/// Buffer mode: a payload without its flag is not a request; the flag makes it one.
#[test]
fn buffer_payload_waits_for_its_flag() {
    let l = layout(2, 64, RxCompletion::Buffer);
    let double = CpuDouble::start(l, 1).unwrap();
    let r = double.region();
    let tag = tag_for(0, l.slots());
    let arg = arg_of(4, 40);
    protocol::write_request_chunks(r, &l, 0, tag, device_code::PARITY, &arg, |k| {
        k != usize::MAX
    });
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(double.claimed(), 0);
    protocol::write_request_chunks(r, &l, 0, tag, device_code::PARITY, &arg, |k| {
        k == usize::MAX
    });
    let deadline = Instant::now() + WAIT;
    let mut out = vec![0u8; l.max_result_len()];
    while protocol::read_response(r, &l, 0, tag, &mut out).is_none() {
        assert!(Instant::now() < deadline);
        std::thread::yield_now();
    }
    assert_eq!(out[0], parity(&arg));
}

/// A device side that never answers by itself: the test writes responses by hand.
struct ManualDevice {
    memory: SharedRegion,
    layout: Layout,
}

impl MailboxDevice for ManualDevice {
    fn region(&self) -> &SharedRegion {
        &self.memory
    }
    fn layout(&self) -> Layout {
        self.layout
    }
    fn topology(&self) -> Topology {
        Topology::GpuPersistent
    }
    fn stop(&mut self) {}
    fn wait(&mut self, _deadline: Instant) -> qfwd::Result<Vec<PollerCounters>> {
        Ok(Vec::new())
    }
}

/// The host accepts a response only when every chunk carries the tag, and never a stale
/// one from the previous lap of the slot.
#[test]
fn torn_or_stale_response_is_never_accepted() {
    let l = Layout::new(2, 64, 128, RxCompletion::Inline).unwrap(); // results up to 88 B
    let mut b = MailboxBackend::new(ManualDevice {
        memory: SharedRegion::heap(l.total_bytes()).unwrap(),
        layout: l,
    });
    let result: Vec<u8> = (0..80).collect(); // 8 chunks
    let chunks = (8 + result.len()).div_ceil(12);
    for missing in 0..chunks {
        let seq = missing as u64;
        let slot = (seq % 2) as usize;
        let tag = tag_for(seq, 2);
        b.submit(seq as u32, &Handler::Parity, &[1]).unwrap();
        // From seq 2 on, the previous lap's complete response is still in the slot.
        assert!(poll_for(&mut b, Duration::from_millis(2)).is_empty());
        let r = b.device().region();
        protocol::write_response_chunks(r, &l, slot, tag, 0, &result, |k| k != missing);
        assert!(
            poll_for(&mut b, Duration::from_millis(2)).is_empty(),
            "accepted with chunk {missing} missing"
        );
        let r = b.device().region();
        protocol::write_response_chunks(r, &l, slot, tag, 0, &result, |k| k == missing);
        assert_eq!(collect(&mut b, 1), vec![(seq as u32, 0, result.clone())]);
    }
    // A response whose later chunks carry another lap's tag is refused too.
    let seq = chunks as u64;
    let slot = (seq % 2) as usize;
    b.submit(77, &Handler::Parity, &[1]).unwrap();
    let r = b.device().region();
    protocol::write_response_chunks(r, &l, slot, tag_for(seq, 2), 0, &result, |k| k == 0);
    protocol::write_response_chunks(r, &l, slot, tag_for(seq + 2, 2), 0, &result, |k| k != 0);
    assert_eq!(
        r.load_words(l.resp_offset(slot) + CHUNK_BYTES)[3],
        tag_for(seq + 2, 2)
    );
    assert!(poll_for(&mut b, Duration::from_millis(2)).is_empty());
}

#[test]
fn stop_sentinel_stops_every_poller_and_refuses_later_work() {
    for rx in RxCompletion::ALL {
        let mut b = backend(4, 16, rx, 3);
        b.submit(1, &Handler::Parity, &[1]).unwrap();
        assert_eq!(collect(&mut b, 1).len(), 1);
        let counters = b.shutdown(WAIT).unwrap();
        assert_eq!(counters.len(), 3);
        assert_eq!(PollerCounters::total(&counters).served, 1);
        assert_eq!(
            b.submit(2, &Handler::Parity, &[1]),
            Err(status::SHUTTING_DOWN)
        );
    }
}

/// One poller: a stalled request holds everything behind it until released.
#[test]
fn stall_blocks_a_single_poller_until_released() {
    let mut b = backend(8, 16, RxCompletion::Inline, 1);
    b.submit_stall(1, MAX_STALL_US).unwrap();
    b.submit(2, &Handler::Parity, &[7]).unwrap();
    assert!(poll_for(&mut b, Duration::from_millis(100)).is_empty());
    b.release_stalls();
    let mut got = collect(&mut b, 2);
    got.sort();
    assert_eq!(got, vec![(1, 0, vec![]), (2, 0, vec![1])]);
    b.shutdown(WAIT).unwrap();
}

/// Several pollers: a stalled request misses any deadline while the others are served;
/// stop still works (it releases the stall). Also with the stall's group of one poller
/// stuck and another group serving.
#[test]
fn stall_leaves_other_requests_unaffected_with_several_pollers() {
    for (rx, pollers, per_slot) in [
        (RxCompletion::Inline, 2, 2),
        (RxCompletion::Buffer, 2, 2),
        (RxCompletion::Inline, 4, 2),
    ] {
        let l = layout(16, 16, rx);
        let mut b = MailboxBackend::new(CpuDouble::start_grouped(l, pollers, per_slot).unwrap());
        b.submit_stall(1, MAX_STALL_US).unwrap();
        for t in 2..10u32 {
            b.submit(t, &Handler::Parity, &[t as u8]).unwrap();
        }
        let got = collect(&mut b, 8);
        assert!(got.iter().all(|&(t, s, _)| t != 1 && s == 0), "{rx}");
        assert!(poll_for(&mut b, Duration::from_millis(50)).is_empty());
        assert_eq!(b.in_flight(), 1);
        let start = Instant::now();
        b.shutdown(WAIT).unwrap();
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}

/// A stall ends by itself after its time (bounded), without release.
#[test]
fn stall_is_bounded_by_its_duration() {
    let mut b = backend(2, 16, RxCompletion::Inline, 1);
    let start = Instant::now();
    b.submit_stall(1, 30_000).unwrap();
    assert_eq!(collect(&mut b, 1), vec![(1, 0, vec![])]);
    assert!(start.elapsed() >= Duration::from_millis(30));
}

#[test]
fn several_requests_in_flight_complete_once_each() {
    for rx in RxCompletion::ALL {
        let mut b = backend(16, 256, rx, 3);
        let args: Vec<Vec<u8>> = (0..16).map(|i| arg_of(i, (i * 13) as usize)).collect();
        for (i, a) in args.iter().enumerate() {
            b.submit(i as u32, &Handler::Parity, a).unwrap();
        }
        assert_eq!(b.in_flight(), 16);
        let mut got = collect(&mut b, 16);
        got.sort();
        let want: Vec<Done> = args
            .iter()
            .enumerate()
            .map(|(i, a)| (i as u32, 0, vec![parity(a)]))
            .collect();
        assert_eq!(got, want, "{rx}");
        assert_eq!(b.in_flight(), 0);
    }
}
