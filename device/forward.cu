// qfwd device code: the persistent mailbox kernel (`gpu-persistent`), the one-request
// kernel the baselines launch (`gpu-launch`, `gpu-graph`), and the handlers all three
// share.
//
// Compiled at run time by NVRTC (src/gpu/nvrtc.rs) for the device's own architecture.
// NVRTC has no system headers: only built-ins, our own typedefs below, and qfwd_abi.h,
// generated from src/abi.rs: every constant and parameter struct the host shares with this
// file comes from there.
//
// The slot protocol is documented in src/mailbox/layout.rs.
//
// Memory-ordering rules (docs/architecture.md, "Mailbox rules"):
//   * requests are polled with one `ld.volatile.global.v4.u32` per 16 B chunk; in
//     `inline` mode every chunk carries the slot's sequence tag, so one read says both
//     "is it there" and "what is it";
//   * responses are published as tagged 16 B chunks, one `st.volatile.global.v4.u32`
//     each, and NO system-scope fence: the host accepts a response only when every
//     chunk's tag matches, so ordering is a property of the data;
//   * the claim word lives in device memory (an L2 atomic, not a PCIe round trip).
//
// GPU-initiated doorbells (`regular` / `blueflame`, docs/architecture.md): built with
// QFWD_DEVICE_DOORBELL defined and device/doorbell.cu before this file (src/gpu/nvrtc.rs,
// FORWARD_DOORBELL), and launched with a NIC block (`nic` != 0), the persistent kernel
// sends each response to the QPU itself: it builds the CUQS datagram (requests then carry
// their request_id and ptp_timestamp after the argument), posts it as an inline SEND WQE
// and rings the doorbell (device_answer below; one system fence per post, in
// qfwd_db_nic_post), then publishes a one-chunk "already sent" completion for the host's
// counters. Built without it (this file alone), the kernel never sends.

#include "qfwd_abi.h"

typedef unsigned int u32;
typedef unsigned long long u64;

// Device-only: warps a block may hold (the hardware's 1024 threads).
#define QFWD_MAX_WARPS_PER_BLOCK 32u
#define QFWD_FULL_MASK 0xFFFFFFFFu
#define QFWD_WARP 32u

struct Chunk {
    u32 x, y, z, tag;
};

// Chunk `lane + 32 r` of a request, for r < QFWD_MAX_ROUNDS (slots of up to 4 KiB).
// Indexed with constants only (fully unrolled loops), so it stays in registers.
struct LaneChunks {
    Chunk c[QFWD_MAX_ROUNDS];
};

// ---- memory idioms ---------------------------------------------------------------------

// One 16 B read of host (or device) memory: presence and payload in one PCIe round trip.
static __device__ __forceinline__ Chunk load_chunk(u64 addr)
{
    Chunk c;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(c.x), "=r"(c.y), "=r"(c.z), "=r"(c.tag)
                 : "l"(addr)
                 : "memory");
    return c;
}

// One 16 B write; the chunk is complete the moment the host can see any of it.
static __device__ __forceinline__ void store_chunk(u64 addr, u32 x, u32 y, u32 z, u32 tag)
{
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};"
                 :
                 : "l"(addr), "r"(x), "r"(y), "r"(z), "r"(tag)
                 : "memory");
}

static __device__ __forceinline__ u32 load_u32_volatile(u64 addr)
{
    u32 v;
    asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(addr) : "memory");
    return v;
}

// The claim word is device memory shared by the poller warps: gpu scope is enough.
static __device__ __forceinline__ u64 load_u64_relaxed_gpu(u64 addr)
{
    u64 v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(addr) : "memory");
    return v;
}

static __device__ __forceinline__ u64 globaltimer_ns()
{
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

static __device__ __forceinline__ u32 min_u32(u32 a, u32 b) { return a < b ? a : b; }

// Chunks needed for `bytes` of stream at `per_chunk` data bytes each, computed in 64 bits so
// a corrupt length cannot wrap around.
static __device__ __forceinline__ u64 chunks_for(u64 bytes, u32 per_chunk)
{
    return (bytes + per_chunk - 1u) / per_chunk;
}

// Sequence number -> the tag its slot carries: lap-based, never 0, never the stop tag, and
// different on consecutive uses of a slot (as layout::tag_for).
static __device__ __forceinline__ u32 tag_for(u64 seq, u32 slots)
{
    return (u32)((seq / slots) % QFWD_TAG_PERIOD) + 1u;
}

static __device__ __forceinline__ void clear_chunks(LaneChunks& lc)
{
#pragma unroll
    for (u32 r = 0; r < QFWD_MAX_ROUNDS; ++r) {
        lc.c[r].x = 0u;
        lc.c[r].y = 0u;
        lc.c[r].z = 0u;
        lc.c[r].tag = 0u;
    }
}

// Loads chunks [have, n) (lane i: chunks i, i + 32, ...). Every load is issued before any
// result is used, so a whole request costs one PCIe round trip, not one per chunk.
// The persistent kernel passes ROUNDS = 1 when n <= 32: each unrolled round is ~10
// instructions of latency for a lone warp, even with nothing to load.
template <u32 ROUNDS = QFWD_MAX_ROUNDS>
static __device__ __forceinline__ void load_chunks(LaneChunks& lc, u64 base, u32 lane, u32 have,
                                                   u32 n)
{
#pragma unroll
    for (u32 r = 0; r < ROUNDS; ++r) {
        const u32 k = lane + QFWD_WARP * r;
        if (k < n && k >= have) {
            lc.c[r] = load_chunk(base + (u64)QFWD_CHUNK_BYTES * k);
        }
    }
}

// True on every lane when each of the chunks [0, n) carries `want` (n <= 32 * ROUNDS).
template <u32 ROUNDS = QFWD_MAX_ROUNDS>
static __device__ __forceinline__ bool tags_match(const LaneChunks& lc, u32 lane, u32 n, u32 want)
{
    bool ok = true;
#pragma unroll
    for (u32 r = 0; r < ROUNDS; ++r) {
        const u32 k = lane + QFWD_WARP * r;
        if (k < n && lc.c[r].tag != want) {
            ok = false;
        }
    }
    return __all_sync(QFWD_FULL_MASK, ok) != 0;
}

// Inline chunks carry 12 data bytes: the request stream [code][arg_len][arg...] is
// rebuilt word by word in shared memory (n <= 32 * ROUNDS).
template <u32 ROUNDS = QFWD_MAX_ROUNDS>
static __device__ __forceinline__ void stage_inline(const LaneChunks& lc, u32 lane, u32 n,
                                                    u32* stage)
{
#pragma unroll
    for (u32 r = 0; r < ROUNDS; ++r) {
        const u32 k = lane + QFWD_WARP * r;
        if (k < n) {
            stage[3u * k] = lc.c[r].x;
            stage[3u * k + 1u] = lc.c[r].y;
            stage[3u * k + 2u] = lc.c[r].z;
        }
    }
}

// Buffer-mode payload chunks are 16 plain data bytes.
static __device__ __forceinline__ void stage_plain(const LaneChunks& lc, u32 lane, u32 n,
                                                   u32* stage)
{
#pragma unroll
    for (u32 r = 0; r < QFWD_MAX_ROUNDS; ++r) {
        const u32 k = lane + QFWD_WARP * r;
        if (k < n) {
            stage[4u * k] = lc.c[r].x;
            stage[4u * k + 1u] = lc.c[r].y;
            stage[4u * k + 2u] = lc.c[r].z;
            stage[4u * k + 3u] = lc.c[r].tag;
        }
    }
}

// ---- handlers (shared by all three GPU topologies) -------------------------------------

// Parity: XOR of every bit of the argument; result 1 byte (0 or 1). The warp splits the
// words, masks the bytes past arg_len, and reduces with shuffles.
static __device__ int handler_parity(const u32* arg, u32 arg_len, u32* out, u32 out_cap,
                                     u32* result_len, u32 lane)
{
    *result_len = 0u;
    if (out_cap < 1u) {
        return QFWD_STATUS_BAD_ARGUMENT;
    }
    u32 acc = 0u;
    const u32 words = (arg_len + 3u) / 4u;
    for (u32 i = lane; i < words; i += QFWD_WARP) {
        u32 w = arg[i];
        const u32 valid = arg_len - 4u * i;
        if (valid < 4u) {
            w &= (1u << (8u * valid)) - 1u;
        }
        acc ^= w;
    }
#pragma unroll
    for (u32 offset = 16u; offset > 0u; offset >>= 1) {
        acc ^= __shfl_xor_sync(QFWD_FULL_MASK, acc, offset);
    }
    if (lane == 0u) {
        out[0] = (u32)(__popc(acc) & 1);
    }
    *result_len = 1u;
    return QFWD_STATUS_OK;
}

// Parity straight from the poll's registers, for a request that arrived whole in the first
// read (lane k holds chunk k: stream words 3k..3k+2 inline, 4k..4k+3 in a buffer payload;
// the argument from word 2 on). Same
// result as handler_parity, without staging the request in shared memory or the dispatch's
// warp barriers: a lone warp issues about one instruction per 7 cycles, so the short path
// is most of what separates the kernel from the bare mailbox (scripts/mailbox-floor.cu).
// `per_chunk`: 3 stream words a chunk (inline: the fourth is the tag) or 4 (buffer payload).
static __device__ __forceinline__ u32 parity_in_registers(const Chunk& c, u32 lane, u32 n,
                                                          u32 arg_len, u32 per_chunk)
{
    u32 acc = 0u;
    if (lane < n) {
        const u32 words[4] = {c.x, c.y, c.z, c.tag};
#pragma unroll
        for (u32 m = 0; m < 4u; ++m) {
            const u32 j = per_chunk * lane + m;
            if (m >= per_chunk) {
                break;
            }
            if (j >= 2u && 4u * (j - 2u) < arg_len) {
                u32 w = words[m];
                const u32 valid = arg_len - 4u * (j - 2u);
                if (valid < 4u) {
                    w &= (1u << (8u * valid)) - 1u;
                }
                acc ^= w;
            }
        }
    }
    acc = __reduce_xor_sync(QFWD_FULL_MASK, acc);
    return (u32)(__popc(acc) & 1);
}

// Debug stall (tests of the host watchdog): spins for arg[0] microseconds (at most
// QFWD_MAX_STALL_US), or until the host's release word reaches arg[1] (when given; else
// until it changes), whichever comes first. Passing the target generation in the request
// makes a release that lands before the stall starts still count. Lane 0 decides and the
// warp follows, so the warp stays converged.
static __device__ int handler_stall(const u32* arg, u32 arg_len, u32* result_len, u64 control,
                                    u32 lane)
{
    *result_len = 0u;
    if (arg_len < 4u) {
        return QFWD_STATUS_BAD_ARGUMENT;
    }
    const u64 budget_ns = (u64)min_u32(arg[0], QFWD_MAX_STALL_US) * 1000ull;
    const u64 release = control + QFWD_CONTROL_RELEASE_OFFSET;
    const u32 target = arg_len >= 8u ? arg[1] : load_u32_volatile(release) + 1u;
    const u64 start = globaltimer_ns();
    for (;;) {
        u32 done = 0u;
        if (lane == 0u) {
            done = (globaltimer_ns() - start >= budget_ns) ||
                   ((int)(load_u32_volatile(release) - target) >= 0);
        }
        if (__shfl_sync(QFWD_FULL_MASK, done, 0) != 0u) {
            break;
        }
        __nanosleep(1000u);
    }
    return QFWD_STATUS_OK;
}

// The QEC decoders (lut: code 2, uf: code 3), one warp per request (device/decode.cu, an
// NVRTC named header: src/gpu/nvrtc.rs).
#include "decode.cu"

// THE dispatch point: one case per device handler code (Handler::device_code on the
// host). Called by all 32 lanes of a warp
// with the same arguments; `arg` and `out` are the warp's shared-memory staging buffers.
// DECODERS: false where the caller sends the decoders' requests to qfwd_decode_value
// instead (so no copy of their code is inlined here).
template <bool DECODERS>
static __device__ int qfwd_dispatch(u32 code, const u32* arg, u32 arg_len, u32* out, u32 out_cap,
                                    u32* result_len, u64 control, u32 lane)
{
    switch (code) {
    case QFWD_CODE_PARITY:
        return handler_parity(arg, arg_len, out, out_cap, result_len, lane);
    case QFWD_CODE_STALL:
        return handler_stall(arg, arg_len, result_len, control, lane);
    case QFWD_CODE_LUT:
    case QFWD_CODE_UF:
        if (DECODERS) {
            u64 flips = 0ull;
            const int status =
                qfwd_decode_value(code, arg, arg_len, out_cap, result_len, &flips, lane);
            if (lane < *result_len) { // the flips' bytes, LSB first (at most 8)
                ((u8*)out)[lane] = (u8)(flips >> (8u * lane));
            }
            return status;
        }
        break;
    default:
        break;
    }
    *result_len = 0u;
    return QFWD_STATUS_UNKNOWN_FUNCTION;
}

static __device__ __forceinline__ bool is_decoder(u32 code)
{
    return code == QFWD_CODE_LUT || code == QFWD_CODE_UF;
}

#ifdef QFWD_DEC_TRACE_DISPATCH
// Measuring only (QFWD_UF_TRACE=dispatch). Per warp of the block: the last handler call's
// cycles and those of the same call repeated at once (the handlers timed have no side
// effects and write the same result: what the call costs with its code, constants and data
// cached). The caller prints them with the request's own cycles ("QR"). Parity then takes
// the general path too, so the two can be compared.
static __shared__ uint4 qfwd_trace_dispatch[QFWD_MAX_WARPS_PER_BLOCK];
// Per warp: the cycles since the tag was seen at marks 0-3 of the request path (0: its
// chunk count known, 1: its tags checked, 2: staged and its claim issued, the handler next,
// 3: the claim's answer in, after the handler), 0 where a path has no such mark. Each mark
// costs a clock read and a store of its own, and this build keeps more values in local
// memory than the served one (the repeated handler): the spans locate the request path's
// cost, they overstate it.
static __shared__ uint4 qfwd_trace_marks[QFWD_MAX_WARPS_PER_BLOCK];
#define QFWD_TRACING_DISPATCH true
#define QFWD_TRACE_MARK(i, since)                                                             \
    do {                                                                                       \
        if (lane == 0u) {                                                                      \
            ((u32*)&qfwd_trace_marks[threadIdx.x / QFWD_WARP])[i] = (u32)(clock64() - (since)); \
        }                                                                                      \
    } while (0)

// The uf decoder rewrites its staged argument (decode.cu step 0), so the traced repeat
// runs on a copy of what the first call got: up to 256 bytes, held in two registers a
// lane (a longer argument repeats on what the first call left). With it, the set bits of
// the argument's bytes before its last 4 (a decoder's syndrome, before the count), for
// trace_request.
struct TraceArgCopy {
    u32 lo, hi, defects;
};

static __device__ __forceinline__ TraceArgCopy trace_arg_save(const u32* arg, u32 arg_len,
                                                              u32 lane)
{
    const u32 words = (arg_len + 3u) / 4u;
    const u32 syndrome_bytes = arg_len > 4u ? arg_len - 4u : 0u;
    TraceArgCopy c{0u, 0u, 0u};
    u32 bits = 0u;
    for (u32 k = 0; k < 2u; ++k) {
        const u32 j = lane + k * QFWD_WARP;
        const u32 v = j < words ? arg[j] : 0u;
        (k == 0u ? c.lo : c.hi) = v;
        const u32 valid = syndrome_bytes > 4u * j ? syndrome_bytes - 4u * j : 0u;
        bits += (u32)__popc(valid >= 4u ? v : v & ((1u << (8u * valid)) - 1u));
    }
    c.defects = __reduce_add_sync(QFWD_FULL_MASK, bits);
    return c;
}

static __device__ __forceinline__ void trace_arg_restore(const u32* arg, u32 arg_len,
                                                         TraceArgCopy c, u32 lane)
{
    u32* a = const_cast<u32*>(arg);
    const u32 words = (arg_len + 3u) / 4u;
    __syncwarp();
    if (lane < words) {
        a[lane] = c.lo;
    }
    if (lane + QFWD_WARP < words) {
        a[lane + QFWD_WARP] = c.hi;
    }
    __syncwarp();
}

static __device__ void trace_handler(long long cycles, long long again, u32 defects, u32 lane)
{
    if (lane == 0u) {
        qfwd_trace_dispatch[threadIdx.x / QFWD_WARP] =
            make_uint4((u32)cycles, (u32)again, defects, 0u);
    }
}

// "QR <code> <cycles since qr0> <handler cycles> <uf defects> <repeat cycles> <mark 0>
// <mark 1> <mark 2> <mark 3>", about 1 in 8 (the defects counted after the clock is read,
// from the staged request's `arg`).
static __device__ void trace_request(u32 code, long long qr0, const u32* arg, u32 arg_len,
                                     u32 lane)
{
    if (lane == 0u && (qr0 & 0x700ll) == 0ll) {
        const u32 total = (u32)(clock64() - qr0);
        const uint4 qd = qfwd_trace_dispatch[threadIdx.x / QFWD_WARP];
        const uint4 m = qfwd_trace_marks[threadIdx.x / QFWD_WARP];
        // The wire syndrome's defects, counted before the decode (it rewrites the stage).
        const u32 ndef = code == QFWD_CODE_UF ? qd.z : 0u;
        printf("QR %u %u %u %u %u %u %u %u %u\n", code, total, qd.x, ndef, qd.y, m.x, m.y, m.z,
               m.w);
    }
}
#else
#define QFWD_TRACING_DISPATCH false
#define QFWD_TRACE_MARK(i, since) ((void)0)
#endif

// Zeroes the response stream in `res` (resp_chunks * 3 words), every lane's stores visible
// to the warp when it returns.
static __device__ __forceinline__ void clear_response(u32* res, u32 resp_chunks, u32 lane)
{
    for (u32 i = lane; i < resp_chunks * 3u; i += QFWD_WARP) {
        res[i] = 0u;
    }
    __syncwarp();
}

// Runs the handler on the staged request and leaves the response stream [status]
// [result_len][result...] in `res` (resp_chunks * 3 words, zero-padded).
template <bool DECODERS>
static __device__ void compute_response(u32 code, u32 arg_len, int early_status,
                                        const u32* stage, u32* res, u32 resp_chunks,
                                        u64 control, u32 lane)
{
    clear_response(res, resp_chunks, lane);
    u32 result_len = 0u;
    int status = early_status;
    if (status == QFWD_STATUS_OK) {
        const u32 cap = resp_chunks * QFWD_INLINE_DATA_BYTES - QFWD_HEADER_BYTES;
#ifdef QFWD_DEC_TRACE_DISPATCH
        const TraceArgCopy saved = trace_arg_save(stage + 2, arg_len, lane);
        const long long qd0 = clock64();
#endif
        status = qfwd_dispatch<DECODERS>(code, stage + 2, arg_len, res + 2, cap, &result_len,
                                         control, lane);
#ifdef QFWD_DEC_TRACE_DISPATCH
        const long long qd1 = clock64();
        long long again = 0;
        if (code != QFWD_CODE_STALL) {
            u32 len2 = 0u;
            trace_arg_restore(stage + 2, arg_len, saved, lane);
            const long long qw0 = clock64();
            (void)qfwd_dispatch<DECODERS>(code, stage + 2, arg_len, res + 2, cap, &len2, control,
                                          lane);
            again = clock64() - qw0;
        }
        trace_handler(qd1 - qd0, again, saved.defects, lane);
#endif
    }
    __syncwarp();
    if (lane == 0u) {
        res[0] = (u32)status;
        res[1] = result_len;
    }
    __syncwarp();
}

// Publishes the response in `res` as tagged 12-byte pieces, each chunk one 16 B store, no
// fence. On the first lap of a tag cycle (tag 1) every chunk of the slot is rewritten, so a
// chunk left over from the previous cycle can never carry a matching tag (see layout.rs).
static __device__ __forceinline__ void publish_response(const u32* res, u64 resp_slot,
                                                        u32 resp_chunks, u32 tag, u32 lane)
{
    u32 n = (u32)chunks_for(QFWD_HEADER_BYTES + res[1], QFWD_INLINE_DATA_BYTES);
    if (tag == 1u) {
        n = resp_chunks;
    }
    for (u32 k = lane; k < n; k += QFWD_WARP) {
        store_chunk(resp_slot + (u64)QFWD_CHUNK_BYTES * k, res[3u * k], res[3u * k + 1u],
                    res[3u * k + 2u], tag);
    }
}

// Chunks of `per_chunk` data bytes taken by a request stream with an argument of `arg_len`
// bytes: `[code][arg_len][arg]`, and with `reply` the padding and the trailer [request_id]
// [ts lo][ts hi] (as Layout::request_stream_bytes). At most `max_chunks` for a request
// that fits, `max_chunks + 1` for one that cannot: a corrupt length cannot wrap around, and
// once it is bounded the arithmetic is 32-bit (a 64-bit division by 12 is a dozen dependent
// wide multiplies on every request's path).
static __device__ __forceinline__ u32 request_chunks(u32 arg_len, bool reply, u32 max_chunks,
                                                     u32 per_chunk)
{
    if (arg_len > max_chunks * per_chunk) { // slots are at most 4 KiB: no overflow
        return max_chunks + 1u;
    }
    const u32 bytes = reply ? QFWD_HEADER_BYTES + ((arg_len + 3u) & ~3u) + QFWD_REPLY_ID_BYTES
                            : QFWD_HEADER_BYTES + arg_len;
    return (bytes + per_chunk - 1u) / per_chunk;
}

#ifdef QFWD_DEVICE_DOORBELL
// Sends the response in `res` to the QPU through the NIC and publishes the one-chunk
// "already sent" completion {status, DEVICE_SENT | result_len, 0, tag} (every chunk of the
// slot on the first lap of a tag cycle, as publish_response does). `stage` holds the
// request stream with its reply trailer; it is reused to build the CUQS datagram (24-byte
// header + result). The completion is stored after the WQE and before the fence and
// doorbell of the post, by the posting lane: the host can count (and reuse the slot) no
// later than the QPU sees the answer. Returns false, having written nothing, when the
// device cannot send it (the datagram does not fit one inline WQE or the stage, or no lock
// or SQ room in time): the caller then publishes the response for the host to send.
// Called by the whole warp.
static __device__ bool device_answer(u64 nic, u32* stage, u32 arg_len, const u32* res,
                                     u64 resp_slot, u32 resp_chunks, u32 stage_words, u32 tag,
                                     u32 lane)
{
    const u32 result_len = res[1];
    const u32 len = QFWD_WIRE_HEADER_BYTES + result_len;
    if (len > QFWD_MAX_INLINE || (len + 3u) / 4u > stage_words) {
        return false;
    }
    const u32 id_word = (QFWD_HEADER_BYTES + ((arg_len + 3u) & ~3u)) / 4u;
    const u32 request_id = stage[id_word];
    const u32 ts_lo = stage[id_word + 1u];
    const u32 ts_hi = stage[id_word + 2u];
    __syncwarp();
    for (u32 i = lane; i < (result_len + 3u) / 4u; i += QFWD_WARP) {
        stage[6u + i] = res[2u + i];
    }
    if (lane == 0u) {
        stage[0] = QFWD_RESPONSE_MAGIC;
        stage[1] = res[0];
        stage[2] = result_len;
        stage[3] = request_id;
        stage[4] = ts_lo;
        stage[5] = ts_hi;
    }
    __syncwarp();
    u32 status = 0u;
    if (lane == 0u) {
        const unsigned char* datagram = (const unsigned char*)stage;
        struct QfwdNicPost post;
        status = qfwd_db_nic_begin(nic, len, &post);
        if (status == QFWD_DB_OK) {
            qfwd_db_nic_write(&post, datagram, len);
            const u32 n = tag == 1u ? resp_chunks : 1u;
            for (u32 k = n; k-- > 0u;) {
                const bool head = k == 0u;
                store_chunk(resp_slot + (u64)QFWD_CHUNK_BYTES * k, head ? res[0] : 0u,
                            head ? (QFWD_DEVICE_SENT | result_len) : 0u, 0u, tag);
            }
            qfwd_db_nic_ring(nic, &post, datagram, len);
        }
    }
    status = __shfl_sync(QFWD_FULL_MASK, status, 0);
    return status == QFWD_DB_OK;
}
#endif

// Handlers with an effect beyond their response may run only after the claim is won; the
// others (every decoder) run while the claim is in flight and are discarded if it is lost.
static __device__ __forceinline__ bool has_side_effects(u32 code)
{
    return code == QFWD_CODE_STALL;
}

// Where a poller group stands: its k-th request is sequence number group + k * groups, in
// `slot` with tag `tag`. Moving to the next request is incremental, so the poll loop does
// no 64-bit division (a software routine on the GPU, ~100 ns before each read).
struct Position {
    u64 k;
    u32 slot;
    u32 tag;
};

static __device__ __forceinline__ void position_at(Position& p, u64 k, u32 group, u32 groups,
                                                   u32 slots)
{
    const u64 seq = (u64)group + k * groups;
    p.k = k;
    p.slot = (u32)(seq % slots);
    p.tag = tag_for(seq, slots);
}

static __device__ __forceinline__ void position_next(Position& p, u32 groups, u32 slots)
{
    p.k += 1ull;
    p.slot += groups;
    while (p.slot >= slots) {
        p.slot -= slots;
        p.tag = p.tag == (u32)QFWD_TAG_PERIOD ? 1u : p.tag + 1u;
    }
}

static __device__ __forceinline__ void position_follow(Position& p, u64 k, u32 group,
                                                       u32 groups, u32 slots)
{
    if (k == p.k + 1ull) {
        position_next(p, groups, slots);
    } else {
        position_at(p, k, group, groups, slots);
    }
}

// ---- claim tickets ---------------------------------------------------------------------

// A group's ticket is read on every poll and CAS'ed on every claim. When the group's warps
// share a block it lives in shared memory (an SM-local atomic); otherwise in device memory
// (a round trip to L2 each time). scripts/mailbox-protocol.cu measured the difference on
// the H200 (64 slots, one group of 4 warps: 1.99 µs p50 with the shared-memory ticket,
// 2.62 µs with the device-memory one). Generic addresses, so one code path serves both.
static __device__ __forceinline__ u64 load_ticket(const unsigned long long* t)
{
    return *(const volatile unsigned long long*)t;
}

// ---- kernels ---------------------------------------------------------------------------

// The persistent kernel (its parameters: QfwdPersistentParams, qfwd_abi.h). `pollers` warps
// form `pollers / pollers_per_slot` groups; group g serves sequence numbers g, g + G,
// g + 2G, ... (an ownership scheme, so G requests are served in parallel and throughput is
// not one request per PCIe round trip), and the
// `pollers_per_slot` warps of a group all poll the group's next slot, out of phase (several
// warps polling one slot cut the detection delay: docs/architecture.md, "Mailbox rules").
// Within a group the first warp to see a complete request claims it with a CAS on the
// group's ticket (in shared memory when `claim_in_block`: every group lies within one
// block; else in device memory); a monotonic ticket means a warp that lags behind can never
// re-serve an old request. A group of one warp needs no CAS.
// Runs until the host writes the stop tag into the slots (every slot, so every warp sees it).
//
// state (device memory): group g's ticket (u64, requests it has claimed) at
// g * QFWD_STATE_CLAIM_STRIDE (the starting value when the ticket lives in shared memory); per-poller counters at QFWD_STATE_COUNTERS_OFFSET: polls,
// served, torn reads, lost claims (written at exit: counting costs nothing in the hot path).
// Dynamic shared memory: per warp req_slot_bytes (request staging) + resp_slot_bytes.
// `nic`: 0, or (built with QFWD_DEVICE_DOORBELL) the device NIC block of device/doorbell.cu:
// requests then carry the reply trailer and the kernel sends every response itself.
// At most 8 warps a block (256 threads, the default 8 pollers): ptxas then gives each
// thread up to 255 registers. The uf decoder inlined in the poll loop needs ~200 of them;
// at 16 warps (128 registers) the poller's own state spilled to local memory on every
// request (src/gpu/persistent.rs splits more pollers over several blocks). The doorbell
// build runs one warp a block and keeps its own register allocation.
#ifdef QFWD_DEVICE_DOORBELL
#define QFWD_PERSISTENT_BOUNDS
#else
#define QFWD_PERSISTENT_BOUNDS __launch_bounds__(256)
#endif
extern "C" __global__ void QFWD_PERSISTENT_BOUNDS qfwd_persistent(const QfwdPersistentParams p)
{
    const u64 req_ring = p.req_ring, resp_ring = p.resp_ring, control = p.control;
    const u64 state = p.state, nic = p.nic;
    const u32 slots = p.slots, req_slot_bytes = p.req_slot_bytes;
    const u32 resp_slot_bytes = p.resp_slot_bytes, rx_inline = p.rx_inline;
    const u32 poll_chunks = p.poll_chunks, pollers = p.pollers;
    const u32 pollers_per_slot = p.pollers_per_slot, claim_in_block = p.claim_in_block;
    extern __shared__ u32 smem[];
    __shared__ unsigned long long block_tickets[QFWD_MAX_WARPS_PER_BLOCK];
    const u32 lane = threadIdx.x & (QFWD_WARP - 1u);
    const u32 warp_in_block = threadIdx.x / QFWD_WARP;
    const u32 warp = blockIdx.x * (blockDim.x / QFWD_WARP) + warp_in_block;
    const u32 groups = pollers / pollers_per_slot;
    // With claim_in_block, the block's groups are block_group0, block_group0 + 1, ...
    const u32 block_group0 = blockIdx.x * (blockDim.x / QFWD_WARP) / pollers_per_slot;
    if (claim_in_block != 0u && threadIdx.x < QFWD_MAX_WARPS_PER_BLOCK &&
        block_group0 + threadIdx.x < groups) {
        block_tickets[threadIdx.x] = load_u64_relaxed_gpu(
            state + (u64)(block_group0 + threadIdx.x) * QFWD_STATE_CLAIM_STRIDE);
    }
    qfwd_dec_stage_model(threadIdx.x, blockDim.x);
    __syncthreads();
    if (warp >= pollers) {
        return;
    }
    const u32 req_words = req_slot_bytes / 4u;
    u32* stage = smem + warp_in_block * (req_words + resp_slot_bytes / 4u);
    u32* res = stage + req_words;
    const u32 req_chunks = req_slot_bytes / QFWD_CHUNK_BYTES;
    const u32 resp_chunks = resp_slot_bytes / QFWD_CHUNK_BYTES;
    // A group's warps are adjacent, so they sit on different schedulers of the SM (warp w
    // issues from scheduler w % 4): when they all serve one request (a decoder runs while
    // the claim is in flight), none slows another down.
    const u32 group = warp / pollers_per_slot;
    const bool needs_claim = pollers_per_slot > 1u;
    unsigned long long* const claim =
        claim_in_block != 0u
            ? &block_tickets[group - block_group0]
            : (unsigned long long*)(state + (u64)group * QFWD_STATE_CLAIM_STRIDE);
    // Inline polls read `poll_chunks` chunks at once (a small request arrives whole in one
    // read); buffer mode polls the flag chunk only.
    const u32 first = rx_inline ? min_u32(poll_chunks, req_chunks) : 1u;
    const u32 payload_first = min_u32(poll_chunks, req_chunks - 1u);
    const bool reply = nic != 0ull;

    u64 polls = 0ull, served = 0ull, torn = 0ull, lost = 0ull;
    u64 k0 = 0ull;
    if (lane == 0u) {
        k0 = load_ticket(claim);
    }
    Position pos;
    position_at(pos, __shfl_sync(QFWD_FULL_MASK, k0, 0), group, groups, slots);

    for (;;) {
        ++polls;
        const u64 req = req_ring + (u64)pos.slot * req_slot_bytes;
        const u32 want = pos.tag;
        LaneChunks lc;
        clear_chunks(lc);
        if (lane < first) {
            lc.c[0] = load_chunk(req + (u64)QFWD_CHUNK_BYTES * lane);
        }
        // Issued while the PCIe read is in flight: has another warp of the group taken it?
        u64 ticket = pos.k;
        if (needs_claim && lane == 0u) {
            ticket = load_ticket(claim);
        }
        ticket = __shfl_sync(QFWD_FULL_MASK, ticket, 0);
        const u32 tag0 = __shfl_sync(QFWD_FULL_MASK, lc.c[0].tag, 0);
        if (tag0 == QFWD_STOP_TAG) {
            break;
        }
        if (ticket != pos.k) {
            position_follow(pos, ticket, group, groups, slots);
            continue;
        }
        if (tag0 != want) {
            continue;
        }
        const u64 resp = resp_ring + (u64)pos.slot * resp_slot_bytes;
#ifdef QFWD_DEC_TRACE_DISPATCH
        // Measuring only: from the request's tag seen to its response stored (trace_request).
        const long long qr0 = clock64();
        if (lane == 0u) {
            qfwd_trace_marks[threadIdx.x / QFWD_WARP] = make_uint4(0u, 0u, 0u, 0u);
        }
#endif

        u32 code = 0u, arg_len = 0u;
        int early_status = QFWD_STATUS_OK;
        if (rx_inline) {
            code = __shfl_sync(QFWD_FULL_MASK, lc.c[0].x, 0);
            arg_len = __shfl_sync(QFWD_FULL_MASK, lc.c[0].y, 0);
            // Parity on a request that came whole in the first read: answered from
            // registers, one chunk {OK, 1, bit, tag} (what publish_response writes for
            // it; the first lap of a tag cycle, which rewrites the whole slot, takes the
            // general path). The shortest path from seeing a request to answering it: a
            // lone warp issues about one instruction per 7 cycles, so every instruction
            // here is latency (32-bit bound first, so the chunk count cannot wrap).
            if (code == QFWD_CODE_PARITY && !reply && want != 1u && !QFWD_TRACING_DISPATCH &&
                arg_len <= QFWD_INLINE_DATA_BYTES * first - QFWD_HEADER_BYTES) {
                const u32 n = (QFWD_HEADER_BYTES + arg_len + QFWD_INLINE_DATA_BYTES - 1u) /
                              QFWD_INLINE_DATA_BYTES;
                if (!__all_sync(QFWD_FULL_MASK, lane >= n || lc.c[0].tag == want)) {
                    ++torn; // the host is still writing it: read again, now
                    continue;
                }
                u64 previous = pos.k;
                if (needs_claim && lane == 0u) {
                    previous = atomicCAS(claim, pos.k, pos.k + 1ull);
                }
                const u32 bit = parity_in_registers(lc.c[0], lane, n, arg_len, 3u);
                previous = __shfl_sync(QFWD_FULL_MASK, previous, 0);
                if (previous != pos.k) {
                    ++lost;
                    position_follow(pos, previous, group, groups, slots);
                    continue;
                }
                if (lane == 0u) {
                    store_chunk(resp, (u32)QFWD_STATUS_OK, 1u, bit, want);
                }
                ++served;
                position_next(pos, groups, slots);
                continue;
            }
            const u32 need = request_chunks(arg_len, reply, req_chunks, QFWD_INLINE_DATA_BYTES);
            QFWD_TRACE_MARK(0, qr0);
            u32 n = 1u;
            if (need > req_chunks) {
                early_status = QFWD_STATUS_OVERSIZED;
            } else {
                n = need;
                bool whole;
                if (n <= QFWD_WARP) {
                    load_chunks<1>(lc, req, lane, first, n);
                    whole = tags_match<1>(lc, lane, n, want);
                } else {
                    load_chunks(lc, req, lane, first, n);
                    whole = tags_match(lc, lane, n, want);
                }
                if (!whole) {
                    ++torn; // the host is still writing it: read again, now
                    continue;
                }
                QFWD_TRACE_MARK(1, qr0);
            }
            // Claim and serve at once: a side-effect-free handler runs without waiting for
            // the claim's answer, and only the winner publishes. (The compiled CAS, generic
            // or ATOMS, is still waited for right after it is issued:
            // results/archive/h200-request-staging.txt.)
            u64 previous = pos.k;
            if (needs_claim && lane == 0u) {
                previous = atomicCAS(claim, pos.k, pos.k + 1ull);
            }
            if (n <= QFWD_WARP) {
                stage_inline<1>(lc, lane, n, stage);
            } else {
                stage_inline(lc, lane, n, stage);
            }
            __syncwarp();
            bool claimed = false;
            if (has_side_effects(code)) {
                previous = __shfl_sync(QFWD_FULL_MASK, previous, 0);
                if (previous != pos.k) {
                    ++lost;
                    position_follow(pos, previous, group, groups, slots);
                    continue;
                }
                claimed = true;
            }
            if (early_status == QFWD_STATUS_OK && is_decoder(code)) {
                // A decoder's answer stays in registers: with its status and length it is
                // one chunk (two past 4 result bytes), stored straight from them. Every
                // step through `res` in shared memory is latency a lone warp waits out.
                const u32 cap = resp_chunks * QFWD_INLINE_DATA_BYTES - QFWD_HEADER_BYTES;
                u32 len = 0u;
                u64 flips = 0ull;
                QFWD_TRACE_MARK(2, qr0);
#ifdef QFWD_DEC_TRACE_DISPATCH
                const TraceArgCopy saved = trace_arg_save(stage + 2, arg_len, lane);
                const long long qd0 = clock64();
#endif
                const int status =
                    qfwd_decode_value(code, stage + 2, arg_len, cap, &len, &flips, lane);
#ifdef QFWD_DEC_TRACE_DISPATCH
                const long long qd1 = clock64();
                trace_arg_restore(stage + 2, arg_len, saved, lane);
                const long long qw0 = clock64();
                {
                    u32 len2 = 0u;
                    u64 flips2 = 0ull;
                    (void)qfwd_decode_value(code, stage + 2, arg_len, cap, &len2, &flips2, lane);
                }
                trace_handler(qd1 - qd0, clock64() - qw0, saved.defects, lane);
#endif
                previous = __shfl_sync(QFWD_FULL_MASK, previous, 0);
                QFWD_TRACE_MARK(3, qr0);
                if (previous != pos.k) {
                    ++lost;
                    position_follow(pos, previous, group, groups, slots);
                    continue;
                }
                if (!reply && want != 1u) {
                    // What publish_response stores for it: {status, len, flips 0-3} and,
                    // past 4 bytes, {flips 4-7, 0, 0}.
                    if (lane == 0u) {
                        store_chunk(resp, (u32)status, len, (u32)flips, want);
                    } else if (lane == 1u && len > 4u) {
                        store_chunk(resp + QFWD_CHUNK_BYTES, (u32)(flips >> 32), 0u, 0u, want);
                    }
#ifdef QFWD_DEC_TRACE_DISPATCH
                    trace_request(code, qr0, stage + 2, arg_len, lane);
#endif
                    ++served;
                    position_next(pos, groups, slots);
                    continue;
                }
                // The first lap of a tag cycle, or a reply the device sends: the response
                // stream in `res`, as compute_response leaves it.
                clear_response(res, resp_chunks, lane);
                if (lane == 0u) {
                    res[0] = (u32)status;
                    res[1] = len;
                    res[2] = (u32)flips;
                    if (len > 4u) {
                        res[3] = (u32)(flips >> 32); // len <= cap: res has the room
                    }
                }
                __syncwarp();
            } else {
                compute_response<false>(code, arg_len, early_status, stage, res, resp_chunks,
                                        control, lane);
                if (!claimed) {
                    previous = __shfl_sync(QFWD_FULL_MASK, previous, 0);
                    if (previous != pos.k) {
                        ++lost;
                        position_follow(pos, previous, group, groups, slots);
                        continue;
                    }
                }
            }
        } else {
            // Flag seen: claim first, so only the winner pays the payload read.
            u64 previous = pos.k;
            if (needs_claim && lane == 0u) {
                previous = atomicCAS(claim, pos.k, pos.k + 1ull);
            }
            previous = __shfl_sync(QFWD_FULL_MASK, previous, 0);
            if (previous != pos.k) {
                ++lost;
                position_follow(pos, previous, group, groups, slots);
                continue;
            }
            const u64 payload = req + QFWD_CHUNK_BYTES;
            clear_chunks(lc);
            if (lane < payload_first) {
                lc.c[0] = load_chunk(payload + (u64)QFWD_CHUNK_BYTES * lane);
            }
            code = __shfl_sync(QFWD_FULL_MASK, lc.c[0].x, 0);
            arg_len = __shfl_sync(QFWD_FULL_MASK, lc.c[0].y, 0);
            const u32 need = request_chunks(arg_len, reply, req_chunks - 1u, QFWD_CHUNK_BYTES);
            if (need > req_chunks - 1u) {
                early_status = QFWD_STATUS_OVERSIZED;
            } else if (code == QFWD_CODE_PARITY && need <= payload_first && want != 1u &&
                       !reply) {
                // As in inline mode: the payload came in one read, answer from registers.
                const u32 bit = parity_in_registers(lc.c[0], lane, need, arg_len, 4u);
                if (lane == 0u) {
                    store_chunk(resp, (u32)QFWD_STATUS_OK, 1u, bit, want);
                }
                ++served;
                position_next(pos, groups, slots);
                continue;
            } else {
                load_chunks(lc, payload, lane, payload_first, need);
                stage_plain(lc, lane, need, stage);
            }
            __syncwarp();
            compute_response<true>(code, arg_len, early_status, stage, res, resp_chunks, control,
                                   lane);
        }
#ifdef QFWD_DEVICE_DOORBELL
        // The request's identity is staged unless it was oversized (then the host answers).
        const bool sent = reply && early_status != QFWD_STATUS_OVERSIZED &&
                          device_answer(nic, stage, arg_len, res, resp, resp_chunks, req_words,
                                        want, lane);
        if (!sent) {
            publish_response(res, resp, resp_chunks, want, lane);
        }
#else
        publish_response(res, resp, resp_chunks, want, lane);
#endif
#ifdef QFWD_DEC_TRACE_DISPATCH
        trace_request(code, qr0, stage + 2, arg_len, lane);
#endif
        ++served;
        position_next(pos, groups, slots);
    }

    if (lane == 0u) {
        u64* counters = (u64*)(state + QFWD_STATE_COUNTERS_OFFSET) +
                        (u64)warp * QFWD_COUNTERS_PER_POLLER;
        counters[0] = polls;
        counters[1] = served;
        counters[2] = torn;
        counters[3] = lost;
    }
}

// One request per launch (the `gpu-launch` and `gpu-graph` baselines): the request sits in
// an inline-layout slot of mapped host memory written before the launch; the response is
// published exactly as the persistent kernel publishes it, with the request's own tag.
// One warp; dynamic shared memory req_slot_bytes + resp_slot_bytes.
extern "C" __global__ void qfwd_serve_once(const QfwdServeOnceParams p)
{
    const u64 req = p.req, resp = p.resp, control = p.control;
    const u32 req_slot_bytes = p.req_slot_bytes, resp_slot_bytes = p.resp_slot_bytes;
    const u32 poll_chunks = p.poll_chunks;
    extern __shared__ u32 smem[];
    if (threadIdx.x >= QFWD_WARP) {
        return;
    }
    const u32 lane = threadIdx.x;
    u32* stage = smem;
    u32* res = smem + req_slot_bytes / 4u;
    const u32 req_chunks = req_slot_bytes / QFWD_CHUNK_BYTES;
    const u32 resp_chunks = resp_slot_bytes / QFWD_CHUNK_BYTES;
    const u32 first = min_u32(poll_chunks, req_chunks);

    LaneChunks lc;
    clear_chunks(lc);
    if (lane < first) {
        lc.c[0] = load_chunk(req + (u64)QFWD_CHUNK_BYTES * lane);
    }
    const u32 tag = __shfl_sync(QFWD_FULL_MASK, lc.c[0].tag, 0);
    const u32 code = __shfl_sync(QFWD_FULL_MASK, lc.c[0].x, 0);
    const u32 arg_len = __shfl_sync(QFWD_FULL_MASK, lc.c[0].y, 0);
    const u64 need = chunks_for((u64)QFWD_HEADER_BYTES + arg_len, QFWD_INLINE_DATA_BYTES);
    int early_status = QFWD_STATUS_OK;
    u32 n = 1u;
    if (need > req_chunks) {
        early_status = QFWD_STATUS_OVERSIZED;
    } else {
        n = (u32)need;
        load_chunks(lc, req, lane, first, n);
        if (!tags_match(lc, lane, n, tag)) {
            // Written before the launch, so this means a host bug: say so, don't guess.
            early_status = QFWD_STATUS_LENGTH_MISMATCH;
        }
    }
    // The persistent kernel's register path for parity, so every topology runs the same
    // handler code.
    if (code == QFWD_CODE_PARITY && early_status == QFWD_STATUS_OK && n <= first && tag != 1u) {
        const u32 bit = parity_in_registers(lc.c[0], lane, n, arg_len, 3u);
        if (lane == 0u) {
            store_chunk(resp, (u32)QFWD_STATUS_OK, 1u, bit, tag);
        }
        return;
    }
    stage_inline(lc, lane, n, stage);
    __syncwarp();
    compute_response<true>(code, arg_len, early_status, stage, res, resp_chunks, control, lane);
    publish_response(res, resp, resp_chunks, tag, lane);
}
