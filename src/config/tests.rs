use super::*;

#[test]
fn defaults_serve_parity_over_udp() {
    let c = RunConfig::default();
    c.validate().unwrap();
    assert_eq!(c.transport, TransportKind::Udp);
    assert!(c
        .registry()
        .unwrap()
        .lookup(crate::wire::function_id("parity"))
        .is_some());
}

#[test]
fn toml_file_overrides_defaults_and_rejects_unknown_keys() {
    let dir = std::env::temp_dir().join(format!("qfwd-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("a.toml");
    std::fs::write(
        &p,
        "listen = \"127.0.0.1:9100\"\ncores = [1]\nidle = \"yield\"\n",
    )
    .unwrap();
    let c = RunConfig::from_file(&p).unwrap();
    assert_eq!(c.listen.port(), 9100);
    assert_eq!(c.cores, vec![1]);
    assert_eq!(c.idle, IdlePolicy::Yield);
    std::fs::write(&p, "listne = \"x\"\n").unwrap();
    let e = RunConfig::from_file(&p).unwrap_err().to_string();
    assert!(e.contains("a.toml") && e.contains("listne"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn only_gpu_persistent_behind_the_soft_nic_rings_from_the_device() {
    let mut c = RunConfig {
        transport: TransportKind::Softnic,
        topology: Topology::GpuPersistent,
        doorbell: Doorbell::BlueFlame,
        ..Default::default()
    };
    assert!(c.device_posts());
    c.doorbell = Doorbell::Regular;
    assert!(c.device_posts());
    c.doorbell = Doorbell::CpuAssisted;
    assert!(!c.device_posts());
    c.doorbell = Doorbell::Regular;
    c.topology = Topology::Cpu;
    assert!(!c.device_posts());
    c.topology = Topology::GpuPersistent;
    c.transport = TransportKind::Udp;
    assert!(!c.device_posts());
}

#[test]
fn gpu_direct_over_rdma_needs_the_feature_and_the_kernel() {
    let mut c = RunConfig {
        transport: TransportKind::Rdma,
        listen: "127.0.0.1:18515".parse().unwrap(),
        data_path: DataPath::GpuDirect,
        topology: Topology::GpuPersistent,
        pollers: 4,
        links: 2,
        ..Default::default()
    };
    if cfg!(feature = "rdma") {
        c.validate().unwrap();
        c.topology = Topology::Cpu;
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("gpu-persistent") && e.contains("stand-in"),
            "{e}"
        );
    } else {
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("--features rdma"), "{e}");
    }
    c.transport = TransportKind::Udp;
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("softnic") && e.contains("udp"), "{e}");
    let t: RunConfig = toml::from_str("rx_memory = \"host\"\n").unwrap();
    assert_eq!(t.rx_memory, crate::direct::RxMemory::Host);
    assert!(toml::from_str::<RunConfig>("rx_memory = \"hbm\"\n").is_err());
    for m in crate::direct::RxMemory::ALL {
        assert_eq!(m.to_string().parse(), Ok(m));
    }
}

#[test]
fn bad_values_name_their_key() {
    let c = RunConfig {
        batch: 0,
        ..Default::default()
    };
    assert!(c.validate().unwrap_err().to_string().contains("batch"));
    let c = RunConfig {
        allow: vec!["nonsense".into()],
        ..Default::default()
    };
    assert!(c.validate().unwrap_err().to_string().contains("allow"));
    let c = RunConfig {
        handlers: vec!["nope".into()],
        ..Default::default()
    };
    assert!(c.validate().unwrap_err().to_string().contains("parity"));
    let c = RunConfig {
        topology: Topology::GpuPersistent,
        uf_split_max_defects: Some(40),
        ..Default::default()
    };
    let e = c.validate().unwrap_err().to_string();
    assert!(
        e.contains("uf_split_max_defects") && e.contains("40"),
        "{e}"
    );
}

#[test]
fn a_non_loopback_listen_needs_an_allowlist_or_allow_any() {
    for listen in ["0.0.0.0:9000", "[::]:9000", "10.1.2.3:9000"] {
        let mut c = RunConfig {
            listen: listen.parse().unwrap(),
            ..Default::default()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("--allow-any") && e.contains(listen), "{e}");
        c.allow_any = true;
        c.validate().unwrap();
        assert!(c.exposure_warning().unwrap().contains(listen));
        c.allow_any = false;
        c.allow = vec!["10.0.0.7".into()];
        c.validate().unwrap();
        assert!(c.exposure_warning().is_none());
        c.allow_any = true;
        assert!(c.validate().unwrap_err().to_string().contains("pick one"));
    }
    let rdma = RunConfig {
        transport: TransportKind::Rdma,
        listen: "0.0.0.0:18515".parse().unwrap(),
        allow: vec!["10.0.0.7".into()],
        ..Default::default()
    };
    let e = rdma.validate().unwrap_err().to_string();
    assert!(e.contains("does not filter peers"), "{e}");
    for listen in ["127.0.0.1:9000", "[::1]:9000", "[::ffff:127.0.0.1]:9000"] {
        let c = RunConfig {
            listen: listen.parse().unwrap(),
            ..Default::default()
        };
        c.validate().unwrap();
        assert!(c.exposure_warning().is_none(), "{listen}");
    }
}

#[test]
fn several_names_per_handler_and_decoder_register_apart() {
    let c = RunConfig {
        handlers: vec![
            "parity:patch0".into(),
            "parity:patch1".into(),
            "parity".into(),
        ],
        ..Default::default()
    };
    c.validate().unwrap();
    let r = c.registry().unwrap();
    for n in ["patch0", "patch1", "parity"] {
        assert_eq!(
            r.lookup(crate::wire::function_id(n)),
            Some(&Handler::Parity),
            "{n}"
        );
    }
    assert_eq!(
        c.function_names().unwrap(),
        vec!["patch0", "patch1", "parity"]
    );
    for bad in ["parity:", "nope:x"] {
        let c = RunConfig {
            handlers: vec![bad.into()],
            ..Default::default()
        };
        assert!(c.validate().is_err(), "{bad}");
    }
    let dem = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/surface_d3_r3_z_p005.dem");
    let c = RunConfig {
        decoder: Some("uf".into()),
        dem: Some(dem),
        decoder_names: vec!["dec_a".into(), "dec_b".into()],
        ..Default::default()
    };
    c.validate().unwrap();
    let r = c.registry().unwrap();
    let a = r.lookup(crate::wire::function_id("dec_a")).unwrap();
    let b = r.lookup(crate::wire::function_id("dec_b")).unwrap();
    assert_eq!(a, b, "one model under both names");
    assert!(r.lookup(crate::wire::function_id("decode")).is_none());
}

#[test]
fn gpus_and_route_map_are_checked_by_name() {
    let dir = std::env::temp_dir().join(format!("qfwd-config-route-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("r.toml");
    std::fs::write(
        &p,
        "handlers = [\"parity:patch0\", \"parity:patch1\"]\ngpus = [0, 1]\n[route]\npatch1 = 0\n",
    )
    .unwrap();
    let c = RunConfig::from_file(&p).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(c.gpus, vec![0, 1]);
    assert_eq!(c.route.get("patch1"), Some(&0));
    c.validate().unwrap();
    assert!(c.routed());
    let mut bad = c.clone();
    bad.route.insert("patch0".into(), 7);
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("patch0=7"), "{e}");
    let mut bad = c.clone();
    bad.route.insert("patch9".into(), 1);
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("patch9=1"), "{e}");
    let mut bad = c.clone();
    bad.gpus.clear();
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("route"), "{e}");
    // Defaults: not routed, one GPU (device 0).
    let d = RunConfig::default();
    assert!(!d.routed());
    assert_eq!(d.gpu_list(), vec![0]);
    assert_eq!(parse_route("patch0=1"), Ok(("patch0".to_string(), 1)));
    assert!(parse_route("patch0").is_err());
    assert!(parse_route("patch0=x")
        .unwrap_err()
        .contains("not a number"));
}

/// The matching decoder runs on the CPU only: the cpu topology takes it, every GPU topology
/// and the gpu-direct data path refuse it with the alternative named.
#[test]
fn matching_is_served_on_the_cpu_topology_only() {
    let dem = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/surface_d3_r3_z_p005.dem");
    let cpu = RunConfig {
        decoder: Some("matching".into()),
        dem: Some(dem),
        ..Default::default()
    };
    cpu.validate().unwrap();
    assert_eq!(
        cpu.decoder_kind().unwrap(),
        Some(crate::decode::DecoderKind::Matching)
    );
    for topology in [
        Topology::GpuLaunch,
        Topology::GpuGraph,
        Topology::GpuPersistent,
    ] {
        let c = RunConfig {
            topology,
            ..cpu.clone()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains(topology.as_str()) && e.contains("CPU only") && e.contains("--decoder uf"),
            "{e}"
        );
    }
}
