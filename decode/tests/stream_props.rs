//! Property tests of `StreamDecoder` under any sequence of calls, with any bytes: it never
//! panics, refuses exactly what a reference state machine says it must (and then changes
//! nothing), its commits tile the rounds, bits past the last slot change nothing, and the
//! same calls after `reset` give the same answers.

use std::sync::{Arc, OnceLock};

use proptest::prelude::*;
use qfwd_decode::window::{repetition_text, Commit, StreamDecoder, StreamError, StreamModel};
use qfwd_decode::Dem;

/// A distance-4 repetition code: 6 slots (3 kept), so a round is one byte with 2 bits of
/// padding. W = 5, C = 2.
fn model() -> &'static Arc<StreamModel> {
    static M: OnceLock<Arc<StreamModel>> = OnceLock::new();
    M.get_or_init(|| {
        let dem = Dem::parse(&repetition_text(4, 8, 0.1, 0.05), "rep4").unwrap();
        Arc::new(StreamModel::from_dem(&dem, 5, 2).unwrap())
    })
}

#[derive(Debug, Clone)]
enum Op {
    /// Push the expected round plus `skew` (wrapping), with these bytes.
    Push {
        skew: i8,
        events: Vec<u8>,
    },
    Finish {
        events: Vec<u8>,
    },
    Reset,
}

fn op() -> impl Strategy<Value = Op> {
    let events = prop_oneof![
        8 => proptest::collection::vec(any::<u8>(), 1..=1),
        1 => proptest::collection::vec(any::<u8>(), 0..3),
    ];
    prop_oneof![
        12 => (prop_oneof![10 => Just(0i8), 1 => -2i8..3], events.clone())
            .prop_map(|(skew, events)| Op::Push { skew, events }),
        1 => events.prop_map(|events| Op::Finish { events }),
        1 => Just(Op::Reset),
    ]
}

/// What a call answered.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Out {
    Pushed(Option<Commit>),
    Finished(Commit),
    Refused(StreamError),
    Reset,
}

/// Runs `ops` on `s`, checking every answer against the reference state.
fn run(s: &mut StreamDecoder, ops: &[Op]) -> Vec<Out> {
    let m = model();
    let (w, c) = (
        u64::from(m.rounds_per_window()),
        u64::from(m.commit_rounds()),
    );
    // The reference: next round, first round not committed, finished.
    let (mut next, mut start, mut done) = (0u64, 0u64, false);
    let mut out = Vec::new();
    for op in ops {
        match op {
            Op::Push { skew, events } => {
                let round = next.wrapping_add(*skew as i64 as u64);
                let got = s.push_round(round, events);
                let want_err = if done {
                    Some(StreamError::Finished)
                } else if events.len() != m.round_bytes() {
                    Some(StreamError::WrongLength {
                        expected: m.round_bytes(),
                        got: events.len(),
                    })
                } else if round < next {
                    Some(StreamError::RoundRepeated {
                        expected: next,
                        got: round,
                    })
                } else if round > next {
                    Some(StreamError::RoundsMissing {
                        expected: next,
                        got: round,
                    })
                } else {
                    None
                };
                match (got, want_err) {
                    (Err(e), Some(want)) => {
                        assert_eq!(e, want);
                        out.push(Out::Refused(e));
                    }
                    (Ok(commit), None) => {
                        next += 1;
                        if next - start == w {
                            let c0 = commit.expect("a window completes");
                            assert_eq!((c0.first_round, u64::from(c0.rounds)), (start, c));
                            start += c;
                        } else {
                            assert_eq!(commit, None);
                        }
                        out.push(Out::Pushed(commit));
                    }
                    (got, want) => panic!("push {round}: got {got:?}, want {want:?}"),
                }
            }
            Op::Finish { events } => {
                let got = s.finish(events);
                let want_err = if done {
                    Some(StreamError::Finished)
                } else if events.len() != m.round_bytes() {
                    Some(StreamError::WrongLength {
                        expected: m.round_bytes(),
                        got: events.len(),
                    })
                } else if next < u64::from(m.min_rounds()) {
                    Some(StreamError::TooShort {
                        rounds: next,
                        min: u64::from(m.min_rounds()),
                    })
                } else {
                    None
                };
                match (got, want_err) {
                    (Err(e), Some(want)) => {
                        assert_eq!(e, want);
                        out.push(Out::Refused(e));
                    }
                    (Ok(commit), None) => {
                        assert_eq!(
                            (commit.first_round, u64::from(commit.rounds)),
                            (start, next - start + 1)
                        );
                        done = true;
                        out.push(Out::Finished(commit));
                    }
                    (got, want) => panic!("finish: got {got:?}, want {want:?}"),
                }
            }
            Op::Reset => {
                s.reset();
                (next, start, done) = (0, 0, false);
                out.push(Out::Reset);
            }
        }
        assert_eq!((s.next_round(), s.window_start()), (next, start));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn any_calls_are_answered_as_the_reference_says(ops in proptest::collection::vec(op(), 0..80)) {
        let mut s = StreamDecoder::new(model());
        let first = run(&mut s, &ops);
        // The same calls again, after a reset: the same answers.
        s.reset();
        prop_assert_eq!(run(&mut s, &ops), first.clone());
        // Padding bits (past the 6 slots) change nothing.
        let padded: Vec<Op> = ops
            .iter()
            .map(|op| match op {
                Op::Push { skew, events } => Op::Push {
                    skew: *skew,
                    events: events.iter().map(|b| b | 0xC0).collect(),
                },
                Op::Finish { events } => Op::Finish {
                    events: events.iter().map(|b| b ^ 0x80).collect(),
                },
                Op::Reset => Op::Reset,
            })
            .collect();
        s.reset();
        prop_assert_eq!(run(&mut s, &padded), first);
    }
}
