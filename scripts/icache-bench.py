#!/usr/bin/env python3
"""Writes icache.cu, the instruction-cache microbenchmark (results/archive/h200-decoder-first-call.txt, run A).

Straight-line blocks of S KB (4 independent IMAD chains, 16 B an instruction), each its own
function, timed by one warp with clock64: cold (after a 512 KB evictor), at once again, after a
helper warp of the block ran it, and after another block of S2 KB ran in between.

    python3 scripts/icache-bench.py                      # writes icache.cu here
    nvcc -O2 -arch=sm_90 -cubin -o icache.cubin icache.cu
    nvcc -O2 -o icache-bench scripts/icache-bench-host.cu -lcuda && ./icache-bench icache.cubin
"""
SIZES = [2, 4, 8, 16, 24, 32, 48, 64, 96, 128]
EVICT = 512
out = ['typedef unsigned int u32; typedef unsigned long long u64;',
       'template <int N, int ID> __device__ __noinline__ u32 blk(u32 a, u32 b, u32 c, u32 d) {',
       '#pragma unroll', '  for (int i = 0; i < N; ++i) { a = a * a + 1u; b = b * b + 3u; c = c * c + 5u; d = d * d + 7u; }',
       '  return a ^ b ^ c ^ d; }']
# N iterations = 4 IMADs = 64 B.
def n(kb): return kb * 1024 // 64
out.append('__device__ __forceinline__ u32 run_size(int k, u32 s) { switch (k) {')
for i, kb in enumerate(SIZES):
    out.append(f'  case {i}: return blk<{n(kb)}, {i}>(s, s + 1u, s + 2u, s + 3u);')
out.append('  } return 0u; }')
out.append('__device__ __noinline__ u32 evict(u32 s) { ' + ' '.join(f's = blk<{n(128)}, {100+i}>(s, s + 1u, s + 2u, s + 3u);' for i in range(EVICT // 128)) + ' return s; }')
out.append(f'#define NSIZES {len(SIZES)}')
out.append('__constant__ int sizes_kb[NSIZES] = {' + ','.join(map(str, SIZES)) + '};')
out.append(r'''
// mode 0: warp 0 alone: evict, then T cold, T again, T again.
// mode 1: warp 0 evicts; then warp `helper` runs T; then warp 0 times T (the helper warmed it).
// mode 2: warp 0 evicts; then runs the size-k2 block (another address) before T: does a different block evict T?
extern "C" __global__ void icache(u64* out, int mode, int k, int helper, int reps, u32 seed)
{
    __shared__ volatile int flag;
    const int w = threadIdx.x / 32;
    if (threadIdx.x == 0) flag = 0;
    __syncthreads();
    u32 sink = 0;
    for (int r = 0; r < reps; ++r) {
        if (mode == 0 && w == 0) {
            sink += evict(seed + r);
            long long t0 = clock64(); sink += run_size(k, seed + sink);
            long long t1 = clock64(); sink += run_size(k, seed + sink);
            long long t2 = clock64(); sink += run_size(k, seed + sink);
            long long t3 = clock64();
            if (threadIdx.x == 0) { out[r * 4 + 0] = t1 - t0; out[r * 4 + 1] = t2 - t1; out[r * 4 + 2] = t3 - t2; }
        } else if (mode == 1) {
            if (w == 0) {
                sink += evict(seed + r);
                __syncwarp();
                if (threadIdx.x == 0) flag = 2 * r + 1;
                long long s0 = clock64();
                while (flag != 2 * r + 2 && clock64() - s0 < 100000000ll) {}
                long long t0 = clock64(); sink += run_size(k, seed + sink);
                long long t1 = clock64(); sink += run_size(k, seed + sink);
                long long t2 = clock64();
                if (threadIdx.x == 0) { out[r * 4 + 0] = t1 - t0; out[r * 4 + 1] = t2 - t1; }
            } else if (w == helper) {
                long long s0 = clock64();
                while (flag != 2 * r + 1 && clock64() - s0 < 100000000ll) {}
                sink += run_size(k, seed + r);
                __syncwarp();
                __threadfence_block();
                if ((threadIdx.x & 31) == 0) flag = 2 * r + 2;
            }
            __syncthreads();
        } else if (mode == 2 && w == 0) {
            sink += evict(seed + r);
            sink += run_size(k, seed + sink);
            sink += run_size(helper, seed + sink);
            long long t0 = clock64(); sink += run_size(k, seed + sink);
            long long t1 = clock64();
            if (threadIdx.x == 0) { out[r * 4 + 0] = t1 - t0; }
        }
    }
    if (sink == 0x12345678u) out[0] = sink; // keeps the work
}
''')
open('icache.cu', 'w').write('\n'.join(out) + '\n')
