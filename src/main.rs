//! The `qfwd` command line.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

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
    /// Serve requests until the duration ends or Ctrl-C / SIGTERM.
    #[command(after_help = "Examples:\n  \
qfwd run --transport udp --listen 127.0.0.1:9000 --duration 60\n  \
qfwd run --listen 0.0.0.0:9000 --allow 10.0.0.7 --cores 2 --stats-interval 5\n  \
qfwd run --config lab.toml --duration 600\n  \
qfwd run --topology gpu-persistent --pollers 8 --rx-completion inline --cores 2\n  \
qfwd run --decoder uf --dem tests/fixtures/surface_d5_r5_z_p001.dem --name decode\n  \
qfwd run --topology gpu-persistent --gpus 0,1 --handler parity:patch0 --handler parity:patch1 \\\n    \
--route patch0=0 --route patch1=1\n\n\
Then point a QPU controller (or `qfwd-latency emulate --target 127.0.0.1:9000`) at it.")]
    Run(Box<RunArgs>),
    /// Check this host: GPUs, RDMA devices, ports, GIDs, link state, usable doorbell modes;
    /// with --jitter, how much time each core loses to interruptions (which to pin to).
    Doctor(qfwd::doctor::DoctorArgs),
    /// Decode Stim shots offline: predict the observable flips (like `pymatching predict`),
    /// or count logical errors against recorded ones (like `pymatching count_mistakes`).
    Decode(qfwd::decode_cli::DecodeArgs),
}

#[derive(Args)]
struct RunArgs {
    /// TOML file with the same keys as the flags (flags override it).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// QPU-facing transport: udp, or softnic (udp through the soft NIC, responses posted
    /// with --doorbell); the in-process ring is for the latency harness.
    #[arg(long)]
    transport: Option<TransportKind>,
    /// Address to listen on [default: 127.0.0.1:9000].
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Accept requests only from this peer (IP or IP:port); repeat for more. Without
    /// any, every peer is accepted.
    #[arg(long, value_name = "PEER")]
    allow: Vec<String>,
    /// Handler to serve, by name (function_id = FNV-1a of the name), or KIND:NAME to serve
    /// a handler under another name (parity:patch0); repeat for more [default: parity].
    #[arg(long = "handler", value_name = "NAME|KIND:NAME")]
    handlers: Vec<String>,
    /// Where requests are computed: cpu, gpu-launch, gpu-graph, gpu-persistent.
    #[arg(long)]
    topology: Option<Topology>,
    /// CPU cores to pin to (comma-separated): the forwarding loop, then the soft NIC thread
    /// and the cpu-assisted proxy (transport softnic).
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    cores: Vec<usize>,
    /// Seconds to serve, then exit [default: until Ctrl-C / SIGTERM].
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Seconds between live status lines on stderr; 0 turns them off [default: 1].
    #[arg(long, value_name = "SECONDS")]
    stats_interval: Option<f64>,
    /// Largest request argument accepted, in bytes; larger gets status -5 (oversized).
    #[arg(long, value_name = "BYTES")]
    max_request_bytes: Option<usize>,
    /// Most datagrams received per poll.
    #[arg(long)]
    batch: Option<usize>,
    /// Most requests in flight toward the decoder; more get status -6 (overload).
    #[arg(long)]
    max_in_flight: Option<usize>,
    /// Per-request deadline in microseconds; past it the answer is status -7.
    #[arg(long, value_name = "MICROSECONDS")]
    watchdog_us: Option<u64>,
    /// When idle: spin (lowest latency, one core at 100%) or yield.
    #[arg(long)]
    idle: Option<IdlePolicy>,
    /// GPU topologies: CUDA device index [default: 0].
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
    /// gpu-persistent: warps polling each slot out of phase; must divide --pollers
    /// [default: min(2, pollers)].
    #[arg(long)]
    pollers_per_slot: Option<u32>,
    /// GPU uf decoder: answer syndromes of at most N defects from a table that the CPU uf
    /// fills at start-up (same answers, one memory load); 0 turns it off [default: the
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
    /// GPU topologies: request slots, i.e. requests on the GPU at once [default: 64].
    #[arg(long)]
    slots: Option<usize>,
    /// softnic transport: cpu-assisted, regular or blueflame [default: blueflame].
    #[arg(long)]
    doorbell: Option<Doorbell>,
    /// Also serve a QEC decoder: uf (union-find) or lut (lookup table, <= 24 detectors).
    /// Payload: bit-packed detection events + u32 event count; result: observable flips.
    #[arg(long, value_name = "uf|lut")]
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
}

impl RunArgs {
    fn into_config(self) -> qfwd::Result<RunConfig> {
        let mut c = match &self.config {
            Some(p) => RunConfig::from_file(p)?,
            None => RunConfig::default(),
        };
        if let Some(v) = self.transport {
            c.transport = v;
        }
        if let Some(v) = self.listen {
            c.listen = v;
        }
        if !self.allow.is_empty() {
            c.allow = self.allow;
        }
        if !self.handlers.is_empty() {
            c.handlers = self.handlers;
        }
        if let Some(v) = self.topology {
            c.topology = v;
        }
        if !self.cores.is_empty() {
            c.cores = self.cores;
        }
        if self.duration.is_some() {
            c.duration_s = self.duration;
        }
        if let Some(v) = self.stats_interval {
            c.stats_interval_s = v;
        }
        if let Some(v) = self.max_request_bytes {
            c.max_request_bytes = v;
        }
        if let Some(v) = self.batch {
            c.batch = v;
        }
        if let Some(v) = self.max_in_flight {
            c.max_in_flight = v;
        }
        if let Some(v) = self.watchdog_us {
            c.watchdog_us = v;
        }
        if let Some(v) = self.idle {
            c.idle = v;
        }
        if let Some(v) = self.gpu_device {
            c.gpu_device = v;
        }
        if !self.gpus.is_empty() {
            c.gpus = self.gpus;
        }
        if !self.routes.is_empty() {
            c.route = self.routes.into_iter().collect();
        }
        if let Some(v) = self.rx_completion {
            c.rx_completion = v;
        }
        if let Some(v) = self.pollers {
            c.pollers = v;
        }
        if self.pollers_per_slot.is_some() {
            c.pollers_per_slot = self.pollers_per_slot;
        }
        if self.uf_table_max_defects.is_some() {
            c.uf_table_max_defects = self.uf_table_max_defects;
        }
        if self.uf_split_max_defects.is_some() {
            c.uf_split_max_defects = self.uf_split_max_defects;
        }
        if let Some(v) = self.slots {
            c.slots = v;
        }
        if let Some(v) = self.doorbell {
            c.doorbell = v;
        }
        if self.decoder.is_some() {
            c.decoder = self.decoder;
        }
        if self.dem.is_some() {
            c.dem = self.dem;
        }
        if self.decoder_max_defects.is_some() {
            c.decoder_max_defects = self.decoder_max_defects;
        }
        match self.name.len() {
            0 => {}
            1 => {
                c.decoder_name = self.name[0].clone();
                c.decoder_names.clear();
            }
            _ => c.decoder_names = self.name,
        }
        c.validate()?;
        Ok(c)
    }
}

fn run(args: RunArgs) -> qfwd::Result<()> {
    let config = args.into_config()?;
    if config.transport == TransportKind::Inproc {
        return Err(qfwd::Error::InvalidSetting {
            key: "transport",
            detail: "inproc connects threads of one process; to measure it, run \
                     `qfwd-latency emulate --inproc` (it starts the forwarder itself)"
                .to_string(),
        });
    }
    let running = match config.transport {
        TransportKind::Softnic => qfwd::serve::spawn_softnic_udp(&config)?,
        TransportKind::Rdma => qfwd::serve::spawn_rdma(&config)?,
        _ => qfwd::serve::spawn_udp(&config)?,
    };
    eprintln!("qfwd: {}", running.description());
    let flag = running.stop_flag();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, flag.clone()).map_err(qfwd::Error::Signal)?;
    }
    // The loop stops itself at the duration; this thread only waits.
    while !running.is_finished() && !flag.load(Ordering::Relaxed) {
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
