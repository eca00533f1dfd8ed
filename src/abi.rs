//! The interface between host and device code, written once: the constants and the
//! `#[repr(C)]` parameter structs that Rust and the CUDA kernels share.
//!
//! Every item is declared here with [`abi_consts!`] or [`abi_struct!`], which define the
//! Rust item and record how to print it in C. [`header`] renders them all as
//! `qfwd_abi.h`, which every NVRTC compilation receives as a named header (so a kernel can
//! never see other values than the host), and which is also committed as
//! `device/qfwd_abi.h` for readers and for `scripts/check-kernels.sh`;
//! `committed_header_is_current` fails when the committed copy is stale
//! (`QFWD_BLESS=1 cargo test -p qfwd --lib abi` rewrites it).
//!
//! A struct's C rendering carries `static_assert`s of its size and of each field's offset,
//! so a layout mismatch fails the NVRTC compile rather than corrupting a launch.
#![forbid(unsafe_code)]

use std::fmt::Write as _;

/// How a Rust field type is written in C.
pub trait CType {
    /// The C element type.
    const C: &'static str;
    /// Array length, when the field is an array.
    const LEN: Option<usize> = None;
}

impl CType for u32 {
    const C: &'static str = "unsigned int";
}
impl CType for i32 {
    const C: &'static str = "int";
}
impl CType for u64 {
    const C: &'static str = "unsigned long long";
}
impl<const N: usize> CType for [u32; N] {
    const C: &'static str = "unsigned int";
    const LEN: Option<usize> = Some(N);
}

/// A constant as C prints it.
pub trait CConst {
    fn c_literal(&self) -> String;
}
impl CConst for u32 {
    fn c_literal(&self) -> String {
        if *self < 0x10000 {
            format!("{self}u")
        } else {
            format!("{self:#x}u")
        }
    }
}
impl CConst for u64 {
    fn c_literal(&self) -> String {
        format!("{self:#x}ull")
    }
}
impl CConst for i32 {
    fn c_literal(&self) -> String {
        format!("({self})")
    }
}

/// Declares constants and records them for the header: `NAME: TYPE = VALUE;` becomes
/// `pub const NAME` here and `#define QFWD_NAME VALUE` there.
macro_rules! abi_consts {
    ($group:ident { $( $(#[doc = $doc:expr])* $name:ident : $ty:ty = $val:expr; )* }) => {
        $( $(#[doc = $doc])* pub const $name: $ty = $val; )*

        /// Renders this group's constants as C `#define`s.
        fn $group(out: &mut String) {
            $(
                let _ = writeln!(
                    out,
                    "#define QFWD_{} {}",
                    stringify!($name),
                    CConst::c_literal(&$name)
                );
            )*
        }
    };
}

/// Declares a `#[repr(C)]` struct and records its C rendering (struct, size and field
/// offset `static_assert`s). Fields are u32, i32, u64 or `[u32; N]`, ordered so that C and
/// Rust insert no padding (checked by the assertions in both languages).
macro_rules! abi_struct {
    ($(#[doc = $doc:expr])* $name:ident : $cname:literal { $( $(#[doc = $fdoc:expr])* $field:ident : $fty:ty, )* }) => {
        $(#[doc = $doc])*
        #[repr(C)]
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name { $( $(#[doc = $fdoc])* pub $field: $fty, )* }

        impl $name {
            /// Renders the struct in C with its layout assertions.
            pub fn render(out: &mut String) {
                let _ = writeln!(out, "struct {} {{", $cname);
                $(
                    let len = <$fty as CType>::LEN.map(|n| format!("[{n}]")).unwrap_or_default();
                    let _ = writeln!(out, "    {} {}{};", <$fty as CType>::C, stringify!($field), len);
                )*
                let _ = writeln!(out, "}};");
                let _ = writeln!(
                    out,
                    "static_assert(sizeof(struct {}) == {}, \"{} size\");",
                    $cname, std::mem::size_of::<$name>(), $cname
                );
                // Field sizes and the total: with no padding (the sum of the sizes is the
                // total), the order fixes every offset. (NVRTC 13.0 has no offsetof.)
                $(
                    let _ = writeln!(
                        out,
                        "static_assert(sizeof(((struct {}*)0)->{}) == {}, \"{}.{}\");",
                        $cname,
                        stringify!($field),
                        std::mem::size_of::<$fty>(),
                        $cname,
                        stringify!($field)
                    );
                )*
            }

            /// The struct's bytes, as the device reads them (little-endian, no padding).
            pub fn to_bytes(&self) -> Vec<u8> {
                let mut out = Vec::with_capacity(std::mem::size_of::<$name>());
                $( AbiBytes::put(&self.$field, &mut out); )*
                assert_eq!(out.len(), std::mem::size_of::<$name>(), "{} has padding", $cname);
                out
            }

            /// The struct as little-endian u64 words (for a copy into device memory); its
            /// size must be a multiple of 8.
            pub fn to_u64_words(&self) -> Vec<u64> {
                let bytes = self.to_bytes();
                assert_eq!(bytes.len() % 8, 0, "{} is not a whole number of u64s", $cname);
                bytes
                    .chunks_exact(8)
                    .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
                    .collect()
            }
        }
    };
}

/// A kernel's one parameter, passed by value: an [`abi_struct!`] whose C twin the kernel
/// named [`KernelParams::KERNEL`] takes (`extern "C" __global__ void KERNEL(const Struct
/// p)`). `crate::gpu::Module::kernel` looks the kernel up by this name, so a launch with
/// the wrong parameter type does not compile.
pub trait KernelParams: Copy + Send + Sync + 'static {
    /// The kernel's `extern "C"` name.
    const KERNEL: &'static str;
}

/// Declares which kernel takes which parameter struct.
macro_rules! kernel_params {
    ($($params:ty => $kernel:literal;)*) => {
        $( impl KernelParams for $params { const KERNEL: &'static str = $kernel; } )*
    };
}

/// Little-endian bytes of a field.
trait AbiBytes {
    fn put(&self, out: &mut Vec<u8>);
}
impl AbiBytes for u32 {
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}
impl AbiBytes for i32 {
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}
impl AbiBytes for u64 {
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}
impl<const N: usize> AbiBytes for [u32; N] {
    fn put(&self, out: &mut Vec<u8>) {
        for w in self {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }
}

abi_consts!(render_wire {
    /// CUQR request magic.
    REQUEST_MAGIC: u32 = crate::wire::REQUEST_MAGIC;
    /// CUQS response magic.
    RESPONSE_MAGIC: u32 = crate::wire::RESPONSE_MAGIC;
    /// Bytes of either header.
    WIRE_HEADER_BYTES: u32 = crate::wire::HEADER_LEN as u32;
    STATUS_OK: i32 = crate::wire::status::OK;
    STATUS_BAD_ARGUMENT: i32 = crate::wire::status::BAD_ARGUMENT;
    STATUS_LENGTH_MISMATCH: i32 = crate::wire::status::LENGTH_MISMATCH;
    STATUS_UNKNOWN_FUNCTION: i32 = crate::wire::status::UNKNOWN_FUNCTION;
    STATUS_OVERSIZED: i32 = crate::wire::status::OVERSIZED;
    STATUS_OVER_BUDGET: i32 = crate::wire::status::OVER_BUDGET;
    /// Handler codes the kernels dispatch on (`Handler::device_code`).
    CODE_PARITY: u32 = crate::mailbox::layout::device_code::PARITY;
    CODE_LUT: u32 = 2;
    CODE_UF: u32 = 3;
    /// Reserved for the CPU's exact matching decoder: no kernel serves it (the GPU
    /// topologies refuse it at start; a request that got there is an unknown function).
    CODE_MATCHING: u32 = 4;
    /// Debug: spin (tests of the watchdog; `mailbox::layout::device_code::STALL`).
    CODE_STALL: u32 = crate::mailbox::layout::device_code::STALL;
});

abi_consts!(render_mailbox {
    /// Bytes in a chunk: the unit of every read and write of the slot protocol.
    CHUNK_BYTES: u32 = crate::mailbox::layout::CHUNK_BYTES as u32;
    /// Data bytes in a tagged chunk (three of its four words).
    INLINE_DATA_BYTES: u32 = crate::mailbox::layout::INLINE_DATA_BYTES as u32;
    /// Bytes of a request's (`code`, `arg_len`) and a response's (`status`, `result_len`)
    /// header in a slot.
    HEADER_BYTES: u32 = crate::mailbox::layout::HEADER_BYTES as u32;
    /// Bytes of a reply layout's trailer: request_id, ptp_timestamp.
    REPLY_ID_BYTES: u32 = crate::mailbox::layout::REPLY_ID_BYTES as u32;
    /// Flag in a completion's `result_len`: the device side already sent the response.
    DEVICE_SENT: u32 = crate::mailbox::layout::DEVICE_SENT;
    /// The stop tag, never a sequence tag.
    STOP_TAG: u32 = crate::mailbox::layout::STOP_TAG;
    /// Distinct sequence tags (1 ..= TAG_PERIOD).
    TAG_PERIOD: u64 = crate::mailbox::layout::TAG_PERIOD;
    /// Most chunk loads per lane for one request.
    MAX_ROUNDS: u32 = crate::mailbox::layout::MAX_ROUNDS as u32;
    /// Control block: the stall-release generation word.
    CONTROL_RELEASE_OFFSET: u32 = crate::mailbox::layout::CONTROL_RELEASE_OFFSET as u32;
    /// Device state: group g's claim ticket at g x this.
    STATE_CLAIM_STRIDE: u32 = crate::mailbox::layout::STATE_CLAIM_STRIDE as u32;
    /// Most poller groups.
    MAX_GROUPS: u32 = crate::mailbox::layout::MAX_GROUPS as u32;
    /// Device state: where the per-poller counters start.
    STATE_COUNTERS_OFFSET: u32 = crate::mailbox::layout::STATE_COUNTERS_OFFSET as u32;
    /// u64 counters per poller: polls, served, torn reads, lost claims.
    COUNTERS_PER_POLLER: u32 = crate::mailbox::layout::COUNTERS_PER_POLLER as u32;
    /// Longest debug stall, in microseconds.
    MAX_STALL_US: u32 = crate::mailbox::layout::MAX_STALL_US;
});

abi_consts!(render_mlx5 {
    /// Bytes of a send WQE basic block.
    WQEBB: u32 = crate::mlx5::layout::WQEBB as u32;
    /// Bytes of a CQE (64-byte CQEs).
    CQE_BYTES: u32 = crate::mlx5::layout::cqe::SIZE as u32;
    OPCODE_SEND: u32 = crate::mlx5::layout::opcodes::SEND as u32;
    CTRL_CQ_UPDATE: u32 = crate::mlx5::layout::ctrl::CQ_UPDATE as u32;
    INLINE_SEG: u32 = crate::mlx5::layout::inline::FLAG;
    /// Largest inline SEND payload: a 256-byte BlueFlame half less ctrl and inline header.
    MAX_INLINE: u32 = crate::mlx5::wqe::MAX_SEND_INLINE as u32;
    CQE_OPCODE_REQ: u32 = crate::mlx5::CqeOpcode::Req as u32;
    CQE_OPCODE_RESP_WR_IMM: u32 = crate::mlx5::CqeOpcode::RespWrImm as u32;
    CQE_OPCODE_RESP_SEND: u32 = crate::mlx5::CqeOpcode::RespSend as u32;
    CQE_OPCODE_REQ_ERR: u32 = crate::mlx5::CqeOpcode::ReqErr as u32;
    CQE_OPCODE_RESP_ERR: u32 = crate::mlx5::CqeOpcode::RespErr as u32;
    CQE_OPCODE_INVALID: u32 = crate::mlx5::CqeOpcode::Invalid as u32;
    /// `op_own` bits 3:2 = 1: the message (at most 32 bytes) is in the CQE's first 32
    /// bytes (`MLX5_INLINE_SCATTER_32`).
    CQE_FORMAT_INLINE_32: u32 = 1;
    /// Doorbell modes (`Doorbell::device_code`).
    DB_MODE_CPU_ASSISTED: u32 = 0;
    DB_MODE_REGULAR: u32 = 1;
    DB_MODE_BLUEFLAME: u32 = 2;
});

abi_consts!(render_posting {
    /// The cpu-assisted response ring's chunks: the first carries the length and this many
    /// data bytes, the others this many ([`crate::queues::layout`]).
    RESP_FIRST_DATA: u32 = crate::queues::layout::RESP_FIRST_CHUNK_DATA as u32;
    RESP_CHUNK_DATA: u32 = crate::queues::layout::RESP_CHUNK_DATA as u32;
    /// The device posting block ([`crate::queues::posting`]): the posting lock (u32) at
    /// this byte offset,
    POSTING_LOCK: u32 = crate::queues::posting::LOCK_OFFSET as u32;
    /// the posters' state (u32 pi, half, ci, done, posts),
    POSTING_STATE: u32 = crate::queues::posting::STATE_OFFSET as u32;
    /// their u64 counters (`POST_CTR_*`),
    POSTING_COUNTERS: u32 = crate::queues::posting::COUNTERS_OFFSET as u32;
    /// and the whole block's bytes.
    POSTING_BYTES: u32 = crate::queues::posting::BLOCK_BYTES as u32;
    POST_CTR_POSTED: u32 = 0;
    POST_CTR_FALLBACKS: u32 = 1;
    POST_CTR_LOCK_SPINS: u32 = 2;
    POST_CTR_ROOM_WAITS: u32 = 3;
    POST_CTR_CQES: u32 = 4;
    POST_CTR_ERROR_CQES: u32 = 5;
});

abi_consts!(render_decoders {
    /// "No edge" / "no vertex" in the device's 16-bit ids.
    DEC_NO_ID: u32 = crate::gpu::decoder::NO_ID;
    /// "No forest edge" (a tree root).
    DEC_NO_TREE: u32 = crate::gpu::decoder::NO_TREE;
    /// Cluster flags of the union-find state (`decode::uf`).
    DEC_ODD: u32 = crate::decode::uf::ODD as u32;
    DEC_BOUNDARY: u32 = crate::decode::uf::BOUNDARY as u32;
    /// Incident edges a lane loads at once.
    DEC_UNROLL: u32 = crate::gpu::decoder::UNROLL as u32;
    /// Most incident edges of a detector.
    DEC_MAX_DEGREE: u32 = crate::gpu::decoder::MAX_DEGREE as u32;
    /// [`DecoderParams::loaded`] bits.
    DEC_LOADED_LUT: u32 = crate::gpu::decoder::LOADED_LUT;
    DEC_LOADED_UF: u32 = crate::gpu::decoder::LOADED_UF;
    /// Largest decoder result (64 observables).
    DEC_MAX_RESULT_BYTES: u32 = crate::gpu::decoder::MAX_RESULT_BYTES as u32;
    /// The lanes step's edge slots per lane (`decode::uf_lanes::LANE_SLOTS` / 32).
    DEC_LANE_SLOTS: u32 = (crate::decode::uf_lanes::LANE_SLOTS / 32) as u32;
});

abi_consts!(render_direct {
    /// A 16-byte chunk of a receive buffer or of a CQE's first 48 bytes that the device
    /// side has consumed is overwritten with this word four times (`queues::direct`).
    POISON_WORD: u32 = u32::MAX;
    /// The stop sentinel: the host writes a CQE whose last chunk is
    /// `{STOP_WORD, STOP_WORD, STOP_WORD, INVALID << 28}` into every slot of every receive
    /// CQ; a NIC never writes the INVALID opcode.
    STOP_WORD: u32 = 0x5354_4f50;
    /// Most links (receive queues) one kernel serves.
    MAX_LINKS: u32 = 64;
    /// Most poller warps per link (one block per link; the decoders' register budget).
    MAX_WARPS_PER_LINK: u32 = 8;
    /// Most functions in the device's function table.
    MAX_FUNCTIONS: u32 = 32;
    /// Most receive slots per link (the credit bitmap's size).
    MAX_RX_SLOTS: u32 = 1024;
    /// u64 counters per poller warp, at [`LinkDesc::counters`] + 256 x warp; the link's
    /// poster keeps its own at block `MAX_WARPS_PER_LINK`.
    WARP_COUNTERS: u32 = 24;
    /// Slots of the ring in device memory through which a link's pollers hand answers to
    /// its poster (regular and blueflame doorbells).
    HANDOFF_SLOTS: u32 = 64;
    /// Bytes of a handoff slot: tagged 16 B chunks, answers of at most 92 bytes.
    HANDOFF_SLOT_BYTES: u32 = 128;
    /// Bytes before a link's handoff slots: the poster's consumer index (u32 at 0), the
    /// count of the link's pollers that ended (u32 at 8), and a copy of the poster's
    /// counters (at 64).
    HANDOFF_HEADER_BYTES: u32 = 256;
    /// Polls between two heartbeat writes of a warp's poll counter.
    HEARTBEAT_POLLS: u32 = 4096;
    /// cpu-assisted: receive credits are published (behind a system fence) when this many
    /// have accumulated, or when a poll finds nothing.
    CREDIT_BATCH: u32 = 16;
    CTR_POLLS: u32 = 0;
    CTR_RECEIVED: u32 = 1;
    CTR_OK: u32 = 2;
    CTR_BAD_ARGUMENT: u32 = 3;
    CTR_LENGTH_MISMATCH: u32 = 4;
    CTR_UNKNOWN_FUNCTION: u32 = 5;
    CTR_OVERSIZED: u32 = 6;
    CTR_OTHER_ERROR: u32 = 7;
    CTR_TRUNCATED_HEADER: u32 = 8;
    CTR_BAD_MAGIC: u32 = 9;
    CTR_RX_ERROR: u32 = 10;
    CTR_SEND_FAILED: u32 = 11;
    CTR_TORN: u32 = 12;
    CTR_POSTED: u32 = 13;
    CTR_TX_ERRORS: u32 = 14;
    CTR_LOST_CLAIMS: u32 = 15;
    /// SM clock cycles the poster spent in its system fences, and their number.
    CTR_FENCE_CYCLES: u32 = 16;
    CTR_FENCES: u32 = 17;
    /// SM clock cycles from a new CQE seen to its answer handed on (pollers), and the
    /// number of answers; of those cycles, the ones until the request was staged, and
    /// until it was served.
    CTR_ANSWER_CYCLES: u32 = 18;
    CTR_ANSWERS: u32 = 19;
    CTR_STAGE_CYCLES: u32 = 20;
    CTR_SERVE_CYCLES: u32 = 21;
    /// SM clock cycles a poller warp spent returning receives (its credit fences).
    CTR_CREDIT_CYCLES: u32 = 22;
    CTR_CREDIT_FENCES: u32 = 23;
});

abi_struct!(
    /// The persistent mailbox kernel's one parameter (`qfwd_persistent`, device/forward.cu).
    PersistentParams: "QfwdPersistentParams" {
        /// Device addresses of the request ring, the response ring and the control block
        /// (mapped host memory, [`crate::mailbox::Layout`]).
        req_ring: u64,
        resp_ring: u64,
        control: u64,
        /// Device memory: the groups' claim tickets, then the pollers' counters.
        state: u64,
        /// The device posting block (`POSTING_BYTES`, [`PostingDesc`] first), or 0: the
        /// kernel never sends (only the `QFWD_DEVICE_DOORBELL` build may be given one).
        nic: u64,
        slots: u32,
        req_slot_bytes: u32,
        resp_slot_bytes: u32,
        /// 1: `inline` requests; 0: `buffer` (flag chunk, then the payload).
        rx_inline: u32,
        /// Chunks read with each poll.
        poll_chunks: u32,
        /// Poller warps in all, and the warps of each group.
        pollers: u32,
        pollers_per_slot: u32,
        /// 1: every group lies within one block (tickets in shared memory).
        claim_in_block: u32,
    }
);

abi_struct!(
    /// The one-request kernel's parameter (`qfwd_serve_once`: `gpu-launch`, `gpu-graph`).
    ServeOnceParams: "QfwdServeOnceParams" {
        /// Device addresses of the request slot, its response slot and the control block.
        req: u64,
        resp: u64,
        control: u64,
        req_slot_bytes: u32,
        resp_slot_bytes: u32,
        poll_chunks: u32,
        reserved: u32,
    }
);

abi_struct!(
    /// A send queue as the device's posters see it: the description at the start of the
    /// device posting block ([`crate::queues::posting::DevicePosting::desc`]); the lock,
    /// state and counters follow at `POSTING_LOCK`, `POSTING_STATE`, `POSTING_COUNTERS`.
    PostingDesc: "QfwdPostingDesc" {
        /// Device addresses: the SQ, the QP doorbell record, BlueFlame half 0, the send CQ
        /// and its doorbell record.
        sq: u64,
        qp_dbrec: u64,
        bf: u64,
        cq: u64,
        cq_dbrec: u64,
        /// SQ size in WQEBBs and CQ entries (powers of two).
        wqe_cnt: u32,
        cqe_cnt: u32,
        qpn: u32,
        /// Bytes per BlueFlame half.
        bf_size: u32,
        /// `DB_MODE_REGULAR` or `DB_MODE_BLUEFLAME`.
        mode: u32,
        /// Ask for a CQE every this many posts.
        signal_every: u32,
    }
);

abi_struct!(
    /// The doorbell test kernel's parameter (`qfwd_doorbell_post_sends`, device/doorbell.cu):
    /// one thread posts `n` SENDs of `payload_len` bytes with doorbell `mode`.
    DoorbellSendsParams: "QfwdDoorbellSendsParams" {
        /// As [`PostingDesc`]: SQ, QP doorbell record, BlueFlame half 0, send CQ, its record.
        sq: u64,
        qp_dbrec: u64,
        bf: u64,
        cq: u64,
        cq_dbrec: u64,
        /// cpu-assisted: the tagged response ring and its consumer index.
        resp_ring: u64,
        resp_ci: u64,
        /// Device memory for one message (at least `MAX_INLINE` bytes).
        scratch: u64,
        /// Device memory for 4 u32: posted, completions, error CQEs, status.
        result: u64,
        wqe_cnt: u32,
        cqe_cnt: u32,
        qpn: u32,
        bf_size: u32,
        mode: u32,
        n: u32,
        payload_len: u32,
        resp_slots: u32,
        resp_slot_bytes: u32,
        reserved: u32,
    }
);

abi_struct!(
    /// The posting-block test kernel's parameter (`qfwd_doorbell_nic_posts`): lane 0 of
    /// every warp posts `n` SENDs of `len` bytes through the block `nic`.
    NicPostsParams: "QfwdNicPostsParams" {
        /// The device posting block.
        nic: u64,
        /// Device memory for one u32 per warp: the messages it posted.
        result: u64,
        n: u32,
        len: u32,
    }
);

kernel_params! {
    PersistentParams => "qfwd_persistent";
    ServeOnceParams => "qfwd_serve_once";
    DoorbellSendsParams => "qfwd_doorbell_post_sends";
    NicPostsParams => "qfwd_doorbell_nic_posts";
    DirectParams => "qfwd_direct";
    WindowBatchParams => "qfwd_window_batch";
    StreamServeParams => "qfwd_stream_serve";
}

abi_struct!(
    /// One link's queues as a device side sees them: addresses in the device's view of
    /// the shared region, sizes, and where its warps' counters go.
    LinkDesc: "QfwdLinkDesc" {
        /// Receive CQ (`rx_cqes` x 64 B).
        rx_cq: u64,
        /// Receive CQ doorbell record (`[0]` = BE32 consumer index).
        rx_cq_dbrec: u64,
        /// QP doorbell record (`[0]` = BE32 receive counter, `[1]` = BE32 send counter).
        qp_dbrec: u64,
        /// Receive buffers (`rx_slots` x `rx_slot_bytes`); receive WQE i points at slot i.
        rx_ring: u64,
        /// Send queue (`sq_wqebbs` x 64 B).
        sq: u64,
        /// BlueFlame register, half 0 (half 1 at + `bf_size`).
        bf: u64,
        /// Send CQ and its doorbell record.
        tx_cq: u64,
        tx_cq_dbrec: u64,
        /// cpu-assisted: the tagged response ring and its consumer index.
        resp_ring: u64,
        resp_ci: u64,
        /// The warps' counters (`WARP_COUNTERS` u64 per warp, 256 B apart).
        counters: u64,
        rx_cqes: u32,
        rx_slots: u32,
        rx_slot_bytes: u32,
        sq_wqebbs: u32,
        tx_cqes: u32,
        qpn: u32,
        bf_size: u32,
        signal_every: u32,
        resp_slots: u32,
        resp_slot_bytes: u32,
        /// `DB_MODE_*`.
        doorbell: u32,
        reserved: u32,
    }
);

abi_struct!(
    /// The `gpu-direct` kernel's one parameter (passed by value).
    DirectParams: "QfwdDirectParams" {
        /// Device address of `nlinks` [`LinkDesc`]s.
        links: u64,
        /// Device memory of the links' handoff rings (`HANDOFF_HEADER_BYTES` +
        /// `HANDOFF_SLOTS` x `HANDOFF_SLOT_BYTES` per link, zeroed), or 0 (cpu-assisted).
        handoff: u64,
        nlinks: u32,
        /// Poller warps per link (the block size / 32).
        warps_per_link: u32,
        /// Warps that poll each position together (divides `warps_per_link`).
        pollers_per_slot: u32,
        /// Largest request argument accepted (larger: `OVERSIZED`).
        max_request_bytes: u32,
        /// Chunks (16 B) of a receive buffer read with each CQE poll.
        poll_chunks: u32,
        /// Entries of the function table.
        nfunctions: u32,
        function_ids: [u32; 32],
        function_codes: [u32; 32],
    }
);

abi_consts!(render_window {
    /// "No defect / no vertex / no cluster" in the window decoder's arrays.
    WINDOW_NONE: u32 = u32::MAX;
    /// Root flags of the window decoder's clusters.
    WINDOW_ODD: u32 = 1;
    WINDOW_BOUNDARY: u32 = 2;
    /// An entry of the distance tables: the distance in its low `WINDOW_DIST_BITS` bits
    /// (`WINDOW_INF`: unreachable), the index of its observable mask above
    /// (`decode::window::metric`).
    WINDOW_INF: u32 = 0x00FF_FFFF;
    WINDOW_DIST_BITS: u32 = 24;
    /// Scalar words of a decoding group's scratch.
    WINDOW_SCALARS: u32 = 16;
    /// Clusters of at most this many defects are matched by one lane each; larger ones
    /// (within the limit) by the whole warp, subsets of one size at a time.
    WINDOW_LANE_CLUSTER: u32 = 4;
    /// A decoding group's scratch arrays, by their index in [`StreamModelDesc::scratch`]
    /// (word offsets in the group's scratch); `n` = `max_defects`: per defect its vertex,
    /// boundary distance, radius, cluster parent, root flags, cluster size, candidate
    /// partners (a bit mask, windows of at most 32 defects), the members of the cluster
    /// being matched and which are left (greedy), the matches (two words each) and the
    /// listed clusters or crossing matches; the scalars; last, the exact matching's costs
    /// and choices (`2^match_defects` words and bytes), which a group may keep apart
    /// (`QwGroup::dp`: the first `scratch_hot_words` words are the rest).
    SCR_DEFECTS: u32 = 0;
    SCR_BOUND: u32 = 1;
    SCR_RAD: u32 = 2;
    SCR_PARENT: u32 = 3;
    SCR_FLAGS: u32 = 4;
    SCR_SIZE: u32 = 5;
    SCR_CAND: u32 = 6;
    SCR_MEMBERS: u32 = 7;
    SCR_LEFT: u32 = 8;
    SCR_PICKS: u32 = 9;
    SCR_CROSS: u32 = 10;
    SCR_SCALARS: u32 = 11;
    SCR_COST: u32 = 12;
    SCR_CHOICE: u32 = 13;
    /// Entries of [`StreamModelDesc::scratch`].
    SCR_COUNT: u32 = 14;
    /// A block's copy of what the bulk window reads, by index in
    /// [`StreamModelDesc::cache`] (word offsets in the copy): the bulk context's pair
    /// table, the bulk window's boundary entries and exit rounds.
    CACHE_PAIRS: u32 = 0;
    CACHE_BOUNDS: u32 = 1;
    CACHE_EXITS: u32 = 2;
    /// Entries of [`StreamModelDesc::cache`].
    CACHE_COUNT: u32 = 3;
    /// Most threads in a decoding group (a block).
    WINDOW_MAX_THREADS: u32 = 1024;
    /// What a stream call answers (`QfwdCommit::status`): no window completed, a commit,
    /// or why the round was refused (`decode::window::StreamError`).
    STREAM_NO_COMMIT: i32 = 0;
    STREAM_COMMIT: i32 = 1;
    STREAM_ROUND_REPEATED: i32 = -1;
    STREAM_ROUNDS_MISSING: i32 = -2;
    STREAM_FINISHED: i32 = -3;
    STREAM_TOO_SHORT: i32 = -4;
});

abi_struct!(
    /// One window graph of a stream model in the model's word blob: counts, and where its
    /// arrays start (word offsets in the blob). Vertex `n` is the boundary; edge `e`
    /// weighs `weight[e]` and flips observables `obs[2e] | obs[2e + 1] << 32`;
    /// `adj_offset` holds the CSR row offsets (`n + 2` words) of `adj_pairs`, `{edge,
    /// other end}` per entry (the commit's crossings read them).
    WindowGraphDesc: "QfwdWindowGraph" {
        vertices: u32,
        edges: u32,
        rounds: u32,
        commit_rounds: u32,
        adj_offset: u32,
        adj_pairs: u32,
        weight: u32,
        obs: u32,
        /// Per vertex: its boundary entry, and the round where its boundary path leaves.
        bounds: u32,
        exits: u32,
        /// Per round, `row_words` words: bit k set where kept slot k has a detector (an
        /// event elsewhere is ignored).
        present: u32,
        /// The window starts at round 0 (its first rounds are the head's); it ends with
        /// the final round (its last rounds are the tail's).
        from_start: u32,
        is_final: u32,
        reserved: u32,
    }
);

abi_struct!(
    /// A stream model on the device (`src/gpu/window.rs` packs it): the blob's address,
    /// the window graphs' descriptors (word offset), the distance tables, and the stream
    /// settings.
    StreamModelDesc: "QfwdStreamModel" {
        /// Device address of the model's u32 blob.
        data: u64,
        /// Word offset of `graph_count` [`WindowGraphDesc`]s in the blob.
        graphs: u32,
        graph_count: u32,
        rounds_per_window: u32,
        commit_rounds: u32,
        /// Kept slots per round (K), and the word offset of their slot indices.
        slots: u32,
        kept_slots: u32,
        round_bytes: u32,
        /// u32 words of one stored round (ceil(K / 32)).
        row_words: u32,
        min_rounds: u32,
        first_final_from_start: u32,
        first_final_from_bulk: u32,
        /// Most defects a window can hold (its detectors).
        max_defects: u32,
        /// u32 words of a decoding group's scratch, and where its arrays start (`SCR_*`);
        /// the words before `SCR_COST` (the scratch without the exact matching's tables).
        scratch_words: u32,
        scratch: [u32; 14],
        scratch_hot_words: u32,
        /// Clusters of at most this many defects are matched exactly
        /// (`decode::window::MatchLimits`).
        match_defects: u32,
        /// The pair tables: word offset, rounds a pair spans (W), head and tail rounds
        /// (contexts `b * (tail + 1) + t`, `(head + 1) * (tail + 1)` of them).
        pairs: u32,
        span: u32,
        head_rounds: u32,
        tail_rounds: u32,
        /// Word offset of the observable masks (two words each, low first).
        masks: u32,
        /// The bulk window graph, whose tables a block may copy (`CACHE_*`, words
        /// `cache_words` in all).
        bulk_graph: u32,
        cache_words: u32,
        cache: [u32; 3],
        reserved: u32,
    }
);

abi_struct!(
    /// One stream's state on the device; its rounds are a ring of `rounds_per_window`
    /// rows of `row_words` words beside it (round `r` in row `r % W`).
    StreamStateDesc: "QfwdStreamState" {
        next_round: u64,
        window_start: u64,
        finished: u32,
        reserved: u32,
    }
);

abi_struct!(
    /// What a stream call answers.
    StreamCommitDesc: "QfwdCommit" {
        first_round: u64,
        flips: u64,
        rounds: u32,
        /// `STREAM_*`.
        status: i32,
    }
);

abi_struct!(
    /// The batch window kernel's one parameter (by value): every stream pushes `rounds`
    /// rounds, from round `first_round`, then (when `finish` is 1) its final round. A
    /// block of `group_threads`-thread groups (32: a warp per window) serves one stream a
    /// group.
    WindowBatchParams: "QfwdWindowBatch" {
        /// Device address of the [`StreamModelDesc`].
        model: u64,
        /// `streams` [`StreamStateDesc`]s, and their rows (`W * row_words` words each).
        states: u64,
        rows: u64,
        /// Events, `streams x (rounds + finish) x round_bytes` bytes.
        events: u64,
        /// `streams x commits_per_stream` [`StreamCommitDesc`]s, and how many each wrote.
        commits: u64,
        counts: u64,
        /// Global scratch (`scratch_words` per group), or 0: dynamic shared memory, after
        /// the block's copy of the bulk tables (`scratch_hot_words` per group, the exact
        /// matching's tables then at `dp`).
        scratch: u64,
        /// With a shared scratch: each group's exact-matching tables in global memory
        /// (`scratch_words - scratch_hot_words` words a group).
        dp: u64,
        /// Per stream, the clock cycles its windows' decodes took (u64, added to).
        cycles: u64,
        first_round: u64,
        streams: u32,
        rounds: u32,
        finish: u32,
        commits_per_stream: u32,
        group_threads: u32,
        /// 1: the block copies the bulk tables into shared memory first.
        cached: u32,
    }
);

abi_consts!(render_stream_serve {
    /// Words of the stream server's control block (`StreamServeParams::control`): the
    /// submission number the host rang last, the stop flag, how many entries and how
    /// many jobs that submission holds.
    SERVE_SEQ_WORD: u32 = 0;
    SERVE_STOP_WORD: u32 = 1;
    SERVE_ENTRIES_WORD: u32 = 2;
    SERVE_JOBS_WORD: u32 = 4;
    /// Word of the device-side relay (`StreamServeParams::relay`) from which blocks claim
    /// the submission's jobs after their first (block `b` starts with job `b`; block 0
    /// sets it to the grid size before relaying a number).
    SERVE_CLAIM_WORD: u32 = 3;
    /// Relay words: how many submissions block 0 relayed (the blocks wait for the next
    /// count), and how many (block, submission) pairs were served, each block adding one
    /// when it finishes a submission (block 0 relays submission `n + 1` once it reads
    /// `n * grid`: no stream's job starts before its job in the last submission ended).
    SERVE_COUNT_WORD: u32 = 5;
    SERVE_FINISHED_WORD: u32 = 6;
    /// Submission buffers the host fills in turn (`StreamServeParams::buffer_stride`
    /// apart): submission `n` (from 1) is in buffer `(n - 1) % SERVE_BUFFERS` and bears the
    /// number `n` (wrapping), so the host writes one while the device serves the other.
    SERVE_BUFFERS: u32 = 2;
    /// Bytes of the control block.
    SERVE_CONTROL_BYTES: u32 = 64;
    /// [`StreamServeEntryDesc::flags`]: reset the stream first; its last input is its
    /// final round.
    SERVE_RESET: u32 = 1;
    SERVE_FINISH: u32 = 2;
    /// [`StreamServeEntryDesc::next`] of a job's last entry.
    SERVE_NO_NEXT: u32 = u32::MAX;
    /// The kernel's counters, `SERVE_PROFILE_WORDS` u64s per block in `profile`, summed
    /// over its life: clock cycles waiting for submissions, reading entries and staging
    /// events, decoding (pushing rounds, finishing); entries, rounds and answers served;
    /// the cycles of the calls that answered (decoded a window).
    SERVE_PROF_IDLE: u32 = 0;
    SERVE_PROF_STAGE: u32 = 1;
    SERVE_PROF_DECODE: u32 = 2;
    SERVE_PROF_ENTRIES: u32 = 3;
    SERVE_PROF_ROUNDS: u32 = 4;
    SERVE_PROF_ANSWERS: u32 = 5;
    SERVE_PROF_WINDOWS: u32 = 6;
    SERVE_PROFILE_WORDS: u32 = 8;
});

abi_struct!(
    /// One piece of a stream's work in a submission to the persistent stream kernel: a
    /// reset first (`SERVE_RESET`), `rounds` rounds from `first_round`, then its final
    /// round (`SERVE_FINISH`). Its events start `events_offset` bytes into the events area
    /// (a multiple of 4); its answers go to commit slots `commit_offset ..` (at most
    /// `commit_capacity`), their number to the entry's count. A job (one stream's pieces,
    /// served in order by one block) starts at one of the first `jobs` entries and goes
    /// on at `next` (`SERVE_NO_NEXT`: its last).
    StreamServeEntryDesc: "QfwdServeEntry" {
        first_round: u64,
        stream: u32,
        flags: u32,
        rounds: u32,
        events_offset: u32,
        commit_offset: u32,
        commit_capacity: u32,
        next: u32,
        reserved: u32,
    }
);

abi_struct!(
    /// The persistent stream kernel's one parameter: every stream's state on the device,
    /// and the submission buffers in mapped host memory (`src/mailbox/streams.rs`). The
    /// blocks claim a submission's jobs one by one; block `b` then writes the
    /// submission's number into its buffer's `done[b]`.
    StreamServeParams: "QfwdStreamServe" {
        /// Device address of the [`StreamModelDesc`].
        model: u64,
        /// `streams` [`StreamStateDesc`]s and their rows, in device memory.
        states: u64,
        rows: u64,
        /// Global scratch (`scratch_words` per block), or 0: dynamic shared memory.
        scratch: u64,
        /// Per block, `stage_bytes` of device memory the entry's events are copied into.
        stage: u64,
        /// Device memory where block 0 relays the control words to the other blocks
        /// (`SERVE_CONTROL_BYTES`, zeroed).
        relay: u64,
        /// Mapped host memory: the control block, one done word per block, the entries
        /// (the first `jobs` of them begin the jobs), the events, the commit slots
        /// ([`StreamCommitDesc`]) and one count per entry.
        control: u64,
        done: u64,
        entries: u64,
        events: u64,
        commits: u64,
        counts: u64,
        /// Mapped host memory: `SERVE_PROFILE_WORDS` u64 counters per block.
        profile: u64,
        /// Bytes from one submission buffer's `control`, `done`, `entries`, `events`,
        /// `commits` and `counts` to the next buffer's (`SERVE_BUFFERS` of them).
        buffer_stride: u64,
        streams: u32,
        max_entries: u32,
        stage_bytes: u32,
        /// Pause between two polls of an idle control block (ns).
        poll_ns: u32,
    }
);

abi_struct!(
    /// The decoders' parameter block, in `device/decode.cu`'s constant memory (written by
    /// [`crate::gpu::decoder::DeviceDecoders::install`]). Addresses are device addresses
    /// (0: not loaded); offsets are bytes into one warp's `uf` state, as
    /// [`crate::gpu::decoder::UfScratchLayout`] computes them.
    DecoderParams: "QfwdDecoderParams" {
        lut_table: u64,
        uf_adj_offset: u64,
        uf_adj: u64,
        uf_edges: u64,
        uf_edge_obs: u64,
        uf_boundary: u64,
        /// Global per-warp state, or 0: in dynamic shared memory.
        uf_scratch: u64,
        /// Low-weight syndrome table: `uf_table_entries` results of `uf_result_bytes` each
        /// (0: no table).
        uf_table: u64,
        /// The table's index array (u32:
        /// [`crate::decode::uf_table::UfTable::device_index`]).
        uf_table_index: u64,
        lut_detectors: u32,
        lut_entry_bytes: u32,
        uf_detectors: u32,
        uf_result_bytes: u32,
        uf_scratch_bytes: u32,
        uf_scratch_warps: u32,
        uf_smem_offset: u32,
        uf_off_visited: u32,
        uf_off_defect: u32,
        uf_off_vbits: u32,
        uf_off_growth: u32,
        uf_clear_bytes: u32,
        uf_off_tree: u32,
        uf_off_verts: u32,
        uf_off_frontier: u32,
        uf_off_order: u32,
        uf_off_levels: u32,
        uf_off_cand: u32,
        /// `K`: requests with `1 ..= K` defects are answered from the table (0: no table).
        uf_table_defects: u32,
        uf_table_entries: u32,
        /// Most incident edges of a detector (the kernel loads rows [`DEC_UNROLL`] entries
        /// at a time; the forest keeps a row's candidates in a 64-bit mask).
        uf_max_degree: u32,
        loaded: u32,
        /// The split path's distance matrix (u16, `n x n` row-major:
        /// [`crate::decode::uf_split::Distances::as_slice`]), or 0: no split path (no
        /// table, or a model above [`crate::decode::uf_split::MAX_SPLIT_DETECTORS`]
        /// detectors).
        uf_dist: u64,
        /// The table's growth times (u16 per entry:
        /// [`crate::decode::uf_table::UfTable::times`]), with `uf_dist`.
        uf_table_times: u64,
        /// The split path's arrays as one image (`DeviceModels::new`: the distance matrix at
        /// 0, then the table's index, then the entries and times of every group of at most `S`
        /// defects), which the persistent kernel copies into its shared memory at start; 0:
        /// none.
        uf_stage: u64,
        /// The image's bytes (a multiple of 16), 0 when the kernel does not stage it.
        uf_stage_bytes: u32,
        /// Where the block's copy starts in dynamic shared memory
        /// ([`crate::gpu::decoder::DeviceDecoders::place`]).
        uf_stage_offset: u32,
        /// Offsets in the image of the index, the entries' results and their times.
        uf_stage_index: u32,
        uf_stage_obs: u32,
        uf_stage_times: u32,
        /// Entries in the image: the table's first ones, those of groups of at most `S`.
        uf_stage_entries: u32,
        /// The graph's arrays (`uf_adj_offset` .. `uf_boundary`, one contiguous region of the
        /// blob that starts at `uf_adj_offset`): its bytes (a multiple of 16) when the
        /// persistent kernel copies it into shared memory, 0 when it does not.
        uf_graph_bytes: u32,
        /// Where the block's copy of the graph starts in dynamic shared memory.
        uf_graph_offset: u32,
        /// Per-warp state: each cluster vertex's potential (u64 per vertex), the observables
        /// of a path from its cluster's reference vertex (decode/src/uf_potential.rs).
        uf_off_phi: u32,
        /// The split path is tried for at most this many defects (at most
        /// [`crate::decode::uf_split::MAX_SPLIT_DEFECTS`];
        /// [`crate::decode::uf_split::split_limit`]): above it, the attempt fails on most
        /// shots and only delays the growth that answers them.
        uf_split_max_defects: u32,
        /// The observable part's map (uint2 per 32-detector word of the wire's syndrome:
        /// kept detectors' mask, the part's index of the first;
        /// [`crate::decode::ObservablePart::device_words`]), or 0: the model is decoded
        /// whole. `uf_detectors` and the other `uf` fields describe the part.
        uf_keep: u64,
        /// Detectors of a request's syndrome (the whole model's; what the payload check reads).
        uf_wire_detectors: u32,
        /// The request budgets ([`crate::decode::budget`]): a request with more defects is
        /// answered `OVER_BUDGET` without decoding; [`crate::gpu::decoder::NO_BUDGET`]: none.
        uf_max_defects: u32,
        lut_max_defects: u32,
        /// Unused (keeps the block a multiple of 8 bytes).
        dec_reserved: u32,
    }
);

/// The whole header, as NVRTC and `device/qfwd_abi.h` receive it.
pub fn header() -> String {
    let mut out = String::new();
    out.push_str(
        "// Generated from src/abi.rs by qfwd: the constants and parameter structs that the\n\
         // host and the kernels share. Do not edit: change src/abi.rs, then run\n\
         // `QFWD_BLESS=1 cargo test -p qfwd --lib abi` to rewrite this file.\n\
         #ifndef QFWD_ABI_H\n\
         #define QFWD_ABI_H\n\n",
    );
    out.push_str("// ---- wire ----\n");
    render_wire(&mut out);
    out.push_str("\n// ---- mailbox (device/forward.cu) ----\n");
    render_mailbox(&mut out);
    out.push_str("\n// ---- mlx5 ----\n");
    render_mlx5(&mut out);
    out.push_str("\n// ---- GPU-initiated doorbells (device/doorbell.cu) ----\n");
    render_posting(&mut out);
    out.push_str("\n// ---- decoders (device/decode.cu) ----\n");
    render_decoders(&mut out);
    out.push_str("\n// ---- gpu-direct (device/direct.cu) ----\n");
    render_direct(&mut out);
    for render in [
        PersistentParams::render,
        ServeOnceParams::render,
        PostingDesc::render,
        DoorbellSendsParams::render,
        NicPostsParams::render,
        LinkDesc::render,
        DirectParams::render,
        DecoderParams::render,
    ] {
        out.push('\n');
        render(&mut out);
    }
    out.push_str("\n// ---- stream windows (device/window.cu) ----\n");
    render_window(&mut out);
    for render in [
        WindowGraphDesc::render,
        StreamModelDesc::render,
        StreamStateDesc::render,
        StreamCommitDesc::render,
        WindowBatchParams::render,
    ] {
        out.push('\n');
        render(&mut out);
    }
    out.push_str("\n// ---- the persistent stream kernel (device/stream.cu) ----\n");
    render_stream_serve(&mut out);
    for render in [StreamServeEntryDesc::render, StreamServeParams::render] {
        out.push('\n');
        render(&mut out);
    }
    out.push_str("\n#endif // QFWD_ABI_H\n");
    out
}

/// Where the committed copy lives, relative to the repository root.
pub const HEADER_FILE: &str = "device/qfwd_abi.h";

/// The NVRTC include name of the header.
pub const HEADER_NAME: &str = "qfwd_abi.h";

const _: () = assert!(MAX_FUNCTIONS as usize == 32);
const _: () =
    assert!((CQE_FORMAT_INLINE_32 as u8) << 2 == crate::mlx5::layout::cqe::INLINE_SCATTER_32);
const _: () = assert!(
    SCR_COUNT == 14
        && SCR_CHOICE + 1 == SCR_COUNT
        && SCR_COST == SCR_SCALARS + 1
        && CACHE_COUNT == 3
);
const _: () = assert!(std::mem::size_of::<DecoderParams>() == 248);
const _: () = assert!(std::mem::size_of::<PostingDesc>() as u32 <= POSTING_LOCK);
const _: () = assert!(std::mem::size_of::<LinkDesc>() == 11 * 8 + 12 * 4);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_header_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(HEADER_FILE);
        let generated = header();
        if std::env::var_os("QFWD_BLESS").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{HEADER_FILE} is stale: run `QFWD_BLESS=1 cargo test -p qfwd --lib abi`"
        );
    }

    #[test]
    fn header_renders_constants_and_layouts() {
        let h = header();
        assert!(h.contains("#define QFWD_REQUEST_MAGIC 0x43555152u"));
        assert!(h.contains("#define QFWD_STATUS_OVERSIZED (-5)"));
        assert!(h.contains("    unsigned int function_ids[32];"));
        assert!(h.contains(&format!(
            "static_assert(sizeof(struct QfwdDirectParams) == {}",
            std::mem::size_of::<DirectParams>()
        )));
        let p = DirectParams {
            links: 0x1122,
            nlinks: 3,
            ..Default::default()
        };
        let b = p.to_bytes();
        assert_eq!(b.len(), std::mem::size_of::<DirectParams>());
        assert_eq!(&b[..8], &0x1122u64.to_le_bytes());
        assert_eq!(&b[16..20], &3u32.to_le_bytes());
    }

    /// The device sources take every shared name from the header: a `#define` of one of
    /// them there (a hand mirror creeping back) would silently shadow or duplicate it.
    #[test]
    fn device_sources_define_no_header_name() {
        use crate::gpu::nvrtc;
        let h = header();
        let defined: Vec<&str> = h
            .lines()
            .filter_map(|l| l.strip_prefix("#define "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        let structs: Vec<&str> = h
            .lines()
            .filter_map(|l| l.strip_prefix("struct "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert!(defined.contains(&"QFWD_CHUNK_BYTES") && structs.contains(&"QfwdDecoderParams"));
        let sources = [nvrtc::FORWARD_DOORBELL, nvrtc::DIRECT]
            .into_iter()
            .chain(nvrtc::HEADERS.iter().copied());
        for src in sources {
            assert!(
                src.source.contains("#include \"qfwd_abi.h\"")
                    || src.file.starts_with("decode/")
                    || src.file.starts_with("window/"),
                "{} does not include qfwd_abi.h",
                src.file
            );
            for line in src.source.lines().map(str::trim_start) {
                if let Some(rest) = line.strip_prefix("#define ") {
                    let name = rest.split_whitespace().next().unwrap_or("");
                    assert!(!defined.contains(&name), "{} defines {name}", src.file);
                }
                if let Some(rest) = line.strip_prefix("struct ") {
                    let name = rest.split_whitespace().next().unwrap_or("");
                    assert!(!structs.contains(&name), "{} declares {name}", src.file);
                }
            }
        }
    }

    #[test]
    fn device_codes_match_the_handlers() {
        use crate::handler::Handler;
        assert_eq!(Handler::Parity.device_code(), CODE_PARITY);
        assert_eq!(
            crate::mlx5::Doorbell::BlueFlame.device_code(),
            DB_MODE_BLUEFLAME
        );
        assert_eq!(
            crate::mlx5::Doorbell::Regular.device_code(),
            DB_MODE_REGULAR
        );
        assert_eq!(
            crate::mlx5::Doorbell::CpuAssisted.device_code(),
            DB_MODE_CPU_ASSISTED
        );
    }
}
