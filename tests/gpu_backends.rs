//! GPU integration tests of the three GPU topologies at the `Backend` level.
//!
//! They need an NVIDIA GPU and libnvrtc, so they are `#[ignore]`d. Run them on the GPU
//! host with:
//!
//! ```text
//! cargo test --release --test gpu_backends -- --ignored --test-threads=1
//! ```
//!
//! Each test prints a skip notice and passes where no GPU is present. `QFWD_GPU` picks the
//! device (default 0). Tests take a process-wide lock: freeing GPU memory can synchronize
//! the whole context, which a persistent kernel of a concurrent test would hold up.

mod gpu_common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use gpu_common::{gpu_index, gpu_or_skip};
use qfwd::backend::{Backend, Topology};
use qfwd::gpu::{self, GpuOptions};
use qfwd::handler::{parity, Handler};
use qfwd::mailbox::{PollerCounters, RxCompletion};
use qfwd::wire::status;

fn options(rx: RxCompletion, pollers: u32, pollers_per_slot: u32) -> GpuOptions {
    GpuOptions {
        device: gpu_index(),
        rx_completion: rx,
        pollers,
        pollers_per_slot,
        ..GpuOptions::default()
    }
}

/// xorshift64*: reproducible arguments without a rand dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// Submits `n` random requests (1 ..= 1024 B), up to `window` in flight, and checks
/// every completion once.
fn exercise<B: Backend>(b: &mut B, n: u32, window: usize, seed: u64) {
    let mut rng = Rng(seed);
    let mut expected: HashMap<u32, u8> = HashMap::new();
    let mut next = 0u32;
    let mut done = 0u32;
    let deadline = Instant::now() + Duration::from_secs(60);
    while done < n {
        assert!(
            Instant::now() < deadline,
            "{}: stuck at {done}/{n}",
            b.topology()
        );
        while next < n && b.in_flight() < window {
            let len = 1 + (rng.next() % 1024) as usize;
            let arg = rng.bytes(len);
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
        done += b.poll(|c| {
            assert_eq!(c.status, status::OK, "token {}", c.token);
            let want = expected
                .remove(&c.token)
                .expect("unknown or duplicate token");
            assert_eq!(c.result, &[want], "token {}", c.token);
        }) as u32;
    }
    assert!(expected.is_empty());
    assert_eq!(b.in_flight(), 0);
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test gpu_backends -- --ignored"]
fn every_topology_answers_every_request_correctly() {
    let Some(_gpu) = gpu_or_skip("every_topology_answers_every_request_correctly") else {
        return;
    };
    let o = options(RxCompletion::Inline, 4, 2);
    for (i, window) in [1usize, 8].into_iter().enumerate() {
        let mut launch = gpu::launch_backend(&o).unwrap();
        assert_eq!(launch.topology(), Topology::GpuLaunch);
        exercise(&mut launch, 2_000, window, 1 + i as u64);
        assert_eq!(
            launch.submit(1, &Handler::Parity, &vec![0; launch.max_arg_len() + 1]),
            Err(status::OVERSIZED)
        );
        drop(launch);
        let mut graph = gpu::graph_backend(&o).unwrap();
        assert_eq!(graph.topology(), Topology::GpuGraph);
        exercise(&mut graph, 2_000, window, 3 + i as u64);
        drop(graph);
        for rx in RxCompletion::ALL {
            let mut persistent = gpu::persistent_backend(&options(rx, 8, 2)).unwrap();
            assert_eq!(persistent.topology(), Topology::GpuPersistent);
            exercise(&mut persistent, 20_000, window, 5 + i as u64);
            assert_eq!(
                persistent.submit(1, &Handler::Parity, &vec![0; persistent.max_arg_len() + 1]),
                Err(status::OVERSIZED)
            );
            let c = PollerCounters::total(&persistent.shutdown(Duration::from_secs(2)).unwrap());
            assert_eq!(c.served, 20_000, "{rx}");
            eprintln!("  {rx} window {window}: {c:?}");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test gpu_backends -- --ignored"]
fn persistent_kernel_serves_a_million_requests_and_stops_cleanly() {
    let Some(_gpu) = gpu_or_skip("persistent_kernel_serves_a_million_requests_and_stops_cleanly")
    else {
        return;
    };
    const N: u32 = 1_000_000;
    // A table of arguments with known parities keeps the host side cheap.
    let mut rng = Rng(42);
    let table: Vec<(Vec<u8>, u8)> = (0..256)
        .map(|_| {
            let a = rng.bytes(32);
            let p = parity(&a);
            (a, p)
        })
        .collect();
    for rx in RxCompletion::ALL {
        for (pollers, per_slot) in [(1u32, 1u32), (8, 8), (8, 2)] {
            let mut b = gpu::persistent_backend(&options(rx, pollers, per_slot)).unwrap();
            let start = Instant::now();
            let (mut next, mut done, mut wrong) = (0u32, 0u32, 0u32);
            let deadline = start + Duration::from_secs(120);
            while done < N {
                assert!(
                    Instant::now() < deadline,
                    "{rx} {pollers}/{per_slot}: stuck at {done}"
                );
                while next < N && b.in_flight() < 32 {
                    let (arg, _) = &table[(next & 255) as usize];
                    if b.submit(next, &Handler::Parity, arg).is_err() {
                        break;
                    }
                    next += 1;
                }
                done += b.poll(|c| {
                    if c.status != 0 || c.result != [table[(c.token & 255) as usize].1] {
                        wrong += 1;
                    }
                }) as u32;
            }
            let elapsed = start.elapsed();
            assert_eq!(wrong, 0, "{rx} {pollers}/{per_slot}: wrong results");
            let stop = Instant::now();
            let counters = b.shutdown(Duration::from_secs(2)).unwrap();
            let stop = stop.elapsed();
            let c = PollerCounters::total(&counters);
            assert_eq!(c.served, N as u64);
            assert_eq!(counters.len(), pollers as usize);
            eprintln!(
                "  {rx} pollers {pollers}/{per_slot} per slot: {N} requests in {elapsed:.2?} ({:.2} M req/s), \
                 stopped in {stop:.2?}; {c:?}",
                N as f64 / elapsed.as_secs_f64() / 1e6
            );
        }
    }
}

/// A request told to stall misses its deadline while the others are served at full speed;
/// once the ring wraps around to the stalled slot it refuses more (OVERLOAD: the slot is
/// not reused under a request the device may still answer); the kernel still stops.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test gpu_backends -- --ignored"]
fn stalled_request_misses_its_deadline_while_others_are_served() {
    let Some(_gpu) = gpu_or_skip("stalled_request_misses_its_deadline_while_others_are_served")
    else {
        return;
    };
    for (rx, pollers, per_slot) in [
        (RxCompletion::Inline, 4, 4),
        (RxCompletion::Buffer, 4, 4),
        (RxCompletion::Inline, 8, 2),
    ] {
        let o = options(rx, pollers, per_slot);
        let slots = o.slots as u32;
        let mut b = gpu::persistent_backend(&o).unwrap();
        let deadline = Duration::from_millis(5);
        let stalled_at = Instant::now();
        b.submit_stall(u32::MAX, 10_000_000).unwrap();
        let mut worst = Duration::ZERO;
        for t in 0..slots - 1 {
            let arg = [t as u8; 32];
            let sent = Instant::now();
            b.submit(t, &Handler::Parity, &arg).unwrap();
            let mut got = None;
            while got.is_none() {
                assert!(
                    sent.elapsed() < Duration::from_secs(1),
                    "{rx}: request {t} stuck"
                );
                b.poll(|c| {
                    assert_ne!(c.token, u32::MAX, "the stall completed early");
                    got = Some((c.token, c.status, c.result.to_vec()));
                });
            }
            worst = worst.max(sent.elapsed());
            assert_eq!(got, Some((t, 0, vec![parity(&arg)])));
        }
        assert!(
            worst < deadline,
            "{rx}: a request took {worst:?} beside the stall"
        );
        assert_eq!(
            b.submit(0, &Handler::Parity, &[1]),
            Err(status::OVERLOAD),
            "the ring wrapped onto the stalled slot"
        );
        // Keep polling past the stalled request's deadline: it does not complete (a
        // watchdog would answer it with DECODER_TIMEOUT) and stays in flight.
        while stalled_at.elapsed() < 2 * deadline {
            b.poll(|c| panic!("token {} completed during the stall", c.token));
        }
        assert_eq!(b.in_flight(), 1);
        let stop = Instant::now();
        let counters = b.shutdown(Duration::from_secs(2)).unwrap();
        eprintln!(
            "  {rx} {pollers}/{per_slot}: worst neighbour {worst:?}; stopped in {:?} with the \
             stall pending; {:?}",
            stop.elapsed(),
            PollerCounters::total(&counters)
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: cargo test --release --test gpu_backends -- --ignored"]
fn stall_release_completes_the_stalled_request() {
    let Some(_gpu) = gpu_or_skip("stall_release_completes_the_stalled_request") else {
        return;
    };
    let mut b = gpu::persistent_backend(&options(RxCompletion::Inline, 2, 2)).unwrap();
    b.submit_stall(7, 10_000_000).unwrap();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(20) {
        assert_eq!(b.poll(|_| panic!("stall completed before release")), 0);
    }
    b.release_stalls();
    let mut got = None;
    while got.is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "release did not end the stall"
        );
        b.poll(|c| got = Some((c.token, c.status)));
    }
    assert_eq!(got, Some((7, 0)));
    b.shutdown(Duration::from_secs(2)).unwrap();
}
