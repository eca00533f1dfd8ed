//! Replay of recorded Stim shots through the appliance (issue 4, item 5).
//!
//! [`workload_from_dem`] turns a detector error model and its detection events into an
//! emulator [`Workload`]: each request argument is one shot in the decoder payload format
//! (docs/protocol.md: detection events bit-packed LSB first, `ceil(n/8)` bytes, then the
//! number of detectors as a u32 little-endian), and each expected answer is what the CPU
//! reference decoder returns for it (observable flips, bit-packed LSB first). The emulator
//! then checks every correction the appliance sends back, whichever backend computed it.
#![forbid(unsafe_code)]

use std::path::Path;

use qfwd::decode::{Decoder, DecoderKind, Shots};

use crate::emulator::Workload;

/// Builds a workload from `dem` (Stim `.dem`) and `dets` (shots in `b8`, or `01` when the
/// extension is `.01`), answers from the CPU `decoder` (`"lut"` or `"uf"`), requests
/// addressed to handler `name`; at most `limit` shots (all when `None`).
pub fn workload_from_dem(
    dem: &Path,
    dets: &Path,
    decoder: &str,
    name: &str,
    limit: Option<usize>,
) -> crate::Result<Workload> {
    let kind: DecoderKind = decoder.parse().map_err(qfwd::Error::from)?;
    let dec = Decoder::from_dem_path(dem, kind).map_err(qfwd::Error::from)?;
    let mut shots = Shots::read(dets, dec.num_detectors(), None).map_err(qfwd::Error::from)?;
    if let Some(n) = limit {
        shots.truncate(n);
    }
    if shots.is_empty() {
        return Err(qfwd::Error::Decode {
            detail: format!("{} holds no shots to replay", dets.display()),
        }
        .into());
    }
    let mut scratch = dec.new_scratch();
    let pairs = (0..shots.len())
        .map(|i| {
            let row = shots.row(i);
            let flips = dec.decode(&mut scratch, row);
            (dec.payload(row), dec.result_bytes(flips))
        })
        .collect();
    // A payload whose event count names one detector too many: BAD_ARGUMENT.
    let mut bad = dec.payload(shots.row(0));
    let count = bad.len() - 4;
    bad[count..].copy_from_slice(&(dec.num_detectors() as u32 + 1).to_le_bytes());
    Ok(Workload::from_pairs(name, pairs).with_bad_argument(bad))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures")
            .join(name)
    }

    #[test]
    fn replays_fixture_shots_with_reference_answers() {
        let w = workload_from_dem(
            &fixture("surface_d3_r3_z_p005.dem"),
            &fixture("surface_d3_r3_z_p005.b8"),
            "uf",
            "decode",
            Some(100),
        )
        .unwrap();
        assert_eq!(w.len(), 100);
        assert_eq!(w.function_id(), qfwd::wire::function_id("decode"));
        let e = workload_from_dem(
            &fixture("surface_d3_r3_z_p005.dem"),
            &fixture("surface_d3_r3_z_p005.b8"),
            "mwpm",
            "decode",
            None,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("matching, uf, lut"), "{e}");
        // Shots from another model are refused with the file named.
        let e = workload_from_dem(
            &fixture("surface_d7_r7_z_p005.dem"),
            &fixture("surface_d3_r3_z_p005.b8"),
            "uf",
            "decode",
            None,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("surface_d3_r3_z_p005.b8"), "{e}");
    }
}
