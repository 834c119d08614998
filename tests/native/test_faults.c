/*
 * test_faults.c -- allocation failure sweeps.  Build with -DXG2_FAULT_INJECTION
 * (the library then fails every allocation after the next xg2__alloc_budget).
 *
 * For budgets 0, 1, 2, ... until the operation succeeds, each operation must
 * return XG2_OK or XG2_ERR_NOMEM (nothing else), leave its inputs unchanged
 * and usable, and leak nothing (the sanitizer build's leak checker runs at
 * exit).  After every failure the objects are checked against a reference run
 * made without faults.
 */
#include "check.h"

extern long xg2__alloc_budget; /* support.c, -DXG2_FAULT_INJECTION only */

#define MAX_BUDGET 200000

static void faults_on(long budget) { xg2__alloc_budget = budget; }
static void faults_off(void) { xg2__alloc_budget = -1; }

/* A failed call must say NOMEM and nothing else. */
#define CHECK_NOMEM(rc, what, budget)                                                            \
    CHECKF((rc) == XG2_ERR_NOMEM, "%s with allocation budget %ld: %s (%d), expected XG2_ERR_NOMEM; message: %s", \
           (what), (long)(budget), rc_name(rc), (rc), xg2_last_error())

/* ---- fixtures: a JSON-like grammar with lookahead and a counted repetition ---- */

static const char *const json_grammar =
    "root ::= ws (object | array) ws\n"
    "value ::= object | array | string | number | \"true\" | \"false\" | \"null\" | ident\n"
    "object ::= \"{\" ws (member (ws \",\" ws member)*)? ws \"}\"\n"
    "member ::= string ws \":\" ws value\n"
    "array ::= \"[\" ws (value (ws \",\" ws value)*)? ws \"]\"\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "char ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
    "number ::= \"-\"? int frac? (= [ \\n,}\\]])\n"
    "int ::= \"0\" | [1-9] [0-9]*\n"
    "frac ::= \".\" [0-9]+\n"
    "ident ::= \"@\" [a-z]{100}\n"
    "ws ::= [ \\t\\n]*\n";

#define A10 "aaaaaaaaaa"
#define A100 A10 A10 A10 A10 A10 A10 A10 A10 A10 A10

static const char *const json_doc =
    "{\"ab\": [1, 12.5, -3, true, null, \"x\\n\\u00e9\xc3\xa9\"], \"c\": {\"d\": @" A100 "}, \"e\": [], \"f\": 0}";

#define MAX_TOKS 160
static const char *toks[MAX_TOKS];
static char singles[128][2];
static int32_t n_toks, vocab_size, stop_id, special_id;

static void build_token_list(void) {
    if (n_toks) return;
    for (int c = 0x20; c < 0x7F; c++) {
        singles[c][0] = (char)c;
        toks[n_toks++] = singles[c];
    }
    static const char *const multi[] = {"\n", "\t", "{\"", "\":", "\",", "\": ", ", ", "true", "false", "null",
                                        "  ", "\n  ", "[1", "12", "@aaaa", A10, "\\n", "\\u00", "\xc3\xa9", "\xc3",
                                        "\xa9", "</s>", "<pad>", "e9", "ab", "\"]", "}}", "[]"};
    for (size_t i = 0; i < sizeof multi / sizeof *multi; i++) {
        if (!strcmp(multi[i], "</s>")) stop_id = n_toks;
        if (!strcmp(multi[i], "<pad>")) special_id = n_toks;
        toks[n_toks++] = multi[i];
    }
    vocab_size = n_toks + 9;
}

static xg2_vocab *new_vocab(void) {
    build_token_list();
    return make_vocab(XG2_VOCAB_RAW, toks, n_toks, vocab_size, &special_id, 1, &stop_id, 1);
}

/* Greedy longest-match tokenization of the document. */
static int32_t walk[512];
static int n_walk;

static void tokenize(void) {
    if (n_walk) return;
    build_token_list();
    const char *p = json_doc;
    while (*p) {
        int32_t best = -1;
        size_t best_len = 0;
        for (int32_t t = 0; t < n_toks; t++) {
            size_t l = strlen(toks[t]);
            if (t == stop_id || t == special_id || l <= best_len) continue;
            if (!strncmp(p, toks[t], l)) { best = t; best_len = l; }
        }
        if (best < 0) { fprintf(stderr, "cannot tokenize at %s\n", p); exit(3); }
        walk[n_walk++] = best;
        p += best_len;
    }
}

/* The reference run, without faults: masks and jump-forward strings after
 * each step of the walk. */
static int64_t nw;
static int32_t (*ref_mask)[8];
static char ref_jf[512][64];
static size_t ref_jf_len[512];
static char *ref_print;
static size_t ref_print_len;

static void reference(void) {
    if (ref_mask) return;
    tokenize();
    faults_off();
    xg2_vocab *v = new_vocab();
    nw = mask_words(v);
    if (nw > 8) { fprintf(stderr, "vocab too large for the fixture\n"); exit(3); }
    ref_mask = calloc((size_t)n_walk + 1, sizeof *ref_mask);
    gcm x = MAKE_GCM(json_grammar, v);
    if (!x.m) exit(3);
    xg2_grammar_print(x.g, NULL, 0, &ref_print_len);
    ref_print = malloc(ref_print_len + 1);
    xg2_grammar_print(x.g, ref_print, ref_print_len, &ref_print_len);
    for (int i = 0; i <= n_walk; i++) {
        int need;
        if (xg2_matcher_fill_mask(x.m, ref_mask[i], nw, &need)) { fprintf(stderr, "reference fill failed\n"); exit(3); }
        xg2_matcher_jump_forward(x.m, ref_jf[i], sizeof ref_jf[i], &ref_jf_len[i]);
        if (i == n_walk) break;
        int acc = 0;
        xg2_matcher_accept_token(x.m, walk[i], &acc);
        if (!acc) { fprintf(stderr, "reference walk: token %d (%s) rejected\n", i, toks[walk[i]]); exit(3); }
    }
    if (!xg2_matcher_is_completed(x.m)) { fprintf(stderr, "reference walk incomplete\n"); exit(3); }
    free_gcm(&x);
    xg2_vocab_free(v);
}

/* The matcher's mask (no faults) equals the reference after `step` steps. */
static int mask_is(xg2_matcher *m, int step) {
    int32_t row[8];
    int need;
    faults_off();
    if (xg2_matcher_fill_mask(m, row, nw, &need) != XG2_OK) return 0;
    return !memcmp(row, ref_mask[step], sizeof(int32_t) * (size_t)nw);
}

/* Fresh objects without faults. */
typedef struct {
    xg2_vocab *v;
    xg2_grammar *g;
    xg2_compiled *c;
    xg2_matcher *m;
} fixture;

static fixture fixture_new(int steps) {
    fixture f = {0};
    faults_off();
    f.v = new_vocab();
    f.g = MAKE_GRAMMAR(json_grammar);
    if (!f.g || xg2_compiled_new(f.g, f.v, &f.c) || xg2_matcher_new(f.c, NULL, -1, 0, &f.m)) {
        fprintf(stderr, "fixture setup failed: %s\n", xg2_last_error());
        exit(3);
    }
    for (int i = 0; i < steps; i++) {
        int acc = 0;
        xg2_matcher_accept_token(f.m, walk[i], &acc);
    }
    return f;
}

static void fixture_free(fixture *f) {
    faults_off();
    xg2_matcher_free(f->m);
    xg2_compiled_free(f->c);
    xg2_grammar_free(f->g);
    xg2_vocab_free(f->v);
    memset(f, 0, sizeof *f);
}

/* ---- the sweeps ---- */

TEST(vocab_new) {
    build_token_list();
    const int types[] = {XG2_VOCAB_RAW, XG2_VOCAB_BYTE_FALLBACK, XG2_VOCAB_BYTE_LEVEL};
    for (int k = 0; k < 3; k++) {
        long budget;
        for (budget = 0; budget < MAX_BUDGET; budget++) {
            xg2_vocab *v = (xg2_vocab *)&budget;
            faults_on(budget);
            int rc = make_vocab_rc(types[k], toks, n_toks, vocab_size, &special_id, 1, &stop_id, 1, &v);
            faults_off();
            if (rc == XG2_OK) {
                CHECK_EQ(xg2_vocab_size(v), vocab_size);
                const char *d;
                size_t len;
                int fl;
                CHECK_RC(xg2_vocab_token(v, stop_id, &d, &len, &fl), XG2_OK);
                CHECK(fl & XG2_TOKEN_STOP);
                xg2_vocab_free(v);
                break;
            }
            CHECK_NOMEM(rc, "xg2_vocab_new", budget);
            CHECK(v == (xg2_vocab *)&budget);
        }
        CHECKF(budget < MAX_BUDGET, "vocab type %d never succeeded", types[k]);
        fprintf(stderr, "  vocab type %d: %ld failing budgets\n", types[k], budget);
    }
}

static void sweep_grammar(const char *text, const char *want_print) {
    long budget;
    for (budget = 0; budget < MAX_BUDGET; budget++) {
        xg2_grammar *g = (xg2_grammar *)&budget;
        faults_on(budget);
        int rc = xg2_grammar_from_ebnf(text, strlen(text), "root", &g);
        faults_off();
        if (rc == XG2_OK) {
            if (want_print) {
                size_t len = 0;
                char *buf = malloc(ref_print_len + 1);
                CHECK_RC(xg2_grammar_print(g, buf, ref_print_len, &len), XG2_OK);
                CHECK(len == ref_print_len && !memcmp(buf, want_print, len));
                free(buf);
            }
            xg2_grammar_free(g);
            break;
        }
        CHECK_NOMEM(rc, "xg2_grammar_from_ebnf", budget);
        CHECK(g == (xg2_grammar *)&budget);
    }
    CHECKF(budget < MAX_BUDGET, "grammar never compiled");
    fprintf(stderr, "  %ld failing budgets\n", budget);
}

TEST(grammar_from_ebnf) {
    reference();
    sweep_grammar(json_grammar, ref_print);
    /* Grammars that reach other parts of the compiler: recursion, nullable
     * rules, large counted repetitions, Regex, classes beyond ASCII. */
    sweep_grammar("root ::= a b | root \"x\" | \"\"\na ::= \"q\"? (\"(\" root \")\")*\nb ::= [\\u0100-\\U0010ffff]{0,40}", NULL);
    sweep_grammar("root ::= Regex(\"[a-z]+(\\\\.[0-9]{2,5})?\") \"!\"", NULL);
    /* A right-linear region: rules that call each other only at their ends,
     * with a chain into the cycle, built as one automaton. */
    sweep_grammar("root ::= \"<\" p0 \">\" (\",\" \"<\" p0 \">\")*\np0 ::= \"h\" p1 | [0-9] s0\n"
                  "p1 ::= \"t\" s0 | \"\"\ns0 ::= [a-z] s1 | \"\"\ns1 ::= [0-9] s2 | \"-\" s0\n"
                  "s2 ::= [a-z\\u00e9] s1 | \"\"", NULL);
    /* TagDispatch: its parse-time check and its Aho-Corasick automaton. */
    sweep_grammar("root ::= TagDispatch((\"<a\", t), (\"<ab\", u), (\"b>\", t), excludes=(\"zz\", \"<q\"))\n"
                  "t ::= \"x\" | \"\"\nu ::= \"{\" root \"}\"", NULL);
}

TEST(grammar_print) {
    reference();
    faults_off();
    xg2_grammar *g = MAKE_GRAMMAR(json_grammar);
    if (!g) return;
    char *buf = malloc(ref_print_len + 1);
    long budget;
    for (budget = 0; budget < MAX_BUDGET; budget++) {
        size_t len = 0;
        faults_on(budget);
        int rc = xg2_grammar_print(g, buf, ref_print_len, &len);
        faults_off();
        if (rc == XG2_OK) {
            CHECK(len == ref_print_len && !memcmp(buf, ref_print, len));
            break;
        }
        CHECK_NOMEM(rc, "xg2_grammar_print", budget);
    }
    CHECK(budget < MAX_BUDGET);
    free(buf);
    xg2_grammar_free(g);
}

TEST(compiled_and_matcher_new) {
    reference();
    faults_off();
    xg2_vocab *v = new_vocab();
    xg2_grammar *g = MAKE_GRAMMAR(json_grammar);
    if (!g) { xg2_vocab_free(v); return; }
    long budget;
    for (budget = 0; budget < MAX_BUDGET; budget++) {
        xg2_compiled *c = (xg2_compiled *)&budget;
        faults_on(budget);
        int rc = xg2_compiled_new(g, v, &c);
        faults_off();
        if (rc == XG2_OK) { xg2_compiled_free(c); break; }
        CHECK_NOMEM(rc, "xg2_compiled_new", budget);
        CHECK(c == (xg2_compiled *)&budget);
    }
    CHECK(budget < MAX_BUDGET);
    xg2_compiled *c = NULL;
    CHECK_RC(xg2_compiled_new(g, v, &c), XG2_OK);
    int32_t stops[2] = {stop_id, special_id};
    for (int variant = 0; variant < 2; variant++) {
        for (budget = 0; budget < MAX_BUDGET; budget++) {
            xg2_matcher *m = (xg2_matcher *)&budget;
            faults_on(budget);
            int rc = variant ? xg2_matcher_new(c, stops, 2, 1, &m) : xg2_matcher_new(c, NULL, -1, 0, &m);
            faults_off();
            if (rc == XG2_OK) {
                CHECK(mask_is(m, 0) || variant);
                xg2_matcher_free(m);
                break;
            }
            CHECK_NOMEM(rc, "xg2_matcher_new", budget);
            CHECK(m == (xg2_matcher *)&budget);
        }
        CHECK(budget < MAX_BUDGET);
    }
    xg2_compiled_free(c);
    xg2_grammar_free(g);
    xg2_vocab_free(v);
}

/* Each token of the walk under every budget, on one matcher that keeps
 * failing and retrying: a failed accept changes nothing. */
TEST(accept_token) {
    reference();
    fixture f = fixture_new(0);
    long total = 0;
    for (int i = 0; i < n_walk; i++) {
        long budget;
        for (budget = 0; budget < MAX_BUDGET; budget++) {
            int acc = -1;
            faults_on(budget);
            int rc = xg2_matcher_accept_token(f.m, walk[i], &acc);
            faults_off();
            if (rc == XG2_OK) {
                CHECKF(acc == 1, "step %d: token rejected after %ld failed attempts", i, budget);
                CHECK_EQ(xg2_matcher_num_steps(f.m), i + 1);
                break;
            }
            CHECK_NOMEM(rc, "xg2_matcher_accept_token", budget);
            CHECK_EQ(xg2_matcher_num_steps(f.m), i);
            if (budget % 4 == 0) CHECKF(mask_is(f.m, i), "step %d: mask changed by a failed accept (budget %ld)", i, budget);
        }
        CHECK(budget < MAX_BUDGET);
        total += budget;
        CHECKF(mask_is(f.m, i + 1), "step %d: mask differs from the reference after faults", i + 1);
    }
    CHECK(xg2_matcher_is_completed(f.m));
    fprintf(stderr, "  %ld failing budgets over %d tokens\n", total, n_walk);
    fixture_free(&f);
}

/* The whole document as one accept_bytes: all or nothing. */
TEST(accept_bytes) {
    reference();
    fixture f = fixture_new(0);
    long budget;
    for (budget = 0; budget < MAX_BUDGET; budget++) {
        int acc = -1;
        faults_on(budget);
        int rc = xg2_matcher_accept_bytes(f.m, json_doc, strlen(json_doc), &acc);
        faults_off();
        if (rc == XG2_OK) {
            CHECK_EQ(acc, 1);
            CHECK(xg2_matcher_is_completed(f.m));
            CHECK(mask_is(f.m, n_walk));
            break;
        }
        CHECK_NOMEM(rc, "xg2_matcher_accept_bytes", budget);
        CHECK_EQ(xg2_matcher_num_steps(f.m), 0);
        if (budget % 16 == 0) CHECKF(mask_is(f.m, 0), "mask changed by a failed accept_bytes (budget %ld)", budget);
    }
    CHECK(budget < MAX_BUDGET);
    fprintf(stderr, "  %ld failing budgets\n", budget);
    fixture_free(&f);
}

/* fill_mask at each step with a cold compiled grammar (its mask cache is
 * filled under faults); afterwards the whole rest of the walk must still give
 * the reference masks (no half-built cache entries). */
TEST(fill_mask) {
    reference();
    long total = 0;
    for (int i = 0; i < n_walk; i += 3) {
        fixture f = fixture_new(i);
        long budget;
        for (budget = 0; budget < MAX_BUDGET; budget++) {
            int32_t row[8];
            int need;
            faults_on(budget);
            int rc = xg2_matcher_fill_mask(f.m, row, nw, &need);
            faults_off();
            if (rc == XG2_OK) {
                CHECKF(!memcmp(row, ref_mask[i], sizeof(int32_t) * (size_t)nw), "step %d: mask differs after %ld faults", i, budget);
                break;
            }
            CHECK_NOMEM(rc, "xg2_matcher_fill_mask", budget);
        }
        CHECK(budget < MAX_BUDGET);
        total += budget;
        for (int j = i; j < n_walk; j++) {
            CHECKF(mask_is(f.m, j), "mask after step %d differs once step %d's fill ran under faults", j, i);
            int acc = 0;
            xg2_matcher_accept_token(f.m, walk[j], &acc);
        }
        fixture_free(&f);
    }
    fprintf(stderr, "  %ld failing budgets\n", total);
}

/* Masks computed ahead (precompute.c), along the document and breadth-first
 * (fans by their literals, with the piece and plain-text flags), under every
 * budget on fresh objects (an empty mask cache): a failed call says NOMEM,
 * and a matcher's masks along the walk afterwards are the reference's. */
#define TEXT_BYTES 40 /* (of json_doc: a sweep walks it once per budget) */
TEST(precompute) {
    reference();
    long total = 0;
    for (int how = 0; how < 3; how++) {
        long budget;
        for (budget = 0; budget < MAX_BUDGET; budget++) {
            fixture f = fixture_new(0);
            int32_t done = -1;
            faults_on(budget);
            int rc = how == 0   ? xg2_compiled_precompute_text(f.c, json_doc, TEXT_BYTES, -1, &done)
                     : how == 1 ? xg2_compiled_precompute(f.c, -1, -1, &done)
                                : xg2_compiled_precompute_states(f.c, -1, -1, XG2_PRECOMPUTE_OWN | XG2_PRECOMPUTE_PLAIN,
                                                                 &done);
            faults_off();
            if (rc != XG2_OK) CHECK_NOMEM(rc, "xg2_compiled_precompute*", budget);
            for (int j = 0; j < n_walk; j++) {
                CHECKF(mask_is(f.m, j), "way %d: mask after step %d differs once a precompute ran under %ld faults", how,
                       j, budget);
                int acc = 0;
                xg2_matcher_accept_token(f.m, walk[j], &acc);
            }
            fixture_free(&f);
            if (rc == XG2_OK) {
                CHECKF(how != 0 || done == TEXT_BYTES + 1, "the walk filled %d masks", done);
                break;
            }
        }
        CHECK(budget < MAX_BUDGET);
        total += budget;
    }
    fprintf(stderr, "  %ld failing budgets\n", total);
}

/* The first fill after a trigger whose tags' names are a choice of literals
 * (its mask the union of one cache entry per name, literal_fans.c): under every
 * budget, on fresh objects (an empty mask cache), a failed fill says NOMEM, and
 * the same matcher's next fill, a new matcher's and a second tool set's (the
 * names' entries then cached) give the reference mask. */
static const char *const fan_grammar =
    "root ::= TagDispatch((\"<f=\", g))\n"
    "g ::= (\"abc>\" t | \"abd>\" t | \"ab>\" t | \"b_x>\" t | \"b_y>\" t | \"c>\" t) \"</f>\"\n"
    "t ::= \"x\" | \"\"";
static const char *const fan_grammar_2 =
    "root ::= TagDispatch((\"<f=\", g))\n"
    "g ::= (\"abc>\" t | \"abd>\" t | \"ab>\" t | \"b_x>\" t | \"b_y>\" t | \"c>\" t | \"d>\" t) \"</f>\"\n"
    "t ::= \"x\" | \"\"";

static int fan_mask(const xg2_compiled *c, int32_t *row) {
    xg2_matcher *m = NULL;
    int acc = 0, need, rc = xg2_matcher_new(c, NULL, -1, 0, &m);
    if (!rc) rc = xg2_matcher_accept_bytes(m, "hi <f=", 6, &acc);
    if (!rc) rc = acc ? xg2_matcher_fill_mask(m, row, nw, &need) : XG2_ERR_INTERNAL;
    xg2_matcher_free(m);
    return rc;
}

TEST(fan_fill) {
    reference();
    int32_t want[8], want2[8], row[8];
    faults_off();
    xg2_vocab *v0 = new_vocab();
    gcm x = MAKE_GCM(fan_grammar, v0), y = MAKE_GCM(fan_grammar_2, v0);
    if (!x.m || !y.m) return;
    CHECK(fan_mask(x.c, want) == XG2_OK && fan_mask(y.c, want2) == XG2_OK);
    free_gcm(&x);
    free_gcm(&y);
    xg2_vocab_free(v0);
    long budget;
    for (budget = 0; budget < MAX_BUDGET; budget++) {
        xg2_vocab *v = new_vocab();
        gcm a = MAKE_GCM(fan_grammar, v), b = MAKE_GCM(fan_grammar_2, v);
        if (!a.m || !b.m) return;
        int acc = 0, need;
        CHECK(xg2_matcher_accept_bytes(a.m, "hi <f=", 6, &acc) == XG2_OK && acc);
        faults_on(budget);
        int rc = xg2_matcher_fill_mask(a.m, row, nw, &need);
        faults_off();
        if (rc != XG2_OK) {
            CHECK_NOMEM(rc, "xg2_matcher_fill_mask at a choice of names", budget);
            CHECK(xg2_matcher_fill_mask(a.m, row, nw, &need) == XG2_OK);
        }
        CHECKF(!memcmp(row, want, sizeof(int32_t) * (size_t)nw), "mask differs after %ld faults", budget);
        CHECKF(fan_mask(a.c, row) == XG2_OK && !memcmp(row, want, sizeof(int32_t) * (size_t)nw),
               "a new matcher's mask differs after %ld faults", budget);
        CHECKF(fan_mask(b.c, row) == XG2_OK && !memcmp(row, want2, sizeof(int32_t) * (size_t)nw),
               "another tool set's mask differs after %ld faults", budget);
        free_gcm(&a);
        free_gcm(&b);
        xg2_vocab_free(v);
        if (rc == XG2_OK) break;
    }
    CHECK(budget < MAX_BUDGET);
    fprintf(stderr, "  %ld failing budgets\n", budget);
}

TEST(fork_matcher) {
    reference();
    fixture f = fixture_new(0);
    for (int i = 0; i < n_walk; i++) {
        if (i % 5 == 0) {
            long budget;
            for (budget = 0; budget < MAX_BUDGET; budget++) {
                xg2_matcher *k = (xg2_matcher *)&budget;
                faults_on(budget);
                int rc = xg2_matcher_fork(f.m, &k);
                faults_off();
                if (rc == XG2_OK) {
                    CHECK(mask_is(k, i));
                    CHECK_EQ(xg2_matcher_num_steps(k), i);
                    int acc = 0;
                    CHECK_RC(xg2_matcher_accept_token(k, walk[i], &acc), XG2_OK);
                    CHECK(acc == 1 && mask_is(k, i + 1));
                    xg2_matcher_free(k);
                    break;
                }
                CHECK_NOMEM(rc, "xg2_matcher_fork", budget);
                CHECK(k == (xg2_matcher *)&budget);
                if (budget % 4 == 0) CHECK(mask_is(f.m, i));
            }
            CHECK(budget < MAX_BUDGET);
        }
        int acc = 0;
        xg2_matcher_accept_token(f.m, walk[i], &acc);
    }
    fixture_free(&f);
}

TEST(jump_forward) {
    reference();
    fixture f = fixture_new(0);
    for (int i = 0; i <= n_walk; i++) {
        long budget;
        for (budget = 0; budget < MAX_BUDGET; budget++) {
            char buf[64];
            size_t len = 0;
            faults_on(budget);
            int rc = xg2_matcher_jump_forward(f.m, buf, sizeof buf, &len);
            faults_off();
            if (rc == XG2_OK) {
                CHECKF(len == ref_jf_len[i] && !memcmp(buf, ref_jf[i], len < sizeof buf ? len : sizeof buf),
                       "step %d: jump_forward %s, reference %s", i, show(buf, len), show(ref_jf[i], ref_jf_len[i]));
                break;
            }
            CHECK_NOMEM(rc, "xg2_matcher_jump_forward", budget);
            CHECK_EQ(xg2_matcher_num_steps(f.m), i);
        }
        CHECK(budget < MAX_BUDGET);
        CHECKF(mask_is(f.m, i), "step %d: mask differs after jump_forward under faults", i);
        if (i == n_walk) break;
        int acc = 0;
        xg2_matcher_accept_token(f.m, walk[i], &acc);
    }
    fixture_free(&f);
}

/* Batch fill over matchers at different steps, cold cache, one thread (so the
 * budget is deterministic), then several threads (rc only: the budget counter
 * is shared by the threads). */
static void batch_sweep(int n_threads) {
    enum { N = 6 };
    faults_off();
    xg2_vocab *v = new_vocab();
    xg2_grammar *g = MAKE_GRAMMAR(json_grammar);
    if (!g) { xg2_vocab_free(v); return; }
    int steps[N];
    for (int k = 0; k < N; k++) steps[k] = k * n_walk / N;
    long budget;
    for (budget = 0; budget < MAX_BUDGET; budget++) {
        faults_off();
        xg2_compiled *c = NULL;
        xg2_matcher *ms[N];
        CHECK_RC(xg2_compiled_new(g, v, &c), XG2_OK);
        for (int k = 0; k < N; k++) {
            xg2_matcher_new(c, NULL, -1, 0, &ms[k]);
            for (int i = 0; i < steps[k]; i++) {
                int acc;
                xg2_matcher_accept_token(ms[k], walk[i], &acc);
            }
        }
        int32_t rows[N * 8]; /* row k at rows + k * nw */
        faults_on(budget);
        int rc = xg2_batch_fill_masks(ms, N, rows, N, nw, NULL, n_threads);
        faults_off();
        if (rc == XG2_OK)
            for (int k = 0; k < N; k++)
                CHECKF(!memcmp(rows + k * nw, ref_mask[steps[k]], sizeof(int32_t) * (size_t)nw), "row %d (step %d) differs", k, steps[k]);
        else
            CHECK_NOMEM(rc, "xg2_batch_fill_masks", budget);
        /* Afterwards, without faults, every matcher gives the reference. */
        CHECK_RC(xg2_batch_fill_masks(ms, N, rows, N, nw, NULL, n_threads), XG2_OK);
        for (int k = 0; k < N; k++)
            CHECKF(!memcmp(rows + k * nw, ref_mask[steps[k]], sizeof(int32_t) * (size_t)nw), "after faults: row %d (step %d) differs", k, steps[k]);
        for (int k = 0; k < N; k++) xg2_matcher_free(ms[k]);
        xg2_compiled_free(c);
        if (rc == XG2_OK) break;
    }
    CHECK(budget < MAX_BUDGET);
    fprintf(stderr, "  %d threads: %ld failing budgets\n", n_threads, budget);
    xg2_grammar_free(g);
    xg2_vocab_free(v);
}

TEST(batch_fill) {
    reference();
    batch_sweep(1);
    batch_sweep(3);
}

/* Pending lookahead assertions are interned per matcher; a long lookahead
 * makes many distinct ones, so allocation failures land in that table too.
 * After any failure, the rest of the walk must give the reference masks. */
static const char *const la_grammar =
    "root ::= (x | y | z)+ \".\"\n"
    "x ::= \"q\" (= \"abcdefghijkl\")\n"
    "y ::= \"r\" (= \"abcdefghijkm\" | \"lkjihgfedcba\")\n"
    "z ::= [a-m]\n";
static const char *const la_doc = "qabcdefghijklrabcdefghijkmrlkjihgfedcbaqabcdefghijkl.";
static const char *const la_toks[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "q", "r", ".",
                                      "ab", "abc", "cd", "def", "qa", "ra", "rl", "lk", "kj", "ji", "ba", "l.",
                                      "abcdefghijkl", "abcdefghijkm", "gfedcba", "hijkl", "hijkm"};
#define LA_N ((int32_t)(sizeof la_toks / sizeof *la_toks))

typedef struct {
    xg2_vocab *v;
    xg2_grammar *g;
    xg2_compiled *c;
    int32_t walk[128];
    int n;
    int32_t masks[129][2];
} la_ref;

static void la_reference(la_ref *r) {
    faults_off();
    memset(r, 0, sizeof *r);
    r->v = make_vocab(XG2_VOCAB_RAW, la_toks, LA_N, LA_N, NULL, 0, NULL, 0);
    r->g = MAKE_GRAMMAR(la_grammar);
    if (!r->g) exit(3);
    xg2_compiled_new(r->g, r->v, &r->c);
    /* Tokenize: shortest tokens first for many steps, alternating with long ones. */
    for (const char *p = la_doc; *p;) {
        int32_t pick = -1;
        size_t want = (r->n % 3 == 2) ? 64 : 1, best = 0;
        for (int32_t t = 0; t < LA_N; t++) {
            size_t l = strlen(la_toks[t]);
            if (strncmp(p, la_toks[t], l)) continue;
            if (pick < 0 || (want == 1 ? l < best : l > best)) { pick = t; best = l; }
        }
        r->walk[r->n++] = pick;
        p += best;
    }
    xg2_matcher *m = NULL;
    xg2_matcher_new(r->c, NULL, -1, 0, &m);
    for (int i = 0; i <= r->n; i++) {
        int need, acc = 0;
        xg2_matcher_fill_mask(m, r->masks[i], mask_words(r->v), &need);
        if (i == r->n) break;
        xg2_matcher_accept_token(m, r->walk[i], &acc);
        if (!acc) { fprintf(stderr, "lookahead reference walk: step %d rejected\n", i); exit(3); }
    }
    if (!xg2_matcher_is_completed(m)) { fprintf(stderr, "lookahead reference walk incomplete\n"); exit(3); }
    xg2_matcher_free(m);
}

static int la_mask_is(const la_ref *r, xg2_matcher *m, int step) {
    int32_t row[2];
    int need;
    faults_off();
    return xg2_matcher_fill_mask(m, row, mask_words(r->v), &need) == XG2_OK &&
           !memcmp(row, r->masks[step], sizeof(int32_t) * (size_t)mask_words(r->v));
}

TEST(lookahead_guards) {
    la_ref r;
    la_reference(&r);
    int64_t w = mask_words(r.v);
    /* accept_token under faults, one matcher throughout. */
    xg2_matcher *m = NULL;
    xg2_matcher_new(r.c, NULL, -1, 0, &m);
    long total = 0;
    for (int i = 0; i < r.n; i++) {
        long budget;
        for (budget = 0; budget < MAX_BUDGET; budget++) {
            int acc = -1;
            faults_on(budget);
            int rc = xg2_matcher_accept_token(m, r.walk[i], &acc);
            faults_off();
            if (rc == XG2_OK) { CHECKF(acc == 1, "step %d rejected after faults", i); break; }
            CHECK_NOMEM(rc, "accept_token (lookahead grammar)", budget);
        }
        total += budget;
        CHECKF(la_mask_is(&r, m, i + 1), "lookahead grammar: mask after step %d differs after faults", i + 1);
    }
    xg2_matcher_free(m);
    /* fill_mask under faults at each step, on a fresh matcher per budget; after
     * a failure the walk goes straight on (no retry of the same fill), and
     * every later mask must match the reference. */
    for (int i = 0; i < r.n; i++) {
        long budget;
        for (budget = 0; budget < MAX_BUDGET; budget++) {
            m = NULL;
            xg2_matcher_new(r.c, NULL, -1, 0, &m);
            for (int k = 0; k < i; k++) {
                int acc;
                xg2_matcher_accept_token(m, r.walk[k], &acc);
            }
            int32_t row[2];
            int need;
            faults_on(budget);
            int rc = xg2_matcher_fill_mask(m, row, w, &need);
            faults_off();
            if (rc != XG2_OK) CHECK_NOMEM(rc, "fill_mask (lookahead grammar)", budget);
            for (int k = i; k < r.n; k++) {
                int acc = 0;
                xg2_matcher_accept_token(m, r.walk[k], &acc);
                CHECKF(acc == 1, "lookahead grammar: step %d rejected after a fill at step %d failed (budget %ld)", k, i, budget);
                if (!acc) break;
                CHECKF(la_mask_is(&r, m, k + 1), "lookahead grammar: mask after step %d differs after a fill at step %d failed (budget %ld)",
                       k + 1, i, budget);
            }
            xg2_matcher_free(m);
            if (rc == XG2_OK) break;
        }
        total += budget;
    }
    fprintf(stderr, "  %ld failing budgets over %d steps\n", total, r.n);
    xg2_compiled_free(r.c);
    xg2_grammar_free(r.g);
    xg2_vocab_free(r.v);
}

static int32_t tok_id(const char *text) {
    for (int32_t t = 0; t < n_toks; t++)
        if (!strcmp(toks[t], text)) return t;
    fprintf(stderr, "no token %s in the fixture\n", text);
    exit(3);
}

/* Token edges, TokenTagDispatch and a budgeted rule: parse, compile (the
 * plain-token bitset), then accept_token (token steps that span several
 * positions) and fill_mask (the token sets added after the byte fill) under
 * every budget, each checked against a run without faults. */
TEST(token_edges) {
    faults_off();
    build_token_list();
    xg2_vocab *v = new_vocab();
    int32_t ta = tok_id("a"), tab = tok_id("ab"), tz = tok_id("z");
    char text[512];
    snprintf(text, sizeof text,
             "root ::= (Token(%d) t | Token(%d) | ExcludeToken(%d, %d))* TokenTagDispatch((%d, u), excludes=(%d)) Token(%d)\n"
             "t[max_tokens=2, max_chars=3] ::= [a-z]*\nu ::= \"q\"",
             special_id, tab, special_id, tz, ta, tz, stop_id);
    sweep_grammar(text, NULL);
    xg2_grammar *g = MAKE_GRAMMAR(text);
    if (!g) { xg2_vocab_free(v); return; }
    long budget, total = 0;
    for (budget = 0; budget < MAX_BUDGET; budget++) {
        xg2_compiled *c = NULL;
        faults_on(budget);
        int rc = xg2_compiled_new(g, v, &c);
        faults_off();
        if (rc == XG2_OK) { xg2_compiled_free(c); break; }
        CHECK_NOMEM(rc, "xg2_compiled_new (token edges)", budget);
    }
    xg2_compiled *c = NULL;
    CHECK_RC(xg2_compiled_new(g, v, &c), XG2_OK);
    int32_t walk_t[] = {special_id, ta, tab, tab, tok_id("x"), special_id, ta, ta, tok_id("q"), stop_id};
    enum { N = sizeof walk_t / sizeof *walk_t };
    int32_t ref[N + 1][8];
    xg2_matcher *m = NULL;
    CHECK_RC(xg2_matcher_new(c, NULL, -1, 0, &m), XG2_OK);
    for (int i = 0; i <= N; i++) {
        int need, acc = 0;
        CHECK_RC(xg2_matcher_fill_mask(m, ref[i], mask_words(v), &need), XG2_OK);
        if (i == N) break;
        CHECK_RC(xg2_matcher_accept_token(m, walk_t[i], &acc), XG2_OK);
        CHECKF(acc == 1, "token walk: step %d rejected", i);
    }
    CHECK(xg2_matcher_is_terminated(m));
    xg2_matcher_free(m);
    int64_t w = mask_words(v);
    m = NULL;
    CHECK_RC(xg2_matcher_new(c, NULL, -1, 0, &m), XG2_OK);
    for (int i = 0; i < N; i++) {
        for (budget = 0; budget < MAX_BUDGET; budget++) { /* the fill, then the token */
            int32_t row[8];
            int need;
            faults_on(budget);
            int rc = xg2_matcher_fill_mask(m, row, w, &need);
            faults_off();
            if (rc == XG2_OK) { CHECKF(!memcmp(row, ref[i], sizeof(int32_t) * (size_t)w), "token walk: mask %d differs", i); break; }
            CHECK_NOMEM(rc, "fill_mask (token edges)", budget);
        }
        total += budget;
        for (budget = 0; budget < MAX_BUDGET; budget++) {
            int acc = -1;
            faults_on(budget);
            int rc = xg2_matcher_accept_token(m, walk_t[i], &acc);
            faults_off();
            if (rc == XG2_OK) { CHECKF(acc == 1, "token walk: step %d rejected after faults", i); break; }
            CHECK_NOMEM(rc, "accept_token (token edges)", budget);
            CHECK_EQ(xg2_matcher_num_steps(m), i);
        }
        total += budget;
    }
    CHECK(xg2_matcher_is_terminated(m));
    fprintf(stderr, "  %ld failing budgets over %d token steps\n", total, (int)N);
    xg2_matcher_free(m);
    xg2_compiled_free(c);
    xg2_grammar_free(g);
    xg2_vocab_free(v);
}

int main(int argc, char **argv) {
    int rc = RUN_TESTS(argc, argv, T_(vocab_new), T_(grammar_from_ebnf), T_(grammar_print), T_(compiled_and_matcher_new),
                       T_(accept_token), T_(accept_bytes), T_(fill_mask), T_(precompute), T_(fan_fill), T_(fork_matcher), T_(jump_forward), T_(batch_fill),
                       T_(lookahead_guards), T_(token_edges));
    faults_off();
    free(ref_mask);
    free(ref_print);
    return rc;
}
