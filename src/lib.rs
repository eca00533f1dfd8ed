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

pub mod backend;
pub mod config;
pub mod decode;
pub mod doctor;
pub mod error;
pub mod forward;
pub mod gpu;
pub mod handler;
pub mod host;
pub mod limits;
pub mod mailbox;
pub mod mlx5;
pub mod process;
pub mod rdma;
pub mod route;
pub mod serve;
pub mod softnic;
pub mod stats;
pub mod sys;
pub mod transport;
pub mod tuning;
pub mod wire;

pub use error::{Error, Result};
