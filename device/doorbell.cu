// qfwd device code: GPU-initiated mlx5 doorbells (`doorbell` in docs/architecture.md).
//
// A kernel that has a response ready announces it to the NIC itself:
//   * regular:    write the SEND WQE (payload inline) into the send queue, update the
//                 doorbell record (dbrec[1] = BE32(next WQEBB counter)), then one 8-byte
//                 store of the control segment's first word to the UAR doorbell register;
//                 the NIC DMA-reads the WQE from the send queue.
//   * blueflame:  the same WQE and doorbell record, then the whole WQE (64 B chunks,
//                 each written as four 16 B `st.volatile.global.v4.u32`, ascending) into
//                 the current BlueFlame half; the NIC does not read the send queue.
//   * cpu-assisted: the kernel writes the response into a tagged response ring in host
//                 memory (every 16 B chunk carries the tag: docs/architecture.md, "Mailbox
//                 rules") and a CPU proxy thread posts it.
// Both doorbell modes alternate the two BlueFlame halves, as libmlx5 does.
//
// The same code runs against a ConnectX (SQ, doorbell record and UAR from mlx5dv_init_obj,
// the UAR mapped with cuMemHostRegister(CU_MEMHOSTREGISTER_IOMEMORY)) and against qfwd's
// soft NIC (all of it in pinned, GPU-mapped host memory; src/softnic). Like a ConnectX,
// the soft NIC accepts doorbells back to back: a poster never reads the register back.
//
// Fences: one __threadfence_system() per post, after the WQE and doorbell-record stores and
// before the doorbell, so the NIC that sees the doorbell sees both. The mailbox rules
// (docs/architecture.md) keep system fences out of kernels whose warps poll host memory; a
// post needs this one (the mlx5 doorbell sequence), so the persistent kernel that posts
// (device/forward.cu with QFWD_DEVICE_DOORBELL) is a separate program, and runs one poller
// warp per block so the fence waits only for its own SM's outstanding host loads.
//
// Posting from the persistent kernel: qfwd_db_nic_begin / _write / _ring (below) serialize
// the poller warps on one send queue with a lock in device memory; the posting lane stores
// the mailbox completion between _write and _ring. qfwd_doorbell_nic_posts exercises them
// from many warps at once.
//
// Compiled by NVRTC with qfwd_abi.h, generated from src/abi.rs: the mlx5 and soft NIC
// constants, doorbell modes and the posting block's layout come from there.

#include "qfwd_abi.h"

// ---- results ---------------------------------------------------------------------------
#define QFWD_DB_OK 0u
#define QFWD_DB_ERR_TOO_LONG 1u
#define QFWD_DB_ERR_CQ_TIMEOUT 3u
#define QFWD_DB_ERR_RING_FULL 4u
#define QFWD_DB_ERR_BAD_MODE 5u

// About 2^31 clock cycles (~1 s at 2 GHz): every spin below gives up after this.
#define QFWD_DB_SPIN_LIMIT 0x80000000ull

// The send queue as a kernel sees it.
struct QfwdSq {
    unsigned long long sq;     // SQ buffer (wqe_cnt WQEBBs)
    unsigned long long dbrec;  // QP doorbell record: u32[2] big-endian, [1] = send counter
    unsigned long long bf;     // BlueFlame register, half 0 (half 1 = bf + bf_size)
    unsigned long long cq;     // send CQ buffer (cqe_cnt x 64 B)
    unsigned long long cq_dbrec; // send CQ doorbell record: [0] = BE32(consumer index)
    unsigned int wqe_cnt;      // SQ size in WQEBBs, a power of two
    unsigned int cqe_cnt;      // CQ entries, a power of two
    unsigned int qpn;
    unsigned int bf_size;      // bytes per BlueFlame half (256)
    unsigned int pi;           // producer counter, WQEBBs (16 bits go to the record)
    unsigned int half;         // BlueFlame half to write next
    unsigned int ci;           // CQ consumer index
    unsigned int done;         // every WQE before this WQEBB counter has completed
};

// ---- byte order and memory idioms ------------------------------------------------------

static __device__ __forceinline__ unsigned int qfwd_db_bswap32(unsigned int x)
{
    return __byte_perm(x, 0u, 0x0123u);
}

static __device__ __forceinline__ void qfwd_db_st16(unsigned long long addr, unsigned int a,
                                                   unsigned int b, unsigned int c, unsigned int d)
{
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};"
                 :
                 : "l"(addr), "r"(a), "r"(b), "r"(c), "r"(d)
                 : "memory");
}

static __device__ __forceinline__ void qfwd_db_st8(unsigned long long addr, unsigned long long v)
{
    asm volatile("st.volatile.global.u64 [%0], %1;" : : "l"(addr), "l"(v) : "memory");
}

static __device__ __forceinline__ void qfwd_db_st4(unsigned long long addr, unsigned int v)
{
    asm volatile("st.volatile.global.u32 [%0], %1;" : : "l"(addr), "r"(v) : "memory");
}

static __device__ __forceinline__ void qfwd_db_ld16(unsigned long long addr, unsigned int* a,
                                                   unsigned int* b, unsigned int* c, unsigned int* d)
{
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(*a), "=r"(*b), "=r"(*c), "=r"(*d)
                 : "l"(addr)
                 : "memory");
}

// Four payload bytes starting at `at`, as a little-endian word (zero past `len`).
static __device__ __forceinline__ unsigned int qfwd_db_bytes4(const unsigned char* p, unsigned int len,
                                                             unsigned int at)
{
    unsigned int w = 0u;
    for (unsigned int k = 0u; k < 4u; k++) {
        unsigned int i = at + k;
        unsigned int byte = i < len ? (unsigned int)p[i] : 0u;
        w |= byte << (8u * k);
    }
    return w;
}

// ---- WQE construction ------------------------------------------------------------------

// Size of an inline SEND of `len` bytes in 16-byte units.
static __device__ __forceinline__ unsigned int qfwd_db_send_ds(unsigned int len)
{
    return 1u + (4u + len + 15u) / 16u;
}

// Chunk `c` (16 bytes) of a SEND WQE with the payload inline, as four words in memory
// order: chunk 0 the control segment, chunk 1 the inline header and 12 payload bytes,
// then 16 payload bytes per chunk, zero-padded.
static __device__ __forceinline__ void qfwd_db_send_chunk(unsigned int c, unsigned int pi,
                                                         unsigned int qpn, unsigned int ds,
                                                         unsigned int signaled,
                                                         const unsigned char* payload,
                                                         unsigned int len, unsigned int w[4])
{
    if (c == 0u) {
        w[0] = qfwd_db_bswap32(((pi & 0xffffu) << 8) | QFWD_OPCODE_SEND);
        w[1] = qfwd_db_bswap32(((qpn & 0xffffffu) << 8) | ds);
        // signature 0, dci stream 0, fm_ce_se at byte 11.
        w[2] = (signaled ? QFWD_CTRL_CQ_UPDATE : 0u) << 24;
        w[3] = 0u; // imm
    } else if (c == 1u) {
        w[0] = qfwd_db_bswap32(len | QFWD_INLINE_SEG);
        w[1] = qfwd_db_bytes4(payload, len, 0u);
        w[2] = qfwd_db_bytes4(payload, len, 4u);
        w[3] = qfwd_db_bytes4(payload, len, 8u);
    } else {
        unsigned int at = 12u + 16u * (c - 2u);
        w[0] = qfwd_db_bytes4(payload, len, at);
        w[1] = qfwd_db_bytes4(payload, len, at + 4u);
        w[2] = qfwd_db_bytes4(payload, len, at + 8u);
        w[3] = qfwd_db_bytes4(payload, len, at + 12u);
    }
}

// ---- completions -----------------------------------------------------------------------

// Takes the send CQE at the consumer index if `d` (the CQE's last 4 bytes: wqe_counter,
// signature, op_own) says the NIC wrote it: returns 1 and its wqe_counter (and whether it
// is an error), 0 when not. Frees the slot through the CQ doorbell record.
static __device__ __forceinline__ unsigned int qfwd_db_take_cqe(struct QfwdSq* q, unsigned int d,
                                                               unsigned int* wqe_counter,
                                                               unsigned int* is_error)
{
    unsigned int op_own = d >> 24;
    unsigned int opcode = op_own >> 4;
    unsigned int owner = op_own & 1u;
    unsigned int expected = (q->ci & q->cqe_cnt) ? 1u : 0u;
    if (opcode == QFWD_CQE_OPCODE_INVALID || owner != expected)
        return 0u;
    // wqe_counter: bytes 60..61 (big-endian) = the low half of word d.
    unsigned int wc = d & 0xffffu;
    *wqe_counter = ((wc & 0xffu) << 8) | (wc >> 8);
    *is_error = opcode == QFWD_CQE_OPCODE_REQ_ERR ? 1u : 0u;
    q->ci += 1u;
    qfwd_db_st4(q->cq_dbrec, qfwd_db_bswap32(q->ci & 0xffffffu));
    return 1u;
}

// The last 16 bytes of the CQE at the consumer index, in one load (op_own is its last
// byte, the NIC writes that word last).
static __device__ __forceinline__ unsigned int qfwd_db_load_cqe_tail(const struct QfwdSq* q)
{
    unsigned long long at = q->cq + (unsigned long long)(q->ci & (q->cqe_cnt - 1u)) * 64ull + 48ull;
    unsigned int a, b, c, d;
    qfwd_db_ld16(at, &a, &b, &c, &d);
    return d;
}

// Takes the next send CQE if the NIC wrote it: returns 1 and its wqe_counter (and whether
// it is an error), 0 when none.
static __device__ __forceinline__ unsigned int qfwd_db_poll_cq(struct QfwdSq* q, unsigned int* wqe_counter,
                                                              unsigned int* is_error)
{
    return qfwd_db_take_cqe(q, qfwd_db_load_cqe_tail(q), wqe_counter, is_error);
}

// ---- posting ---------------------------------------------------------------------------

// Step 1: the WQE (inline SEND of `len` bytes, `bbs` WQEBBs) into the send queue at the
// producer counter (both modes: the SQ copy is what a NIC falls back on), then the doorbell
// record dbrec[1] = BE32(next WQEBB counter & 0xffff).
static __device__ __forceinline__ void qfwd_db_write_wqe(const struct QfwdSq* q, const unsigned char* payload,
                                                        unsigned int len, unsigned int signaled,
                                                        unsigned int ds, unsigned int bbs)
{
    unsigned int w[4];
    for (unsigned int c = 0u; c < bbs * 4u; c++) {
        qfwd_db_send_chunk(c, q->pi, q->qpn, ds, signaled, payload, len, w);
        unsigned long long at = q->sq +
                                (unsigned long long)((q->pi + c / 4u) & (q->wqe_cnt - 1u)) * QFWD_WQEBB +
                                (unsigned long long)(c % 4u) * 16ull;
        qfwd_db_st16(at, w[0], w[1], w[2], w[3]);
    }
    qfwd_db_st4(q->dbrec + 4ull, qfwd_db_bswap32((q->pi + bbs) & 0xffffu));
}

// Step 3 (after the fence): rings (8-byte control word, or the whole WQE as a BlueFlame
// copy), flips the half and advances the producer counter.
static __device__ void qfwd_db_ring(struct QfwdSq* q, unsigned int mode, const unsigned char* payload,
                                   unsigned int len, unsigned int signaled, unsigned int ds,
                                   unsigned int bbs)
{
    unsigned long long half = q->bf + (unsigned long long)(q->half & 1u) * q->bf_size;
    unsigned int w[4];
    if (mode == QFWD_DB_MODE_BLUEFLAME && bbs * QFWD_WQEBB <= q->bf_size) {
        for (unsigned int c = 0u; c < bbs * 4u; c++) {
            qfwd_db_send_chunk(c, q->pi, q->qpn, ds, signaled, payload, len, w);
            qfwd_db_st16(half + 16ull * c, w[0], w[1], w[2], w[3]);
        }
    } else {
        qfwd_db_send_chunk(0u, q->pi, q->qpn, ds, signaled, payload, len, w);
        qfwd_db_st8(half, ((unsigned long long)w[1] << 32) | (unsigned long long)w[0]);
    }
    // Alternate the halves.
    q->half ^= 1u;
    q->pi += bbs;
}

// Posts one SEND with `len` bytes inline and rings the doorbell (`mode` regular or
// blueflame). The caller has made sure the SQ has room (see qfwd_db_reserve).
static __device__ unsigned int qfwd_db_post_send_inline(struct QfwdSq* q, unsigned int mode,
                                                       const unsigned char* payload, unsigned int len,
                                                       unsigned int signaled)
{
    if (len > QFWD_MAX_INLINE)
        return QFWD_DB_ERR_TOO_LONG;
    if (mode != QFWD_DB_MODE_REGULAR && mode != QFWD_DB_MODE_BLUEFLAME)
        return QFWD_DB_ERR_BAD_MODE;
    unsigned int ds = qfwd_db_send_ds(len);
    unsigned int bbs = (ds * 16u + QFWD_WQEBB - 1u) / QFWD_WQEBB;
    // 1-2. The WQE into the send queue, then the doorbell record.
    qfwd_db_write_wqe(q, payload, len, signaled, ds, bbs);
    // 3. Make the WQE and the record visible to the NIC before the doorbell.
    __threadfence_system();
    // 4-5. The doorbell, then alternate the halves.
    qfwd_db_ring(q, mode, payload, len, signaled, ds, bbs);
    return QFWD_DB_OK;
}

// Waits (bounded) until the SQ has room for `bbs` WQEBBs, reaping completions; every WQE
// is `bbs` WQEBBs here (one payload size per caller). Counts errors into `errors`.
static __device__ unsigned int qfwd_db_reserve(struct QfwdSq* q, unsigned int bbs, unsigned int* completions,
                                              unsigned int* errors)
{
    long long start = clock64();
    while (((q->pi - q->done) & 0xffffu) + bbs > q->wqe_cnt) {
        unsigned int wc, is_error;
        if (qfwd_db_poll_cq(q, &wc, &is_error)) {
            q->done = wc + bbs;
            *completions += 1u;
            *errors += is_error;
        } else if ((unsigned long long)(clock64() - start) > QFWD_DB_SPIN_LIMIT) {
            return QFWD_DB_ERR_CQ_TIMEOUT;
        }
    }
    return QFWD_DB_OK;
}

// cpu-assisted: writes response `seq` (len bytes) into the tagged response ring; the host
// proxy posts it. Every chunk carries tag = seq % 0xfffffffe + 1, one 16 B store each, no
// fence (the proxy accepts the response only when every tag matches). `resp_ci` is the
// proxy's consumer index (host memory): read only when the ring looks full.
static __device__ unsigned int qfwd_db_resp_push(unsigned long long ring, unsigned int slots,
                                                unsigned int slot_bytes, unsigned long long resp_ci,
                                                unsigned int seq, unsigned int* cached_ci,
                                                const unsigned char* payload, unsigned int len)
{
    unsigned int max = (slot_bytes / 16u - 1u) * QFWD_RESP_CHUNK_DATA + QFWD_RESP_FIRST_DATA;
    if (len > max)
        return QFWD_DB_ERR_TOO_LONG;
    if (seq - *cached_ci >= slots) {
        unsigned int ci;
        asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(ci) : "l"(resp_ci) : "memory");
        *cached_ci = ci;
        if (seq - ci >= slots)
            return QFWD_DB_ERR_RING_FULL;
    }
    unsigned long long slot = ring + (unsigned long long)(seq & (slots - 1u)) * slot_bytes;
    unsigned int tag = seq % 0xfffffffeu + 1u;
    unsigned int chunks = 1u;
    if (len > QFWD_RESP_FIRST_DATA)
        chunks += (len - QFWD_RESP_FIRST_DATA + QFWD_RESP_CHUNK_DATA - 1u) / QFWD_RESP_CHUNK_DATA;
    for (unsigned int c = 1u; c < chunks; c++) {
        unsigned int at = QFWD_RESP_FIRST_DATA + (c - 1u) * QFWD_RESP_CHUNK_DATA;
        qfwd_db_st16(slot + 16ull * c, qfwd_db_bytes4(payload, len, at), qfwd_db_bytes4(payload, len, at + 4u),
                     qfwd_db_bytes4(payload, len, at + 8u), tag);
    }
    qfwd_db_st16(slot, len, qfwd_db_bytes4(payload, len, 0u), qfwd_db_bytes4(payload, len, 4u), tag);
    return QFWD_DB_OK;
}

// ---- posting from a persistent kernel (several warps) ----------------------------------
//
// The poller warps of `qfwd_persistent` (device/forward.cu, built with
// QFWD_DEVICE_DOORBELL) share one send queue. Its description and state live in a block of
// device memory (qfwd::queues::DevicePosting::desc writes the description; the state
// starts zeroed):
//   byte 0: struct QfwdPostingDesc (qfwd_abi.h)
//   byte QFWD_POSTING_LOCK: the posting lock (u32, 0 free / 1 held)
//   byte QFWD_POSTING_STATE: u32 pi, half, ci, done, posts (read and written under the lock)
//   byte QFWD_POSTING_COUNTERS: u64 counters QFWD_POST_CTR_* (written under the lock, except
//        fallbacks: atomics)
// One post at a time: the lock (a CAS in device memory, an L2 atomic) serializes the
// producer-index claim, the WQE, the doorbell record and the doorbell, so WQEs reach the
// NIC in index order and the BlueFlame halves alternate post by post; the soft NIC's
// one-deep register is checked by the holder. A poster that cannot get the lock, or room
// in the SQ, in time gives up before writing anything (the caller then publishes the
// response for the host to send).
#define QFWD_DB_ERR_LOCK_TIMEOUT 6u
// About 2^26 clock cycles (~35 ms at 1.9 GHz): the longest a poster waits for the lock.
#define QFWD_DB_LOCK_LIMIT 0x4000000ull

static __device__ __forceinline__ unsigned int qfwd_db_try_lock(unsigned long long lock)
{
    unsigned int old;
    asm volatile("atom.acquire.gpu.global.cas.b32 %0, [%1], 0, 1;" : "=r"(old) : "l"(lock) : "memory");
    return old == 0u;
}

static __device__ __forceinline__ void qfwd_db_unlock(unsigned long long lock)
{
    asm volatile("st.release.gpu.global.u32 [%0], 0;" : : "l"(lock) : "memory");
}

// Reaps the send CQE whose tail is `d` if the NIC wrote it (the caller holds the lock).
// Every CQE frees the SQ up to its WQE; the WQE's own size is not known here, so one WQEBB
// of it is counted (conservative: the rest is freed by the next CQE).
static __device__ __forceinline__ unsigned int qfwd_db_reap_one(struct QfwdSq* q, unsigned int d,
                                                               unsigned long long* ctr)
{
    unsigned int wc, is_error;
    if (!qfwd_db_take_cqe(q, d, &wc, &is_error))
        return 0u;
    q->done = wc + 1u;
    ctr[QFWD_POST_CTR_CQES] += 1ull;
    ctr[QFWD_POST_CTR_ERROR_CQES] += is_error;
    return 1u;
}

// One post in progress (between qfwd_db_nic_begin and qfwd_db_nic_ring), in registers of
// the posting thread, which holds the lock.
struct QfwdNicPost {
    struct QfwdSq q;
    unsigned int posts;
    unsigned int mode;
    unsigned int ds;
    unsigned int bbs;
    unsigned int signaled;
    unsigned int reap;
    unsigned int cqe_tail;
};

// Step 1 of a post of `len` bytes (a whole CUQS datagram, one inline SEND) from one
// thread: takes the posting lock and makes sure the SQ has room. Returns QFWD_DB_OK with
// the lock held (then call qfwd_db_nic_write and qfwd_db_nic_ring, same thread), or
// another QFWD_DB_* with nothing written and the lock free: the caller has the host send.
static __device__ unsigned int qfwd_db_nic_begin(unsigned long long nic, unsigned int len,
                                                struct QfwdNicPost* post)
{
    const QfwdPostingDesc* p = (const QfwdPostingDesc*)nic;
    unsigned long long* ctr = (unsigned long long*)(nic + QFWD_POSTING_COUNTERS);
    const unsigned int mode = p->mode;
    if (len > QFWD_MAX_INLINE || (mode != QFWD_DB_MODE_REGULAR && mode != QFWD_DB_MODE_BLUEFLAME)) {
        atomicAdd(&ctr[QFWD_POST_CTR_FALLBACKS], 1ull);
        return len > QFWD_MAX_INLINE ? QFWD_DB_ERR_TOO_LONG : QFWD_DB_ERR_BAD_MODE;
    }
    const unsigned long long lock = nic + QFWD_POSTING_LOCK;
    unsigned long long lock_spins = 0ull;
    long long start = clock64();
    while (!qfwd_db_try_lock(lock)) {
        lock_spins += 1ull;
        if ((unsigned long long)(clock64() - start) > QFWD_DB_LOCK_LIMIT) {
            atomicAdd(&ctr[QFWD_POST_CTR_FALLBACKS], 1ull);
            return QFWD_DB_ERR_LOCK_TIMEOUT;
        }
    }
    // Held: the state is ours. Volatile accesses: another SM's holder wrote it (L2).
    volatile unsigned int* st = (volatile unsigned int*)(nic + QFWD_POSTING_STATE);
    struct QfwdSq* q = &post->q;
    q->sq = p->sq;
    q->dbrec = p->qp_dbrec;
    q->bf = p->bf;
    q->cq = p->cq;
    q->cq_dbrec = p->cq_dbrec;
    q->wqe_cnt = p->wqe_cnt;
    q->cqe_cnt = p->cqe_cnt;
    q->qpn = p->qpn;
    q->bf_size = p->bf_size;
    q->pi = st[0];
    q->half = st[1];
    q->ci = st[2];
    q->done = st[3];
    post->posts = st[4];
    post->mode = mode;
    ctr[QFWD_POST_CTR_LOCK_SPINS] += lock_spins;
    post->ds = qfwd_db_send_ds(len);
    post->bbs = (post->ds * 16u + QFWD_WQEBB - 1u) / QFWD_WQEBB;
    post->signaled = (post->posts + 1u) % p->signal_every == 0u ? 1u : 0u;
    // Room in the SQ: reap completions (a PCIe read each) only when it is short.
    if (((q->pi - q->done) & 0xffffu) + post->bbs > q->wqe_cnt) {
        ctr[QFWD_POST_CTR_ROOM_WAITS] += 1ull;
        start = clock64();
        while (((q->pi - q->done) & 0xffffu) + post->bbs > q->wqe_cnt) {
            if (!qfwd_db_reap_one(q, qfwd_db_load_cqe_tail(q), ctr) &&
                (unsigned long long)(clock64() - start) > QFWD_DB_SPIN_LIMIT) {
                st[2] = q->ci;
                st[3] = q->done;
                atomicAdd(&ctr[QFWD_POST_CTR_FALLBACKS], 1ull);
                qfwd_db_unlock(lock);
                return QFWD_DB_ERR_CQ_TIMEOUT;
            }
        }
    }
    return QFWD_DB_OK;
}

// Step 2: the WQE into the send queue and the doorbell record. Loads issued first and
// consumed in step 3, after the fence, so its round trip overlaps it (a system fence
// waits for it anyway): when the SQ is half full, the next send CQE (completions are
// reaped before the SQ runs out of room).
static __device__ __forceinline__ void qfwd_db_nic_write(struct QfwdNicPost* post, const unsigned char* payload,
                                                        unsigned int len)
{
    struct QfwdSq* q = &post->q;
    post->reap = ((q->pi - q->done) & 0xffffu) * 2u >= q->wqe_cnt ? 1u : 0u;
    post->cqe_tail = post->reap ? qfwd_db_load_cqe_tail(q) : 0u;
    qfwd_db_write_wqe(q, payload, len, post->signaled, post->ds, post->bbs);
}

// Step 3: one system fence (the WQE, the record, and whatever the caller stored since step
// 2 reach host memory before the doorbell: the mlx5 doorbell sequence,
// docs/architecture.md), then the doorbell, and the lock is released.
static __device__ void qfwd_db_nic_ring(unsigned long long nic, struct QfwdNicPost* post,
                                       const unsigned char* payload, unsigned int len)
{
    unsigned long long* ctr = (unsigned long long*)(nic + QFWD_POSTING_COUNTERS);
    struct QfwdSq* q = &post->q;
    __threadfence_system();
    if (post->reap)
        qfwd_db_reap_one(q, post->cqe_tail, ctr);
    qfwd_db_ring(q, post->mode, payload, len, post->signaled, post->ds, post->bbs);
    ctr[QFWD_POST_CTR_POSTED] += 1ull;
    volatile unsigned int* st = (volatile unsigned int*)(nic + QFWD_POSTING_STATE);
    st[0] = q->pi;
    st[1] = q->half;
    st[2] = q->ci;
    st[3] = q->done;
    st[4] = post->posts + 1u;
    qfwd_db_unlock(nic + QFWD_POSTING_LOCK);
}

// The three steps at once: sends `len` bytes as one inline SEND under the posting lock.
// QFWD_DB_OK once the WQE is in the send queue and the doorbell rung; another QFWD_DB_*
// when nothing was written.
static __device__ unsigned int qfwd_db_nic_post(unsigned long long nic, const unsigned char* payload,
                                               unsigned int len)
{
    struct QfwdNicPost post;
    const unsigned int status = qfwd_db_nic_begin(nic, len, &post);
    if (status != QFWD_DB_OK)
        return status;
    qfwd_db_nic_write(&post, payload, len);
    qfwd_db_nic_ring(nic, &post, payload, len);
    return QFWD_DB_OK;
}

// ---- test kernel -----------------------------------------------------------------------

// Posts `n` SENDs of `payload_len` bytes (byte k of message i = (i * 31 + k) & 0xff, the
// first 4 bytes = i little-endian) with the doorbell `mode`, from one thread, every WQE
// signaled; waits for the last completion. Parameters: QfwdDoorbellSendsParams (qfwd_abi.h;
// qfwd::queues::layout::device_params fills it). result (u32, at p.result): [0] posted
// [1] completions  [2] error CQEs  [3] status (QFWD_DB_*).
extern "C" __global__ void qfwd_doorbell_post_sends(const QfwdDoorbellSendsParams p)
{
    if (blockIdx.x != 0u || threadIdx.x != 0u)
        return;
    unsigned int* result = (unsigned int*)p.result;
    struct QfwdSq q;
    q.sq = p.sq;
    q.dbrec = p.qp_dbrec;
    q.bf = p.bf;
    q.cq = p.cq;
    q.cq_dbrec = p.cq_dbrec;
    q.wqe_cnt = p.wqe_cnt;
    q.cqe_cnt = p.cqe_cnt;
    q.qpn = p.qpn;
    q.bf_size = p.bf_size;
    q.pi = 0u;
    q.half = 0u;
    q.ci = 0u;
    q.done = 0u;
    unsigned int mode = p.mode;
    unsigned int n = p.n;
    unsigned int len = p.payload_len;
    unsigned char* msg = (unsigned char*)p.scratch;
    unsigned int posted = 0u, completions = 0u, errors = 0u, status = QFWD_DB_OK;
    unsigned int cached_ci = 0u;
    unsigned int bbs = (qfwd_db_send_ds(len) * 16u + QFWD_WQEBB - 1u) / QFWD_WQEBB;
    if (len > QFWD_MAX_INLINE)
        status = QFWD_DB_ERR_TOO_LONG;
    for (unsigned int i = 0u; i < n && status == QFWD_DB_OK; i++) {
        for (unsigned int k = 0u; k < len; k++)
            msg[k] = k < 4u ? (unsigned char)(i >> (8u * k)) : (unsigned char)((i * 31u + k) & 0xffu);
        if (mode == QFWD_DB_MODE_CPU_ASSISTED) {
            long long start = clock64();
            do {
                status = qfwd_db_resp_push(p.resp_ring, p.resp_slots, p.resp_slot_bytes, p.resp_ci, i,
                                           &cached_ci, msg, len);
            } while (status == QFWD_DB_ERR_RING_FULL &&
                     (unsigned long long)(clock64() - start) < QFWD_DB_SPIN_LIMIT);
        } else {
            status = qfwd_db_reserve(&q, bbs, &completions, &errors);
            if (status == QFWD_DB_OK)
                status = qfwd_db_post_send_inline(&q, mode, msg, len, 1u);
        }
        if (status == QFWD_DB_OK)
            posted += 1u;
    }
    // Wait for the rest of the completions (the proxy reaps them in cpu-assisted mode).
    if (mode != QFWD_DB_MODE_CPU_ASSISTED) {
        long long start = clock64();
        while (status == QFWD_DB_OK && completions < posted) {
            unsigned int wc, is_error;
            if (qfwd_db_poll_cq(&q, &wc, &is_error)) {
                q.done = wc + bbs;
                completions += 1u;
                errors += is_error;
            } else if ((unsigned long long)(clock64() - start) > QFWD_DB_SPIN_LIMIT) {
                status = QFWD_DB_ERR_CQ_TIMEOUT;
            }
        }
    }
    result[0] = posted;
    result[1] = completions;
    result[2] = errors;
    result[3] = status;
    __threadfence_system();
}

// Posts `n` SENDs of `len` bytes (at most QFWD_MAX_INLINE) from lane 0 of every warp of
// the launch, all through the shared posting block `nic` (device memory, QFWD_POSTING_BYTES:
// the description from qfwd::queues::DevicePosting::desc, the state zeroed): several
// posters on one send queue, as the persistent kernel's warps are. Message m of warp w:
// first 4 bytes (w << 16) | m little-endian, byte k >= 4 = (w * 7 + m + k) & 0xff.
// result[w] = messages posted (qfwd_db_nic_post returned QFWD_DB_OK). Parameters:
// QfwdNicPostsParams (qfwd_abi.h).
extern "C" __global__ void qfwd_doorbell_nic_posts(const QfwdNicPostsParams p)
{
    const unsigned long long nic = p.nic;
    const unsigned int n = p.n, len = p.len;
    unsigned int* result = (unsigned int*)p.result;
    if ((threadIdx.x & 31u) != 0u)
        return;
    const unsigned int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32u;
    unsigned char msg[QFWD_MAX_INLINE];
    const unsigned int l = len < QFWD_MAX_INLINE ? len : QFWD_MAX_INLINE;
    unsigned int posted = 0u;
    for (unsigned int m = 0u; m < n; m++) {
        const unsigned int id = (warp << 16) | (m & 0xffffu);
        for (unsigned int k = 0u; k < l; k++)
            msg[k] = k < 4u ? (unsigned char)(id >> (8u * k)) : (unsigned char)((warp * 7u + m + k) & 0xffu);
        if (qfwd_db_nic_post(nic, msg, l) == QFWD_DB_OK)
            posted += 1u;
    }
    result[warp] = posted;
}
