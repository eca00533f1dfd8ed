//! Decoders as appliance handlers: payload in, observable flips out, through the CPU backend.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use qfwd::backend::{Backend, CpuBackend};
use qfwd::decode::dem::chain_text;
use qfwd::decode::{Decoder, DecoderKind, Shots};
use qfwd::handler::{Handler, Registry};
use qfwd::wire::{self, status};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[test]
fn decoder_handlers_answer_payloads_like_the_reference() {
    // (A 24-detector lut takes seconds to build in a debug build: use the 8-detector model.)
    for (kind, code, name, n) in [
        (DecoderKind::Lut, 2, "rep_d3_r3_p005", 8u32),
        (DecoderKind::Uf, 3, "surface_d3_r3_z_p005", 24),
        (DecoderKind::Matching, 4, "surface_d3_r3_z_p005", 24),
    ] {
        let dem = fixture(&format!("{name}.dem"));
        let h = Handler::decoder(&dem, kind).unwrap();
        assert_eq!(h.device_code(), code);
        assert_eq!(h.default_name(), "decode");
        assert_eq!(h, h.clone());
        assert_ne!(h, Handler::Parity);
        let Handler::Decoder(dec) = &h else {
            panic!("not a decoder handler")
        };
        let mut reg = Registry::default();
        let id = reg.register("decode", h.clone()).unwrap();
        assert_eq!(id, wire::function_id("decode"));
        let handler = reg.lookup(id).unwrap();

        let shots = Shots::read(&fixture(&format!("{name}.b8")), n as usize, None).unwrap();
        let nb = dec.detector_bytes();
        let mut scratch = dec.new_scratch();
        let mut backend = CpuBackend::new(4, 64);
        for i in 0..500 {
            let row = shots.row(i);
            let payload = dec.payload(row);
            assert_eq!(payload.len(), nb + 4);
            assert_eq!(&payload[nb..], &n.to_le_bytes());
            backend.submit(i as u32, handler, &payload).unwrap();
            let want = dec.result_bytes(dec.decode(&mut scratch, row));
            let mut got = Vec::new();
            backend.poll(|c| {
                assert_eq!(c.status, status::OK);
                got.push((c.token, c.result.to_vec()));
            });
            assert_eq!(got, vec![(i as u32, want)], "{kind} shot {i}");
        }
        // A payload whose event count does not match the model.
        let mut bad = dec.payload(shots.row(0));
        bad[nb] += 1;
        backend.submit(9, handler, &bad).unwrap();
        backend.submit(10, handler, &bad[..nb + 2]).unwrap();
        let mut statuses = Vec::new();
        backend.poll(|c| statuses.push((c.token, c.status, c.result.len())));
        assert_eq!(
            statuses,
            vec![(9, status::BAD_ARGUMENT, 0), (10, status::BAD_ARGUMENT, 0)]
        );
    }
}

#[test]
fn decoder_handlers_are_shareable_across_threads() {
    let dec = Arc::new(
        Decoder::from_dem_path(&fixture("surface_d5_r5_z_p005.dem"), DecoderKind::Uf).unwrap(),
    );
    let shots = Arc::new(Shots::read(&fixture("surface_d5_r5_z_p005.b8"), 120, None).unwrap());
    let h = Handler::Decoder(dec.clone());
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let (h, dec, shots) = (h.clone(), dec.clone(), shots.clone());
            std::thread::spawn(move || {
                let mut scratch = dec.new_scratch();
                let mut out = [0u8; 8];
                for i in (t..400).step_by(2) {
                    let row = shots.row(i);
                    let n = h.run(&dec.payload(row), &mut out).unwrap();
                    assert_eq!(n, 1);
                    assert_eq!(u64::from(out[0]), dec.decode(&mut scratch, row));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn bits_past_the_last_detector_are_ignored() {
    // A five-detector chain: its one syndrome byte has three bits no detector owns. A QPU
    // may leave garbage there; the answer must be that of the five bits alone (the device
    // masks them the same way, device/decode.cu `qfwd_dec_word`).
    for kind in DecoderKind::ALL {
        let h = Handler::Decoder(Arc::new(
            Decoder::from_dem_text(&chain_text(5), "chain of 5", kind).unwrap(),
        ));
        let answer = |byte: u8| {
            let mut p = vec![byte];
            p.extend_from_slice(&5u32.to_le_bytes());
            let mut out = [0u8; 8];
            h.run(&p, &mut out).map(|n| out[..n].to_vec())
        };
        let mut flips = 0;
        for byte in 0..=255u8 {
            let clean = answer(byte & 0x1f).unwrap();
            assert_eq!(answer(byte), Ok(clean.clone()), "{kind} {byte:#04x}");
            flips += usize::from(clean[0] != 0);
        }
        assert!(flips > 0, "{kind}: some syndromes flip the observable");
    }
}
