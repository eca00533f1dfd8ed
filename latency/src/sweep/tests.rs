use std::path::{Path, PathBuf};

use qfwd::backend::Topology;

use super::cli::parse_core_pair;
use super::row::decoder_label;
use super::*;
use crate::scenario::Scenario;

#[test]
fn summary_line_parses() {
    let c =
        parse_summary("received 10 = answered ok 7 + answered with error 2 + dropped 1").unwrap();
    assert_eq!(
        c,
        ForwarderCounts {
            received: 10,
            answered_ok: 7,
            answered_error: 2,
            dropped: 1,
            service_ns: None,
            stalls: None,
        }
    );
    assert!(parse_summary("service time: p50").is_none());
}

#[test]
fn stall_note_from_one_percent() {
    assert_eq!(stall_note(199, 20_000), None);
    assert!(stall_note(200, 20_000)
        .unwrap()
        .contains("200 of 20000 samples (1.0 %)"));
    assert_eq!(stall_note(0, 0), None);
    assert_eq!(forwarder_stall_note(99, 10_000), None);
    assert!(forwarder_stall_note(100, 10_000)
        .unwrap()
        .contains("100 of 10000 requests (1.0 %) were in the forwarder"));
    assert_eq!(forwarder_stall_note(0, 0), None);
}

#[test]
fn stalls_line_parses() {
    assert_eq!(
        parse_stalls_line("forwarder stalls: 12, requests in service across one: 3"),
        Some((12, 3))
    );
    for bad in [
        "forwarder stalls: 12",
        "forwarder stalls: x, requests in service across one: 3",
        "forwarder stalls: 1, requests in service across one: -3",
        "service time: min 0.40us p50 1.23us",
    ] {
        assert_eq!(parse_stalls_line(bad), None, "{bad}");
    }
    // What the forwarder prints is what the harness reads.
    let mut s = qfwd::stats::Stats::default();
    (s.stalls, s.stalled_requests) = (7, 2);
    let text = s.to_string();
    assert_eq!(
        text.lines().find_map(parse_stalls_line),
        Some((7, 2)),
        "{text}"
    );
}

#[test]
fn service_line_parses() {
    assert_eq!(
        parse_service_line(
            "service time: min 0.40us p50 1.23us p99 14.56us p99.9 20.00us max 99.10us"
        ),
        Some((1230, 14560))
    );
    for bad in [
        "service time: min 0.40us p50 1.23us",
        "service time: p50 xus p99 1us",
        "service time: p50 -1.00us p99 1.00us",
        "received 10 = answered ok 10",
    ] {
        assert_eq!(parse_service_line(bad), None, "{bad}");
    }
}

#[test]
fn per_gpu_summary_lines_parse() {
    let s = ShardCounts {
        gpu: 1,
        submitted: 7,
        completed: 6,
        rejected: 2,
    };
    // The line `qfwd run` prints at exit.
    assert_eq!(parse_shard_line(&format!("  {s}")), Some(s));
    assert!(parse_shard_line("gpu 0 sub 3").is_none());
}

#[test]
fn routed_points_spread_requests_over_functions_and_gpus() {
    let s = Scenario::parse(
        r#"
            [forwarder]
            topology = "cpu"
            idle = "yield"
            functions = ["patch0", "patch1", "patch2"]
            [load]
            mode = "ping-pong"
            warmup = 30
            samples = 300
            emulator_idle = "yield"
            [[sweep]]
            gpus = ["-", "0", "0,1"]
            "#,
        Path::new("t.toml"),
    )
    .unwrap();
    let prov = Provenance::detect();
    let mut rows = vec![];
    for p in &s.points {
        let c = run_config(p);
        assert_eq!(
            c.handlers,
            vec!["parity:patch0", "parity:patch1", "parity:patch2"]
        );
        let m = measure(p, "t", "r", &prov, |_| {}).unwrap();
        assert_eq!(m.outcome.ok, 330, "{}", m.outcome);
        assert_eq!(m.row.functions, 3);
        rows.push((m.row.gpus.clone(), m.row.per_gpu_completed.clone()));
    }
    // Round-robin over 3 functions, dealt over 2 GPUs: patch0, patch2 -> 0; patch1 -> 1.
    assert_eq!(
        rows,
        vec![
            ("-".to_string(), "-".to_string()),
            ("0".to_string(), "0:330".to_string()),
            ("0,1".to_string(), "0:220;1:110".to_string()),
        ]
    );
}

#[test]
fn gpu_points_need_the_gpus_they_name_on_this_host() {
    let s = Scenario::parse(
        r#"
            [[sweep]]
            topology = ["cpu", "gpu-persistent"]
            [[sweep]]
            topology = ["gpu-persistent"]
            gpus = ["0,1"]
            [[sweep]]
            launch = ["external"]
            transport = ["udp"]
            target = ["192.0.2.1:5000"]
            topology = ["gpu-persistent"]
            "#,
        Path::new("g.toml"),
    )
    .unwrap();
    assert_eq!(s.points.len(), 4);
    assert!(check_gpus(&s, 2).is_ok());
    let one = check_gpus(&s, 1).unwrap_err().to_string();
    assert!(
        one.contains("g.toml: point 3 of 4 needs GPU 1 and this host has 1"),
        "{one}"
    );
    let none = check_gpus(&s, 0).unwrap_err().to_string();
    assert!(none.contains("points 2, 3 of 4 need GPU 1"), "{none}");
    assert!(none.contains("--topology cpu") && none.contains("nothing was measured"));
}

#[test]
fn output_is_claimed_only_when_free_or_forced() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("run.csv");
    assert!(claim_output(&csv, false).is_ok());
    let hgrm = dir.path().join("run-hgrm");
    std::fs::create_dir(&hgrm).unwrap();
    std::fs::write(hgrm.join("001.hgrm"), "old").unwrap();
    std::fs::write(hgrm.join("notes.txt"), "mine").unwrap();
    let err = claim_output(&csv, false).unwrap_err().to_string();
    assert!(err.contains("run-hgrm") && err.contains("--force"), "{err}");
    std::fs::write(&csv, "old").unwrap();
    let err = claim_output(&csv, false).unwrap_err().to_string();
    assert!(
        err.contains("run.csv already exists") && err.contains("--force"),
        "{err}"
    );
    claim_output(&csv, true).unwrap();
    assert!(
        !hgrm.join("001.hgrm").exists(),
        "old spectra go with --force"
    );
    assert!(hgrm.join("notes.txt").exists(), "only spectra are removed");
}

#[test]
fn decoder_labels_name_the_model_and_the_gpu_uf_settings() {
    let s = Scenario::parse(
        r#"
            [forwarder]
            topology = "gpu-persistent"
            [load]
            mode = "ping-pong"
            [[sweep]]
            decoder = ["uf"]
            dem = ["tests/fixtures/surface_d7_r7_z_p001.dem"]
            dets = ["tests/fixtures/surface_d7_r7_z_p001.b8"]
            uf_table_max_defects = [0, 3]
            uf_split_max_defects = [8]
            [[sweep]]
            topology = ["cpu", "gpu-persistent"]
            decoder = ["uf", "lut"]
            dem = ["tests/fixtures/surface_d3_r3_z_p001.dem"]
            dets = ["tests/fixtures/surface_d3_r3_z_p001.b8"]
            "#,
        Path::new("t.toml"),
    )
    .unwrap();
    let labels: Vec<String> = s.points.iter().map(decoder_label).collect();
    assert_eq!(
        labels,
        vec![
            "uf:surface_d7_r7_z_p001+no-table+split<=8",
            "uf:surface_d7_r7_z_p001+table<=3+split<=8",
            "uf:surface_d3_r3_z_p001",
            "lut:surface_d3_r3_z_p001",
            "uf:surface_d3_r3_z_p001+table",
            "lut:surface_d3_r3_z_p001",
        ]
    );
}

#[test]
fn core_pairs_parse_and_bad_ones_are_explained() {
    assert_eq!(parse_core_pair("4,5"), Ok((4, 5)));
    assert_eq!(parse_core_pair(" 12, 3"), Ok((12, 3)));
    assert!(parse_core_pair("4")
        .unwrap_err()
        .contains("expected two cores"));
    assert!(parse_core_pair("4,5,6")
        .unwrap_err()
        .contains("expected two cores"));
    assert!(parse_core_pair("4,x")
        .unwrap_err()
        .contains("`x` is not a core number"));
    assert!(parse_core_pair("3,3")
        .unwrap_err()
        .contains("both on core 3"));
}

#[test]
fn the_cores_override_replaces_the_forwarder_and_emulator_cores() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/gpu-topologies.toml");
    let mut s = Scenario::load(&path).unwrap();
    assert_eq!(s.points[0].cores, vec![2]);
    adapt(&mut s.points, None, None, false, Some((7, 9)));
    for p in &s.points {
        assert_eq!((p.cores.clone(), p.emulator_core), (vec![7], Some(9)));
    }
}

/// The shipped multi-GPU scenario's shape on the host (topology cpu, host shards), as
/// `qfwd-latency sweep scenarios/multi-gpu.toml --topology cpu --unpinned` runs it: one
/// low-rate point per `gpus` value, so CI exercises routing through the harness.
#[test]
fn the_multi_gpu_scenario_runs_on_the_cpu_topology() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/multi-gpu.toml");
    let mut s = Scenario::load(&path).unwrap();
    adapt(&mut s.points, Some(500), Some(Topology::Cpu), true, None);
    let prov = Provenance::detect();
    let mut seen = Vec::new();
    for p in s.points.iter_mut() {
        if seen.contains(&p.gpus) {
            continue;
        }
        seen.push(p.gpus.clone());
        p.rate_hz = 20_000;
        p.warmup = 100;
        let m = measure(p, &s.name, "r", &prov, |_| {}).unwrap();
        assert_eq!(m.outcome.ok, 600, "{}", accounting_line(&m));
        let gpus = p.gpu_list().unwrap();
        assert_eq!(m.shards.len(), gpus.len());
        // Patches dealt evenly: every GPU completes its share.
        for sh in &m.shards {
            assert_eq!(
                sh.completed,
                600 / gpus.len() as u64,
                "{}",
                accounting_line(&m)
            );
        }
    }
    assert_eq!(seen, vec!["0".to_string(), "0,1".to_string()]);
}

#[test]
fn spectra_live_beside_the_csv() {
    let (dir, rel) = spectrum_dir(Path::new("results/cpu-udp.csv"));
    assert_eq!(dir, PathBuf::from("results/cpu-udp-hgrm"));
    assert_eq!(rel, "cpu-udp-hgrm");
}
