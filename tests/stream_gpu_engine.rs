//! The batched stream engine (`qfwd::stream::gpu_engine`) against the CPU pool: the same
//! requests get the same response bytes, request by request, and the same counters. A
//! script of requests drives both: staggered streams, blocks of one to three rounds,
//! repeated and missing rounds, unknown streams, resets (by request and by block flag),
//! corrections read and cleared, final rounds (too early, then in time, then rounds after
//! them), and requests the dispatcher refuses.
//!
//! On the CPU the batched engine runs its CPU stand-in decoder, and the persistent
//! kernel's protocol served by host threads. On a GPU host the ignored test runs both GPU
//! decoders (the persistent kernel, and a launch per batch) on the same script and on a
//! larger load:
//!
//! ```text
//! cargo test --release --test stream_gpu_engine -- --ignored --nocapture
//! ```
//!
//! (run on a GPU host; it prints a notice and passes where there is no GPU. `QFWD_GPU`
//! picks the device.)

mod gpu_common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use qfwd::forward::IdlePolicy;
use qfwd::stream::protocol::{self, BatchWriter, GetCorrections, ResetDecoder};
use qfwd::stream::protocol::{FLAG_FINAL, FLAG_RESET, FLAG_RESET_CORRECTIONS};
use qfwd::stream::{
    BatchedDecoder, GpuEngineOptions, RunningStreams, ServiceOptions, StreamSettings, StreamStats,
};
use qfwd::transport::{inproc, Client};
use qfwd::wire;
use qfwd_decode::window::{StreamModel, StreamSampler};
use qfwd_decode::Dem;

fn model() -> Arc<StreamModel> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/surface_d5_r5_z_p005.dem");
    Arc::new(StreamModel::from_dem(&Dem::from_path(&path).unwrap(), 10, 5).unwrap())
}

fn options(streams: u32) -> ServiceOptions {
    ServiceOptions {
        settings: StreamSettings {
            streams,
            window: 10,
            commit: 5,
            workers: 1,
            // Deep enough that no request finds a queue full: that depends on timing.
            queue_slots: 8192,
            max_request_bytes: 16_384,
            ..StreamSettings::default()
        },
        cores: Vec::new(),
        idle: IdlePolicy::Yield,
        batch: 16,
    }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) % n
    }
}

/// The client's view of one stream while the script is written.
struct Side {
    shot: Vec<Vec<u8>>,
    shots: u64,
    next: usize,
    start: u64,
    /// Sent a final round or skipped one: a reset comes next.
    needs_reset: bool,
    /// Its final round was taken.
    finished: bool,
}

fn request(function_id: u32, id: u32, arg: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; wire::HEADER_LEN + arg.len()];
    wire::write_request(&mut buf, function_id, id, u64::from(id) * 3 + 1, arg).unwrap();
    buf
}

/// The script: `cycles` cycles of `streams` streams (each starting at cycle `s % 5`),
/// with everything the protocol can answer mixed in. Request ids are 1, 2, ...
fn script(m: &Arc<StreamModel>, streams: u32, cycles: u64, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed | 1);
    let rb = m.round_bytes();
    let sample = |k: u64| -> Vec<Vec<u8>> {
        let mut s = StreamSampler::new(m, 24 + (k % 7) as u32, seed ^ k).unwrap();
        std::iter::from_fn(|| s.next_round()).collect()
    };
    let mut sides: Vec<Side> = (0..streams)
        .map(|s| Side {
            shot: sample(u64::from(s) << 8),
            shots: 0,
            next: 0,
            start: u64::from(s % 5),
            needs_reset: false,
            finished: false,
        })
        .collect();
    let mut out = Vec::new();
    let mut id = 0u32;
    let mut next_id = || {
        id += 1;
        id
    };
    let mut arg = vec![0u8; 16_000];
    for cycle in 0..cycles {
        let mut w = BatchWriter::new(&mut arg, rb).unwrap();
        for (s, side) in sides.iter_mut().enumerate() {
            if cycle < side.start {
                continue;
            }
            let mut flags = 0;
            if side.finished && rng.below(2) == 0 {
                // A round after the final one: refused until a reset.
                w.block(s as u32, 1, 1, 0, side.next as u64, &side.shot[0])
                    .unwrap();
                continue;
            }
            if side.needs_reset {
                side.finished = false;
                side.shots += 1;
                side.shot = sample((s as u64) << 8 | side.shots);
                side.next = 0;
                side.needs_reset = false;
                flags |= FLAG_RESET;
            }
            let body = side.shot.len() - 1;
            let left = body - side.next;
            let k = (1 + rng.below(3) as usize).min(left.max(1));
            let roll = rng.below(40);
            let (first, rounds, data): (u64, usize, Vec<u8>) = if left == 0 || roll == 0 {
                // The final round: early now and then (too short), else at the end.
                side.needs_reset = side.next >= m.min_rounds() as usize;
                side.finished = side.needs_reset;
                flags |= FLAG_FINAL;
                (side.next as u64, 1, side.shot[body].clone())
            } else if roll == 1 && side.next > 0 {
                // A repeated round, then the expected ones.
                let r = side.next - 1;
                let data = side.shot[r..side.next + k].concat();
                side.next += k;
                (r as u64, k + 1, data)
            } else if roll == 2 && left > 2 {
                // A round skipped: the rest are missing until a reset.
                side.needs_reset = true;
                let r = side.next + 1;
                (r as u64, 1, side.shot[r].clone())
            } else {
                let r = side.next;
                side.next += k;
                (r as u64, k, side.shot[r..r + k].concat())
            };
            w.block(s as u32, 1, rounds as u8, flags, first, &data)
                .unwrap();
        }
        if rng.below(8) == 0 {
            // An unknown stream beside known ones.
            w.block(streams, 1, 1, 0, 0, &vec![0u8; rb]).unwrap();
        }
        let n = w.finish();
        if n > protocol::HEADER_BYTES {
            out.push(request(
                protocol::ENQUEUE_SYNDROMES_ID,
                next_id(),
                &arg[..n],
            ));
        }
        match rng.below(12) {
            0 | 1 => {
                let g = GetCorrections {
                    stream: rng.below(u64::from(streams) + 1) as u32,
                    flags: if rng.below(2) == 0 {
                        FLAG_RESET_CORRECTIONS
                    } else {
                        0
                    },
                };
                out.push(request(
                    protocol::GET_CORRECTIONS_ID,
                    next_id(),
                    &g.encode(),
                ));
            }
            2 => {
                let first = rng.below(u64::from(streams)) as u32;
                let r = ResetDecoder {
                    first_stream: first,
                    streams: 1 + rng.below(3) as u32,
                };
                for side in sides
                    .iter_mut()
                    .skip(first as usize)
                    .take(r.streams as usize)
                {
                    if cycle >= side.start {
                        side.shots += 1;
                        side.next = 0;
                        side.needs_reset = false;
                        side.finished = false;
                    }
                }
                out.push(request(protocol::RESET_DECODER_ID, next_id(), &r.encode()));
            }
            3 if cycle % 17 == 3 => {
                // Not a function of the stream protocol.
                out.push(request(0x7777, next_id(), &[0u8; 8]));
            }
            _ => {}
        }
    }
    // Last: every stream's corrections, so the final answers tell that all is answered.
    for s in 0..streams {
        let g = GetCorrections {
            stream: s,
            flags: 0,
        };
        out.push(request(
            protocol::GET_CORRECTIONS_ID,
            next_id(),
            &g.encode(),
        ));
    }
    out
}

/// Every response, by request id, in the order it came; and the service's counters.
type Answers = BTreeMap<u32, Vec<Vec<u8>>>;

/// Sends the whole script as fast as the ring takes it (or, `paced`, reading responses
/// between requests, so that batches are small and follow each other), then collects
/// responses until the last request is answered.
fn drive(
    running: RunningStreams,
    mut client: inproc::InprocClient,
    script: &[Vec<u8>],
    paced: bool,
) -> (Answers, StreamStats) {
    let mut answers = Answers::new();
    let mut buf = vec![0u8; 70_000];
    let last = script.len() as u32;
    let mut poll = |client: &mut inproc::InprocClient, answers: &mut Answers| {
        while let Some(n) = client.try_recv(&mut buf).unwrap() {
            let v = wire::parse_response(&buf[..n]).unwrap();
            answers
                .entry(v.header.request_id)
                .or_default()
                .push(buf[..n].to_vec());
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    for req in script {
        if paced {
            for _ in 0..50 {
                poll(&mut client, &mut answers);
                std::thread::yield_now();
            }
        }
        while !client.send(req).unwrap() {
            assert!(
                Instant::now() < deadline,
                "the service stopped taking requests"
            );
            poll(&mut client, &mut answers);
            std::thread::yield_now();
        }
    }
    while !answers.contains_key(&last) {
        assert!(
            Instant::now() < deadline,
            "the last request was never answered"
        );
        poll(&mut client, &mut answers);
        std::thread::yield_now();
    }
    running.stop();
    let stats = running.join().unwrap();
    poll(&mut client, &mut answers);
    (answers, stats)
}

fn serve(
    script: &[Vec<u8>],
    streams: u32,
    engine: Option<BatchedDecoder>,
) -> (Answers, StreamStats) {
    serve_paced(script, streams, engine, false)
}

fn serve_paced(
    script: &[Vec<u8>],
    streams: u32,
    engine: Option<BatchedDecoder>,
    paced: bool,
) -> (Answers, StreamStats) {
    let m = model();
    let opts = options(streams);
    let slot = wire::HEADER_LEN + opts.settings.max_request_bytes + 1024;
    let (client, server) = inproc::channel(16_384, slot).unwrap();
    let running = match engine {
        None => qfwd::stream::spawn_inproc(&opts, m, server).unwrap(),
        Some(e) => qfwd::stream::spawn_batched_inproc(&opts, m, server, e).unwrap(),
    };
    drive(running, client, script, paced)
}

fn assert_same(name: &str, a: &(Answers, StreamStats), b: &(Answers, StreamStats)) {
    assert!(
        a.1.adds_up(),
        "{name}: the reference's counters add up\n{}",
        a.1
    );
    assert!(b.1.adds_up(), "{name}: the counters add up\n{}", b.1);
    assert_eq!(
        a.1.rounds, b.1.rounds,
        "{name}: rounds counted\n{}\n---\n{}",
        a.1, b.1
    );
    assert_eq!(a.0.len(), b.0.len(), "{name}: requests answered");
    for (id, want) in &a.0 {
        assert_eq!(
            Some(want),
            b.0.get(id),
            "{name}: the responses to request {id}"
        );
    }
    assert_eq!(
        a.1.dispatch.records, b.1.dispatch.records,
        "{name}: records sent"
    );
}

/// The script exercises what it claims: every kind of answer is in it.
fn assert_covers(stats: &StreamStats) {
    use qfwd::stream::protocol::refusal;
    let r = &stats.rounds;
    for code in [
        refusal::UNKNOWN_STREAM,
        refusal::ROUND_REPEATED,
        refusal::ROUNDS_MISSING,
        refusal::STREAM_FINISHED,
        refusal::TOO_SHORT,
    ] {
        assert!(
            r.refused[usize::from(code) - 1] > 0,
            "no {}",
            refusal::name(code)
        );
    }
    assert!(r.discarded > 0 && r.windows > 50, "{stats}");
    assert!(stats.dispatch.records > r.windows, "{stats}");
    assert!(stats.dispatch.answered_error() > 0, "{stats}");
}

#[test]
fn the_batched_engine_answers_what_the_cpu_pool_answers() {
    let m = model();
    let script = script(&m, 12, 160, 0x5eed);
    let cpu = serve(&script, 12, None);
    assert_covers(&cpu.1);
    let batched = serve(&script, 12, Some(BatchedDecoder::Cpu));
    assert_same("CPU stand-in", &cpu, &batched);
    let served = serve(&script, 12, Some(BatchedDecoder::CpuServed));
    assert_same(
        "the persistent kernel's protocol, served on the CPU",
        &cpu,
        &served,
    );
    let b = batched.1.batched.as_ref().expect("batched counts");
    assert!(b.batches > 0 && b.rounds_decoded > 0, "{b}");
    assert_eq!(
        b.rounds_decoded, batched.1.rounds.accepted,
        "every accepted round decoded"
    );
    eprintln!("{}", batched.1);
    // Paced, the batches are many and small, and the persistent kernel's protocol takes
    // them two at a time (how often one is posted while another decodes depends on the
    // host's timing).
    let paced = serve_paced(&script, 12, Some(BatchedDecoder::CpuServed), true);
    assert_same("the same protocol, paced", &cpu, &paced);
    let p = paced.1.batched.as_ref().expect("batched counts");
    assert!(p.batches > 10, "{p}");
    eprintln!("{}", paced.1);
}

/// Where there is no GPU, asking for the GPU engine is a clear error, not a panic.
#[test]
fn the_gpu_engine_without_a_gpu_says_so() {
    if qfwd::gpu::unavailable_reason().is_none() {
        eprintln!("a GPU is here: nothing to check");
        return;
    }
    let opts = options(2);
    let (_client, server) = inproc::channel(16, 4096).unwrap();
    let e = qfwd::stream::spawn_batched_inproc(
        &opts,
        model(),
        server,
        BatchedDecoder::Gpu(GpuEngineOptions::default()),
    )
    .err()
    .expect("no GPU, no engine");
    assert!(e.to_string().contains("GPU"), "{e}");
}

#[test]
#[ignore = "run on a GPU host: cargo test --release --test stream_gpu_engine -- --ignored"]
fn the_gpu_engine_answers_what_the_cpu_stand_in_answers() {
    let Some(_gpu) =
        gpu_common::gpu_or_skip("the_gpu_engine_answers_what_the_cpu_stand_in_answers")
    else {
        return;
    };
    let options = GpuEngineOptions {
        device: gpu_common::gpu_index(),
        threads: 256,
    };
    let m = model();
    for (streams, cycles, seed) in [(12, 160, 0x5eed), (300, 80, 7)] {
        let script = script(&m, streams, cycles, seed);
        let reference = serve(&script, streams, Some(BatchedDecoder::Cpu));
        for (name, gpu) in [
            ("persistent kernel", BatchedDecoder::Gpu(options)),
            ("launch per batch", BatchedDecoder::GpuLaunch(options)),
        ] {
            let on_gpu = serve(&script, streams, Some(gpu));
            assert_same(
                &format!("GPU {name}, {streams} streams"),
                &reference,
                &on_gpu,
            );
            eprintln!(
                "{streams} streams x {cycles} cycles: GPU {name} == CPU stand-in ({} windows)\n  {}",
                on_gpu.1.rounds.windows,
                on_gpu.1.batched.as_ref().expect("batched counts")
            );
        }
    }
}
