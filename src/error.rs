//! The appliance's one error type.
use std::net::SocketAddr;
use std::path::PathBuf;

/// Everything the appliance can fail at, one variant per failing operation, with context.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("cannot bind UDP socket to {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("UDP socket option {option} on {addr}: {source}")]
    SocketOption {
        addr: SocketAddr,
        option: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("receive on {transport}: {source}")]
    Recv {
        transport: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("send on {transport} to {peer}: {source}")]
    Send {
        transport: &'static str,
        peer: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot pin thread to core {core}: {detail}")]
    Pin { core: usize, detail: String },
    #[error("config {path}: {detail}")]
    Config { path: PathBuf, detail: String },
    #[error("invalid setting {key}: {detail}")]
    InvalidSetting { key: &'static str, detail: String },
    #[error("route {name}={gpu}: GPU {gpu} is not among the GPUs served ({gpus})")]
    RouteUnknownGpu {
        name: String,
        gpu: usize,
        gpus: String,
    },
    #[error("route {name}={gpu}: no handler or decoder is registered as {name:?}; registered: {registered}")]
    RouteUnknownFunction {
        name: String,
        gpu: usize,
        registered: String,
    },
    #[error("asked for GPUs {asked} but this host has {found} GPU(s){which}")]
    NotEnoughGpus {
        asked: String,
        found: usize,
        which: String,
    },
    #[error("unknown handler {name:?}; available: {available}")]
    UnknownHandler { name: String, available: String },
    #[error("handler names {a:?} and {b:?} hash to the same function_id {id:#010x}")]
    FunctionIdCollision { a: String, b: String, id: u32 },
    #[error("cannot install signal handler: {0}")]
    Signal(#[source] std::io::Error),
    #[error("forwarder thread panicked")]
    ThreadPanicked,
    #[error("in-process ring: {0}")]
    Inproc(&'static str),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A decoder operation: loading a model, reading shots, a precompute.
    #[error(transparent)]
    Decoder(#[from] qfwd_decode::Error),
    #[error("decoder model {file}: {detail}")]
    DecoderModel { file: String, detail: String },
    #[error("decode: {detail}")]
    Decode { detail: String },
    // RDMA, mlx5 and soft NIC
    #[error("soft NIC layout: {detail}")]
    SoftNicLayout { detail: String },
    #[error("soft NIC {what}: {detail}")]
    SoftNic { what: &'static str, detail: String },
    #[error("soft NIC {queue} stayed full for {waited_us} us ({polls} polls)")]
    SoftNicQueueFull {
        queue: &'static str,
        waited_us: u64,
        polls: u64,
    },
    #[error("thread {thread} did not stop within {waited_ms} ms ({polls} polls); left running")]
    SoftNicDidNotStop {
        thread: &'static str,
        waited_ms: u64,
        polls: u64,
    },
    #[error("cannot build WQE: {0}")]
    Wqe(#[from] crate::mlx5::WqeError),
    #[error("control plane: {detail}")]
    ControlPlane { detail: String },
    #[error("control plane {op} with {peer}: {source}")]
    ControlPlaneIo {
        op: &'static str,
        peer: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no RDMA device found (looked in {looked_in}: {found})")]
    NoRdmaDevice { looked_in: String, found: String },
    #[error("RDMA device {device}: {op} failed: {source}")]
    Rdma {
        device: String,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("RDMA device {device} port {port}: {detail}")]
    RdmaPort {
        device: String,
        port: u8,
        detail: String,
    },
    #[error("RDMA device {device}: {op} completed with {status} (vendor error {vendor_err:#x})")]
    RdmaCompletion {
        device: String,
        op: &'static str,
        status: String,
        vendor_err: u32,
    },
    #[error("RDMA device {device}: {what} timed out after {waited_us} us ({polls} polls)")]
    RdmaTimeout {
        device: String,
        what: &'static str,
        waited_us: u64,
        polls: u64,
    },
    #[error("mlx5 direct verbs on {device}: {op}: {detail}")]
    Mlx5Dv {
        device: String,
        op: &'static str,
        detail: String,
    },
    // GPU runtime, mailbox and kernel variants live below this line (issue 3).
    #[error("mailbox layout: {detail}")]
    MailboxLayout { detail: String },
    #[error("{device_side} did not stop within {waited_ms} ms of the stop sentinel")]
    MailboxDidNotStop { device_side: String, waited_ms: u64 },
    #[error("no usable GPU: {detail}")]
    GpuUnavailable { detail: String },
    #[error("GPU {device}: {op} failed: {source}")]
    GpuDriver {
        device: usize,
        op: &'static str,
        #[source]
        source: cudarc::driver::DriverError,
    },
    #[error("GPU {device}: cannot allocate {bytes} bytes of mapped pinned host memory: {source}")]
    GpuHostAlloc {
        device: usize,
        bytes: usize,
        #[source]
        source: cudarc::driver::DriverError,
    },
    #[error("GPU {device}: cannot allocate {bytes} bytes of device memory: {source}")]
    GpuDeviceAlloc {
        device: usize,
        bytes: usize,
        #[source]
        source: cudarc::driver::DriverError,
    },
    #[error("GPU {device}: cannot load the module compiled from {file}: {source}")]
    GpuModuleLoad {
        device: usize,
        file: &'static str,
        #[source]
        source: cudarc::driver::DriverError,
    },
    #[error("GPU {device}: kernel {kernel} not found in {file}: {source}")]
    GpuKernelMissing {
        device: usize,
        kernel: &'static str,
        file: &'static str,
        #[source]
        source: cudarc::driver::DriverError,
    },
    #[error("GPU {device}: cannot launch kernel {kernel}: {source}")]
    GpuLaunch {
        device: usize,
        kernel: &'static str,
        #[source]
        source: cudarc::driver::DriverError,
    },
    #[error("GPU {device}: CUDA graph of kernel {kernel}: {op} failed: {source}")]
    GpuGraph {
        device: usize,
        kernel: &'static str,
        op: &'static str,
        #[source]
        source: cudarc::driver::DriverError,
    },
    #[error("GPU {device}: kernel {kernel} failed while running: {source}")]
    KernelFault {
        device: usize,
        kernel: &'static str,
        #[source]
        source: cudarc::driver::DriverError,
    },
    #[error(
        "GPU {device}: kernel {kernel} did not stop within {waited_ms} ms of the stop sentinel"
    )]
    KernelDidNotStop {
        device: usize,
        kernel: &'static str,
        waited_ms: u64,
    },
    #[error("GPU {device}: kernel {kernel} did not finish within {waited_ms} ms")]
    KernelTimeout {
        device: usize,
        kernel: &'static str,
        waited_ms: u64,
    },
    #[error("NVRTC is not available: {detail}")]
    NvrtcUnavailable { detail: String },
    #[error("NVRTC cannot compile {file} for {arch}: {detail}\n{log}")]
    NvrtcCompile {
        file: &'static str,
        arch: String,
        detail: String,
        log: String,
    },
}

/// The appliance's result type.
pub type Result<T> = std::result::Result<T, Error>;
