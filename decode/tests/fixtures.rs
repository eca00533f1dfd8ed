//! Decoders against the committed Stim fixtures (tests/fixtures, made by
//! scripts/gen-fixtures.py with stim 1.16.0 and pymatching 2.4.0).
//!
//! Heavier checks are `#[ignore]`d; run them in release:
//! `cargo test --release -p qfwd-decode --test fixtures -- --ignored --nocapture`.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use qfwd_decode::brute::BruteForce;
use qfwd_decode::{
    Decoder, DecoderKind, Dem, Lut, MatchingGraph, MatchingScratch, Shots, UfScratch,
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

struct Fixture {
    name: String,
    meta: toml::Table,
}

impl Fixture {
    fn all() -> Vec<Fixture> {
        let mut v: Vec<Fixture> = std::fs::read_dir(fixtures())
            .expect("tests/fixtures exists")
            .filter_map(|e| {
                let p = e.ok()?.path();
                (p.extension()? == "toml").then_some(p)
            })
            .map(|p| Fixture {
                name: p.file_stem().unwrap().to_str().unwrap().to_string(),
                meta: std::fs::read_to_string(&p).unwrap().parse().unwrap(),
            })
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        assert!(
            v.len() >= 16,
            "expected the committed fixtures, found {}",
            v.len()
        );
        v
    }

    fn get(name: &str) -> Fixture {
        Fixture::all().into_iter().find(|f| f.name == name).unwrap()
    }

    fn int(&self, key: &str) -> u64 {
        self.meta[key]
            .as_integer()
            .unwrap_or_else(|| panic!("{}: {key}", self.name)) as u64
    }

    fn path(&self, ext: &str) -> PathBuf {
        fixtures().join(format!("{}.{ext}", self.name))
    }

    fn decoder(&self, kind: DecoderKind) -> Decoder {
        Decoder::from_dem_path(&self.path("dem"), kind).unwrap()
    }

    fn shots(&self, dec: &Decoder) -> (Shots, Shots) {
        let dets = Shots::read(&self.path("b8"), dec.num_detectors(), None).unwrap();
        let obs = Shots::read(&self.path("obs.01"), dec.num_observables(), None).unwrap();
        assert_eq!(dets.len() as u64, self.int("shots"), "{}", self.name);
        assert_eq!(obs.len(), dets.len(), "{}", self.name);
        (dets, obs)
    }

    /// Mistakes of a uf decoder on every shot, checking on each that the event-driven
    /// version and the round-by-round specification (the GPU port's model) agree on the
    /// whole graph, on the output and on the time growth stopped (what the split path's
    /// test reads), and that the decoder (on the graph's observable part) answers the same.
    fn uf_mistakes_checked(&self, dec: &Decoder) -> u64 {
        let (dets, obs) = self.shots(dec);
        let g = dec.graph();
        let mut s = UfScratch::new(g);
        let mut ds = dec.new_scratch();
        let mut mistakes = 0;
        for i in 0..dets.len() {
            let (fast, t) = s.decode_timed(g, dets.row(i));
            let reference = s.decode_reference_timed(g, dets.row(i));
            assert_eq!((fast, t), reference, "{}: shot {i}", self.name);
            assert_eq!(
                dec.decode(&mut ds, dets.row(i)),
                fast,
                "{}: shot {i}",
                self.name
            );
            mistakes += u64::from(fast != u64::from(obs.row(i)[0]));
        }
        mistakes
    }

    /// Mistakes of `dec` on every shot.
    fn mistakes(&self, dec: &Decoder) -> u64 {
        let (dets, obs) = self.shots(dec);
        let mut s = dec.new_scratch();
        (0..dets.len())
            .filter(|&i| {
                let m = dec.decode(&mut s, dets.row(i));
                m != u64::from(obs.row(i)[0])
            })
            .count() as u64
    }
}

/// 1.5x PyMatching's mistakes plus 3 sigma, sigma = sqrt(max(mistakes, 1)) (the floor keeps
/// a fixture where matching made no mistake from demanding exactly zero).
fn allowance(pymatching: u64) -> f64 {
    1.5 * pymatching as f64 + 3.0 * (pymatching.max(1) as f64).sqrt()
}

#[test]
fn fixtures_are_consistent_with_their_metadata() {
    for f in Fixture::all() {
        let dem = Dem::from_path(&f.path("dem")).unwrap();
        assert_eq!(
            u64::from(dem.num_detectors),
            f.int("num_detectors"),
            "{}",
            f.name
        );
        assert_eq!(
            u64::from(dem.num_observables),
            f.int("num_observables"),
            "{}",
            f.name
        );
        let g = MatchingGraph::from_dem(&dem).unwrap();
        // Same edge count as PyMatching builds from the same model.
        assert_eq!(
            g.num_edges() as u64,
            f.int("pymatching_edges"),
            "{}",
            f.name
        );
        assert_eq!(f.meta["stim_version"].as_str(), Some("1.16.0"));
        assert_eq!(f.meta["pymatching_version"].as_str(), Some("2.4.0"));
    }
}

#[test]
fn uf_is_within_1_5x_of_pymatching_plus_3_sigma_on_every_fixture_and_equals_its_spec() {
    let mut report = String::new();
    let mut failures = Vec::new();
    for f in Fixture::all() {
        let dec = f.decoder(DecoderKind::Uf);
        let uf = f.uf_mistakes_checked(&dec);
        let pm = f.int("pymatching_mistakes");
        let ok = (uf as f64) <= allowance(pm);
        report += &format!(
            "{:<24} shots {:>6}  pymatching {:>4}  uf {:>4}  allowed {:>6.1}  {}\n",
            f.name,
            f.int("shots"),
            pm,
            uf,
            allowance(pm),
            if ok { "ok" } else { "FAIL" }
        );
        if !ok {
            failures.push(f.name.clone());
        }
    }
    println!("{report}");
    assert!(
        failures.is_empty(),
        "uf too inaccurate on {failures:?}\n{report}"
    );
}

/// Small models: every lookup-table entry is a most likely error (checked against a brute
/// force over every edge subset), and the table's cost equals the brute-force minimum.
#[test]
fn lut_equals_brute_force_on_the_small_fixtures() {
    for name in ["rep_d3_r3_p005", "surface_d3_r1_z_p005"] {
        let f = Fixture::get(name);
        let dec = f.decoder(DecoderKind::Lut);
        let (lut, cost) = Lut::build_with_costs(dec.graph()).unwrap();
        let brute = BruteForce::build(dec.graph()).unwrap();
        for (s, &c) in cost.iter().enumerate() {
            let mask = lut.decode(&(s as u32).to_le_bytes());
            let want = brute.min_weight[s];
            assert_eq!(
                u64::from(c),
                if want == u64::MAX {
                    u64::from(u32::MAX)
                } else {
                    want
                },
                "{name}: syndrome {s:#b}"
            );
            assert!(brute.accepts(s, mask), "{name}: syndrome {s:#b} -> {mask}");
        }
        // And on the sampled shots, within the PyMatching allowance.
        let lut_m = f.mistakes(&dec);
        let pm = f.int("pymatching_mistakes");
        assert!(
            (lut_m as f64) <= allowance(pm),
            "{name}: lut {lut_m} vs pymatching {pm}"
        );
    }
}

/// The 24-detector models (d=3 surface code, 3 rounds; d=5 repetition code, 5 rounds):
/// the lut is exact matching on quantized weights, so its mistakes track PyMatching's
/// closely. Release only (2^24-entry tables):
/// `cargo test --release -p qfwd-decode --test fixtures -- --ignored lut_on_24`.
/// The matching decoder on every fixture: on the whole graph and on the observable part
/// (what `Decoder` runs) the same answer on every shot, the correction's weight the same on
/// both; its mistakes PyMatching's to within 1% + 2 (both are minimum-weight matchings, of
/// weights quantized differently, so a few ties break differently); and at most uf's.
#[test]
fn matching_makes_pymatching_mistakes_on_every_fixture() {
    let mut report = String::new();
    let mut failures = Vec::new();
    for f in Fixture::all() {
        let dec = f.decoder(DecoderKind::Matching);
        let (dets, obs) = f.shots(&dec);
        let g = dec.graph();
        let mut whole = MatchingScratch::new(g);
        let mut ds = dec.new_scratch();
        let mut mistakes = 0u64;
        for i in 0..dets.len() {
            let flips = whole.decode(g, dets.row(i));
            assert_eq!(
                dec.decode(&mut ds, dets.row(i)),
                flips,
                "{}: shot {i}",
                f.name
            );
            mistakes += u64::from(flips != u64::from(obs.row(i)[0]));
        }
        let pm = f.int("pymatching_mistakes");
        let uf = f.mistakes(&f.decoder(DecoderKind::Uf));
        let ok = mistakes.abs_diff(pm) as f64 <= 0.01 * pm as f64 + 2.0 && mistakes <= uf;
        report += &format!(
            "{:<24} shots {:>6}  pymatching {:>4}  matching {:>4}  uf {:>4}  {}\n",
            f.name,
            f.int("shots"),
            pm,
            mistakes,
            uf,
            if ok { "ok" } else { "FAIL" }
        );
        if !ok {
            failures.push(f.name.clone());
        }
    }
    println!("{report}");
    assert!(
        failures.is_empty(),
        "matching differs on {failures:?}\n{report}"
    );
}

/// Small models: for every syndrome, the matching's correction weighs the brute-force
/// minimum and flips the observables of a least-weight edge set (as the table does).
#[test]
fn matching_equals_brute_force_on_the_small_fixtures() {
    for name in ["rep_d3_r3_p005", "surface_d3_r1_z_p005"] {
        let f = Fixture::get(name);
        let g = f.decoder(DecoderKind::Lut).graph().clone();
        let brute = BruteForce::build(&g).unwrap();
        let mut s = MatchingScratch::new(&g);
        for (syndrome, &want) in brute.min_weight.iter().enumerate() {
            let defects: Vec<u32> = (0..g.num_detectors() as u32)
                .filter(|&v| syndrome >> v & 1 == 1)
                .collect();
            let got = s.decode_defects(&g, &defects);
            if want == u64::MAX {
                assert!(!got.complete, "{name}: syndrome {syndrome:#b}");
                continue;
            }
            assert_eq!(got.weight, want, "{name}: syndrome {syndrome:#b}");
            assert!(
                brute.accepts(syndrome, got.obs),
                "{name}: syndrome {syndrome:#b}"
            );
        }
    }
}

#[test]
#[ignore]
fn lut_on_24_detector_fixtures_tracks_pymatching() {
    for f in Fixture::all()
        .into_iter()
        .filter(|f| f.int("num_detectors") == 24)
    {
        let lut = f.decoder(DecoderKind::Lut);
        let uf = f.decoder(DecoderKind::Uf);
        let (lm, um) = (f.mistakes(&lut), f.mistakes(&uf));
        let pm = f.int("pymatching_mistakes");
        println!("{:<24} pymatching {pm:>4}  lut {lm:>4}  uf {um:>4}", f.name);
        let tol = 3.0 * (pm.max(1) as f64).sqrt();
        assert!(
            (lm as f64 - pm as f64).abs() <= tol,
            "{}: lut {lm} vs pymatching {pm}",
            f.name
        );
        assert!(lm <= um + 3, "{}: lut {lm} worse than uf {um}", f.name);
    }
}

/// Per-shot CPU time of uf beside PyMatching's (numbers from the fixture files, measured
/// on the machine that generated them). Release only:
/// `cargo test --release -p qfwd-decode --test fixtures -- --ignored --nocapture uf_speed`.
#[test]
#[ignore]
fn uf_speed_beside_pymatching() {
    for f in Fixture::all() {
        let dec = f.decoder(DecoderKind::Uf);
        let (dets, _) = f.shots(&dec);
        let mut s = dec.new_scratch();
        let mut sink = 0u64;
        for i in 0..dets.len() {
            sink ^= dec.decode(&mut s, dets.row(i));
        }
        let t = std::time::Instant::now();
        for _ in 0..3 {
            for i in 0..dets.len() {
                sink ^= dec.decode(&mut s, dets.row(i));
            }
        }
        let ns = t.elapsed().as_nanos() as f64 / (3 * dets.len()) as f64;
        println!(
            "{:<24} uf {:>8.0} ns/shot   pymatching decode_batch {:>6} ns/shot  ({sink})",
            f.name,
            ns,
            f.int("pymatching_batch_ns_per_shot")
        );
    }
}
