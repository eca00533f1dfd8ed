//! Running stream scenarios: start the engine a point names, drive it with the stream
//! emulator, stop it, and record one CSV row and one reaction-time spectrum per point;
//! at the end, the plot of reaction p99 against the number of streams.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use qfwd::stream::{ServiceOptions, StreamEngine, StreamSettings, StreamStats};
use qfwd::transport::udp::UdpClient;
use qfwd::transport::{inproc, TransportKind};
use qfwd::wire::HEADER_LEN;

use super::emulator::{self, StreamLoad, StreamOutcome, StreamShots};
use super::plot;
use super::record::{StreamCsv, StreamRow};
use super::scenario::{Engine, StreamPoint, StreamScenario};
use crate::provenance::{self, Provenance};
use crate::sweep::{claim_output, plan_output, spectrum_dir, spectrum_name, SweepArgs};
use crate::{Error, Result};

/// Fails before anything is measured when a point asks for an engine this host or this
/// build cannot run.
pub fn check_engines(scenario: &StreamScenario) -> Result<()> {
    let gpu_points: Vec<String> = scenario
        .points
        .iter()
        .enumerate()
        .filter(|(_, p)| matches!(p.engine, Engine::Gpu | Engine::GpuLaunch))
        .map(|(i, _)| (i + 1).to_string())
        .collect();
    if gpu_points.is_empty() {
        return Ok(());
    }
    let which = format!(
        "point{} {} of {} use{} engine = \"gpu\"",
        if gpu_points.len() == 1 { "" } else { "s" },
        gpu_points.join(", "),
        scenario.points.len(),
        if gpu_points.len() == 1 { "s" } else { "" }
    );
    if matches!(qfwd::gpu::probe(), Ok(Some(ref gpus)) if !gpus.is_empty()) {
        return Ok(());
    }
    let detail = format!(
        "{which}, and this host has no GPU ({}); run it on a GPU host, or its shape with \
         engine = \"cpu-pool\"",
        qfwd::gpu::unavailable_reason().unwrap_or_else(|| "none found".into())
    );
    Err(Error::NoGpu {
        scenario: scenario.path.clone(),
        detail,
    })
}

/// `qfwd-latency sweep` on a stream scenario.
pub fn run(args: &SweepArgs) -> Result<Vec<StreamRow>> {
    let mut scenario = StreamScenario::load(&args.scenario)?;
    if let Some(e) = args.engine {
        scenario.points.retain(|p| p.engine == e);
    }
    for p in &mut scenario.points {
        if let Some(n) = args.samples {
            p.rounds = n.max(p.warmup_rounds + 1);
        }
        if args.unpinned {
            p.cores.clear();
            p.emulator_core = None;
            p.emulator_cores.clear();
            p.idle = qfwd::forward::IdlePolicy::Yield;
            p.emulator_idle = qfwd::forward::IdlePolicy::Yield;
        }
        if let Some((service, emu)) = args.cores {
            match p.cores.first_mut() {
                Some(c) => *c = service,
                None => p.cores.push(service),
            }
            // The emulator's links take consecutive cores from EMU.
            p.emulator_core = Some(emu);
            p.emulator_cores.clear();
        }
    }
    let labels = scenario
        .points
        .iter()
        .map(|p| p.label(&scenario.swept_keys));
    let Some(out) = plan_output(&scenario.path, &scenario.name, labels, args) else {
        return Ok(Vec::new());
    };
    check_engines(&scenario)?;
    claim_output(&out, args.force)?;
    let rows = run_scenario(&scenario, &out)?;
    let svg = plot_path(&out);
    if let Some(dir) = svg.parent() {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    plot::reaction_vs_streams(&rows, &svg)?;
    tracing::info!("plot: {}", svg.display());
    print!("{}", table(&rows));
    Ok(rows)
}

/// Where the plot of `csv` goes: `<stem>-plots/reaction-p99.svg` beside it.
pub fn plot_path(csv: &Path) -> PathBuf {
    let stem = csv
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "streams".into());
    csv.with_file_name(format!("{stem}-plots"))
        .join("reaction-p99.svg")
}

/// Measures every point into `out` (CSV + spectra).
pub fn run_scenario(scenario: &StreamScenario, out: &Path) -> Result<Vec<StreamRow>> {
    let prov = Provenance::detect();
    let run_id = provenance::run_id();
    let mut csv = StreamCsv::create(out)?;
    let (dir, rel) = spectrum_dir(out);
    std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
        path: dir.clone(),
        source,
    })?;
    let bar = ProgressBar::new(scenario.points.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} points  {elapsed_precise}  {msg}")
            .expect("static template"),
    );
    let mut rows = Vec::new();
    for (i, point) in scenario.points.iter().enumerate() {
        let label = point.label(&scenario.swept_keys);
        bar.set_message(label.clone());
        let (mut row, outcome, stats) = measure(point, &scenario.name, &run_id, &prov, |c| {
            bar.set_message(format!("{label}  {}%", c * 100 / point.rounds.max(1)));
        })?;
        let file = spectrum_name(i, 0);
        crate::record::write_hgrm(&dir.join(&file), &outcome.reaction)?;
        row.spectrum = format!("{rel}/{file}");
        csv.write(&row)?;
        bar.suspend(|| {
            tracing::info!(
                "{}",
                point_report(&row, &outcome, &stats, i, scenario.points.len(), &label)
            )
        });
        bar.inc(1);
        rows.push(row);
    }
    bar.finish_and_clear();
    tracing::info!("wrote {} rows to {}", rows.len(), out.display());
    Ok(rows)
}

fn point_report(
    r: &StreamRow,
    o: &StreamOutcome,
    stats: &StreamStats,
    i: usize,
    n: usize,
    label: &str,
) -> String {
    let mut s = format!(
        "[{}/{n}] {label}: reaction p50 {:.2}us p99 {:.2}us p99.9 {:.2}us, backlog max {} rounds, \
         behind at end {:.1}us, {}kept up, LER {} ({} / {} shots), emulator late by up to {:.1}us \
         ({} cycles over 50us)",
        i + 1,
        r.reaction_p50_us,
        r.reaction_p99_us,
        r.reaction_p99_9_us,
        r.backlog_max_rounds,
        r.behind_end_us,
        if r.kept_up { "" } else { "NOT " },
        fmt_ler(r.ler),
        r.mistakes,
        r.shots,
        r.send_late_max_us,
        r.send_late_cycles,
    );
    if o.sends_blocked > 0 {
        s.push_str(&format!(
            "\n  the service held the emulator back: {} requests found their wire full, \
             waiting {:.1} ms in all",
            o.sends_blocked,
            o.send_blocked_ns as f64 / 1e6
        ));
    }
    if !r.kept_up || stats.rounds.received != o.round_entries {
        s.push_str(&format!(
            "\n  emulator: sent {} rounds, committed {}, refused {}, windows lost {}, unexpected {}, \
             request errors {}\n  service: {}",
            o.round_entries,
            o.rounds_committed,
            o.refused_total(),
            o.windows_lost,
            o.unexpected,
            o.request_errors,
            stats.to_string().replace('\n', "\n  ")
        ));
    }
    s
}

fn fmt_ler(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{x:.2e}")
    }
}

/// A Markdown table of the rows' headline columns.
pub fn table(rows: &[StreamRow]) -> String {
    let mut s = String::from(
        "| engine | d | streams | round | reaction p50 | p99 | p99.9 | backlog max | kept up | LER |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    // No reaction sample (no window committed): a dash, not 0 µs.
    let us = |r: &StreamRow, x: f64| {
        if r.reaction_samples == 0 {
            "-".to_string()
        } else {
            format!("{x:.2} µs")
        }
    };
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} µs | {} | {} | {} | {} rounds | {} | {} |\n",
            r.engine,
            r.distance,
            r.streams,
            r.round_ns as f64 / 1e3,
            us(r, r.reaction_p50_us),
            us(r, r.reaction_p99_us),
            us(r, r.reaction_p99_9_us),
            r.backlog_max_rounds,
            if r.kept_up { "yes" } else { "no" },
            fmt_ler(r.ler)
        ));
    }
    s
}

/// Measures one point. `progress` gets cycles sent.
pub fn measure(
    point: &StreamPoint,
    scenario: &str,
    run_id: &str,
    prov: &Provenance,
    progress: impl FnMut(u64) + Send,
) -> Result<(StreamRow, StreamOutcome, StreamStats)> {
    let settings = settings(point)?;
    let base = point.shots_base();
    let mut dem = base.as_os_str().to_owned();
    dem.push(".dem");
    let model = qfwd::stream::load_model(Path::new(&dem), &settings)?;
    let shots = StreamShots::load(&base, &model)?;
    let load = StreamLoad {
        streams: point.streams,
        links: point.links,
        round_ns: point.round_ns,
        rounds: point.rounds,
        warmup_rounds: point.warmup_rounds,
        stagger: point.stagger,
        window: settings.window,
        commit: settings.commit,
        drain: Duration::from_millis(point.drain_ms),
        yield_when_idle: point.emulator_idle == qfwd::forward::IdlePolicy::Yield,
    };
    let opts = ServiceOptions {
        settings: settings.clone(),
        cores: point.cores.clone(),
        idle: point.idle,
        batch: 32,
    };
    let links = point.links.clamp(1, point.streams) as usize;
    let cores = point.emulator_core_list();
    let (outcome, stats) = match point.transport {
        TransportKind::Udp => {
            let running = qfwd::serve::wiring::streams_udp(
                &opts,
                model,
                "127.0.0.1:0".parse().expect("literal"),
                Vec::new(),
            )?;
            let at = running.local_addr().expect("udp has an address");
            // A socket per link: the service answers each request to the port it came from.
            let mut clients = (0..links)
                .map(|_| UdpClient::connect(at))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let outcome = emulator::run(&mut clients, &cores, &shots, &load, progress);
            running.stop();
            (outcome?, running.join()?)
        }
        _ => {
            // Requests, and the largest response a decoder thread writes.
            let slot = HEADER_LEN + settings.max_request_bytes + 1024;
            let (mut clients, server) = inproc::links(links, 4096, slot)?;
            let running = qfwd::stream::spawn_inproc_links(&opts, model, server)?;
            let outcome = emulator::run(&mut clients, &cores, &shots, &load, progress);
            running.stop();
            (outcome?, running.join()?)
        }
    };
    let row = row(point, scenario, run_id, prov, &settings, &outcome, &stats);
    Ok((row, outcome, stats))
}

/// The service settings a point asks for: its request size from its streams per link.
fn settings(point: &StreamPoint) -> Result<StreamSettings> {
    let per_link = point.streams.div_ceil(point.links) as usize;
    // Rounds are at most a few dozen bytes below d = 25; the model checks the real size.
    let round_bytes = (point.distance * point.distance).div_ceil(8) as usize;
    let need = 16 + per_link * round_bytes + 32 * (point.commit_rounds() as usize + 4) + 1024;
    if need > 64_000 {
        return Err(Error::Emulator {
            target: "stream emulator".into(),
            detail: format!(
                "{per_link} streams on one link make requests of about {need} bytes, more than \
                 64000: raise links"
            ),
        });
    }
    // One core for the dispatcher and one per emulator link; the rest decode.
    let workers = match point.workers {
        0 => qfwd::host::online_core_count()
            .saturating_sub(1 + point.links as usize)
            .max(1),
        n => n,
    };
    let s = StreamSettings {
        streams: point.streams,
        window: point.window_rounds(),
        commit: point.commit_rounds(),
        workers,
        queue_slots: point.queue_slots,
        max_request_bytes: need.max(1024),
        engine: match point.engine {
            Engine::CpuPool => StreamEngine::Cpu,
            Engine::Gpu => StreamEngine::Gpu,
            Engine::GpuLaunch => StreamEngine::GpuLaunch,
        },
        gpu_threads: match point.gpu_threads {
            0 => StreamSettings::default().gpu_threads,
            n => n,
        },
        ..StreamSettings::default()
    };
    s.validate()?;
    Ok(s)
}

fn row(
    point: &StreamPoint,
    scenario: &str,
    run_id: &str,
    prov: &Provenance,
    settings: &StreamSettings,
    o: &StreamOutcome,
    stats: &StreamStats,
) -> StreamRow {
    let us = |ns: u64| (ns as f64 / 1e3 * 1000.0).round() / 1000.0;
    let h = &o.reaction;
    let q = |p: f64| {
        if h.is_empty() {
            0.0
        } else {
            us(h.value_at_quantile(p))
        }
    };
    let behind_end_us = us(o.behind_end_ns);
    let kept_up = o.refused_total() == 0
        && o.windows_lost == 0
        && o.streams_broken == 0
        && o.unexpected == 0
        && o.request_errors == 0
        && behind_end_us <= point.behind_limit_us as f64;
    let busiest = stats
        .workers
        .iter()
        .map(|w| w.busy_ns as f64 / 1e9 / stats.seconds.max(1e-9) * 100.0)
        .fold(0.0, f64::max);
    StreamRow {
        run_id: run_id.into(),
        scenario: scenario.into(),
        engine: point.engine.as_str().into(),
        transport: point.transport.to_string(),
        streams: point.streams,
        links: point.links,
        distance: point.distance,
        window: settings.window,
        commit: settings.commit,
        round_ns: point.round_ns,
        workers: stats.workers.len() as u32,
        rounds: point.rounds,
        warmup_rounds: point.warmup_rounds,
        round_entries: o.round_entries,
        rounds_committed: o.rounds_committed,
        rounds_refused: o.refused_total(),
        windows: o.windows,
        windows_lost: o.windows_lost,
        streams_broken: o.streams_broken,
        responses_dropped: stats.dispatch.send_failures,
        reaction_samples: h.len(),
        reaction_p50_us: q(0.5),
        reaction_p90_us: q(0.9),
        reaction_p99_us: q(0.99),
        reaction_p99_9_us: q(0.999),
        reaction_max_us: if h.is_empty() { 0.0 } else { us(h.max()) },
        backlog_max_rounds: o.backlog_max_rounds,
        behind_end_us,
        kept_up,
        send_late_max_us: us(o.send_late_max_ns),
        send_late_cycles: o.send_late_cycles,
        shots: o.shots,
        mistakes: o.mistakes,
        ler: o.ler(),
        busiest_worker_pct: (busiest * 10.0).round() / 10.0,
        cpu: prov.cpu.clone(),
        gpu: match point.engine {
            Engine::Gpu | Engine::GpuLaunch => prov.gpu.clone(),
            Engine::CpuPool => "none".into(),
        },
        host: prov.host.clone(),
        git_rev: prov.git_rev.clone(),
        timestamp_utc: provenance::timestamp_utc(),
        spectrum: String::new(),
        unexpected_records: Some(o.unexpected),
        gpu_threads: match point.engine {
            Engine::Gpu | Engine::GpuLaunch => Some(settings.gpu_threads),
            Engine::CpuPool => None,
        },
    }
}
