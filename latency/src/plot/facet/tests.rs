use super::*;

fn items<const N: usize>(rows: &[[&str; N]]) -> Vec<(Vec<String>, usize)> {
    rows.iter()
        .enumerate()
        .map(|(i, r)| (r.iter().map(|s| s.to_string()).collect(), i))
        .collect()
}

/// Each style's label, and for every panel its title and its lines' styles.
fn shape<T>(l: &Layout<T>) -> Vec<(String, Vec<usize>)> {
    l.panels
        .iter()
        .map(|p| (p.title.clone(), p.series.iter().map(|s| s.0).collect()))
        .collect()
}

#[test]
fn few_rows_share_one_untitled_panel_labelled_in_words() {
    let cols = ["topology", "pollers", "gpu"];
    let l = layout(
        &cols,
        items(&[
            ["cpu", "0", "none"],
            ["gpu-persistent", "8", "NVIDIA H200 sm_90 0000:00:06.0"],
        ]),
        6,
        10,
    );
    assert_eq!(l.panels.len(), 1);
    assert_eq!(l.panels[0].title, "");
    // The pollers and the GPU only say what the topology already does: said once, in the
    // subtitle's words, not in every label.
    assert_eq!(l.legend, ["CPU core", "GPU persistent kernel"]);
    assert_eq!(l.shared, ["8 pollers", "NVIDIA H200 (sm_90)"]);
    assert!(l.legend.iter().all(|s| !s.contains('=')));
}

#[test]
fn the_cpu_and_gpu_runs_of_one_decoder_share_a_panel() {
    // The gpu-decoders sweep's shape: CPU and GPU rows of each model, in two modes.
    let cols = [
        "topology",
        "pollers",
        "decoder",
        DECODER_OPTIONS,
        "payload_bytes",
        "mode",
        "offered_rate_hz",
    ];
    let mut rows = Vec::new();
    for (model, bytes, rate) in [("uf:d3", "7", "200000"), ("uf:d5", "19", "100000")] {
        for (mode, r, pollers) in [("ping-pong", "0", "2"), ("open-loop", rate, "8")] {
            rows.push(["cpu", "0", model, "", bytes, mode, r]);
            rows.push(["gpu-persistent", pollers, model, "+table", bytes, mode, r]);
        }
        rows.push([
            "gpu-persistent",
            "2",
            model,
            "+no-table",
            bytes,
            "ping-pong",
            "0",
        ]);
    }
    let l = layout(&cols, items(&rows), 6, 10);
    for p in &l.panels {
        let styles: Vec<&str> = p.series.iter().map(|s| l.legend[s.0].as_str()).collect();
        assert!(styles.contains(&"CPU core"), "{}: {styles:?}", p.title);
        assert!(
            styles
                .iter()
                .any(|s| s.starts_with("GPU persistent kernel")),
            "{}: {styles:?}",
            p.title
        );
        assert!(p.title.starts_with("uf decoder, "), "{}", p.title);
        assert!(!p.title.contains('='), "{}", p.title);
    }
    assert_eq!(l.panels.len(), 4, "{:?}", shape(&l));
    assert_eq!(
        l.panels[1].title,
        "uf decoder, d3, 7 B requests, open loop, 200k req/s"
    );
    assert_eq!(
        l.legend,
        [
            "CPU core",
            "GPU persistent kernel, 2 pollers, with table",
            "GPU persistent kernel, 2 pollers, no table",
            "GPU persistent kernel, 8 pollers, with table",
        ]
    );
}

#[test]
fn a_configuration_keeps_its_style_in_every_panel() {
    let cols = ["doorbell", "payload_bytes", "host"];
    let mut rows = Vec::new();
    for b in ["32", "64", "128", "256"] {
        for d in ["cpu-assisted", "regular", "blueflame"] {
            rows.push([d, b, "lab"]);
        }
    }
    let l = layout(&cols, items(&rows), 4, 10);
    // What is compared (the doorbells) shares a panel; the payload makes the panels.
    assert_eq!(l.panels.len(), 4, "{:?}", shape(&l));
    assert_eq!(l.panels[2].title, "128 B requests");
    assert_eq!(
        l.legend,
        [
            "CPU-assisted doorbell",
            "regular doorbell",
            "BlueFlame doorbell"
        ]
    );
    for p in &l.panels {
        let styles: Vec<usize> = p.series.iter().map(|s| s.0).collect();
        assert_eq!(styles, [0, 1, 2], "{}", p.title);
    }
}

#[test]
fn no_two_configurations_share_a_style() {
    let cols = ["topology", "pollers", "payload_bytes"];
    let mut rows = Vec::new();
    for b in ["32", "256"] {
        rows.push(["cpu", "0", b]);
        for p in ["1", "2", "4", "8"] {
            rows.push(["gpu-persistent", p, b]);
        }
    }
    let l = layout(&cols, items(&rows), 6, 10);
    let mut labels = l.legend.clone();
    labels.sort();
    labels.dedup();
    assert_eq!(labels.len(), l.legend.len(), "{:?}", l.legend);
    assert_eq!(l.legend.len(), 5);
    for p in &l.panels {
        let mut styles: Vec<usize> = p.series.iter().map(|s| s.0).collect();
        styles.dedup();
        assert_eq!(styles.len(), p.series.len(), "a style twice in {}", p.title);
    }
}

#[test]
fn a_facet_of_lone_lines_becomes_a_few_panels_in_order() {
    let cols = ["payload_bytes", "mode", "host"];
    let rows: Vec<[&str; 3]> = ["32", "64", "128", "256", "512"]
        .iter()
        .map(|b| [*b, "ping-pong", "vm"])
        .collect();
    let l = layout(&cols, items(&rows), 3, 10);
    assert_eq!(l.panels.len(), 2);
    assert_eq!(l.panels[0].series.len(), 3);
    assert_eq!(l.legend[l.panels[1].series[1].0], "512 B requests");
}

#[test]
fn numbers_sort_as_numbers_and_the_rest_in_sweep_order() {
    let cols = ["topology", "offered_rate_hz"];
    let rows = [
        ["gpu-persistent", "50000"],
        ["cpu", "50000"],
        ["gpu-persistent", "10000"],
        ["cpu", "200000"],
    ];
    let l = layout(&cols, items(&rows), 6, 10);
    assert_eq!(
        l.legend,
        [
            "GPU persistent kernel, 10k req/s",
            "GPU persistent kernel, 50k req/s",
            "CPU core, 50k req/s",
            "CPU core, 200k req/s",
        ]
    );
}

#[test]
fn labels_that_words_cannot_tell_apart_fall_back_to_values() {
    // Two values that both read as nothing (no pollers): the raw values tell them apart.
    let (labels, _) = legend_labels(&["pollers"], &[vec!["0".into()], vec!["".into()]]);
    assert_eq!(labels, ["pollers=0", "pollers="]);
    let (labels, shared) = legend_labels(&["topology"], &[vec!["cpu".into()]]);
    assert_eq!(
        (labels, shared),
        (vec![String::new()], vec!["CPU core".to_string()])
    );
}

#[test]
fn a_panel_of_rows_the_split_does_not_apply_to_says_so() {
    let cols = ["topology", "rx_completion"];
    let mut rows = vec![["cpu", "-"], ["gpu-launch", "-"]];
    for t in ["gpu-persistent"; 3] {
        rows.push([t, "inline"]);
        rows.push([t, "buffer"]);
    }
    let rows: Vec<[&str; 2]> = rows.into_iter().take(6).collect();
    let l = layout(&cols, items(&rows), 2, 10);
    let titles: Vec<&str> = l.panels.iter().map(|p| p.title.as_str()).collect();
    assert!(
        titles.contains(&"completion mode: not applicable"),
        "{titles:?}"
    );
    assert!(titles.contains(&"inline completion"), "{titles:?}");
}
