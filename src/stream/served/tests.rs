use super::*;
use crate::stream::batch::CpuBatchDecoder;
use qfwd_decode::window::StreamSampler;
use qfwd_decode::Dem;

fn model() -> Arc<StreamModel> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/surface_d5_r5_z_p005.dem"
    );
    Arc::new(StreamModel::from_dem(&Dem::from_path(path.as_ref()).unwrap(), 10, 5).unwrap())
}

/// Stream `s`'s `n` rounds from `from` (and its final round when `finish`).
fn piece(
    rounds: &[Vec<Vec<u8>>],
    s: usize,
    reset: bool,
    from: usize,
    n: usize,
    finish: bool,
) -> Work {
    Work {
        stream: s as u32,
        reset,
        first_round: from as u64,
        rounds: n as u32,
        finish,
        events: rounds[s][from..from + n + usize::from(finish)].concat(),
    }
}

/// `rounds` sampled rounds (and a final one) of each of `streams` streams.
fn sampled(m: &Arc<StreamModel>, streams: usize, rounds: u32, seed: u64) -> Vec<Vec<Vec<u8>>> {
    (0..streams)
        .map(|s| {
            let mut smp = StreamSampler::new(m, rounds, seed + s as u64).unwrap();
            std::iter::from_fn(|| smp.next_round()).collect()
        })
        .collect()
}

/// Batches of 5 streams (60 rounds sampled each) at different phases, with resets
/// mid-stream and final rounds, some of 45 rounds or more.
fn planned_batches(rounds: &[Vec<Vec<u8>>]) -> Vec<Vec<Work>> {
    let mut next = [0usize; 5];
    // Per batch and stream: rounds to send, and whether the stream finishes.
    let plan: [[(usize, bool); 5]; 6] = [
        [(3, false), (12, false), (0, false), (45, false), (7, false)],
        [(9, false), (0, false), (6, false), (15, true), (53, true)],
        [(20, false), (30, false), (4, false), (8, false), (0, false)],
        [(2, false), (1, false), (3, false), (5, false), (0, false)],
        [(5, false), (0, false), (0, false), (9, true), (6, false)],
        [(28, true), (18, true), (50, true), (0, false), (0, false)],
    ];
    let mut batches = Vec::new();
    for batch in plan {
        let mut work = Vec::new();
        for (s, &(n, finish)) in batch.iter().enumerate() {
            if n == 0 && !finish {
                continue;
            }
            // A stream that finished starts again with a reset.
            let reset = next[s] == usize::MAX || next[s] == 0;
            let from = if next[s] == usize::MAX { 0 } else { next[s] };
            let n = n.min(59 - from);
            work.push(piece(rounds, s, reset, from, n, finish));
            next[s] = if finish { usize::MAX } else { from + n };
        }
        batches.push(work);
    }
    batches
}

/// The planned batches, some entries larger than a submission holds: the served
/// decoder (two stand-in blocks) commits exactly what the CPU stand-in does.
#[test]
fn served_batches_commit_what_the_stand_in_does() {
    let m = model();
    let streams = 5;
    let rounds = sampled(&m, streams, 60, 100);
    // 40 rounds of events per submission at most: a 45-round entry is split.
    let events = 40 * m.round_bytes();
    let device = CpuServeDevice::new(&m, streams, 2, events).unwrap();
    let mut served = ServedBatchDecoder::new(device, &m, streams);
    let mut reference = CpuBatchDecoder::new(&m, streams);
    let mut submissions = 0;
    for work in planned_batches(&rounds) {
        let (mut want, mut want_counts) = (Vec::new(), Vec::new());
        reference
            .decode(&work, &mut want, &mut want_counts)
            .unwrap();
        let (mut got, mut got_counts) = (Vec::new(), Vec::new());
        submissions += served.decode(&work, &mut got, &mut got_counts).unwrap();
        assert_eq!(got_counts, want_counts);
        assert_eq!(got, want);
    }
    assert!(
        submissions > 6,
        "the large entries took more than one submission each"
    );
}

/// The planned batches posted while the one before decodes, two in flight at most;
/// one that does not fit a submission is decoded after those in flight. The same
/// answers as the CPU stand-in's, batch after batch.
#[test]
fn posted_batches_commit_what_the_stand_in_does() {
    let m = model();
    let streams = 5;
    let rounds = sampled(&m, streams, 60, 100);
    // Room for 80 rounds a submission: two of the six batches need more.
    let device = CpuServeDevice::new(&m, streams, 2, 80 * m.round_bytes()).unwrap();
    let mut served = ServedBatchDecoder::new(device, &m, streams);
    assert_eq!(served.depth(), 2);
    let mut reference = CpuBatchDecoder::new(&m, streams);
    let mut want = VecDeque::new();
    let collect_one = |served: &mut ServedBatchDecoder<CpuServeDevice>,
                       want: &mut VecDeque<(Vec<Commit>, Vec<u32>)>| {
        let (mut c, mut n) = (vec![Vec::new()], vec![Vec::new()]);
        assert_eq!(served.collect(&mut c, &mut n).unwrap(), 1);
        let (wc, wn) = want.pop_front().expect("a batch in flight");
        assert_eq!((&c[0], &n[0]), (&wc, &wn));
    };
    let (mut posted, mut refused) = (0, 0);
    for work in planned_batches(&rounds) {
        let expected = {
            let (mut c, mut n) = (Vec::new(), Vec::new());
            reference.decode(&work, &mut c, &mut n).unwrap();
            (c, n)
        };
        let batch = vec![work];
        if want.len() < 2 && served.post(&batch).unwrap() {
            posted += 1;
            want.push_back(expected);
            if want.len() == 2 {
                assert!(!served.post(&batch).unwrap(), "both buffers are in flight");
                collect_one(&mut served, &mut want);
            }
            continue;
        }
        refused += 1;
        if !want.is_empty() {
            let err = served.decode_segments(&batch, &mut [vec![]], &mut [vec![]]);
            assert!(err.is_err(), "a synchronous batch while others fly");
        }
        while !want.is_empty() {
            collect_one(&mut served, &mut want);
        }
        let (mut c, mut n) = (vec![Vec::new()], vec![Vec::new()]);
        served.decode_segments(&batch, &mut c, &mut n).unwrap();
        assert_eq!((c.pop().unwrap(), n.pop().unwrap()), expected);
    }
    while !want.is_empty() {
        collect_one(&mut served, &mut want);
    }
    assert!(served.ready(), "nothing in flight");
    assert_eq!((posted, refused), (4, 2));
    let empty: Vec<Vec<Work>> = vec![vec![]];
    assert!(!served.post(&empty).unwrap(), "no work: nothing to post");
}

/// Streams reset mid-batch (an entry in each of three segments, one split over two
/// submissions): one job per stream, answers filed by segment as the segment-by-
/// segment default files them.
#[test]
fn segments_go_in_one_submission_with_each_streams_pieces_in_order() {
    let m = model();
    let rb = m.round_bytes();
    let streams = 4;
    let rounds = sampled(&m, streams, 40, 7);
    let work = |s, reset, from, n, finish| piece(&rounds, s, reset, from, n, finish);
    // Stream 0: 12 rounds, finish; again from 0 (reset) 30 rounds. Stream 1: three
    // pieces. Stream 2 in the middle segment only; stream 3 only in the first.
    let segments = vec![
        vec![
            work(0, true, 0, 12, true),
            work(1, true, 0, 6, false),
            work(3, true, 0, 25, false),
        ],
        vec![
            work(1, false, 6, 14, true),
            work(2, true, 0, 11, false),
            work(0, true, 0, 30, false),
        ],
        vec![work(1, true, 0, 9, false)],
    ];
    let mut reference = CpuBatchDecoder::new(&m, streams);
    let (mut want, mut want_n) = (vec![Vec::new(); 3], vec![Vec::new(); 3]);
    let calls = reference
        .decode_segments(&segments, &mut want, &mut want_n)
        .unwrap();
    assert_eq!(calls, 3, "the default: a call per segment");
    // Room for 40 rounds a submission: stream 0's 42 rounds take two.
    let device = CpuServeDevice::new(&m, streams, 3, 40 * rb).unwrap();
    let mut served = ServedBatchDecoder::new(device, &m, streams);
    let (mut got, mut got_n) = (
        vec![
            vec![Commit {
                first_round: 9,
                rounds: 9,
                flips: 9
            }];
            3
        ],
        vec![vec![9]; 3],
    );
    let made = served
        .decode_segments(&segments, &mut got, &mut got_n)
        .unwrap();
    assert_eq!(got_n, want_n);
    assert_eq!(got, want);
    assert!(want.iter().map(Vec::len).sum::<usize>() > 8, "{want:?}");
    assert_eq!(made, served.times().submissions);
    // 107 rounds at 40 a submission, no more for the resets.
    assert!((3..=4).contains(&made), "{made} submissions");
}

#[test]
fn a_round_out_of_order_is_a_fault_not_an_answer() {
    let m = model();
    let device = CpuServeDevice::new(&m, 2, 1, 4096).unwrap();
    let mut served = ServedBatchDecoder::new(device, &m, 2);
    let rb = m.round_bytes();
    let work = |stream, first_round| Work {
        stream,
        reset: false,
        first_round,
        rounds: 1,
        finish: false,
        events: vec![0; rb],
    };
    let (mut c, mut n) = (Vec::new(), Vec::new());
    assert!(served.decode(&[work(0, 0)], &mut c, &mut n).is_ok());
    let err = served.decode(&[work(0, 5)], &mut c, &mut n).unwrap_err();
    assert!(err.to_string().contains("refused"), "{err}");
    assert!(served.decode(&[work(7, 0)], &mut c, &mut n).is_err());
}
