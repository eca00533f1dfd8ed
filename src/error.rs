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
    // GPU runtime, mailbox and kernel variants live below this line (issue 3).
}

/// The appliance's result type.
pub type Result<T> = std::result::Result<T, Error>;
