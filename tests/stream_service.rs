//! The CPU stream service end to end: Stim shots streamed through the in-process ring and
//! UDP, commits checked against the window decoder run directly, every status exercised,
//! counters that add up.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use qfwd::forward::IdlePolicy;
use qfwd::stream::protocol::{
    self, refusal, BatchWriter, GetCorrections, Record, RecordKind, ResetDecoder, FLAG_FINAL,
    FLAG_RESET,
};
use qfwd::stream::{ServiceOptions, StreamSettings};
use qfwd::transport::{inproc, Client};
use qfwd::wire;
use qfwd_decode::window::{StreamDecoder, StreamModel};
use qfwd_decode::Dem;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stream/surface_d5_r100_z_p001")
}

/// The model and the first `n` shots, each split into its rounds (the final one last).
fn shots(model: &StreamModel, n: usize) -> Vec<Vec<Vec<u8>>> {
    let dem = Dem::from_path(&fixture().with_extension("dem")).unwrap();
    let exp = model.experiment(&dem).unwrap();
    let b8 = std::fs::read(fixture().with_extension("b8")).unwrap();
    b8.chunks_exact(b8.len() / 1000)
        .take(n)
        .map(|s| exp.split(s))
        .collect()
}

fn options(streams: u32, workers: usize) -> ServiceOptions {
    ServiceOptions {
        settings: StreamSettings {
            streams,
            window: 15,
            commit: 5,
            workers,
            ..StreamSettings::default()
        },
        cores: Vec::new(),
        idle: IdlePolicy::Yield,
        batch: 8,
    }
}

fn request(function_id: u32, id: u32, arg: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; wire::HEADER_LEN + arg.len()];
    wire::write_request(&mut buf, function_id, id, u64::from(id) * 7, arg).unwrap();
    buf
}

/// Sends `req` and collects responses until `until` says enough (or 20 s pass).
struct Peer<C: Client> {
    client: C,
    records: Vec<(u32, Record)>,
    statuses: Vec<(u32, i32)>,
}

impl<C: Client> Peer<C> {
    fn send(&mut self, bytes: &[u8]) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.client.send(bytes).unwrap() {
            assert!(Instant::now() < deadline, "service not taking requests");
            self.poll();
            std::thread::yield_now();
        }
    }

    fn poll(&mut self) {
        let mut buf = vec![0u8; 70_000];
        while let Some(n) = self.client.try_recv(&mut buf).unwrap() {
            let v = wire::parse_response(&buf[..n]).unwrap();
            self.statuses.push((v.header.request_id, v.header.status));
            assert_eq!(
                u64::from(v.header.request_id) * 7,
                v.header.ptp_timestamp,
                "echoed"
            );
            for r in protocol::records(v.result).unwrap() {
                self.records.push((v.header.request_id, r.unwrap()));
            }
        }
    }

    fn wait_for(&mut self, what: &str, mut done: impl FnMut(&Self) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            self.poll();
            if done(self) {
                return;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::yield_now();
        }
    }
}

/// Streams `streams` shots at once, one request per cycle (every stream's round of the
/// cycle), and checks each stream's commits against the window decoder run directly.
fn stream_shots<C: Client>(peer: &mut Peer<C>, model: &Arc<StreamModel>, streams: u32) {
    let shots = shots(model, streams as usize);
    let rb = model.round_bytes();
    let rounds = shots[0].len();
    let mut arg = vec![0u8; 64 + streams as usize * (rb + 16)];
    for r in 0..rounds {
        let flags = if r == rounds - 1 { FLAG_FINAL } else { 0 };
        let data: Vec<u8> = shots.iter().flat_map(|s| s[r].clone()).collect();
        let mut w = BatchWriter::new(&mut arg, rb).unwrap();
        w.block(0, streams as u16, 1, flags, r as u64, &data)
            .unwrap();
        let n = w.finish();
        peer.send(&request(
            protocol::ENQUEUE_SYNDROMES_ID,
            r as u32,
            &arg[..n],
        ));
        peer.poll();
    }
    peer.wait_for("every final commit", |p| {
        p.records
            .iter()
            .filter(|(_, r)| r.kind == RecordKind::CommitFinal)
            .count()
            == streams as usize
    });
    let mut by_stream: BTreeMap<u32, Vec<Record>> = BTreeMap::new();
    for (id, r) in &peer.records {
        by_stream.entry(r.stream).or_default().push(*r);
        if let Some(through) = r.through_round() {
            assert_eq!(
                u64::from(*id),
                through,
                "answered with the request of its last round"
            );
        }
    }
    for (s, shot) in shots.iter().enumerate() {
        let mut direct = StreamDecoder::new(model);
        let mut want = Vec::new();
        for (r, round) in shot[..rounds - 1].iter().enumerate() {
            want.extend(direct.push_round(r as u64, round).unwrap());
        }
        want.push(direct.finish(&shot[rounds - 1]).unwrap());
        let got: Vec<_> = by_stream[&(s as u32)]
            .iter()
            .map(|r| (r.first_round, r.rounds, r.value))
            .collect();
        let want: Vec<_> = want
            .iter()
            .map(|c| (c.first_round, c.rounds, c.flips))
            .collect();
        assert_eq!(got, want, "stream {s}");
    }
}

#[test]
fn streams_through_the_inproc_ring_commit_what_the_decoder_commits() {
    let opts = options(5, 2);
    let model = qfwd::stream::load_model(&fixture().with_extension("dem"), &opts.settings).unwrap();
    let (client, server) = inproc::channel(64, 20_000).unwrap();
    let running = qfwd::stream::spawn_inproc(&opts, model.clone(), server).unwrap();
    assert!(
        running.description().contains("2 decoder threads"),
        "{}",
        running.description()
    );
    let mut peer = Peer {
        client,
        records: Vec::new(),
        statuses: Vec::new(),
    };
    stream_shots(&mut peer, &model, 5);
    running.stop();
    let stats = running.join().unwrap();
    assert!(stats.adds_up(), "{stats}");
    let rounds = 5 * 101;
    assert_eq!(stats.rounds.received, rounds);
    assert_eq!(stats.rounds.committed, rounds);
    assert_eq!(stats.workers.len(), 2);
    assert_eq!((stats.workers[0].streams, stats.workers[1].streams), (3, 2));
    assert_eq!(stats.dispatch.records, peer.records.len() as u64);
    assert!(peer.statuses.iter().all(|&(_, s)| s == 0));
    let text = stats.to_string();
    assert!(
        text.contains("rounds received 505 = accepted 505 + refused 0"),
        "{text}"
    );
}

#[test]
fn every_refusal_and_error_is_answered_and_counted() {
    let opts = options(3, 2);
    let model = qfwd::stream::load_model(&fixture().with_extension("dem"), &opts.settings).unwrap();
    let rb = model.round_bytes();
    let (client, server) = inproc::channel(64, 20_000).unwrap();
    let running = qfwd::stream::spawn_inproc(&opts, model.clone(), server).unwrap();
    let mut peer = Peer {
        client,
        records: Vec::new(),
        statuses: Vec::new(),
    };
    let mut arg = vec![0u8; 1024];
    let mut batch = |blocks: &[(u32, u16, u8, u8, u64)]| {
        let mut w = BatchWriter::new(&mut arg, rb).unwrap();
        for &(fs, s, r, f, fr) in blocks {
            w.block(
                fs,
                s,
                r,
                f,
                fr,
                &vec![0u8; usize::from(s) * usize::from(r) * rb],
            )
            .unwrap();
        }
        let n = w.finish();
        arg[..n].to_vec()
    };
    // 1: streams 1..5 (3 and 4 unknown), rounds 0 and 1.
    peer.send(&request(
        protocol::ENQUEUE_SYNDROMES_ID,
        1,
        &batch(&[(1, 4, 2, 0, 0)]),
    ));
    // 2: stream 0 round 3 (0, 1, 2 missing); stream 1 round 1 again.
    peer.send(&request(
        protocol::ENQUEUE_SYNDROMES_ID,
        2,
        &batch(&[(0, 1, 1, 0, 3), (1, 1, 1, 0, 1)]),
    ));
    // 3: a malformed batch; 4: an unknown function; 5: a length mismatch.
    peer.send(&request(protocol::ENQUEUE_SYNDROMES_ID, 3, &[1, 0, 9, 0]));
    peer.send(&request(wire::function_id("stream.nonsense"), 4, &[]));
    let mut short = request(protocol::RESET_DECODER_ID, 5, &[0; 16]);
    short.truncate(30);
    peer.send(&short);
    // 6: corrections of stream 2; 7: reset streams 1..4 (3 unknown); 8: stream 1 round 0.
    let g = GetCorrections {
        stream: 2,
        flags: 0,
    };
    peer.send(&request(protocol::GET_CORRECTIONS_ID, 6, &g.encode()));
    let r = ResetDecoder {
        first_stream: 1,
        streams: 3,
    };
    peer.send(&request(protocol::RESET_DECODER_ID, 7, &r.encode()));
    peer.send(&request(
        protocol::ENQUEUE_SYNDROMES_ID,
        8,
        &batch(&[(1, 1, 1, FLAG_RESET, 0)]),
    ));
    // Answers from different decoder threads may come in any order (each stream's in order).
    peer.wait_for("every answer", |p| {
        let records = |want: u32| p.records.iter().filter(|(id, _)| *id == want).count();
        p.statuses
            .iter()
            .filter(|(id, _)| (3..=5).contains(id))
            .count()
            == 3
            && records(6) == 1
            && records(7) == 3
            && records(8) == 1
    });
    let find = |id: u32, kind: RecordKind, stream: u32| {
        peer.records
            .iter()
            .find(|(i, r)| *i == id && r.kind == kind && r.stream == stream)
            .map(|(_, r)| *r)
            .unwrap_or_else(|| {
                panic!(
                    "no {kind:?} for stream {stream} in answer {id}: {:?}",
                    peer.records
                )
            })
    };
    let unknown = find(1, RecordKind::Refused, 3);
    assert_eq!(
        (unknown.status, unknown.value, unknown.rounds),
        (refusal::UNKNOWN_STREAM, 2, 2)
    );
    let missing = find(2, RecordKind::Refused, 0);
    assert_eq!(
        (missing.status, missing.first_round, missing.value),
        (refusal::ROUNDS_MISSING, 3, 0)
    );
    let repeated = find(2, RecordKind::Refused, 1);
    assert_eq!(
        (repeated.status, repeated.value),
        (refusal::ROUND_REPEATED, 2)
    );
    let status_of = |id: u32| {
        peer.statuses
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, s)| *s)
    };
    assert_eq!(status_of(3), Some(wire::status::BAD_ARGUMENT));
    assert_eq!(status_of(4), Some(wire::status::UNKNOWN_FUNCTION));
    assert_eq!(status_of(5), Some(wire::status::LENGTH_MISMATCH));
    let c = find(6, RecordKind::Corrections, 2);
    assert_eq!((c.first_round, c.value), (0, 0));
    for s in [1, 2] {
        let reset = find(7, RecordKind::Reset, s);
        assert_eq!(
            (reset.first_round, reset.value),
            (2, 2),
            "two rounds pending, discarded"
        );
    }
    assert_eq!(
        find(7, RecordKind::Refused, 3).status,
        refusal::UNKNOWN_STREAM
    );
    // The reset flag acknowledges itself; round 0 is then accepted (no refusal).
    assert_eq!(find(8, RecordKind::Reset, 1).value, 0);
    running.stop();
    let stats = running.join().unwrap();
    assert!(stats.adds_up(), "{stats}");
    let d = &stats.dispatch;
    assert_eq!((d.datagrams, d.applied, d.answered_error()), (8, 5, 3));
    // Rounds: 8 (request 1) + 2 + 1 (request 8).
    assert_eq!(stats.rounds.received, 11);
    assert_eq!(stats.rounds.refused_total(), 4 + 1 + 1);
    assert_eq!(stats.rounds.discarded, 4);
    assert_eq!(stats.rounds.pending, 1, "stream 1's new round 0");
}

#[test]
fn streams_over_udp_with_one_decoder_thread() {
    let opts = options(2, 1);
    let model = qfwd::stream::load_model(&fixture().with_extension("dem"), &opts.settings).unwrap();
    let running = qfwd::serve::wiring::streams_udp(
        &opts,
        model.clone(),
        "127.0.0.1:0".parse().unwrap(),
        Vec::new(),
    )
    .unwrap();
    let client = qfwd::transport::udp::UdpClient::connect(running.local_addr().unwrap()).unwrap();
    let mut peer = Peer {
        client,
        records: Vec::new(),
        statuses: Vec::new(),
    };
    stream_shots(&mut peer, &model, 2);
    running.stop();
    let stats = running.join().unwrap();
    assert!(stats.adds_up(), "{stats}");
    assert_eq!(stats.rounds.committed, 2 * 101);
}

#[test]
fn settings_out_of_range_name_their_key() {
    for (s, key) in [
        (
            StreamSettings {
                streams: 0,
                ..Default::default()
            },
            "streams",
        ),
        (
            StreamSettings {
                window: 1,
                ..Default::default()
            },
            "window",
        ),
        (
            StreamSettings {
                commit: 15,
                ..Default::default()
            },
            "commit",
        ),
        (
            StreamSettings {
                queue_slots: 0,
                ..Default::default()
            },
            "queue_slots",
        ),
        (
            StreamSettings {
                max_request_bytes: 70_000,
                ..Default::default()
            },
            "max_request_bytes",
        ),
        (
            StreamSettings {
                workers: 5000,
                ..Default::default()
            },
            "workers",
        ),
    ] {
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains(key), "{key}: {e}");
    }
    StreamSettings::default().validate().unwrap();
    let s = StreamSettings {
        streams: 3,
        workers: 8,
        ..Default::default()
    };
    assert_eq!(s.worker_count(), 3, "never more threads than streams");
}

#[test]
fn qfwd_run_serves_streams_and_says_what_is_wrong() {
    let dem = fixture().with_extension("dem");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_qfwd"))
        .args(["run", "--streams", "3", "--window", "15", "--commit", "5"])
        .args([
            "--listen",
            "127.0.0.1:0",
            "--duration",
            "0.3",
            "--stats-interval",
            "0",
        ])
        .arg("--dem")
        .arg(&dem)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("qfwd: serving 3 streams of"), "{err}");
    assert!(
        err.contains("rounds received 0 = accepted 0 + refused 0"),
        "{err}"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_qfwd"))
        .args(["run", "--streams", "3", "--commit", "15"])
        .arg("--dem")
        .arg(&dem)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("commit") && err.contains("1 ..= window - 1"),
        "{err}"
    );
}
