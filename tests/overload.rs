//! Overload speaks: a forwarder flooded far past what its backend can compute answers the
//! requests that waited too long with `OVERLOAD` (counted as expired), counts what the
//! kernel dropped at its socket, and its totals add up to exactly what was sent. Once over
//! the udp transport, once over the soft NIC (whose wire is a UDP socket).
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use qfwd::backend::{Backend, Completion, Topology};
use qfwd::forward::{ForwardConfig, Forwarder, IdlePolicy, StopWhen};
use qfwd::handler::{Handler, Registry};
use qfwd::mlx5::Doorbell;
use qfwd::softnic::SoftNicConfig;
use qfwd::stats::{DropKind, Stats};
use qfwd::transport::udp::UdpTransport;
use qfwd::transport::Transport;
use qfwd::wire::{self, function_id, status};

/// A backend that takes `cost` per request (sleeping, so the flooder keeps the core):
/// ~5 000 requests/s, far below what one flooding thread sends. While `hold` is set it
/// does not return at all (a decoder stuck on one request), so the flood overflows the
/// socket whatever the host's speed.
struct Slow {
    done: Vec<(u32, u8)>,
    cost: Duration,
    hold: Arc<AtomicBool>,
}

impl Backend for Slow {
    fn topology(&self) -> Topology {
        Topology::Cpu
    }
    fn computes_in_submit(&self) -> bool {
        true
    }
    fn submit(&mut self, token: u32, handler: &Handler, arg: &[u8]) -> Result<(), i32> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.hold.load(Ordering::Acquire) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(self.cost);
        let mut out = [0u8; 8];
        let n = handler.run(arg, &mut out)?;
        assert_eq!(n, 1);
        self.done.push((token, out[0]));
        Ok(())
    }
    fn poll<F: FnMut(Completion<'_>)>(&mut self, mut done: F) -> usize {
        let n = self.done.len();
        for (token, parity) in self.done.drain(..) {
            done(Completion {
                token,
                status: status::OK,
                result: &[parity],
                sent_by_device: false,
            });
        }
        n
    }
    fn in_flight(&self) -> usize {
        self.done.len()
    }
    fn max_arg_len(&self) -> usize {
        64
    }
}

const FLOOD: u32 = 30_000;

/// The kernel turns receive timestamps on for the whole host a moment after the first
/// socket asks (a deferred static key); until then it stamps a datagram when it is read,
/// and no queue wait shows. Waits (bounded) until a datagram's stamp shows its wait.
fn wait_for_kernel_timestamps() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    qfwd::sys::enable_receive_meta(rx.as_fd()).unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut buf = [0u8; 16];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        tx.send_to(b"t", rx.local_addr().unwrap()).unwrap();
        std::thread::sleep(Duration::from_millis(3));
        let r = qfwd::sys::recv_with_meta(rx.as_fd(), &mut buf).unwrap();
        let age = qfwd::transport::realtime_ns().saturating_sub(r.arrival_ns.unwrap());
        if age >= 2_000_000 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "kernel receive timestamps never came on"
        );
    }
}

/// Runs a forwarder over `transport` on a thread while one socket floods `to` with
/// `FLOOD` parity requests as fast as it can; reads the answers until they stop. Returns
/// the forwarder's counters and what the flooder received (status of each answer, and
/// the answers its own socket dropped).
fn flood<T: Transport + Send + 'static>(transport: T, to: SocketAddr) -> (Stats, Vec<i32>, u64)
where
    T::Peer: Send,
{
    wait_for_kernel_timestamps();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let hold = Arc::new(AtomicBool::new(false));
    let held = hold.clone();
    let forwarder = std::thread::spawn(move || {
        let config = ForwardConfig {
            queue_deadline: Some(Duration::from_millis(2)),
            idle: IdlePolicy::Yield,
            ..ForwardConfig::default()
        };
        let backend = Slow {
            done: Vec::new(),
            cost: Duration::from_micros(200),
            hold: held,
        };
        let mut fwd = Forwarder::new(transport, backend, Registry::with_parity(), config);
        fwd.run(
            StopWhen {
                flag: &flag,
                deadline: None,
            },
            None,
            |_, _| {},
        )
        .unwrap()
    });
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut buf = [0u8; 64];
    // The forwarder answers before the flood starts (request FLOOD: one more received).
    // It may answer OVERLOAD: its thread may start later than the queue deadline.
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let n = wire::write_request(&mut buf, function_id("parity"), FLOOD, 0, &[1]).unwrap();
    sock.send_to(&buf[..n], to).unwrap();
    let (n, _) = sock.recv_from(&mut buf).expect("the forwarder answers");
    let first = wire::parse_response(&buf[..n]).unwrap().header.status;
    assert!(first == status::OK || first == status::OVERLOAD, "{first}");
    // The first request of the flood holds the backend until the whole flood is sent.
    hold.store(true, Ordering::Release);
    for id in 0..FLOOD {
        let n = wire::write_request(&mut buf, function_id("parity"), id, 0, &[id as u8]).unwrap();
        sock.send_to(&buf[..n], to).unwrap();
    }
    hold.store(false, Ordering::Release);
    // Answers until none comes for 500 ms (bounded).
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut statuses = Vec::new();
    let mut seen = vec![false; FLOOD as usize + 1];
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Ok((n, _)) = sock.recv_from(&mut buf) {
        let r = wire::parse_response(&buf[..n]).unwrap();
        let id = r.header.request_id as usize;
        assert!(!seen[id], "request {id} answered twice");
        seen[id] = true;
        if r.header.status == status::OK {
            assert_eq!(r.result, [qfwd::handler::parity(&[id as u8])]);
        }
        statuses.push(r.header.status);
        assert!(Instant::now() < deadline, "answers never stop");
    }
    let client_drops = u64::from(qfwd::sys::socket_drops(sock.as_fd()).unwrap());
    stop.store(true, Ordering::Relaxed);
    (forwarder.join().unwrap(), statuses, client_drops)
}

fn assert_accounted(s: &Stats, statuses: &[i32], client_drops: u64) {
    eprintln!("{s}");
    // Every datagram sent is counted exactly once: answered, or dropped (by the kernel
    // at the socket included).
    assert_eq!(s.received, FLOOD as u64 + 1, "{s}");
    assert!(s.adds_up(), "{s}");
    assert_eq!(
        s.dropped_total(),
        s.dropped(DropKind::SocketOverflow),
        "{s}"
    );
    // The flood was far beyond the backend: the queue deadline and the kernel both spoke.
    assert!(s.expired > 0, "{s}");
    assert!(s.dropped(DropKind::SocketOverflow) > 0, "{s}");
    assert_eq!(s.answered_with(status::OVERLOAD), s.expired, "{s}");
    // Every answer sent reached the flooder (the first one before the flood), or its own
    // socket dropped it.
    let answered = s.answered_ok + s.answered_error_total();
    assert_eq!(
        1 + statuses.len() as u64 + client_drops,
        answered,
        "{} answers received, {client_drops} dropped by the flooder's socket; {s}",
        statuses.len()
    );
    assert!(statuses
        .iter()
        .all(|&c| c == status::OK || c == status::OVERLOAD));
    let line = s.clone().status_line(Duration::from_secs(1));
    assert!(
        line.contains(&format!(
            "drop {} (socket {})",
            s.dropped_total(),
            s.dropped(DropKind::SocketOverflow)
        )),
        "{line}"
    );
    assert!(line.contains(&format!("expired {}", s.expired)), "{line}");
    let summary = s.to_string();
    assert!(summary.contains("socket_overflow"), "{summary}");
    assert!(
        summary.contains("waited past the queue deadline"),
        "{summary}"
    );
}

#[test]
fn a_flooded_udp_forwarder_answers_overload_and_counts_socket_drops() {
    let transport = UdpTransport::bind("127.0.0.1:0".parse().unwrap(), vec![]).unwrap();
    let to = transport.local_addr();
    let (stats, statuses, client_drops) = flood(transport, to);
    assert_accounted(&stats, &statuses, client_drops);
}

#[test]
fn a_flooded_soft_nic_answers_overload_and_counts_socket_drops() {
    let config = SoftNicConfig {
        idle: IdlePolicy::Yield,
        ..SoftNicConfig::new(Doorbell::Regular)
    };
    let (to, transport) =
        qfwd::serve::wiring::softnic_udp(&config, "127.0.0.1:0".parse().unwrap(), vec![]).unwrap();
    let (stats, statuses, client_drops) = flood(transport, to);
    assert_accounted(&stats, &statuses, client_drops);
}
