// qfwd device code: the persistent stream kernel (docs/streaming.md, "The GPU engine").
//
// Launched once, it serves submissions until the host sets the stop word. A submission
// (src/mailbox/streams.rs lays it out in mapped host memory) holds entries, each a piece
// of one stream's work: reset the stream, push its rounds, finish it. Every stream's state
// and rows stay in device memory between submissions, so a reset is done in place and no
// state is uploaded; the host rings once per submission instead of launching. The host
// fills two buffers in turn (submission n in buffer (n - 1) % 2), so it writes the next
// submission while this one is served.
//
// Entries are grouped in jobs, one stream's pieces each (a stream reset mid-batch makes
// two pieces), served in order by the block that takes the job: the first `jobs` entries
// begin the jobs, and each entry names the next of its job. Thread 0 of each block waits
// for the next submission number (block 0, once every block finished the last submission,
// polls the buffer's control block in host memory and relays it to device memory, where
// the other blocks poll; an idle poller sleeps poll_ns between polls). Then block b takes
// job b and claims further jobs one at a time from an atomic counter in device memory, so
// the blocks finish together; for each entry it copies the events into its stage in
// device memory (one PCIe latency per chunk of rounds, not one per round), decodes them
// with the window decoder's group functions (window.cu), and writes each answer into the
// entry's commit slots and their number into the entry's count. Last,
// after a system fence, it writes the submission number into its buffer's done[b] and
// counts itself finished in device memory. The host waits for every block's done word
// (with a deadline) and reads the answers.
//
// The grid never exceeds the blocks that fit on the device at once (the host asks the
// occupancy API), so every block is running and no submission waits on a block that
// cannot start.
#include "qfwd_abi.h"
#define QFWD_WINDOW_NO_BATCH 1
#include "window.cu"

QW_DEV u32 qs_load_volatile(const u32* p) { return *(const volatile u32*)p; }

// Copies `words` u32 words from mapped host memory into the block's stage.
QW_DEV void qs_stage(const QwGroup& g, u32* stage, const u32* from, u32 words) {
    for (u32 i = g.tid; i < words; i += g.size) stage[i] = qs_load_volatile(from + i);
}

// Serves entry `e` of the current submission, whose buffer starts `buf` bytes after the
// first's; returns the next entry of its job. Thread 0 adds to the block's counters `prof`
// (SERVE_PROF_*, in shared memory).
QW_DEV u32 qs_serve_entry(const QwGroup& g, const QfwdStreamServe& p, const QfwdStreamModel& m,
                           u64 buf, u32 e, u32* stage, u32* scratch, QfwdServeEntry* ent,
                           QfwdCommit* out, u64* prof) {
    u64 t0 = clock64();
    // The entry's words are read by as many threads at once: one PCIe round trip.
    const u32 words = sizeof(QfwdServeEntry) / 4;
    const u32* entries = (const u32*)(p.entries + buf);
    if (g.tid < words) ((u32*)ent)[g.tid] = qs_load_volatile(entries + words * e + g.tid);
    qw_sync(g);
    const QfwdServeEntry en = *ent;
    if (en.stream >= p.streams) {
        // The host never sends one; answer nothing rather than touch another's memory.
        if (g.tid == 0) ((volatile u32*)(p.counts + buf))[e] = 0;
        qw_sync(g);
        return en.next;
    }
    QfwdStreamState* st = (QfwdStreamState*)p.states + en.stream;
    u32* rows = (u32*)p.rows + (u64)en.stream * m.rounds_per_window * m.row_words;
    if (en.flags & QFWD_SERVE_RESET) qfwd_stream_reset(g, st);
    const u32 finish = (en.flags & QFWD_SERVE_FINISH) ? 1u : 0u;
    const u32 inputs = en.rounds + finish;
    // Chunks of a multiple of 4 rounds keep every chunk's start 4-byte aligned.
    const u32 chunk = (p.stage_bytes / m.round_bytes) & ~3u;
    const u8* events = (const u8*)(p.events + buf) + en.events_offset;
    QfwdCommit* commits = (QfwdCommit*)(p.commits + buf) + en.commit_offset;
    u32 count = 0;
    for (u32 done = 0; done < inputs; done += chunk) {
        const u32 take = inputs - done < chunk ? inputs - done : chunk;
        qs_stage(g, stage, (const u32*)(events + (u64)done * m.round_bytes),
                 (take * m.round_bytes + 3) / 4);
        qw_sync(g);
        const u64 t1 = clock64();
        if (g.tid == 0) prof[QFWD_SERVE_PROF_STAGE] += t1 - t0;
        // The chunk's rounds, then (in the last chunk) the final round.
        const u32 rounds = done >= en.rounds ? 0 : (en.rounds - done < take ? en.rounds - done : take);
        count = qfwd_stream_push_rounds(g, m, st, rows, en.first_round + done, (const u8*)stage,
                                        rounds, scratch, commits, en.commit_capacity, count,
                                        &prof[QFWD_SERVE_PROF_WINDOWS]);
        if (rounds < take) {
            const u8* ev = (const u8*)stage + (u64)rounds * m.round_bytes;
            const u64 tr = clock64();
            if (qfwd_stream_finish(g, m, st, rows, ev, scratch, out) != QFWD_STREAM_NO_COMMIT) {
                if (g.tid == 0) prof[QFWD_SERVE_PROF_WINDOWS] += clock64() - tr;
                if (g.tid == 0 && count < en.commit_capacity) {
                    volatile QfwdCommit* c = (volatile QfwdCommit*)(commits + count);
                    c->first_round = out->first_round;
                    c->flips = out->flips;
                    c->rounds = out->rounds;
                    c->status = out->status;
                }
                count++;
            }
        }
        // Every thread is done with the stage before the next chunk overwrites it.
        qw_sync(g);
        t0 = clock64();
        if (g.tid == 0) {
            prof[QFWD_SERVE_PROF_DECODE] += t0 - t1;
            prof[QFWD_SERVE_PROF_ROUNDS] += take;
        }
    }
    if (g.tid == 0) {
        prof[QFWD_SERVE_PROF_ENTRIES] += 1;
        prof[QFWD_SERVE_PROF_ANSWERS] += count;
    }
    if (g.tid == 0) ((volatile u32*)(p.counts + buf))[e] = count;
    // Every thread has read the entry before the next one overwrites it.
    qw_sync(g);
    return en.next;
}

// Thread 0 of block 0: waits until every block finished submission `served` (the relay's
// count of finished (block, submission) pairs reaches served * grid, wrapping as it does),
// then for submission `served + 1` in its buffer's control block in host memory, or the
// stop word; relays what it found to device memory, where the other blocks poll (one PCIe
// poller, not one per block). The gate keeps a stream's jobs in submission order (its job
// in the next submission may go to another block) and frees the claim word.
QW_DEV void qs_wait_host(const QfwdStreamServe& p, u32 served, u32* w) {
    const u32* host = (const u32*)(p.control + (u64)(served % QFWD_SERVE_BUFFERS) * p.buffer_stride);
    volatile u32* r = (volatile u32*)p.relay;
    while (r[QFWD_SERVE_FINISHED_WORD] != served * gridDim.x) __nanosleep(32);
    for (;;) {
        w[QFWD_SERVE_STOP_WORD] = qs_load_volatile(host + QFWD_SERVE_STOP_WORD);
        w[QFWD_SERVE_SEQ_WORD] = qs_load_volatile(host + QFWD_SERVE_SEQ_WORD);
        if (w[QFWD_SERVE_STOP_WORD] != 0 || w[QFWD_SERVE_SEQ_WORD] == served + 1) break;
        __nanosleep(p.poll_ns);
    }
    // The submission's entries, jobs and events are read after its number.
    __threadfence_system();
    w[QFWD_SERVE_ENTRIES_WORD] = qs_load_volatile(host + QFWD_SERVE_ENTRIES_WORD);
    w[QFWD_SERVE_JOBS_WORD] = qs_load_volatile(host + QFWD_SERVE_JOBS_WORD);
    r[QFWD_SERVE_CLAIM_WORD] = gridDim.x;
    r[QFWD_SERVE_ENTRIES_WORD] = w[QFWD_SERVE_ENTRIES_WORD];
    r[QFWD_SERVE_JOBS_WORD] = w[QFWD_SERVE_JOBS_WORD];
    r[QFWD_SERVE_STOP_WORD] = w[QFWD_SERVE_STOP_WORD];
    r[QFWD_SERVE_SEQ_WORD] = w[QFWD_SERVE_SEQ_WORD];
    __threadfence();
    // The count announces work only: a block that read the stop word before it changed
    // and the count after must not take a stop for a submission (the other words would
    // be the last one's). A stop reaches the blocks through the stop word alone.
    if (w[QFWD_SERVE_STOP_WORD] == 0) r[QFWD_SERVE_COUNT_WORD] = served + 1;
}

// Thread 0 of a block: waits for submission `served + 1` or the stop word (block 0 from
// host memory, the others from block 0's relay). Fills the control words `w`.
QW_DEV void qs_wait(const QfwdStreamServe& p, u32 served, u32* w) {
    if (blockIdx.x == 0) {
        qs_wait_host(p, served, w);
        return;
    }
    const u32* relay = (const u32*)p.relay;
    for (;;) {
        w[QFWD_SERVE_STOP_WORD] = qs_load_volatile(relay + QFWD_SERVE_STOP_WORD);
        if (w[QFWD_SERVE_STOP_WORD] != 0 || qs_load_volatile(relay + QFWD_SERVE_COUNT_WORD) == served + 1)
            break;
        __nanosleep(p.poll_ns);
    }
    // The relayed words, the entries and every stream's state are read after the count.
    __threadfence_system();
    w[QFWD_SERVE_SEQ_WORD] = qs_load_volatile(relay + QFWD_SERVE_SEQ_WORD);
    w[QFWD_SERVE_ENTRIES_WORD] = qs_load_volatile(relay + QFWD_SERVE_ENTRIES_WORD);
    w[QFWD_SERVE_JOBS_WORD] = qs_load_volatile(relay + QFWD_SERVE_JOBS_WORD);
}

// Serves the jobs of the current submission: block b takes job b, then claims the next
// from an atomic counter in device memory, so blocks finish together; a job's entries are
// served in order (entry j begins job j; each names the next).
QW_DEV void qs_serve_jobs(const QwGroup& g, const QfwdStreamServe& p, const QfwdStreamModel& m,
                          u64 buf, u32 entries, u32 jobs, u32* stage, u32* scratch, u32* s_claim,
                          QfwdServeEntry* s_entry, QfwdCommit* s_out, u64* prof) {
    for (u32 j = blockIdx.x; j < jobs;) {
        // A job has at most `entries` entries: the bound stops a corrupt chain.
        u32 e = j;
        for (u32 k = 0; k < entries && e < entries; k++)
            e = qs_serve_entry(g, p, m, buf, e, stage, scratch, s_entry, s_out, prof);
        if (g.tid == 0) s_claim[0] = atomicAdd((u32*)p.relay + QFWD_SERVE_CLAIM_WORD, 1u);
        qw_sync(g);
        j = s_claim[0];
        // Every thread read the claim before the next one overwrites it.
        qw_sync(g);
    }
}

extern "C" __global__ void qfwd_stream_serve(const QfwdStreamServe p) {
    extern __shared__ u32 qw_shared[];
    __shared__ u32 s_words[8], s_claim[1];
    __shared__ QfwdServeEntry s_entry;
    __shared__ QfwdCommit s_out;
    const QfwdStreamModel& m = *(const QfwdStreamModel*)p.model;
    const QwGroup g = {threadIdx.x, blockDim.x, 1};
    u32* scratch = p.scratch ? (u32*)p.scratch + (u64)blockIdx.x * m.scratch_words : qw_shared;
    u32* stage = (u32*)p.stage + (u64)blockIdx.x * (p.stage_bytes / 4);
    qfwd_stream_scratch_init(g, m, scratch);
    // Thread 0's counters, in shared memory: an array in registers costs every thread
    // the registers (126 instead of 80 a thread: 2 blocks a multiprocessor instead of 3).
    __shared__ u64 prof[QFWD_SERVE_PROFILE_WORDS];
    if (g.tid == 0)
        for (u32 k = 0; k < QFWD_SERVE_PROFILE_WORDS; k++) prof[k] = 0;
    // Submissions served: the next is `served + 1`, in buffer served % SERVE_BUFFERS.
    u32 served = 0;
    for (;;) {
        if (g.tid == 0) {
            const u64 t = clock64();
            qs_wait(p, served, s_words);
            prof[QFWD_SERVE_PROF_IDLE] += clock64() - t;
        }
        qw_sync(g);
        if (s_words[QFWD_SERVE_STOP_WORD] != 0) break;
        const u32 seq = s_words[QFWD_SERVE_SEQ_WORD];
        const u32 n = s_words[QFWD_SERVE_ENTRIES_WORD], jobs = s_words[QFWD_SERVE_JOBS_WORD];
        const u32 entries = n < p.max_entries ? n : p.max_entries;
        const u64 buf = (u64)(served % QFWD_SERVE_BUFFERS) * p.buffer_stride;
        qs_serve_jobs(g, p, m, buf, entries, jobs < entries ? jobs : entries, stage, scratch, s_claim,
                      &s_entry, &s_out, prof);
        if (g.tid == 0) {
            volatile u64* out = (volatile u64*)p.profile + (u64)blockIdx.x * QFWD_SERVE_PROFILE_WORDS;
            for (u32 k = 0; k < QFWD_SERVE_PROFILE_WORDS; k++) out[k] = prof[k];
            // Answers, counts, states and rows land before the done word and the finished
            // count that announce them.
            __threadfence_system();
            ((volatile u32*)(p.done + buf))[blockIdx.x] = seq;
            atomicAdd((u32*)p.relay + QFWD_SERVE_FINISHED_WORD, 1u);
        }
        served += 1;
    }
}
