//! The shot formats: Stim's own examples byte for byte, round trips of every format, and
//! the readers' refusals.
use super::*;
use proptest::prelude::*;

/// Every shot and every error of the streaming reader, as the whole-file readers give.
fn stream(bytes: &[u8], bits: usize, format: ShotFormat) -> std::result::Result<Shots, String> {
    let mut r = ShotReader::new(bytes, bits, format);
    let mut shots = Shots::new(bits);
    let mut row = vec![0u8; bits.div_ceil(8)];
    while r.next_into(&mut row)? {
        shots.push_row(&row);
    }
    Ok(shots)
}

#[test]
fn the_stream_reader_agrees_with_the_whole_file_readers() {
    let cases: &[(&[u8], usize)] = &[
        (b"1000000001\n0100000000\n", 10),
        (b"101\r\n", 3),
        (b"101\r", 3),
        (b"10\r1\n", 3),
        (b"101\n10\n", 3),
        (b"1x1\n", 3),
        (b"", 3),
        (b"111", 3),
        (b"1111\n", 3),
        (b"11111111111111111111", 3),
        (b"\n", 0),
        (b"\n\n", 0),
        (&[0x01, 0x02, 0x02, 0x00], 10),
        (&[0, 0x04], 10),
        (&[0; 5], 10),
        (&[0xff; 4], 16),
    ];
    for &(bytes, bits) in cases {
        let whole_b8 = Shots::from_b8(bytes.to_vec(), bits);
        assert_eq!(
            stream(bytes, bits, ShotFormat::B8),
            whole_b8,
            "{bytes:?} b8"
        );
        if let Ok(text) = std::str::from_utf8(bytes) {
            let whole = Shots::from_01(text, bits);
            let got = stream(bytes, bits, ShotFormat::Zero1);
            match (&got, &whole) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{text:?}"),
                (Err(a), Err(b)) => {
                    let line = |e: &str| e.split(':').next().unwrap_or("").to_string();
                    assert_eq!(line(a), line(b), "{text:?}: {a} / {b}");
                }
                _ => panic!("{text:?}: stream {got:?}, whole {whole:?}"),
            }
        }
    }
}

/// Shots of 0 bits (a model without observables predicts them) are counted, though they
/// hold no bytes: found by the `shots` fuzz target (`01` text "\n" of 0-bit shots read
/// as 1 shot by the stream and 0 by the whole-file reader's count).
#[test]
fn zero_bit_shots_are_counted() {
    let s = Shots::from_01("\n\n\n", 0).unwrap();
    assert_eq!((s.len(), s.row_bytes(), s.as_b8().len()), (3, 0, 0));
    assert_eq!(stream(b"\n", 0, ShotFormat::Zero1).unwrap().len(), 1);
    assert_eq!(s.to_01(), "\n\n\n");
    let mut t = Shots::new(0);
    t.push_row(&[]);
    t.push_bits(&[]);
    assert_eq!(t.len(), 2);
    t.truncate(1);
    assert_eq!(t.len(), 1);
    assert!(Shots::from_b8(Vec::new(), 0).unwrap().is_empty());
}

#[test]
fn the_writer_writes_what_the_readers_read() {
    let s = Shots::from_01("1000000001\n0100000000\n", 10).unwrap();
    for format in [ShotFormat::B8, ShotFormat::Zero1] {
        let mut w = ShotWriter::new(Vec::new(), 10, format);
        for i in 0..s.len() {
            w.write(s.row(i)).unwrap();
        }
        let bytes = w.finish().unwrap();
        assert_eq!(stream(&bytes, 10, format).unwrap(), s);
    }
}

#[test]
fn b8_and_01_agree_on_bit_order() {
    let s = Shots::from_01("1000000001\n0100000000\n", 10).unwrap();
    assert_eq!(s.as_b8(), &[0x01, 0x02, 0x02, 0x00]);
    assert!(s.get(0, 0) && s.get(0, 9) && s.get(1, 1) && !s.get(1, 9));
    assert_eq!(Shots::from_b8(s.as_b8().to_vec(), 10).unwrap(), s);
    assert_eq!(s.to_01(), "1000000001\n0100000000\n");
}

#[test]
fn size_mismatches_are_errors() {
    assert!(Shots::from_b8(vec![0; 5], 10)
        .unwrap_err()
        .contains("whole number"));
    assert!(Shots::from_b8(vec![0, 0x04], 10)
        .unwrap_err()
        .contains("more detectors"));
    assert!(Shots::from_01("101\n10\n", 3)
        .unwrap_err()
        .starts_with("line 2"));
    assert!(Shots::from_01("1x1\n", 3).unwrap_err().contains("'x'"));
    assert_eq!(Shots::from_01("", 3).unwrap().len(), 0);
    assert_eq!(Shots::from_01("101\r\n", 3).unwrap().len(), 1);
}

/// Every shot of `bytes` in `format`, or the first refusal.
fn read_all(
    bytes: &[u8],
    layout: ShotLayout,
    format: ShotFormat,
) -> std::result::Result<Shots, String> {
    let mut r = ShotReader::with_layout(bytes, layout, format);
    let mut shots = Shots::new(layout.bits());
    let mut row = vec![0u8; layout.bits().div_ceil(8)];
    while r.next_into(&mut row)? {
        shots.push_row(&row);
    }
    assert_eq!(r.shots(), shots.len());
    Ok(shots)
}

fn write_all(shots: &Shots, layout: ShotLayout, format: ShotFormat) -> std::io::Result<Vec<u8>> {
    let mut w = ShotWriter::with_layout(Vec::new(), layout, format);
    for i in 0..shots.len() {
        w.write(shots.row(i))?;
    }
    w.finish()
}

fn shots_of(bits: usize, rows: &[&[usize]]) -> Shots {
    let mut s = Shots::new(bits);
    for ones in rows {
        let mut b = vec![false; bits];
        for &k in *ones {
            b[k] = true;
        }
        s.push_bits(&b);
    }
    s
}

/// The examples of Stim's doc/result_formats.md, byte for byte, both ways.
#[test]
fn stim_s_examples_read_and_write_byte_for_byte() {
    let d = ShotLayout::detectors;
    // `X 1; M 0 0 0 0 1 1 1 1 0 0 1 1 0 1`, two shots.
    let s = shots_of(14, &[&[4, 5, 6, 7, 10, 11, 13], &[4, 5, 6, 7, 10, 11, 13]]);
    let r8_shot: &[u8] = &[4, 0, 0, 0, 2, 0, 1, 0];
    let cases: Vec<(ShotFormat, Vec<u8>)> = vec![
        (ShotFormat::Zero1, b"00001111001101\n".repeat(2)),
        (ShotFormat::B8, [0xf0, 0x2c].repeat(2)),
        (ShotFormat::R8, r8_shot.repeat(2)),
        (ShotFormat::Hits, b"4,5,6,7,10,11,13\n".repeat(2)),
        (
            ShotFormat::Dets,
            b"shot D4 D5 D6 D7 D10 D11 D13\n".repeat(2),
        ),
    ];
    for (format, bytes) in cases {
        assert_eq!(write_all(&s, d(14), format).unwrap(), bytes, "{format}");
        assert_eq!(read_all(&bytes, d(14), format).unwrap(), s, "{format}");
    }
    // 41 bits, bit 9 set: r8 `9 1f`.
    let s = shots_of(41, &[&[9]]);
    assert_eq!(write_all(&s, d(41), ShotFormat::R8).unwrap(), [0x09, 0x1f]);
    assert_eq!(read_all(&[0x09, 0x1f], d(41), ShotFormat::R8).unwrap(), s);
    // `X_ERROR(1) 1; M 0 1 2`, detectors rec[-1..-3], L5 = rec[-2]: `shot D1 L5`.
    let layout = ShotLayout {
        detectors: 3,
        observables: 6,
    };
    let s = shots_of(9, &[&[1, 3 + 5], &[1, 3 + 5]]);
    let bytes = b"shot D1 L5\n".repeat(2);
    assert_eq!(write_all(&s, layout, ShotFormat::Dets).unwrap(), bytes);
    assert_eq!(read_all(&bytes, layout, ShotFormat::Dets).unwrap(), s);
    // `X 1; M 0 1`, 64 shots: ptb64 `00 x 8, ff x 8`.
    let s = shots_of(2, &[&[1usize][..]; 64]);
    let bytes = [[0u8; 8], [0xff; 8]].concat();
    assert_eq!(write_all(&s, d(2), ShotFormat::Ptb64).unwrap(), bytes);
    assert_eq!(read_all(&bytes, d(2), ShotFormat::Ptb64).unwrap(), s);
}

#[test]
fn names_and_extensions() {
    for f in ShotFormat::ALL {
        assert_eq!(f.name().parse::<ShotFormat>(), Ok(f));
        assert_eq!(f.to_string(), f.name());
        let path = format!("shots.{}", f.name());
        assert_eq!(ShotFormat::from_extension(Path::new(&path)), Some(f));
    }
    assert_eq!(ShotFormat::from_extension(Path::new("shots.dat")), None);
    let e = "B8".parse::<ShotFormat>().unwrap_err();
    assert!(e.contains("\"B8\"") && e.contains("ptb64"), "{e}");
}

/// Long runs in r8 (255 and more zeros: a 255 byte and no 1), and an empty shot.
#[test]
fn r8_runs_of_255_and_more() {
    let d = ShotLayout::detectors(600);
    let s = shots_of(600, &[&[255], &[0, 510, 599], &[]]);
    let bytes = write_all(&s, d, ShotFormat::R8).unwrap();
    assert_eq!(
        bytes,
        [
            &[255, 0, 255, 89][..], // bit 255, then 344 zeros to the end marker
            &[0, 255, 254, 88, 0],  // bits 0, 510, 599, end
            &[255, 255, 90],        // 600 zeros
        ]
        .concat()
    );
    assert_eq!(read_all(&bytes, d, ShotFormat::R8).unwrap(), s);
}

/// Each reader refuses a bad shot with the line or shot, and a likely cause.
#[test]
fn refusals_name_the_place_and_the_cause() {
    let d = ShotLayout::detectors;
    let cases: &[(ShotFormat, ShotLayout, &[u8], &[&str])] = &[
        (
            ShotFormat::R8,
            d(10),
            &[3, 20],
            &["shot 0", "past the 10 bits"],
        ),
        (
            ShotFormat::R8,
            d(10),
            &[1, 8, 2, 3],
            &["shot 1 (byte 2)", "ends inside the shot"],
        ),
        (
            ShotFormat::R8,
            d(10),
            &[255],
            &["shot 0", "past the 10 bits"],
        ),
        (
            ShotFormat::Ptb64,
            d(2),
            &[0; 17],
            &["ends 1 bytes into", "shots 64..127", "16 bytes"],
        ),
        (ShotFormat::Ptb64, d(0), &[0], &["0 bits"]),
        (
            ShotFormat::Hits,
            d(10),
            b"1,2\n\n10\n",
            &["line 3", "index 10", "past the 10 bits"],
        ),
        (ShotFormat::Hits, d(10), b"1,2\n3,,4\n", &["line 2", "','"]),
        (
            ShotFormat::Hits,
            d(10),
            b"1;2\n",
            &["line 1", "';' after index 1"],
        ),
        (
            ShotFormat::Hits,
            d(10),
            b"4,4\n",
            &["line 1", "index 4 appears twice"],
        ),
        (
            ShotFormat::Hits,
            d(10),
            b"1,\n",
            &["line 1", "end of the line"],
        ),
        (
            ShotFormat::Hits,
            d(10),
            b"99999999999999999999999\n",
            &["line 1", "2^64"],
        ),
        (ShotFormat::Hits, d(10), b"1\r2\n", &["line 1", "\\r"]),
        (
            ShotFormat::Dets,
            d(10),
            b"shot D1\nshot D10\n",
            &["line 2", "D10 is past the 10 detectors"],
        ),
        (
            ShotFormat::Dets,
            d(10),
            b"shot D1\n\nshot L0\n",
            &["line 3", "L0", "no observables"],
        ),
        (
            ShotFormat::Dets,
            d(10),
            b"shot M1\n",
            &["line 1", "measurement", "detector sampler"],
        ),
        (
            ShotFormat::Dets,
            d(10),
            b"shot D1D2\n",
            &["line 1", "'D' with no space"],
        ),
        (ShotFormat::Dets, d(10), b"shot X1\n", &["line 1", "'X'"]),
        (
            ShotFormat::Dets,
            d(10),
            b"shot D\n",
            &["line 1", "`D` followed by the end of the line"],
        ),
        (
            ShotFormat::Dets,
            d(10),
            b"shot D3 D3\n",
            &["line 1", "D3 appears twice"],
        ),
        (
            ShotFormat::Dets,
            d(10),
            b"D1\n",
            &["line 1", "`shot` was expected"],
        ),
        (
            ShotFormat::Dets,
            d(10),
            b"shots D1\n",
            &["line 1", "'s' with no space"],
        ),
        (
            ShotFormat::Dets,
            ShotLayout::observables(2),
            b"shot L0\nshot D0\n",
            &["line 2", "D0, but these shots hold no detectors"],
        ),
    ];
    for &(format, layout, bytes, needles) in cases {
        let e = read_all(bytes, layout, format).unwrap_err();
        for n in needles {
            assert!(e.contains(n), "{format} {bytes:?}: {e:?} lacks {n:?}");
        }
    }
}

/// What Stim's readers accept reads the same here; and a little more (a last line without
/// `\n`, spaces and tabs between dets values, blank lines between dets shots).
#[test]
fn text_formats_accept_what_stim_writes_and_a_little_more() {
    let d = ShotLayout {
        detectors: 5,
        observables: 2,
    };
    let s = shots_of(7, &[&[0, 4, 6], &[], &[2]]);
    for (format, bytes) in [
        (ShotFormat::Hits, &b"0,4,6\n\n2"[..]),
        (ShotFormat::Hits, b"6,0,4\r\n\r\n2\r\n"),
        (ShotFormat::Dets, b"shot D0 D4 L1\nshot\nshot D2"),
        (
            ShotFormat::Dets,
            b"  shot  D0\tD4 L1 \r\n\n\nshot\r\nshot D2\n\n",
        ),
        (ShotFormat::Zero1, b"1000101\n0000000\n0010000"),
    ] {
        assert_eq!(
            read_all(bytes, d, format),
            Ok(s.clone()),
            "{format} {bytes:?}"
        );
    }
}

#[test]
fn ptb64_refuses_a_partial_group_when_writing() {
    let s = shots_of(3, &[&[1usize][..]; 65]);
    let e = write_all(&s, ShotLayout::detectors(3), ShotFormat::Ptb64).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    assert!(e.to_string().contains("65 shots leave 1 over"), "{e}");
}

/// Random shots of random layouts.
fn random_shots(max_bits: usize, max_shots: usize) -> impl Strategy<Value = (ShotLayout, Shots)> {
    (0..=max_bits, 0..=max_bits, 0..=max_shots).prop_flat_map(|(d, o, n)| {
        let bits = d + o;
        proptest::collection::vec(proptest::collection::vec(any::<bool>(), bits), n).prop_map(
            move |rows| {
                let mut s = Shots::new(bits);
                for r in &rows {
                    s.push_bits(r);
                }
                (
                    ShotLayout {
                        detectors: d,
                        observables: o,
                    },
                    s,
                )
            },
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Every format reads back what it wrote (ptb64: whole groups of 64; the binary formats
    /// of 0-bit shots hold no bytes, so their shots cannot be counted back).
    #[test]
    fn every_format_round_trips((layout, shots) in random_shots(150, 140)) {
        for format in ShotFormat::ALL {
            let mut s = shots.clone();
            if format == ShotFormat::Ptb64 {
                s.truncate(s.len() / 64 * 64);
            }
            let bytes = write_all(&s, layout, format).unwrap();
            let no_bytes = layout.bits() == 0 && matches!(format, ShotFormat::B8 | ShotFormat::Ptb64);
            let want = if no_bytes { Shots::new(0) } else { s };
            prop_assert_eq!(read_all(&bytes, layout, format), Ok(want), "{}", format);
        }
    }

    /// Any bytes in any format: a reader never panics, and what it accepts writes back to
    /// bytes that read the same.
    #[test]
    fn readers_take_any_bytes(bytes in proptest::collection::vec(prop_oneof![
        4 => proptest::sample::select(b"01,\n\r DLMshot 9255".to_vec()),
        1 => any::<u8>(),
    ], 0..300), d in 0usize..20, o in 0usize..4) {
        let layout = ShotLayout { detectors: d, observables: o };
        for format in ShotFormat::ALL {
            if let Ok(s) = read_all(&bytes, layout, format) {
                let again = write_all(&s, layout, format).unwrap();
                prop_assert_eq!(read_all(&again, layout, format), Ok(s));
            }
        }
    }
}
