//! Any bytes fed to the stream protocol's parsers (`qfwd::stream::protocol`): the first
//! byte picks the round size (1..=8 bytes) and the parser. A batch that parses is walked
//! block by block and re-encodes (padding zeroed) to a batch that parses to the same
//! blocks and the same length; the fixed arguments and the records re-encode to the same
//! bytes. Never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qfwd::stream::protocol::{
    records, BatchView, BatchWriter, GetCorrections, Record, ResetDecoder, RECORD_BYTES,
};

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let round_bytes = usize::from(pick & 7) + 1;
    match pick >> 6 {
        0 | 1 => batch(rest, round_bytes),
        2 => {
            if let Ok(g) = GetCorrections::parse(rest) {
                assert_eq!(&g.encode()[..], rest, "get_corrections re-encodes");
            }
            if let Ok(r) = ResetDecoder::parse(rest) {
                assert_eq!(&r.encode()[..], rest, "reset_decoder re-encodes");
                assert!(r.streams > 0);
            }
        }
        _ => {
            if let Ok(it) = records(rest) {
                for (i, r) in it.enumerate() {
                    let Ok(r) = r else { continue };
                    let mut b = [0u8; RECORD_BYTES];
                    r.encode(&mut b);
                    assert_eq!(&b[..], &rest[i * RECORD_BYTES..(i + 1) * RECORD_BYTES]);
                    assert_eq!(Record::decode(&b), Ok(r));
                }
            }
        }
    }
});

fn batch(bytes: &[u8], round_bytes: usize) {
    let Ok(v) = BatchView::parse(bytes, round_bytes) else {
        return;
    };
    let blocks: Vec<_> = v.blocks().collect();
    assert_eq!(blocks.len() as u32, v.blocks);
    let entries: u64 = blocks.iter().map(|b| b.entries()).sum();
    assert_eq!(entries, u64::from(v.entries));
    let mut out = vec![0u8; bytes.len()];
    let mut w = BatchWriter::new(&mut out, round_bytes).expect("room for the header");
    for b in &blocks {
        assert!(b.streams > 0 && b.rounds > 0);
        let data = b.streams_data(0, usize::from(b.streams));
        assert_eq!(data.len() as u64, b.entries() * round_bytes as u64);
        w.block(
            b.first_stream,
            b.streams,
            b.rounds,
            b.flags,
            b.first_round,
            data,
        )
        .expect("a parsed block re-encodes into the input's size");
    }
    let n = w.finish();
    assert_eq!(n, bytes.len(), "re-encoded length");
    let again = BatchView::parse(&out[..n], round_bytes).expect("re-encoded batch parses");
    assert!(again.blocks().eq(blocks.iter().copied()), "same blocks");
}
