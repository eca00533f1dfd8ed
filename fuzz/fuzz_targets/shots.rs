//! Any bytes as a shot file in any of Stim's six formats, as `qfwd decode` reads them from
//! a file or a pipe: the streaming reader (`ShotReader`) never panics; what it reads
//! writes back (`ShotWriter`) to bytes that read the same; and for `b8` and `01` it agrees
//! shot for shot with the whole-file readers (`Shots::from_b8`, `Shots::from_01`), and on
//! refusing (at the same line, for `01`). The first two bytes, little-endian, pick the
//! detectors per shot (the low 11 bits: 0 ..= 2047), whether one observable is appended
//! (bit 11) and the format (bit 15: `01`; else bits 12..=14: `b8`, `r8`, `ptb64`, `hits`,
//! `dets`, and `b8` again for 5..=7).
#![no_main]

use libfuzzer_sys::fuzz_target;
use qfwd::decode::shots::ShotLayout;
use qfwd::decode::{ShotFormat, ShotReader, ShotWriter, Shots};

fn stream(bytes: &[u8], layout: ShotLayout, format: ShotFormat) -> Result<Shots, String> {
    let mut r = ShotReader::with_layout(bytes, layout, format);
    let mut shots = Shots::new(layout.bits());
    let mut row = vec![0u8; layout.bits().div_ceil(8)];
    while r.next_into(&mut row)? {
        shots.push_row(&row);
    }
    assert_eq!(r.shots(), shots.len());
    Ok(shots)
}

fn write(shots: &Shots, layout: ShotLayout, format: ShotFormat) -> Vec<u8> {
    let mut w = ShotWriter::with_layout(Vec::new(), layout, format);
    for i in 0..shots.len() {
        w.write(shots.row(i)).expect("a Vec takes every byte");
    }
    w.finish()
        .expect("whole groups of 64 for ptb64: what was read")
}

/// The 1-based line an `01` error names (`line N: ...`).
fn line_of(e: &str) -> &str {
    e.split(':').next().unwrap_or("")
}

fuzz_target!(|data: &[u8]| {
    let [a, b, rest @ ..] = data else {
        return;
    };
    let head = u16::from_le_bytes([*a, *b]);
    let layout = ShotLayout {
        detectors: usize::from(head & 0x07ff),
        observables: usize::from(head >> 11 & 1),
    };
    let format = if head & 0x8000 != 0 {
        ShotFormat::Zero1
    } else {
        use ShotFormat::*;
        [B8, R8, Ptb64, Hits, Dets, B8, B8, B8][usize::from(head >> 12 & 7)]
    };
    let streamed = stream(rest, layout, format);
    if let Ok(s) = &streamed {
        // Binary formats of 0-bit shots hold no bytes: their shots cannot be counted back.
        if layout.bits() > 0 || !matches!(format, ShotFormat::B8 | ShotFormat::Ptb64) {
            assert_eq!(
                stream(&write(s, layout, format), layout, format).as_ref(),
                Ok(s)
            );
        }
    }
    let whole = match format {
        ShotFormat::B8 => Shots::from_b8(rest.to_vec(), layout.bits()),
        ShotFormat::Zero1 => match std::str::from_utf8(rest) {
            Ok(text) => Shots::from_01(text, layout.bits()),
            // The whole-file reader takes text only; the stream reads bytes.
            Err(_) => return,
        },
        _ => return,
    };
    match (&streamed, &whole) {
        (Ok(s), Ok(w)) => assert_eq!(s, w),
        (Err(s), Err(w)) => {
            if format == ShotFormat::Zero1 {
                assert_eq!(line_of(s), line_of(w), "{s} / {w}");
            }
        }
        _ => panic!("stream {streamed:?}, whole file {whole:?}"),
    }
});
