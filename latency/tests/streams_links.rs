//! The stream emulator over several links (a thread and a wire each) against the CPU pool:
//! every round sent is accounted for, and the answers are the one-link run's, shot for
//! shot. A slow cadence and yielding threads: it runs on a shared two-core machine, and
//! asserts nothing about time.
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use qfwd::decode::window::StreamModel;
use qfwd::forward::IdlePolicy;
use qfwd::stream::{ServiceOptions, StreamEngine, StreamSettings, StreamStats};
use qfwd::transport::inproc;
use qfwd::transport::udp::UdpClient;
use qfwd::wire::HEADER_LEN;
use qfwd_latency::streams::emulator::{
    self, link_streams, windows_of_shot, StreamLoad, StreamOutcome, StreamShots,
};

const ROUNDS: u64 = 450;

fn base() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/stream/surface_d5_r100_z_p001")
}

fn settings(streams: u32, engine: StreamEngine) -> StreamSettings {
    StreamSettings {
        streams,
        engine,
        window: 10,
        commit: 5,
        workers: 2,
        queue_slots: 4096,
        max_request_bytes: 8192,
        ..StreamSettings::default()
    }
}

fn model(s: &StreamSettings) -> Arc<StreamModel> {
    let mut dem = base().into_os_string();
    dem.push(".dem");
    qfwd::stream::load_model(Path::new(&dem), s).unwrap()
}

fn load(streams: u32, links: u32, stagger: bool) -> StreamLoad {
    StreamLoad {
        streams,
        links,
        round_ns: 50_000,
        rounds: ROUNDS,
        warmup_rounds: 50,
        stagger,
        window: 10,
        commit: 5,
        drain: Duration::from_secs(20),
        yield_when_idle: true,
    }
}

enum Wire {
    Inproc,
    Udp,
}

/// Serves `streams` with the CPU pool and drives them over `links` links.
fn run(streams: u32, links: u32, stagger: bool, wire: Wire) -> (StreamOutcome, StreamStats) {
    run_on(StreamEngine::Cpu, streams, links, stagger, wire)
}

/// Serves `streams` with `engine` and drives them over `links` links.
fn run_on(
    engine: StreamEngine,
    streams: u32,
    links: u32,
    stagger: bool,
    wire: Wire,
) -> (StreamOutcome, StreamStats) {
    let s = settings(streams, engine);
    let model = model(&s);
    let shots = StreamShots::load(&base(), &model).unwrap();
    let opts = ServiceOptions {
        settings: s.clone(),
        cores: Vec::new(),
        idle: IdlePolicy::Yield,
        batch: 32,
    };
    let load = load(streams, links, stagger);
    let (outcome, running) = match wire {
        Wire::Inproc => {
            let slot = HEADER_LEN + s.max_request_bytes + 1024;
            let (mut clients, server) = inproc::links(links as usize, 4096, slot).unwrap();
            let running = qfwd::stream::spawn_inproc_links(&opts, model, server).unwrap();
            let o = emulator::run(&mut clients, &[], &shots, &load, |_| {});
            (o, running)
        }
        Wire::Udp => {
            let running = qfwd::serve::wiring::streams_udp(
                &opts,
                model,
                "127.0.0.1:0".parse().unwrap(),
                Vec::new(),
            )
            .unwrap();
            let at = running.local_addr().unwrap();
            let mut clients: Vec<UdpClient> = (0..links)
                .map(|_| UdpClient::connect(at).unwrap())
                .collect();
            let o = emulator::run(&mut clients, &[], &shots, &load, |_| {});
            (o, running)
        }
    };
    running.stop();
    let stats = running.join().unwrap();
    (outcome.unwrap(), stats)
}

/// Rounds a stream starting at cycle `start` has committed after `cycles` cycles: its
/// whole shots, and the windows of its last shot that its rounds completed.
fn committed_rounds(shot_rounds: u64, start: u64, cycles: u64) -> u64 {
    let sent = cycles.saturating_sub(start);
    let whole = sent / shot_rounds;
    let tail = sent % shot_rounds;
    whole * shot_rounds
        + windows_of_shot(shot_rounds, 10, 5)
            .iter()
            .filter(|w| w.2 < tail)
            .map(|w| w.1)
            .sum::<u64>()
}

/// Everything sent was answered as owed; over `inproc` the service took every request (a
/// socket cannot tell the emulator whether the last datagrams were read before the stop).
fn assert_accounted(o: &StreamOutcome, stats: &StreamStats, expect_committed: u64, inproc: bool) {
    assert_eq!(o.refused_total(), 0, "{o:?}");
    assert_eq!(
        (
            o.windows_lost,
            o.unexpected,
            o.streams_broken,
            o.request_errors
        ),
        (0, 0, 0, 0),
        "{o:?}"
    );
    assert!(stats.adds_up(), "{stats}");
    if inproc {
        assert_eq!(stats.rounds.received, o.round_entries, "{stats}");
    } else {
        assert!(stats.rounds.received <= o.round_entries, "{stats}");
    }
    assert_eq!(stats.rounds.committed, o.rounds_committed, "{stats}");
    assert_eq!(stats.rounds.windows, o.windows, "{stats}");
    assert_eq!(o.rounds_committed, expect_committed, "{o:?}");
    assert!(o.send_late_cycles <= ROUNDS, "{o:?}");
}

#[test]
fn links_split_the_streams_into_contiguous_ranges() {
    assert_eq!(link_streams(5, 2, 0), 0..3);
    assert_eq!(link_streams(5, 2, 1), 3..5);
    assert_eq!(link_streams(1000, 8, 7), 875..1000);
    assert_eq!(link_streams(3, 1, 0), 0..3);
    // Every stream on exactly one link.
    for (n, l) in [(10, 3), (100, 8), (7, 7), (9, 4)] {
        let all: Vec<u32> = (0..l).flat_map(|i| link_streams(n, l, i)).collect();
        assert_eq!(all, (0..n).collect::<Vec<_>>(), "{n} streams on {l} links");
    }
}

#[test]
fn two_links_answer_as_one_does_shot_for_shot() {
    let streams = 5;
    let (one, one_stats) = run(streams, 1, false, Wire::Inproc);
    let (two, two_stats) = run(streams, 2, false, Wire::Inproc);
    let shot_rounds = 101;
    let expect = u64::from(streams) * committed_rounds(shot_rounds, 0, ROUNDS);
    for (o, s) in [(&one, &one_stats), (&two, &two_stats)] {
        assert_eq!(o.round_entries, u64::from(streams) * ROUNDS);
        assert_accounted(o, s, expect, true);
    }
    assert_eq!(
        two_stats.dispatch.requests(),
        2 * ROUNDS,
        "a request per link per cycle"
    );
    assert_eq!(one_stats.dispatch.requests(), ROUNDS);
    assert!(one.shots > 0, "{one:?}");
    assert_eq!(
        (two.shots, two.mistakes, two.windows, two.reaction.len()),
        (one.shots, one.mistakes, one.windows, one.reaction.len())
    );
}

#[test]
fn staggered_links_account_for_every_round_over_udp_too() {
    // 4 streams on 2 links: each link's 2 streams start at cycles 0 and 2 (5 phases).
    let streams = 4;
    let expect: u64 = (0..streams)
        .map(|s| committed_rounds(101, (s % 2) * 5 / 2, ROUNDS))
        .sum();
    let sent: u64 = (0..streams).map(|s| ROUNDS - (s % 2) * 5 / 2).sum();
    for (wire, inproc) in [(Wire::Inproc, true), (Wire::Udp, false)] {
        let (o, stats) = run(streams as u32, 2, true, wire);
        assert_eq!(o.round_entries, sent);
        assert_accounted(&o, &stats, expect, inproc);
    }
}

#[test]
fn the_batched_engine_answers_two_links_as_it_answers_one() {
    let streams = 3;
    let (one, one_stats) = run_on(StreamEngine::CpuBatched, streams, 1, true, Wire::Inproc);
    let (two, two_stats) = run_on(StreamEngine::CpuBatched, streams, 2, true, Wire::Inproc);
    for (o, s) in [(&one, &one_stats), (&two, &two_stats)] {
        assert_eq!(o.refused_total(), 0, "{o:?}");
        assert_eq!((o.windows_lost, o.unexpected, o.streams_broken), (0, 0, 0));
        assert!(s.adds_up(), "{s}");
        assert_eq!(s.rounds.received, o.round_entries, "{s}");
        assert_eq!(s.rounds.committed, o.rounds_committed, "{s}");
    }
    // Staggered by link (2 streams a link: phases 0 and 2, against 0, 1 and 3 on one
    // link), so compare each with what its own phases owe.
    let owed = |phases: &[u64]| -> u64 {
        phases
            .iter()
            .map(|&p| committed_rounds(101, p, ROUNDS))
            .sum()
    };
    assert_eq!(one.rounds_committed, owed(&[0, 1, 3]));
    assert_eq!(two.rounds_committed, owed(&[0, 2, 0]));
    assert!(one.shots > 0 && two.shots > 0);
}
