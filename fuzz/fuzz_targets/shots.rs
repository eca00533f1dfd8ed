//! Any bytes as a shot file, `b8` or `01`, as `qfwd decode --dets` / `--obs` read them
//! from a file or a pipe: the whole-file readers (`Shots::from_b8`, `Shots::from_01`) and
//! the streaming one (`ShotReader`, stdin) never panic and agree shot for shot, and on
//! refusing (at the same line, for `01`); what they read writes back (`ShotWriter`) to
//! bytes that read the same. The first two bytes, little-endian, pick the bits per shot
//! (the low 12 bits: 0 ..= 4095) and the format (bit 15: `01`, else `b8`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use qfwd::decode::{ShotFormat, ShotReader, ShotWriter, Shots};

fn stream(bytes: &[u8], bits: usize, format: ShotFormat) -> Result<Shots, String> {
    let mut r = ShotReader::new(bytes, bits, format);
    let mut shots = Shots::new(bits);
    let mut row = vec![0u8; bits.div_ceil(8)];
    while r.next_into(&mut row)? {
        shots.push_row(&row);
    }
    assert_eq!(r.shots(), shots.len());
    Ok(shots)
}

fn write(shots: &Shots, format: ShotFormat) -> Vec<u8> {
    let mut w = ShotWriter::new(Vec::new(), shots.bits(), format);
    for i in 0..shots.len() {
        w.write(shots.row(i)).expect("a Vec takes every byte");
    }
    w.finish().expect("a Vec flushes")
}

/// The 1-based line an `01` error names (`line N: ...`).
fn line_of(e: &str) -> &str {
    e.split(':').next().unwrap_or("")
}

fuzz_target!(|data: &[u8]| {
    let [a, b, rest @ ..] = data else {
        return;
    };
    let bits = usize::from(u16::from_le_bytes([*a, *b]) & 0x0fff);
    let format = if b & 0x80 != 0 {
        ShotFormat::Zero1
    } else {
        ShotFormat::B8
    };
    let streamed = stream(rest, bits, format);
    let whole = match format {
        ShotFormat::B8 => Shots::from_b8(rest.to_vec(), bits),
        ShotFormat::Zero1 => match std::str::from_utf8(rest) {
            Ok(text) => Shots::from_01(text, bits),
            // The whole-file reader takes text only; the stream reads bytes.
            Err(_) => return,
        },
    };
    match (&streamed, &whole) {
        (Ok(s), Ok(w)) => {
            assert_eq!(s, w);
            for f in [ShotFormat::B8, ShotFormat::Zero1] {
                if f == ShotFormat::B8 && bits == 0 {
                    continue; // no bytes: the shots cannot be counted back
                }
                assert_eq!(stream(&write(s, f), bits, f).as_ref(), Ok(s));
            }
        }
        (Err(s), Err(w)) => {
            if format == ShotFormat::Zero1 {
                assert_eq!(line_of(s), line_of(w), "{s} / {w}");
            }
        }
        _ => panic!("stream {streamed:?}, whole file {whole:?}"),
    }
});
