/*
 * test_history.c -- the matcher's history bounds (xg2_matcher_set_history_limits).
 *
 * A matcher with max_rollback k compacts its parser's history; the reference
 * is an unbounded matcher of the same grammar replaying the same actions:
 * every mask, verdict, completion, jump-forward string and step count must be
 * identical, and the bounded one must refuse exactly the rollbacks that reach
 * past its last k steps.  Then: flat memory for a regular grammar, the byte limit (an error,
 * nothing changed), forks and resets after compaction, argument checks.
 */
#include "check.h"

static const char *const toks[] = {
    "</s>", "(", ")", "[", "]", ",", "1", "\"", "a", "b", "x", "y", ";", "ab", "xy", "((", "))", "[[", "]]",
    "[1", "1]", "1,", ",1", "\"a", "a\"", "\"\"", "y;", ";x", "abc", "aaaa", "[a", "a]", "[]", "()", "xyab",
};
#define N_TOKS ((int32_t)(sizeof toks / sizeof toks[0]))
static const int32_t stop_id[] = {0};

static xg2_vocab *vocab(void) {
    static xg2_vocab *v;
    if (!v) v = make_vocab(XG2_VOCAB_RAW, toks, N_TOKS, N_TOKS + 3, NULL, 0, stop_id, 1);
    return v;
}
#define NW ((N_TOKS + 3 + 31) / 32)

static int32_t tok_id(const char *text) {
    for (int32_t i = 0; i < N_TOKS; i++)
        if (!strcmp(toks[i], text)) return i;
    fprintf(stderr, "no token %s\n", text);
    exit(3);
}

static int accept(xg2_matcher *m, const char *text) {
    int acc = -1;
    CHECK_RC(xg2_matcher_accept_token(m, tok_id(text), &acc), XG2_OK);
    return acc;
}

static const char *const grammars[] = {
    /* regular */
    "root ::= [a-z]*",
    /* nested, JSON-like (a sequence of values, so that a walk goes on) */
    "root ::= value (\";\" value)*\n"
    "value ::= \"[\" (value (\",\" value)*)? \"]\" | \"1\" | \"\\\"\" [a-z]* \"\\\"\"",
    /* a lookahead assertion before a nested rule (guarded waiting items: compaction
     * keeps the input after them) */
    "root ::= elem*\n"
    "elem ::= \"(\" elem* \")\" | a elem \";\" | \"y\" [a-z]*\n"
    "a ::= \"x\" (= \"(\" | \"y\")",
    /* a counted repetition around a recursive rule */
    "root ::= item{1,5000}\n"
    "item ::= \"a\" | \"b\" | \"[\" root \"]\"",
};
#define N_GRAMMARS ((int)(sizeof grammars / sizeof grammars[0]))

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static void fill(xg2_matcher *m, int32_t *row) {
    int need = 0;
    memset(row, 0, sizeof(int32_t) * NW);
    CHECK_RC(xg2_matcher_fill_mask(m, row, NW, &need), XG2_OK);
}

static xg2_matcher *bounded(xg2_compiled *c, int32_t k, int64_t bytes) {
    xg2_matcher *m = NULL;
    CHECK_RC(xg2_matcher_new(c, NULL, -1, 0, &m), XG2_OK);
    if (m) CHECK_RC(xg2_matcher_set_history_limits(m, k, bytes), XG2_OK);
    return m;
}

/* Both matchers in the same state, as far as the ABI shows. */
static void same(xg2_matcher *ref, xg2_matcher *m, int gi, int step) {
    int32_t a[NW], b[NW];
    fill(ref, a);
    fill(m, b);
    CHECKF(!memcmp(a, b, sizeof a), "grammar %d step %d: masks differ", gi, step);
    CHECKF(xg2_matcher_is_completed(ref) == xg2_matcher_is_completed(m), "grammar %d step %d", gi, step);
    CHECKF(xg2_matcher_is_terminated(ref) == xg2_matcher_is_terminated(m), "grammar %d step %d", gi, step);
    CHECK_EQ(xg2_matcher_num_steps(ref), xg2_matcher_num_steps(m));
    char ja[64], jb[64];
    size_t la = 0, lb = 0;
    CHECK_RC(xg2_matcher_jump_forward(ref, ja, sizeof ja, &la), XG2_OK);
    CHECK_RC(xg2_matcher_jump_forward(m, jb, sizeof jb, &lb), XG2_OK);
    CHECKF(la == lb && !memcmp(ja, jb, la < sizeof ja ? la : sizeof ja), "grammar %d step %d: jump-forward", gi, step);
}

/* A random walk: accept an allowed token (sometimes a disallowed one, or two
 * tokens as one accept_bytes), roll back up to k steps now and then. */
static void walk(int gi, int32_t k, int steps) {
    gcm x = MAKE_GCM(grammars[gi], vocab());
    xg2_matcher *m = x.c ? bounded(x.c, k, -1) : NULL;
    if (!x.m || !m) { xg2_matcher_free(m); free_gcm(&x); return; }
    uint32_t avail = 0, total = 0; /* the model: steps rollback may undo, steps accepted */
    uint64_t peak = 0;
    int shrank = 0;
    int fails0 = check_failed;
    for (int s = 0; s < steps && check_failed == fails0; s++) {
        same(x.m, m, gi, s);
        uint64_t hb = xg2_matcher_history_bytes(m);
        if (hb > peak) peak = hb;
        uint32_t r = rnd(100);
        if (r < 12 && total) { /* roll back */
            uint32_t n = 1 + rnd(k + 2);
            int want = n <= avail ? XG2_OK : XG2_ERR_ARG;
            CHECK_RC(xg2_matcher_rollback(m, (int32_t)n), want);
            if (want == XG2_OK) {
                CHECK_RC(xg2_matcher_rollback(x.m, (int32_t)n), XG2_OK);
                avail -= n;
                total -= n;
            }
            continue;
        }
        int32_t row[NW];
        fill(x.m, row);
        int32_t cand[64], nc = 0;
        for (int32_t t = 0; t < N_TOKS; t++)
            if (mask_bit(row, t) && (t != 0 || rnd(50) == 0)) cand[nc++] = t;
        if (!nc) { /* dead end or only the stop token: go back */
            if (avail) {
                CHECK_RC(xg2_matcher_rollback(m, 1), XG2_OK);
                CHECK_RC(xg2_matcher_rollback(x.m, 1), XG2_OK);
                avail--, total--;
            } else {
                CHECK_RC(xg2_matcher_reset(m), XG2_OK);
                CHECK_RC(xg2_matcher_reset(x.m), XG2_OK);
                avail = total = 0;
            }
            continue;
        }
        int32_t t = r < 17 ? (int32_t)rnd(N_TOKS) : cand[rnd((uint32_t)nc)];
        int a1 = -1, a2 = -2;
        if (r >= 90 && t != 0) { /* a two-token string as one step */
            int32_t u = (int32_t)(1 + rnd(N_TOKS - 1));
            char buf[16];
            size_t l1 = strlen(toks[t]), l2 = strlen(toks[u]);
            memcpy(buf, toks[t], l1);
            memcpy(buf + l1, toks[u], l2);
            CHECK_RC(xg2_matcher_accept_bytes(x.m, buf, l1 + l2, &a1), XG2_OK);
            CHECK_RC(xg2_matcher_accept_bytes(m, buf, l1 + l2, &a2), XG2_OK);
        } else {
            CHECK_RC(xg2_matcher_accept_token(x.m, t, &a1), XG2_OK);
            CHECK_RC(xg2_matcher_accept_token(m, t, &a2), XG2_OK);
        }
        CHECKF(a1 == a2, "grammar %d step %d: token %d accepted %d vs %d", gi, s, t, a1, a2);
        if (xg2_matcher_history_bytes(m) < hb) shrank = 1; /* compacted (rollbacks shrink it too) */
        if (a1 == 1) {
            total++;
            if (avail < (uint32_t)k) avail++;
        }
    }
    /* The walk went past the compaction threshold: an accept shrank the history. */
    CHECKF(shrank, "grammar %d: history never shrank (peak %llu bytes)", gi, (unsigned long long)peak);
    xg2_matcher_free(m);
    free_gcm(&x);
}

TEST(bounded_rollback_matches_unbounded) {
    int32_t ks[] = {0, 1, 4};
    for (int gi = 0; gi < N_GRAMMARS; gi++)
        for (int j = 0; j < 3; j++) walk(gi, ks[j], 12000);
}

TEST(regular_grammar_history_is_flat) {
    gcm x = MAKE_GCM(grammars[0], vocab());
    xg2_matcher *m = x.c ? bounded(x.c, 4, -1) : NULL;
    if (!x.m || !m) { xg2_matcher_free(m); free_gcm(&x); return; }
    int32_t a = tok_id("a");
    uint64_t worst = 0;
    for (int i = 0; i < 300000; i++) {
        int acc = 0;
        xg2_matcher_accept_token(m, a, &acc);
        xg2_matcher_accept_token(x.m, a, &acc);
        uint64_t hb = xg2_matcher_history_bytes(m);
        if (hb > worst) worst = hb;
    }
    CHECKF(worst < 256 * 1024, "bounded history reached %llu bytes", (unsigned long long)worst);
    CHECKF(xg2_matcher_history_bytes(x.m) > 300000ull * 16, "unbounded history %llu bytes",
           (unsigned long long)xg2_matcher_history_bytes(x.m));
    CHECK_EQ(xg2_matcher_num_steps(m), 300000);
    CHECK_RC(xg2_matcher_rollback(m, 5), XG2_ERR_ARG);
    CHECK(strstr(xg2_last_error(), "max_rollback_tokens is 4") != NULL);
    CHECK_RC(xg2_matcher_rollback(m, 4), XG2_OK);
    CHECK_RC(xg2_matcher_rollback(m, 1), XG2_ERR_ARG);
    CHECK_EQ(xg2_matcher_num_steps(m), 299996);
    xg2_matcher_free(m);
    free_gcm(&x);
}

/* Deep nesting, compacted, then forked: the fork and the original go on
 * independently and both match an unbounded matcher doing the same. */
TEST(fork_after_compaction) {
    gcm x = MAKE_GCM(grammars[1], vocab());
    xg2_matcher *m = x.c ? bounded(x.c, 3, -1) : NULL;
    if (!x.m || !m) { xg2_matcher_free(m); free_gcm(&x); return; }
    /* [[[... 1, 1, 1, ... : open brackets stay live, the list items die */
    for (int i = 0; i < 300; i++) { accept(x.m, "[["); accept(m, "[["); }
    for (int i = 0; i < 20000; i++) { accept(x.m, "1,"); accept(m, "1,"); }
    uint64_t before = xg2_matcher_history_bytes(m);
    CHECKF(before < xg2_matcher_history_bytes(x.m) / 4, "bounded %llu vs unbounded %llu", (unsigned long long)before,
           (unsigned long long)xg2_matcher_history_bytes(x.m));
    xg2_matcher *f = NULL, *fr = NULL;
    CHECK_RC(xg2_matcher_fork(m, &f), XG2_OK);
    CHECK_RC(xg2_matcher_fork(x.m, &fr), XG2_OK);
    if (!f || !fr) { xg2_matcher_free(f); xg2_matcher_free(fr); xg2_matcher_free(m); free_gcm(&x); return; }
    same(x.m, f, 1, 0);
    /* The fork closes every bracket; the original rolls back and goes deeper. */
    accept(f, "1"), accept(fr, "1");
    for (int i = 0; i < 300; i++) { accept(f, "]]"); accept(fr, "]]"); }
    same(fr, f, 1, 1);
    CHECK(xg2_matcher_is_completed(f));
    CHECK_RC(xg2_matcher_rollback(f, 3), XG2_OK);
    CHECK_RC(xg2_matcher_rollback(fr, 3), XG2_OK);
    same(fr, f, 1, 2);
    CHECK_RC(xg2_matcher_rollback(m, 3), XG2_OK);
    CHECK_RC(xg2_matcher_rollback(x.m, 3), XG2_OK);
    CHECK_RC(xg2_matcher_rollback(m, 1), XG2_ERR_ARG);
    for (int i = 0; i < 5000; i++) { accept(x.m, "[1"); accept(m, "[1"); accept(x.m, "]]"); accept(m, "]]"); }
    same(x.m, m, 1, 3);
    xg2_matcher_free(m); /* the fork outlives its source */
    for (int i = 0; i < 297; i++) { accept(f, "]]"); accept(fr, "]]"); }
    same(fr, f, 1, 4);
    xg2_matcher_free(f);
    xg2_matcher_free(fr);
    free_gcm(&x);
}

TEST(reset_after_compaction) {
    gcm x = MAKE_GCM(grammars[2], vocab());
    xg2_matcher *m = x.c ? bounded(x.c, 2, -1) : NULL;
    if (!x.m || !m) { xg2_matcher_free(m); free_gcm(&x); return; }
    int32_t fresh[NW], now[NW];
    fill(m, fresh);
    for (int i = 0; i < 10000; i++) { accept(m, "(("); accept(m, "xy"); accept(m, "ab"); accept(m, ";x"); accept(m, "y;"); accept(m, "))"); }
    CHECK_EQ(xg2_matcher_num_steps(m), 60000);
    CHECKF(xg2_matcher_history_bytes(m) < 512 * 1024, "%llu", (unsigned long long)xg2_matcher_history_bytes(m));
    CHECK_RC(xg2_matcher_reset(m), XG2_OK);
    CHECK_EQ(xg2_matcher_num_steps(m), 0);
    CHECK_RC(xg2_matcher_rollback(m, 1), XG2_ERR_ARG);
    fill(m, now);
    CHECK(!memcmp(now, fresh, sizeof now));
    CHECK_EQ(accept(m, "(("), 1);
    CHECK_RC(xg2_matcher_rollback(m, 1), XG2_OK);
    fill(m, now);
    CHECK(!memcmp(now, fresh, sizeof now));
    xg2_matcher_free(m);
    free_gcm(&x);
}

/* The byte limit: an accept that would pass it fails with XG2_ERR_LIMIT early
 * (not after the whole input) and changes nothing. */
TEST(history_byte_limit) {
    gcm x = MAKE_GCM(grammars[0], vocab());
    xg2_matcher *m = x.c ? bounded(x.c, -1, 100000) : NULL;
    if (!x.m || !m) { xg2_matcher_free(m); free_gcm(&x); return; }
    CHECK_EQ(accept(m, "abc"), 1);
    uint64_t before = xg2_matcher_history_bytes(m);
    int32_t mask0[NW], mask1[NW];
    fill(m, mask0);
    size_t big = 50u << 20;
    char *data = malloc(big);
    memset(data, 'q', big);
    int acc = -1;
    double t0 = now_s();
    CHECK_RC(xg2_matcher_accept_bytes(m, data, big, &acc), XG2_ERR_LIMIT);
    CHECKF(now_s() - t0 < 5.0, "took %.1f s", now_s() - t0); /* stops at the limit: ~4,000 bytes of 50 MB */
    CHECK(strstr(xg2_last_error(), "max_history_bytes = 100000") != NULL);
    CHECK_EQ(xg2_matcher_history_bytes(m), before);
    CHECK_EQ(xg2_matcher_num_steps(m), 1);
    fill(m, mask1);
    CHECK(!memcmp(mask0, mask1, sizeof mask0));
    /* Token by token: it fails at the limit and keeps failing. */
    int fails = 0, steps = 0;
    for (int i = 0; i < 10000; i++) {
        int rc = xg2_matcher_accept_token(m, tok_id("aaaa"), &acc);
        if (rc == XG2_OK) steps++;
        else fails += rc == XG2_ERR_LIMIT;
    }
    CHECK(steps > 100 && fails == 10000 - steps);
    CHECK(xg2_matcher_history_bytes(m) <= 100000);
    /* With bounded rollback the same stream stays under the limit, even one
     * below the compaction's own slack (an accept at the limit compacts first). */
    CHECK_RC(xg2_matcher_reset(m), XG2_OK);
    CHECK_RC(xg2_matcher_set_history_limits(m, 8, 100000), XG2_OK);
    for (int i = 0; i < 100000; i++) CHECK_RC(xg2_matcher_accept_token(m, tok_id("aaaa"), &acc), XG2_OK);
    CHECK_EQ(xg2_matcher_num_steps(m), 100000);
    CHECK_RC(xg2_matcher_set_history_limits(m, 2, 4000), XG2_OK);
    for (int i = 0; i < 100000; i++) CHECK_RC(xg2_matcher_accept_token(m, tok_id("aaaa"), &acc), XG2_OK);
    CHECK_EQ(xg2_matcher_num_steps(m), 200000);
    CHECK(xg2_matcher_history_bytes(m) <= 4000);
    free(data);
    xg2_matcher_free(m);
    free_gcm(&x);
}

TEST(history_limit_arguments) {
    gcm x = MAKE_GCM(grammars[1], vocab());
    if (!x.m) { free_gcm(&x); return; }
    CHECK_RC(xg2_matcher_set_history_limits(NULL, 1, 1), XG2_ERR_ARG);
    CHECK_RC(xg2_matcher_set_history_limits(x.m, -2, -1), XG2_ERR_ARG);
    CHECK_RC(xg2_matcher_set_history_limits(x.m, 1, 0), XG2_ERR_ARG);
    CHECK_RC(xg2_matcher_set_history_limits(x.m, 1, -5), XG2_ERR_ARG);
    CHECK_EQ(xg2_matcher_history_bytes(NULL), 0);
    /* Set after some steps: only what is within the new bound can be undone. */
    accept(x.m, "[");
    accept(x.m, "1,");
    accept(x.m, "1,");
    CHECK_RC(xg2_matcher_set_history_limits(x.m, 2, -1), XG2_OK);
    CHECK_RC(xg2_matcher_rollback(x.m, 3), XG2_ERR_ARG);
    CHECK_RC(xg2_matcher_rollback(x.m, 2), XG2_OK);
    CHECK_EQ(xg2_matcher_num_steps(x.m), 1);
    /* k = 0: nothing can be undone, not even the stop token. */
    CHECK_RC(xg2_matcher_set_history_limits(x.m, 0, -1), XG2_OK);
    accept(x.m, "1]");
    CHECK(xg2_matcher_is_completed(x.m));
    CHECK_EQ(accept(x.m, "</s>"), 1);
    CHECK(xg2_matcher_is_terminated(x.m));
    CHECK_RC(xg2_matcher_rollback(x.m, 1), XG2_ERR_ARG);
    CHECK_RC(xg2_matcher_rollback(x.m, 0), XG2_OK);
    CHECK_RC(xg2_matcher_set_history_limits(x.m, 1, -1), XG2_OK); /* the stop step is kept: undo it */
    CHECK_RC(xg2_matcher_rollback(x.m, 1), XG2_OK);
    CHECK(!xg2_matcher_is_terminated(x.m));
    free_gcm(&x);
}

int main(int argc, char **argv) {
    int rc = RUN_TESTS(argc, argv, T_(bounded_rollback_matches_unbounded), T_(regular_grammar_history_is_flat),
                       T_(fork_after_compaction), T_(reset_after_compaction), T_(history_byte_limit),
                       T_(history_limit_arguments));
    xg2_vocab_free(vocab());
    return rc;
}
