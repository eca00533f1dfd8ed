//! The `qfwd` command line.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use qfwd::backend::Topology;
use qfwd::config::RunConfig;
use qfwd::forward::IdlePolicy;
use qfwd::mailbox::RxCompletion;
use qfwd::mlx5::Doorbell;
use qfwd::transport::TransportKind;

#[derive(Parser)]
#[command(
    name = "qfwd",
    version,
    about = "Forward QEC syndrome requests (CUDA-Q Realtime RPC) to decoders and answer in microseconds",
    long_about = "qfwd receives CUQR requests from a QPU controller, runs the handler their \
function_id names (FNV-1a of the handler name), and answers each with a CUQS response.\n\n\
Every request whose header parses gets exactly one response: a result, or an error status. \
Datagrams that are not requests are dropped and counted. On exit qfwd prints counters that \
add up: received = answered ok + answered with error + dropped."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve requests until the duration ends or Ctrl-C / SIGTERM / SIGHUP (each drains:
    /// requests in flight are answered, then the counters are printed).
    #[command(after_help = "Examples:\n  \
qfwd run --transport udp --listen 127.0.0.1:9000 --duration 60\n  \
qfwd run --listen 0.0.0.0:9000 --allow 10.0.0.7 --cores 2 --stats-interval 5\n  \
qfwd run --config lab.toml --duration 600\n  \
qfwd run --topology gpu-persistent --pollers 8 --rx-completion inline --cores 2\n  \
qfwd run --decoder uf --dem tests/fixtures/surface_d5_r5_z_p001.dem --name decode\n  \
qfwd run --topology gpu-persistent --gpus 0,1 --handler parity:patch0 --handler parity:patch1 \\\n    \
--route patch0=0 --route patch1=1\n  \
qfwd run --streams 50 --dem tests/fixtures/stream/surface_d5_r100_z_p001.dem --window 10 --commit 5\n\n\
Then point a QPU controller (or `qfwd-latency emulate --target 127.0.0.1:9000`) at it.")]
    Run(Box<RunArgs>),
    /// Check this host: lab tuning (isolated cores, CPU governor, C-states, transparent huge
    /// pages, memlock limit, NIC interrupt affinity, GPU persistence mode and clocks; each
    /// pass / warn / fail with the fix), GPUs, RDMA devices, ports, GIDs, link state, usable
    /// doorbell modes; with --jitter, how much time each core loses to interruptions.
    /// Exits 1 when a check fails.
    #[command(after_help = "Examples:\n  \
qfwd doctor\n  \
qfwd doctor --cores 2,3 --format json > host.json\n  \
qfwd doctor --no-gpu --jitter 5")]
    Doctor(qfwd::doctor::DoctorArgs),
    /// Decode Stim shots offline: predict the observable flips (like `pymatching predict`),
    /// or count logical errors against recorded ones (like `pymatching count_mistakes`).
    Decode(qfwd::decode_cli::DecodeArgs),
}

/// `qfwd run --stats-format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum StatsFormat {
    Text,
    Json,
}

#[derive(Args)]
struct RunArgs {
    /// TOML file with the same keys as the flags (flags override it).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// QPU-facing transport: udp, softnic (udp through the soft NIC, responses posted
    /// with --doorbell), or rdma (RoCEv2 through a ConnectX; a build with the rdma
    /// feature); the in-process ring is for the latency harness.
    #[arg(long)]
    transport: Option<TransportKind>,
    /// Address to listen on [default: 127.0.0.1:9000].
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Accept requests only from this peer (IP or IP:port); repeat for more. An IPv4
    /// entry also matches the peer as a dual-stack socket sees it (::ffff:IP). Without
    /// any, every peer is accepted, which beyond loopback needs --allow-any.
    #[arg(long, value_name = "PEER")]
    allow: Vec<String>,
    /// Listen on a non-loopback address (0.0.0.0, [::], a NIC's address) with no
    /// allowlist: every host that can reach it may send requests. Warned about at start.
    #[arg(long, conflicts_with = "allow")]
    allow_any: bool,
    /// Handler to serve, by name (function_id = FNV-1a of the name), or KIND:NAME to serve
    /// a handler under another name (parity:patch0); repeat for more [default: parity].
    #[arg(long = "handler", value_name = "NAME|KIND:NAME")]
    handlers: Vec<String>,
    /// Where requests are computed: cpu, gpu-launch, gpu-graph, gpu-persistent.
    #[arg(long)]
    topology: Option<Topology>,
    /// CPU cores to pin to (comma-separated, each 0 ..= 1023): the forwarding loop, then
    /// the soft NIC thread and the cpu-assisted proxy (transport softnic).
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    cores: Vec<usize>,
    /// Seconds to serve, then exit, 0.001 ..= 31536000 (a year) [default: until Ctrl-C,
    /// SIGTERM or SIGHUP].
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Seconds between live status lines on stderr, 0.1 ..= 86400; 0 turns them off
    /// [default: 1].
    #[arg(long, value_name = "SECONDS")]
    stats_interval: Option<f64>,
    /// How the live intervals and the final summary are written: `text` (lines on stderr)
    /// or `json` (on stdout, one JSON object per line: `"kind": "interval"` every
    /// --stats-interval, then one `"kind": "summary"`; the text summary still goes to
    /// stderr).
    #[arg(long, value_enum, default_value_t = StatsFormat::Text, value_name = "FORMAT")]
    stats_format: StatsFormat,
    /// Largest request argument accepted, in bytes, 1 ..= 65000; larger gets status -5
    /// (oversized). A --decoder model whose requests are larger is refused at start
    /// [default: 4096].
    #[arg(long, value_name = "BYTES")]
    max_request_bytes: Option<usize>,
    /// Most datagrams received per poll, 1 ..= 1024 [default: 32].
    #[arg(long)]
    batch: Option<usize>,
    /// Most requests in flight toward the decoder, 1 ..= 65536; more get status -6
    /// (overload) [default: 1024].
    #[arg(long)]
    max_in_flight: Option<usize>,
    /// Per-request deadline in microseconds, 1 ..= 60000000; past it the answer is status
    /// -7 (decoder timeout) [default: 10000].
    #[arg(long, value_name = "MICROSECONDS")]
    watchdog_us: Option<u64>,
    /// A request that waited longer than this many microseconds between reaching the host
    /// and being read (kernel receive timestamp; soft NIC CQE timestamp) is answered with
    /// status -6 (overload) at once instead of being computed, 1 ..= 60000000; 0 turns it
    /// off [default: 10000]. What the kernel drops (socket buffer full) is counted as
    /// socket_overflow.
    #[arg(long, value_name = "MICROSECONDS")]
    queue_deadline_us: Option<u64>,
    /// When idle: spin (lowest latency, one core at 100%) or yield.
    #[arg(long)]
    idle: Option<IdlePolicy>,
    /// GPU topologies: CUDA device index, 0 ..= 255 [default: 0].
    #[arg(long = "gpu", value_name = "INDEX")]
    gpu_device: Option<usize>,
    /// Several GPUs (comma-separated CUDA indices): one backend per GPU (gpu-persistent:
    /// its own kernel and mailbox rings), requests routed by function; overrides --gpu.
    /// With --topology cpu the entries label host shards (no GPU needed).
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    gpus: Vec<usize>,
    /// With --gpus: serve function NAME on GPU INDEX; repeat for more. Functions not
    /// named are dealt round-robin over --gpus in registration order.
    #[arg(long = "route", value_name = "NAME=GPU", value_parser = qfwd::config::parse_route)]
    routes: Vec<(String, usize)>,
    /// gpu-persistent: inline (sequence tag in every 16 B chunk: one PCIe read) or buffer
    /// (flag, then payload) [default: inline].
    #[arg(long)]
    rx_completion: Option<RxCompletion>,
    /// gpu-persistent: poller warps, 1-32 [default: 8].
    #[arg(long)]
    pollers: Option<u32>,
    /// gpu-persistent: warps polling each slot out of phase, 1 ..= 32; must divide
    /// --pollers [default: min(2, pollers)].
    #[arg(long)]
    pollers_per_slot: Option<u32>,
    /// GPU uf decoder: answer syndromes of at most N defects (0 ..= 16) from a table that
    /// the CPU uf fills at start-up (same answers, one memory load); 0 turns it off [default: the
    /// largest N, at most 4, whose table fits the build budget of ~10 s of work per core,
    /// logged at start; a d=7 surface code gets 4 on 13 cores and more, 16-21 s to build on
    /// 16, where 3 starts in about a second]. A table that took a second or more is kept in
    /// ~/.cache/qfwd/uf-tables for the next start (QFWD_UF_TABLE_CACHE=DIR elsewhere, =off
    /// not at all).
    #[arg(long, value_name = "N")]
    uf_table_max_defects: Option<u32>,
    /// GPU uf with the table: try the split path (independent groups of at most K defects,
    /// each a table entry) only for requests of at most N defects, 0 ..= 32 [default: where
    /// it answers at least half the shots drawn from the model, logged at start].
    #[arg(long, value_name = "N")]
    uf_split_max_defects: Option<u32>,
    /// GPU topologies: request slots, i.e. requests on the GPU at once, 1 ..= 4096
    /// [default: 64].
    #[arg(long)]
    slots: Option<usize>,
    /// softnic transport: cpu-assisted, regular or blueflame [default: blueflame].
    #[arg(long)]
    doorbell: Option<Doorbell>,
    /// cpu-forwarded (a CPU thread receives every request and sends every answer) or
    /// gpu-direct (the device side polls the NIC's receive queues and rings the NIC itself;
    /// needs --transport softnic, and --topology gpu-persistent or cpu for the CPU
    /// stand-in; or --transport rdma with --topology gpu-persistent: the kernel on a
    /// ConnectX, built with the rdma feature, docs/lab-gpu-direct.md) [default:
    /// cpu-forwarded].
    #[arg(long)]
    data_path: Option<qfwd::direct::DataPath>,
    /// gpu-direct: QPU links, one receive queue each; link i listens on --listen's port + i
    /// (rdma: the i-th QPU side to connect to --listen's control plane) [default: 1].
    #[arg(long)]
    links: Option<u32>,
    /// gpu-direct over rdma: where the receive buffers go: auto (GPU memory through
    /// dma-buf or nvidia_peermem, else pinned host memory), gpu, or host [default: auto].
    #[arg(long, value_name = "auto|gpu|host")]
    rx_memory: Option<qfwd::direct::RxMemory>,
    /// Also serve a QEC decoder: uf (union-find), matching (exact minimum-weight matching,
    /// topology cpu only) or lut (lookup table, <= 24 detectors).
    /// Payload: bit-packed detection events + u32 event count; result: observable flips.
    #[arg(long, value_name = "uf|matching|lut")]
    decoder: Option<String>,
    /// Stim detector error model for --decoder (flattened, decompose_errors=True).
    #[arg(long, value_name = "FILE")]
    dem: Option<PathBuf>,
    /// The decoder's request budget: a request with more than N defects (detection
    /// events) is answered status 2 (over_budget) without decoding, so no syndrome costs
    /// more than a few typical ones; 0 turns it off, N is at most the model's detectors
    /// [default: 6 x the defects a shot has on average at the model's noise, + 24].
    /// docs/decoder-budget.md.
    #[arg(long, value_name = "N")]
    decoder_max_defects: Option<u32>,
    /// Name the decoder answers to; function_id = FNV-1a of it; repeat to serve the one
    /// model under several names (one per patch) [default: decode].
    #[arg(long, value_name = "NAME")]
    name: Vec<String>,
    /// End (draining, as on SIGTERM) when process PID, the parent that started this
    /// qfwd, ends, even by SIGKILL: a parent-death signal, and a check every 20 ms. For
    /// harnesses and scripts; qfwd-latency passes it to the forwarders it starts.
    #[arg(long, value_name = "PID")]
    exit_with_parent: Option<u32>,
    /// Serve N streams (logical qubits, decoder_id 0..N) instead of single shots: the
    /// stream.* functions (docs/streaming-protocol.md), a sliding-window decoder per stream
    /// built from --dem (a Stim model of a long memory experiment), on a pool of decoder
    /// threads (the first --cores entry runs the dispatcher, the next ones the decoders).
    #[arg(long, value_name = "N")]
    streams: Option<u32>,
    /// With --streams: rounds per window, W [default: 10; about 2 x distance suffices].
    #[arg(long, value_name = "W", requires = "streams")]
    window: Option<u32>,
    /// With --streams: rounds each window commits, C < W [default: 5, about the distance].
    #[arg(long, value_name = "C", requires = "streams")]
    commit: Option<u32>,
    /// With --streams: decoder threads [default: one per core but the dispatcher's].
    #[arg(long, value_name = "K", requires = "streams")]
    stream_workers: Option<usize>,
    /// With --streams: requests each decoder thread's queue holds; beyond, rounds are
    /// refused with stream_buffer_full [default: 256].
    #[arg(long, value_name = "N", requires = "streams")]
    stream_queue_slots: Option<usize>,
    /// With --streams: what decodes. cpu: the pool of decoder threads; gpu: every stream's
    /// state on the GPU in a persistent kernel, all streams' rounds handed over in batches
    /// (one submission each, two in flight), the rounds crossing a CPU dispatcher thread
    /// and a batching thread; gpu-launch: the same with a kernel launch per batch (the
    /// baseline);
    /// cpu-batched: the gpu engine's threads with a CPU decoder [default: cpu].
    #[arg(long, value_name = "ENGINE", requires = "streams")]
    stream_engine: Option<qfwd::stream::StreamEngine>,
}

impl RunArgs {
    fn into_config(mut self) -> qfwd::Result<RunConfig> {
        let mut c = match &self.config {
            Some(p) => RunConfig::from_file(p)?,
            None => RunConfig::default(),
        };
        self.apply_service(&mut c);
        self.apply_limits(&mut c);
        self.apply_gpu(&mut c);
        self.apply_decoders(&mut c);
        c.validate()?;
        Ok(c)
    }

    /// The flags over the transport, who may send, the handlers, cores and run time.
    fn apply_service(&mut self, c: &mut RunConfig) {
        if let Some(v) = self.transport.take() {
            c.transport = v;
        }
        if let Some(v) = self.listen.take() {
            c.listen = v;
        }
        if !self.allow.is_empty() {
            c.allow = std::mem::take(&mut self.allow);
        }
        if self.allow_any {
            c.allow_any = true;
        }
        if !self.handlers.is_empty() {
            c.handlers = std::mem::take(&mut self.handlers);
        }
        if let Some(v) = self.topology.take() {
            c.topology = v;
        }
        if !self.cores.is_empty() {
            c.cores = std::mem::take(&mut self.cores);
        }
        if self.duration.is_some() {
            c.duration_s = self.duration.take();
        }
        if let Some(v) = self.stats_interval.take() {
            c.stats_interval_s = v;
        }
    }

    /// The flags over request limits, batching, deadlines and idling.
    fn apply_limits(&mut self, c: &mut RunConfig) {
        if let Some(v) = self.max_request_bytes.take() {
            c.max_request_bytes = v;
        }
        if let Some(v) = self.batch.take() {
            c.batch = v;
        }
        if let Some(v) = self.max_in_flight.take() {
            c.max_in_flight = v;
        }
        if let Some(v) = self.watchdog_us.take() {
            c.watchdog_us = v;
        }
        if let Some(v) = self.queue_deadline_us.take() {
            c.queue_deadline_us = v;
        }
        if let Some(v) = self.idle.take() {
            c.idle = v;
        }
    }

    /// The flags over the GPUs, routes, mailbox pollers and NIC queues.
    fn apply_gpu(&mut self, c: &mut RunConfig) {
        if let Some(v) = self.gpu_device.take() {
            c.gpu_device = v;
        }
        if !self.gpus.is_empty() {
            c.gpus = std::mem::take(&mut self.gpus);
        }
        if !self.routes.is_empty() {
            c.route = std::mem::take(&mut self.routes).into_iter().collect();
        }
        if let Some(v) = self.rx_completion.take() {
            c.rx_completion = v;
        }
        if let Some(v) = self.pollers.take() {
            c.pollers = v;
        }
        if self.pollers_per_slot.is_some() {
            c.pollers_per_slot = self.pollers_per_slot.take();
        }
        if self.uf_table_max_defects.is_some() {
            c.uf_table_max_defects = self.uf_table_max_defects.take();
        }
        if self.uf_split_max_defects.is_some() {
            c.uf_split_max_defects = self.uf_split_max_defects.take();
        }
        if let Some(v) = self.slots.take() {
            c.slots = v;
        }
        if let Some(v) = self.doorbell.take() {
            c.doorbell = v;
        }
        if let Some(v) = self.data_path.take() {
            c.data_path = v;
        }
        if let Some(v) = self.links.take() {
            c.links = v;
        }
        if let Some(v) = self.rx_memory.take() {
            c.rx_memory = v;
        }
    }

    /// The flags over the decoders, their model and the streams.
    fn apply_decoders(&mut self, c: &mut RunConfig) {
        if self.decoder.is_some() {
            c.decoder = self.decoder.take();
        }
        if self.dem.is_some() {
            c.dem = self.dem.take();
        }
        if let Some(n) = self.streams.take() {
            let mut st = c.streams.take().unwrap_or_default();
            st.streams = n;
            if let Some(v) = self.window.take() {
                st.window = v;
            }
            if let Some(v) = self.commit.take() {
                st.commit = v;
            }
            if let Some(v) = self.stream_workers.take() {
                st.workers = v;
            }
            if let Some(v) = self.stream_queue_slots.take() {
                st.queue_slots = v;
            }
            if let Some(v) = self.stream_engine.take() {
                st.engine = v;
            }
            c.streams = Some(st);
        }
        if self.decoder_max_defects.is_some() {
            c.decoder_max_defects = self.decoder_max_defects.take();
        }
        match self.name.len() {
            0 => {}
            1 => {
                c.decoder_name = self.name[0].clone();
                c.decoder_names.clear();
            }
            _ => c.decoder_names = std::mem::take(&mut self.name),
        }
    }
}

fn run(args: RunArgs) -> qfwd::Result<()> {
    let format = args.stats_format;
    let parent = args.exit_with_parent;
    let config = args.into_config()?;
    // Before anything starts, so that a signal during the start (a GPU start compiles
    // kernels for seconds) or right after the start-up line still drains. SIGHUP (the
    // terminal closed, or a service manager's reload) drains too.
    let signalled = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, signalled.clone()).map_err(qfwd::Error::Signal)?;
    }
    let parent = parent.map(qfwd::process::ParentWatch::start).transpose()?;
    if config.streams.is_some() {
        return run_streams(&config, &signalled, parent);
    }
    let mut running = qfwd::serve::start(&config, qfwd::serve::Wiring::Network)?;
    eprintln!("qfwd: {}", running.description());
    if let Some(w) = config.exposure_warning() {
        eprintln!("qfwd: warning: {w}");
    }
    // The service ends itself at the duration; this thread prints its reports and waits.
    while !running.is_finished() && !signalled.load(Ordering::Relaxed) {
        for interval in running.poll(Instant::now()) {
            report(format, &interval)?;
        }
        if let Some(p) = parent.filter(|p| p.parent_gone()) {
            eprintln!(
                "qfwd: process {} (--exit-with-parent) has ended; stopping",
                p.parent()
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    running.stop();
    let intervals = running.poll(Instant::now());
    let done = running.join()?;
    for interval in &intervals {
        report(format, interval)?;
    }
    eprintln!("qfwd: stopped.\n{}", done.stats);
    if let Some(direct) = &done.direct {
        print_links(direct);
    }
    if format == StatsFormat::Json {
        json_line(&done.stats.summary())?;
    }
    Ok(())
}

/// `gpu-direct`: what each link's device side and NIC counted.
fn print_links(report: &qfwd::direct::DirectReport) {
    for (i, c) in report.per_link.iter().enumerate() {
        // A ConnectX's links have no soft NIC counters.
        let nic = report.nics.get(i);
        eprintln!(
            "  link {i}: received {}{}, posted {}, torn reads {}, lost claims {}",
            c.get(qfwd::abi::CTR_RECEIVED),
            nic.map(|n| format!(" (NIC delivered {})", n.rx_messages))
                .unwrap_or_default(),
            c.get(qfwd::abi::CTR_POSTED),
            c.get(qfwd::abi::CTR_TORN),
            c.get(qfwd::abi::CTR_LOST_CLAIMS)
        );
    }
    if report.undrained > 0 || report.stalls > 0 {
        eprintln!(
            "qfwd: {} request(s) delivered but not taken at stop; heartbeat stalls {}",
            report.undrained, report.stalls
        );
    }
}

/// Writes one live interval: its status line on stderr, or one JSON line on stdout.
fn report(format: StatsFormat, interval: &qfwd::stats::Interval) -> qfwd::Result<()> {
    match format {
        StatsFormat::Text => {
            eprintln!("{interval}");
            Ok(())
        }
        StatsFormat::Json => json_line(interval),
    }
}

/// `value` as one line of JSON on stdout.
fn json_line(value: &impl serde::Serialize) -> qfwd::Result<()> {
    let line = serde_json::to_string(value).map_err(|e| qfwd::Error::Io {
        what: "writing a JSON report".to_string(),
        source: std::io::Error::other(e),
    })?;
    println!("{line}");
    Ok(())
}

/// `qfwd run --streams N`: the stream service until the duration ends or a signal.
fn run_streams(
    config: &RunConfig,
    signalled: &AtomicBool,
    parent: Option<qfwd::process::ParentWatch>,
) -> qfwd::Result<()> {
    let running = qfwd::serve::start_streams(config)?;
    eprintln!("qfwd: serving {}", running.description());
    let until = config.duration().map(|d| std::time::Instant::now() + d);
    while !running.is_finished() && !signalled.load(Ordering::Relaxed) {
        if until.is_some_and(|t| std::time::Instant::now() >= t) {
            break;
        }
        if parent.is_some_and(|p| p.parent_gone()) {
            eprintln!("qfwd: the parent process ended; draining");
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    running.stop();
    let stats = running.join()?;
    eprintln!("qfwd: stopped.\n{stats}");
    Ok(())
}

fn main() -> ExitCode {
    if let Err(e) = qfwd::process::end_quietly_on_closed_pipe() {
        eprintln!("qfwd: warning: {e} (a closed stdout will end this with an error)");
    }
    let cli = Cli::parse();
    qfwd::logging::init("qfwd: ");
    let result = match cli.command {
        Command::Run(a) => run(*a),
        Command::Doctor(a) => qfwd::doctor::run(&a),
        Command::Decode(a) => qfwd::decode_cli::run(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("qfwd: error: {e}");
            ExitCode::FAILURE
        }
    }
}
