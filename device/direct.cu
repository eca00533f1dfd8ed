// qfwd device code: the `gpu-direct` persistent kernel. The GPU owns its NIC queues: no
// CPU thread is on the data path.
//
// Per QPU link, one block of `warps_per_link` poller warps, and (regular and blueflame
// doorbells) one block holding the link's poster warp; every block alone on its SM (the
// host sizes shared memory so). The pollers form groups of `pollers_per_slot`; group g
// serves the link's receives g, g + G, g + 2G, ... and all warps of a group poll the
// group's next receive out of phase. For each receive a warp, in one PCIe read, loads the
// receive CQE (lanes 0-3) and the first `poll_chunks` chunks of the receive buffer it would
// land in (lanes 4-), then:
//   1. a new CQE (opcode not INVALID, owner bit = the lap's parity): the message is in the
//      CQE (<= 32 B, MLX5_INLINE_SCATTER_32) or in its buffer; chunks read as poison are
//      read once more (the NIC wrote the CQE last), the rest of a long message is read;
//   2. the group's ticket is claimed (shared memory), the request is checked as the CPU
//      forwarder checks it (magic, lengths, size limit, function table) and served
//      (parity, lut, uf), and the answer handed on: to the link's poster through a ring of
//      tagged chunks in device memory, or (cpu-assisted) into the host's tagged response
//      ring, which a CPU proxy drains;
//   3. the CQE's first three chunks and the buffer chunks read are overwritten with poison
//      (so the next lap's parallel read can tell old from new) and the receive goes back to
//      the NIC in order (QP doorbell record, CQ consumer index), behind a system fence that
//      makes the poison visible first: once per QFWD_CREDIT_BATCH receives, or when a poll
//      finds nothing.
// The poster takes up to four answers at a time from its ring, writes their inline SEND
// WQEs into the send queue and the doorbell record, makes them visible with one system
// fence, and rings the doorbell once (the 8-byte control word of the last, or its whole
// WQE as a BlueFlame copy). A system fence waits for its SM's outstanding host reads: the
// poster's SM has none, so the fence is short, and batching spreads it over the answers.
// Counters per warp (QFWD_CTR_*) go to mapped host memory every 64 requests and when a
// poll finds nothing (the host's heartbeat). The kernel ends when the host writes the stop
// sentinel into every receive CQE; the poster ends when its pollers have and its ring is
// empty. src/queues/direct.rs is the receive protocol in Rust (the CPU stand-in runs it);
// docs/gpu-direct.md explains it.
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

static __device__ __forceinline__ u64 qd_now() { return (u64)clock64(); }

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

// A link's shared state, in its poller block's shared memory. Fields after `lock` are read
// and written only by the lock holder; `hand_ci` is a hint any warp may refresh.
struct QdLink {
    unsigned long long ticket[QD_MAX_WARPS]; // receives claimed per group
    u32 lock;
    u32 hand_seq;  // answers handed to the poster
    u32 hand_ci;   // the poster's consumer index, last read
    u32 resp_seq;  // cpu-assisted: next response sequence
    u32 resp_ci;   // cpu-assisted: the proxy's consumer index, last read
    unsigned long long credit_next;      // receives returned in order
    unsigned long long credit_published; // of which the NIC was told
    u32 done[QFWD_MAX_RX_SLOTS / 32u];   // completed receives not yet returned
};

// The function table, copied from the parameters at the start (a lookup from shared memory
// costs a lone warp less than one from parameter space indexed by lane).
__shared__ u32 qd_fids[QFWD_MAX_FUNCTIONS];
__shared__ u32 qd_fcodes[QFWD_MAX_FUNCTIONS];

// Per warp counters (QFWD_CTR_*), flushed to host memory by lanes 0-7.
__shared__ unsigned long long qd_ctr[QD_MAX_WARPS][QFWD_WARP_COUNTERS];

static __device__ __forceinline__ void qd_count(u32 warp, u32 k, u32 lane)
{
    if (lane == 0u)
        qd_ctr[warp][k] += 1ull;
}

// Writes warp `warp`'s counters into counter block `block` of the link (and, when `copy` is
// not 0, into device memory there too: the poster's, read back after the kernel stopped).
static __device__ __forceinline__ void qd_flush(const QfwdLinkDesc& L, u32 warp, u32 block, u32 lane,
                                                u64 copy = 0ull)
{
    __syncwarp();
    if (lane < QFWD_WARP_COUNTERS / 2u) {
        const unsigned long long a = qd_ctr[warp][2u * lane], b = qd_ctr[warp][2u * lane + 1u];
        qd_st16(L.counters + 256ull * block + 16ull * lane, (u32)a, (u32)(a >> 32), (u32)b,
                (u32)(b >> 32));
        if (copy != 0ull)
            qd_st16(copy + 16ull * lane, (u32)a, (u32)(a >> 32), (u32)b, (u32)(b >> 32));
    }
}

// ---- the link's lock (shared memory) ---------------------------------------------------------

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

// Tells the NIC the receives completed in order (lane 0, lock held): one system fence first,
// so the poison stores of every receive returned are visible before the NIC may reuse it.
static __device__ void qd_publish_credits(QdLink& s, const QfwdLinkDesc& L, u32 warp)
{
    const unsigned long long next = s.credit_next;
    if (next == s.credit_published)
        return;
    const u64 t0 = qd_now();
    __threadfence_system();
    qd_ctr[warp][QFWD_CTR_CREDIT_CYCLES] += qd_now() - t0;
    qd_ctr[warp][QFWD_CTR_CREDIT_FENCES] += 1ull;
    qd_st4(L.rx_cq_dbrec, qd_bswap((u32)(next & 0xFFFFFFull)));
    qd_st4(L.qp_dbrec, qd_bswap((u32)((next + L.rx_slots) & 0xFFFFull)));
    s.credit_published = next;
}

// Marks receive `seq` complete and returns completed receives in order; publishes them when
// `force` or when a batch has accumulated (a quarter of the receive queue at most).
static __device__ void qd_complete(QdLink& s, const QfwdLinkDesc& L, unsigned long long seq,
                                   bool force, u32 warp, u32 lane)
{
    if (!qd_lock(s, lane))
        return; // held for ~35 ms: cannot happen while the link's warps run
    if (lane == 0u) {
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
        u32 batch = L.rx_slots / 4u;
        batch = batch < QFWD_CREDIT_BATCH ? batch : QFWD_CREDIT_BATCH;
        if (force || next - s.credit_published >= (batch > 0u ? batch : 1u))
            qd_publish_credits(s, L, warp);
    }
    qd_unlock(s, lane);
}

// Publishes credits left behind by a batch (a poll found nothing: the link is idle).
static __device__ void qd_flush_credits(QdLink& s, const QfwdLinkDesc& L, u32 warp, u32 lane)
{
    const unsigned long long pending =
        *(volatile unsigned long long*)&s.credit_next - *(volatile unsigned long long*)&s.credit_published;
    if (pending == 0ull || !qd_lock(s, lane))
        return;
    if (lane == 0u)
        qd_publish_credits(s, L, warp);
    qd_unlock(s, lane);
}

// ---- answers: tagged rings ------------------------------------------------------------------

// ---- WQEs ------------------------------------------------------------------------------------

// Chunk `c` of an inline SEND WQE of the `len` response bytes staged as words at `w` (a
// 4-aligned buffer of at least 256 B; bytes past `len` are never sent: the inline length
// says where the answer ends). Words, not bytes: a lone warp pays for every instruction.
static __device__ __forceinline__ QdChunk qd_wqe_chunk(u32 c, u32 pi, u32 qpn, u32 ds, bool signaled,
                                                        const u32* w, u32 len)
{
    QdChunk q;
    if (c == 0u) {
        q.x = qd_bswap(((pi & 0xFFFFu) << 8) | QFWD_OPCODE_SEND);
        q.y = qd_bswap(((qpn & 0xFFFFFFu) << 8) | ds);
        q.z = (signaled ? QFWD_CTRL_CQ_UPDATE : 0u) << 24;
        q.w = 0u;
    } else if (c == 1u) {
        q.x = qd_bswap(len | QFWD_INLINE_SEG);
        q.y = w[0];
        q.z = w[1];
        q.w = w[2];
    } else {
        const u32 at = 3u + 4u * (c - 2u);
        q.x = w[at];
        q.y = w[at + 1u];
        q.z = w[at + 2u];
        q.w = w[at + 3u];
    }
    return q;
}

// Chunks of a tagged ring slot holding `len` bytes: chunk 0 = {word0, 8 bytes, tag}, then 12
// bytes and the tag per chunk.
static __device__ __forceinline__ u32 qd_ring_chunks(u32 len)
{
    return 1u + (len > 8u ? (len - 8u + 11u) / 12u : 0u);
}

// Writes the `len` bytes staged as words at `resp` into the tagged ring slot at `slot`
// (lane-parallel, one 16 B store per chunk, no fence: the reader accepts the slot when every
// tag matches; bytes past `len` are not part of it). Chunk 0's first word is `word0` (the
// length, and for the poster the outcome counter).
static __device__ __forceinline__ void qd_ring_write(u64 slot, const u8* resp, u32 len, u32 word0,
                                                     u32 tag, u32 lane)
{
    const u32* w = (const u32*)resp;
    if (lane < qd_ring_chunks(len)) {
        if (lane == 0u) {
            qd_st16(slot, word0, w[0], w[1], tag);
        } else {
            const u32 at = 2u + 3u * (lane - 1u);
            qd_st16(slot + 16ull * lane, w[at], w[at + 1u], w[at + 2u], tag);
        }
    }
    __syncwarp();
}

// cpu-assisted: writes the response into the link's tagged response ring in host memory,
// which the proxy drains. False when the ring stayed full or the response is too long
// (nothing written).
static __device__ bool qd_push(QdLink& s, const QfwdLinkDesc& L, const u8* resp, u32 len, u32 lane)
{
    if (qd_ring_chunks(len) * 16u > L.resp_slot_bytes || !qd_lock(s, lane))
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
        if (ok)
            s.resp_seq = rseq + 1u;
    }
    ok = __shfl_sync(QD_FULL, ok, 0);
    rseq = __shfl_sync(QD_FULL, rseq, 0);
    if (ok) {
        const u64 slot = L.resp_ring + (u64)(rseq & (L.resp_slots - 1u)) * L.resp_slot_bytes;
        qd_ring_write(slot, resp, len, len, rseq % 0xFFFFFFFEu + 1u, lane);
    }
    qd_unlock(s, lane);
    return ok != 0u;
}

// regular / blueflame: hands the response (and its outcome counter) to the link's poster
// through its ring in device memory. False when the ring stayed full or the response is too
// long for a slot (nothing written).
static __device__ bool qd_handoff(QdLink& s, u64 hand, const u8* resp, u32 len, u32 outcome, u32 lane)
{
    if (qd_ring_chunks(len) * 16u > QFWD_HANDOFF_SLOT_BYTES)
        return false;
    u32 h = 0u, ok = 1u;
    if (lane == 0u) {
        h = atomicAdd(&s.hand_seq, 1u);
        const long long t0 = clock64();
        while (h - *(volatile u32*)&s.hand_ci >= QFWD_HANDOFF_SLOTS) {
            s.hand_ci = qd_ld4(hand);
            if (clock64() - t0 > QD_WAIT_LIMIT) {
                ok = 0u; // the poster is gone: the slot stays empty and it would wait on it
                break;
            }
        }
    }
    ok = __shfl_sync(QD_FULL, ok, 0);
    h = __shfl_sync(QD_FULL, h, 0);
    if (ok) {
        const u64 slot = hand + QFWD_HANDOFF_HEADER_BYTES + (u64)(h % QFWD_HANDOFF_SLOTS) * QFWD_HANDOFF_SLOT_BYTES;
        qd_ring_write(slot, resp, len, len | (outcome << 24), h % 0xFFFFFFFEu + 1u, lane);
    }
    return ok != 0u;
}

// ---- the poster ------------------------------------------------------------------------------

// The link's poster: takes answers from its ring in order, up to four a poll (lane l reads
// chunk l % 8 of slot r + l / 8), posts the ready ones as inline SENDs with one fence and
// one doorbell, and counts each answer's outcome. Ends when every poller of the link has
// ended and the ring is empty.
static __device__ void qd_poster(const QfwdDirectParams& p, const QfwdLinkDesc& L, u64 hand, u8* resp,
                                 u32 lane)
{
    static_assert(QFWD_HANDOFF_SLOT_BYTES == 128u, "the poster reads a slot's 8 chunks with 8 lanes");
    const u32 per_slot = QFWD_HANDOFF_SLOT_BYTES / 16u;
    const u32 span = QD_WARP / per_slot; // slots read per poll
    const u32 block = QD_MAX_WARPS;      // this warp's counter block
    u32 r = 0u, pi = 0u, half = 0u, tx_ci = 0u, done = 0u, posts = 0u, idle = 0u;
    for (;;) {
        // One load a poll: lane l reads chunk l % 8 of slot r + l / 8. Slot k is ready when
        // every chunk its length needs carries its tag; the ready prefix is posted at once.
        const u32 k = lane / per_slot;
        const u32 seq = r + k;
        const u64 slot = hand + QFWD_HANDOFF_HEADER_BYTES + (u64)(seq % QFWD_HANDOFF_SLOTS) * QFWD_HANDOFF_SLOT_BYTES;
        QdChunk c = qd_ld16(slot + 16ull * (lane % per_slot));
        const bool tagged = c.w == seq % 0xFFFFFFFEu + 1u;
        const u32 len = __shfl_sync(QD_FULL, c.x & 0xFFFFu, k * per_slot);
        const bool head_ok = __shfl_sync(QD_FULL, tagged ? 1u : 0u, k * per_slot) != 0u;
        const bool mine_ok = head_ok && ((lane % per_slot) >= qd_ring_chunks(len) || tagged);
        const u32 ready = __ballot_sync(QD_FULL, mine_ok);
        // Leading slots whose eight bits are all set (per_slot = 8: a byte per slot).
        u32 batch = 0u;
        while (batch < span && ((ready >> (batch * per_slot)) & 0xFFu) == 0xFFu)
            ++batch;
        if (batch == 0u) {
            qd_count(0u, QFWD_CTR_POLLS, lane);
            if (++idle % QFWD_HEARTBEAT_POLLS == 0u)
                qd_flush(L, 0u, block, lane, hand + 64ull);
            if (idle % 64u == 0u) {
                u32 exited = lane == 0u ? qd_ld4(hand + 8ull) : 0u;
                exited = __shfl_sync(QD_FULL, exited, 0);
                // The pollers are gone and nothing they wrote waits: done. (They wrote their
                // last answers before they counted themselves out.)
                if (exited >= p.warps_per_link) {
                    const u32 w = lane == 0u ? qd_ld16(hand + QFWD_HANDOFF_HEADER_BYTES +
                                                       (u64)(r % QFWD_HANDOFF_SLOTS) * QFWD_HANDOFF_SLOT_BYTES)
                                                   .w
                                             : 0u;
                    if (__shfl_sync(QD_FULL, w, 0) != r % 0xFFFFFFFEu + 1u)
                        break;
                }
            }
            continue;
        }
        idle = 0u;
        // Gather the answers into shared memory: answer b at resp + 256 b.
        if ((lane / per_slot) < batch) {
            const u32 b = lane / per_slot, ch = lane % per_slot;
            u32* w = (u32*)(resp + 256u * b);
            if (ch == 0u) {
                w[0] = c.y;
                w[1] = c.z;
            } else {
                w[2u + 3u * (ch - 1u)] = c.x;
                w[3u + 3u * (ch - 1u)] = c.y;
                w[4u + 3u * (ch - 1u)] = c.z;
            }
        }
        u32 lens[4];
        u32 outcomes[4];
        for (u32 b = 0; b < 4u; ++b) {
            const QdChunk h = qd_shfl(c, (b < batch ? b : 0u) * per_slot);
            lens[b] = h.x & 0xFFFFu;
            outcomes[b] = h.x >> 24;
        }
        __syncwarp();
        // Room in the send queue for the batch (WQEs of at most 4 WQEBBs each).
        u32 bbs_total = 0u;
        for (u32 b = 0; b < batch; ++b)
            bbs_total += ((1u + (4u + lens[b] + 15u) / 16u) * 16u + QFWD_WQEBB - 1u) / QFWD_WQEBB;
        u32 room_ok = 1u;
        if (lane == 0u) {
            const long long t0 = clock64();
            while (((pi - done) & 0xFFFFu) + bbs_total > L.sq_wqebbs) {
                const u64 at = L.tx_cq + (u64)(tx_ci & (L.tx_cqes - 1u)) * QFWD_CQE_BYTES + 48ull;
                const QdChunk t = qd_ld16(at);
                const u32 op_own = t.w >> 24;
                if ((op_own >> 4) != QFWD_CQE_OPCODE_INVALID && (op_own & 1u) == ((tx_ci & L.tx_cqes) ? 1u : 0u)) {
                    const u32 wc = t.w & 0xFFFFu;
                    done = ((wc & 0xFFu) << 8 | (wc >> 8)) + 1u;
                    if ((op_own >> 4) == QFWD_CQE_OPCODE_REQ_ERR)
                        qd_ctr[0][QFWD_CTR_TX_ERRORS] += 1ull;
                    tx_ci += 1u;
                    qd_st4(L.tx_cq_dbrec, qd_bswap(tx_ci & 0xFFFFFFu));
                } else if (clock64() - t0 > QD_WAIT_LIMIT) {
                    room_ok = 0u;
                    break;
                }
            }
        }
        done = __shfl_sync(QD_FULL, done, 0);
        tx_ci = __shfl_sync(QD_FULL, tx_ci, 0);
        if (__shfl_sync(QD_FULL, room_ok, 0) == 0u) {
            // The NIC has stopped completing sends: these answers are lost, and counted.
            for (u32 b = 0; b < batch; ++b)
                qd_count(0u, QFWD_CTR_SEND_FAILED, lane);
        } else {
            // The WQEs, a chunk per lane: WQE b's chunk j at lane 16 b + j (WQEs here are
            // at most 4 WQEBBs; 16 chunks).
            u32 at_pi = pi;
            QdChunk last = {0u, 0u, 0u, 0u};
            u32 last_chunks = 0u;
            for (u32 b = 0; b < batch; ++b) {
                const u32 ds = 1u + (4u + lens[b] + 15u) / 16u;
                const u32 bbs = (ds * 16u + QFWD_WQEBB - 1u) / QFWD_WQEBB;
                const bool signaled = (posts + b + 1u) % L.signal_every == 0u;
                QdChunk w = {0u, 0u, 0u, 0u};
                if (lane < bbs * 4u) {
                    w = qd_wqe_chunk(lane, at_pi, L.qpn, ds, signaled, (const u32*)(resp + 256u * b), lens[b]);
                    qd_st16(L.sq + (u64)((at_pi + lane / 4u) & (L.sq_wqebbs - 1u)) * QFWD_WQEBB + 16ull * (lane % 4u),
                            w.x, w.y, w.z, w.w);
                }
                last = w;
                last_chunks = bbs * 4u;
                at_pi += bbs;
            }
            __syncwarp();
            if (lane == 0u)
                qd_st4(L.qp_dbrec + 4ull, qd_bswap(at_pi & 0xFFFFu));
            // The WQEs and the doorbell record reach host memory before the doorbell.
            const u64 f0 = qd_now();
            __threadfence_system();
            if (lane == 0u) {
                qd_ctr[0][QFWD_CTR_FENCE_CYCLES] += qd_now() - f0;
                qd_ctr[0][QFWD_CTR_FENCES] += 1ull;
            }
            const u64 bf = L.bf + (u64)(half & 1u) * L.bf_size;
            if (L.doorbell == QFWD_DB_MODE_BLUEFLAME && last_chunks * 16u <= L.bf_size) {
                if (lane < last_chunks)
                    qd_st16(bf + 16ull * lane, last.x, last.y, last.z, last.w);
            } else {
                const QdChunk first = qd_shfl(last, 0u);
                if (lane == 0u)
                    qd_st8(bf, ((u64)first.y << 32) | (u64)first.x);
            }
            half ^= 1u;
            pi = at_pi;
            posts += batch;
            for (u32 b = 0; b < batch; ++b) {
                qd_count(0u, QFWD_CTR_POSTED, lane);
                qd_count(0u, outcomes[b], lane);
            }
        }
        r += batch;
        // Tell the pollers the slots are free.
        if (lane == 0u)
            qd_st4(hand, r);
        if (posts % 64u < batch)
            qd_flush(L, 0u, block, lane, hand + 64ull);
    }
    qd_flush(L, 0u, block, lane, hand + 64ull);
}

// ---- one request -------------------------------------------------------------------------------

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
        const u32 hit = __ballot_sync(QD_FULL, lane < p.nfunctions && qd_fids[lane] == function_id);
        if (hit == 0u) {
            status = QFWD_STATUS_UNKNOWN_FUNCTION;
        } else {
            const u32 code = qd_fcodes[__ffs(hit) - 1];
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
    if (lane == 0u) {
        // The result (at most 8 bytes of flips, LSB first) as two words.
        u32* r = (u32*)(resp + QFWD_WIRE_HEADER_BYTES);
        r[0] = (u32)flips;
        r[1] = (u32)(flips >> 32);
    }
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
    // The chunks the poll read stay in the lanes that read them (chunk k: lane k in the CQE,
    // lane 4 + k in the buffer); each stores its own. The rest are read now.
    const u32 held = inline32 ? 2u : (slot == spec_slot ? poll_chunks : 0u);
    const u32 first_lane = inline32 ? 0u : 4u;
    u32 torn = 0u;
    if (lane >= first_lane && lane - first_lane < held && lane - first_lane < n) {
        const u32 k = lane - first_lane;
        QdChunk c = have;
        if (qd_poison(c)) {
            c = qd_ld16(base + 16ull * k);
            torn = 1u;
        }
        stage[4u * k] = c.x;
        stage[4u * k + 1u] = c.y;
        stage[4u * k + 2u] = c.z;
        stage[4u * k + 3u] = c.w;
    }
    for (u32 k = held + lane; k < n; k += QD_WARP) {
        QdChunk c = qd_ld16(base + 16ull * k);
        if (qd_poison(c)) {
            c = qd_ld16(base + 16ull * k);
            torn += 1u;
        }
        stage[4u * k] = c.x;
        stage[4u * k + 1u] = c.y;
        stage[4u * k + 2u] = c.z;
        stage[4u * k + 3u] = c.w;
    }
    torn = __reduce_add_sync(QD_FULL, torn);
    if (lane == 0u && torn != 0u)
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

// Parity of a request that came whole with the poll, from the lanes' registers: no staging
// in shared memory and no general check-and-serve (a lone warp pays ~7 cycles an
// instruction; the mailbox kernel answers parity the same way). Returns the answer's length
// in `resp` (0: not such a request, take the general path). `first` is the lane holding the
// message's chunk 0, `n` the chunks it has; the request's checks are the general path's.
static __device__ u32 qd_parity_fast(const QfwdDirectParams& p, const QdChunk& c, u32 first, u32 n,
                                     u32 byte_cnt, u8* resp, u32 lane)
{
    const bool mine = lane >= first && lane - first < n;
    if (n < 2u || __any_sync(QD_FULL, mine && qd_poison(c)))
        return 0u;
    const QdChunk h0 = qd_shfl(c, first);      // magic, function_id, arg_len, request_id
    const QdChunk h1 = qd_shfl(c, first + 1u); // timestamp, argument
    const u32 arg_len = h0.z;
    if (h0.x != QFWD_REQUEST_MAGIC || byte_cnt < QFWD_WIRE_HEADER_BYTES ||
        arg_len != byte_cnt - QFWD_WIRE_HEADER_BYTES || arg_len > p.max_request_bytes)
        return 0u;
    const u32 hit = __ballot_sync(QD_FULL, lane < p.nfunctions && qd_fids[lane] == h0.y);
    if (hit == 0u || qd_fcodes[__ffs(hit) - 1] != QFWD_CODE_PARITY)
        return 0u;
    // Lane first + k holds message words 4k .. 4k + 3; the argument starts at word 6.
    u32 acc = 0u;
    if (mine) {
        const u32 k = lane - first;
        const u32 words[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
        for (u32 m = 0; m < 4u; ++m) {
            const u32 j = 4u * k + m;
            if (j >= 6u && 4u * (j - 6u) < arg_len) {
                u32 w = words[m];
                const u32 valid = arg_len - 4u * (j - 6u);
                if (valid < 4u)
                    w &= (1u << (8u * valid)) - 1u;
                acc ^= w;
            }
        }
    }
    acc = __reduce_xor_sync(QD_FULL, acc);
    if (lane == 0u) {
        u32* w = (u32*)resp;
        w[0] = QFWD_RESPONSE_MAGIC;
        w[1] = (u32)QFWD_STATUS_OK;
        w[2] = 1u;
        w[3] = h0.w;
        w[4] = h1.x;
        w[5] = h1.y;
        w[6] = (u32)(__popc(acc) & 1);
        w[7] = 0u;
    }
    __syncwarp();
    return QFWD_WIRE_HEADER_BYTES + 1u;
}

// ---- the kernel ----------------------------------------------------------------------------

// One link's poller warp (see the file's head).
static __device__ void qd_poller(const QfwdDirectParams& p, const QfwdLinkDesc& L, QdLink& s, u64 hand,
                                 u32 warp, u32 lane)
{
    const u32 groups = p.warps_per_link / p.pollers_per_slot;
    const u32 group = warp / p.pollers_per_slot;
    const bool shared_group = p.pollers_per_slot > 1u;
    const bool proxied = L.doorbell == QFWD_DB_MODE_CPU_ASSISTED;
    u32* stage = (u32*)(qfwd_dec_smem + (u64)warp * (L.rx_slot_bytes + QD_RESP_BYTES));
    u8* resp = (u8*)stage + L.rx_slot_bytes;
    const u32 cqe_shift = __ffs(L.rx_cqes) - 1u;
    const u32 poll_chunks = p.poll_chunks < QD_WARP - 4u ? p.poll_chunks : QD_WARP - 4u;

    unsigned long long k = 0ull; // the group's claimed receives, as this warp knows them
    u32 idle_polls = 0u, served = 0u;
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
            ++idle_polls;
            // Idle: return the receives a batch left behind, and show the host fresh counters.
            if (idle_polls == 16u || idle_polls % QFWD_HEARTBEAT_POLLS == 0u) {
                qd_flush_credits(s, L, warp, lane);
                qd_flush(L, warp, warp, lane);
            }
            continue;
        }
        idle_polls = 0u;
        const u64 seen = qd_now();
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
        u32 fast = 0u;
        if (opcode != QFWD_CQE_OPCODE_RESP_ERR) {
            const u32 cap = inline32 ? 32u : L.rx_slot_bytes;
            const u32 held = inline32 ? 2u : (slot == spec_slot ? poll_chunks : 0u);
            const u32 whole = (byte_cnt + 15u) / 16u;
            if (byte_cnt <= cap && whole <= held) {
                fast = qd_parity_fast(p, c, inline32 ? 0u : 4u, whole, byte_cnt, resp, lane);
                len = byte_cnt;
            }
            if (fast == 0u)
                len = qd_stage(L, poll_chunks, c, inline32, cqe, slot, spec_slot, byte_cnt, stage,
                               warp, lane);
        }
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
        qd_count(warp, QFWD_CTR_RECEIVED, lane);
        const u64 staged = qd_now();
        u32 outcome = QFWD_CTR_RX_ERROR;
        u32 n = 0u;
        if (fast != 0u) {
            n = fast;
            outcome = QFWD_CTR_OK;
        } else if (opcode != QFWD_CQE_OPCODE_RESP_ERR) {
            n = qd_serve(p, stage, byte_cnt, resp, &outcome, lane);
        }
        const u64 serviced = qd_now();
        if (n != 0u) {
            // The answer first; what it leaves behind after.
            const bool sent = proxied ? qd_push(s, L, resp, n, lane) : qd_handoff(s, hand, resp, n, outcome, lane);
            if (lane == 0u) {
                qd_ctr[warp][QFWD_CTR_ANSWER_CYCLES] += qd_now() - seen;
                qd_ctr[warp][QFWD_CTR_ANSWERS] += 1ull;
                qd_ctr[warp][QFWD_CTR_STAGE_CYCLES] += staged - seen;
                qd_ctr[warp][QFWD_CTR_SERVE_CYCLES] += serviced - seen;
            }
            if (!sent) {
                qd_count(warp, QFWD_CTR_SEND_FAILED, lane);
            } else if (proxied) {
                qd_count(warp, outcome, lane);
                qd_count(warp, QFWD_CTR_POSTED, lane);
            }
            // (A handed-off answer's outcome is counted by the poster when it posts it.)
        } else {
            qd_count(warp, outcome, lane);
        }
        qd_poison_read(cqe, inline32 ? 0ull : L.rx_ring + (u64)slot * L.rx_slot_bytes, len, lane);
        qd_complete(s, L, seq, false, warp, lane);
        if (++served % 64u == 0u)
            qd_flush(L, warp, warp, lane);
        k += 1ull;
    }
    qd_flush(L, warp, warp, lane);
    if (lane == 0u && !proxied) {
        // Every answer this warp handed off is written before the poster may see it gone.
        __threadfence();
        atomicAdd((u32*)(hand + 8ull), 1u);
    }
}

// Blocks [0, nlinks): link b's pollers. Blocks [nlinks, 2 nlinks) (regular and blueflame
// doorbells): link b - nlinks's poster, in warp 0.
extern "C" __global__ void __launch_bounds__(256) qfwd_direct(const QfwdDirectParams p)
{
    __shared__ QdLink s;
    const u32 poster = blockIdx.x >= p.nlinks ? 1u : 0u;
    const u32 link = blockIdx.x - poster * p.nlinks;
    const u32 lane = threadIdx.x & (QD_WARP - 1u);
    const u32 warp = threadIdx.x / QD_WARP;
    if (threadIdx.x == 0u) {
        for (u32 g = 0; g < QD_MAX_WARPS; ++g)
            s.ticket[g] = 0ull;
        s.lock = 0u;
        s.hand_seq = s.hand_ci = 0u;
        s.resp_seq = s.resp_ci = 0u;
        s.credit_next = s.credit_published = 0ull;
    }
    for (u32 i = threadIdx.x; i < QFWD_MAX_RX_SLOTS / 32u; i += blockDim.x)
        s.done[i] = 0u;
    if (threadIdx.x < QFWD_MAX_FUNCTIONS) {
        qd_fids[threadIdx.x] = p.function_ids[threadIdx.x];
        qd_fcodes[threadIdx.x] = p.function_codes[threadIdx.x];
    }
    for (u32 i = threadIdx.x; i < QD_MAX_WARPS * QFWD_WARP_COUNTERS; i += blockDim.x)
        qd_ctr[i / QFWD_WARP_COUNTERS][i % QFWD_WARP_COUNTERS] = 0ull;
    if (!poster)
        qfwd_dec_stage_model(threadIdx.x, blockDim.x);
    __syncthreads();
    if (link >= p.nlinks)
        return;
    const QfwdLinkDesc& L = ((const QfwdLinkDesc*)p.links)[link];
    const u64 hand = p.handoff + (u64)link * (QFWD_HANDOFF_HEADER_BYTES + QFWD_HANDOFF_SLOTS * QFWD_HANDOFF_SLOT_BYTES);
    if (poster) {
        if (warp == 0u)
            qd_poster(p, L, hand, qfwd_dec_smem, lane);
        return;
    }
    if (warp >= p.warps_per_link || warp >= QD_MAX_WARPS)
        return;
    qd_poller(p, L, s, hand, warp, lane);
}
