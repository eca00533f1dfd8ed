// The host<->GPU mailbox floor on this machine: the smallest round trip through mapped,
// pinned host memory with nothing but a sequence tag in the data (the microbenchmark behind
// docs/architecture.md's mailbox rules), to compare with qfwd's persistent kernel on the
// same machine (tests/gpu_latency_probe.rs). No forwarder, no claim, no handler: W warps
// poll one request slot; every warp that sees a new tag answers it (the same bytes, so
// duplicates are harmless); the host writes the request and spins on the response tag.
//
//   nvcc -O3 -arch=sm_90 -o /tmp/mailbox-floor scripts/mailbox-floor.cu
//   /tmp/mailbox-floor [samples] [core]
//
// Prints p50/p90/p99 per (chunks per request, warps, start-up stagger).
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

// Lane i reads chunk i of the request (one read returns all of it); the request is complete
// when every chunk carries the tag; the answer is one chunk {xor of the x words, tag}.
__global__ void poll(const Chunk* req, Chunk* resp, unsigned warps, unsigned chunks,
                     unsigned stagger_ns)
{
    const unsigned warp = threadIdx.x / 32u, lane = threadIdx.x % 32u;
    if (warp >= warps) {
        return;
    }
    if (stagger_ns != 0u) {
        __nanosleep(warp * stagger_ns);
    }
    unsigned answered = 0u;
    for (;;) {
        Chunk c = {0u, 0u, 0u, 0u};
        if (lane < chunks) {
            c = load_chunk(req + lane);
        }
        const unsigned tag = __shfl_sync(0xFFFFFFFFu, c.tag, 0);
        if (tag == STOP) {
            break;
        }
        const bool whole = __all_sync(0xFFFFFFFFu, lane >= chunks || c.tag == tag);
        if (tag != 0u && tag != answered && whole) {
            unsigned x = lane < chunks ? c.x : 0u;
            for (unsigned o = 16u; o > 0u; o >>= 1) {
                x ^= __shfl_xor_sync(0xFFFFFFFFu, x, o);
            }
            if (lane == 0u) {
                store_chunk(resp, x, tag);
            }
            answered = tag;
        }
    }
}

int main(int argc, char** argv)
{
    const int samples = argc > 1 ? std::atoi(argv[1]) : 100000;
    const int core = argc > 2 ? std::atoi(argv[2]) : 2;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        std::fprintf(stderr, "cannot pin to core %d; running unpinned\n", core);
    }
    Chunk* host = nullptr;
    CHECK(cudaHostAlloc((void**)&host, 4096, cudaHostAllocMapped | cudaHostAllocPortable));
    Chunk* dev = nullptr;
    CHECK(cudaHostGetDevicePointer((void**)&dev, host, 0));
    volatile Chunk* req = host;
    volatile Chunk* resp = host + 64; // another 1 KiB away
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("# %s, %d samples per row after 2000 warm-up, host thread on core %d\n", prop.name,
                samples, core);
    std::printf("# chunks warps stagger_ns   p50_us  p90_us  p99_us  max_us\n");
    unsigned tag = 0u;
    for (unsigned chunks : {1u, 4u}) {
        for (unsigned warps : {1u, 2u, 4u, 8u, 16u}) {
            for (unsigned stagger : {0u, 1700u}) {
                if (warps == 1u && stagger != 0u) {
                    continue;
                }
                for (int i = 0; i < 64; ++i) {
                    req[i].tag = 0u;
                    resp[i].tag = 0u;
                }
                poll<<<1, 512>>>(dev, dev + 64, warps, chunks, stagger / warps);
                CHECK(cudaGetLastError());
                std::vector<double> us;
                us.reserve(samples);
                for (int s = 0; s < samples + 2000; ++s) {
                    ++tag;
                    const auto t0 = std::chrono::steady_clock::now();
                    // Tag last in each chunk; x86 makes the stores visible in order.
                    for (unsigned k = 0; k < chunks; ++k) {
                        req[k].x = tag * 7u + k;
                        req[k].tag = tag;
                    }
                    const auto deadline = t0 + std::chrono::seconds(1);
                    while (resp->tag != tag) {
                        if (std::chrono::steady_clock::now() > deadline) {
                            std::fprintf(stderr, "no answer to tag %u within 1 s\n", tag);
                            std::exit(1);
                        }
                    }
                    const auto t1 = std::chrono::steady_clock::now();
                    if (s >= 2000) {
                        us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
                    }
                }
                for (unsigned k = 0; k < chunks; ++k) {
                    req[k].tag = STOP;
                }
                CHECK(cudaDeviceSynchronize());
                std::sort(us.begin(), us.end());
                auto at = [&](double q) { return us[(size_t)(q * (us.size() - 1))]; };
                std::printf("%8u %5u %10u   %6.2f  %6.2f  %6.2f  %6.2f\n", chunks, warps, stagger,
                            at(0.5), at(0.9), at(0.99), us.back());
            }
        }
    }
    CHECK(cudaFreeHost(host));
    return 0;
}
