//! Decoder payloads through the mailbox slot protocol, against the CPU double of the
//! persistent kernel (no GPU needed): the double answers the decoder device codes (lut 2,
//! uf 3) with the CPU decoders, as the kernel answers them with the GPU ones, so CI checks
//! the protocol end to end with real syndromes (payload sizes spanning several chunks, both
//! `rx_completion` modes, several requests in flight, wrong payloads, a decoder kind the
//! device side does not hold). tests/gpu_decoders.rs runs the same on the GPU.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use qfwd::backend::Backend;
use qfwd::decode::{Decoder, DecoderKind, Shots};
use qfwd::handler::Handler;
use qfwd::mailbox::{CpuDouble, Layout, MailboxBackend, RxCompletion};
use qfwd::wire::status;

fn fixture(name: &str, kind: DecoderKind, shots: usize) -> (Arc<Decoder>, Vec<Vec<u8>>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let dec = Arc::new(Decoder::from_dem_path(&dir.join(format!("{name}.dem")), kind).unwrap());
    let mut s = Shots::read(&dir.join(format!("{name}.b8")), dec.num_detectors(), None).unwrap();
    s.truncate(shots);
    let payloads = (0..s.len()).map(|i| dec.payload(s.row(i))).collect();
    (dec, payloads)
}

fn double(rx: RxCompletion, decoders: &[Arc<Decoder>]) -> MailboxBackend<CpuDouble> {
    let layout = Layout::new(16, Layout::req_slot_bytes_for(256, rx), 64, rx).unwrap();
    MailboxBackend::new(CpuDouble::start_with_decoders(layout, 2, 1, decoders).unwrap())
}

/// Every payload's (status, result), up to `window` in flight.
fn answers<B: Backend>(
    b: &mut B,
    handler: &Handler,
    payloads: &[Vec<u8>],
    window: usize,
) -> Vec<(i32, Vec<u8>)> {
    let mut got: Vec<Option<(i32, Vec<u8>)>> = vec![None; payloads.len()];
    let (mut next, mut done) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while done < payloads.len() {
        // A group that falls behind holds its slots: the ring may refuse (OVERLOAD)
        // before `window` are in flight; then poll and submit again.
        while next < payloads.len() && b.in_flight() < window {
            match b.submit(next as u32, handler, &payloads[next]) {
                Ok(()) => next += 1,
                Err(st) if st == status::OVERLOAD => break,
                Err(st) => panic!("submit {next}: status {st}"),
            }
        }
        let n = b.poll(|c| got[c.token as usize] = Some((c.status, c.result.to_vec())));
        done += n;
        if n == 0 {
            assert!(
                Instant::now() < deadline,
                "stuck at {done} of {}",
                payloads.len()
            );
            std::thread::yield_now();
        }
    }
    got.into_iter().map(Option::unwrap).collect()
}

fn cpu(dec: &Decoder, p: &[u8]) -> (i32, Vec<u8>) {
    let mut out = [0u8; 16];
    match dec.run_payload(p, &mut out) {
        Ok(n) => (status::OK, out[..n].to_vec()),
        Err(why) => (qfwd::handler::payload_status(why), Vec::new()),
    }
}

#[test]
fn decoder_payloads_round_trip_through_the_slot_protocol() {
    for rx in RxCompletion::ALL {
        let (uf, uf_payloads) = fixture("surface_d5_r5_z_p005", DecoderKind::Uf, 600);
        let (lut, lut_payloads) = fixture("surface_d3_r1_z_p005", DecoderKind::Lut, 600);
        let mut b = double(rx, &[Arc::clone(&uf), Arc::clone(&lut)]);
        for (dec, payloads) in [(&uf, &uf_payloads), (&lut, &lut_payloads)] {
            let handler = Handler::Decoder(Arc::clone(dec));
            let got = answers(&mut b, &handler, payloads, 8);
            let mut flips = 0;
            for (p, g) in payloads.iter().zip(&got) {
                assert_eq!(*g, cpu(dec, p), "{rx} {}", dec.kind());
                flips += usize::from(g.1.iter().any(|&x| x != 0));
            }
            assert!(flips > 0, "the sample has corrections");
            // A wrong detector count and a short payload: BAD_ARGUMENT, as on the CPU.
            let mut wrong = payloads[0].clone();
            let nb = dec.detector_bytes();
            wrong[nb] ^= 1;
            let short = payloads[0][..payloads[0].len() - 1].to_vec();
            for g in answers(&mut b, &handler, &[wrong, short], 2) {
                assert_eq!(g, (status::BAD_ARGUMENT, Vec::new()));
            }
            // Every detector flagged: past the uf budget (OVER_BUDGET), decoded by the lut,
            // whose 8 detectors are within its default (the model's count), as on the CPU.
            let all = dec.payload(&vec![0xff; nb]);
            let want = match dec.kind() {
                DecoderKind::Uf | DecoderKind::Matching => status::OVER_BUDGET,
                DecoderKind::Lut => status::OK,
            };
            let g = answers(&mut b, &handler, std::slice::from_ref(&all), 1).remove(0);
            assert_eq!((g.0, &g), (want, &cpu(dec, &all)), "{rx} {}", dec.kind());
        }
        b.shutdown(Duration::from_secs(5)).unwrap();
    }
}

#[test]
fn a_decoder_kind_the_device_side_does_not_hold_is_an_unknown_function() {
    let (uf, payloads) = fixture("surface_d3_r3_z_p005", DecoderKind::Uf, 4);
    let (lut, _) = fixture("surface_d3_r1_z_p005", DecoderKind::Lut, 1);
    let mut b = double(RxCompletion::Inline, &[lut]);
    let got = answers(&mut b, &Handler::Decoder(uf), &payloads, 4);
    assert!(
        got.iter().all(|g| g.0 == status::UNKNOWN_FUNCTION),
        "{got:?}"
    );
    b.shutdown(Duration::from_secs(5)).unwrap();
    // Two models of one kind are refused, as by the GPU backends.
    let (a, _) = fixture("surface_d3_r3_z_p005", DecoderKind::Uf, 1);
    let (c, _) = fixture("surface_d3_r3_z_p001", DecoderKind::Uf, 1);
    let layout = Layout::new(4, 256, 64, RxCompletion::Inline).unwrap();
    let e = CpuDouble::start_with_decoders(layout, 1, 1, &[a, c])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("one model per kind"), "{e}");
    // The matching decoder, which no kernel serves, is refused by its stand-in too.
    let (m, _) = fixture("surface_d3_r3_z_p005", DecoderKind::Matching, 1);
    let layout = Layout::new(4, 256, 64, RxCompletion::Inline).unwrap();
    let e = CpuDouble::start_with_decoders(layout, 1, 1, &[m])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("CPU only") && e.contains("--decoder uf"), "{e}");
}
