/*
 * test_grammar.c -- EBNF parsing, printing, and error reporting.
 */
#include <signal.h>

#include "check.h"

/* Printed form of g, malloc'd and NUL-terminated (NULL on failure). */
static char *print_grammar(const xg2_grammar *g) {
    size_t len = 0;
    if (CHECK_RC(xg2_grammar_print(g, NULL, 0, &len), XG2_OK)) return NULL;
    char *buf = malloc(len + 1);
    size_t len2 = 0;
    if (CHECK_RC(xg2_grammar_print(g, buf, len, &len2), XG2_OK)) { free(buf); return NULL; }
    CHECK_EQ(len2, len);
    buf[len] = 0;
    CHECKF(strlen(buf) == len, "printed grammar contains a NUL byte");
    return buf;
}

static int parse(const char *text, xg2_grammar **g) {
    return xg2_grammar_from_ebnf(text, strlen(text), "root", g);
}

/* ---- printing round trip ---- */

static const char *const round_trip_grammars[] = {
    "root ::= \"hello\"",
    "root ::= \"a\" | \"b\" | \"\"",
    "root ::= (\"a\" | \"b\")* \"c\"+ \"d\"? \"e\"{3} \"f\"{2,} \"g\"{2,5}",
    "root ::= (\"a\" \"b\")+ ((\"c\" | \"d\") \"e\")*",
    "root ::= [a-z0-9_] [^\\n\"\\\\] [\\]\\-\\^\\[] [-a] [a-] [\\t\\r\\n ]",
    "root ::= \"\\\"\\\\\\n\\t\\r\\x01\\x7f\\u00e9\\u4f60\\U0001F600\"",
    "root ::= [\\u0100-\\u017f\\U00010000-\\U0010ffff]+",
    "root ::= [\\d] [\\w]+ [\\s]* [\\D] [\\W] [\\S]",
    "root ::= \"x\" [a-z]{100} \"y\"",
    "root ::= (\"ab\" | [0-9]){40,50}",
    "root ::= [0-9]{33,} \".\" (\"x\"? ){40}",
    "root ::= x \"b\" | x \"c\"\nx ::= \"a\"+ (= \"b\" | \"c\")",
    "root ::= \"(\" root \")\" | \"\"",
    "root ::= root \"a\" | \"b\"",
    "root ::= a-b.c\na-b.c ::= \"x\" a-b.c | \"y\"",
    "# a comment\nroot ::= \"a\" # trailing comment\n  | \"b\"\n",
    "root ::= \"a\" unused\nunused ::= \"u\"\nnever ::= \"n\"",
    /* A JSON-like grammar with lookahead and a counted repetition. */
    "root ::= value\n"
    "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "object ::= \"{\" ws (member (ws \",\" ws member)*)? ws \"}\"\n"
    "member ::= string ws \":\" ws value\n"
    "array ::= \"[\" ws (value (ws \",\" ws value)*)? ws \"]\"\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "char ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
    "number ::= \"-\"? int frac? (= [,}\\] ] | \"\\n\")\n"
    "int ::= \"0\" | [1-9] [0-9]*\n"
    "frac ::= \".\" [0-9]+\n"
    "ws ::= [ \\t\\n]*\n"
    "id ::= [a-z]{100}\n",
};

TEST(print_round_trip) {
    for (size_t i = 0; i < sizeof round_trip_grammars / sizeof *round_trip_grammars; i++) {
        const char *text = round_trip_grammars[i];
        xg2_grammar *g1 = MAKE_GRAMMAR(text);
        if (!g1) continue;
        CHECK(xg2_grammar_num_rules(g1) >= 1);
        CHECK(xg2_grammar_num_states(g1) >= 1);
        char *p1 = print_grammar(g1);
        xg2_grammar *g2 = NULL;
        int rc = p1 ? parse(p1, &g2) : -1;
        CHECKF(rc == XG2_OK, "printed grammar does not parse: %s: %s\n--- original ---\n%s\n--- printed ---\n%s---",
               rc_name(rc), xg2_last_error(), text, p1 ? p1 : "(null)");
        if (rc == XG2_OK) {
            char *p2 = print_grammar(g2);
            CHECKF(p2 && strcmp(p1, p2) == 0,
                   "print(parse(print(g))) != print(g)\n--- original ---\n%s\n--- print 1 ---\n%s--- print 2 ---\n%s---",
                   text, p1, p2 ? p2 : "(null)");
            free(p2);
            xg2_grammar_free(g2);
        }
        free(p1);
        xg2_grammar_free(g1);
    }
}

/* A short cap truncates, writes no more than cap bytes, and still reports the length. */
TEST(print_caps) {
    xg2_grammar *g = MAKE_GRAMMAR("root ::= \"abc\" | [x-z]+ other\nother ::= \"o\"");
    if (!g) return;
    char *full = print_grammar(g);
    size_t n = strlen(full);
    CHECKF(strstr(full, "root ::=") == full, "printed: %s", full);
    for (size_t cap = 1; cap <= n + 2; cap++) {
        char buf[512];
        memset(buf, '#', sizeof buf);
        size_t len = 0;
        CHECK_RC(xg2_grammar_print(g, buf, cap, &len), XG2_OK);
        CHECK_EQ(len, n);
        size_t w = cap < n ? cap : n;
        CHECK(memcmp(buf, full, w) == 0);
        CHECK(buf[w] == '#');
    }
    size_t len;
    CHECK_RC(xg2_grammar_print(g, NULL, 4, &len), XG2_ERR_ARG);
    CHECK_RC(xg2_grammar_print(g, full, 1, NULL), XG2_ERR_ARG);
    CHECK_RC(xg2_grammar_print(NULL, NULL, 0, &len), XG2_ERR_ARG);
    free(full);
    xg2_grammar_free(g);
}

/* ---- errors ---- */

typedef struct {
    const char *text;
    int want_rc;
    int line; /* expected line in the message, 0: not checked */
    const char *needle; /* must appear in the message, or NULL */
} bad_case;

static void check_bad(const bad_case *c, size_t len, const char *root) {
    xg2_grammar *g = (xg2_grammar *)&g; /* sentinel: must stay untouched */
    int rc = xg2_grammar_from_ebnf(c->text, len, root, &g);
    const char *msg = xg2_last_error();
    CHECKF(rc == c->want_rc, "grammar %s: got %s, expected %s; message: %s", show(c->text, len), rc_name(rc),
           rc_name(c->want_rc), msg);
    CHECKF(g == (xg2_grammar *)&g, "grammar %s: *out written on failure", show(c->text, len));
    CHECKF(msg[0] != 0, "grammar %s: empty message", show(c->text, len));
    if (c->line) {
        char want[32];
        snprintf(want, sizeof want, "line %d", c->line);
        CHECKF(strstr(msg, want) && strstr(msg, "column"), "grammar %s: message lacks \"%s\" / \"column\": %s",
               show(c->text, len), want, msg);
    }
    if (c->needle) CHECKF(strstr(msg, c->needle) != NULL, "grammar %s: message lacks \"%s\": %s", show(c->text, len), c->needle, msg);
    if (rc == XG2_OK && g != (xg2_grammar *)&g) xg2_grammar_free(g);
}

TEST(syntax_errors_name_line_and_column) {
    static const bad_case cases[] = {
        {"root ::= \"abc", XG2_ERR_GRAMMAR, 1, "string"},
        {"root ::= \"a\"\nx ::= \"abc\n\"", XG2_ERR_GRAMMAR, 2, NULL},
        {"root ::= [a-z", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= \"a\"\n\nfoo ::: \"b\"", XG2_ERR_GRAMMAR, 3, NULL},
        {"root = \"a\"", XG2_ERR_GRAMMAR, 1, "::="},
        {"root ::= \"\\q\"", XG2_ERR_GRAMMAR, 1, "escape"},
        {"root ::= [z-a]", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= \"a\"{3,1}", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= \"a\"{", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= \"a\"{2", XG2_ERR_GRAMMAR, 1, "}"},
        {"root ::= \"a\")", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= (\"a\"", XG2_ERR_GRAMMAR, 1, ")"},
        {"root ::= \"a\" (= \"b\") \"c\"", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= \"a\" (= \"b\") (= \"c\")", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= (= \"b\")", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= \"a\" (= )", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= \"a\" ((= \"b\"))", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= | \"a\"", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= \"a\" |", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::=", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= \"\\ud800\"", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= \"\\x4\"", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= \"\\U00110000\"", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= \"\xff\"", XG2_ERR_GRAMMAR, 1, "UTF-8"},
        {"root ::= \"\xc3\"", XG2_ERR_GRAMMAR, 1, "UTF-8"},
        {"root ::= \"a\"\n  \"b\" ::= \"c\"", XG2_ERR_GRAMMAR, 2, NULL},
        {"root ::= \"a\" \x01", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= \"a\"\nroot2 ::= \"b\" \"c\" [", XG2_ERR_GRAMMAR, 2, NULL},
        {"root ::= Regex(\"a\"", XG2_ERR_GRAMMAR, 1, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_bad(&cases[i], strlen(cases[i].text), "root");
    /* An error on line 3, column 10 names both. */
    bad_case c = {"root ::= a\na ::= \"x\"\nb ::= \"y\" @", XG2_ERR_GRAMMAR, 3, "column 11"};
    check_bad(&c, strlen(c.text), "root");
    /* A NUL byte inside the text (len counts it). */
    static const char nul_text[] = "root ::= \"a\"\0 \"b\"";
    bad_case n = {nul_text, XG2_ERR_GRAMMAR, 1, NULL};
    check_bad(&n, sizeof nul_text - 1, "root");
    /* Empty text and only a comment. */
    bad_case e1 = {"", XG2_ERR_GRAMMAR, 0, NULL}, e2 = {"  # nothing\n", XG2_ERR_GRAMMAR, 0, NULL};
    check_bad(&e1, 0, "root");
    check_bad(&e2, strlen(e2.text), "root");
}

TEST(undefined_and_duplicate_rules) {
    static const bad_case cases[] = {
        {"root ::= foo", XG2_ERR_GRAMMAR, 1, "foo"},
        {"root ::= \"a\" | \"b\"\n  x\nx ::= \"c\" y_z", XG2_ERR_GRAMMAR, 3, "y_z"},
        {"root ::= \"a\"\nroot ::= \"b\"", XG2_ERR_GRAMMAR, 2, "root"},
        {"root ::= x\nx ::= \"a\"\nx ::= \"b\"", XG2_ERR_GRAMMAR, 3, "\"x\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_bad(&cases[i], strlen(cases[i].text), "root");
    /* The root rule itself missing. */
    bad_case r = {"start ::= \"a\"", XG2_ERR_GRAMMAR, 0, "root"};
    check_bad(&r, strlen(r.text), "root");
    bad_case r2 = {"root ::= \"a\"", XG2_ERR_GRAMMAR, 0, "main"};
    check_bad(&r2, strlen(r2.text), "main");
    /* Another root name works. */
    xg2_grammar *g = NULL;
    const char *t = "start ::= \"a\" other\nother ::= \"b\"";
    CHECK_RC(xg2_grammar_from_ebnf(t, strlen(t), "start", &g), XG2_OK);
    xg2_grammar_free(g);
    /* NULL arguments. */
    g = NULL;
    CHECK_RC(xg2_grammar_from_ebnf(NULL, 0, "root", &g), XG2_ERR_ARG);
    CHECK_RC(xg2_grammar_from_ebnf(t, strlen(t), NULL, &g), XG2_ERR_ARG);
    CHECK_RC(xg2_grammar_from_ebnf(t, strlen(t), "start", NULL), XG2_ERR_ARG);
    CHECK(g == NULL);
    xg2_grammar_free(NULL);
    /* len is honoured: a prefix of the text is a grammar of its own. */
    const char *two = "root ::= \"a\"GARBAGE";
    CHECK_RC(xg2_grammar_from_ebnf(two, 12, "root", &g), XG2_OK);
    xg2_grammar_free(g);
}

/* ---- limits: deep nesting and big bounds ---- */

/* text = prefix + open*n + middle + close*n + suffix */
static char *nest(const char *prefix, const char *open, const char *middle, const char *close, const char *suffix, size_t n) {
    size_t lo = strlen(open), lc = strlen(close);
    size_t total = strlen(prefix) + n * (lo + lc) + strlen(middle) + strlen(suffix) + 1;
    char *s = malloc(total), *p = s;
    p += sprintf(p, "%s", prefix);
    for (size_t i = 0; i < n; i++) { memcpy(p, open, lo); p += lo; }
    p += sprintf(p, "%s", middle);
    for (size_t i = 0; i < n; i++) { memcpy(p, close, lc); p += lc; }
    sprintf(p, "%s", suffix);
    return s;
}

/* Must fail with GRAMMAR or LIMIT, a message, and no crash. */
static void check_rejected(const char *what, const char *text) {
    xg2_grammar *g = NULL;
    double t0 = now_s();
    int rc = parse(text, &g);
    double dt = now_s() - t0;
    CHECKF(rc == XG2_ERR_LIMIT || rc == XG2_ERR_GRAMMAR, "%s: got %s (%s)", what, rc_name(rc), xg2_last_error());
    CHECKF(xg2_last_error()[0] != 0, "%s: no message", what);
    CHECKF(dt < 30.0, "%s: took %.1f s", what, dt);
    if (rc == XG2_OK) xg2_grammar_free(g);
}

/* Must either compile or fail cleanly; returns the status. */
static int check_clean(const char *what, const char *text, double max_s) {
    xg2_grammar *g = NULL;
    double t0 = now_s();
    int rc = parse(text, &g);
    double dt = now_s() - t0;
    CHECKF(rc == XG2_OK || rc == XG2_ERR_LIMIT || rc == XG2_ERR_GRAMMAR, "%s: got %s (%s)", what, rc_name(rc),
           xg2_last_error());
    CHECKF(dt < max_s, "%s: took %.1f s", what, dt);
    if (rc == XG2_OK) {
        char *p = print_grammar(g);
        free(p);
        xg2_grammar_free(g);
    }
    return rc;
}

TEST(deep_nesting_is_an_error_not_a_crash) {
    char *s;
    s = nest("root ::= ", "(", "\"a\"", ")", "", 100000);
    check_rejected("100000 nested parentheses", s);
    free(s);
    s = nest("root ::= ", "(", "\"a\"", "", "", 100000);
    check_rejected("100000 unclosed parentheses", s);
    free(s);
    s = nest("root ::= ", "(\"x\" | ", "\"a\"", ")*", "", 100000);
    check_rejected("100000 nested choices", s);
    free(s);
    s = nest("x ::= \"y\"\nroot ::= \"a\" (= ", "(", "\"b\"", ")", ")", 100000);
    check_rejected("100000 nested parentheses in a lookahead", s);
    free(s);
    s = nest("root ::= Regex(", "(", "\"a\"", ")", ")", 100000);
    check_rejected("100000 nested macro arguments", s);
    free(s);
    /* Quantifiers stack without parentheses. */
    s = nest("root ::= \"a\"", "", "", "?", "", 100000);
    check_clean("100000 stacked ? quantifiers", s, 30.0);
    free(s);
    s = nest("root ::= \"a\"", "", "", "{1,2}", "", 100000);
    check_clean("100000 stacked {1,2} quantifiers", s, 30.0);
    free(s);
    s = nest("root ::= \"a\"", "", "", "*", "", 100000);
    check_clean("100000 stacked * quantifiers", s, 30.0);
    free(s);
    /* Nesting right at the documented depth still works. */
    s = nest("root ::= ", "(", "\"a\"", ")", "", 100);
    check_clean("100 nested parentheses", s, 20.0);
    free(s);
}

/* Compile `text` in a child process with a deadline: it must finish (OK or a
 * clean LIMIT/GRAMMAR error) within `seconds`. */
static void compile_child(void *text) { check_clean("(child)", text, 1e9); }
static void check_compiles_within(const char *what, const char *text, double seconds) {
    double took = 0;
    int r = run_with_deadline(compile_child, (void *)text, seconds, &took);
    CHECKF(r == 0, "%s: %s after %.1f s (deadline %.0f s)", what,
           r == 2 ? "still compiling, killed" : r == 1 ? "failed checks" : "crashed", took, seconds);
}

TEST(wide_grammars) {
    /* A long choice and a chain of rules. */
    size_t n = 20000;
    char *s = malloc(n * 8 + 64), *p = s;
    p += sprintf(p, "root ::= ");
    for (size_t i = 0; i < n; i++) p += sprintf(p, "%s\"%c%c\"", i ? "|" : "", 'a' + (int)(i % 26), 'a' + (int)(i / 26 % 26));
    CHECK_EQ(check_clean("20000-way choice", s, 30.0), XG2_OK);
    free(s);
    s = malloc(2000 * 40 + 64);
    p = s;
    p += sprintf(p, "root ::= r0\n");
    for (int i = 0; i < 2000; i++) p += sprintf(p, "r%d ::= \"x\" r%d | \"y\"\n", i, i + 1);
    p += sprintf(p, "r2000 ::= \"z\"\n");
    CHECK_EQ(check_clean("2000-rule chain", s, 30.0), XG2_OK);
    free(s);
}

/* Chain-shaped automata must not take quadratic time: a 16000-byte string
 * literal, or nested small repetitions that unroll to 32768 states. */
TEST(long_literals_compile_fast) {
    size_t n = 16000;
    char *s = malloc(n + 32);
    strcpy(s, "root ::= \"");
    for (size_t i = 0; i < n; i++) s[10 + i] = (char)('a' + i % 26);
    strcpy(s + 10 + n, "\"");
    check_compiles_within("a 16000-byte string literal", s, 3.0);
    free(s);
    check_compiles_within("((\"a\"{32}){32}){32}", "root ::= ((\"a\"{32}){32}){32}", 3.0);
}

TEST(huge_repetition_bounds) {
    check_rejected("{16777217}", "root ::= \"a\"{16777217}");
    check_rejected("{99999999999999999999}", "root ::= \"a\"{99999999999999999999}");
    check_rejected("{0,99999999999999999999}", "root ::= \"a\"{0,99999999999999999999}");
    check_rejected("{4294967297}", "root ::= \"a\"{4294967297}");
    CHECK_EQ(check_clean("{16777216}", "root ::= \"a\"{16777216}", 20.0), XG2_OK);
    CHECK_EQ(check_clean("{0,16777216}", "root ::= \"a\"{0,16777216}", 20.0), XG2_OK);
    CHECK_EQ(check_clean("{16777216,}", "root ::= [ab]{16777216,}", 20.0), XG2_OK);
    CHECK_EQ(check_clean("nested counted", "root ::= (\"a\"{1000}){1000}", 20.0), XG2_OK);
    CHECK_EQ(check_clean("{0}", "root ::= \"a\"{0} \"b\"", 20.0), XG2_OK);
    /* Bounds of at most 8 (XG2_UNROLL_LIMIT) are unrolled; nesting them
     * multiplies the automaton past the state limit, which must be a clean,
     * quick error. */
    check_rejected("8^8 unrolled", "root ::= ((((((((\"a\"{8}){8}){8}){8}){8}){8}){8}){8}");
}

/* A counted repetition is exact: 99 too few, 100 complete, 101 too many. */
TEST(counted_repetition_matches_exactly) {
    const char *toks[] = {"a", "b"};
    xg2_vocab *v = make_vocab(XG2_VOCAB_RAW, toks, 2, 2, NULL, 0, NULL, 0);
    static const struct { const char *g; int min, max; } cases[] = {
        {"root ::= [a-z]{100}", 100, 100},
        {"root ::= \"a\"{40,60}", 40, 60},
        {"root ::= (\"a\" | \"b\"){35,}", 35, -1},
        {"root ::= (\"a\"{1000}){3}", 3000, 3000},
        {"root ::= x{50}\nx ::= \"a\" | \"aa\"", 50, 100},
        {"root ::= (\"a\"?){3,40}", 0, 40},
    };
    char buf[4096];
    memset(buf, 'a', sizeof buf);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        gcm x = MAKE_GCM(cases[i].g, v);
        if (!x.m) { free_gcm(&x); continue; }
        /* Lengths around both bounds, plus a few others. */
        int mn = cases[i].min, mx = cases[i].max < 0 ? cases[i].min + 20 : cases[i].max;
        int ns[] = {0, 1, 2, mn / 2, mn - 2, mn - 1, mn, mn + 1, mn + 2, mx - 1, mx, mx + 1, mx + 2};
        for (size_t j = 0; j < sizeof ns / sizeof *ns; j++) {
            int n = ns[j];
            if (n < 0 || n > (int)sizeof buf) continue;
            int acc = -1;
            CHECK_RC(xg2_matcher_reset(x.m), XG2_OK);
            CHECK_RC(xg2_matcher_accept_bytes(x.m, buf, (size_t)n, &acc), XG2_OK);
            int in = n >= cases[i].min && (cases[i].max < 0 || n <= cases[i].max);
            int prefix = cases[i].max < 0 || n <= cases[i].max;
            CHECKF(acc == prefix, "%s: accept_bytes(a x %d) = %d, expected %d", cases[i].g, n, acc, prefix);
            if (acc) CHECKF(xg2_matcher_is_completed(x.m) == in, "%s: is_completed after a x %d = %d, expected %d",
                            cases[i].g, n, xg2_matcher_is_completed(x.m), in);
        }
        /* And one byte at a time up to the upper bound and past it. */
        CHECK_RC(xg2_matcher_reset(x.m), XG2_OK);
        for (int n = 1; n <= mx + 1 && n <= 200; n++) {
            int acc = -1;
            CHECK_RC(xg2_matcher_accept_bytes(x.m, "a", 1, &acc), XG2_OK);
            int prefix = cases[i].max < 0 || n <= cases[i].max;
            CHECKF(acc == prefix, "%s: byte %d accepted = %d, expected %d", cases[i].g, n, acc, prefix);
            if (!acc) break;
            int in = n >= cases[i].min && (cases[i].max < 0 || n <= cases[i].max);
            CHECKF(xg2_matcher_is_completed(x.m) == in, "%s: is_completed after %d bytes = %d", cases[i].g, n,
                   xg2_matcher_is_completed(x.m));
        }
        free_gcm(&x);
    }
    xg2_vocab_free(v);
}

/* ---- lookahead ---- */

TEST(lookahead_syntax) {
    static const char *const ok[] = {
        "root ::= x \"b\"\nx ::= \"a\" (= \"b\")",
        "root ::= x [bc]\nx ::= \"a\" (= \"b\" | \"c\")",
        "root ::= x \"bc\"\nx ::= \"a\" (=\"b\" \"c\")",
        "root ::= x y\nx ::= \"a\" (= y)\ny ::= [0-9]+",
        "root ::= x \"b\"\nx ::= \"a\" (= \"b\"?)",   /* matches "": asserts nothing */
        "root ::= x \"b\"\nx ::= \"a\"\n  (= \"b\")\n", /* across lines */
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        xg2_grammar *g = MAKE_GRAMMAR(ok[i]);
        xg2_grammar_free(g);
    }
    static const bad_case bad[] = {
        /* A lookahead must be regular. */
        {"root ::= x \"(\"\nx ::= \"a\" (= p)\np ::= \"(\" p \")\" | \"\"", XG2_ERR_GRAMMAR, 0, NULL},
        /* A lookahead that matches nothing. */
        {"root ::= x \"b\"\nx ::= \"a\" (= [^\\x00-\\U0010ffff])", XG2_ERR_GRAMMAR, 0, NULL},
        {"root ::= x \"b\"\nx ::= \"a\" (= y)\ny ::= \"c\" y", XG2_ERR_GRAMMAR, 0, NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) check_bad(&bad[i], strlen(bad[i].text), "root");
}

/* ---- grammars that match nothing ---- */

TEST(grammars_matching_nothing) {
    static const bad_case bad[] = {
        {"root ::= []", XG2_ERR_GRAMMAR, 0, NULL},
        {"root ::= \"a\" root", XG2_ERR_GRAMMAR, 0, NULL},
        {"root ::= x\nx ::= x \"a\"", XG2_ERR_GRAMMAR, 0, NULL},
        {"root ::= \"a\" [] | [] \"b\"", XG2_ERR_GRAMMAR, 0, NULL},
        {"root ::= [^\\x00-\\U0010ffff]", XG2_ERR_GRAMMAR, 0, NULL},
        {"root ::= \"a\" [^\\x00-\\U0010ffff]", XG2_ERR_GRAMMAR, 0, NULL},
        {"root ::= [\\ud800-\\udfff]", XG2_ERR_GRAMMAR, 0, NULL},
        {"root ::= x\nx ::= [^\\x00-\\U0010ffff] x | [^\\x00-\\U0010ffff]", XG2_ERR_GRAMMAR, 0, NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) check_bad(&bad[i], strlen(bad[i].text), "root");
    /* Dead alternatives are dropped; the rest still works. */
    static const char *const ok[] = {
        "root ::= \"a\" | []",
        "root ::= \"a\" | x\nx ::= \"b\" x",
        "root ::= \"a\" []*",
        "root ::= \"a\" | [^\\x00-\\U0010ffff]",
    };
    const char *toks[] = {"a", "b"};
    xg2_vocab *v = make_vocab(XG2_VOCAB_RAW, toks, 2, 2, NULL, 0, NULL, 0);
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        gcm x = MAKE_GCM(ok[i], v);
        if (x.m) {
            int acc = -1;
            CHECK_RC(xg2_matcher_accept_bytes(x.m, "a", 1, &acc), XG2_OK);
            CHECKF(acc == 1 && xg2_matcher_is_completed(x.m), "%s: \"a\" not matched", ok[i]);
        }
        free_gcm(&x);
    }
    xg2_vocab_free(v);
}

/* Macros: Regex(...) compiles to the grammar; a bad regex and unsupported
 * macros are clean GRAMMAR errors. */
TEST(macros) {
    const char *toks[] = {"a", "b", "c", "!"};
    xg2_vocab *v = make_vocab(XG2_VOCAB_RAW, toks, 4, 4, NULL, 0, NULL, 0);
    gcm x = MAKE_GCM("root ::= Regex(\"(a|b)*c\") \"!\"", v);
    if (x.m) {
        int acc = -1;
        CHECK_RC(xg2_matcher_accept_bytes(x.m, "abac!", 5, &acc), XG2_OK);
        CHECK(acc == 1 && xg2_matcher_is_completed(x.m));
        CHECK_RC(xg2_matcher_reset(x.m), XG2_OK);
        CHECK_RC(xg2_matcher_accept_bytes(x.m, "abd", 3, &acc), XG2_OK);
        CHECK_EQ(acc, 0);
    }
    free_gcm(&x);
    xg2_vocab_free(v);
    static const bad_case bad[] = {
        {"root ::= Regex(\"[\")", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= Regex(\"a{2,1}\")", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= Regex(", XG2_ERR_GRAMMAR, 1, NULL},
        {"root ::= Regex(x)\nx ::= \"a\"", XG2_ERR_GRAMMAR, 1, NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) check_bad(&bad[i], strlen(bad[i].text), "root");
    /* Not (yet) supported: a GRAMMAR error, or a grammar if support lands. */
    static const char *const maybe[] = {
        "root ::= TagDispatch((\"<a>\", x))\nx ::= \"b\"",
        "root ::= Token(1, 2)",
        "root ::= ExcludeToken(1)",
    };
    for (size_t i = 0; i < sizeof maybe / sizeof *maybe; i++) {
        xg2_grammar *g = NULL;
        int rc = parse(maybe[i], &g);
        CHECKF(rc == XG2_OK || rc == XG2_ERR_GRAMMAR, "%s: %s (%s)", maybe[i], rc_name(rc), xg2_last_error());
        if (rc != XG2_OK) CHECK(xg2_last_error()[0] != 0);
        xg2_grammar_free(g);
    }
}

/* Grammar objects are shared by reference: freeing the grammar and vocab
 * while a compiled grammar and matcher still use them is safe. */
TEST(reference_counting) {
    const char *toks[] = {"a", "b", "ab"};
    xg2_vocab *v = make_vocab(XG2_VOCAB_RAW, toks, 3, 3, NULL, 0, NULL, 0);
    xg2_grammar *g = MAKE_GRAMMAR("root ::= (\"a\" | \"b\")+");
    if (!g) return;
    xg2_compiled *c = NULL;
    CHECK_RC(xg2_compiled_new(g, v, &c), XG2_OK);
    CHECK(xg2_compiled_memory_bytes(c) > 0);
    xg2_grammar_free(g);
    xg2_vocab_free(v);
    xg2_matcher *m = NULL;
    CHECK_RC(xg2_matcher_new(c, NULL, -1, 0, &m), XG2_OK);
    xg2_compiled_free(c);
    int acc = -1;
    CHECK_RC(xg2_matcher_accept_token(m, 2, &acc), XG2_OK);
    CHECK_EQ(acc, 1);
    xg2_matcher_free(m);
    CHECK_RC(xg2_compiled_new(NULL, NULL, &c), XG2_ERR_ARG);
    xg2_compiled_free(NULL);
    CHECK_EQ(xg2_compiled_memory_bytes(NULL), 0);
}


/* ---- linking pieces (grammar_link.c) ---- */

/* A token per byte (byte 0 as "\x01": a NUL-terminated string) and a stop token, 256. */
static xg2_vocab *byte_vocab(void) {
    const char *toks[257];
    static char bytes[256][2];
    for (int i = 0; i < 256; i++) { bytes[i][0] = (char)(i ? i : 1); toks[i] = bytes[i]; }
    toks[256] = "</s>";
    int32_t stop = 256;
    return make_vocab(XG2_VOCAB_RAW, toks, 257, 257, NULL, 0, &stop, 1);
}

/* Accepts the whole of `text`, one single-byte token at a time, and ends there? */
static int accepts(const xg2_grammar *g, const xg2_vocab *v, const char *text) {
    xg2_compiled *c = NULL;
    xg2_matcher *m = NULL;
    int ok = !CHECK_RC(xg2_compiled_new(g, v, &c), XG2_OK) && !CHECK_RC(xg2_matcher_new(c, NULL, -1, 0, &m), XG2_OK);
    for (const char *p = text; ok && *p; p++) {
        int acc = 0;
        ok = !CHECK_RC(xg2_matcher_accept_token(m, (unsigned char)*p, &acc), XG2_OK) && acc;
    }
    int done = ok && xg2_matcher_accept_token(m, 256, &ok) == XG2_OK && ok; /* the stop token */
    xg2_matcher_free(m);
    xg2_compiled_free(c);
    return done;
}

TEST(linked_pieces) {
    xg2_vocab *v = byte_vocab();
    const char *piece_text = "root ::= \"{\" item (\",\" item)* \"}\"\nitem ::= [a-z]+ | \"n\" root";
    const char *text = "root ::= (\"x=\" obj \";\")+ | \"y\" obj? \";\"";
    uint8_t none[32] = {0}, semi[32] = {0}, need[32];
    semi[';' >> 3] |= 1 << (';' & 7);
    xg2_grammar *p0 = NULL, *p1 = NULL, *g = NULL;
    CHECK_RC(xg2_grammar_from_ebnf_piece(piece_text, strlen(piece_text), "root", none, &p0), XG2_OK);
    const char *names[] = {"obj"}, *prefixes[] = {"p_"};
    /* built for another follow set: no grammar, and the set it needs */
    CHECK_RC(xg2_grammar_link(text, strlen(text), "root", 1, names, &p0, prefixes, need, &g), XG2_OK);
    CHECK(g == NULL);
    CHECK(!memcmp(need, semi, 32));
    CHECK_RC(xg2_grammar_from_ebnf_piece(piece_text, strlen(piece_text), "root", need, &p1), XG2_OK);
    uint8_t have[32];
    xg2_grammar_root_follow(p1, have);
    CHECK(!memcmp(have, semi, 32));
    CHECK_RC(xg2_grammar_link(text, strlen(text), "root", 1, names, &p1, prefixes, need, &g), XG2_OK);
    CHECK(g != NULL);
    if (g) {
        CHECK(accepts(g, v, "x={ab,n{d}};x={e};"));
        CHECK(accepts(g, v, "y;"));
        CHECK(accepts(g, v, "y{q};"));
        CHECK(!accepts(g, v, "x=;"));
        CHECK(!accepts(g, v, "x={ab,};"));
        /* printed whole, with the piece's rules in its namespace; parses back to the same language */
        char *printed = print_grammar(g);
        xg2_grammar *again = NULL;
        if (printed) {
            CHECKF(strstr(printed, "p_item") != NULL, "%s", printed);
            CHECK_RC(xg2_grammar_from_ebnf(printed, strlen(printed), "root", &again), XG2_OK);
            if (again) {
                CHECK(accepts(again, v, "x={ab,n{d}};x={e};"));
                CHECK(!accepts(again, v, "x={ab,};"));
            }
            xg2_grammar_free(again);
            free(printed);
        }
        CHECK(xg2_grammar_memory_bytes(g) > 0);
        xg2_grammar_free(g);
    }
    /* the text may not define a piece's rule; bad arguments */
    const char *twice = "root ::= obj\nobj ::= \"a\"";
    g = NULL;
    CHECK_RC(xg2_grammar_link(twice, strlen(twice), "root", 1, names, &p1, prefixes, need, &g), XG2_ERR_GRAMMAR);
    CHECK(g == NULL);
    xg2_grammar *null_piece = NULL;
    CHECK_RC(xg2_grammar_link(text, strlen(text), "root", 1, names, &null_piece, NULL, need, &g), XG2_ERR_ARG);
    CHECK_RC(xg2_grammar_link(text, strlen(text), "root", 1, NULL, &p1, NULL, need, &g), XG2_ERR_ARG);
    const char *dup_names[] = {"obj", "obj"};
    xg2_grammar *two[] = {p1, p1};
    CHECK_RC(xg2_grammar_link(text, strlen(text), "root", 2, dup_names, two, NULL, need, &g), XG2_ERR_ARG);
    CHECK_RC(xg2_grammar_from_ebnf_piece(piece_text, strlen(piece_text), "root", NULL, &p0), XG2_ERR_ARG);
    /* a linked grammar is no piece (one level of linking) */
    xg2_grammar *linked = NULL;
    CHECK_RC(xg2_grammar_link(text, strlen(text), "root", 1, names, &p1, prefixes, need, &linked), XG2_OK);
    if (linked) {
        const char *outer = "root ::= \"<\" inner \">\"";
        const char *inner_name[] = {"inner"};
        CHECK_RC(xg2_grammar_link(outer, strlen(outer), "root", 1, inner_name, &linked, NULL, need, &g), XG2_ERR_ARG);
        xg2_grammar_free(linked);
    }
    xg2_grammar_free(p0);
    xg2_grammar_free(p1);
    xg2_vocab_free(v);
}


/* A choice of literal-then-rule paths is built straight as a trie (trie_dfa.c), from
 * its alternatives sorted (a repeated one is the same path); one where a path runs on
 * past another's end takes the generic route.  P and Q recurse
 * and are no choices, so they stay rules (references, not expanded in place). */
TEST(tag_choice_trie) {
    xg2_vocab *v = byte_vocab();
    const char *trie = "root ::= ((\"ab>\" P) | (\"ac>\" Q \"!\" P) | (\"b>\" P) | (\"abc>\" Q) | (\"b>\" P)) \"</e>\"\n"
                       "P ::= \"p\" (\"(\" P \")\")?\nQ ::= \"q\" (\"[\" Q \"]\")?";
    const char *prefix = "root ::= ((\"a\" P) | (\"a\" P \"z\" Q)) \"</e>\"\n"
                         "P ::= \"p\" (\"(\" P \")\")?\nQ ::= \"q\" (\"[\" Q \"]\")?";
    xg2_grammar *g = MAKE_GRAMMAR(trie);
    if (g) {
        CHECK(accepts(g, v, "ab>p</e>"));
        CHECK(accepts(g, v, "ab>p(p(p))</e>"));
        CHECK(accepts(g, v, "ac>q[q]!p</e>"));
        CHECK(accepts(g, v, "b>p</e>"));
        CHECK(accepts(g, v, "abc>q</e>"));
        CHECK(!accepts(g, v, "ab>q</e>"));
        CHECK(!accepts(g, v, "ac>q</e>"));
        CHECK(!accepts(g, v, "abc>p</e>"));
        CHECK(!accepts(g, v, "a>p</e>"));
        CHECK(!accepts(g, v, "ab>p</e"));
        xg2_grammar_free(g);
    }
    g = MAKE_GRAMMAR(prefix);
    if (g) {
        CHECK(accepts(g, v, "ap</e>"));
        CHECK(accepts(g, v, "ap(p)zq[q]</e>"));
        CHECK(!accepts(g, v, "apz</e>"));
        CHECK(!accepts(g, v, "aq</e>"));
        xg2_grammar_free(g);
    }
    xg2_vocab_free(v);
}

int main(int argc, char **argv) {
    return RUN_TESTS(argc, argv, T_(print_round_trip), T_(print_caps), T_(syntax_errors_name_line_and_column),
                     T_(undefined_and_duplicate_rules), T_(deep_nesting_is_an_error_not_a_crash), T_(wide_grammars),
                     T_(long_literals_compile_fast),
                     T_(huge_repetition_bounds), T_(counted_repetition_matches_exactly), T_(lookahead_syntax),
                     T_(grammars_matching_nothing), T_(macros), T_(reference_counting),
                     T_(linked_pieces), T_(tag_choice_trie));
}
