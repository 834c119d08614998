/*
 * test_budgets.c -- the compile budget (xg2_budget_begin/end) and the per-call
 * work limit of matchers (xg2_matcher_set_work_limit).  Under ASan/LSan: every
 * stopped compile or fill must free what it built.
 */
#include "check.h"

/* A chain of n rules, each with its own literal: compile time and memory grow
 * with n (about 10 us and 1 KiB per rule without sanitizers). */
static char *chain_grammar(int n) {
    size_t cap = (size_t)n * 48 + 64, k = 0;
    char *s = malloc(cap);
    k += (size_t)snprintf(s + k, cap - k, "root ::= r0\n");
    for (int i = 0; i < n; i++) k += (size_t)snprintf(s + k, cap - k, "r%d ::= \"x%d\" r%d | \"y\"\n", i, i, i + 1);
    snprintf(s + k, cap - k, "r%d ::= \"z\"\n", n);
    return s;
}

static int compile_rc(const char *text, xg2_grammar **out) {
    *out = NULL;
    return xg2_grammar_from_ebnf(text, strlen(text), "root", out);
}

TEST(time_limit_stops_a_long_compile) {
    char *text = chain_grammar(100000);
    xg2_grammar *g;
    CHECK_RC(xg2_budget_begin(20 * 1000000LL, -1), XG2_OK);
    double t0 = now_s();
    CHECK_RC(compile_rc(text, &g), XG2_ERR_LIMIT);
    double took = now_s() - t0;
    xg2_budget_end();
    CHECK(g == NULL);
    CHECK(strstr(xg2_last_error(), "compile time limit of 20 ms exceeded (while ") != NULL);
    CHECK(took < 2.0); /* 20 ms and a check interval; the whole compile takes seconds here */
    free(text);
}

TEST(memory_limit_stops_a_large_compile) {
    char *text = chain_grammar(20000);
    xg2_grammar *g;
    CHECK_RC(xg2_budget_begin(-1, 1 << 20), XG2_OK);
    CHECK_RC(compile_rc(text, &g), XG2_ERR_LIMIT);
    xg2_budget_end();
    CHECK(g == NULL);
    CHECK(strstr(xg2_last_error(), "compile memory limit of 1048576 bytes exceeded") != NULL);
    /* the same grammar without the budget */
    CHECK_RC(compile_rc(text, &g), XG2_OK);
    xg2_grammar_free(g);
    free(text);
}

TEST(generous_budget_changes_nothing) {
    const char *text = "root ::= \"a\" b*\nb ::= [0-9] | \"x\" b\n";
    xg2_grammar *g0, *g1;
    CHECK_RC(compile_rc(text, &g0), XG2_OK);
    CHECK_RC(xg2_budget_begin(10000 * 1000000LL, 1LL << 30), XG2_OK);
    CHECK_RC(compile_rc(text, &g1), XG2_OK);
    int64_t used = xg2_budget_end();
    CHECK(used > 0); /* the grammar it built is still held */
    char a[512], b[512];
    size_t la = 0, lb = 0;
    CHECK_RC(xg2_grammar_print(g0, a, sizeof a, &la), XG2_OK);
    CHECK_RC(xg2_grammar_print(g1, b, sizeof b, &lb), XG2_OK);
    CHECK(la == lb && la < sizeof a && memcmp(a, b, la) == 0);
    xg2_grammar_free(g0);
    xg2_grammar_free(g1);
    /* negative: no limit of that kind */
    CHECK_RC(xg2_budget_begin(-1, -1), XG2_OK);
    CHECK_RC(compile_rc(text, &g1), XG2_OK);
    xg2_budget_end();
    xg2_grammar_free(g1);
    CHECK_EQ(xg2_budget_end(), 0); /* none open: a no-op */
}

TEST(nested_budgets_keep_the_tighter) {
    char *text = chain_grammar(100000);
    xg2_grammar *g;
    /* the outer is tighter: its limit is the one named */
    CHECK_RC(xg2_budget_begin(15 * 1000000LL, -1), XG2_OK);
    CHECK_RC(xg2_budget_begin(60000 * 1000000LL, -1), XG2_OK);
    CHECK_RC(compile_rc(text, &g), XG2_ERR_LIMIT);
    CHECK(strstr(xg2_last_error(), "compile time limit of 15 ms") != NULL);
    xg2_budget_end();
    /* still inside the tripped outer budget: fails at once */
    double t0 = now_s();
    CHECK_RC(compile_rc("root ::= \"a\"\n", &g), XG2_ERR_LIMIT);
    CHECK(now_s() - t0 < 0.5);
    xg2_budget_end();
    /* the inner is tighter */
    CHECK_RC(xg2_budget_begin(60000 * 1000000LL, -1), XG2_OK);
    CHECK_RC(xg2_budget_begin(15 * 1000000LL, -1), XG2_OK);
    CHECK_RC(compile_rc(text, &g), XG2_ERR_LIMIT);
    CHECK(strstr(xg2_last_error(), "compile time limit of 15 ms") != NULL);
    xg2_budget_end();
    xg2_budget_end();
    /* all closed: compiles again */
    CHECK_RC(compile_rc("root ::= \"a\"\n", &g), XG2_OK);
    xg2_grammar_free(g);
    free(text);
}

TEST(budgets_nest_boundedly) {
    int opened = 0;
    for (int i = 0; i < 64; i++) {
        int rc = xg2_budget_begin(-1, -1);
        if (rc != XG2_OK) {
            CHECK_EQ(rc, XG2_ERR_LIMIT);
            break;
        }
        opened++;
    }
    CHECK(opened >= 8 && opened < 64);
    for (int i = 0; i < opened; i++) xg2_budget_end();
}

/* ---- the work limit of a matcher ---- */

static const char *const toks[] = {"a", "b", "aa", "ab", "ba", "aaa", "aab", "bab", "x", "a b", "</s>"};
#define NTOK 11

/* A cycle of n left-recursive rules: r_i ::= r_{i+1} "a" | "b". */
static char *cycle_grammar(int n) {
    size_t cap = (size_t)n * 48 + 64, k = 0;
    char *s = malloc(cap);
    k += (size_t)snprintf(s + k, cap - k, "root ::= r0\n");
    for (int i = 0; i < n; i++) k += (size_t)snprintf(s + k, cap - k, "r%d ::= r%d \"a\" | \"b\"\n", i, (i + 1) % n);
    return s;
}

static void fill(xg2_matcher *m, int32_t *row, int64_t nw, int want_rc) {
    int need = 0;
    CHECK_RC(xg2_matcher_fill_mask(m, row, nw, &need), want_rc);
}

TEST(work_limit_bounds_fills_and_accepts) {
    int32_t stop = NTOK - 1;
    xg2_vocab *v = make_vocab(XG2_VOCAB_RAW, toks, NTOK, NTOK, NULL, 0, &stop, 1);
    char *text = cycle_grammar(2000);
    gcm r = MAKE_GCM(text, v);
    int64_t nw = mask_words(v);
    int32_t row[4], want[4];
    int acc = 0;
    CHECK_EQ(xg2_matcher_work_limit(r.m), 1000000); /* the default */
    CHECK_RC(xg2_matcher_accept_token(r.m, 1, &acc), XG2_OK); /* "b" */
    CHECK_EQ(acc, 1);
    fill(r.m, want, nw, XG2_OK);
    /* a small limit: the fill and the accept stop, the matcher is unchanged */
    CHECK_RC(xg2_matcher_set_work_limit(r.m, 500), XG2_OK);
    fill(r.m, row, nw, XG2_ERR_LIMIT);
    CHECK(strstr(xg2_last_error(), "fill work limit of 500 units exceeded") != NULL);
    CHECK_RC(xg2_matcher_accept_token(r.m, 0, &acc), XG2_ERR_LIMIT); /* "a" */
    CHECK(strstr(xg2_last_error(), "accept work limit of 500 units exceeded") != NULL);
    CHECK_EQ(xg2_matcher_num_steps(r.m), 1);
    /* no limit: as before the failures */
    CHECK_RC(xg2_matcher_set_work_limit(r.m, 0), XG2_OK);
    fill(r.m, row, nw, XG2_OK);
    CHECK(memcmp(row, want, sizeof(int32_t) * (size_t)nw) == 0);
    CHECK_RC(xg2_matcher_accept_token(r.m, 2, &acc), XG2_OK); /* "aa" */
    CHECK_EQ(acc, 1);
    CHECK_RC(xg2_matcher_rollback(r.m, 1), XG2_OK);
    /* a fork takes the limit */
    CHECK_RC(xg2_matcher_set_work_limit(r.m, 500), XG2_OK);
    xg2_matcher *f = NULL;
    CHECK_RC(xg2_matcher_fork(r.m, &f), XG2_OK);
    CHECK_EQ(xg2_matcher_work_limit(f), 500);
    fill(f, row, nw, XG2_ERR_LIMIT);
    xg2_matcher_free(f);
    free_gcm(&r);
    xg2_vocab_free(v);
    free(text);
}

/* accept_bytes: the limit is per byte, so a long string of cheap bytes passes. */
TEST(work_limit_of_accept_bytes_is_per_byte) {
    int32_t stop = NTOK - 1;
    xg2_vocab *v = make_vocab(XG2_VOCAB_RAW, toks, NTOK, NTOK, NULL, 0, &stop, 1);
    gcm r = MAKE_GCM("root ::= [a-z]* \".\"\n", v);
    enum { LEN = 100000 };
    char *s = malloc(LEN);
    memset(s, 'q', LEN);
    int acc = 0;
    CHECK_RC(xg2_matcher_set_work_limit(r.m, 50), XG2_OK);
    CHECK_RC(xg2_matcher_accept_bytes(r.m, s, LEN, &acc), XG2_OK);
    CHECK_EQ(acc, 1);
    CHECK_RC(xg2_matcher_accept_bytes(r.m, ".", 1, &acc), XG2_OK);
    CHECK_EQ(acc, 1);
    CHECK_EQ(xg2_matcher_is_completed(r.m), 1);
    free(s);
    free_gcm(&r);
    xg2_vocab_free(v);
}

/* A fill stopped while it computes a mask entry caches nothing: the next
 * fill (same vocabulary, no limit) equals one on a vocabulary never touched. */
TEST(stopped_fill_leaves_no_partial_entry) {
    int32_t stop = NTOK - 1;
    xg2_vocab *v = make_vocab(XG2_VOCAB_RAW, toks, NTOK, NTOK, NULL, 0, &stop, 1);
    xg2_vocab *fresh = make_vocab(XG2_VOCAB_RAW, toks, NTOK, NTOK, NULL, 0, &stop, 1);
    const char *text = "root ::= (x \";\")* \"b\"\nx ::= [a-z ]+ (= \";\")\n";
    gcm r = MAKE_GCM(text, v), o = MAKE_GCM(text, fresh);
    int64_t nw = mask_words(v);
    int32_t row[4], want[4];
    fill(o.m, want, nw, XG2_OK);
    int stopped = 0;
    for (int64_t lim = 1; lim < 64; lim++) {
        CHECK_RC(xg2_matcher_set_work_limit(r.m, lim), XG2_OK);
        int need = 0;
        int rc = xg2_matcher_fill_mask(r.m, row, nw, &need);
        if (rc == XG2_OK) break;
        CHECK_EQ(rc, XG2_ERR_LIMIT);
        stopped++;
        CHECK_RC(xg2_matcher_set_work_limit(r.m, 0), XG2_OK);
        xg2_matcher *m2 = NULL;
        CHECK_RC(xg2_matcher_new(r.c, NULL, -1, 0, &m2), XG2_OK);
        fill(m2, row, nw, XG2_OK);
        CHECK(memcmp(row, want, sizeof(int32_t) * (size_t)nw) == 0);
        xg2_matcher_free(m2);
        xg2_vocab_clear_cache(v);
    }
    CHECK(stopped > 0);
    free_gcm(&r);
    free_gcm(&o);
    xg2_vocab_free(v);
    xg2_vocab_free(fresh);
}

/* A batch fill reports the matcher over its limit; the other rows are right. */
TEST(batch_fill_reports_the_matcher_over_its_limit) {
    int32_t stop = NTOK - 1;
    xg2_vocab *v = make_vocab(XG2_VOCAB_RAW, toks, NTOK, NTOK, NULL, 0, &stop, 1);
    char *text = cycle_grammar(2000);
    gcm a = MAKE_GCM(text, v), b = MAKE_GCM(text, v), c = MAKE_GCM("root ::= \"a\"+\n", v);
    int acc = 0;
    CHECK_RC(xg2_matcher_accept_token(a.m, 1, &acc), XG2_OK);
    CHECK_RC(xg2_matcher_accept_token(b.m, 1, &acc), XG2_OK);
    int64_t nw = mask_words(v);
    int32_t want_b[4], want_c[4], batch[3 * 4]; /* rows of nw words */
    fill(b.m, want_b, nw, XG2_OK);
    fill(c.m, want_c, nw, XG2_OK);
    CHECK_RC(xg2_matcher_set_work_limit(a.m, 300), XG2_OK);
    xg2_matcher *ms[3] = {b.m, a.m, c.m};
    CHECK_RC(xg2_batch_fill_masks(ms, 3, batch, 3, nw, NULL, 2), XG2_ERR_LIMIT);
    CHECK(strstr(xg2_last_error(), "matcher 1: fill work limit of 300 units exceeded") != NULL);
    CHECK(memcmp(batch, want_b, sizeof(int32_t) * (size_t)nw) == 0);
    CHECK(memcmp(batch + 2 * nw, want_c, sizeof(int32_t) * (size_t)nw) == 0);
    free_gcm(&a);
    free_gcm(&b);
    free_gcm(&c);
    xg2_vocab_free(v);
    free(text);
}

int main(int argc, char **argv) {
    return RUN_TESTS(argc, argv, T_(time_limit_stops_a_long_compile), T_(memory_limit_stops_a_large_compile),
                     T_(generous_budget_changes_nothing), T_(nested_budgets_keep_the_tighter),
                     T_(budgets_nest_boundedly), T_(work_limit_bounds_fills_and_accepts), T_(work_limit_of_accept_bytes_is_per_byte),
                     T_(stopped_fill_leaves_no_partial_entry), T_(batch_fill_reports_the_matcher_over_its_limit));
}
