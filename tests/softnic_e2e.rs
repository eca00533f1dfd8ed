//! End to end through the soft NIC, CPU posting: an emulator-side client sends CUQR
//! requests; the NIC writes them into the request ring (WRITE-with-imm + CQE); the
//! forwarding loop (CPU backend, parity handler) answers; the response leaves as a SEND
//! WQE announced by each doorbell mode in turn; the NIC puts it back on the wire. Every
//! answer is checked, and the counters on every side must add up.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use qfwd::backend::CpuBackend;
use qfwd::forward::{ForwardConfig, Forwarder, IdlePolicy, StopWhen};
use qfwd::handler::{parity, Registry};
use qfwd::mlx5::Doorbell;
use qfwd::serve::wiring;
use qfwd::softnic::{SoftNicConfig, SoftNicTransport};
use qfwd::transport::udp::UdpClient;
use qfwd::transport::Client;
use qfwd::wire::{self, function_id, status};

/// Small queues, so a few thousand requests wrap the SQ and both CQs many times.
fn config(doorbell: Doorbell) -> SoftNicConfig {
    SoftNicConfig {
        doorbell,
        sq_wqebbs: 16,
        tx_cqes: 8,
        rx_slots: 8,
        rx_cqes: 8,
        resp_slots: 8,
        signal_every: 4,
        rx_slot_bytes: 1024,
        ..SoftNicConfig::new(doorbell)
    }
}

type Fwd = Forwarder<SoftNicTransport, CpuBackend>;

/// Runs the forwarder on its own thread until `stop`; hands it back for its counters.
fn spawn_forwarder(
    transport: SoftNicTransport,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Fwd> {
    let fc = ForwardConfig {
        max_request_bytes: 1024 - wire::HEADER_LEN,
        idle: IdlePolicy::Yield,
        batch: 8,
        watchdog: Duration::from_secs(5),
        ..Default::default()
    };
    let backend = CpuBackend::new(fc.batch, fc.max_request_bytes);
    let mut fwd = Forwarder::new(transport, backend, Registry::with_parity(), fc);
    std::thread::spawn(move || {
        fwd.run(
            StopWhen {
                flag: &stop,
                deadline: Some(Instant::now() + Duration::from_secs(120)),
            },
            None,
            |_, _| {},
        )
        .expect("forwarder loop");
        fwd
    })
}

/// Sends `n` requests (payloads of 1..=300 bytes, at most `window` in flight) and checks
/// that every answer comes back, in order, with the right parity.
fn drive(client: &mut dyn Client, n: u32, window: u32) {
    let parity_id = function_id("parity");
    let payload = |i: u32| -> Vec<u8> {
        (0..(i % 300) + 1)
            .map(|k| (i.wrapping_mul(31) ^ k) as u8)
            .collect()
    };
    let mut req = vec![0u8; 1024];
    let mut resp = vec![0u8; 70_000];
    let (mut sent, mut got) = (0u32, 0u32);
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut idle_polls = 0u64;
    while got < n {
        assert!(
            Instant::now() < deadline,
            "stalled: {sent} sent, {got} answered after {idle_polls} idle polls"
        );
        let mut worked = false;
        if sent < n && sent - got < window {
            let p = payload(sent);
            let len =
                wire::write_request(&mut req, parity_id, sent, 1000 + sent as u64, &p).unwrap();
            if client.send(&req[..len]).unwrap() {
                sent += 1;
                worked = true;
            }
        }
        if let Some(len) = client.try_recv(&mut resp).unwrap() {
            let r = wire::parse_response(&resp[..len]).expect("a CUQS response");
            assert_eq!(r.header.request_id, got, "answers arrive in order");
            assert_eq!(
                r.header.ptp_timestamp,
                1000 + got as u64,
                "timestamp echoed"
            );
            assert_eq!(r.header.status, status::OK, "request {got}");
            assert_eq!(
                r.result,
                &[parity(&payload(got))],
                "parity of request {got}"
            );
            got += 1;
            worked = true;
        }
        if !worked {
            idle_polls += 1;
            std::thread::yield_now();
        }
    }
}

fn inproc_round_trips(doorbell: Doorbell) {
    let cfg = config(doorbell);
    let (mut client, transport) = wiring::softnic_inproc(&cfg).unwrap();
    assert_eq!(transport.doorbell(), doorbell);
    let stop = Arc::new(AtomicBool::new(false));
    let fwd = spawn_forwarder(transport, stop.clone());
    const N: u32 = 2_000;
    drive(&mut client, N, 6);
    stop.store(true, Ordering::Relaxed);
    let fwd = fwd.join().expect("forwarder thread");
    let s = fwd.stats();
    assert_eq!(s.received, N as u64);
    assert_eq!(s.answered_ok, N as u64);
    assert!(s.adds_up());
    let t = fwd.transport().counters();
    assert_eq!(t.received, N as u64);
    assert_eq!(t.posted, N as u64, "{doorbell}: every response posted once");
    assert_eq!(
        t.send_errors + t.rx_unexpected + t.proxy_failures,
        0,
        "{t:?}"
    );
    let c = fwd.transport().nic_counters();
    assert_eq!(c.rx_messages, N as u64);
    assert_eq!(c.wire_sent, N as u64);
    assert_eq!(c.wqes_executed, N as u64);
    assert_eq!(
        c.error_cqes + c.wire_send_failures + c.wire_no_peer,
        0,
        "{c:?}"
    );
    assert!(c.doorbells >= 1 && c.doorbells <= N as u64, "{c:?}");
    assert_eq!(
        c.sq_dma_reads, N as u64,
        "every WQE executed from the SQ: {c:?}"
    );
}

#[test]
fn softnic_inproc_regular_doorbell_end_to_end() {
    inproc_round_trips(Doorbell::Regular);
}

#[test]
fn softnic_inproc_blueflame_doorbell_end_to_end() {
    inproc_round_trips(Doorbell::BlueFlame);
}

#[test]
fn softnic_inproc_cpu_assisted_doorbell_end_to_end() {
    inproc_round_trips(Doorbell::CpuAssisted);
}

#[test]
fn softnic_udp_wire_end_to_end() {
    let cfg = config(Doorbell::BlueFlame);
    let (addr, transport) =
        wiring::softnic_udp(&cfg, "127.0.0.1:0".parse().unwrap(), vec![]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let fwd = spawn_forwarder(transport, stop.clone());
    let mut client = UdpClient::connect(addr).unwrap();
    // One request in flight: UDP on loopback may drop when buffers overflow, never here.
    drive(&mut client, 300, 1);
    stop.store(true, Ordering::Relaxed);
    let fwd = fwd.join().unwrap();
    assert_eq!(fwd.stats().answered_ok, 300);
    assert_eq!(fwd.transport().nic_counters().wire_sent, 300);
}

#[test]
fn oversized_requests_are_answered_as_errors_not_corrupted() {
    let cfg = config(Doorbell::Regular);
    let (mut client, transport) = wiring::softnic_inproc(&cfg).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let fwd = spawn_forwarder(transport, stop.clone());
    // 1100 bytes into 1024-byte slots: the NIC truncates, the forwarder answers an error.
    let mut req = vec![0u8; 1200];
    let len = wire::write_request(&mut req, function_id("parity"), 77, 5, &[1; 1076]).unwrap();
    assert!(client.send(&req[..len]).unwrap());
    let mut resp = vec![0u8; 2048];
    let deadline = Instant::now() + Duration::from_secs(20);
    let n = loop {
        if let Some(n) = client.try_recv(&mut resp).unwrap() {
            break n;
        }
        assert!(Instant::now() < deadline, "no answer");
        std::thread::yield_now();
    };
    let r = wire::parse_response(&resp[..n]).unwrap();
    assert_eq!(r.header.request_id, 77);
    assert!(r.header.status == status::OVERSIZED || r.header.status == status::LENGTH_MISMATCH);
    stop.store(true, Ordering::Relaxed);
    let fwd = fwd.join().unwrap();
    assert_eq!(fwd.transport().nic_counters().rx_truncated, 1);
}
