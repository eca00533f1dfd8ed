//! qfwd: a real-time forwarding appliance for quantum-error-correction syndromes.
//!
//! A QPU controller sends CUDA-Q Realtime RPC requests ([`wire`]) over a transport
//! ([`transport`]: UDP or an in-process ring); the forwarding loop ([`forward`]) hands each
//! to a handler ([`handler`]) and answers with a CUQS response; [`stats`] accounts for
//! every datagram.
//!
//! Runtime dependencies are found at run time only: the binary builds and runs on a
//! machine with no GPU and no RDMA NIC.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod abi;
pub mod backend;
pub mod config;
pub mod decode_cli;
pub mod direct;
pub mod doctor;
pub mod error;
pub mod forward;
pub mod gpu;
pub mod handler;
pub mod host;
pub mod idle;
pub mod limits;
pub mod logging;
pub mod mailbox;
pub mod mlx5;
pub mod process;
pub mod queues;
pub mod rdma;
pub mod route;
pub mod serve;
pub mod shm;
pub mod softnic;
pub mod stats;
pub mod stream;
pub mod sys;
pub mod transport;
pub mod tuning;
pub mod wire;
pub(crate) mod worker;

pub use error::{Error, Result};
/// The decoders ([`qfwd_decode`]), at their appliance path.
pub use qfwd_decode as decode;
