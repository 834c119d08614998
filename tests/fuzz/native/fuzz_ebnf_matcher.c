/*
 * fuzz_ebnf_matcher.c -- libFuzzer target on the C ABI (xg2.h only).
 *
 * Input: EBNF text, then optionally a NUL byte and a byte script.  The grammar
 * (start rule "root") is parsed, printed and parsed again (the print must parse and
 * print the same, or do so from a second round on: see check_print), compiled for
 * a small built-in vocabulary, and the script drives a
 * matcher and its forks: accept_token / accept_bytes / rollback / fill / fork / reset /
 * jump-forward / batch fill / precompute.  Checked on the way:
 *   - every call returns a documented status; XG2_ERR_INTERNAL is a find;
 *   - a mask bit equals whether a fork accepts that token (a few sampled per fill);
 *   - step counts follow accepts, rollbacks and resets; bad ids are XG2_ERR_ARG;
 *   - jump-forward bytes are accepted; a batch fill equals one-by-one fills.
 * A violated check prints what and aborts (a crash for libFuzzer and the driver).
 *
 * libFuzzer (clang):  see tests/fuzz/README.md; the gcc driver (driver.c) runs the same
 * function over the seeds and a mutation loop.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xg2.h"

#define FIND(...)                                                   \
    do {                                                            \
        fprintf(stderr, "FIND %s:%d: ", __FILE__, __LINE__);        \
        fprintf(stderr, __VA_ARGS__);                               \
        fprintf(stderr, " (last error: %s)\n", xg2_last_error());   \
        abort();                                                    \
    } while (0)

/* A status any call may return on fuzzed input; anything else is a find. */
static int ok_status(int rc) {
    return rc == XG2_OK || rc == XG2_ERR_ARG || rc == XG2_ERR_GRAMMAR || rc == XG2_ERR_LIMIT ||
           rc == XG2_ERR_STATE || rc == XG2_ERR_NOMEM;
}
#define CALL(expr)                                                              \
    do {                                                                        \
        int rc_ = (expr);                                                       \
        if (!ok_status(rc_)) FIND("%s returned %d", #expr, rc_);                \
    } while (0)

/* How far inputs get (printed at exit with FUZZ_STATS=1): a mutator that never gets
 * past the parser fuzzes nothing else. */
static long n_inputs, n_parsed, n_compiled, n_ops;
static void print_stats(void) {
    fprintf(stderr, "fuzz_ebnf_matcher: %ld inputs, %ld parsed, %ld compiled, %ld matcher ops\n", n_inputs,
            n_parsed, n_compiled, n_ops);
}

/* ---- the vocabulary: all 256 bytes, some merges, a stop token, padding ---- */

static const char *const MERGES[] = {
    "{\"", "\":", "\",", "true", "false", "null", "ab", "abc", "ba", "aa", "xyz", "00", "12",
    "-1", ".5", "e+", "\\n", "\\u", "  ", "\n ", "\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac",
    "\xf0\x9f\x98\x80", "the", " a", "name", "root", "::=", "()", "[]",
};
#define N_MERGES ((int32_t)(sizeof MERGES / sizeof *MERGES))
#define N_TOKENS (256 + N_MERGES + 1)
#define STOP_ID (N_TOKENS - 1)
#define VOCAB_SIZE (N_TOKENS + 5)
#define WORDS ((VOCAB_SIZE + 31) / 32)

static xg2_vocab *vocab(void) {
    static xg2_vocab *v;
    if (v) return v;
    static char data[4096];
    static uint32_t offsets[N_TOKENS + 1];
    uint32_t n = 0;
    for (int i = 0; i < 256; i++) {
        offsets[i] = n;
        data[n++] = (char)i;
    }
    for (int32_t i = 0; i < N_MERGES; i++) {
        offsets[256 + i] = n;
        memcpy(data + n, MERGES[i], strlen(MERGES[i]));
        n += (uint32_t)strlen(MERGES[i]);
    }
    offsets[STOP_ID] = n;
    memcpy(data + n, "</s>", 4);
    n += 4;
    offsets[N_TOKENS] = n;
    int32_t stop = STOP_ID;
    if (xg2_vocab_new(XG2_VOCAB_RAW, data, offsets, N_TOKENS, VOCAB_SIZE, &stop, 1, &stop, 1, &v) != XG2_OK)
        FIND("the built-in vocabulary does not build");
    xg2_vocab_set_cache_limit(v, 1 << 20); /* small: eviction runs too */
    if (getenv("FUZZ_STATS")) atexit(print_stats);
    return v;
}

/* ---- the script ---- */

typedef struct {
    const uint8_t *p;
    size_t n, i;
} script;

static int more(const script *s) { return s->i < s->n; }
static unsigned byte(script *s) { return s->i < s->n ? s->p[s->i++] : 0; }
static unsigned u16(script *s) { return byte(s) | (byte(s) << 8); }

static int bit(const int32_t *row, int32_t t) { return (int)(((uint32_t)row[t >> 5] >> (t & 31)) & 1u); }

static int fill(xg2_matcher *m, int32_t *row) {
    int need = 0;
    memset(row, 0, sizeof(int32_t) * WORDS);
    int rc = xg2_matcher_fill_mask(m, row, WORDS, &need);
    CALL(rc);
    return rc;
}

/* The mask bit of each sampled token equals whether a fork accepts it. */
static void check_bits(xg2_matcher *m, script *s) {
    int32_t row[WORDS];
    if (fill(m, row) != XG2_OK || xg2_matcher_is_terminated(m)) return;
    for (int k = 0; k < 4; k++) {
        int32_t t = (int32_t)(u16(s) % VOCAB_SIZE);
        xg2_matcher *f = NULL;
        if (xg2_matcher_fork(m, &f) != XG2_OK) return;
        int acc = 0;
        int rc = xg2_matcher_accept_token(f, t, &acc);
        CALL(rc);
        if (rc == XG2_OK && acc != bit(row, t))
            FIND("token %d: mask bit %d but a fork's accept_token says %d", t, bit(row, t), acc);
        xg2_matcher_free(f);
    }
}

/* An allowed token (by the script's choice), or -1 if none. */
static int32_t pick_allowed(xg2_matcher *m, script *s) {
    int32_t row[WORDS], ids[VOCAB_SIZE], n = 0;
    if (fill(m, row) != XG2_OK) return -1;
    for (int32_t t = 0; t < VOCAB_SIZE; t++)
        if (bit(row, t)) ids[n++] = t;
    return n ? ids[byte(s) % (unsigned)n] : -1;
}

static void run_script(const xg2_compiled *c, script *s) {
    xg2_matcher *m = NULL;
    if (xg2_matcher_new(c, NULL, -1, 0, &m) != XG2_OK) return;
    for (int ops = 0; more(s) && ops < 64; ops++) {
        int32_t before = xg2_matcher_num_steps(m);
        int acc = 0, rc;
        n_ops++;
        switch (byte(s) % 10) {
        case 0: { /* any id: out of range ones are XG2_ERR_ARG, nothing changes */
            int32_t t = (int32_t)(u16(s) % (VOCAB_SIZE + 2)) - 1;
            rc = xg2_matcher_accept_token(m, t, &acc);
            CALL(rc);
            if ((t < 0 || t >= VOCAB_SIZE) != (rc == XG2_ERR_ARG)) FIND("accept_token(%d) returned %d", t, rc);
            if (xg2_matcher_num_steps(m) != before + (rc == XG2_OK && acc)) FIND("step count after accept_token");
            break;
        }
        case 1: {
            int32_t t = pick_allowed(m, s);
            if (t < 0 || xg2_matcher_is_terminated(m)) break;
            rc = xg2_matcher_accept_token(m, t, &acc);
            CALL(rc);
            if (rc == XG2_OK && !acc) FIND("allowed token %d refused", t);
            break;
        }
        case 2: {
            size_t len = byte(s) % 8;
            if (len > s->n - s->i) len = s->n - s->i;
            rc = xg2_matcher_accept_bytes(m, (const char *)s->p + s->i, len, &acc);
            s->i += len;
            CALL(rc);
            if (xg2_matcher_num_steps(m) != before + (rc == XG2_OK && acc)) FIND("step count after accept_bytes");
            break;
        }
        case 3: {
            int32_t n = (int32_t)(byte(s) % 6);
            rc = xg2_matcher_rollback(m, n);
            CALL(rc);
            if ((n > before) != (rc == XG2_ERR_ARG)) FIND("rollback(%d) of %d steps returned %d", n, before, rc);
            if (rc == XG2_OK && xg2_matcher_num_steps(m) != before - n) FIND("step count after rollback");
            break;
        }
        case 4:
            check_bits(m, s);
            break;
        case 5: {
            xg2_matcher *f = NULL;
            if (xg2_matcher_fork(m, &f) != XG2_OK) break;
            if (xg2_matcher_num_steps(f) != before) FIND("a fork has another step count");
            if (byte(s) & 1) {
                xg2_matcher_free(m);
                m = f;
            } else {
                xg2_matcher_free(f);
            }
            break;
        }
        case 6:
            CALL(xg2_matcher_reset(m));
            if (xg2_matcher_num_steps(m) != 0) FIND("steps after reset");
            break;
        case 7: {
            char buf[256];
            size_t len = 0;
            rc = xg2_matcher_jump_forward(m, buf, sizeof buf, &len);
            CALL(rc);
            if (rc == XG2_OK && len > 0 && len <= sizeof buf && !xg2_matcher_is_terminated(m)) {
                xg2_matcher *f = NULL;
                if (xg2_matcher_fork(m, &f) != XG2_OK) break;
                rc = xg2_matcher_accept_bytes(f, buf, len, &acc);
                CALL(rc);
                if (rc == XG2_OK && !acc) FIND("jump-forward bytes refused");
                xg2_matcher_free(f);
            }
            break;
        }
        case 8: { /* a batch fill equals one-by-one fills */
            xg2_matcher *f = NULL, *ms[2];
            if (xg2_matcher_fork(m, &f) != XG2_OK) break;
            int32_t t = pick_allowed(f, s);
            if (t >= 0) CALL(xg2_matcher_accept_token(f, t, &acc));
            int32_t rows[2 * WORDS], one[WORDS];
            ms[0] = m;
            ms[1] = f;
            rc = xg2_batch_fill_masks(ms, 2, rows, 2, WORDS, NULL, 2);
            CALL(rc);
            for (int k = 0; rc == XG2_OK && k < 2; k++)
                if (fill(ms[k], one) == XG2_OK && memcmp(one, rows + k * WORDS, sizeof one) != 0)
                    FIND("batch fill row %d differs from a single fill", k);
            xg2_matcher_free(f);
            break;
        }
        default: {
            char dbg[64];
            size_t len = 0;
            CALL(xg2_matcher_debug_state(m, dbg, sizeof dbg, &len));
            (void)xg2_matcher_is_completed(m);
            break;
        }
        }
    }
    xg2_matcher_free(m);
}

/* g's printed text (malloc'd, NUL-terminated), or NULL. */
static char *print_text(const xg2_grammar *g, size_t *len) {
    size_t need = 0, got = 0;
    if (xg2_grammar_print(g, NULL, 0, &need) != XG2_OK) return NULL;
    char *p = malloc(need + 1);
    if (!p) return NULL;
    CALL(xg2_grammar_print(g, p, need, &got));
    if (got != need) FIND("print: %zu bytes measured, %zu written", need, got);
    p[need] = 0;
    *len = need;
    return p;
}

/* The print parses (to 0 on a limit), into *out. */
static int parse_print(const char *p, size_t len, xg2_grammar **out) {
    int rc = xg2_grammar_from_ebnf(p, len, "root", out);
    if (rc == XG2_ERR_LIMIT || rc == XG2_ERR_NOMEM) return 0;
    if (rc != XG2_OK) FIND("the printed grammar does not parse (%d):\n%s", rc, p);
    return 1;
}

/* The print parses, and printing is a fixed point: print(parse(print(g))) ==
 * print(g) -- or, where it is not, from the second round on.  (A counted
 * repetition that its rule's automaton could not keep apart is printed as a
 * rule of its own; parsed again, that rule may be merged back into its caller,
 * where the conflict can be resolved on the other loop: the same language,
 * written differently once, then stable.) */
static void check_print(const xg2_grammar *g) {
    size_t len1 = 0, len2 = 0, len3 = 0;
    char *p1 = print_text(g, &len1), *p2 = NULL, *p3 = NULL;
    xg2_grammar *g2 = NULL, *g3 = NULL;
    if (!p1 || !parse_print(p1, len1, &g2)) goto out;
    if (!(p2 = print_text(g2, &len2))) goto out;
    if (len2 == len1 && memcmp(p1, p2, len1) == 0) goto out;
    if (!parse_print(p2, len2, &g3) || !(p3 = print_text(g3, &len3))) goto out;
    if (len3 != len2 || memcmp(p2, p3, len2) != 0)
        FIND("printing is not stable by the second round:\n%s\n-- then --\n%s", p1, p2);
out:
    xg2_grammar_free(g3);
    xg2_grammar_free(g2);
    free(p3);
    free(p2);
    free(p1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    xg2_grammar *g = NULL;
    (void)vocab();
    n_inputs++;
    int rc = xg2_grammar_from_ebnf((const char *)data, glen, "root", &g);
    CALL(rc);
    if (rc != XG2_OK) return -1; /* libFuzzer's "keep out of the corpus"; the driver's too */
    n_parsed++;
    check_print(g);
    xg2_compiled *c = NULL;
    rc = xg2_compiled_new(g, vocab(), &c);
    CALL(rc);
    if (rc == XG2_OK) {
        n_compiled++;
        int32_t done = 0;
        CALL(xg2_compiled_precompute(c, 4, -1, &done));
        CALL(xg2_compiled_precompute_states(c, 4, -1, XG2_PRECOMPUTE_OWN | XG2_PRECOMPUTE_PLAIN, &done));
        script s = {nul ? nul + 1 : data + size, nul ? size - glen - 1 : 0, 0};
        /* the script's first bytes as a sample text: masks filled along it, up to a refusal */
        size_t sample = s.n < 32 ? s.n : 32;
        CALL(xg2_compiled_precompute_text(c, (const char *)s.p, sample, -1, &done));
        if ((size_t)done > sample + 1) FIND("precompute_text filled %d masks for %zu bytes", done, sample);
        run_script(c, &s);
        xg2_compiled_free(c);
    }
    xg2_grammar_free(g);
    return 0;
}
