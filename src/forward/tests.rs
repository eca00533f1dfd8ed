use super::*;
use crate::backend::CpuBackend;
use crate::transport::{inproc, Client};
use crate::wire::function_id;

fn forwarder(
    config: ForwardConfig,
) -> (
    inproc::InprocClient,
    Forwarder<inproc::InprocServer, CpuBackend>,
) {
    let (client, server) = inproc::channel(64, 8192).unwrap();
    let backend = CpuBackend::new(config.batch, config.max_request_bytes);
    (
        client,
        Forwarder::new(server, backend, Registry::with_parity(), config),
    )
}

/// A forwarder over a fresh in-process ring of `slots` slots, with a backend of the
/// test's own.
fn on_ring<B: Backend>(
    slots: usize,
    backend: B,
    config: ForwardConfig,
) -> (inproc::InprocClient, Forwarder<inproc::InprocServer, B>) {
    let (client, server) = inproc::channel(slots, 256).unwrap();
    (
        client,
        Forwarder::new(server, backend, Registry::with_parity(), config),
    )
}

/// Sends a parity request `id` over one argument byte.
fn send_parity(client: &mut inproc::InprocClient, id: u32, arg: u8) {
    let mut buf = [0u8; 64];
    let n = wire::write_request(&mut buf, function_id("parity"), id, 0, &[arg]).unwrap();
    client.send(&buf[..n]).unwrap();
}

fn response(client: &mut inproc::InprocClient) -> Option<Vec<u8>> {
    let mut buf = [0u8; 8192];
    client
        .try_recv(&mut buf)
        .unwrap()
        .map(|n| buf[..n].to_vec())
}

#[test]
fn answers_each_kind_of_request_and_counts_add_up() {
    let (mut client, mut fwd) = forwarder(ForwardConfig {
        max_request_bytes: 100,
        ..Default::default()
    });
    let mut buf = [0u8; 512];
    let parity = function_id("parity");
    // ok
    let n = wire::write_request(&mut buf, parity, 1, 11, &[0b111]).unwrap();
    client.send(&buf[..n]).unwrap();
    // unknown function
    let n = wire::write_request(&mut buf, function_id("nope"), 2, 22, &[1]).unwrap();
    client.send(&buf[..n]).unwrap();
    // length mismatch (one byte cut off)
    let n = wire::write_request(&mut buf, parity, 3, 33, &[1, 2, 3]).unwrap();
    client.send(&buf[..n - 1]).unwrap();
    // oversized
    let n = wire::write_request(&mut buf, parity, 4, 44, &[0; 101]).unwrap();
    client.send(&buf[..n]).unwrap();
    // unparseable: short, bad magic
    client.send(&buf[..10]).unwrap();
    let mut bad = buf;
    bad[0] = 0;
    client.send(&bad[..n]).unwrap();

    for _ in 0..4 {
        fwd.poll_once().unwrap();
    }
    let mut got = vec![];
    while let Some(r) = response(&mut client) {
        let v = wire::parse_response(&r).unwrap();
        got.push((
            v.header.request_id,
            v.header.ptp_timestamp,
            v.header.status,
            v.result.to_vec(),
        ));
    }
    assert_eq!(
        got,
        vec![
            (1, 11, status::OK, vec![1]),
            (2, 22, status::UNKNOWN_FUNCTION, vec![]),
            (3, 33, status::LENGTH_MISMATCH, vec![]),
            (4, 44, status::OVERSIZED, vec![]),
        ]
    );
    let s = fwd.stats();
    assert_eq!(s.received, 6);
    assert_eq!(s.answered_ok, 1);
    assert_eq!(s.answered_error_total(), 3);
    assert_eq!(s.dropped(DropKind::TruncatedHeader), 1);
    assert_eq!(s.dropped(DropKind::BadMagic), 1);
    assert!(s.adds_up());
}

/// A backend that holds its requests until `release` (never, by default: exercises the
/// watchdog and the drain); `submit` takes `submit_time`, and says it computed there
/// when `computes_in_submit`.
#[derive(Default)]
struct Stalled {
    held: Vec<u32>,
    release: bool,
    submit_time: Duration,
    computes_in_submit: bool,
}
impl Backend for Stalled {
    fn topology(&self) -> crate::backend::Topology {
        crate::backend::Topology::Cpu
    }
    fn computes_in_submit(&self) -> bool {
        self.computes_in_submit
    }
    fn submit(&mut self, token: u32, _: &crate::handler::Handler, _: &[u8]) -> Result<(), i32> {
        std::thread::sleep(self.submit_time);
        self.held.push(token);
        Ok(())
    }
    fn poll<F: FnMut(Completion<'_>)>(&mut self, mut done: F) -> usize {
        if !self.release {
            return 0;
        }
        let n = self.held.len();
        for t in self.held.drain(..) {
            done(Completion {
                token: t,
                status: 0,
                result: &[1],
                sent_by_device: false,
            });
        }
        n
    }
    fn in_flight(&self) -> usize {
        self.held.len()
    }
    fn max_arg_len(&self) -> usize {
        64
    }
}

#[test]
fn watchdog_answers_stalled_requests_once_and_late_completions_are_counted() {
    let (mut client, mut fwd) = on_ring(
        8,
        Stalled::default(),
        ForwardConfig {
            watchdog: Duration::from_millis(5),
            max_in_flight: 2,
            ..Default::default()
        },
    );
    for id in 0..3 {
        send_parity(&mut client, id, 1);
    }
    fwd.poll_once().unwrap();
    // Third request: no free token -> overload.
    let r = response(&mut client).unwrap();
    assert_eq!(
        wire::parse_response(&r).unwrap().header.status,
        status::OVERLOAD
    );
    std::thread::sleep(Duration::from_millis(10));
    fwd.watchdog(Instant::now());
    fwd.watchdog(Instant::now());
    for id in 0..2 {
        let r = response(&mut client).unwrap();
        let v = wire::parse_response(&r).unwrap();
        assert_eq!(
            (v.header.request_id, v.header.status),
            (id, status::DECODER_TIMEOUT)
        );
    }
    assert!(
        response(&mut client).is_none(),
        "watchdog must answer only once"
    );
    fwd.backend.release = true;
    fwd.poll_once().unwrap();
    assert!(response(&mut client).is_none());
    assert_eq!(fwd.stats().late_completions, 2);
    assert_eq!(fwd.free_tokens.len(), 2);
    assert!(fwd.stats().adds_up());
}

#[test]
fn service_time_includes_submit_only_for_a_backend_that_computes_there() {
    let submit_time = Duration::from_millis(30);
    for computes_in_submit in [true, false] {
        let backend = Stalled {
            release: true,
            submit_time,
            computes_in_submit,
            ..Default::default()
        };
        let (mut client, mut fwd) = on_ring(8, backend, Default::default());
        send_parity(&mut client, 1, 1);
        fwd.poll_once().unwrap();
        assert!(response(&mut client).is_some());
        let h = &fwd.stats().service_ns;
        assert_eq!(h.len(), 1);
        // The submit's 30 ms is in the service time exactly when it computed there (the
        // reap right after submit takes microseconds, far below 30 ms).
        let includes_submit = h.max() >= submit_time.as_nanos() as u64;
        assert_eq!(
            includes_submit,
            computes_in_submit,
            "service {} ns",
            h.max()
        );
    }
}

#[test]
fn a_request_in_service_across_a_stall_is_counted_and_a_decode_in_submit_is_not_a_stall() {
    let parity = function_id("parity");
    let mut buf = [0u8; 64];
    let n = wire::write_request(&mut buf, parity, 1, 0, &[1]).unwrap();

    // A backend that computes in `submit` for 20 ms: its own work, not a stall.
    let backend = Stalled {
        release: true,
        submit_time: Duration::from_millis(20),
        computes_in_submit: true,
        ..Default::default()
    };
    let (mut client, mut fwd) = on_ring(8, backend, Default::default());
    client.send(&buf[..n]).unwrap();
    fwd.poll_once().unwrap();
    assert!(response(&mut client).is_some());
    assert_eq!((fwd.stats().stalls, fwd.stats().stalled_requests), (0, 0));

    // A device-like backend: the loop reads its clock while the request is in service
    // (as it does every few rounds), then does not run for 20 ms.
    let (mut client, mut fwd) = on_ring(8, Stalled::default(), Default::default());
    client.send(&buf[..n]).unwrap();
    fwd.poll_once().unwrap();
    for _ in 0..8 {
        fwd.clock.read(&mut fwd.stats);
    }
    let before = fwd.stats().stalls;
    std::thread::sleep(Duration::from_millis(20));
    fwd.backend.release = true;
    fwd.poll_once().unwrap();
    assert!(response(&mut client).is_some());
    let s = fwd.stats();
    assert_eq!(s.stalls, before + 1, "the 20 ms gap ended at the answer");
    assert_eq!(s.stalled_requests, 1);
    assert!(s.to_string().contains("forwarder stalls: "), "{s}");
}

/// Completes requests whose first argument byte is non-zero at the next poll; holds
/// the others forever.
#[derive(Default)]
struct Selective {
    held: Vec<u32>,
    ready: Vec<u32>,
}
impl Backend for Selective {
    fn topology(&self) -> crate::backend::Topology {
        crate::backend::Topology::Cpu
    }
    fn submit(&mut self, token: u32, _: &crate::handler::Handler, arg: &[u8]) -> Result<(), i32> {
        if arg.first().copied().unwrap_or(0) == 0 {
            self.held.push(token);
        } else {
            self.ready.push(token);
        }
        Ok(())
    }
    fn poll<F: FnMut(Completion<'_>)>(&mut self, mut done: F) -> usize {
        let n = self.ready.len();
        for t in self.ready.drain(..) {
            done(Completion {
                token: t,
                status: 0,
                result: &[1],
                sent_by_device: false,
            });
        }
        n
    }
    fn in_flight(&self) -> usize {
        self.held.len() + self.ready.len()
    }
    fn max_arg_len(&self) -> usize {
        64
    }
}

#[test]
fn watchdog_follows_submission_order_across_token_reuse() {
    let (mut client, mut fwd) = on_ring(
        8,
        Selective::default(),
        ForwardConfig {
            watchdog: Duration::from_millis(5),
            max_in_flight: 2,
            ..Default::default()
        },
    );
    // 0 completes at once and frees its token; 1 stalls.
    send_parity(&mut client, 0, 1);
    send_parity(&mut client, 1, 0);
    fwd.poll_once().unwrap();
    let r = response(&mut client).unwrap();
    assert_eq!(wire::parse_response(&r).unwrap().header.request_id, 0);
    std::thread::sleep(Duration::from_millis(10));
    // 2 reuses request 0's token and stalls too, but is young: the stale queue entry
    // for that token must not hide request 1, which has expired.
    send_parity(&mut client, 2, 0);
    fwd.poll_once().unwrap();
    assert!(response(&mut client).is_none());
    fwd.watchdog(Instant::now());
    let r = response(&mut client).unwrap();
    let v = wire::parse_response(&r).unwrap();
    assert_eq!(
        (v.header.request_id, v.header.status),
        (1, status::DECODER_TIMEOUT)
    );
    assert!(response(&mut client).is_none(), "request 2 is not due yet");
    std::thread::sleep(Duration::from_millis(10));
    fwd.watchdog(Instant::now());
    let r = response(&mut client).unwrap();
    let v = wire::parse_response(&r).unwrap();
    assert_eq!(
        (v.header.request_id, v.header.status),
        (2, status::DECODER_TIMEOUT)
    );
    fwd.watchdog(Instant::now());
    assert!(response(&mut client).is_none(), "each answered once");
    assert!(fwd.order.is_empty());
    assert!(fwd.stats().adds_up());
}

#[test]
fn stop_answers_what_still_waits_in_the_transport() {
    let (mut client, mut fwd) = on_ring(64, Stalled::default(), ForwardConfig::default());
    for id in 0..5 {
        send_parity(&mut client, id, 1);
    }
    assert!(client.send(b"junk").unwrap());
    // Stopped before its first poll: everything still waits in the ring.
    fwd.drain().unwrap();
    fwd.stats.absorb_transport_drops(fwd.transport.drops());
    let stats = fwd.stats().clone();
    for id in 0..5 {
        let r = response(&mut client).expect("an answer");
        let v = wire::parse_response(&r).unwrap();
        assert_eq!(
            (v.header.request_id, v.header.status),
            (id, status::SHUTTING_DOWN)
        );
    }
    assert_eq!(stats.received, 6, "{stats}");
    assert_eq!(stats.answered_with(status::SHUTTING_DOWN), 5);
    assert!(stats.adds_up());
}

#[test]
fn stop_answers_in_flight_with_shutting_down() {
    let (mut client, mut fwd) = on_ring(
        8,
        Stalled::default(),
        ForwardConfig {
            watchdog: Duration::from_secs(60),
            drain: Duration::from_millis(1),
            ..Default::default()
        },
    );
    send_parity(&mut client, 9, 1);
    fwd.poll_once().unwrap();
    let flag = AtomicBool::new(true);
    let stats = fwd
        .run(
            StopWhen {
                flag: &flag,
                deadline: None,
            },
            None,
            |_, _| {},
        )
        .unwrap();
    let r = response(&mut client).unwrap();
    assert_eq!(
        wire::parse_response(&r).unwrap().header.status,
        status::SHUTTING_DOWN
    );
    assert_eq!(stats.answered_with(status::SHUTTING_DOWN), 1);
    assert!(stats.adds_up());
    // The drain's own waiting is not the host's: never a stalled request.
    assert_eq!(stats.stalled_requests, 0);
}

/// A backend whose device side sends every response itself: completes each request
/// as `sent_by_device`, the even ones with an error status.
struct DeviceSends {
    held: Vec<(u32, u32)>,
}
impl Backend for DeviceSends {
    fn topology(&self) -> crate::backend::Topology {
        crate::backend::Topology::GpuPersistent
    }
    fn submit(&mut self, _: u32, _: &crate::handler::Handler, _: &[u8]) -> Result<(), i32> {
        unreachable!("the forwarder hands over the header")
    }
    fn submit_request(
        &mut self,
        token: u32,
        header: &RequestHeader,
        _: &crate::handler::Handler,
        _: &[u8],
    ) -> Result<(), i32> {
        self.held.push((token, header.request_id));
        Ok(())
    }
    fn poll<F: FnMut(Completion<'_>)>(&mut self, mut done: F) -> usize {
        let n = self.held.len();
        for (token, id) in self.held.drain(..) {
            done(Completion {
                token,
                status: if id % 2 == 0 { status::BAD_ARGUMENT } else { 0 },
                result: &[],
                sent_by_device: true,
            });
        }
        n
    }
    fn in_flight(&self) -> usize {
        self.held.len()
    }
    fn max_arg_len(&self) -> usize {
        64
    }
}

#[test]
fn completions_sent_by_the_device_are_counted_not_sent_again() {
    let (mut client, mut fwd) = on_ring(16, DeviceSends { held: vec![] }, ForwardConfig::default());
    let mut buf = [0u8; 64];
    for id in 1..=5 {
        send_parity(&mut client, id, 1);
    }
    // The forwarder itself still answers what never reaches the backend.
    let n = wire::write_request(&mut buf, function_id("nope"), 6, 0, &[1]).unwrap();
    client.send(&buf[..n]).unwrap();
    fwd.poll_once().unwrap();
    let r = response(&mut client).expect("the host answers the unknown function");
    assert_eq!(
        wire::parse_response(&r).unwrap().header.status,
        status::UNKNOWN_FUNCTION
    );
    assert!(response(&mut client).is_none(), "no second send");
    let s = fwd.stats();
    assert_eq!(s.received, 6);
    assert_eq!(s.answered_ok, 3);
    assert_eq!(s.answered_with(status::BAD_ARGUMENT), 2);
    assert_eq!(s.answered_with(status::UNKNOWN_FUNCTION), 1);
    assert_eq!(
        fwd.free_tokens.len(),
        ForwardConfig::default().max_in_flight
    );
    assert!(s.adds_up());
}
