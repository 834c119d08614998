/*
 * stress_threads.c -- thread stress on the C ABI, meant for ThreadSanitizer
 * (test_thread_stress.py builds it with gcc -fsanitize=thread and runs it):
 *
 *   stress_threads [SECONDS]
 *
 * For SECONDS (default 5), at once:
 *   - 4 walkers: their own matchers of shared compiled grammars, seeded random walks
 *     (fill, accept an allowed token, now and then roll back); every mask's hash is
 *     compared to the same walk run on one thread before the stress;
 *   - a batch thread: xg2_batch_fill_masks on 3 pool threads over matchers at known
 *     positions, each row compared to its single-threaded mask;
 *   - 2 compile threads: new grammars compiled for the same vocabulary (its mask cache
 *     limited to 64 KiB, so it evicts under the walkers), precomputed, and checked on a
 *     string they must accept and one they must not;
 *   - 2 threads misusing one matcher: every call returns XG2_ERR_STATE (the overlap
 *     refused) or the right answer.
 * Prints "stress_threads: ok" and exits 0, or prints each failure and exits 1.  A TSan
 * report fails the test that runs it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xg2.h"

#define WALKERS 4
#define WALK_STEPS 40
#define SEEDS 6
#define MAX_TOKENS 2048

static atomic_int failures;
static double deadline;

#define FAIL(...)                                        \
    do {                                                 \
        fprintf(stderr, "FAILED %s:%d: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                    \
        fprintf(stderr, "\n");                           \
        atomic_fetch_add(&failures, 1);                  \
    } while (0)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t next_rand(uint64_t *s) { /* splitmix64: a per-thread, seeded stream */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---- the vocabulary: every byte, pairs of 40 characters, a stop token ---- */

static xg2_vocab *vocab;
static int32_t n_words, vocab_size, stop_id;

static void make_vocab(void) {
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789\"{}:, ";
    static char data[MAX_TOKENS * 4];
    static uint32_t off[MAX_TOKENS + 1];
    int32_t n = 0;
    uint32_t pos = 0;
    for (int b = 0; b < 256; b++) off[n++] = pos, data[pos++] = (char)b;
    for (const char *a = alphabet; *a; a++)
        for (const char *c = alphabet; *c; c++) off[n++] = pos, data[pos++] = *a, data[pos++] = *c;
    off[n++] = pos;
    memcpy(data + pos, "</s>", 4);
    pos += 4;
    off[n] = pos;
    stop_id = n - 1;
    if (xg2_vocab_new(XG2_VOCAB_RAW, data, off, n, n, &stop_id, 1, &stop_id, 1, &vocab) != XG2_OK) {
        fprintf(stderr, "vocab: %s\n", xg2_last_error());
        exit(2);
    }
    xg2_vocab_set_cache_limit(vocab, 64 << 10);
    vocab_size = xg2_vocab_size(vocab);
    n_words = (vocab_size + 31) / 32;
}

static int bit(const int32_t *row, int32_t t) { return (int)(((uint32_t)row[t >> 5] >> (t & 31)) & 1u); }

static uint64_t hash_row(const int32_t *row) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t i = 0; i < n_words; i++) h = (h ^ (uint32_t)row[i]) * 1099511628211ull;
    return h;
}

/* The allowed tokens of a row; how many. */
static int32_t allowed(const int32_t *row, int32_t *ids) {
    int32_t n = 0;
    for (int32_t t = 0; t < vocab_size; t++)
        if (bit(row, t)) ids[n++] = t;
    return n;
}

/* ---- the shared grammars ---- */

static const char *const SOURCES[] = {
    "root ::= obj\nobj ::= \"{\" ( pair (\", \" pair)* )? \"}\"\npair ::= \"\\\"\" [a-z]+ \"\\\": \" val\n"
    "val ::= obj | [0-9]+ | \"true\" | \"null\"",
    "root ::= [a-z]{2,12} (\",\" [0-9]{1,4})*",
    "root ::= item (\", \" item)*\nitem ::= [a-z]+ | \"{\" root \"}\" | \"\\u00e9t\\u00e9\"",
    "root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [a-c] | \"(\" expr \")\"",
};
#define N_GRAMMARS ((int)(sizeof SOURCES / sizeof *SOURCES))
static xg2_compiled *compiled[N_GRAMMARS];

static xg2_compiled *compile_text(const char *text) {
    xg2_grammar *g = NULL;
    xg2_compiled *c = NULL;
    if (xg2_grammar_from_ebnf(text, strlen(text), "root", &g) != XG2_OK) {
        FAIL("grammar %s: %s", text, xg2_last_error());
        return NULL;
    }
    if (xg2_compiled_new(g, vocab, &c) != XG2_OK) FAIL("compile %s: %s", text, xg2_last_error());
    xg2_grammar_free(g); /* the compiled grammar keeps what it needs */
    return c;
}

/* ---- walks ---- */

/* A seeded walk; writes each mask's hash to out; returns how many. */
static int walk(const xg2_compiled *c, uint64_t seed, uint64_t *out) {
    int32_t *row = calloc((size_t)n_words, sizeof *row), *ids = malloc(sizeof(int32_t) * (size_t)vocab_size);
    xg2_matcher *m = NULL;
    int n = 0, need, acc;
    if (!row || !ids || xg2_matcher_new(c, NULL, -1, 0, &m) != XG2_OK) {
        FAIL("walk setup");
        goto out;
    }
    for (int step = 0; step < WALK_STEPS && !xg2_matcher_is_terminated(m); step++) {
        if (xg2_matcher_fill_mask(m, row, n_words, &need) != XG2_OK) {
            FAIL("fill: %s", xg2_last_error());
            break;
        }
        out[n++] = hash_row(row);
        int32_t k = allowed(row, ids), steps = xg2_matcher_num_steps(m);
        uint64_t r = next_rand(&seed);
        if (steps && r % 100 < 15) {
            if (xg2_matcher_rollback(m, 1 + (int32_t)((r >> 8) % (uint64_t)(steps < 3 ? steps : 3))) != XG2_OK)
                FAIL("rollback: %s", xg2_last_error());
            continue;
        }
        if (!k) {
            FAIL("empty mask");
            break;
        }
        if (xg2_matcher_accept_token(m, ids[(r >> 16) % (uint64_t)k], &acc) != XG2_OK || !acc)
            FAIL("an allowed token was refused");
    }
out:
    xg2_matcher_free(m);
    free(row);
    free(ids);
    return n;
}

static uint64_t reference[N_GRAMMARS][SEEDS][WALK_STEPS];
static int reference_n[N_GRAMMARS][SEEDS];

static void *walker(void *arg) {
    uint64_t r = (uint64_t)(uintptr_t)arg, got[WALK_STEPS];
    while (now() < deadline) {
        int g = (int)(next_rand(&r) % N_GRAMMARS), s = (int)(next_rand(&r) % SEEDS);
        int n = walk(compiled[g], (uint64_t)s, got);
        if (n != reference_n[g][s] || memcmp(got, reference[g][s], sizeof(uint64_t) * (size_t)n) != 0)
            FAIL("walk (grammar %d, seed %d) differs from the single-threaded run", g, s);
    }
    return NULL;
}

/* ---- batch fills at known positions ---- */

#define POSITIONS (N_GRAMMARS * 3)
static int32_t prefix[POSITIONS][12], prefix_n[POSITIONS];
static int32_t *expected_rows; /* POSITIONS rows */

static xg2_matcher *at_position(int p) {
    xg2_matcher *m = NULL;
    int acc;
    if (xg2_matcher_new(compiled[p % N_GRAMMARS], NULL, -1, 0, &m) != XG2_OK) return NULL;
    for (int32_t i = 0; i < prefix_n[p]; i++)
        if (xg2_matcher_accept_token(m, prefix[p][i], &acc) != XG2_OK || !acc) FAIL("prefix token refused");
    return m;
}

static void make_positions(void) {
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)vocab_size);
    int need, acc;
    expected_rows = calloc((size_t)POSITIONS * (size_t)n_words, sizeof(int32_t));
    for (int p = 0; p < POSITIONS; p++) {
        uint64_t r = 1000 + (uint64_t)p;
        xg2_matcher *m = NULL;
        xg2_matcher_new(compiled[p % N_GRAMMARS], NULL, -1, 0, &m);
        int32_t len = (int32_t)(next_rand(&r) % 12);
        for (prefix_n[p] = 0; prefix_n[p] < len && !xg2_matcher_is_terminated(m); prefix_n[p]++) {
            int32_t *row = expected_rows + (size_t)p * (size_t)n_words;
            xg2_matcher_fill_mask(m, row, n_words, &need);
            int32_t k = allowed(row, ids);
            if (!k) break;
            prefix[p][prefix_n[p]] = ids[next_rand(&r) % (uint64_t)k];
            xg2_matcher_accept_token(m, prefix[p][prefix_n[p]], &acc);
        }
        xg2_matcher_fill_mask(m, expected_rows + (size_t)p * (size_t)n_words, n_words, &need);
        xg2_matcher_free(m);
    }
    free(ids);
}

static void *batcher(void *arg) {
    (void)arg;
    xg2_matcher *ms[POSITIONS];
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)POSITIONS * (size_t)n_words);
    while (now() < deadline) {
        for (int p = 0; p < POSITIONS; p++) ms[p] = at_position(p);
        if (xg2_batch_fill_masks(ms, POSITIONS, rows, POSITIONS, n_words, NULL, 3) != XG2_OK)
            FAIL("batch fill: %s", xg2_last_error());
        else if (memcmp(rows, expected_rows, sizeof(int32_t) * (size_t)POSITIONS * (size_t)n_words) != 0)
            FAIL("a batch row differs from the single-threaded mask");
        for (int p = 0; p < POSITIONS; p++) xg2_matcher_free(ms[p]);
    }
    free(rows);
    return NULL;
}

/* ---- compiles beside the walkers ---- */

static void *compiler(void *arg) {
    int j = (int)(uintptr_t)arg, acc;
    char text[128], good[64], bad[64];
    for (int n = 1; now() < deadline; n++) {
        int w = 1 + (n * 7 + j) % 23;
        snprintf(text, sizeof text, "root ::= [a-c]{%d} \"x%d\" | \"q\" [0-9]{0,%d}", w, j, n % 9);
        memset(good, 'a', (size_t)w);
        snprintf(good + w, sizeof good - (size_t)w, "x%d", j);
        memset(bad, 'a', (size_t)w + 1);
        snprintf(bad + w + 1, sizeof bad - (size_t)w - 1, "x%d", j);
        xg2_compiled *c = compile_text(text);
        if (!c) continue;
        int32_t done;
        xg2_compiled_precompute(c, 8, -1, &done);
        xg2_matcher *m = NULL;
        if (xg2_matcher_new(c, NULL, -1, 0, &m) == XG2_OK) {
            if (xg2_matcher_accept_bytes(m, good, strlen(good), &acc) != XG2_OK || !acc ||
                !xg2_matcher_is_completed(m))
                FAIL("%s refused by %s", good, text);
            xg2_matcher_reset(m);
            if (xg2_matcher_accept_bytes(m, bad, strlen(bad), &acc) != XG2_OK || acc)
                FAIL("%s accepted by %s", bad, text);
        }
        xg2_matcher_free(m);
        xg2_compiled_free(c);
    }
    return NULL;
}

/* ---- one matcher, two threads (a caller error the core must survive) ---- */

static xg2_matcher *shared;
static int32_t *letters_row;

static void *misuser(void *arg) {
    uint64_t r = (uint64_t)(uintptr_t)arg;
    int32_t *row = malloc(sizeof(int32_t) * (size_t)n_words);
    int acc = -1, need, rc;
    while (now() < deadline) {
        switch (next_rand(&r) % 3) {
        case 0:
            rc = xg2_matcher_accept_token(shared, 'a', &acc); /* token 'a' is the byte a */
            if (rc == XG2_OK && !acc) FAIL("a letter refused by [a-z]*");
            if (rc == XG2_OK) xg2_matcher_rollback(shared, 1); /* XG2_ERR_STATE is fine too */
            else if (rc != XG2_ERR_STATE) FAIL("accept_token: %d", rc);
            break;
        case 1:
            rc = xg2_matcher_accept_token(shared, '7', &acc);
            if (rc == XG2_OK && acc) FAIL("a digit accepted by [a-z]*");
            else if (rc != XG2_OK && rc != XG2_ERR_STATE) FAIL("accept_token: %d", rc);
            break;
        default:
            rc = xg2_matcher_fill_mask(shared, row, n_words, &need);
            if (rc == XG2_OK && memcmp(row, letters_row, sizeof(int32_t) * (size_t)n_words) != 0)
                FAIL("a wrong mask for [a-z]*");
            else if (rc != XG2_OK && rc != XG2_ERR_STATE) FAIL("fill: %d", rc);
        }
    }
    free(row);
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 5.0;
    make_vocab();
    for (int g = 0; g < N_GRAMMARS; g++)
        if (!(compiled[g] = compile_text(SOURCES[g]))) return 1;
    for (int g = 0; g < N_GRAMMARS; g++) /* the single-threaded replay */
        for (int s = 0; s < SEEDS; s++) reference_n[g][s] = walk(compiled[g], (uint64_t)s, reference[g][s]);
    make_positions();
    xg2_compiled *letters = compile_text("root ::= [a-z]*");
    int need;
    letters_row = malloc(sizeof(int32_t) * (size_t)n_words);
    if (!letters || xg2_matcher_new(letters, NULL, -1, 0, &shared) != XG2_OK ||
        xg2_matcher_fill_mask(shared, letters_row, n_words, &need) != XG2_OK)
        return fprintf(stderr, "setup failed\n"), 1;

    deadline = now() + seconds;
    pthread_t th[WALKERS + 5];
    int n = 0;
    for (int i = 0; i < WALKERS; i++) pthread_create(&th[n++], NULL, walker, (void *)(uintptr_t)(i + 1));
    pthread_create(&th[n++], NULL, batcher, NULL);
    pthread_create(&th[n++], NULL, compiler, (void *)(uintptr_t)1);
    pthread_create(&th[n++], NULL, compiler, (void *)(uintptr_t)2);
    pthread_create(&th[n++], NULL, misuser, (void *)(uintptr_t)7);
    pthread_create(&th[n++], NULL, misuser, (void *)(uintptr_t)8);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);

    uint64_t entries, hits, misses, evictions;
    xg2_vocab_cache_stats(vocab, &entries, &hits, &misses, &evictions);
    printf("stress_threads: mask cache %llu hits, %llu misses, %llu evictions\n", (unsigned long long)hits,
           (unsigned long long)misses, (unsigned long long)evictions);
    xg2_matcher_free(shared);
    xg2_compiled_free(letters);
    for (int g = 0; g < N_GRAMMARS; g++) xg2_compiled_free(compiled[g]);
    xg2_vocab_free(vocab);
    free(letters_row);
    free(expected_rows);
    if (atomic_load(&failures)) {
        printf("stress_threads: %d failures\n", atomic_load(&failures));
        return 1;
    }
    printf("stress_threads: ok\n");
    return 0;
}
