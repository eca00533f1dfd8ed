use super::*;
use proptest::prelude::*;

#[test]
fn function_ids_are_fnv1a_of_the_names() {
    // The values docs/streaming-protocol.md lists.
    assert_eq!(ENQUEUE_SYNDROMES_ID, 0x8894_4b76);
    assert_eq!(GET_CORRECTIONS_ID, 0x9b4b_f0fd);
    assert_eq!(RESET_DECODER_ID, 0x36a7_300b);
    // Not CUDA-Q QEC's own functions, whose arguments are laid out differently.
    assert_ne!(ENQUEUE_SYNDROMES_ID, function_id("enqueue_syndromes"));
}

#[test]
fn batch_layout_is_little_endian_and_aligned() {
    let mut buf = [0u8; 64];
    let mut w = BatchWriter::new(&mut buf, 3).unwrap();
    // Two streams (7 and 8), one round each, round 0x0102030405060708, final.
    w.block(
        7,
        2,
        1,
        FLAG_FINAL,
        0x0102_0304_0506_0708,
        &[1, 2, 3, 4, 5, 6],
    )
    .unwrap();
    let n = w.finish();
    assert_eq!(n, 16 + 16 + 16);
    assert_eq!(
        &buf[..n],
        &[
            1, 0, 3, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, // batch header
            7, 0, 0, 0, 2, 0, 1, 2, 8, 7, 6, 5, 4, 3, 2, 1, // block header
            1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // rounds, padding
        ]
    );
    let v = BatchView::parse(&buf[..n], 3).unwrap();
    let b: Vec<_> = v.blocks().collect();
    assert_eq!(b.len(), 1);
    assert_eq!((b[0].first_stream, b[0].streams, b[0].rounds), (7, 2, 1));
    assert!(b[0].ends_with_final() && !b[0].resets());
    assert_eq!(b[0].round(1, 0), &[4, 5, 6]);
    assert_eq!(b[0].stream_rounds(0), &[1, 2, 3]);
}

fn one_block(round_bytes: usize) -> Vec<u8> {
    let mut buf = vec![0u8; 256];
    let mut w = BatchWriter::new(&mut buf, round_bytes).unwrap();
    w.block(0, 1, 2, 0, 5, &vec![0xff; 2 * round_bytes])
        .unwrap();
    let n = w.finish();
    buf.truncate(n);
    buf
}

#[test]
fn each_malformation_has_its_own_error() {
    let good = one_block(3);
    assert!(BatchView::parse(&good, 3).is_ok());
    let parse = |b: &[u8], rb| BatchView::parse(b, rb).map(|_| ());
    let with = |at: usize, bytes: &[u8]| {
        let mut b = good.clone();
        b[at..at + bytes.len()].copy_from_slice(bytes);
        BatchView::parse(&b, 3).map(|_| ())
    };
    assert_eq!(
        parse(&good[..10], 3),
        Err(ProtocolError::Short {
            what: "batch header",
            need: 16,
            got: 10
        })
    );
    assert_eq!(with(0, &[2, 0]), Err(ProtocolError::Version(2)));
    assert_eq!(
        parse(&good, 4),
        Err(ProtocolError::RoundBytes {
            expected: 4,
            got: 3
        })
    );
    assert_eq!(with(4, &[0, 0, 0, 0]), Err(ProtocolError::NoBlocks));
    assert_eq!(
        with(12, &[1]),
        Err(ProtocolError::Reserved { at: 12, value: 1 })
    );
    assert_eq!(
        with(8, &[9]),
        Err(ProtocolError::EntryCount {
            declared: 9,
            actual: 2
        })
    );
    assert_eq!(
        with(16 + 6, &[0]),
        Err(ProtocolError::EmptyBlock { block: 0 })
    );
    assert_eq!(
        with(16 + 7, &[4]),
        Err(ProtocolError::Flags { block: 0, flags: 4 })
    );
    assert_eq!(
        with(16, &[0xff, 0xff, 0xff, 0xff, 2, 0]),
        Err(ProtocolError::StreamRange {
            block: 0,
            first: u32::MAX
        })
    );
    assert_eq!(
        with(16 + 8, &[0xff; 8]),
        Err(ProtocolError::RoundRange {
            block: 0,
            first: u64::MAX
        })
    );
    assert!(matches!(
        BatchView::parse(&good[..good.len() - 1], 3),
        Err(ProtocolError::Short { what: "block", .. })
    ));
    let mut longer = good.clone();
    longer.extend_from_slice(&[0; 16]);
    assert_eq!(
        parse(&longer, 3),
        Err(ProtocolError::Trailing {
            declared: 1,
            actual: 16
        })
    );
}

#[test]
fn fixed_arguments_round_trip_and_check_reserved_bytes() {
    let g = GetCorrections {
        stream: 9,
        flags: FLAG_RESET_CORRECTIONS,
    };
    assert_eq!(GetCorrections::parse(&g.encode()), Ok(g));
    let mut bad = g.encode();
    bad[4] = 2;
    assert!(GetCorrections::parse(&bad).is_err());
    bad = g.encode();
    bad[15] = 1;
    assert!(GetCorrections::parse(&bad).is_err());
    assert!(GetCorrections::parse(&g.encode()[..8]).is_err());
    let r = ResetDecoder {
        first_stream: 4,
        streams: 3,
    };
    assert_eq!(ResetDecoder::parse(&r.encode()), Ok(r));
    let none = ResetDecoder {
        first_stream: 4,
        streams: 0,
    };
    assert!(ResetDecoder::parse(&none.encode()).is_err());
    let past = ResetDecoder {
        first_stream: u32::MAX,
        streams: 2,
    };
    assert!(ResetDecoder::parse(&past.encode()).is_err());
}

#[test]
fn records_say_what_window_they_answer() {
    let r = Record {
        stream: 3,
        kind: RecordKind::Commit,
        status: 0,
        first_round: 10,
        value: 1,
        rounds: 5,
        window_rounds: 15,
    };
    assert_eq!(r.through_round(), Some(24));
    let mut b = [0u8; RECORD_BYTES];
    r.encode(&mut b);
    assert_eq!(&b[..8], &[3, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(Record::decode(&b), Ok(r));
    b[4] = 9;
    assert_eq!(Record::decode(&b), Err(ProtocolError::RecordKind(9)));
    assert!(records(&[0; 33]).is_err());
    let refused = Record {
        kind: RecordKind::Refused,
        status: refusal::ROUNDS_MISSING,
        ..r
    };
    assert_eq!(refused.through_round(), None);
    let names: std::collections::BTreeSet<_> =
        refusal::ALL.iter().map(|&c| refusal::name(c)).collect();
    assert_eq!(names.len(), refusal::ALL.len());
}

fn arb_record() -> impl Strategy<Value = Record> {
    (
        any::<u32>(),
        1u16..=5,
        any::<u16>(),
        any::<u64>(),
        any::<u64>(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(
            |(stream, k, status, first_round, value, rounds, window_rounds)| Record {
                stream,
                kind: RecordKind::from_u16(k).unwrap(),
                status,
                first_round,
                value,
                rounds,
                window_rounds,
            },
        )
}

/// (first_stream, streams, rounds, flags, first_round) of a block.
fn arb_block() -> impl Strategy<Value = (u32, u16, u8, u8, u64)> {
    (0u32..1 << 31, 1u16..20, 1u8..6, 0u8..4, 0u64..1 << 60)
}

proptest! {
    #[test]
    fn batches_round_trip(round_bytes in 1usize..12, blocks in proptest::collection::vec(arb_block(), 1..6), seed: u8) {
        let mut buf = vec![0u8; 1 << 16];
        let mut w = BatchWriter::new(&mut buf, round_bytes).unwrap();
        let mut datas = Vec::new();
        for (i, &(fs, s, r, f, fr)) in blocks.iter().enumerate() {
            let data: Vec<u8> = (0..usize::from(s) * usize::from(r) * round_bytes)
                .map(|k| (k as u8).wrapping_mul(31).wrapping_add(seed ^ i as u8))
                .collect();
            prop_assert_eq!(w.block_len(s.into(), r.into()) % ALIGN, 0);
            w.block(fs, s, r, f, fr, &data).unwrap();
            datas.push(data);
        }
        let n = w.finish();
        prop_assert_eq!(n % ALIGN, 0);
        let v = BatchView::parse(&buf[..n], round_bytes).unwrap();
        let got: Vec<_> = v.blocks().collect();
        prop_assert_eq!(got.len(), blocks.len());
        for ((b, &(fs, s, r, f, fr)), data) in got.iter().zip(&blocks).zip(&datas) {
            prop_assert_eq!((b.first_stream, b.streams, b.rounds, b.flags, b.first_round), (fs, s, r, f, fr));
            for si in 0..usize::from(s) {
                for ri in 0..usize::from(r) {
                    let at = (si * usize::from(r) + ri) * round_bytes;
                    prop_assert_eq!(b.round(si, ri), &data[at..at + round_bytes]);
                }
            }
        }
    }

    #[test]
    fn records_round_trip(rs in proptest::collection::vec(arb_record(), 0..20)) {
        let mut buf = vec![0u8; rs.len() * RECORD_BYTES];
        for (i, r) in rs.iter().enumerate() {
            r.encode(&mut buf[i * RECORD_BYTES..]);
        }
        let back: Vec<Record> = records(&buf).unwrap().map(|r| r.unwrap()).collect();
        prop_assert_eq!(back, rs);
    }

    #[test]
    fn any_bytes_never_panic_and_a_parsed_batch_is_consistent(bytes in proptest::collection::vec(any::<u8>(), 0..300), round_bytes in 1usize..8) {
        if let Ok(v) = BatchView::parse(&bytes, round_bytes) {
            let entries: u64 = v.blocks().map(|b| b.entries()).sum();
            prop_assert_eq!(entries, u64::from(v.entries));
            prop_assert_eq!(v.blocks().count() as u32, v.blocks);
        }
        let _ = GetCorrections::parse(&bytes);
        let _ = ResetDecoder::parse(&bytes);
        if let Ok(it) = records(&bytes) {
            for r in it {
                let _ = r;
            }
        }
    }

    #[test]
    fn a_valid_header_with_random_blocks_never_panics(body in proptest::collection::vec(any::<u8>(), 0..200), blocks in 0u32..4, entries in 0u32..64) {
        let mut b = vec![1, 0, 2, 0];
        b.extend_from_slice(&blocks.to_le_bytes());
        b.extend_from_slice(&entries.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&body);
        let _ = BatchView::parse(&b, 2);
    }
}
