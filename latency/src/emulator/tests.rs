use super::runner::{stalled_between, MAX_LOST_IN_A_ROW};
use super::*;
use qfwd::config::RunConfig;
use qfwd::forward::IdlePolicy;
use qfwd::handler::parity;
use qfwd::transport::inproc;
use qfwd::wire::{self, HEADER_LEN};

fn inproc_forwarder() -> (inproc::InprocClient, qfwd::serve::Running) {
    inproc_forwarder_with(256, RunConfig::default().queue_deadline_us)
}

/// A forwarder on a ring of `slots`, answering -6 to requests older than
/// `queue_deadline_us` (0: never).
fn inproc_forwarder_with(
    slots: usize,
    queue_deadline_us: u64,
) -> (inproc::InprocClient, qfwd::serve::Running) {
    let (client, server) = inproc::channel(slots, 2048).unwrap();
    let cfg = RunConfig {
        idle: IdlePolicy::Yield,
        stats_interval_s: 0.0,
        queue_deadline_us,
        transport: qfwd::transport::TransportKind::Inproc,
        ..Default::default()
    };
    let wiring = qfwd::serve::Wiring::Ring(server);
    (client, qfwd::serve::start(&cfg, wiring).unwrap())
}

fn load(mode: Mode) -> LoadSpec {
    LoadSpec {
        mode,
        rate_hz: 20_000,
        warmup: 100,
        samples: 2_000,
        timeout: Duration::from_secs(2),
        yield_when_idle: true,
        ..LoadSpec::default()
    }
}

#[test]
fn hostile_datagrams_are_dropped_or_answered_as_their_kind_expects() {
    let (mut client, fwd) = inproc_forwarder();
    let w = Workload::parity("parity", 8, 64, 3);
    let l = LoadSpec {
        hostile_percent: 5.0,
        ..load(Mode::PingPong)
    };
    let o = run(&mut client, &w, &l, |_| {}).unwrap();
    fwd.stop();
    let s = fwd.join().unwrap().stats;
    assert_eq!((o.ok, o.wrong, o.lost), (o.sent, 0, 0), "{o}");
    let h = o.hostile;
    // 5 % of 2 100 requests, 4 of each 5 kinds (no bad argument for parity) answered.
    assert_eq!(h.sent, 105, "{o}");
    assert_eq!((h.answerable, h.answered, h.unexpected), (63, 63, 0), "{o}");
    assert_eq!(s.received, o.sent + h.sent, "{s}");
    assert_eq!(
        s.dropped(qfwd::stats::DropKind::TruncatedHeader)
            + s.dropped(qfwd::stats::DropKind::BadMagic),
        h.sent - h.answerable,
        "{s}"
    );
    assert!(s.adds_up());
    assert!(o.to_string().contains("hostile datagrams sent 105"), "{o}");
}

/// Takes every request, answers none.
struct BlackHole;
impl Client for BlackHole {
    fn send(&mut self, _: &[u8]) -> qfwd::Result<bool> {
        Ok(true)
    }
    fn try_recv(&mut self, _: &mut [u8]) -> qfwd::Result<Option<usize>> {
        Ok(None)
    }
    fn describe(&self) -> String {
        "black hole".into()
    }
}

#[test]
fn a_run_longer_than_its_ring_counts_every_lost_request() {
    // 200 000 requests at 10 M/s with a 1 ms timeout: a ring of 64 Ki entries, each
    // reused about three times.
    let l = LoadSpec {
        mode: Mode::OpenLoop,
        rate_hz: 10_000_000,
        warmup: 0,
        samples: 200_000,
        timeout: Duration::from_millis(1),
        ..LoadSpec::default()
    };
    assert_eq!(ring_len(&l), Some(1 << 16));
    let w = Workload::parity("parity", 8, 16, 1);
    let o = run(&mut BlackHole, &w, &l, |_| {}).unwrap();
    assert_eq!((o.sent, o.lost), (200_000, 200_000), "{o}");
    assert!(o.adds_up());
    // A ring never outgrows MAX_TRACKED; an impossible one is refused up front.
    let huge = LoadSpec {
        rate_hz: 100_000_000,
        samples: 1 << 30,
        timeout: Duration::from_secs(60),
        ..l
    };
    assert_eq!(ring_len(&huge), None);
    let e = run(&mut BlackHole, &w, &huge, |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("lower the timeout"), "{e}");
}

#[test]
fn ping_pong_through_a_forwarder_is_all_correct() {
    let (mut client, fwd) = inproc_forwarder();
    let w = Workload::parity("parity", 32, 64, 1);
    let o = run(&mut client, &w, &load(Mode::PingPong), |_| {}).unwrap();
    assert_eq!(
        (o.sent, o.ok, o.lost, o.errors()),
        (2_100, 2_100, 0, 0),
        "{o}"
    );
    assert_eq!(o.histogram.len(), 2_000);
    assert!(o.adds_up());
    fwd.stop();
    let s = fwd.join().unwrap().stats;
    assert_eq!(s.answered_ok, 2_100);
    assert!(s.adds_up());
}

#[test]
fn open_loop_times_from_intended_send() {
    // A ring that holds the whole run and no queue deadline: on a loaded CI host the
    // forwarder may be descheduled for tens of ms, which must not lose a request here.
    let (mut client, fwd) = inproc_forwarder_with(4096, 0);
    let w = Workload::parity("parity", 64, 64, 2);
    let o = run(&mut client, &w, &load(Mode::OpenLoop), |_| {}).unwrap();
    assert_eq!((o.sent, o.ok, o.lost), (2_100, 2_100, 0), "{o}");
    // 2100 requests at 20k/s take ~105 ms: the run cannot be much shorter.
    assert!(o.elapsed >= Duration::from_millis(100), "{:?}", o.elapsed);
    drop(fwd);
}

#[test]
fn wrong_answers_unknown_functions_and_loss_are_classified() {
    // Expected answers deliberately wrong for every other request.
    let (mut client, fwd) = inproc_forwarder();
    let pairs = (0..4u8)
        .map(|i| {
            let arg = vec![i];
            let right = parity(&arg);
            (arg, vec![if i % 2 == 0 { right } else { right ^ 1 }])
        })
        .collect();
    let w = Workload::from_pairs("parity", pairs);
    let l = LoadSpec {
        warmup: 0,
        samples: 40,
        ..load(Mode::PingPong)
    };
    let o = run(&mut client, &w, &l, |_| {}).unwrap();
    assert_eq!((o.ok, o.wrong), (20, 20), "{o}");

    let w = Workload::parity("no-such-handler", 8, 4, 3);
    let o = run(&mut client, &w, &l, |_| {}).unwrap();
    assert_eq!(
        o.error_status,
        vec![(wire::status::UNKNOWN_FUNCTION, 40)],
        "{o}"
    );
    assert!(o.adds_up());
    drop(fwd);

    // Nobody answers: everything is lost after the timeout, and it adds up.
    let (mut client, _server) = inproc::channel(64, 256).unwrap();
    let l = LoadSpec {
        samples: 5,
        timeout: Duration::from_millis(5),
        ..l
    };
    let o = run(
        &mut client,
        &Workload::parity("parity", 8, 1, 4),
        &l,
        |_| {},
    )
    .unwrap();
    assert_eq!((o.sent, o.lost), (5, 5), "{o}");
    assert!(o.adds_up());
    assert_eq!(o.abandoned_after, None);

    // A dead forwarder: ping-pong stops after a few timeouts instead of waiting out
    // every one, and what was sent still adds up.
    let l = LoadSpec { samples: 1000, ..l };
    let o = run(
        &mut client,
        &Workload::parity("parity", 8, 1, 4),
        &l,
        |_| {},
    )
    .unwrap();
    assert_eq!(o.abandoned_after, Some(MAX_LOST_IN_A_ROW), "{o}");
    assert_eq!(
        (o.sent, o.lost),
        (MAX_LOST_IN_A_ROW, MAX_LOST_IN_A_ROW),
        "{o}"
    );
    assert!(o.adds_up());
    assert!(o.to_string().contains("ABANDONED"), "{o}");
}

/// Answers parity at once, `delay` requests late (answers wait until that many newer
/// requests are sent; 0 = on the first poll), and sleeps `stall` on the first poll
/// after sending each request in `stall_after`.
struct EchoClient {
    delay: usize,
    waiting: std::collections::VecDeque<Vec<u8>>,
    stall_after: Vec<u32>,
    stall: Duration,
    stall_next_poll: bool,
}

impl EchoClient {
    fn new(delay: usize, stall_after: Vec<u32>, stall: Duration) -> Self {
        EchoClient {
            delay,
            waiting: Default::default(),
            stall_after,
            stall,
            stall_next_poll: false,
        }
    }
}

impl Client for EchoClient {
    fn send(&mut self, bytes: &[u8]) -> qfwd::Result<bool> {
        let req = wire::parse_request(bytes).expect("the emulator sends valid requests");
        let mut out = vec![0u8; HEADER_LEN + 1];
        let h = req.header;
        wire::write_response(
            &mut out,
            0,
            h.request_id,
            h.ptp_timestamp,
            &[parity(req.arg)],
        )
        .expect("room for one byte");
        self.waiting.push_back(out);
        // Sticky until the next poll: an emulator behind its schedule sends the next
        // requests in the same burst, and they must not cancel the stall.
        self.stall_next_poll |= self.stall_after.contains(&h.request_id);
        Ok(true)
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> qfwd::Result<Option<usize>> {
        if std::mem::take(&mut self.stall_next_poll) {
            std::thread::sleep(self.stall);
            return Ok(None);
        }
        if self.waiting.len() <= self.delay {
            return Ok(None);
        }
        let r = self.waiting.pop_front().expect("not empty");
        buf[..r.len()].copy_from_slice(&r);
        Ok(Some(r.len()))
    }

    fn describe(&self) -> String {
        "echo".into()
    }
}

#[test]
fn a_sample_is_stalled_when_a_stall_overlaps_its_round_trip() {
    let w = [(10, 20), (30, 40)];
    for (sent, answered, stalled) in [
        (0, 5, false),
        (0, 10, false), // answered as the emulator stopped: seen before the gap
        (0, 11, true),
        (15, 16, true),  // sent (due) inside the gap
        (20, 30, false), // between the two gaps
        (19, 30, true),
        (25, 35, true),
        (0, 100, true),
        (40, 50, false),
    ] {
        assert_eq!(
            stalled_between(&w, sent, answered),
            stalled,
            "{sent}..{answered}"
        );
    }
    assert!(!stalled_between(&[], 0, 100));
}

/// Samples at least `floor` long: with an echo client, only a stall makes one.
fn slow_samples(o: &Outcome, floor: Duration) -> u64 {
    o.histogram
        .iter_recorded()
        .filter(|v| v.value_iterated_to() >= floor.as_nanos() as u64)
        .map(|v| v.count_at_value())
        .sum()
}

#[test]
fn ping_pong_counts_the_samples_the_emulator_stalled_in() {
    let w = Workload::parity("parity", 8, 16, 6);
    let stall = Duration::from_millis(2);
    // Requests 3 (warm-up), 40 and 90 stall the emulator while they are in flight.
    let mut client = EchoClient::new(0, vec![3, 40, 90], stall);
    let l = LoadSpec {
        warmup: 10,
        samples: 200,
        yield_when_idle: false,
        ..load(Mode::PingPong)
    };
    let o = run(&mut client, &w, &l, |_| {}).unwrap();
    assert_eq!((o.ok, o.errors()), (210, 0), "{o}");
    // Each slow sample's gap is one the emulator saw: every one is counted (the host
    // may add stalls of its own, never fewer).
    let slow = slow_samples(&o, stall);
    assert!(
        slow >= 2,
        "the two timed stalls are in the histogram: {slow}"
    );
    assert!(o.stalled_samples >= slow, "{o}");
    assert!(
        o.stalls >= o.stalled_samples,
        "one sample in flight per stall: {o}"
    );
    assert!(o.stalled_samples <= 200);
    assert!(o.to_string().contains("emulator stalls"), "{o}");
}

#[test]
fn open_loop_counts_the_samples_in_flight_and_due_during_a_stall() {
    let w = Workload::parity("parity", 8, 16, 7);
    // At 20 000 requests/s, ~400 requests fall due while request 499 stalls the
    // emulator for 20 ms (answers lag one request, so one or two are in flight).
    // Request 500 falls due during that stall and goes out in the catch-up burst; its
    // stall must still happen (an emulator behind its schedule on a busy host does the
    // same), so ~800 are due across the two. The host's own stalls mark a few each:
    // far fewer than 800 on a busy 2-core VM too.
    let stall = Duration::from_millis(20);
    let mut client = EchoClient::new(1, vec![499, 500], stall);
    let l = LoadSpec {
        warmup: 100,
        samples: 2_000,
        timeout: Duration::from_millis(200),
        yield_when_idle: false,
        ..load(Mode::OpenLoop)
    };
    let o = run(&mut client, &w, &l, |_| {}).unwrap();
    // The last one waits in the client for a newer request that never comes: lost.
    assert_eq!((o.ok, o.lost, o.errors()), (2_099, 1, 0), "{o}");
    assert!(o.stalls >= 2, "{o}");
    assert!(o.stalled_samples >= 700, "due during the 40 ms: {o}");
    assert!(o.stalled_samples >= slow_samples(&o, stall / 2), "{o}");
}

#[test]
fn bad_specs_are_refused() {
    let (mut client, _server) = inproc::channel(4, 256).unwrap();
    let w = Workload::parity("parity", 8, 1, 5);
    let l = LoadSpec {
        mode: Mode::OpenLoop,
        rate_hz: 0,
        ..LoadSpec::default()
    };
    assert!(run(&mut client, &w, &l, |_| {})
        .unwrap_err()
        .to_string()
        .contains("rate"));
    let l = LoadSpec {
        warmup: 0,
        samples: 0,
        ..LoadSpec::default()
    };
    assert!(run(&mut client, &w, &l, |_| {}).is_err());
}
