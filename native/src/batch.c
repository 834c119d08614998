/*
 * batch.c -- many matchers at once on a small pool of native threads.
 *
 * The pool is created on first use and kept: a batch is a job whose items are
 * handed out one at a time from a shared counter (a slow mask does not hold up
 * a whole slice of the batch); the calling thread works too.  One batch runs at
 * a time; other callers wait for the pool.
 */
#include <pthread.h>
#include <stdio.h>

#include "internal.h"

XG2_HIDDEN int xg2__matcher_fill(xg2_matcher *m, uint32_t *row, int *need_apply);
XG2_HIDDEN int xg2__matcher_enter(xg2_matcher *m);
XG2_HIDDEN void xg2__matcher_leave(xg2_matcher *m);
XG2_HIDDEN int32_t xg2__matcher_vocab_size(const xg2_matcher *m);

#define MAX_BATCH_THREADS 64

typedef struct job job;
struct job {
    void (*run)(job *j, int32_t i);
    int32_t n;
    int next;   /* atomic: next item */
    int failed; /* atomic flag */
    int rc;
    char msg[512];
    /* fill */
    xg2_matcher *const *ms;
    int32_t *bitmask;
    int64_t row_words;
    const int32_t *rows;
    /* accept */
    const int32_t *tokens;
    int8_t *accepted;
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

static void work_on(job *j) {
    for (;;) {
        int32_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (i >= j->n) return;
        j->run(j, i);
    }
}

/* ---- the pool ---- */

static struct {
    pthread_mutex_t lock;   /* guards the fields below */
    pthread_cond_t wake, done;
    pthread_mutex_t batch;  /* one batch at a time */
    int n_workers;
    job *cur;
    int wanted;             /* workers asked to join the current job */
    int joined, running;
    uint64_t gen;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_MUTEX_INITIALIZER, 0, NULL, 0, 0, 0, 0};

static void *worker(void *arg) {
    (void)arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (pool.gen == seen || pool.joined >= pool.wanted) {
            if (pool.gen != seen) seen = pool.gen; /* a job we are not needed for */
            pthread_cond_wait(&pool.wake, &pool.lock);
        }
        seen = pool.gen;
        job *j = pool.cur;
        pool.joined++;
        pool.running++;
        pthread_mutex_unlock(&pool.lock);
        work_on(j);
        pthread_mutex_lock(&pool.lock);
        if (--pool.running == 0) pthread_cond_broadcast(&pool.done);
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
        work_on(j);
    } else {
        pthread_mutex_lock(&pool.batch);
        pthread_mutex_lock(&pool.lock);
        int have = ensure_workers(n_threads);
        pool.cur = j;
        pool.wanted = (n_threads < have ? n_threads : have) - 1;
        pool.joined = 0;
        pool.gen++;
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.lock);
        work_on(j);
        pthread_mutex_lock(&pool.lock);
        /* Wait until every worker that joined has finished its items. */
        while (pool.running > 0) pthread_cond_wait(&pool.done, &pool.lock);
        pool.wanted = 0;
        pool.cur = NULL;
        pthread_mutex_unlock(&pool.lock);
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
