// Host of the instruction-cache microbenchmark (scripts/icache-bench.py writes the kernel):
// loads icache.cubin with the driver API and prints the median cycles of each case.
#include <cuda.h>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <vector>
#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_; cuGetErrorString(r_, &s_); printf("%s: %s\n", #x, s_); exit(1); } } while (0)
static const int SIZES[] = {2, 4, 8, 16, 24, 32, 48, 64, 96, 128};
static const int NS = 10;
int main(int argc, char** argv) {
    CK(cuInit(0)); CUdevice d; CK(cuDeviceGet(&d, 0)); CUcontext c; CK(cuCtxCreate(&c, nullptr, 0, d));
    CUmodule m; CK(cuModuleLoad(&m, argc > 1 ? argv[1] : "icache.cubin"));
    CUfunction f; CK(cuModuleGetFunction(&f, m, "icache"));
    CUdeviceptr out; const int reps = 21; CK(cuMemAlloc(&out, reps * 4 * 8));
    auto run = [&](int mode, int k, int helper, int warps, std::vector<long long> med[4]) {
        unsigned seed = 12345u; int rr = reps;
        void* args[] = {&out, &mode, &k, &helper, &rr, &seed};
        CK(cuMemsetD8(out, 0, reps * 32));
        CK(cuLaunchKernel(f, 1, 1, 1, 32 * warps, 1, 1, 0, 0, args, 0)); CK(cuCtxSynchronize());
        long long h[reps * 4]; CK(cuMemcpyDtoH(h, out, sizeof h));
        for (int j = 0; j < 4; ++j) { std::vector<long long> v; for (int r = 1; r < reps; ++r) v.push_back(h[r * 4 + j]); std::sort(v.begin(), v.end()); med[j] = v; }
    };
    printf("# mode 0: warp 0 alone after a 512 KB evictor: cycles of the S KB block cold / again / third (median of 20)\n");
    for (int k = 0; k < NS; ++k) { std::vector<long long> v[4]; run(0, k, 0, 1, v);
        printf("alone S %3d KB: cold %7lld  warm %7lld  third %7lld   (cold p10 %lld p90 %lld) cold-warm per KB %.1f\n", SIZES[k], v[0][10], v[1][10], v[2][10], v[0][2], v[0][17], (v[0][10] - v[1][10]) / (double)SIZES[k]); }
    printf("# mode 1: after the evictor, helper warp h runs the block, then warp 0 times it (first / again)\n");
    for (int h : {1, 2, 4}) for (int k = 0; k < NS; ++k) { std::vector<long long> v[4]; run(1, k, h, h + 1, v);
        printf("helper %d S %3d KB: first %7lld  again %7lld\n", h, SIZES[k], v[0][10], v[1][10]); }
    printf("# mode 2: warp 0 runs S, then another block of S2 KB, then S again (is S evicted by S2?)\n");
    for (int k : {2, 3, 5, 7}) for (int k2 = 0; k2 < NS; ++k2) { if (k2 == k) continue; std::vector<long long> v[4]; run(2, k, k2, 1, v);
        printf("S %3d KB after S2 %3d KB: %7lld\n", SIZES[k], SIZES[k2], v[0][10]); }
    return 0;
}
