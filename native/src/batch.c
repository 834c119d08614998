/*
 * batch.c -- many matchers at once on a small pool of native threads.
 *
 * The pool is created on first use and kept: a batch is a job split into one
 * contiguous share per thread; a thread done with its share takes items of the
 * others one at a time (a slow mask does not hold up the batch).  The calling
 * thread works too.  One batch runs at a time; other callers wait for the pool.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#include "internal.h"

XG2_HIDDEN int xg2__matcher_fill(xg2_matcher *m, uint32_t *row, int *need_apply);
XG2_HIDDEN int xg2__matcher_enter(xg2_matcher *m);
XG2_HIDDEN void xg2__matcher_leave(xg2_matcher *m);
XG2_HIDDEN int32_t xg2__matcher_vocab_size(const xg2_matcher *m);

#define MAX_BATCH_THREADS 64

/* Items [next, end) of one thread's share; the counter on a line of its own. */
typedef struct {
    int next __attribute__((aligned(64))); /* atomic */
    int end;
} chunk;

typedef struct job job;
struct job {
    void (*run)(job *j, int32_t i);
    int32_t n;
    /* fill */
    xg2_matcher *const *ms;
    int32_t *bitmask;
    int64_t row_words;
    const int32_t *rows;
    /* accept */
    const int32_t *tokens;
    int8_t *accepted;
    /* written while the job runs: on lines of their own, so the fields above
     * stay shared in every worker's cache */
    int n_chunks;
    chunk chunks[MAX_BATCH_THREADS];
    int failed __attribute__((aligned(64))); /* atomic flag */
    int rc;
    char msg[512];
};

static void record_failure(job *j, int rc, int32_t i) {
    if (!__atomic_exchange_n(&j->failed, 1, __ATOMIC_ACQ_REL)) {
        j->rc = rc;
        snprintf(j->msg, sizeof j->msg, "matcher %d: %s", i, xg2_last_error());
    }
}

static void run_fill(job *j, int32_t i) {
    xg2_matcher *m = j->ms[i];
    int64_t row = j->rows ? j->rows[i] : i;
    int rc = xg2__matcher_enter(m);
    if (!rc) {
        rc = xg2__matcher_fill(m, (uint32_t *)(j->bitmask + row * j->row_words), NULL);
        xg2__matcher_leave(m);
    }
    if (rc) record_failure(j, rc, i);
}

static void run_accept(job *j, int32_t i) {
    int acc = 0;
    int rc = xg2_matcher_accept_token(j->ms[i], j->tokens[i], &acc);
    j->accepted[i] = (int8_t)acc;
    if (rc) record_failure(j, rc, i);
}

/* Thread `c` takes the items of its own chunk first, then helps with the
 * others.  Contiguous shares keep each bitmask row with the thread that filled
 * it last batch: a row handed to the other core costs a cache-line transfer
 * per 64 bytes, more than the fill itself when its mask is cached. */
static void work_on(job *j, int c) {
    for (int k = 0; k < j->n_chunks; k++) {
        chunk *ch = &j->chunks[(c + k) % j->n_chunks];
        for (;;) {
            int32_t i = __atomic_fetch_add(&ch->next, 1, __ATOMIC_RELAXED);
            if (i >= ch->end) break;
            j->run(j, i);
        }
    }
}

static void split(job *j, int n_chunks) {
    j->n_chunks = n_chunks;
    for (int c = 0; c < n_chunks; c++) {
        j->chunks[c].next = (int)((int64_t)j->n * c / n_chunks);
        j->chunks[c].end = (int)((int64_t)j->n * (c + 1) / n_chunks);
    }
}

/* ---- the pool ----
 *
 * Handing a batch to a sleeping thread costs a futex wake and a reschedule
 * (tens of microseconds on a VM), as much as filling 64 cached masks.  So
 * workers spin for a short while after each batch before they sleep, and the
 * caller waits for the last items by spinning too: back-to-back batches (one
 * per decode step of a busy engine) are handed over through one atomic store.
 *
 * A job is published as (cur, slots, gen): a worker that sees gen move claims
 * one of `slots` with a CAS and only then reads cur.  The caller closes the
 * job by taking the unclaimed slots back, then waits until every worker that
 * claimed one has finished; the job lives on the caller's stack until then. */

#define SPIN_NS 200000 /* how long an idle worker keeps spinning */

static struct {
    pthread_mutex_t lock;  /* sleeping and waking only */
    pthread_cond_t wake;
    pthread_mutex_t batch; /* one batch at a time */
    int n_workers;         /* guarded by batch */
    job *cur;
    int slots;             /* atomic: workers that may still join cur */
    int finished;          /* atomic: workers of cur that are done */
    int sleepers;          /* atomic */
    uint64_t gen;          /* atomic */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, 0, NULL, 0, 0, 0, 0};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Wait until gen moves past `seen`: spin first, then sleep. */
static uint64_t await_gen(uint64_t seen) {
    uint64_t g, t0 = 0;
    for (uint32_t k = 0;; k++) {
        if ((g = __atomic_load_n(&pool.gen, __ATOMIC_ACQUIRE)) != seen) return g;
        cpu_relax();
        if ((k & 255) != 255) continue;
        uint64_t t = (uint64_t)xg2__now_ns();
        if (!t0) t0 = t;
        else if (t - t0 > SPIN_NS) break;
    }
    pthread_mutex_lock(&pool.lock);
    __atomic_add_fetch(&pool.sleepers, 1, __ATOMIC_SEQ_CST);
    while ((g = __atomic_load_n(&pool.gen, __ATOMIC_SEQ_CST)) == seen) pthread_cond_wait(&pool.wake, &pool.lock);
    __atomic_sub_fetch(&pool.sleepers, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&pool.lock);
    return g;
}

/* A worker's chunk (1..slots), or 0 when the job needs no more workers. */
static int claim_slot(void) {
    int s = __atomic_load_n(&pool.slots, __ATOMIC_ACQUIRE);
    while (s > 0)
        if (__atomic_compare_exchange_n(&pool.slots, &s, s - 1, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return s;
    return 0;
}

static void *worker(void *arg) {
    (void)arg;
    uint64_t seen = 0;
    for (;;) {
        seen = await_gen(seen);
        int c = claim_slot();
        if (!c) continue; /* a job we are not needed for */
        job *j = __atomic_load_n(&pool.cur, __ATOMIC_ACQUIRE);
        work_on(j, c);
        __atomic_add_fetch(&pool.finished, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* Make sure at least n - 1 workers exist (the caller is the n-th). */
static int ensure_workers(int n) {
    while (pool.n_workers < n - 1) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int bad = pthread_create(&t, &attr, worker, NULL);
        pthread_attr_destroy(&attr);
        if (bad) break; /* fewer threads is fine */
        pool.n_workers++;
    }
    return pool.n_workers + 1;
}

static int run_job(job *j, int32_t n_threads) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > MAX_BATCH_THREADS) n_threads = MAX_BATCH_THREADS;
    if (n_threads > j->n) n_threads = j->n;
    if (n_threads <= 1) {
        split(j, 1);
        work_on(j, 0);
    } else {
        pthread_mutex_lock(&pool.batch);
        int have = ensure_workers(n_threads);
        int wanted = (n_threads < have ? n_threads : have) - 1;
        split(j, wanted + 1);
        __atomic_store_n(&pool.cur, j, __ATOMIC_RELAXED);
        __atomic_store_n(&pool.finished, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&pool.slots, wanted, __ATOMIC_RELEASE);
        __atomic_add_fetch(&pool.gen, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&pool.sleepers, __ATOMIC_SEQ_CST) > 0) {
            pthread_mutex_lock(&pool.lock);
            pthread_cond_broadcast(&pool.wake);
            pthread_mutex_unlock(&pool.lock);
        }
        work_on(j, 0);
        /* Close the job, then wait for the workers that joined it. */
        int joined = wanted - __atomic_exchange_n(&pool.slots, 0, __ATOMIC_ACQ_REL);
        for (uint32_t k = 0; __atomic_load_n(&pool.finished, __ATOMIC_ACQUIRE) < joined; k++) {
            if (k < (1u << 16)) cpu_relax();
            else sched_yield(); /* a worker was preempted mid-item */
        }
        pthread_mutex_unlock(&pool.batch);
    }
    if (j->failed) return xg2__fail(j->rc, "%s", j->msg);
    return XG2_OK;
}

/* ---- entry points ---- */

int xg2_batch_fill_masks(xg2_matcher *const *ms, int32_t n, int32_t *bitmask, int64_t n_rows,
                         int64_t row_words, const int32_t *rows, int32_t n_threads) {
    xg2__clear_error();
    if (n < 0 || (n && (!ms || !bitmask))) return xg2__fail(XG2_ERR_ARG, "NULL argument");
    for (int32_t i = 0; i < n; i++) {
        if (!ms[i]) return xg2__fail(XG2_ERR_ARG, "matcher %d is NULL", i);
        int64_t want = ((int64_t)xg2__matcher_vocab_size(ms[i]) + 31) / 32;
        if (want != row_words)
            return xg2__fail(XG2_ERR_ARG, "matcher %d needs rows of %lld words, the bitmask has %lld", i,
                             (long long)want, (long long)row_words);
        int64_t r = rows ? rows[i] : i;
        if (r < 0 || r >= n_rows)
            return xg2__fail(XG2_ERR_ARG, "row index %lld of matcher %d is out of range [0, %lld)", (long long)r, i,
                             (long long)n_rows);
    }
    job j = {0};
    j.run = run_fill;
    j.n = n;
    j.ms = ms;
    j.bitmask = bitmask;
    j.row_words = row_words;
    j.rows = rows;
    return run_job(&j, n_threads);
}

int xg2_batch_accept_tokens(xg2_matcher *const *ms, int32_t n, const int32_t *tokens, int8_t *accepted,
                            int32_t n_threads) {
    xg2__clear_error();
    if (n < 0 || (n && (!ms || !tokens || !accepted))) return xg2__fail(XG2_ERR_ARG, "NULL argument");
    for (int32_t i = 0; i < n; i++)
        if (!ms[i]) return xg2__fail(XG2_ERR_ARG, "matcher %d is NULL", i);
    job j = {0};
    j.run = run_accept;
    j.n = n;
    j.ms = ms;
    j.tokens = tokens;
    j.accepted = accepted;
    return run_job(&j, n_threads);
}
