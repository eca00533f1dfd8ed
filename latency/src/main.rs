//! The `qfwd-latency` command line.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use qfwd::backend::Topology;
use qfwd::forward::IdlePolicy;
use qfwd::transport::TransportKind;
use qfwd_latency::emulator::{self, Mode};
use qfwd_latency::provenance::{self, Provenance};
use qfwd_latency::quickstart;
use qfwd_latency::record::CsvSink;
use qfwd_latency::scenario::{Launch, Point};
use qfwd_latency::{report, sweep, Result};

#[derive(Parser)]
#[command(
    name = "qfwd-latency",
    version,
    about = "Measure qfwd: emulate a QPU controller, sweep scenarios, compare results",
    long_about = "Measure qfwd: emulate a QPU controller, sweep scenarios, compare results.\n\n\
With no command, runs the quick start: an in-process forwarder driven by the emulator over \
the in-process ring and over UDP loopback (with a GPU, also on the persistent kernel); prints \
a latency table with its columns explained and writes results/quickstart.csv. No GPU or NIC \
needed. It replaces its own earlier output, and says so; like `sweep`, it refuses to write \
over any other file without --force.\n\n\
Latencies are round trips (request sent -> response received), never halved; in open loop \
each is timed from the request's intended send time.",
    after_help = "Examples:\n  \
qfwd-latency                                   # the quick start\n  \
qfwd-latency emulate --target 127.0.0.1:9000   # against a running `qfwd run`\n  \
qfwd-latency sweep scenarios/udp-loopback.toml --out my-host.csv\n  \
qfwd-latency report my-host.csv --svg my-host-plots\n\n\
`qfwd-latency COMMAND --help` explains a command."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the quick start (what `qfwd-latency` alone runs).
    ///
    /// An in-process forwarder on this host's CPU (and GPU, when there is one), driven over
    /// the in-process ring and UDP loopback; a latency table with its columns explained,
    /// and a summary CSV. An earlier quick start's CSV and spectra at --out are replaced
    /// (the run says so); any other file there is left alone unless --force.
    #[command(after_help = "Examples:\n  \
qfwd-latency quickstart\n  \
qfwd-latency quickstart --out /tmp/before.csv   # keep a run to compare with the next\n  \
qfwd-latency report /tmp/before.csv results/quickstart.csv")]
    Quickstart {
        /// Summary CSV to write; its spectra go to a `<stem>-hgrm` folder beside it.
        #[arg(long, default_value = qfwd_latency::quickstart::DEFAULT_OUT)]
        out: PathBuf,
        /// Replace --out even when it is not an earlier quick start's output.
        #[arg(long)]
        force: bool,
    },
    /// Play a QPU controller against one forwarder; print percentiles.
    ///
    /// Exits 1 when a request was lost or answered wrongly. Without --target, starts a
    /// forwarder in this process.
    #[command(after_help = "Examples:\n  \
qfwd-latency emulate                                  # in-process forwarder, inproc ring\n  \
qfwd-latency emulate --target 127.0.0.1:9000          # a running `qfwd run`\n  \
qfwd-latency emulate --target 127.0.0.1:9000 --mode open-loop --rate 100000 --samples 1000000\n  \
qfwd-latency emulate --transport udp --payload-bytes 1024 --csv one.csv\n  \
qfwd-latency emulate --decoder uf --dem tests/fixtures/surface_d5_r5_z_p001.dem \\\n      \
--dets tests/fixtures/surface_d5_r5_z_p001.b8          # replay recorded rounds")]
    Emulate(EmulateArgs),
    /// Run every point of a scenario file; one CSV row + .hgrm per point.
    Sweep(sweep::SweepArgs),
    /// Compare summary CSVs side by side; optionally draw SVG plots.
    Report(report::ReportArgs),
    /// Plot reaction p99 against the number of streams from stream sweeps' CSVs.
    ///
    /// Several CSVs (one per engine or host) go into one figure: one panel per round
    /// cadence, one colour and marker per configuration (host, engine, distance, window),
    /// the same in every panel; then their table is printed.
    #[command(after_help = "Examples:\n  \
qfwd-latency stream-plot results/h200-streams.csv --svg streams.svg\n  \
qfwd-latency stream-plot results/h200-streams.csv results/cpu-streams-d5.csv --svg streams.svg")]
    StreamPlot {
        /// Stream summary CSVs (written by `sweep` on a stream scenario).
        #[arg(required = true)]
        csvs: Vec<PathBuf>,
        /// The SVG to write.
        #[arg(long, value_name = "FILE")]
        svg: PathBuf,
    },
}

#[derive(Args)]
struct EmulateArgs {
    /// Forwarder already running at this UDP address (otherwise one is started in-process).
    #[arg(long, value_name = "ADDR")]
    target: Option<SocketAddr>,
    /// Transport to the in-process forwarder (ignored with --target).
    #[arg(long, default_value = "inproc")]
    transport: TransportKind,
    /// Topology of the in-process forwarder.
    #[arg(long, default_value = "cpu")]
    topology: Topology,
    /// ping-pong (one request in flight) or open-loop (fixed rate).
    #[arg(long, default_value = "ping-pong")]
    mode: Mode,
    /// Offered rate for open loop, requests/s, 1 ..= 100000000.
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// Argument bytes per request (after the 24-byte header), 0 ..= 65000.
    #[arg(long, default_value_t = 32)]
    payload_bytes: u32,
    /// Timed requests, 1 ..= 2147483647.
    #[arg(long, default_value_t = 100_000)]
    samples: u64,
    /// Untimed requests sent first, 0 ..= 2147483647.
    #[arg(long, default_value_t = 1_000)]
    warmup: u64,
    /// A request unanswered after this many ms is lost, 1 ..= 60000.
    #[arg(long, default_value_t = 1_000)]
    timeout_ms: u64,
    /// Handler name the requests call.
    #[arg(long, default_value = "parity")]
    handler: String,
    /// Core for the emulator thread.
    #[arg(long)]
    emulator_core: Option<usize>,
    /// Cores for the in-process forwarder (first = polling thread).
    #[arg(long, value_delimiter = ',')]
    forwarder_cores: Vec<usize>,
    /// Yield instead of spinning while idle (both sides): for machines short of cores.
    #[arg(long)]
    yield_when_idle: bool,
    /// Replay recorded shots instead of random parity payloads: the decoder (uf, matching
    /// or lut; matching on topology cpu only) the forwarder serves, built from --dem; every
    /// correction is checked against the CPU reference decoder.
    #[arg(long, value_name = "uf|matching|lut", requires_all = ["dem", "dets"])]
    decoder: Option<String>,
    /// Stim detector error model for --decoder.
    #[arg(long, value_name = "FILE")]
    dem: Option<PathBuf>,
    /// Detection events to replay (Stim b8, or 01), one request per shot.
    #[arg(long, value_name = "FILE")]
    dets: Option<PathBuf>,
    /// Mix in this many hostile datagrams per 100 requests, 0 ..= 50 (truncated, bad
    /// magic, wrong lengths, unknown functions, arguments a decoder refuses); each must be
    /// dropped or answered as its kind expects.
    #[arg(long, default_value_t = 0.0, value_name = "PERCENT")]
    hostile_percent: f64,
    /// Append the result as a summary CSV row (new file) here.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
}

fn emulate(a: EmulateArgs) -> Result<()> {
    let idle = if a.yield_when_idle {
        IdlePolicy::Yield
    } else {
        IdlePolicy::Spin
    };
    let point = Point {
        launch: if a.target.is_some() {
            Launch::External
        } else {
            Launch::InProcess
        },
        target: a.target,
        transport: if a.target.is_some() {
            TransportKind::Udp
        } else {
            a.transport
        },
        topology: a.topology,
        mode: a.mode,
        rate_hz: a.rate,
        payload_bytes: a.payload_bytes,
        samples: a.samples,
        warmup: a.warmup,
        timeout_ms: a.timeout_ms,
        handler: a.handler,
        emulator_core: a.emulator_core,
        cores: a.forwarder_cores,
        decoder: a.decoder.unwrap_or_else(|| "-".into()),
        dem: a.dem,
        dets: a.dets,
        idle,
        emulator_idle: idle,
        hostile_percent: a.hostile_percent,
        ..Point::defaults()
    };
    point
        .validate()
        .map_err(|e| qfwd_latency::Error::Emulator {
            target: a
                .target
                .map(|t| t.to_string())
                .unwrap_or_else(|| "in-process".into()),
            detail: e,
        })?;
    let prov = Provenance::detect();
    let total = point.warmup + point.timed_samples();
    let bar = indicatif::ProgressBar::new(total);
    let mut m = sweep::measure(&point, "emulate", &provenance::run_id(), &prov, |n| {
        bar.set_position(n)
    })?;
    bar.finish_and_clear();
    println!(
        "{} {} {} payload {} B{}",
        m.row.transport,
        m.row.topology,
        m.row.mode,
        m.row.payload_bytes,
        if m.row.offered_rate_hz > 0 {
            format!(" at {} req/s", m.row.offered_rate_hz)
        } else {
            String::new()
        }
    );
    print!("{}", emulator::percentile_table(&m.outcome.histogram));
    println!("{}", sweep::accounting_line(&m));
    if let Some(csv) = a.csv {
        let mut sink = CsvSink::create(&csv)?;
        sweep::record(&mut m, 0, 0, &csv, &mut sink)?;
        println!("wrote {}", csv.display());
    }
    // A script (or CI) running `emulate` learns from the exit status that the forwarder
    // lost requests or answered them wrongly; error statuses are answers, listed above.
    let o = &m.outcome;
    let bad = o.lost + o.wrong + o.duplicate + o.malformed + o.hostile.unexpected;
    if bad > 0 {
        return Err(qfwd_latency::Error::Emulator {
            target: m.row.transport.clone(),
            detail: format!(
                "{} of {} requests lost, {} answered wrongly, {} duplicate and {} malformed \
                 answers, {} unexpected answers to hostile datagrams",
                o.lost, o.sent, o.wrong, o.duplicate, o.malformed, o.hostile.unexpected
            ),
        });
    }
    Ok(())
}

fn stream_plot(csvs: &[PathBuf], svg: &std::path::Path) -> Result<()> {
    let mut sources = Vec::new();
    let mut rows = Vec::new();
    for c in csvs {
        let these = qfwd_latency::streams::record::read(c)?;
        let name = c.file_stem().map_or_else(
            || c.display().to_string(),
            |s| s.to_string_lossy().into_owned(),
        );
        rows.extend(these.iter().cloned());
        sources.push((name, these));
    }
    qfwd_latency::streams::plot::reaction_vs_streams_of(&sources, svg)?;
    print!("{}", qfwd_latency::streams::sweep::table(&rows));
    eprintln!("wrote {}", svg.display());
    Ok(())
}

fn main() -> ExitCode {
    if let Err(e) = qfwd::process::end_quietly_on_closed_pipe() {
        eprintln!("qfwd-latency: warning: {e} (a closed stdout will end this with an error)");
    }
    let cli = Cli::parse();
    qfwd::logging::init("");
    let result = match cli.command {
        None => quickstart::run(&quickstart::default_out(), false),
        Some(Cmd::Quickstart { out, force }) => quickstart::run(&out, force),
        Some(Cmd::Emulate(a)) => emulate(a),
        Some(Cmd::Sweep(a)) => sweep::run(&a).map(|_| ()),
        Some(Cmd::Report(a)) => report::run(&a),
        Some(Cmd::StreamPlot { csvs, svg }) => stream_plot(&csvs, &svg),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("qfwd-latency: error: {e}");
            ExitCode::FAILURE
        }
    }
}
