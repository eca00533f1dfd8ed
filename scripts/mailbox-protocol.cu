// What each element of qfwd's slot protocol costs over the bare mailbox floor
// (scripts/mailbox-floor.cu), measured on one machine in one run: a ring of slots instead
// of one slot, poller groups that own every G-th request, and the claim that lets only one
// warp of a group answer (an atomic CAS on a ticket in device memory, as qfwd does, or in
// shared memory). No forwarder and no handler beyond an XOR: the host thread writes the
// request (tagged 16 B chunks) and spins on the response tag, ping-pong.
//
//   nvcc -O3 -arch=sm_90 -o /tmp/mailbox-protocol scripts/mailbox-protocol.cu
//   /tmp/mailbox-protocol [samples] [core]
//
// Prints p50/p90/p99 per (slots, groups, warps per group, claim, host write). The last rows
// repeat two configurations with the host pushing the request's cache lines out of its core
// after writing them (CLDEMOTE to the shared L3, or CLFLUSHOPT), so the GPU's read need not
// snoop them out of the writer's private cache.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sched.h>
#include <vector>

#include <cuda_runtime.h>

#define CHECK(x)                                                                           \
    do {                                                                                   \
        cudaError_t e_ = (x);                                                              \
        if (e_ != cudaSuccess) {                                                           \
            std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                  \
            std::exit(1);                                                                  \
        }                                                                                  \
    } while (0)

static const unsigned STOP = 0xFFFFFFFFu;
static const unsigned CHUNKS = 4u; // a 32 B argument in qfwd's inline layout
static const unsigned MAX_SLOTS = 64u;

enum Claim { NONE = 0, GLOBAL_CAS = 1, SHARED_CAS = 2 };
enum Push { KEEP = 0, DEMOTE = 1, FLUSH = 2 };
static const char* push_name(unsigned p)
{
    return p == KEEP ? "-" : p == DEMOTE ? "cldemote" : "clflushopt";
}

// After the request's stores: move its line out of this core's cache. CLDEMOTE is a hint
// in the NOP space (a no-op where unsupported), written as bytes (0F 1C /0, [rax]) so an
// older assembler still builds it.
static inline void push_line(const volatile void* p, unsigned how)
{
    if (how == DEMOTE) {
        asm volatile(".byte 0x0f, 0x1c, 0x00" : : "a"(p) : "memory");
    } else if (how == FLUSH) {
        asm volatile("clflushopt (%0)" : : "r"(p) : "memory");
    }
}
static const char* claim_name(unsigned c)
{
    return c == NONE ? "none (all answer)" : c == GLOBAL_CAS ? "CAS in device memory" : "CAS in shared memory";
}

struct alignas(16) Chunk {
    unsigned x, y, z, tag;
};

__device__ __forceinline__ Chunk load_chunk(const Chunk* p)
{
    Chunk c;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(c.x), "=r"(c.y), "=r"(c.z), "=r"(c.tag)
                 : "l"(p)
                 : "memory");
    return c;
}

__device__ __forceinline__ void store_chunk(Chunk* p, unsigned x, unsigned tag)
{
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};"
                 :
                 : "l"(p), "r"(x), "r"(0u), "r"(0u), "r"(tag)
                 : "memory");
}

__device__ __forceinline__ unsigned long long load_relaxed_gpu(unsigned long long* p)
{
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

// Request number s (from 0) sits in slot s % slots with tag s + 1. Group g of `groups`
// serves s = g, g + groups, ...; its `wpg` warps poll the group's next slot. With no
// claim every warp of the group that sees the request answers (the same bytes) and moves
// on; a warp that finds a later request of its group in the slot jumps to it. With a
// claim, the warp that wins CAS(ticket, k, k + 1) answers and the others follow the ticket.
__global__ void serve(const Chunk* req, Chunk* resp, unsigned slots, unsigned groups,
                      unsigned wpg, unsigned claim, unsigned long long* tickets)
{
    __shared__ unsigned long long shared_tickets[32];
    const unsigned warp = threadIdx.x / 32u, lane = threadIdx.x % 32u;
    if (threadIdx.x < 32u) {
        shared_tickets[threadIdx.x] = 0ull;
    }
    __syncthreads();
    if (warp >= groups * wpg) {
        return;
    }
    const unsigned g = warp / wpg;
    unsigned long long* ticket = claim == GLOBAL_CAS ? tickets + 16u * g : &shared_tickets[g];
    unsigned long long k = 0ull; // this warp's next request of the group: s = g + k * groups
    for (;;) {
        const unsigned long long s = g + k * groups;
        const unsigned slot = (unsigned)(s % slots);
        const unsigned want = (unsigned)(s + 1ull);
        Chunk c = {0u, 0u, 0u, 0u};
        if (lane < CHUNKS) {
            c = load_chunk(req + slot * CHUNKS + lane);
        }
        unsigned long long t = k;
        if (claim != NONE && lane == 0u) {
            t = claim == GLOBAL_CAS ? load_relaxed_gpu(ticket) : *(volatile unsigned long long*)ticket;
        }
        t = __shfl_sync(0xFFFFFFFFu, t, 0);
        const unsigned tag = __shfl_sync(0xFFFFFFFFu, c.tag, 0);
        if (tag == STOP) {
            break;
        }
        if (t > k) {
            k = t;
            continue;
        }
        const bool whole = __all_sync(0xFFFFFFFFu, lane >= CHUNKS || c.tag == tag);
        if (!whole) {
            continue;
        }
        if (tag != want) {
            // No claim: a later request of this group already sits in the slot (this warp
            // fell behind): jump to it.
            if (claim == NONE && tag > want && (tag - 1u) % groups == g) {
                k = (tag - 1u - g) / groups;
            }
            continue;
        }
        unsigned long long prev = k;
        if (claim != NONE && lane == 0u) {
            prev = atomicCAS(ticket, k, k + 1ull);
        }
        unsigned x = lane < CHUNKS ? c.x : 0u;
        x = __reduce_xor_sync(0xFFFFFFFFu, x);
        prev = __shfl_sync(0xFFFFFFFFu, prev, 0);
        if (prev == k && lane == 0u) {
            store_chunk(resp + slot, x, want);
        }
        k = prev == k ? k + 1ull : prev;
    }
}

int main(int argc, char** argv)
{
    const int samples = argc > 1 ? std::atoi(argv[1]) : 50000;
    const int core = argc > 2 ? std::atoi(argv[2]) : 2;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        std::fprintf(stderr, "cannot pin to core %d; running unpinned\n", core);
    }
    Chunk* host = nullptr;
    const size_t bytes = 2 * MAX_SLOTS * CHUNKS * sizeof(Chunk);
    CHECK(cudaHostAlloc((void**)&host, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    Chunk* dev = nullptr;
    CHECK(cudaHostGetDevicePointer((void**)&dev, host, 0));
    unsigned long long* tickets = nullptr;
    CHECK(cudaMalloc((void**)&tickets, 32 * 16 * sizeof(unsigned long long)));
    volatile Chunk* req = host;
    volatile Chunk* resp = host + MAX_SLOTS * CHUNKS;
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("# %s, %d samples per row after 2000 warm-up, host thread on core %d, %u-chunk "
                "requests, ping-pong\n",
                prop.name, samples, core, CHUNKS);
    std::printf("# slots groups warps/group claim                    push        p50_us  p90_us  "
                "p99_us  max_us\n");
    struct Row {
        unsigned slots, groups, wpg, claim, push;
    };
    const Row rows[] = {
        {1, 1, 1, NONE},  {1, 1, 2, NONE},        {1, 1, 4, NONE},
        {64, 1, 1, NONE}, {64, 1, 2, NONE},       {64, 1, 4, NONE},
        {64, 1, 2, GLOBAL_CAS}, {64, 1, 4, GLOBAL_CAS}, {64, 1, 2, SHARED_CAS}, {64, 1, 4, SHARED_CAS},
        {64, 2, 1, NONE}, {64, 4, 1, NONE},       {64, 8, 1, NONE},
        {64, 4, 2, NONE}, {64, 4, 2, GLOBAL_CAS}, {64, 4, 2, SHARED_CAS},
        {64, 8, 2, GLOBAL_CAS}, {64, 8, 2, SHARED_CAS},
        {64, 1, 2, NONE, DEMOTE}, {64, 1, 2, NONE, FLUSH},
        {64, 8, 1, NONE, DEMOTE}, {64, 8, 1, NONE, FLUSH},
        {64, 1, 1, NONE, DEMOTE}, {64, 1, 1, NONE, FLUSH},
    };
    for (const Row& r : rows) {
        for (unsigned i = 0; i < 2 * MAX_SLOTS * CHUNKS; ++i) {
            host[i].tag = 0u;
        }
        CHECK(cudaMemset(tickets, 0, 32 * 16 * sizeof(unsigned long long)));
        CHECK(cudaDeviceSynchronize());
        serve<<<1, 512>>>(dev, dev + MAX_SLOTS * CHUNKS, r.slots, r.groups, r.wpg, r.claim, tickets);
        CHECK(cudaGetLastError());
        std::vector<double> us;
        us.reserve(samples);
        for (int s = 0; s < samples + 2000; ++s) {
            const unsigned slot = (unsigned)s % r.slots;
            const unsigned tag = (unsigned)s + 1u;
            const auto t0 = std::chrono::steady_clock::now();
            for (unsigned k = 0; k < CHUNKS; ++k) {
                req[slot * CHUNKS + k].x = tag * 7u + k;
                req[slot * CHUNKS + k].tag = tag;
            }
            push_line(&req[slot * CHUNKS], r.push); // 4 chunks: one 64 B line
            const auto deadline = t0 + std::chrono::seconds(1);
            unsigned spins = 0;
            while (resp[slot].tag != tag) {
                if ((++spins & 1023u) == 0u && std::chrono::steady_clock::now() > deadline) {
                    std::fprintf(stderr, "no answer to request %d within 1 s\n", s);
                    std::exit(1);
                }
            }
            const auto t1 = std::chrono::steady_clock::now();
            if (s >= 2000) {
                us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
            }
        }
        for (unsigned i = 0; i < MAX_SLOTS * CHUNKS; ++i) {
            req[i].tag = STOP;
        }
        CHECK(cudaDeviceSynchronize());
        std::sort(us.begin(), us.end());
        auto at = [&](double q) { return us[(size_t)(q * (us.size() - 1))]; };
        std::printf("%7u %6u %11u %-24s %-10s %6.2f  %6.2f  %6.2f  %6.2f\n", r.slots, r.groups,
                    r.wpg, claim_name(r.claim), push_name(r.push), at(0.5), at(0.9), at(0.99),
                    us.back());
        std::fflush(stdout);
    }
    CHECK(cudaFreeHost(host));
    CHECK(cudaFree(tickets));
    return 0;
}
