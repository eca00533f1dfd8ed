use std::sync::Arc;

use qfwd_decode::window::StreamModel;
use qfwd_decode::Dem;

use super::*;
use crate::stream::protocol::{BatchView, BatchWriter, FLAG_FINAL, FLAG_RESET};

const FIXTURE: &str = "tests/fixtures/stream/surface_d5_r100_z_p001";

pub(crate) fn fixture_model(w: u32, c: u32) -> (Arc<StreamModel>, Vec<Vec<Vec<u8>>>) {
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let dem = Dem::from_path(&base.with_extension("dem")).unwrap();
    let model = Arc::new(StreamModel::from_dem(&dem, w, c).unwrap());
    let exp = model.experiment(&dem).unwrap();
    let b8 = std::fs::read(base.with_extension("b8")).unwrap();
    let shot_bytes = b8.len() / 1000;
    let shots = b8
        .chunks_exact(shot_bytes)
        .take(20)
        .map(|s| exp.split(s))
        .collect();
    (model, shots)
}

/// Runs one stream's block of `rounds` (each `round_bytes` long) through `state`.
fn apply(
    state: &mut StreamState,
    first_round: u64,
    rounds: &[Vec<u8>],
    flags: u8,
    counts: &mut RoundCounts,
) -> Vec<Record> {
    let rb = rounds[0].len();
    let mut buf = vec![0u8; 64 + rounds.len() * rb + 16];
    let mut w = BatchWriter::new(&mut buf, rb).unwrap();
    w.block(
        4,
        1,
        rounds.len() as u8,
        flags,
        first_round,
        &rounds.concat(),
    )
    .unwrap();
    let n = w.finish();
    let batch = BatchView::parse(&buf[..n], rb).unwrap();
    let block = batch.blocks().next().unwrap();
    let mut out = Vec::new();
    state.apply(4, &block, 0, counts, &mut |r| out.push(r));
    out
}

#[test]
fn a_whole_shot_commits_every_round_once_in_order() {
    let (model, shots) = fixture_model(15, 5);
    let mut s = StreamState::new(&model);
    let mut counts = RoundCounts::default();
    let shot = &shots[0];
    let mut records = Vec::new();
    let last = shot.len() - 1;
    for (r, round) in shot.iter().enumerate() {
        let flags = if r == last { FLAG_FINAL } else { 0 };
        records.extend(apply(
            &mut s,
            r as u64,
            std::slice::from_ref(round),
            flags,
            &mut counts,
        ));
    }
    let mut next = 0;
    let mut flips = 0;
    for (i, rec) in records.iter().enumerate() {
        assert_eq!(rec.first_round, next, "record {i}: {rec:?}");
        let final_one = i == records.len() - 1;
        assert_eq!(
            rec.kind,
            if final_one {
                RecordKind::CommitFinal
            } else {
                RecordKind::Commit
            }
        );
        if !final_one {
            assert_eq!((rec.rounds, rec.window_rounds), (5, 15));
        }
        next += u64::from(rec.rounds);
        flips ^= rec.value;
    }
    assert_eq!(next, shot.len() as u64, "every round, the final one too");
    assert!(s.is_finished());
    assert_eq!(s.pending(), 0);
    assert!(counts.adds_up(), "{counts:?}");
    assert_eq!(counts.windows, records.len() as u64);
    // get_corrections gives the XOR of the commits.
    let mut got = Vec::new();
    s.corrections(4, true, &mut |r| got.push(r));
    assert_eq!(
        (got[0].kind, got[0].value, got[0].first_round),
        (RecordKind::Corrections, flips, next)
    );
    got.clear();
    s.corrections(4, false, &mut |r| got.push(r));
    assert_eq!(got[0].value, 0, "cleared by the first read");
}

#[test]
fn rounds_out_of_order_are_refused_with_what_the_stream_expects() {
    let (model, shots) = fixture_model(15, 5);
    let shot = &shots[1];
    let mut s = StreamState::new(&model);
    let mut c = RoundCounts::default();
    assert!(apply(&mut s, 0, &shot[0..3], 0, &mut c).is_empty());
    // Round 1 again, then 2 and 3 in one block: 1 and 2 repeated (one record), 3 taken.
    let recs = apply(&mut s, 1, &shot[1..4], 0, &mut c);
    assert_eq!(recs.len(), 1);
    assert_eq!(
        (
            recs[0].kind,
            recs[0].status,
            recs[0].first_round,
            recs[0].rounds,
            recs[0].value
        ),
        (RecordKind::Refused, refusal::ROUND_REPEATED, 1, 2, 3)
    );
    assert_eq!(s.next_round(), 4);
    // A gap: rounds 6.. are missing 4 and 5.
    let recs = apply(&mut s, 6, &shot[6..8], 0, &mut c);
    assert_eq!(
        (
            recs[0].status,
            recs[0].first_round,
            recs[0].rounds,
            recs[0].value
        ),
        (refusal::ROUNDS_MISSING, 6, 2, 4)
    );
    // A final round before the model's fewest rounds (here: as the first round).
    let mut fresh = StreamState::new(&model);
    assert_eq!(model.min_rounds(), 1);
    let recs = apply(&mut fresh, 0, &shot[0..1], FLAG_FINAL, &mut c);
    assert_eq!((recs[0].status, recs[0].value), (refusal::TOO_SHORT, 0));
    assert!(!fresh.is_finished());
    assert_eq!(c.received, 3 + 3 + 2 + 1);
    assert_eq!(c.accepted, 4);
    assert_eq!(c.refused_total(), 5);
    c.pending = s.pending();
    assert!(c.adds_up(), "{c:?}");
}

#[test]
fn a_reset_discards_what_was_pending_and_starts_at_round_zero() {
    let (model, shots) = fixture_model(15, 5);
    let shot = &shots[2];
    let mut s = StreamState::new(&model);
    let mut c = RoundCounts::default();
    let recs = apply(&mut s, 0, &shot[0..17], 0, &mut c);
    assert_eq!(recs.len(), 1, "one window of 15 committed 5");
    assert_eq!(s.pending(), 12);
    // The reset flag: the block's rounds start a new run.
    let recs = apply(&mut s, 0, &shot[0..2], FLAG_RESET, &mut c);
    assert_eq!(recs[0].kind, RecordKind::Reset);
    assert_eq!((recs[0].first_round, recs[0].value), (17, 12));
    assert_eq!(s.next_round(), 2);
    assert_eq!(c.discarded, 12);
    // After the final round, rounds are refused until a reset.
    let mut s2 = StreamState::new(&model);
    let mut c2 = RoundCounts::default();
    let last = shot.len() - 1;
    apply(&mut s2, 0, &shot[..last], 0, &mut c2);
    apply(&mut s2, last as u64, &shot[last..], FLAG_FINAL, &mut c2);
    let recs = apply(&mut s2, last as u64 + 1, &shot[0..1], 0, &mut c2);
    assert_eq!(
        (recs[0].status, recs[0].value),
        (refusal::STREAM_FINISHED, EXPECTED_UNKNOWN)
    );
    c.pending = s.pending();
    assert!(c.adds_up(), "{c:?}");
    assert!(c2.adds_up(), "{c2:?}");
}
