// qfwd device code: the `gpu-direct` persistent kernel. The GPU owns its NIC queues: no
// CPU thread is on the data path.
//
// One thread block per QPU link, `warps_per_link` poller warps in it. The warps form
// groups of `pollers_per_slot`; group g serves the link's receives g, g + G, g + 2G, ...
// and all warps of a group poll the group's next receive out of phase. For each receive a
// warp, in one PCIe read, loads the receive CQE (lanes 0-3) and the first `poll_chunks`
// chunks of the receive buffer it would land in (lanes 4-), then:
//   1. a new CQE (opcode not INVALID, owner bit = the lap's parity): the message is in the
//      CQE (<= 32 B, MLX5_INLINE_SCATTER_32) or in its buffer; chunks read as poison are
//      read once more (the NIC wrote the CQE last), the rest of a long message is read;
//   2. the group's ticket is claimed (shared memory), the CQE's first three chunks and the
//      buffer chunks read are overwritten with poison (so the next lap's parallel read can
//      tell old from new), the request is checked as the CPU forwarder checks it (magic,
//      lengths, size limit, function table) and served (parity, lut, uf);
//   3. the answer leaves as an inline SEND: under the block's posting lock the warp writes
//      the WQE (a chunk per lane), the doorbell record, one system fence, and the doorbell
//      (regular: the 8-byte control word; blueflame: the whole WQE into the current half),
//      or (cpu-assisted) the tagged response ring a CPU proxy drains; then the receive
//      goes back to the NIC in order (QP doorbell record, CQ consumer index).
// Counters per warp (QFWD_CTR_*) go to mapped host memory after every request and every
// QFWD_HEARTBEAT_POLLS empty polls (the host's heartbeat). The kernel ends when the host
// writes the stop sentinel into every receive CQE. src/queues/direct.rs is the same
// protocol in Rust (the CPU stand-in runs it); docs/gpu-direct.md explains it.
//
// Compiled by NVRTC with the generated header qfwd_abi.h (src/abi.rs) and decode.cu.

#include "qfwd_abi.h"
#include "decode.cu"

#define QD_WARP 32u
#define QD_FULL 0xFFFFFFFFu
// Bytes of a warp's response staging: a whole inline SEND payload.
#define QD_RESP_BYTES 256u
// Warps a block may hold (the decoders' register budget: see forward.cu).
#define QD_MAX_WARPS QFWD_MAX_WARPS_PER_LINK
// About 2^26 clock cycles (~35 ms): the longest any wait below lasts.
#define QD_WAIT_LIMIT 0x4000000ll

struct QdChunk {
    u32 x, y, z, w;
};

static __device__ __forceinline__ QdChunk qd_ld16(u64 addr)
{
    QdChunk c;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(c.x), "=r"(c.y), "=r"(c.z), "=r"(c.w)
                 : "l"(addr)
                 : "memory");
    return c;
}

static __device__ __forceinline__ void qd_st16(u64 addr, u32 x, u32 y, u32 z, u32 w)
{
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(addr), "r"(x), "r"(y),
                 "r"(z), "r"(w)
                 : "memory");
}

static __device__ __forceinline__ void qd_st8(u64 addr, u64 v)
{
    asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(addr), "l"(v) : "memory");
}

static __device__ __forceinline__ void qd_st4(u64 addr, u32 v)
{
    asm volatile("st.volatile.global.u32 [%0], %1;" ::"l"(addr), "r"(v) : "memory");
}

static __device__ __forceinline__ u32 qd_ld4(u64 addr)
{
    u32 v;
    asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(addr) : "memory");
    return v;
}

static __device__ __forceinline__ u32 qd_bswap(u32 x) { return __byte_perm(x, 0u, 0x0123u); }

static __device__ __forceinline__ bool qd_poison(const QdChunk& c)
{
    return (c.x & c.y & c.z & c.w) == QFWD_POISON_WORD;
}

static __device__ __forceinline__ QdChunk qd_shfl(const QdChunk& c, u32 from)
{
    QdChunk r;
    r.x = __shfl_sync(QD_FULL, c.x, from);
    r.y = __shfl_sync(QD_FULL, c.y, from);
    r.z = __shfl_sync(QD_FULL, c.z, from);
    r.w = __shfl_sync(QD_FULL, c.w, from);
    return r;
}

// A link's shared state, in its block's shared memory. Fields after `lock` are read and
// written only by the lock holder.
struct QdLink {
    unsigned long long ticket[QD_MAX_WARPS]; // receives claimed per group
    u32 lock;
    u32 sq_pi;     // SQ producer counter (WQEBBs)
    u32 sq_half;   // BlueFlame half to write next
    u32 tx_ci;     // send CQ consumer index
    u32 sq_done;   // every WQE before this WQEBB counter completed
    u32 posts;     // SENDs posted (selective signaling)
    u32 resp_seq;  // cpu-assisted: next response sequence
    u32 resp_ci;   // cpu-assisted: the proxy's consumer index, last read
    unsigned long long credit_next;      // receives returned in order
    unsigned long long credit_published; // of which the NIC was told
    u32 done[QFWD_MAX_RX_SLOTS / 32u];   // completed receives not yet returned
};

// Per warp counters (QFWD_CTR_*), flushed to host memory by lanes 0-7.
__shared__ unsigned long long qd_ctr[QD_MAX_WARPS][QFWD_WARP_COUNTERS];

static __device__ __forceinline__ void qd_count(u32 warp, u32 k, u32 lane)
{
    if (lane == 0u)
        qd_ctr[warp][k] += 1ull;
}

static __device__ __forceinline__ void qd_flush(const QfwdLinkDesc& L, u32 warp, u32 lane)
{
    __syncwarp();
    if (lane < QFWD_WARP_COUNTERS / 2u) {
        const unsigned long long a = qd_ctr[warp][2u * lane], b = qd_ctr[warp][2u * lane + 1u];
        qd_st16(L.counters + 128ull * warp + 16ull * lane, (u32)a, (u32)(a >> 32), (u32)b,
                (u32)(b >> 32));
    }
}

// ---- the posting lock -------------------------------------------------------------------

// Lane 0 takes the lock (bounded); every lane learns whether it got it.
static __device__ __forceinline__ bool qd_lock(QdLink& s, u32 lane)
{
    u32 got = 0u;
    if (lane == 0u) {
        const long long t0 = clock64();
        for (;;) {
            if (atomicCAS(&s.lock, 0u, 1u) == 0u) {
                got = 1u;
                break;
            }
            if (clock64() - t0 > QD_WAIT_LIMIT)
                break;
        }
        __threadfence_block();
    }
    return __shfl_sync(QD_FULL, got, 0) != 0u;
}

static __device__ __forceinline__ void qd_unlock(QdLink& s, u32 lane)
{
    __syncwarp();
    if (lane == 0u) {
        __threadfence_block();
        atomicExch(&s.lock, 0u);
    }
}

// ---- receive credits ----------------------------------------------------------------------

// Marks receive `seq` complete (lock held, lane 0) and returns completed receives to the NIC
// in order: the CQ consumer index and the QP's receive counter. `fenced`: a system fence
// of this thread has ordered every earlier poison store before these (every doorbell post
// has one); cpu-assisted posts batch a fence every QFWD_CREDIT_BATCH receives.
static __device__ void qd_complete(QdLink& s, const QfwdLinkDesc& L, unsigned long long seq,
                                   bool fenced)
{
    const u32 bit = (u32)(seq & (L.rx_slots - 1u));
    s.done[bit / 32u] |= 1u << (bit % 32u);
    unsigned long long next = s.credit_next;
    for (;;) {
        const u32 b = (u32)(next & (L.rx_slots - 1u));
        if ((s.done[b / 32u] & (1u << (b % 32u))) == 0u)
            break;
        s.done[b / 32u] &= ~(1u << (b % 32u));
        next += 1ull;
    }
    s.credit_next = next;
    if (next == s.credit_published)
        return;
    if (!fenced) {
        if (next - s.credit_published < QFWD_CREDIT_BATCH)
            return;
        __threadfence_system();
    }
    qd_st4(L.rx_cq_dbrec, qd_bswap((u32)(next & 0xFFFFFFull)));
    qd_st4(L.qp_dbrec, qd_bswap((u32)((next + L.rx_slots) & 0xFFFFull)));
    s.credit_published = next;
}

// Publishes credits a cpu-assisted batch left behind (lane 0, lock free): when polls find
// nothing, so the NIC never waits for a batch to fill.
static __device__ void qd_flush_credits(QdLink& s, const QfwdLinkDesc& L, u32 lane)
{
    if (s.credit_next == s.credit_published)
        return;
    if (qd_lock(s, lane)) {
        if (lane == 0u && s.credit_next != s.credit_published) {
            __threadfence_system();
            const unsigned long long next = s.credit_next;
            qd_st4(L.rx_cq_dbrec, qd_bswap((u32)(next & 0xFFFFFFull)));
            qd_st4(L.qp_dbrec, qd_bswap((u32)((next + L.rx_slots) & 0xFFFFull)));
            s.credit_published = next;
        }
        qd_unlock(s, lane);
    }
}

// ---- answering ----------------------------------------------------------------------------

// Byte `i` of the response staged at `resp` (zero past `len`), four at a time.
static __device__ __forceinline__ u32 qd_bytes4(const u8* resp, u32 len, u32 at)
{
    u32 w = 0u;
#pragma unroll
    for (u32 k = 0; k < 4u; ++k) {
        const u32 i = at + k;
        w |= (i < len ? (u32)resp[i] : 0u) << (8u * k);
    }
    return w;
}

// Chunk `c` of an inline SEND WQE of the `len` response bytes at `resp`.
static __device__ __forceinline__ QdChunk qd_wqe_chunk(u32 c, u32 pi, u32 qpn, u32 ds, bool signaled,
                                                        const u8* resp, u32 len)
{
    QdChunk w;
    if (c == 0u) {
        w.x = qd_bswap(((pi & 0xFFFFu) << 8) | QFWD_OPCODE_SEND);
        w.y = qd_bswap(((qpn & 0xFFFFFFu) << 8) | ds);
        w.z = (signaled ? QFWD_CTRL_CQ_UPDATE : 0u) << 24;
        w.w = 0u;
    } else if (c == 1u) {
        w.x = qd_bswap(len | QFWD_INLINE_SEG);
        w.y = qd_bytes4(resp, len, 0u);
        w.z = qd_bytes4(resp, len, 4u);
        w.w = qd_bytes4(resp, len, 8u);
    } else {
        const u32 at = 12u + 16u * (c - 2u);
        w.x = qd_bytes4(resp, len, at);
        w.y = qd_bytes4(resp, len, at + 4u);
        w.z = qd_bytes4(resp, len, at + 8u);
        w.w = qd_bytes4(resp, len, at + 12u);
    }
    return w;
}

// Reaps send completions until the SQ has room for `bbs` WQEBBs (lane 0, lock held).
static __device__ bool qd_sq_room(QdLink& s, const QfwdLinkDesc& L, u32 bbs, u32 warp)
{
    const long long t0 = clock64();
    while (((s.sq_pi - s.sq_done) & 0xFFFFu) + bbs > L.sq_wqebbs) {
        const u64 at = L.tx_cq + (u64)(s.tx_ci & (L.tx_cqes - 1u)) * QFWD_CQE_BYTES + 48ull;
        const QdChunk t = qd_ld16(at);
        const u32 op_own = t.w >> 24;
        const u32 expected = (s.tx_ci & L.tx_cqes) ? 1u : 0u;
        if ((op_own >> 4) != QFWD_CQE_OPCODE_INVALID && (op_own & 1u) == expected) {
            const u32 wc = t.w & 0xFFFFu;
            s.sq_done = ((wc & 0xFFu) << 8 | (wc >> 8)) + 1u;
            if ((op_own >> 4) == QFWD_CQE_OPCODE_REQ_ERR)
                qd_ctr[warp][QFWD_CTR_TX_ERRORS] += 1ull;
            s.tx_ci += 1u;
            qd_st4(L.tx_cq_dbrec, qd_bswap(s.tx_ci & 0xFFFFFFu));
        } else if (clock64() - t0 > QD_WAIT_LIMIT) {
            return false;
        }
    }
    return true;
}

// Sends the `len` bytes at `resp` as one inline SEND with the link's doorbell, and returns
// receive `seq`. False when it could not (no lock or SQ room in time): nothing was written.
static __device__ bool qd_post(QdLink& s, const QfwdLinkDesc& L, const u8* resp, u32 len,
                               unsigned long long seq, u32 warp, u32 lane)
{
    if (len > QFWD_MAX_INLINE || !qd_lock(s, lane))
        return false;
    const u32 ds = 1u + (4u + len + 15u) / 16u;
    const u32 bbs = (ds * 16u + QFWD_WQEBB - 1u) / QFWD_WQEBB;
    u32 pi = 0u, signaled = 0u, ok = 0u;
    if (lane == 0u) {
        ok = qd_sq_room(s, L, bbs, warp);
        pi = s.sq_pi;
        signaled = (s.posts + 1u) % L.signal_every == 0u;
    }
    if (__shfl_sync(QD_FULL, ok, 0) == 0u) {
        qd_unlock(s, lane);
        return false;
    }
    pi = __shfl_sync(QD_FULL, pi, 0);
    signaled = __shfl_sync(QD_FULL, signaled, 0);
    const u32 chunks = bbs * 4u;
    QdChunk w = {0u, 0u, 0u, 0u};
    if (lane < chunks) {
        w = qd_wqe_chunk(lane, pi, L.qpn, ds, signaled != 0u, resp, len);
        const u64 at = L.sq + (u64)((pi + lane / 4u) & (L.sq_wqebbs - 1u)) * QFWD_WQEBB +
                       16ull * (lane % 4u);
        qd_st16(at, w.x, w.y, w.z, w.w);
    }
    __syncwarp();
    if (lane == 0u)
        qd_st4(L.qp_dbrec + 4ull, qd_bswap((pi + bbs) & 0xFFFFu));
    // The WQE and the doorbell record reach host memory before the doorbell.
    __threadfence_system();
    const u64 half = L.bf + (u64)(s.sq_half & 1u) * L.bf_size;
    if (L.doorbell == QFWD_DB_MODE_BLUEFLAME && chunks * 16u <= L.bf_size) {
        if (lane < chunks)
            qd_st16(half + 16ull * lane, w.x, w.y, w.z, w.w);
    } else if (lane == 0u) {
        qd_st8(half, ((u64)w.y << 32) | (u64)w.x);
    }
    __syncwarp();
    if (lane == 0u) {
        s.sq_half ^= 1u;
        s.sq_pi = pi + bbs;
        s.posts += 1u;
        qd_complete(s, L, seq, true);
    }
    qd_unlock(s, lane);
    return true;
}

// cpu-assisted: writes the response into the link's tagged response ring (every chunk
// carries the tag; the proxy accepts a response only when all match) and returns receive
// `seq`. False when the ring stayed full (nothing written).
static __device__ bool qd_push(QdLink& s, const QfwdLinkDesc& L, const u8* resp, u32 len,
                               unsigned long long seq, u32 lane)
{
    const u32 chunks = 1u + (len > 8u ? (len - 8u + 11u) / 12u : 0u);
    if (chunks * 16u > L.resp_slot_bytes || !qd_lock(s, lane))
        return false;
    u32 rseq = 0u, ok = 1u;
    if (lane == 0u) {
        rseq = s.resp_seq;
        const long long t0 = clock64();
        while (rseq - s.resp_ci >= L.resp_slots) {
            s.resp_ci = qd_ld4(L.resp_ci);
            if (rseq - s.resp_ci < L.resp_slots)
                break;
            if (clock64() - t0 > QD_WAIT_LIMIT) {
                ok = 0u;
                break;
            }
        }
    }
    if (__shfl_sync(QD_FULL, ok, 0) == 0u) {
        qd_unlock(s, lane);
        return false;
    }
    rseq = __shfl_sync(QD_FULL, rseq, 0);
    const u64 slot = L.resp_ring + (u64)(rseq & (L.resp_slots - 1u)) * L.resp_slot_bytes;
    const u32 tag = rseq % 0xFFFFFFFEu + 1u;
    if (lane < chunks) {
        if (lane == 0u) {
            qd_st16(slot, len, qd_bytes4(resp, len, 0u), qd_bytes4(resp, len, 4u), tag);
        } else {
            const u32 at = 8u + 12u * (lane - 1u);
            qd_st16(slot + 16ull * lane, qd_bytes4(resp, len, at), qd_bytes4(resp, len, at + 4u),
                    qd_bytes4(resp, len, at + 8u), tag);
        }
    }
    __syncwarp();
    if (lane == 0u) {
        s.resp_seq = rseq + 1u;
        qd_complete(s, L, seq, false);
    }
    qd_unlock(s, lane);
    return true;
}

// ---- one request ---------------------------------------------------------------------------

// Parity of the `arg_len` argument bytes at `arg` (4-aligned), on every lane.
static __device__ __forceinline__ u32 qd_parity(const u32* arg, u32 arg_len, u32 lane)
{
    u32 acc = 0u;
    for (u32 i = lane; i < (arg_len + 3u) / 4u; i += QD_WARP) {
        u32 w = arg[i];
        const u32 valid = arg_len - 4u * i;
        if (valid < 4u)
            w &= (1u << (8u * valid)) - 1u;
        acc ^= w;
    }
    acc = __reduce_xor_sync(QD_FULL, acc);
    return (u32)(__popc(acc) & 1);
}

// Checks the staged request of `byte_cnt` bytes as the CPU forwarder does and serves it;
// writes the CUQS response into `resp` and returns its length, or 0 with `*outcome` a drop
// counter. `*outcome` is the QFWD_CTR_* the request counts under.
static __device__ u32 qd_serve(const QfwdDirectParams& p, u32* stage, u32 byte_cnt, u8* resp,
                               u32* outcome, u32 lane)
{
    if (byte_cnt < QFWD_WIRE_HEADER_BYTES) {
        *outcome = QFWD_CTR_TRUNCATED_HEADER;
        return 0u;
    }
    if (stage[0] != QFWD_REQUEST_MAGIC) {
        *outcome = QFWD_CTR_BAD_MAGIC;
        return 0u;
    }
    const u32 function_id = stage[1], arg_len = stage[2];
    int status = QFWD_STATUS_OK;
    u32 result_len = 0u;
    u64 flips = 0ull;
    if (arg_len != byte_cnt - QFWD_WIRE_HEADER_BYTES) {
        status = arg_len > p.max_request_bytes ? QFWD_STATUS_OVERSIZED : QFWD_STATUS_LENGTH_MISMATCH;
    } else if (arg_len > p.max_request_bytes) {
        status = QFWD_STATUS_OVERSIZED;
    } else {
        const u32 hit = __ballot_sync(QD_FULL, lane < p.nfunctions && p.function_ids[lane] == function_id);
        if (hit == 0u) {
            status = QFWD_STATUS_UNKNOWN_FUNCTION;
        } else {
            const u32 code = p.function_codes[__ffs(hit) - 1];
            if (code == QFWD_CODE_PARITY) {
                flips = qd_parity(stage + 6, arg_len, lane);
                result_len = 1u;
            } else if (code == QFWD_CODE_LUT || code == QFWD_CODE_UF) {
                status = qfwd_decode_value(code, stage + 6, arg_len,
                                           QFWD_MAX_INLINE - QFWD_WIRE_HEADER_BYTES, &result_len,
                                           &flips, lane);
            } else {
                status = QFWD_STATUS_UNKNOWN_FUNCTION;
            }
        }
    }
    if (status != QFWD_STATUS_OK)
        result_len = 0u;
    switch (status) {
    case QFWD_STATUS_OK: *outcome = QFWD_CTR_OK; break;
    case QFWD_STATUS_BAD_ARGUMENT: *outcome = QFWD_CTR_BAD_ARGUMENT; break;
    case QFWD_STATUS_LENGTH_MISMATCH: *outcome = QFWD_CTR_LENGTH_MISMATCH; break;
    case QFWD_STATUS_UNKNOWN_FUNCTION: *outcome = QFWD_CTR_UNKNOWN_FUNCTION; break;
    case QFWD_STATUS_OVERSIZED: *outcome = QFWD_CTR_OVERSIZED; break;
    default: *outcome = QFWD_CTR_OTHER_ERROR; break;
    }
    __syncwarp();
    if (lane == 0u) {
        u32* h = (u32*)resp;
        h[0] = QFWD_RESPONSE_MAGIC;
        h[1] = (u32)status;
        h[2] = result_len;
        h[3] = stage[3];
        h[4] = stage[4];
        h[5] = stage[5];
    }
    if (lane < result_len)
        resp[QFWD_WIRE_HEADER_BYTES + lane] = (u8)(flips >> (8u * lane));
    __syncwarp();
    return QFWD_WIRE_HEADER_BYTES + result_len;
}

// Copies the message into the warp's stage: `have` holds the lanes' poll chunks (lanes 0-3
// the CQE, lanes 4- the speculative buffer chunks of `spec_slot`). Chunks read as poison
// are read again. Returns the message's bytes (at most the buffer's).
static __device__ u32 qd_stage(const QfwdLinkDesc& L, u32 poll_chunks, const QdChunk& have,
                               bool inline32, u64 cqe, u32 slot, u32 spec_slot, u32 byte_cnt,
                               u32* stage, u32 warp, u32 lane)
{
    const u32 cap = inline32 ? 32u : L.rx_slot_bytes;
    const u32 len = byte_cnt < cap ? byte_cnt : cap;
    const u32 n = (len + 15u) / 16u;
    const u64 base = inline32 ? cqe : L.rx_ring + (u64)slot * L.rx_slot_bytes;
    u32 torn = 0u;
    for (u32 k = lane; k < ((n + QD_WARP - 1u) / QD_WARP) * QD_WARP; k += QD_WARP) {
        // The chunk this lane stages, if the poll read it already.
        const u32 from = inline32 ? k : 4u + k;
        const bool polled = inline32 ? true : (slot == spec_slot && k < poll_chunks);
        QdChunk c = qd_shfl(have, from < QD_WARP ? from : 0u);
        if (k < n) {
            if (!polled)
                c = qd_ld16(base + 16ull * k);
            if (qd_poison(c)) {
                c = qd_ld16(base + 16ull * k);
                torn += 1u;
            }
            stage[4u * k] = c.x;
            stage[4u * k + 1u] = c.y;
            stage[4u * k + 2u] = c.z;
            stage[4u * k + 3u] = c.w;
        }
    }
    torn = __reduce_add_sync(QD_FULL, torn);
    if (lane == 0u)
        qd_ctr[warp][QFWD_CTR_TORN] += torn;
    __syncwarp();
    return len;
}

// Overwrites what was read of a receive with poison: the CQE's first three chunks and the
// `len` buffer bytes at `buffer` (0: none).
static __device__ __forceinline__ void qd_poison_read(u64 cqe, u64 buffer, u32 len, u32 lane)
{
    if (lane < 3u)
        qd_st16(cqe + 16ull * lane, QFWD_POISON_WORD, QFWD_POISON_WORD, QFWD_POISON_WORD, QFWD_POISON_WORD);
    if (buffer != 0ull) {
        for (u32 k = lane; k < (len + 15u) / 16u; k += QD_WARP)
            qd_st16(buffer + 16ull * k, QFWD_POISON_WORD, QFWD_POISON_WORD, QFWD_POISON_WORD,
                    QFWD_POISON_WORD);
    }
}

// ---- the kernel ----------------------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(256) qfwd_direct(const QfwdDirectParams p)
{
    __shared__ QdLink s;
    const u32 link = blockIdx.x;
    const u32 lane = threadIdx.x & (QD_WARP - 1u);
    const u32 warp = threadIdx.x / QD_WARP;
    if (threadIdx.x == 0u) {
        for (u32 g = 0; g < QD_MAX_WARPS; ++g)
            s.ticket[g] = 0ull;
        s.lock = 0u;
        s.sq_pi = s.sq_half = s.tx_ci = s.sq_done = s.posts = 0u;
        s.resp_seq = s.resp_ci = 0u;
        s.credit_next = s.credit_published = 0ull;
    }
    for (u32 i = threadIdx.x; i < QFWD_MAX_RX_SLOTS / 32u; i += blockDim.x)
        s.done[i] = 0u;
    for (u32 i = threadIdx.x; i < QD_MAX_WARPS * QFWD_WARP_COUNTERS; i += blockDim.x)
        qd_ctr[i / QFWD_WARP_COUNTERS][i % QFWD_WARP_COUNTERS] = 0ull;
    qfwd_dec_stage_model(threadIdx.x, blockDim.x);
    __syncthreads();
    if (link >= p.nlinks || warp >= p.warps_per_link || warp >= QD_MAX_WARPS)
        return;
    const QfwdLinkDesc& L = ((const QfwdLinkDesc*)p.links)[link];
    const u32 groups = p.warps_per_link / p.pollers_per_slot;
    const u32 group = warp / p.pollers_per_slot;
    const bool shared_group = p.pollers_per_slot > 1u;
    u32* stage = (u32*)(qfwd_dec_smem + (u64)warp * (L.rx_slot_bytes + QD_RESP_BYTES));
    u8* resp = (u8*)stage + L.rx_slot_bytes;
    const u32 cqe_shift = __ffs(L.rx_cqes) - 1u;
    const u32 poll_chunks = p.poll_chunks < QD_WARP - 4u ? p.poll_chunks : QD_WARP - 4u;

    unsigned long long k = 0ull; // the group's claimed receives, as this warp knows them
    u32 idle_polls = 0u;
    for (;;) {
        const unsigned long long seq = group + k * groups;
        const u64 cqe = L.rx_cq + (u64)(seq & (L.rx_cqes - 1u)) * QFWD_CQE_BYTES;
        const u32 spec_slot = (u32)(seq & (L.rx_slots - 1u));
        QdChunk c = {0u, 0u, 0u, 0u};
        if (lane < 4u)
            c = qd_ld16(cqe + 16ull * lane);
        else if (lane < 4u + poll_chunks)
            c = qd_ld16(L.rx_ring + (u64)spec_slot * L.rx_slot_bytes + 16ull * (lane - 4u));
        unsigned long long t = k;
        if (shared_group && lane == 0u)
            t = *(volatile unsigned long long*)&s.ticket[group];
        t = __shfl_sync(QD_FULL, t, 0);
        const QdChunk tail = qd_shfl(c, 3u);
        const u32 op_own = tail.w >> 24;
        const u32 opcode = op_own >> 4;
        if (opcode == QFWD_CQE_OPCODE_INVALID && tail.x == QFWD_STOP_WORD && tail.y == QFWD_STOP_WORD &&
            tail.z == QFWD_STOP_WORD)
            break;
        if (t != k) { // another warp of the group claimed it
            k = t;
            continue;
        }
        if (opcode == QFWD_CQE_OPCODE_INVALID || (op_own & 1u) != (u32)((seq >> cqe_shift) & 1ull)) {
            qd_count(warp, QFWD_CTR_POLLS, lane);
            if (++idle_polls % QFWD_HEARTBEAT_POLLS == 0u) {
                qd_flush(L, warp, lane);
                if (L.doorbell == QFWD_DB_MODE_CPU_ASSISTED)
                    qd_flush_credits(s, L, lane);
            }
            continue;
        }
        // A new CQE. Its chunk 2 (byte count, immediate) read as poison was read too early.
        QdChunk mid = qd_shfl(c, 2u);
        if (qd_poison(mid)) {
            mid = qd_ld16(cqe + 32ull);
            qd_count(warp, QFWD_CTR_TORN, lane);
        }
        const u32 byte_cnt = qd_bswap(mid.w);
        const bool inline32 = ((op_own >> 2) & 3u) == QFWD_CQE_FORMAT_INLINE_32;
        const u32 slot = opcode == QFWD_CQE_OPCODE_RESP_WR_IMM ? (qd_bswap(mid.y) & (L.rx_slots - 1u))
                                                                : spec_slot;
        u32 len = 0u;
        if (opcode != QFWD_CQE_OPCODE_RESP_ERR)
            len = qd_stage(L, poll_chunks, c, inline32, cqe, slot, spec_slot, byte_cnt, stage, warp,
                           lane);
        if (shared_group) {
            unsigned long long prev = k;
            if (lane == 0u)
                prev = atomicCAS(&s.ticket[group], k, k + 1ull);
            prev = __shfl_sync(QD_FULL, prev, 0);
            if (prev != k) {
                qd_count(warp, QFWD_CTR_LOST_CLAIMS, lane);
                k = prev;
                continue;
            }
        }
        qd_poison_read(cqe, inline32 ? 0ull : L.rx_ring + (u64)slot * L.rx_slot_bytes, len, lane);
        qd_count(warp, QFWD_CTR_RECEIVED, lane);
        u32 outcome = QFWD_CTR_RX_ERROR;
        u32 n = 0u;
        if (opcode != QFWD_CQE_OPCODE_RESP_ERR)
            n = qd_serve(p, stage, byte_cnt, resp, &outcome, lane);
        bool answered = n == 0u;
        if (n != 0u) {
            answered = L.doorbell == QFWD_DB_MODE_CPU_ASSISTED ? qd_push(s, L, resp, n, seq, lane)
                                                              : qd_post(s, L, resp, n, seq, warp, lane);
            if (answered)
                qd_count(warp, QFWD_CTR_POSTED, lane);
            else
                outcome = QFWD_CTR_SEND_FAILED;
        }
        if (n == 0u || !answered) {
            // No answer went out: return the receive under the lock all the same.
            if (qd_lock(s, lane)) {
                if (lane == 0u)
                    qd_complete(s, L, seq, false);
                qd_unlock(s, lane);
            }
        }
        qd_count(warp, outcome, lane);
        qd_flush(L, warp, lane);
        k += 1ull;
        idle_polls = 0u;
    }
    qd_flush(L, warp, lane);
}
