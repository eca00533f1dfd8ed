//! Any bytes as a decoder request's argument, the payload a QPU controller sends
//! (detection events bit-packed LSB first, then the detector count as u32 LE), on small
//! models: the handler never panics; it answers `BAD_ARGUMENT` exactly when the length or
//! the count does not match the model; bits past the last detector never change an answer;
//! a `uf` answer is the specification's (`UfScratch::decode_reference` on the whole
//! model) for the same detectors, and a `matching` answer (on the observable part) is that
//! of matching on the whole model. The first byte picks the model.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use qfwd::decode::dem::chain_text;
use qfwd::decode::{Decoder, DecoderKind, Dem, MatchingGraph, MatchingScratch, UfScratch};
use qfwd::handler::Handler;
use qfwd::wire::status;

fn models() -> &'static [(Handler, Arc<Decoder>)] {
    static MODELS: OnceLock<Vec<(Handler, Arc<Decoder>)>> = OnceLock::new();
    MODELS.get_or_init(|| {
        let texts = [
            ("chain5", chain_text(5)),
            ("chain37", chain_text(37)),
            (
                "rep_d3_r3_p005",
                include_str!("../../tests/fixtures/rep_d3_r3_p005.dem").to_string(),
            ),
            (
                "surface_d3_r3_z_p005",
                include_str!("../../tests/fixtures/surface_d3_r3_z_p005.dem").to_string(),
            ),
        ];
        let mut v = Vec::new();
        for (name, text) in texts {
            let dem = Dem::parse(&text, name).expect("a shipped model parses");
            for kind in [DecoderKind::Lut, DecoderKind::Uf, DecoderKind::Matching] {
                let g = MatchingGraph::from_dem(&dem).expect("a shipped model builds");
                if kind == DecoderKind::Lut && g.num_detectors() > 8 {
                    continue; // the lut of 24 detectors takes seconds to build here
                }
                let d = Arc::new(Decoder::from_graph(g, kind).expect("a shipped model decodes"));
                v.push((Handler::Decoder(Arc::clone(&d)), d));
            }
        }
        v
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, payload)) = data.split_first() else {
        return;
    };
    let ms = models();
    let (handler, dec) = &ms[pick as usize % ms.len()];
    let (n, nb) = (dec.num_detectors(), dec.detector_bytes());
    let mut out = [0u8; 16];
    let answer = handler
        .run(payload, &mut out)
        .map(|len| out[..len].to_vec());
    let well_formed = payload.len() == nb + 4 && payload[nb..] == (n as u32).to_le_bytes();
    if !well_formed {
        assert_eq!(
            answer,
            Err(status::BAD_ARGUMENT),
            "a malformed payload was answered"
        );
        return;
    }
    let answer = answer.expect("a well-formed payload is answered");
    assert_eq!(answer.len(), dec.result_len(), "result length");

    let mut clean = payload.to_vec();
    if n % 8 != 0 {
        clean[nb - 1] &= (1u8 << (n % 8)) - 1;
    }
    let mut again = [0u8; 16];
    let len = handler
        .run(&clean, &mut again)
        .expect("the cleaned payload is answered");
    assert_eq!(
        &again[..len],
        &answer[..],
        "bits past the last detector changed the answer"
    );

    if dec.kind() == DecoderKind::Uf {
        let mut reference = UfScratch::new(dec.graph());
        let mask = reference.decode_reference(dec.graph(), &clean[..nb]);
        assert_eq!(
            dec.result_bytes(mask),
            answer,
            "uf differs from its specification"
        );
    }
    if dec.kind() == DecoderKind::Matching {
        let mut whole = MatchingScratch::new(dec.graph());
        let mask = whole.decode(dec.graph(), &clean[..nb]);
        assert_eq!(
            dec.result_bytes(mask),
            answer,
            "matching on the observable part differs from matching on the whole model"
        );
    }
});
