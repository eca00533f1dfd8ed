// Runs device/window.cu's stream functions on the CPU, a group of std::threads standing in
// for a thread block (std::barrier for bar.sync, a 32-thread std::barrier and a slot per
// lane for a warp's __syncwarp, ballot, scans and reductions, std::atomic_ref for the
// atomics and the volatile accesses), so
// the device code's own paths run, and tests/window_host.rs can check its commits against
// the CPU decoder's on a machine without a GPU. Not a model of the GPU's timing or of its
// memory ordering beyond what the barriers and atomics give.
//
//   driver BLOB MODEL EVENTS STREAMS ROUNDS FINISH THREADS FIRST_ROUND CACHED
//
// BLOB: the model's u32 words; MODEL: its QfwdStreamModel (data is set here); EVENTS:
// STREAMS x (ROUNDS + FINISH) rounds of round_bytes; CACHED 1: the group reads the bulk
// window's tables from a copy (qfwd_window_cache_fill), as a block's warps do. Prints one
// line per answer: `stream status first_round rounds flips`; with QFWD_WINDOW_STEPS set,
// also `windows N steps S reads R` on stderr (the decoding warp's steps inside windows,
// and the table reads on their critical path).
#include <atomic>
#include <barrier>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#define QFWD_WINDOW_HOST 1
#include "qfwd_abi.h"

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short u16;
typedef unsigned char u8;

#define QW_DEV static inline

struct QwGroup {
    u32 tid;
    u32 size;
    u32 barrier;
    const u32* cache;
    u32* dp;
};

static std::barrier<>* qw_barrier = nullptr;

// Inside a window (thread 0 of the group counts): windows, the decoding warp's steps (each
// __syncwarp or warp collective), and the table reads on the critical path (between two
// steps, the most any lane made).
static u64 qw_windows = 0, qw_steps = 0, qw_reads = 0;
static thread_local bool qw_in_window = false;
static thread_local u64 qw_lane_reads = 0;
#define QW_WINDOW_BEGIN(g)       \
    do {                         \
        qw_in_window = true;     \
        qw_lane_reads = 0;       \
        if ((g).tid == 0) qw_windows++; \
    } while (0)
#define QW_WINDOW_END(g) (qw_in_window = false)
#define QW_READ() (qw_lane_reads++)

QW_DEV void qw_sync(const QwGroup&) { qw_barrier->arrive_and_wait(); }
QW_DEV u32 qw_ld(const u32* p) {
    return std::atomic_ref<u32>(*const_cast<u32*>(p)).load(std::memory_order_relaxed);
}
QW_DEV void qw_st(u32* p, u32 v) { std::atomic_ref<u32>(*p).store(v, std::memory_order_relaxed); }
QW_DEV u32 qw_cas(u32* p, u32 cmp, u32 v) {
    std::atomic_ref<u32>(*p).compare_exchange_strong(cmp, v);
    return cmp;
}
QW_DEV void qw_xor(u32* p, u32 v) { std::atomic_ref<u32>(*p).fetch_xor(v); }
QW_DEV void qw_or(u32* p, u32 v) { std::atomic_ref<u32>(*p).fetch_or(v); }
QW_DEV u32 qw_add(u32* p, u32 v) { return std::atomic_ref<u32>(*p).fetch_add(v); }
QW_DEV u32 qw_popc(u32 x) { return std::popcount(x); }
QW_DEV u32 qw_ctz(u32 x) { return std::countr_zero(x); }

// A warp of 32 threads: each lane posts a value, the warp meets, every lane reads all 32,
// and the warp meets again before the slots are reused. Inside a window each meeting is a
// step, and the most table reads a lane made since the last step go to the critical path.
struct QwWarp {
    std::barrier<> meet{32};
    u64 value[32] = {};
    u64 reads[32] = {};
};
static std::vector<QwWarp>* qw_warps = nullptr;
static void qw_exchange(const QwGroup& g, u64 v, u64* out) {
    QwWarp& w = (*qw_warps)[g.tid / 32];
    const u32 lane = g.tid % 32;
    w.value[lane] = v;
    w.reads[lane] = qw_lane_reads;
    w.meet.arrive_and_wait();
    for (u32 i = 0; i < 32; i++) out[i] = w.value[i];
    if (qw_in_window && lane == 0) {
        u64 most = 0;
        for (u32 i = 0; i < 32; i++) most = w.reads[i] > most ? w.reads[i] : most;
        qw_steps++;
        qw_reads += most;
    }
    w.meet.arrive_and_wait();
    qw_lane_reads = 0;
}
QW_DEV void qw_wsync(const QwGroup& g) {
    u64 all[32];
    qw_exchange(g, 0, all);
}
QW_DEV u32 qw_ballot(const QwGroup& g, u32 pred) {
    u64 all[32];
    qw_exchange(g, pred != 0, all);
    u32 word = 0;
    for (u32 i = 0; i < 32; i++) word |= (u32)all[i] << i;
    return word;
}
QW_DEV u32 qw_wmin(const QwGroup& g, u32 v) {
    u64 all[32];
    qw_exchange(g, v, all);
    u32 m = (u32)all[0];
    for (u32 i = 1; i < 32; i++) m = (u32)all[i] < m ? (u32)all[i] : m;
    return m;
}
QW_DEV u64 qw_wmin64(const QwGroup& g, u64 v) {
    u64 all[32];
    qw_exchange(g, v, all);
    u64 m = all[0];
    for (u32 i = 1; i < 32; i++) m = all[i] < m ? all[i] : m;
    return m;
}
QW_DEV u32 qw_wxor(const QwGroup& g, u32 v) {
    u64 all[32];
    qw_exchange(g, v, all);
    u32 x = 0;
    for (u32 i = 0; i < 32; i++) x ^= (u32)all[i];
    return x;
}
QW_DEV u32 qw_wsum(const QwGroup& g, u32 v) {
    u64 all[32];
    qw_exchange(g, v, all);
    u32 x = 0;
    for (u32 i = 0; i < 32; i++) x += (u32)all[i];
    return x;
}
QW_DEV u32 qw_wscan(const QwGroup& g, u32 v) {
    u64 all[32];
    qw_exchange(g, v, all);
    u32 x = 0;
    for (u32 i = 0; i < g.tid % 32; i++) x += (u32)all[i];
    return x;
}

#include "window.cu"

static std::vector<u8> read_file(const char* path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        std::fprintf(stderr, "cannot read %s\n", path);
        std::exit(2);
    }
    return std::vector<u8>(std::istreambuf_iterator<char>(f), {});
}

int main(int argc, char** argv) {
    if (argc != 10) {
        std::fprintf(stderr, "usage: %s BLOB MODEL EVENTS STREAMS ROUNDS FINISH THREADS FIRST_ROUND CACHED\n", argv[0]);
        return 2;
    }
    std::vector<u8> blob_bytes = read_file(argv[1]);
    std::vector<u32> blob(blob_bytes.size() / 4);
    std::copy(blob_bytes.begin(), blob_bytes.end(), reinterpret_cast<u8*>(blob.data()));
    std::vector<u8> model_bytes = read_file(argv[2]);
    QfwdStreamModel m;
    if (model_bytes.size() != sizeof m) return 2;
    std::copy(model_bytes.begin(), model_bytes.end(), reinterpret_cast<u8*>(&m));
    m.data = (u64)(uintptr_t)blob.data();
    const std::vector<u8> events = read_file(argv[3]);
    const u32 streams = std::atoi(argv[4]), rounds = std::atoi(argv[5]), finish = std::atoi(argv[6]);
    const u32 threads = std::atoi(argv[7]);
    const u64 first_round = std::strtoull(argv[8], nullptr, 10);
    const bool cached = std::atoi(argv[9]) != 0;
    std::vector<u32> cache(m.cache_words);
    // A cached group keeps its exact-matching tables apart, as the batch kernel's warps do.
    std::vector<u32> dp(m.scratch_words - m.scratch_hot_words + 1);
    if (cached)
        for (u32 t = 0; t < 64; t++) qfwd_window_cache_fill(t, 64, m, cache.data());
    const u32 inputs = rounds + finish;
    if (events.size() != (size_t)streams * inputs * m.round_bytes) {
        std::fprintf(stderr, "events: %zu bytes\n", events.size());
        return 2;
    }
    std::vector<QfwdStreamState> states(streams);
    std::vector<u32> rows((size_t)streams * m.rounds_per_window * m.row_words);
    std::vector<u32> scratch(m.scratch_words);
    std::vector<std::vector<QfwdCommit>> answers(streams);
    std::barrier<> bar(threads);
    qw_barrier = &bar;
    if (threads % 32 != 0) {
        std::fprintf(stderr, "threads: %u is not a multiple of 32\n", threads);
        return 2;
    }
    std::vector<QwWarp> warps(threads / 32);
    qw_warps = &warps;
    std::vector<std::thread> pool;
    for (u32 t = 0; t < threads; t++) {
        pool.emplace_back([&, t] {
            const QwGroup g = {t, threads, 1, cached ? cache.data() : nullptr, cached ? dp.data() : nullptr};
            qfwd_stream_scratch_init(g, m, scratch.data());
            for (u32 i = 0; i < streams; i++) {
                QfwdStreamState* st = &states[i];
                u32* r = rows.data() + (size_t)i * m.rounds_per_window * m.row_words;
                const u8* ev = events.data() + (size_t)i * inputs * m.round_bytes;
                // The rounds in runs of 7, 1, 13 and 3 in turn (a run's state is read once and
                // written back; its rows are stored together between windows), so runs end
                // before, at and after a window's last round, and some hold two windows.
                std::vector<QfwdCommit> got(rounds + 1);
                u32 count = 0;
                const u32 runs[4] = {7, 1, 13, 3};
                for (u32 k = 0, j = 0; k < rounds; j++) {
                    const u32 want = runs[j % 4], n = rounds - k < want ? rounds - k : want;
                    count = qfwd_stream_push_rounds(g, m, st, r, first_round + k, ev + (size_t)k * m.round_bytes,
                                                    n, scratch.data(), got.data(), rounds + 1, count, nullptr);
                    k += n;
                }
                if (finish) {
                    QfwdCommit c{};
                    const u8* fin = ev + (size_t)rounds * m.round_bytes;
                    if (qfwd_stream_finish(g, m, st, r, fin, scratch.data(), &c) != QFWD_STREAM_NO_COMMIT)
                        got[count++] = c;
                }
                if (t == 0) answers[i].assign(got.begin(), got.begin() + count);
            }
        });
    }
    for (auto& th : pool) th.join();
    if (std::getenv("QFWD_WINDOW_STEPS") != nullptr)
        std::fprintf(stderr, "windows %llu steps %llu reads %llu\n", qw_windows, qw_steps, qw_reads);
    for (u32 i = 0; i < streams; i++) {
        for (const QfwdCommit& c : answers[i]) {
            std::printf("%u %d %llu %u %llu\n", i, c.status, c.first_round, c.rounds, c.flips);
        }
    }
    return 0;
}
