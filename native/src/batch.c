/*
 * batch.c -- fill many mask rows at once on a few threads.
 *
 * Matchers are handed out one at a time from a shared counter, so a slow mask
 * does not hold up a whole slice of the batch.
 */
#include <pthread.h>
#include <stdio.h>

#include "internal.h"

XG2_HIDDEN int xg2__matcher_fill(xg2_matcher *m, uint32_t *row, int *need_apply);
XG2_HIDDEN int xg2__matcher_enter(xg2_matcher *m);
XG2_HIDDEN void xg2__matcher_leave(xg2_matcher *m);
XG2_HIDDEN int32_t xg2__matcher_vocab_size(const xg2_matcher *m);

#define MAX_BATCH_THREADS 64

typedef struct {
    xg2_matcher *const *ms;
    int32_t n;
    int32_t *bitmask;
    int64_t row_words;
    const int32_t *rows;
    int next;       /* atomic work counter */
    int rc;         /* first failure */
    char msg[512];  /* its message */
    int failed;     /* atomic flag */
} batch_job;

static void run_one(batch_job *j, int32_t i) {
    xg2_matcher *m = j->ms[i];
    int64_t row = j->rows ? j->rows[i] : i;
    int rc = xg2__matcher_enter(m);
    if (!rc) {
        rc = xg2__matcher_fill(m, (uint32_t *)(j->bitmask + row * j->row_words), NULL);
        xg2__matcher_leave(m);
    }
    if (rc && !__atomic_exchange_n(&j->failed, 1, __ATOMIC_ACQ_REL)) {
        j->rc = rc;
        snprintf(j->msg, sizeof j->msg, "matcher %d: %s", i, xg2_last_error());
    }
}

static void *worker(void *arg) {
    batch_job *j = arg;
    for (;;) {
        int32_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (i >= j->n) return NULL;
        run_one(j, i);
    }
}

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
    batch_job j = {ms, n, bitmask, row_words, rows, 0, 0, {0}, 0};
    if (n_threads < 1) n_threads = 1;
    if (n_threads > MAX_BATCH_THREADS) n_threads = MAX_BATCH_THREADS;
    if (n_threads > n) n_threads = n;
    pthread_t tids[MAX_BATCH_THREADS];
    int started = 0;
    for (int t = 1; t < n_threads; t++) {
        if (pthread_create(&tids[started], NULL, worker, &j) != 0) break; /* fewer threads is fine */
        started++;
    }
    worker(&j);
    for (int t = 0; t < started; t++) pthread_join(tids[t], NULL);
    if (j.failed) return xg2__fail(j.rc, "%s", j.msg);
    return XG2_OK;
}
