//! Property tests of the decode module: parser robustness, shot formats, and the decoders
//! against brute force and against each other on random small graphs.
#![forbid(unsafe_code)]

use proptest::prelude::*;
use qfwd_decode::brute::BruteForce;
use qfwd_decode::graph::EdgeSpec;
use qfwd_decode::{Dem, Lut, MatchingGraph, Shots, UfScratch};

/// Lines that look like DEM text, valid or not.
fn dem_line() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("error(0.1)".to_string()),
        Just("error[t](0.01)".to_string()),
        Just("error(".to_string()),
        Just("error(2)".to_string()),
        Just("detector(1, 2)".to_string()),
        Just("detector".to_string()),
        Just("logical_observable".to_string()),
        Just("shift_detectors".to_string()),
        Just("repeat 3 {".to_string()),
        Just("repeat".to_string()),
        Just("}".to_string()),
        Just("{".to_string()),
        Just("^".to_string()),
        Just("#".to_string()),
        (0u64..100).prop_map(|k| format!("D{k}")),
        (0u64..70).prop_map(|k| format!("L{k}")),
        (0u64..5).prop_map(|k| k.to_string()),
        Just("D18446744073709551615".to_string()),
        "[ -~]{0,6}",
    ];
    proptest::collection::vec(token, 0..8).prop_map(|t| t.join(" "))
}

/// A random small graph: edges between distinct detectors or to the boundary.
fn small_graph(max_n: u32, max_e: usize) -> impl Strategy<Value = MatchingGraph> {
    (1..=max_n).prop_flat_map(move |n| {
        let edge = (0..n, proptest::option::of(0..n), 0.001f64..0.45, 0u64..4).prop_map(
            |(u, v, p, obs)| EdgeSpec {
                u,
                v: v.filter(|&v| v != u),
                p,
                observables: obs,
            },
        );
        proptest::collection::vec(edge, 0..=max_e)
            .prop_map(move |edges| MatchingGraph::from_edges(n, 2, &edges).unwrap())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn dem_parser_never_panics_on_dem_like_text(lines in proptest::collection::vec(dem_line(), 0..12)) {
        let text = lines.join("\n");
        if let Err(e) = Dem::parse(&text, "p.dem") {
            // Every error names the file and a line.
            prop_assert!(e.to_string().starts_with("p.dem:"), "{}", e);
        }
    }

    #[test]
    fn dem_parser_never_panics_on_arbitrary_text(text in "\\PC{0,200}") {
        let _ = Dem::parse(&text, "p.dem");
    }

    #[test]
    fn b8_and_01_round_trip(bits in 0usize..40, rows in proptest::collection::vec(proptest::collection::vec(any::<bool>(), 40), 0..20)) {
        let mut s = Shots::new(bits);
        for r in &rows {
            s.push_bits(&r[..bits]);
        }
        // Shots of 0 bits hold no bytes but are counted all the same.
        prop_assert_eq!(s.len(), rows.len());
        if bits > 0 {
            prop_assert_eq!(&Shots::from_b8(s.as_b8().to_vec(), bits).unwrap(), &s);
            for (i, r) in rows.iter().enumerate() {
                for (k, &b) in r[..bits].iter().enumerate() {
                    prop_assert_eq!(s.get(i, k), b);
                }
            }
        }
        let text = s.to_01();
        prop_assert_eq!(&Shots::from_01(&text, bits).unwrap(), &s);
    }

    /// Every lookup-table entry is a most likely error: its cost is the brute-force minimum
    /// and its observable mask is one that a minimum-weight edge set flips.
    #[test]
    fn lut_equals_brute_force_on_random_graphs(g in small_graph(7, 12)) {
        let (lut, cost) = Lut::build_with_costs(&g).unwrap();
        let brute = BruteForce::build(&g).unwrap();
        for (s, &c) in cost.iter().enumerate() {
            let want = brute.min_weight[s];
            let got = if c == u32::MAX { u64::MAX } else { u64::from(c) };
            prop_assert_eq!(got, want, "syndrome {:#b}", s);
            let mask = lut.decode(&(s as u32).to_le_bytes());
            prop_assert!(brute.accepts(s, mask), "syndrome {:#b} -> {}", s, mask);
        }
    }

    /// The event-driven union-find equals the round-by-round specification.
    #[test]
    fn uf_fast_equals_reference_on_random_graphs(
        g in small_graph(12, 30),
        syndromes in proptest::collection::vec(any::<u16>(), 1..20),
    ) {
        let mut s = UfScratch::new(&g);
        for syn in syndromes {
            let bytes = syn.to_le_bytes();
            let fast = s.decode(&g, &bytes);
            let reference = s.decode_reference(&g, &bytes);
            prop_assert_eq!(fast, reference, "syndrome {:#b}", syn);
        }
    }
}
