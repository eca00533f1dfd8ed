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
    about = "Serve quantum error correction decoders to a QPU controller over the network, \
answering each round's syndromes in microseconds",
    long_about = "Serve quantum error correction decoders to a QPU controller over the network, \
answering each round's syndromes in microseconds.\n\n\
A QPU controller sends the syndromes of each decoding round (its measurement results) as a \
request over UDP or RDMA; qfwd decodes them on a CPU core or on a GPU and sends the \
correction back. Every request gets exactly one answer: a result, or an error saying why. On \
exit qfwd prints counters that add up: received = answered ok + answered with error + \
dropped.\n\n\
Decoder researchers without a QPU: `qfwd decode` decodes Stim shots offline, and \
`qfwd-latency` (built beside qfwd) runs the quick start, a forwarder and a QPU emulator in \
one process, no GPU or NIC needed.\n\n\
The requests follow CUDA-Q Realtime's RPC protocol (docs/protocol.md).",
    after_help = "Examples:\n  \
qfwd run --listen 127.0.0.1:9000            # serve until Ctrl-C\n  \
qfwd run --decoder uf --dem tests/fixtures/surface_d5_r5_z_p001.dem\n  \
qfwd doctor                                 # what this host can do, what to tune\n  \
qfwd-latency emulate --target 127.0.0.1:9000   # play the QPU controller against it\n\n\
`qfwd COMMAND --help` explains a command; `-h` gives its short summary."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve requests from a QPU controller until the duration ends or Ctrl-C.
    ///
    /// Serves until the duration ends or Ctrl-C / SIGTERM / SIGHUP; each drains: requests
    /// in flight are answered, then the counters are printed. The common flags come first;
    /// the rest are grouped by what they tune (`-h` leaves the finer tuning out). Every
    /// flag can also be a key of the --config file.
    #[command(
        after_help = "Examples (each runs on a laptop without a GPU unless marked):\n  \
qfwd run --listen 127.0.0.1:9000 --duration 60\n  \
qfwd run --decoder uf --dem tests/fixtures/surface_d5_r5_z_p001.dem --cores 1\n  \
qfwd run --config examples/lab.toml --listen 127.0.0.1:9000 --allow 127.0.0.1\n  \
qfwd run --listen 0.0.0.0:9000 --allow 10.0.0.7 --cores 1 --stats-interval 5\n  \
qfwd run --streams 50 --dem tests/fixtures/stream/surface_d5_r100_z_p001.dem --window 10 --commit 5\n  \
qfwd run --topology gpu-persistent --pollers 8 --cores 1          # needs a GPU\n  \
qfwd run --topology gpu-persistent --gpus 0,1 --handler parity:patch0 --handler parity:patch1 \\\n    \
--route patch0=0 --route patch1=1                                # needs two GPUs\n\n\
Then point a QPU controller (or `qfwd-latency emulate --target 127.0.0.1:9000`) at it. \
Every flag, its range and its default: docs/operations.md."
    )]
    Run(Box<RunArgs>),
    /// Check this host: what it can run, and the lab tuning it lacks.
    ///
    /// Lab tuning (isolated cores, CPU governor, C-states, transparent huge pages, memlock
    /// limit, NIC interrupt affinity, GPU persistence mode and clocks), each pass / warn /
    /// fail with the fix; then GPUs, RDMA devices, ports, GIDs, link state and usable
    /// doorbell modes; with --jitter, how much time each core loses to interruptions.
    /// Exits 1 when a check fails.
    #[command(after_help = "Examples:\n  \
qfwd doctor\n  \
qfwd doctor --cores 1 --format json > host.json\n  \
qfwd doctor --no-gpu --jitter 5")]
    Doctor(qfwd::doctor::DoctorArgs),
    /// Decode Stim shots offline: `predict` and `count_mistakes` take PyMatching's command
    /// lines and give its output byte for byte; without a subcommand, the report (mistakes,
    /// logical error rate, time per shot).
    Decode(qfwd::decode_cli::DecodeCli),
}

/// `qfwd run --stats-format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum StatsFormat {
    Text,
    Json,
}

/// Headings of `qfwd run --help`; the common flags have none, so they come first.
const OUTPUT: &str = "Output and scripts";
const LIMITS: &str = "Limits and overload";
const GPU: &str = "GPU";
const NIC: &str = "NIC and data path";
const DECODER: &str = "Decoder";
const STREAMS: &str = "Streams (many logical qubits)";

#[derive(Args)]
struct RunArgs {
    /// TOML file with the same keys as the flags (flags override it).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// QPU-facing transport: udp, softnic or rdma [default: udp].
    ///
    /// udp; softnic (udp through qfwd's model of an mlx5 NIC, responses posted with
    /// --doorbell); or rdma (RoCEv2 through a ConnectX; a build with the rdma feature). The
    /// in-process ring (inproc) is for the latency harness.
    #[arg(long)]
    transport: Option<TransportKind>,
    /// Address to listen on [default: 127.0.0.1:9000].
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Accept requests only from this peer (IP or IP:port); repeat for more.
    ///
    /// An IPv4 entry also matches the peer as a dual-stack socket sees it (::ffff:IP).
    /// Without any, every peer is accepted, which beyond loopback needs --allow-any.
    #[arg(long, value_name = "PEER")]
    allow: Vec<String>,
    /// Listen beyond loopback with no allowlist (warned about at start).
    ///
    /// For a non-loopback address (0.0.0.0, [::], a NIC's address) with no --allow: every
    /// host that can reach it may send requests.
    #[arg(long, conflicts_with = "allow")]
    allow_any: bool,
    /// Handler to serve: NAME, or KIND:NAME; repeat for more [default: parity].
    ///
    /// A handler by name (its function_id is the FNV-1a hash of the name), or KIND:NAME to
    /// serve a handler under another name (parity:patch0).
    #[arg(long = "handler", value_name = "NAME|KIND:NAME")]
    handlers: Vec<String>,
    /// Where requests are computed: cpu, gpu-persistent, gpu-launch, gpu-graph [default: cpu].
    ///
    /// cpu: on the forwarding thread. gpu-persistent: a persistent kernel polls request
    /// slots in mapped host memory. gpu-launch and gpu-graph: a kernel launch (or graph) per
    /// request, the baselines. The gpu topologies need a GPU.
    #[arg(long)]
    topology: Option<Topology>,
    /// CPU cores to pin to, comma-separated (core 0 is the first) [default: none].
    ///
    /// Each 0 ..= 1023 and present on this host: the forwarding loop, then the soft NIC
    /// thread and the cpu-assisted proxy (transport softnic). `qfwd doctor --jitter 5`
    /// ranks the cores, quietest first.
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    cores: Vec<usize>,
    /// Seconds to serve, then exit [default: until Ctrl-C, SIGTERM or SIGHUP].
    ///
    /// 0.001 ..= 31536000 (a year).
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Seconds between live status lines; 0 turns them off [default: 1].
    ///
    /// 0.1 ..= 86400. Each line: requests, answers, errors, drops, rate, service p50/p99.
    #[arg(long, value_name = "SECONDS", help_heading = OUTPUT)]
    stats_interval: Option<f64>,
    /// Live intervals and summary as `text` (stderr) or `json` (stdout).
    ///
    /// json: one JSON object per line on stdout, `"kind": "interval"` every
    /// --stats-interval, then one `"kind": "summary"`; the text summary still goes to
    /// stderr.
    #[arg(
        long,
        value_enum,
        default_value_t = StatsFormat::Text,
        value_name = "FORMAT",
        help_heading = OUTPUT,
    )]
    stats_format: StatsFormat,
    /// Largest request argument accepted, in bytes [default: 4096].
    ///
    /// 1 ..= 65000; larger gets status -5 (oversized). A --decoder model whose requests are
    /// larger is refused at start.
    #[arg(long, value_name = "BYTES", help_heading = LIMITS, hide_short_help = true)]
    max_request_bytes: Option<usize>,
    /// Most datagrams received per poll, 1 ..= 1024 [default: 32].
    #[arg(long, help_heading = LIMITS, hide_short_help = true)]
    batch: Option<usize>,
    /// Most requests in flight toward the decoder [default: 1024].
    ///
    /// 1 ..= 65536; more get status -6 (overload).
    #[arg(long, help_heading = LIMITS, hide_short_help = true)]
    max_in_flight: Option<usize>,
    /// Per-request deadline in µs; past it, status -7 [default: 10000].
    ///
    /// 1 ..= 60000000; past it the answer is status -7 (decoder timeout).
    #[arg(long, value_name = "MICROSECONDS", help_heading = LIMITS, hide_short_help = true)]
    watchdog_us: Option<u64>,
    /// Answer -6 (overload) to a request that queued longer than this, in µs [default: 10000].
    ///
    /// A request that waited longer than this many microseconds between reaching the host
    /// and being read (kernel receive timestamp; soft NIC CQE timestamp) is answered with
    /// status -6 (overload) at once instead of being computed, 1 ..= 60000000; 0 turns it
    /// off. What the kernel drops (socket buffer full) is counted as socket_overflow.
    #[arg(long, value_name = "MICROSECONDS", help_heading = LIMITS, hide_short_help = true)]
    queue_deadline_us: Option<u64>,
    /// When idle: spin (lowest latency, one core at 100%) or yield [default: spin].
    #[arg(long, help_heading = LIMITS)]
    idle: Option<IdlePolicy>,
    /// CUDA device index, 0 ..= 255 [default: 0].
    #[arg(long = "gpu", value_name = "INDEX", help_heading = GPU)]
    gpu_device: Option<usize>,
    /// Several GPUs (comma-separated CUDA indices), requests routed by function.
    ///
    /// One backend per GPU (gpu-persistent: its own kernel and mailbox rings); overrides
    /// --gpu. With --topology cpu the entries label host shards (no GPU needed).
    #[arg(long, value_delimiter = ',', value_name = "N,...", help_heading = GPU)]
    gpus: Vec<usize>,
    /// With --gpus: serve function NAME on GPU INDEX; repeat for more.
    ///
    /// Functions not named are dealt round-robin over --gpus in registration order.
    #[arg(
        long = "route",
        value_name = "NAME=GPU",
        value_parser = qfwd::config::parse_route,
        help_heading = GPU,
        hide_short_help = true,
    )]
    routes: Vec<(String, usize)>,
    /// gpu-persistent: how a request's arrival is seen, inline or buffer [default: inline].
    ///
    /// inline: a sequence tag in every 16 B chunk, one PCIe read; buffer: a flag, then the
    /// payload.
    #[arg(long, help_heading = GPU, hide_short_help = true)]
    rx_completion: Option<RxCompletion>,
    /// gpu-persistent: poller warps, 1-32 [default: 8].
    #[arg(long, help_heading = GPU)]
    pollers: Option<u32>,
    /// gpu-persistent: warps polling each slot out of phase [default: min(2, pollers)].
    ///
    /// 1 ..= 32; must divide --pollers.
    #[arg(long, help_heading = GPU, hide_short_help = true)]
    pollers_per_slot: Option<u32>,
    /// GPU uf: answer syndromes of at most N defects from a table, 0 ..= 16; 0: off.
    ///
    /// The CPU uf fills the table at start-up (same answers, one memory load). Default: the
    /// largest N, at most 4, whose table fits the build budget of ~10 s of work per core,
    /// logged at start; a d=7 surface code gets 4 on 13 cores and more, 16-21 s to build on
    /// 16, where 3 starts in about a second. A table that took a second or more is kept in
    /// ~/.cache/qfwd/uf-tables for the next start (QFWD_UF_TABLE_CACHE=DIR elsewhere, =off
    /// not at all).
    #[arg(long, value_name = "N", help_heading = GPU, hide_short_help = true)]
    uf_table_max_defects: Option<u32>,
    /// GPU uf with the table: try the split path only up to N defects, 0 ..= 32.
    ///
    /// The split path answers independent groups of at most K defects, each a table entry.
    /// Default: where it answers at least half the shots drawn from the model, logged at
    /// start.
    #[arg(long, value_name = "N", help_heading = GPU, hide_short_help = true)]
    uf_split_max_defects: Option<u32>,
    /// Request slots, i.e. requests on the GPU at once, 1 ..= 4096 [default: 64].
    #[arg(long, help_heading = GPU, hide_short_help = true)]
    slots: Option<usize>,
    /// softnic transport: cpu-assisted, regular or blueflame [default: blueflame].
    #[arg(long, help_heading = NIC)]
    doorbell: Option<Doorbell>,
    /// cpu-forwarded or gpu-direct [default: cpu-forwarded].
    ///
    /// cpu-forwarded: a CPU thread receives every request and sends every answer.
    /// gpu-direct: the device side polls the NIC's receive queues and rings the NIC itself;
    /// needs --transport softnic, and --topology gpu-persistent or cpu for the CPU
    /// stand-in; or --transport rdma with --topology gpu-persistent: the kernel on a
    /// ConnectX, built with the rdma feature, docs/lab-gpu-direct.md.
    #[arg(long, help_heading = NIC)]
    data_path: Option<qfwd::direct::DataPath>,
    /// gpu-direct: QPU links, one receive queue each [default: 1].
    ///
    /// Link i listens on --listen's port + i (rdma: the i-th QPU side to connect to
    /// --listen's control plane).
    #[arg(long, help_heading = NIC)]
    links: Option<u32>,
    /// gpu-direct over rdma: receive buffers in auto, gpu or host memory [default: auto].
    ///
    /// auto: GPU memory through dma-buf or nvidia_peermem, else pinned host memory.
    #[arg(long, value_name = "auto|gpu|host", help_heading = NIC, hide_short_help = true)]
    rx_memory: Option<qfwd::direct::RxMemory>,
    /// Also serve a QEC decoder: uf (union-find), matching (exact minimum-weight matching,
    /// topology cpu only) or lut (lookup table, <= 24 detectors).
    ///
    /// Payload: bit-packed detection events + u32 event count; result: observable flips.
    #[arg(long, value_name = "uf|matching|lut")]
    decoder: Option<String>,
    /// Stim detector error model for --decoder or --streams.
    ///
    /// Flattened, decompose_errors=True; for --streams, a long memory experiment.
    #[arg(long, value_name = "FILE")]
    dem: Option<PathBuf>,
    /// Answer status 2 (over_budget) to a request of more than N defects; 0: off.
    ///
    /// The decoder's request budget: a request with more than N defects (detection
    /// events) is answered without decoding, so no syndrome costs more than a few typical
    /// ones; N is at most the model's detectors [default: 6 x the defects a shot has on
    /// average at the model's noise, + 24]. docs/decoder-budget.md.
    #[arg(long, value_name = "N", help_heading = DECODER)]
    decoder_max_defects: Option<u32>,
    /// Name the decoder answers to; repeat for several names [default: decode].
    ///
    /// Its function_id is the FNV-1a hash of the name; several names serve the one model
    /// under each (one per patch).
    #[arg(long, value_name = "NAME", help_heading = DECODER)]
    name: Vec<String>,
    /// End (draining) when process PID ends, even by SIGKILL.
    ///
    /// PID is the parent that started this qfwd: a parent-death signal, and a check every
    /// 20 ms. For harnesses and scripts; qfwd-latency passes it to the forwarders it
    /// starts.
    #[arg(long, value_name = "PID", help_heading = OUTPUT, hide_short_help = true)]
    exit_with_parent: Option<u32>,
    /// Serve N streams (logical qubits) instead of single shots.
    ///
    /// The stream.* functions (docs/streaming-protocol.md), decoder_id 0..N, a
    /// sliding-window decoder per stream built from --dem (a Stim model of a long memory
    /// experiment), on a pool of decoder threads (the first --cores entry runs the
    /// dispatcher, the next ones the decoders).
    #[arg(long, value_name = "N", help_heading = STREAMS)]
    streams: Option<u32>,
    /// With --streams: rounds per window, W [default: 10; about 2 x distance suffices].
    #[arg(long, value_name = "W", requires = "streams", help_heading = STREAMS)]
    window: Option<u32>,
    /// With --streams: rounds each window commits, C < W [default: 5, about the distance].
    #[arg(long, value_name = "C", requires = "streams", help_heading = STREAMS)]
    commit: Option<u32>,
    /// With --streams: decoder threads [default: one per core but the dispatcher's].
    #[arg(long, value_name = "K", requires = "streams", help_heading = STREAMS)]
    stream_workers: Option<usize>,
    /// With --streams: requests each decoder thread's queue holds [default: 256].
    ///
    /// Beyond, rounds are refused with stream_buffer_full.
    #[arg(
        long,
        value_name = "N",
        requires = "streams",
        help_heading = STREAMS,
        hide_short_help = true,
    )]
    stream_queue_slots: Option<usize>,
    /// With --streams: what decodes: cpu, gpu, gpu-launch, cpu-batched [default: cpu].
    ///
    /// cpu: the pool of decoder threads; gpu: every stream's state on the GPU in a
    /// persistent kernel, all streams' rounds handed over in batches (one submission each,
    /// two in flight), the rounds crossing a CPU dispatcher thread and a batching thread;
    /// gpu-launch: the same with a kernel launch per batch (the baseline); cpu-batched: the
    /// gpu engine's threads with a CPU decoder.
    #[arg(long, value_name = "ENGINE", requires = "streams", help_heading = STREAMS)]
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
