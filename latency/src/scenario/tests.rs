use super::*;

fn parse(text: &str) -> Result<Scenario> {
    Scenario::parse(text, Path::new("test.toml"))
}

#[test]
fn sweeps_expand_as_cartesian_products_per_block() {
    let s = parse(
        r#"
            name = "x"
            [forwarder]
            transport = "udp"
            [load]
            samples = 5
            [[sweep]]
            payload_bytes = [32, 64]
            mode = ["ping-pong"]
            rate_hz = [1, 2, 3]
            [[sweep]]
            mode = ["open-loop"]
            rate_hz = [1000, 2000]
            payload_bytes = [32, 64]
            "#,
    )
    .unwrap();
    // Ping-pong ignores rate: 2 points, not 6. Open loop: 2 x 2.
    assert_eq!(s.points.len(), 6);
    assert_eq!(s.points[0].payload_bytes, 32);
    assert_eq!(s.points[0].rate_hz, 0);
    assert_eq!(s.points[1].payload_bytes, 64);
    assert!(s.points[2..]
        .iter()
        .all(|p| p.mode == Mode::OpenLoop && p.rate_hz >= 1000));
    assert!(s
        .points
        .iter()
        .all(|p| p.transport == TransportKind::Udp && p.samples == 5));
    assert_eq!(s.swept_keys, vec!["payload_bytes", "mode", "rate_hz"]);
}

#[test]
fn no_sweep_is_one_point_and_defaults_apply() {
    let s = parse("").unwrap();
    assert_eq!(s.points, vec![Point::defaults()]);
    assert_eq!(s.name, "test");
}

#[test]
fn errors_name_the_key_and_the_reason() {
    let cases = [
        (
            "[forwarder]\nsamples = 3\n",
            "forwarder.samples",
            "belongs in [load]",
        ),
        ("[load]\nbogus = 3\n", "load.bogus", "unknown key"),
        (
            "[sweep]\npayload_bytes = 32\n",
            "sweep.payload_bytes",
            "list",
        ),
        (
            "[sweep]\nbogus = [1]\n",
            "sweep.bogus",
            "not a sweepable key",
        ),
        ("[sweep]\nmode = []\n", "sweep.mode", "empty"),
        (
            "[sweep]\ntopology = [\"gpu\"]\n",
            "topology=gpu",
            "unknown variant",
        ),
        ("[load]\nmode = \"open-loop\"\n", "point", "rate_hz"),
        ("[forwarder]\nlaunch = \"child\"\n", "point", "udp"),
        ("name = \n", "line 1", ""),
    ];
    for (text, key, reason) in cases {
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains("test.toml"), "{e}");
        assert!(e.contains(key), "want {key:?} in {e}");
        assert!(e.contains(reason), "want {reason:?} in {e}");
    }
}

#[test]
fn numbers_out_of_range_name_the_key_the_value_and_the_range() {
    let cases = [
        ("[forwarder]\nbatch = 100000000\n", "batch", "1 ..= 1024"),
        (
            "[forwarder]\nmax_in_flight = 0\n",
            "max_in_flight",
            "1 ..= 65536",
        ),
        ("[forwarder]\nslots = 99999999\n", "slots", "1 ..= 4096"),
        (
            "[forwarder]\ncores = [0, 70000]\n",
            "cores[1]",
            "0 ..= 1023",
        ),
        (
            "[forwarder]\nwatchdog_us = 0\n",
            "watchdog_us",
            "1 ..= 60000000",
        ),
        ("[load]\nsamples = 9000000000000\n", "samples", "1 ..= "),
        ("[load]\ntimeout_ms = 0\n", "timeout_ms", "1 ..= 60000 ms"),
        ("[load]\nemulator_core = 5000\n", "emulator_core", "5000"),
        (
            "[load]\nmode = \"open-loop\"\nrate_hz = 1000000000000\n",
            "rate_hz",
            "100000000 req/s",
        ),
        (
            "[load]\nmode = \"open-loop\"\nrate_hz = 1000\nduration_s = 1e30\n",
            "duration_s",
            "86400 s",
        ),
        (
            "[load]\nmode = \"open-loop\"\nrate_hz = 100000000\nduration_s = 86400.0\n",
            "samples",
            "8639999999000",
        ),
    ];
    for (text, key, range) in cases {
        let e = parse(text).unwrap_err().to_string();
        assert!(
            e.contains(key) && e.contains(range),
            "want {key:?}, {range:?} in {e}"
        );
    }
}

#[test]
fn gpus_functions_and_routes_parse_and_sweep() {
    let s = parse(
        r#"
            [forwarder]
            functions = ["patch0", "patch1"]
            route = ["patch1=1"]
            [[sweep]]
            gpus = ["1", "0,1"]
            "#,
    )
    .unwrap();
    assert_eq!(s.points.len(), 2);
    assert_eq!(s.points[0].gpu_list().unwrap(), vec![1]);
    assert_eq!(s.points[1].gpu_list().unwrap(), vec![0, 1]);
    assert_eq!(s.points[1].route_map().unwrap().get("patch1"), Some(&1));
    assert_eq!(s.points[0].functions, vec!["patch0", "patch1"]);
    assert!(Point::defaults().gpu_list().unwrap().is_empty());
    for (text, reason) in [
        ("[forwarder]\ngpus = \"0,x\"\n", "GPU indices"),
        ("[forwarder]\nroute = [\"p=1\"]\n", "route needs gpus"),
        ("[forwarder]\ngpus = \"0\"\nroute = [\"p\"]\n", "NAME=GPU"),
        ("[forwarder]\nfunctions = [\"\"]\n", "functions"),
        // Found when the forwarder's checks moved up front: this point used to fail
        // only when its turn came, after the points before it had run.
        (
            "[forwarder]\nfunctions = [\"p\"]\ngpus = \"0\"\nroute = [\"p=1\"]\n",
            "GPU 1 is not among the GPUs served",
        ),
        (
            "[forwarder]\ntopology = \"gpu-persistent\"\npollers_per_slot = 3\n",
            "must divide pollers",
        ),
    ] {
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains(reason), "want {reason:?} in {e}");
    }
}

#[test]
fn open_loop_duration_sets_samples() {
    let s = parse("[load]\nmode = \"open-loop\"\nrate_hz = 1000\nduration_s = 2.0\nwarmup = 100\n")
        .unwrap();
    assert_eq!(s.points[0].timed_samples(), 1900);
}

#[test]
fn every_shipped_scenario_parses() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&p).unwrap();
            if crate::streams::scenario::is_stream_scenario(&text) {
                crate::streams::scenario::StreamScenario::load(&p)
                    .unwrap_or_else(|e| panic!("{e}"));
            } else {
                Scenario::load(&p).unwrap_or_else(|e| panic!("{e}"));
            }
            n += 1;
        }
    }
    assert!(n >= 1, "no scenarios in {}", dir.display());
}

/// A decoder point names uf, matching or lut; matching runs on topology cpu only.
#[test]
fn decoder_points_take_matching_on_the_cpu_only() {
    let point = |decoder: &str, topology: Topology| Point {
        decoder: decoder.into(),
        dem: Some("d.dem".into()),
        dets: Some("d.b8".into()),
        topology,
        ..Point::defaults()
    };
    for decoder in ["uf", "matching", "lut"] {
        point(decoder, Topology::Cpu).validate().unwrap();
    }
    point("uf", Topology::GpuPersistent).validate().unwrap();
    let e = point("matching", Topology::GpuPersistent)
        .validate()
        .unwrap_err();
    assert!(e.contains("cpu only") && e.contains("\"uf\""), "{e}");
    let e = point("mwpm", Topology::Cpu).validate().unwrap_err();
    assert!(e.contains("uf, matching or lut"), "{e}");
}
