//! Any text as a Stim detector error model, as `qfwd run --dem` and `qfwd decode --dem`
//! read it: the parser never panics and never asks for more than its documented limits
//! (decode/src/dem.rs, "Limits"); every refusal names the file and line; a parsed model
//! builds a graph whose arrays are its detectors', or is refused with a message; small
//! graphs build both decoders, which answer the empty and the all-ones syndrome (every
//! observable, `decode_to`, and the wire path, `run_payload`, with the budget off) alike.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qfwd::decode::dem::{MAX_DETECTORS, MAX_OBSERVABLES};
use qfwd::decode::graph::WEIGHT_MAX;
use qfwd::decode::{Decoder, DecoderKind, Dem, MatchingGraph};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let dem = match Dem::parse(text, "fuzz.dem") {
        Ok(d) => d,
        Err(e) => {
            let m = e.to_string();
            assert!(m.starts_with("fuzz.dem:"), "{m}");
            return;
        }
    };
    assert!(dem.num_detectors <= MAX_DETECTORS && dem.num_observables <= MAX_OBSERVABLES);
    let g = match MatchingGraph::from_dem(&dem) {
        Ok(g) => g,
        Err(e) => {
            assert!(e.to_string().contains("fuzz.dem"), "{e}");
            return;
        }
    };
    let n = g.num_detectors();
    assert_eq!(n, dem.num_detectors as usize);
    assert_eq!(g.adj_offset().len(), n + 2);
    for e in 0..g.num_edges() {
        assert!((g.edge_u()[e] as usize) < n && g.edge_u()[e] < g.edge_v()[e]);
        assert!(g.edge_v()[e] as usize <= n);
        assert!((1..=WEIGHT_MAX).contains(&g.edge_weight()[e]));
    }
    if g.num_edges() > 4_000 || n > 4_000 {
        return;
    }
    let nb = n.div_ceil(8);
    for kind in [DecoderKind::Uf, DecoderKind::Lut, DecoderKind::Matching] {
        if kind == DecoderKind::Lut && n > 10 {
            continue;
        }
        let mut d = match Decoder::from_graph(g.clone(), kind) {
            Ok(d) => d,
            Err(e) => {
                assert!(e.to_string().contains("fuzz.dem"), "{e}");
                continue;
            }
        };
        d.set_max_defects(Some(0)).expect("0 turns the budget off");
        let mut scratch = d.new_scratch();
        let (mut out, mut wire) = (vec![0u8; d.result_len()], vec![0u8; d.result_len()]);
        for fill in [0u8, 0xff] {
            let dets = vec![fill; nb];
            d.decode_to(&mut scratch, &dets, &mut out);
            if fill == 0 {
                assert!(out.iter().all(|&b| b == 0), "no defect, no flip");
            }
            let low = d.decode(&mut scratch, &dets);
            for (k, &b) in out.iter().take(8).enumerate() {
                assert_eq!(b, (low >> (8 * k)) as u8, "{kind}: decode vs decode_to");
            }
            assert_eq!(
                d.run_payload(&d.payload(&dets), &mut wire),
                Ok(d.result_len())
            );
            assert_eq!(out, wire, "{kind}: decode_to vs run_payload");
        }
    }
});
