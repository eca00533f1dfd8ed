use super::*;
use crate::decode::Dem;
use crate::stream::protocol::RecordKind;

fn builder(streams: usize) -> (Builder, usize) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/surface_d5_r5_z_p001.dem"
    );
    let dem = Dem::from_path(path.as_ref()).unwrap();
    let m = StreamModel::from_dem(&dem, 10, 5).unwrap();
    (Builder::new(&m, streams), m.round_bytes())
}

fn reset_record(stream: u32) -> Record {
    Record {
        stream,
        kind: RecordKind::Reset,
        status: 0,
        first_round: 0,
        value: 0,
        rounds: 0,
        window_rounds: 0,
    }
}

/// A stream reset after rounds of its own goes on in the next segment; the other streams'
/// rounds stay in one piece each.
#[test]
fn a_reset_moves_only_its_own_stream_to_the_next_segment() {
    let (mut b, rb) = builder(3);
    let ev = vec![0u8; rb];
    for round in 0..4 {
        for s in 0..3 {
            b.accept(s, round, &ev, false);
        }
    }
    b.reset(1, reset_record(1));
    for round in 4..6 {
        b.accept(0, round, &ev, false);
        b.accept(2, round, &ev, false);
    }
    b.accept(1, 0, &ev, false);
    b.commit(1, reset_record(1));
    let batch = b.take(Batch::default());
    let pieces: Vec<Vec<(u32, u64, u32, bool)>> = batch
        .segments
        .iter()
        .map(|seg| {
            seg.iter()
                .map(|w| (w.stream, w.first_round, w.rounds, w.reset))
                .collect()
        })
        .collect();
    assert_eq!(
        pieces,
        [
            vec![(0, 0, 6, false), (1, 0, 4, false), (2, 0, 6, false)],
            vec![(1, 0, 1, true)],
        ]
    );
    // The commit points at stream 1's entry in the second segment.
    let at = batch.items.iter().find_map(|i| match i {
        Item::Commit { at, .. } => Some(*at),
        _ => None,
    });
    assert_eq!(
        at,
        Some(CommitRef {
            segment: 1,
            entry: 0,
            k: 0
        })
    );
    // The next batch starts every stream in its first segment again.
    b.accept(1, 1, &ev, false);
    let next = b.take(Batch::default());
    assert_eq!(next.segments.len(), 1);
    assert_eq!(next.segments[0].len(), 1);
}
