/*
 * test_matcher.c -- the matcher against independent, hand-written recognizers.
 *
 * Every grammar below comes with an oracle: a few lines of C that classify a
 * byte string as DEAD (no string of the language starts with it), LIVE (a
 * proper prefix of some string of the language) or MEMBER (in the language).
 * The oracles know nothing of the library.  For every string up to length 5
 * over a small alphabet the tests compare accept_bytes / is_completed with the
 * oracle, every mask bit with the oracle applied to (string + token bytes),
 * and jump-forward with the bytes the oracle says are forced.
 *
 * Then: rollback restores masks byte-identically, fork independence, stop
 * tokens, terminate_without_stop, argument checks, and threads.
 */
#include <pthread.h>

#include "check.h"

enum { DEAD = 0, LIVE = 1, MEMBER = 2 };
typedef int (*oracle_fn)(const unsigned char *s, size_t n);

/* ---- UTF-8 (for the oracles of grammars with character classes) ---- */

/* The character at s[0..n): its length (and code point) if complete and valid,
 * 0 if s is a valid but incomplete start of a character, -1 if invalid. */
static int utf8_char(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    int len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) { len = 3; lo = 0xA0; }
    else if (c == 0xED) { len = 3; hi = 0x9F; }
    else if (c >= 0xE1 && c <= 0xEF) len = 3;
    else if (c == 0xF0) { len = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) { len = 4; hi = 0x8F; }
    else return -1;
    uint32_t v = c & (0x7F >> len);
    for (int k = 1; k < len; k++) {
        if ((size_t)k >= n) return 0;
        unsigned d = s[k];
        if (k == 1 ? (d < lo || d > hi) : (d < 0x80 || d > 0xBF)) return -1;
        v = (v << 6) | (d & 0x3F);
    }
    *cp = v;
    return len;
}

/* ---- the grammars and their oracles ---- */

/* "a"* "b" */
static int o_astar_b(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n && s[i] == 'a') i++;
    if (i == n) return LIVE;
    return s[i] == 'b' && i + 1 == n ? MEMBER : DEAD;
}

/* ("ab" | "c")+ */
static int o_ab_or_c(const unsigned char *s, size_t n) {
    size_t i = 0, pieces = 0;
    while (i < n) {
        if (s[i] == 'c') { i++; pieces++; }
        else if (s[i] == 'a') {
            if (i + 1 == n) return LIVE;
            if (s[i + 1] != 'b') return DEAD;
            i += 2;
            pieces++;
        } else return DEAD;
    }
    return pieces ? MEMBER : LIVE;
}

/* "(" root ")" | ""  -- (^k )^k */
static int o_nested(const unsigned char *s, size_t n) {
    size_t i = 0, open = 0, close = 0;
    while (i < n && s[i] == '(') { i++; open++; }
    while (i < n && s[i] == ')') { i++; close++; }
    if (i < n || close > open) return DEAD;
    return close == open ? MEMBER : LIVE;
}

/* ("(" root ")")*  -- balanced parentheses */
static int o_dyck(const unsigned char *s, size_t n) {
    long depth = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '(') depth++;
        else if (s[i] == ')') { if (--depth < 0) return DEAD; }
        else return DEAD;
    }
    return depth == 0 ? MEMBER : LIVE;
}

/* x [bc] ; x ::= "a"+ (= "b")  -- a+ b */
static int o_la_ab(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n && s[i] == 'a') i++;
    if (i == n) return LIVE;
    return i >= 1 && s[i] == 'b' && i + 1 == n ? MEMBER : DEAD;
}

/* x "bc" | x "bd" ; x ::= "a"* (= "bc")  -- a* bc */
static int o_la_bc(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n && s[i] == 'a') i++;
    size_t r = n - i;
    if (r > 2 || memcmp(s + i, "bc", r) != 0) return DEAD;
    return r == 2 ? MEMBER : LIVE;
}

/* ("a" | "bb"){2,40} */
static int o_counted_abb(const unsigned char *s, size_t n) {
    size_t i = 0, pieces = 0;
    while (i < n) {
        if (s[i] == 'a') { i++; pieces++; continue; }
        if (s[i] != 'b') return DEAD;
        size_t r = 0;
        while (i < n && s[i] == 'b') { i++; r++; }
        pieces += r / 2;
        if (r % 2) {
            if (i == n) return pieces + 1 <= 40 ? LIVE : DEAD;
            return DEAD;
        }
    }
    if (pieces > 40) return DEAD;
    return pieces >= 2 ? MEMBER : LIVE;
}

/* a b ; a ::= "x"? ; b ::= "y"?  -- x? y? */
static int o_opt_xy(const unsigned char *s, size_t n) {
    size_t i = 0;
    if (i < n && s[i] == 'x') i++;
    if (i < n && s[i] == 'y') i++;
    return i == n ? MEMBER : DEAD;
}

/* root root | "a" | ""  -- a* */
static int o_astar(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != 'a') return DEAD;
    return MEMBER;
}

/* root "a" | "b"  -- b a* */
static int o_left_rec(const unsigned char *s, size_t n) {
    if (n == 0) return LIVE;
    if (s[0] != 'b') return DEAD;
    for (size_t i = 1; i < n; i++)
        if (s[i] != 'a') return DEAD;
    return MEMBER;
}

/* "a" s ; s ::= "b" root | "c"  -- a (ba)* c */
static int o_mutual(const unsigned char *s, size_t n) {
    int st = 0; /* 0: want a, 1: want b or c, 2: want a (after b), 3: done */
    for (size_t i = 0; i < n; i++) {
        unsigned c = s[i];
        if ((st == 0 || st == 2) && c == 'a') st = 1;
        else if (st == 1 && c == 'b') st = 2;
        else if (st == 1 && c == 'c') st = 3;
        else return DEAD;
    }
    return st == 3 ? MEMBER : LIVE;
}

/* [^a]+ (code points, as UTF-8) */
static int o_not_a(const unsigned char *s, size_t n) {
    size_t i = 0, count = 0;
    while (i < n) {
        uint32_t cp;
        int l = utf8_char(s + i, n - i, &cp);
        if (l < 0) return DEAD;
        if (l == 0) return LIVE;
        if (cp == 'a') return DEAD;
        i += (size_t)l;
        count++;
    }
    return count ? MEMBER : LIVE;
}

/* "é"+ | "x" */
static int o_eacute(const unsigned char *s, size_t n) {
    if (n == 1 && s[0] == 'x') return MEMBER;
    for (size_t i = 0; i < n; i++)
        if (s[i] != (i % 2 ? 0xA9 : 0xC3)) return DEAD;
    return n && n % 2 == 0 ? MEMBER : LIVE;
}

/* "[" (v ("," v)*)? "]" ; v ::= [0-9]+ | root  -- nested arrays of numbers */
static int o_arrays(const unsigned char *s, size_t n) {
    enum { START, OPEN, NUM, COMMA, AFTER, DONE } st = START;
    long depth = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned c = s[i];
        int digit = c >= '0' && c <= '9';
        switch (st) {
        case START:
            if (c != '[') return DEAD;
            depth = 1;
            st = OPEN;
            break;
        case OPEN:
        case COMMA:
            if (digit) st = NUM;
            else if (c == '[') { depth++; st = OPEN; }
            else if (c == ']' && st == OPEN) { depth--; st = depth ? AFTER : DONE; }
            else return DEAD;
            break;
        case NUM:
        case AFTER:
            if (digit && st == NUM) st = NUM;
            else if (c == ',') st = COMMA;
            else if (c == ']') { depth--; st = depth ? AFTER : DONE; }
            else return DEAD;
            break;
        case DONE:
            return DEAD;
        }
    }
    return st == DONE ? MEMBER : LIVE;
}

/* item+ ; item ::= "a" | b ; b ::= "b" (= "a")  -- every b is followed by an a */
static int o_la_item(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] != 'a' && s[i] != 'b') return DEAD;
        if (s[i] == 'b' && i + 1 < n && s[i + 1] != 'a') return DEAD;
    }
    return n && s[n - 1] == 'a' ? MEMBER : LIVE;
}

/* [a-c]{2} | "abc" */
static int o_two_or_abc(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] < 'a' || s[i] > 'c') return DEAD;
    if (n < 2) return LIVE;
    if (n == 2) return MEMBER;
    return n == 3 && !memcmp(s, "abc", 3) ? MEMBER : DEAD;
}

/* "if" | [a-z]+ */
static int o_keyword(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] < 'a' || s[i] > 'z') return DEAD;
    return n ? MEMBER : LIVE;
}

/* "\"" ([^"\\] | "\\" ["\\n])* "\""  -- a JSON-like string */
static int o_string(const unsigned char *s, size_t n) {
    int st = 0; /* 0: want quote, 1: inside, 2: after backslash, 3: closed */
    size_t i = 0;
    while (i < n) {
        if (st == 0) { if (s[i++] != '"') return DEAD; st = 1; continue; }
        if (st == 3) return DEAD;
        if (st == 2) {
            unsigned c = s[i++];
            if (c != '"' && c != '\\' && c != 'n') return DEAD;
            st = 1;
            continue;
        }
        uint32_t cp;
        int l = utf8_char(s + i, n - i, &cp);
        if (l < 0) return DEAD;
        if (l == 0) return LIVE;
        i += (size_t)l;
        if (cp == '"') st = 3;
        else if (cp == '\\') st = 2;
    }
    return st == 3 ? MEMBER : LIVE;
}

/* "a"{40,45} "b"  -- a counted repetition */
static int o_a40_45_b(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n && s[i] == 'a') i++;
    if (i == n) return i <= 45 ? LIVE : DEAD;
    return s[i] == 'b' && i + 1 == n && i >= 40 && i <= 45 ? MEMBER : DEAD;
}

/* ([a-c] [a-c]?){33,} "."  -- unbounded counted repetition */
static int o_pairs_dot(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n && s[i] >= 'a' && s[i] <= 'c') i++;
    if (i == n) return LIVE;
    /* i letters split into 33+ pieces of 1 or 2 letters: possible iff i >= 33. */
    return s[i] == '.' && i + 1 == n && i >= 33 ? MEMBER : DEAD;
}

/* x "y" ; x ::= [a-c]* (= [a-c]* "y")  -- a lookahead over a loop */
static int o_la_loop(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n && s[i] >= 'a' && s[i] <= 'c') i++;
    if (i == n) return LIVE;
    return s[i] == 'y' && i + 1 == n ? MEMBER : DEAD;
}

/* A prefix of one of the NULL-ended words: LIVE, or MEMBER if one of them. */
static int o_words(const unsigned char *s, size_t n, const char *const *words) {
    int r = DEAD;
    for (; *words; words++) {
        size_t len = strlen(*words);
        if (n <= len && !memcmp(s, *words, n)) r = n == len ? MEMBER : (r == MEMBER ? MEMBER : LIVE);
    }
    return r;
}
/* Sparse choices under a node of many children (the shared vocabulary's "a"):
 * the walk skips refused siblings through the trie's sibling tables, nested in
 * a called rule (recursive, so not inlined; it may end before a byte FOLLOW
 * allows: "a" then "!" or ")"), and in a plain automaton. */
static int o_names(const unsigned char *s, size_t n) { /* "x" "("^k ("a" | "ab" | "ay" | "zz") ")"^k "!" */
    static const char *const names[] = {"a", "ab", "ay", "zz", NULL};
    if (n == 0) return LIVE;
    if (s[0] != 'x') return DEAD;
    size_t i = 1, open = 0;
    while (i < n && s[i] == '(') i++, open++;
    int r = DEAD;
    for (const char *const *w = names; *w; w++) {
        size_t len = strlen(*w), j = 0, close = 0;
        while (j < len && i + j < n && s[i + j] == (unsigned char)(*w)[j]) j++;
        if (i + j == n) { r = r == DEAD ? LIVE : r; continue; } /* a prefix of the name (or all of it) */
        if (j < len) continue;
        size_t k = i + len;
        while (k < n && close < open && s[k] == ')') k++, close++;
        if (k == n) { r = r == DEAD ? LIVE : r; continue; }
        if (close == open && s[k] == '!' && k + 1 == n) r = MEMBER;
    }
    return r;
}
static const char *const w_plain[] = {"ab!", "ay!", "a.!", "zz!", NULL};
static int o_plain(const unsigned char *s, size_t n) { return o_words(s, n, w_plain); }

typedef struct {
    const char *name;
    const char *ebnf;
    oracle_fn oracle;
    const char *alphabet; /* strings up to `maxlen` over these bytes are enumerated */
    int maxlen;
    const char *paths[3]; /* longer strings whose every prefix is checked too */
} case_t;

#define A40 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static const case_t cases[] = {
    {"astar_b", "root ::= \"a\"* \"b\"", o_astar_b, "abc", 5, {0}},
    {"ab_or_c", "root ::= (\"ab\" | \"c\")+", o_ab_or_c, "abc", 5, {0}},
    {"nested", "root ::= \"(\" root \")\" | \"\"", o_nested, "()a", 6, {0}},
    {"dyck", "root ::= (\"(\" root \")\")*", o_dyck, "()a", 6, {0}},
    {"la_ab", "root ::= x [bc]\nx ::= \"a\"+ (= \"b\")", o_la_ab, "abc", 5, {0}},
    {"la_bc", "root ::= x \"bc\" | x \"bd\"\nx ::= \"a\"* (= \"bc\")", o_la_bc, "abcd", 5, {0}},
    {"counted_abb", "root ::= (\"a\" | \"bb\"){2,40}", o_counted_abb, "abc", 5,
     {A40 "bb", "bb" A40, A40 "a"}},
    {"opt_xy", "root ::= a b\na ::= \"x\"?\nb ::= \"y\"?", o_opt_xy, "xyz", 4, {0}},
    {"ambiguous", "root ::= root root | \"a\" | \"\"", o_astar, "ab", 5, {0}},
    {"left_rec", "root ::= root \"a\" | \"b\"", o_left_rec, "ab", 5, {0}},
    {"mutual", "root ::= \"a\" s\ns ::= \"b\" root | \"c\"", o_mutual, "abc", 6, {0}},
    {"not_a", "root ::= [^a]+", o_not_a, "ab\xc3\xa9", 4, {0}},
    {"eacute", "root ::= \"\\u00e9\"+ | \"x\"", o_eacute, "\xc3\xa9x", 5, {0}},
    {"arrays", "root ::= \"[\" (v (\",\" v)*)? \"]\"\nv ::= [0-9]+ | root", o_arrays, "[],1", 6, {"[[[[1,[]],11],[1]],1]"}},
    {"la_item", "root ::= item+\nitem ::= \"a\" | b\nb ::= \"b\" (= \"a\")", o_la_item, "abc", 5, {0}},
    {"two_or_abc", "root ::= [a-c]{2} | \"abc\"", o_two_or_abc, "abcd", 4, {0}},
    {"keyword", "root ::= \"if\" | [a-z]+", o_keyword, "fix(", 4, {0}},
    {"string", "root ::= \"\\\"\" ([^\"\\\\] | \"\\\\\" [\"\\\\n])* \"\\\"\"", o_string, "\"\\an", 5,
     {"\"hello world \\\"quoted\\\" \xc3\xa9\xe4\xbd\xa0 \\n and a long tail of text to cross 32 chars\""}},
    {"a40_45_b", "root ::= \"a\"{40,45} \"b\"", o_a40_45_b, "ab", 4, {A40 "aaaaab", A40 "aaaaaaa", A40 "b"}},
    {"pairs_dot", "root ::= ([a-c] [a-c]?){33,} \".\"", o_pairs_dot, "ab.", 4,
     {"abcabcabcabcabcabcabcabcabcabcabc.", "abcabcabcabcabcabcabcabcabcabcabcabcabc.", "abcabcabcabcabcabcabcabcabcabcab."}},
    {"la_loop", "root ::= x \"y\"\nx ::= [a-c]* (= [a-c]* \"y\")", o_la_loop, "acy", 5, {0}},
    {"sparse_names", "root ::= \"x\" n \"!\"\nn ::= \"a\" | \"ab\" | \"ay\" | \"zz\" | \"(\" n \")\"", o_names, "x(abyz)!", 5,
     {"x((ay))!", "x(((a)))!"}},
    {"sparse_plain", "root ::= (\"ab\" | \"ay\" | \"a.\" | \"zz\") \"!\"", o_plain, "abyz.!", 4, {0}},
};
#define N_CASES (sizeof cases / sizeof *cases)

static const case_t *find_case(const char *name) {
    for (size_t i = 0; i < N_CASES; i++)
        if (!strcmp(cases[i].name, name)) return &cases[i];
    fprintf(stderr, "no case %s\n", name);
    exit(3);
}

/* ---- the shared vocabulary ---- */

static const char *const vocab_toks[] = {
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t", "u",
    "v", "w", "x", "y", "z",
    "(", ")", "ab", "ba", "bb", "aaa", "abc", "((", "()", "))", "(a", "a)", "\xc3\xa9", "\xc3", "\xa9", "cab",
    "abab", "</s>", "<s>", "", "bc", "aa", "[", "]", ",", "1", "11", "[1", "1,", "],", "[]", "]]", "\"", "\\",
    "\\n", "\"a", "a\"", "hello world", " ", "\n", "a b", A40, "aaaaaaaaaa", "\"\"", "\xc3\xa9\"",
    "if", "ifx", "\xc3\xa9\xc3", "\xe4\xbd\xa0", "\xe4\xbd", "\xf0\x9f\x98\x80", "\xed\xa0\x80", "\xc0\x80", "\xff",
    ".", "a.", "ab.", "y", "cy", "ay", "bd", "xy", "\\\"", "abcabcabcabcabcabc",
    "ac", "az", "a!", "ay!", "xa", "xa!", /* ("a" has ten children: a sibling table) */
};
#define N_TOKS ((int32_t)(sizeof vocab_toks / sizeof *vocab_toks))
#define VOCAB_SIZE (N_TOKS + 21)

static xg2_vocab *the_vocab;
static int32_t stop_id, special_id;

static xg2_vocab *vocab(void) {
    if (!the_vocab) {
        for (int32_t i = 0; i < N_TOKS; i++) {
            if (!strcmp(vocab_toks[i], "</s>")) stop_id = i;
            if (!strcmp(vocab_toks[i], "<s>")) special_id = i;
        }
        the_vocab = make_vocab(XG2_VOCAB_RAW, vocab_toks, N_TOKS, VOCAB_SIZE, &special_id, 1, &stop_id, 1);
    }
    return the_vocab;
}

static const char *token_text(int32_t t, size_t *len, int *flags) {
    const char *d = "";
    *len = 0;
    *flags = 0;
    xg2_vocab_token(vocab(), t, &d, len, flags);
    return d;
}

#define NW ((VOCAB_SIZE + 31) / 32)

/* ---- per-state checks ---- */

enum { CK_MASK = 1, CK_ROLLBACK = 2, CK_JF_SOUND = 4, CK_JF_EXACT = 8 };

static int fill(xg2_matcher *m, int32_t row[NW]) {
    int need = -1;
    return CHECK_RC(xg2_matcher_fill_mask(m, row, NW, &need), XG2_OK);
}

/* The mask must equal the oracle for every token id. */
static void check_mask(const case_t *k, xg2_matcher *m, const unsigned char *s, size_t n) {
    int32_t row[NW];
    if (fill(m, row)) return;
    unsigned char buf[512];
    memcpy(buf, s, n);
    int here = k->oracle(s, n);
    for (int32_t t = 0; t < VOCAB_SIZE; t++) {
        size_t len;
        int fl;
        const char *d = token_text(t, &len, &fl);
        int want;
        if (fl & XG2_TOKEN_STOP) want = here == MEMBER;
        else if (fl & (XG2_TOKEN_SPECIAL | XG2_TOKEN_PADDING)) want = 0;
        else {
            memcpy(buf + n, d, len);
            want = k->oracle(buf, n + len) != DEAD;
        }
        CHECKF(mask_bit(row, t) == want, "grammar %s, after %s: token %d %s: mask bit %d, oracle %d", k->name,
               show((const char *)s, n), t, show(d, len), mask_bit(row, t), want);
    }
}

/* The bytes every continuation of s must start with, per the oracle. */
static size_t forced_bytes(const case_t *k, const unsigned char *s, size_t n, unsigned char *out, size_t cap) {
    unsigned char buf[512];
    memcpy(buf, s, n);
    size_t j = 0;
    while (j < cap && n + j + 1 < sizeof buf && k->oracle(buf, n + j) != MEMBER) {
        int only = -1, count = 0;
        for (int c = 0; c < 256 && count < 2; c++) {
            buf[n + j] = (unsigned char)c;
            if (k->oracle(buf, n + j + 1) != DEAD) { only = c; count++; }
        }
        if (count != 1) break;
        buf[n + j] = (unsigned char)only;
        out[j++] = (unsigned char)only;
    }
    /* Cut a trailing incomplete UTF-8 character (as the API documents). */
    size_t p = j;
    while (p > 0 && (out[p - 1] & 0xC0) == 0x80) p--;
    if (p > 0 && out[p - 1] >= 0xC0) {
        size_t need = out[p - 1] >= 0xF0 ? 4 : out[p - 1] >= 0xE0 ? 3 : 2;
        if (j - (p - 1) < need) j = p - 1;
    }
    return j;
}

static long jf_shorter; /* states where jump-forward returned less than the oracle's forced bytes */

static void check_jump_forward(const case_t *k, xg2_matcher *m, const unsigned char *s, size_t n, int mode) {
    char buf[128];
    size_t len = 9999;
    if (CHECK_RC(xg2_matcher_jump_forward(m, buf, sizeof buf, &len), XG2_OK)) return;
    unsigned char want[64];
    size_t wl = forced_bytes(k, s, n, want, sizeof want);
    if (len > sizeof buf) len = sizeof buf;
    /* Sound: what it returns is forced. */
    CHECKF(len <= wl && memcmp(buf, want, len) == 0,
           "grammar %s, after %s: jump_forward %s is not a prefix of the forced bytes %s", k->name,
           show((const char *)s, n), show(buf, len), show((const char *)want, wl));
    if (len < wl) {
        jf_shorter++;
        if (mode & CK_JF_EXACT)
            CHECKF(len == wl, "grammar %s, after %s: jump_forward %s, but every continuation starts with %s", k->name,
                   show((const char *)s, n), show(buf, len), show((const char *)want, wl));
    }
}

static void check_state(const case_t *k, xg2_matcher *m, const unsigned char *s, size_t n, int mode) {
    int o = k->oracle(s, n);
    CHECKF(xg2_matcher_is_completed(m) == (o == MEMBER), "grammar %s, after %s: is_completed %d, oracle %d", k->name,
           show((const char *)s, n), xg2_matcher_is_completed(m), o);
    CHECK(!xg2_matcher_is_terminated(m));
    if (mode & CK_MASK) check_mask(k, m, s, n);
    if (mode & (CK_JF_SOUND | CK_JF_EXACT)) check_jump_forward(k, m, s, n, mode);
}

/* Depth-first over strings on the alphabet, one byte per step. */
static void dfs(const case_t *k, xg2_matcher *m, unsigned char *s, size_t n, int mode) {
    check_state(k, m, s, n, mode);
    if ((int)n >= k->maxlen) return;
    int32_t before[NW];
    if ((mode & CK_ROLLBACK) && fill(m, before)) return;
    int32_t steps = xg2_matcher_num_steps(m);
    for (const char *a = k->alphabet; *a; a++) {
        s[n] = (unsigned char)*a;
        int want = k->oracle(s, n + 1) != DEAD;
        int acc = -1;
        if (CHECK_RC(xg2_matcher_accept_bytes(m, (const char *)s + n, 1, &acc), XG2_OK)) continue;
        CHECKF(acc == want, "grammar %s: accept_bytes(%s) after %s = %d, oracle %d", k->name, show((const char *)s + n, 1),
               show((const char *)s, n), acc, want);
        if (!acc) {
            CHECK_EQ(xg2_matcher_num_steps(m), steps);
            continue;
        }
        CHECK_EQ(xg2_matcher_num_steps(m), steps + 1);
        dfs(k, m, s, n + 1, mode);
        CHECK_RC(xg2_matcher_rollback(m, 1), XG2_OK);
        CHECK_EQ(xg2_matcher_num_steps(m), steps);
        if (mode & CK_ROLLBACK) {
            int32_t after[NW];
            if (!fill(m, after))
                CHECKF(!memcmp(before, after, sizeof before), "grammar %s: mask after %s differs once %s is rolled back",
                       k->name, show((const char *)s, n), show((const char *)s + n, 1));
            CHECKF(xg2_matcher_is_completed(m) == (k->oracle(s, n) == MEMBER), "grammar %s: is_completed wrong after rollback to %s",
                   k->name, show((const char *)s, n));
        }
    }
}

/* Every prefix of the long paths, reached by accept_bytes in chunks of 1..3 bytes. */
static void paths(const case_t *k, xg2_matcher *m, int mode) {
    for (int p = 0; p < 3 && k->paths[p]; p++) {
        const unsigned char *s = (const unsigned char *)k->paths[p];
        size_t n = strlen(k->paths[p]);
        CHECK_RC(xg2_matcher_reset(m), XG2_OK);
        check_state(k, m, s, 0, mode);
        for (size_t i = 0; i < n;) {
            size_t step = 1 + (i % 3);
            if (i + step > n) step = n - i;
            int want = k->oracle(s, i + step) != DEAD, acc = -1;
            CHECK_RC(xg2_matcher_accept_bytes(m, (const char *)s + i, step, &acc), XG2_OK);
            CHECKF(acc == want, "grammar %s: accept_bytes(%s) after %s = %d, oracle %d", k->name,
                   show((const char *)s + i, step), show((const char *)s, i), acc, want);
            if (!acc) break;
            i += step;
            check_state(k, m, s, i, mode);
        }
    }
}

static void run_cases(int mode) {
    for (size_t i = 0; i < N_CASES; i++) {
        const case_t *k = &cases[i];
        gcm x = MAKE_GCM(k->ebnf, vocab());
        if (x.m) {
            unsigned char s[64];
            dfs(k, x.m, s, 0, mode);
            paths(k, x.m, mode);
        }
        free_gcm(&x);
    }
}

/* The oracles themselves, on a few hand-picked strings. */
TEST(oracles_self_check) {
#define O(f, str, want) CHECK_EQ(f((const unsigned char *)(str), sizeof(str) - 1), want)
    O(o_astar_b, "aab", MEMBER); O(o_astar_b, "aa", LIVE); O(o_astar_b, "aba", DEAD);
    O(o_nested, "(())", MEMBER); O(o_nested, "(()", LIVE); O(o_nested, "())", DEAD); O(o_nested, "()()", DEAD);
    O(o_dyck, "()()", MEMBER); O(o_dyck, "(()", LIVE); O(o_dyck, ")", DEAD);
    O(o_counted_abb, "abb", MEMBER); O(o_counted_abb, "ab", LIVE); O(o_counted_abb, "aba", DEAD);
    O(o_not_a, "b\xc3", LIVE); O(o_not_a, "b\xc3\xa9", MEMBER); O(o_not_a, "\xa9", DEAD); O(o_not_a, "\xed\xa0", DEAD);
    O(o_arrays, "[1,[]]", MEMBER); O(o_arrays, "[1,", LIVE); O(o_arrays, "[,", DEAD); O(o_arrays, "[]]", DEAD);
    O(o_la_item, "aba", MEMBER); O(o_la_item, "ab", LIVE); O(o_la_item, "abb", DEAD);
    O(o_string, "\"a\\\"\"", MEMBER); O(o_string, "\"\xc3", LIVE); O(o_string, "\"\\a", DEAD);
    O(o_pairs_dot, "abcabcabcabcabcabcabcabcabcabcabc.", MEMBER); O(o_pairs_dot, "abcabcabcabcabcabcabcabcabcabcab.", DEAD);
#undef O
    unsigned char out[8];
    CHECK_EQ(forced_bytes(find_case("la_bc"), (const unsigned char *)"ab", 2, out, 8), 1); /* "c" */
}

TEST(accept_and_completion_match_oracle) { run_cases(0); }
TEST(masks_match_oracle) { run_cases(CK_MASK); }
TEST(rollback_restores_masks) { run_cases(CK_ROLLBACK); }
TEST(jump_forward_is_sound) { run_cases(CK_JF_SOUND); }

/* Jump-forward returns the longest forced string (not just a sound prefix). */
TEST(jump_forward_is_longest) {
    jf_shorter = 0;
    run_cases(CK_JF_EXACT);
}

/* accept_bytes of a whole string is all or nothing: a string with a viable
 * prefix but a dead end changes nothing. */
TEST(accept_bytes_all_or_nothing) {
    for (size_t i = 0; i < N_CASES; i++) {
        const case_t *k = &cases[i];
        gcm x = MAKE_GCM(k->ebnf, vocab());
        if (!x.m) { free_gcm(&x); continue; }
        int32_t init[NW];
        fill(x.m, init);
        size_t na = strlen(k->alphabet);
        unsigned char s[8];
        for (int len = 1; len <= 5 && len <= k->maxlen; len++) {
            long total = 1;
            for (int j = 0; j < len; j++) total *= (long)na;
            for (long code = 0; code < total; code++) {
                long c = code;
                for (int j = 0; j < len; j++) { s[j] = (unsigned char)k->alphabet[c % (long)na]; c /= (long)na; }
                int o = k->oracle(s, (size_t)len), acc = -1;
                CHECK_RC(xg2_matcher_accept_bytes(x.m, (const char *)s, (size_t)len, &acc), XG2_OK);
                CHECKF(acc == (o != DEAD), "grammar %s: accept_bytes(%s) = %d, oracle %d", k->name,
                       show((const char *)s, (size_t)len), acc, o);
                if (acc) {
                    CHECK_EQ(xg2_matcher_num_steps(x.m), 1);
                    CHECK_EQ(xg2_matcher_is_completed(x.m), o == MEMBER);
                    CHECK_RC(xg2_matcher_rollback(x.m, 1), XG2_OK);
                } else {
                    CHECK_EQ(xg2_matcher_num_steps(x.m), 0);
                    int32_t now[NW];
                    fill(x.m, now);
                    CHECKF(!memcmp(init, now, sizeof init), "grammar %s: a rejected accept_bytes(%s) changed the mask",
                           k->name, show((const char *)s, (size_t)len));
                }
            }
        }
        /* Empty input is a (no-op) step. */
        int acc = -1;
        CHECK_RC(xg2_matcher_accept_bytes(x.m, "", 0, &acc), XG2_OK);
        CHECK_EQ(acc, 1);
        free_gcm(&x);
    }
}

/* Every prefix the matcher accepts must be viable: either complete, or some
 * byte can follow.  (A "dead end" leaves generation with an empty mask.)
 * Checked without oracles, on grammars with lookahead assertions. */
static int has_next_byte(xg2_matcher *m) {
    for (int c = 0; c < 256; c++) {
        char b = (char)c;
        int acc = 0;
        if (xg2_matcher_accept_bytes(m, &b, 1, &acc) == XG2_OK && acc) {
            xg2_matcher_rollback(m, 1);
            return 1;
        }
    }
    return 0;
}

static void dead_end_dfs(const char *grammar, xg2_matcher *m, const char *alphabet, char *s, int n, int maxlen) {
    CHECKF(xg2_matcher_is_completed(m) || has_next_byte(m), "grammar %s: %s is accepted, but nothing can follow it",
           show(grammar, strlen(grammar)), show(s, (size_t)n));
    if (n >= maxlen) return;
    for (const char *a = alphabet; *a; a++) {
        int acc = 0;
        s[n] = *a;
        if (xg2_matcher_accept_bytes(m, a, 1, &acc) != XG2_OK || !acc) continue;
        dead_end_dfs(grammar, m, alphabet, s, n + 1, maxlen);
        xg2_matcher_rollback(m, 1);
    }
}

TEST(no_dead_ends_with_lookahead) {
    static const char *const grammars[] = {
        /* Minimal reproduction: after "b", "b" is accepted but leads nowhere. */
        "root ::= item+\nitem ::= \"a\" | b\nb ::= \"b\" (= \"a\")",
        "root ::= x \"b\" | x \"c\"\nx ::= \"a\"+ (= \"b\")",
        "root ::= (x | y | \"c\")+\nx ::= \"a\" (= \"b\")\ny ::= \"b\" (= \"a\" | \"c\")",
        "root ::= \"[\" (num (\",\" num)*)? \"]\"\nnum ::= [0-9]+ (= [,\\]])",
        "root ::= w (\" \" w)* \"!\"\nw ::= [a-c]+ (= \" \" | \"!\")",
    };
    const char *alphabet = "abc[],0 !";
    for (size_t i = 0; i < sizeof grammars / sizeof *grammars; i++) {
        gcm x = MAKE_GCM(grammars[i], vocab());
        char s[8];
        if (x.m) dead_end_dfs(grammars[i], x.m, alphabet, s, 0, 5);
        free_gcm(&x);
    }
}

/* ---- tokens, rollback, reset, fork ---- */

static int32_t tok(const char *text) {
    for (int32_t i = 0; i < N_TOKS; i++)
        if (!strcmp(vocab_toks[i], text)) return i;
    fprintf(stderr, "no token %s\n", text);
    exit(3);
}

static int accept_tok(xg2_matcher *m, const char *text) {
    int acc = -1;
    CHECK_RC(xg2_matcher_accept_token(m, tok(text), &acc), XG2_OK);
    return acc;
}

TEST(rollback_over_many_steps_and_reset) {
    gcm x = MAKE_GCM(find_case("arrays")->ebnf, vocab()); /* arrays */
    if (!x.m) { free_gcm(&x); return; }
    const char *seq[] = {"[", "[1", "1,", "[]", "],", "11", "]"}; /* [[11,[]],11] */
    int32_t masks[8][NW];
    fill(x.m, masks[0]);
    for (int i = 0; i < 7; i++) {
        CHECKF(accept_tok(x.m, seq[i]) == 1, "token %d %s", i, seq[i]);
        fill(x.m, masks[i + 1]);
        CHECK_EQ(xg2_matcher_num_steps(x.m), i + 1);
    }
    CHECK(xg2_matcher_is_completed(x.m));
    /* Roll back in uneven strides and compare with the recorded masks. */
    int at = 7;
    int strides[] = {3, 1, 2, 0, 1};
    for (int k = 0; k < 5; k++) {
        CHECK_RC(xg2_matcher_rollback(x.m, strides[k]), XG2_OK);
        at -= strides[k];
        CHECK_EQ(xg2_matcher_num_steps(x.m), at);
        int32_t now[NW];
        fill(x.m, now);
        CHECKF(!memcmp(now, masks[at], sizeof now), "mask after rolling back to step %d differs", at);
    }
    CHECK_RC(xg2_matcher_rollback(x.m, 1), XG2_ERR_ARG);
    CHECK_RC(xg2_matcher_rollback(x.m, -1), XG2_ERR_ARG);
    /* Replay and reset. */
    for (int i = 0; i < 7; i++) accept_tok(x.m, seq[i]);
    CHECK_RC(xg2_matcher_rollback(x.m, 8), XG2_ERR_ARG);
    CHECK_EQ(xg2_matcher_num_steps(x.m), 7);
    CHECK_RC(xg2_matcher_reset(x.m), XG2_OK);
    CHECK_EQ(xg2_matcher_num_steps(x.m), 0);
    int32_t now[NW];
    fill(x.m, now);
    CHECK(!memcmp(now, masks[0], sizeof now));
    free_gcm(&x);
}

TEST(fork_is_independent) {
    gcm x = MAKE_GCM(find_case("arrays")->ebnf, vocab()); /* arrays */
    if (!x.m) { free_gcm(&x); return; }
    accept_tok(x.m, "[");
    accept_tok(x.m, "1,");
    int32_t orig[NW], now[NW];
    fill(x.m, orig);
    xg2_matcher *f = NULL;
    CHECK_RC(xg2_matcher_fork(x.m, &f), XG2_OK);
    if (!f) { free_gcm(&x); return; }
    CHECK_EQ(xg2_matcher_num_steps(f), 2);
    fill(f, now);
    CHECK(!memcmp(now, orig, sizeof now));
    /* Advance the fork: the original does not move. */
    CHECK_EQ(accept_tok(f, "[]"), 1);
    CHECK_EQ(accept_tok(f, "]"), 1);
    CHECK(xg2_matcher_is_completed(f));
    CHECK(!xg2_matcher_is_completed(x.m));
    fill(x.m, now);
    CHECK(!memcmp(now, orig, sizeof now));
    /* Advance the original differently: the fork does not move. */
    CHECK_EQ(accept_tok(x.m, "11"), 1);
    CHECK(xg2_matcher_is_completed(f));
    CHECK_EQ(xg2_matcher_num_steps(f), 4);
    /* The fork has the history: it can roll back past the fork point. */
    CHECK_RC(xg2_matcher_rollback(f, 3), XG2_OK);
    CHECK_EQ(accept_tok(f, "1,"), 1);
    fill(f, now);
    CHECK(!memcmp(now, orig, sizeof now));
    /* A fork of a fork, then free the original first. */
    xg2_matcher *g = NULL;
    CHECK_RC(xg2_matcher_fork(f, &g), XG2_OK);
    xg2_matcher_free(x.m);
    x.m = NULL;
    xg2_matcher_free(f);
    if (g) {
        CHECK_EQ(accept_tok(g, "1"), 1);
        CHECK_EQ(accept_tok(g, "]"), 1);
        CHECK(xg2_matcher_is_completed(g));
        xg2_matcher_free(g);
    }
    CHECK_RC(xg2_matcher_fork(NULL, &g), XG2_ERR_ARG);
    free_gcm(&x);
}

/* ---- stop tokens and termination ---- */

TEST(stop_tokens) {
    gcm x = MAKE_GCM("root ::= \"ab\" | \"abab\"", vocab());
    if (!x.m) { free_gcm(&x); return; }
    int32_t row[NW];
    int acc;
    /* Not complete: the stop token is neither allowed nor accepted. */
    fill(x.m, row);
    CHECK(!mask_bit(row, stop_id));
    CHECK_RC(xg2_matcher_accept_token(x.m, stop_id, &acc), XG2_OK);
    CHECK_EQ(acc, 0);
    CHECK_EQ(accept_tok(x.m, "ab"), 1);
    fill(x.m, row);
    CHECK(mask_bit(row, stop_id));
    CHECK(mask_bit(row, tok("ab")));
    CHECK(!mask_bit(row, special_id));
    CHECK(!xg2_matcher_is_terminated(x.m));
    /* Accept the stop token: terminated; nothing else is accepted. */
    CHECK_RC(xg2_matcher_accept_token(x.m, stop_id, &acc), XG2_OK);
    CHECK_EQ(acc, 1);
    CHECK(xg2_matcher_is_terminated(x.m));
    CHECK_EQ(xg2_matcher_num_steps(x.m), 2);
    for (int32_t t = 0; t < VOCAB_SIZE; t++) {
        CHECK_RC(xg2_matcher_accept_token(x.m, t, &acc), XG2_OK);
        CHECKF(acc == 0, "token %d accepted after termination", t);
    }
    CHECK_RC(xg2_matcher_accept_bytes(x.m, "ab", 2, &acc), XG2_OK);
    CHECK_EQ(acc, 0);
    size_t len = 99;
    char buf[8];
    CHECK_RC(xg2_matcher_jump_forward(x.m, buf, sizeof buf, &len), XG2_OK);
    CHECK_EQ(len, 0);
    /* Roll the stop token back: live again. */
    CHECK_RC(xg2_matcher_rollback(x.m, 1), XG2_OK);
    CHECK(!xg2_matcher_is_terminated(x.m));
    CHECK_EQ(accept_tok(x.m, "abab") + accept_tok(x.m, "ab"), 1);
    CHECK(xg2_matcher_is_completed(x.m));
    CHECK_RC(xg2_matcher_reset(x.m), XG2_OK);
    CHECK(!xg2_matcher_is_terminated(x.m));
    /* Special and padding tokens are never accepted; bad ids are errors. */
    CHECK_RC(xg2_matcher_accept_token(x.m, special_id, &acc), XG2_OK);
    CHECK_EQ(acc, 0);
    CHECK_RC(xg2_matcher_accept_token(x.m, tok(""), &acc), XG2_OK);
    CHECK_EQ(acc, 0);
    CHECK_RC(xg2_matcher_accept_token(x.m, VOCAB_SIZE - 1, &acc), XG2_OK);
    CHECK_EQ(acc, 0);
    CHECK_RC(xg2_matcher_accept_token(x.m, VOCAB_SIZE, &acc), XG2_ERR_ARG);
    CHECK_RC(xg2_matcher_accept_token(x.m, -1, &acc), XG2_ERR_ARG);
    CHECK_RC(xg2_matcher_accept_token(x.m, 0, NULL), XG2_ERR_ARG);
    CHECK_RC(xg2_matcher_accept_bytes(x.m, NULL, 1, &acc), XG2_ERR_ARG);
    free_gcm(&x);
}

/* The mask after a stop token, made consistent with accept_token (which
 * rejects everything after termination). */
TEST(mask_after_stop_token_allows_only_stop_tokens) {
    /* xg2.h: after the stop token the row allows only stop tokens (a finished
     * row in a padded batch stays valid) while accept_token refuses all. */
    gcm x = MAKE_GCM("root ::= \"ab\"", vocab());
    if (!x.m) { free_gcm(&x); return; }
    accept_tok(x.m, "ab");
    int acc;
    CHECK_RC(xg2_matcher_accept_token(x.m, stop_id, &acc), XG2_OK);
    int32_t row[NW];
    fill(x.m, row);
    for (int32_t t = 0; t < VOCAB_SIZE; t++) {
        CHECKF(mask_bit(row, t) == (t == stop_id), "after the stop token: token %d mask bit %d", t, mask_bit(row, t));
        CHECK_RC(xg2_matcher_accept_token(x.m, t, &acc), XG2_OK);
        CHECKF(acc == 0, "after the stop token: token %d accepted", t);
    }
    free_gcm(&x);
}

TEST(custom_stop_tokens) {
    xg2_grammar *g = MAKE_GRAMMAR("root ::= \"ab\"");
    if (!g) return;
    xg2_compiled *c = NULL;
    CHECK_RC(xg2_compiled_new(g, vocab(), &c), XG2_OK);
    xg2_matcher *m = NULL;
    int32_t ids[2] = {special_id, tok("z")};
    CHECK_RC(xg2_matcher_new(c, ids, 1, 0, &m), XG2_OK);
    int32_t out[4] = {0};
    CHECK_EQ(xg2_matcher_stop_ids(m, out, 4), 1);
    CHECK_EQ(out[0], special_id);
    accept_tok(m, "ab");
    int32_t row[NW];
    fill(m, row);
    CHECK(mask_bit(row, special_id));
    CHECK(!mask_bit(row, stop_id)); /* replaced, no longer a stop token */
    int acc;
    CHECK_RC(xg2_matcher_accept_token(m, stop_id, &acc), XG2_OK);
    CHECK_EQ(acc, 0);
    CHECK_RC(xg2_matcher_accept_token(m, special_id, &acc), XG2_OK);
    CHECK_EQ(acc, 1);
    CHECK(xg2_matcher_is_terminated(m));
    xg2_matcher_free(m);
    /* No stop tokens at all (n_stop 0, NULL list). */
    m = NULL;
    CHECK_RC(xg2_matcher_new(c, NULL, 0, 0, &m), XG2_OK);
    if (m) {
        CHECK_EQ(xg2_matcher_stop_ids(m, out, 4), 0);
        accept_tok(m, "ab");
        fill(m, row);
        for (int w = 0; w < NW; w++) CHECK_EQ(row[w], 0);
        CHECK(xg2_matcher_is_completed(m));
        CHECK(!xg2_matcher_is_terminated(m));
        xg2_matcher_free(m);
    }
    /* The vocab's stop tokens by default. */
    m = NULL;
    CHECK_RC(xg2_matcher_new(c, NULL, -1, 0, &m), XG2_OK);
    CHECK_EQ(xg2_matcher_stop_ids(m, out, 4), 1);
    CHECK_EQ(out[0], stop_id);
    xg2_matcher_free(m);
    /* Bad stop ids. */
    int32_t bad[1] = {VOCAB_SIZE};
    m = (xg2_matcher *)&m;
    CHECK_RC(xg2_matcher_new(c, bad, 1, 0, &m), XG2_ERR_ARG);
    CHECK(m == (xg2_matcher *)&m);
    bad[0] = -5;
    CHECK_RC(xg2_matcher_new(c, bad, 1, 0, &m), XG2_ERR_ARG);
    CHECK_RC(xg2_matcher_new(c, NULL, 1, 0, &m), XG2_ERR_ARG);
    CHECK_RC(xg2_matcher_new(NULL, NULL, -1, 0, &m), XG2_ERR_ARG);
    CHECK_RC(xg2_matcher_new(c, NULL, -1, 0, NULL), XG2_ERR_ARG);
    xg2_compiled_free(c);
    xg2_grammar_free(g);
}

TEST(terminate_without_stop) {
    xg2_grammar *g = MAKE_GRAMMAR("root ::= \"a\"+ \"b\"?");
    if (!g) return;
    xg2_compiled *c = NULL;
    CHECK_RC(xg2_compiled_new(g, vocab(), &c), XG2_OK);
    xg2_matcher *m = NULL;
    CHECK_RC(xg2_matcher_new(c, NULL, -1, 1, &m), XG2_OK);
    if (!m) { xg2_compiled_free(c); xg2_grammar_free(g); return; }
    CHECK(!xg2_matcher_is_terminated(m));
    CHECK_EQ(accept_tok(m, "b"), 0);
    CHECK_EQ(accept_tok(m, "a"), 1);
    /* Complete: terminated without a stop token. */
    CHECK(xg2_matcher_is_completed(m));
    CHECK(xg2_matcher_is_terminated(m));
    /* Terminated without a stop token the grammar may still be extended, as in
     * XGrammar: "a" continues the repetition, "b" ends it (still terminated). */
    int acc;
    CHECK_RC(xg2_matcher_accept_token(m, tok("a"), &acc), XG2_OK);
    CHECK_EQ(acc, 1);
    CHECK(xg2_matcher_is_terminated(m));
    CHECK_RC(xg2_matcher_accept_token(m, tok("b"), &acc), XG2_OK);
    CHECK_EQ(acc, 1);
    CHECK_RC(xg2_matcher_accept_token(m, tok("a"), &acc), XG2_OK);
    CHECK_EQ(acc, 0);
    CHECK(xg2_matcher_is_terminated(m));
    /* Rolling back what was accepted un-terminates. */
    CHECK_RC(xg2_matcher_rollback(m, xg2_matcher_num_steps(m)), XG2_OK);
    CHECK(!xg2_matcher_is_terminated(m));
    xg2_matcher_free(m);
    xg2_compiled_free(c);
    xg2_grammar_free(g);
}

/* ---- jump-forward details ---- */

TEST(jump_forward_buffers) {
    gcm x = MAKE_GCM("root ::= \"x\" \"hello \\u00e9t\\u00e9 world\" [ab] | \"y\"", vocab());
    if (!x.m) { free_gcm(&x); return; }
    char buf[64];
    size_t len = 99;
    CHECK_RC(xg2_matcher_jump_forward(x.m, buf, sizeof buf, &len), XG2_OK);
    CHECK_EQ(len, 0); /* x or y */
    accept_tok(x.m, "x");
    const char *want = "hello \xc3\xa9t\xc3\xa9 world";
    size_t wl = strlen(want);
    CHECK_RC(xg2_matcher_jump_forward(x.m, buf, sizeof buf, &len), XG2_OK);
    CHECKF(len == wl && !memcmp(buf, want, wl), "jump_forward = %s", show(buf, len));
    /* Short caps: cap bytes written, full length reported. */
    for (size_t cap = 0; cap < wl + 2; cap++) {
        memset(buf, '#', sizeof buf);
        len = 0;
        CHECK_RC(xg2_matcher_jump_forward(x.m, cap ? buf : NULL, cap, &len), XG2_OK);
        CHECK_EQ(len, wl);
        size_t w = cap < wl ? cap : wl;
        CHECK(!memcmp(buf, want, w) || !cap);
        if (cap) CHECK(buf[w] == '#');
    }
    CHECK_RC(xg2_matcher_jump_forward(x.m, buf, sizeof buf, NULL), XG2_ERR_ARG);
    CHECK_RC(xg2_matcher_jump_forward(x.m, NULL, 4, &len), XG2_ERR_ARG);
    /* The matcher did not move. */
    CHECK_EQ(xg2_matcher_num_steps(x.m), 1);
    /* Mid-character: the rest of "é" is forced. */
    int acc;
    CHECK_RC(xg2_matcher_accept_bytes(x.m, "hello \xc3", 7, &acc), XG2_OK);
    CHECK_RC(xg2_matcher_jump_forward(x.m, buf, sizeof buf, &len), XG2_OK);
    CHECKF(len == wl - 7 && !memcmp(buf, want + 7, len), "jump_forward = %s", show(buf, len));
    free_gcm(&x);
    /* A forced string longer than any buffer: bounded, and a prefix of it. */
    x = MAKE_GCM("root ::= \"0123456789\"{600} \"!\"", vocab());
    if (x.m) {
        size_t big = 0;
        CHECK_RC(xg2_matcher_jump_forward(x.m, NULL, 0, &big), XG2_OK);
        CHECKF(big > 0 && big <= 6001, "len %zu", big);
        char *b = malloc(big + 1);
        CHECK_RC(xg2_matcher_jump_forward(x.m, b, big, &len), XG2_OK);
        int ok = 1;
        for (size_t i = 0; i < len && i < big; i++) ok &= b[i] == (char)('0' + i % 10);
        CHECK(ok);
        free(b);
    }
    free_gcm(&x);
}

/* ---- argument checks ---- */

TEST(fill_mask_arguments) {
    gcm x = MAKE_GCM("root ::= [a-z]+", vocab());
    if (!x.m) { free_gcm(&x); return; }
    int32_t row[NW + 2];
    int need = -1;
    CHECK_RC(xg2_matcher_fill_mask(x.m, row, NW - 1, &need), XG2_ERR_ARG);
    CHECK(xg2_last_error()[0] != 0);
    CHECK_RC(xg2_matcher_fill_mask(x.m, row, NW + 1, &need), XG2_ERR_ARG);
    CHECK_RC(xg2_matcher_fill_mask(x.m, row, 0, &need), XG2_ERR_ARG);
    CHECK_RC(xg2_matcher_fill_mask(x.m, row, -NW, &need), XG2_ERR_ARG);
    CHECK_RC(xg2_matcher_fill_mask(x.m, NULL, NW, &need), XG2_ERR_ARG);
    CHECK_RC(xg2_matcher_fill_mask(NULL, row, NW, &need), XG2_ERR_ARG);
    /* Exactly NW words are written. */
    for (int i = 0; i < NW + 2; i++) row[i] = 0x5A5A5A5A;
    CHECK_RC(xg2_matcher_fill_mask(x.m, row, NW, &need), XG2_OK);
    CHECK(row[NW] == 0x5A5A5A5A && row[NW + 1] == 0x5A5A5A5A);
    CHECK_EQ(need, 1);
    /* need_apply is 0 only when every token is allowed. */
    const char *toks[] = {"a", "b", "ab"};
    xg2_vocab *v = make_vocab(XG2_VOCAB_RAW, toks, 3, 3, NULL, 0, NULL, 0);
    gcm y = MAKE_GCM("root ::= [ab]*", v);
    if (y.m) {
        int32_t r1[1];
        CHECK_RC(xg2_matcher_fill_mask(y.m, r1, 1, &need), XG2_OK);
        CHECK_EQ(r1[0], 7);
        CHECK_EQ(need, 0);
    }
    free_gcm(&y);
    xg2_vocab_free(v);
    free_gcm(&x);
}

/* ---- threads ---- */

typedef struct {
    xg2_matcher *m;
    const int32_t *m0, *m1; /* the masks before and after "[1" */
    int bad, state_errors, ok_calls;
    pthread_barrier_t *start;
    double until;
} shared_ctx;

/* Fills masks until the deadline; each mask is one of the two states. */
static void *fill_loop(void *arg) {
    shared_ctx *c = arg;
    int32_t row[NW];
    pthread_barrier_wait(c->start);
    while (now_s() < c->until) {
        int need;
        int rc = xg2_matcher_fill_mask(c->m, row, NW, &need);
        if (rc == XG2_ERR_STATE) { c->state_errors++; continue; }
        if (rc != XG2_OK) { c->bad++; continue; }
        c->ok_calls++;
        if (memcmp(row, c->m0, sizeof row) && memcmp(row, c->m1, sizeof row)) c->bad++;
    }
    return NULL;
}

/* Accepts "[1" and rolls it back until the deadline (retrying when busy). */
static void *step_loop(void *arg) {
    shared_ctx *c = arg;
    int32_t t = tok("[1");
    pthread_barrier_wait(c->start);
    while (now_s() < c->until) {
        int acc = -1, rc;
        while ((rc = xg2_matcher_accept_token(c->m, t, &acc)) == XG2_ERR_STATE) c->state_errors++;
        if (rc != XG2_OK || acc != 1) { c->bad++; break; }
        while ((rc = xg2_matcher_rollback(c->m, 1)) == XG2_ERR_STATE) c->state_errors++;
        if (rc != XG2_OK) { c->bad++; break; }
        c->ok_calls++;
    }
    return NULL;
}

/* One matcher, two threads at once (a caller error): every call either works
 * or returns XG2_ERR_STATE, and the state never corrupts. */
TEST(same_matcher_two_threads) {
    gcm x = MAKE_GCM(find_case("arrays")->ebnf, vocab());
    if (!x.m) { free_gcm(&x); return; }
    int32_t m0[NW], m1[NW];
    fill(x.m, m0);
    accept_tok(x.m, "[1");
    fill(x.m, m1);
    xg2_matcher_rollback(x.m, 1);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    shared_ctx a = {x.m, m0, m1, 0, 0, 0, &start, now_s() + 0.4}, b = a;
    pthread_t ta, tb;
    pthread_create(&ta, NULL, fill_loop, &a);
    pthread_create(&tb, NULL, step_loop, &b);
    pthread_join(tb, NULL);
    pthread_join(ta, NULL);
    pthread_barrier_destroy(&start);
    CHECKF(a.bad == 0, "fill thread: %d wrong masks or errors", a.bad);
    CHECKF(b.bad == 0, "step thread: %d failures", b.bad);
    fprintf(stderr, "  (fill: %d ok, %d busy; step: %d ok, %d busy)\n", a.ok_calls, a.state_errors, b.ok_calls,
            b.state_errors);
    CHECK_EQ(xg2_matcher_num_steps(x.m), 0);
    int32_t now[NW];
    fill(x.m, now);
    CHECK(!memcmp(now, m0, sizeof now));
    free_gcm(&x);
}

/* A fixed token walk: the masks after each step. */
#define WALK_STEPS 11 /* [[11,[]],111,[]] */
static const char *const walk_json[] = {"[", "[1", "1,", "[]", "],", "1", "11", ",", "[", "]", "]"};

typedef struct {
    const xg2_compiled *c;
    int32_t masks[WALK_STEPS + 1][NW];
    int rc;
} walk_ctx;

static void *walk(void *arg) {
    walk_ctx *w = arg;
    xg2_matcher *m = NULL;
    w->rc = xg2_matcher_new(w->c, NULL, -1, 0, &m);
    if (w->rc) return NULL;
    for (int i = 0; i <= WALK_STEPS && !w->rc; i++) {
        int need;
        w->rc = xg2_matcher_fill_mask(m, w->masks[i], NW, &need);
        if (i == WALK_STEPS || w->rc) break;
        int acc = 0;
        w->rc = xg2_matcher_accept_token(m, tok(walk_json[i]), &acc);
        if (!w->rc && !acc) w->rc = -1;
    }
    xg2_matcher_free(m);
    return NULL;
}

/* Different matchers of one compiled grammar on 4 threads give the masks a
 * sequential run gives (the compiled grammar's shared caches start cold). */
TEST(parallel_matchers_match_sequential) {
    xg2_grammar *g = MAKE_GRAMMAR(find_case("arrays")->ebnf);
    if (!g) return;
    xg2_compiled *cs = NULL, *cp = NULL;
    CHECK_RC(xg2_compiled_new(g, vocab(), &cs), XG2_OK);
    walk_ctx seq = {cs, {{0}}, 0};
    walk(&seq);
    CHECK_EQ(seq.rc, 0);
    for (int round = 0; round < 5; round++) {
        CHECK_RC(xg2_compiled_new(g, vocab(), &cp), XG2_OK);
        walk_ctx par[4];
        pthread_t th[4];
        for (int t = 0; t < 4; t++) {
            memset(&par[t], 0, sizeof par[t]);
            par[t].c = cp;
            pthread_create(&th[t], NULL, walk, &par[t]);
        }
        for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
        for (int t = 0; t < 4; t++) {
            CHECK_EQ(par[t].rc, 0);
            for (int i = 0; i <= WALK_STEPS; i++)
                CHECKF(!memcmp(par[t].masks[i], seq.masks[i], sizeof seq.masks[i]),
                       "round %d thread %d: mask after step %d differs from the sequential run", round, t, i);
        }
        xg2_compiled_free(cp);
    }
    xg2_compiled_free(cs);
    xg2_grammar_free(g);
}

/* xg2_batch_fill_masks on 4 threads equals one fill_mask per matcher. */
TEST(batch_fill_matches_single) {
    xg2_grammar *g = MAKE_GRAMMAR(find_case("arrays")->ebnf);
    if (!g) return;
    xg2_compiled *c = NULL;
    CHECK_RC(xg2_compiled_new(g, vocab(), &c), XG2_OK);
    enum { N = 10 };
    xg2_matcher *ms[N] = {0};
    for (int i = 0; i < N; i++) {
        CHECK_RC(xg2_matcher_new(c, NULL, -1, 0, &ms[i]), XG2_OK);
        for (int k = 0; k < i && k < WALK_STEPS; k++) accept_tok(ms[i], walk_json[k]);
    }
    int32_t single[N][NW];
    for (int i = 0; i < N; i++) fill(ms[i], single[i]);
    int32_t batch[N + 3][NW];
    memset(batch, 0x77, sizeof batch);
    CHECK_RC(xg2_batch_fill_masks(ms, N, &batch[0][0], N + 3, NW, NULL, 4), XG2_OK);
    for (int i = 0; i < N; i++) CHECKF(!memcmp(batch[i], single[i], sizeof single[i]), "row %d", i);
    CHECK(batch[N][0] == 0x77777777);
    /* Explicit rows, reversed and offset. */
    int32_t rows[N];
    for (int i = 0; i < N; i++) rows[i] = N + 2 - i;
    memset(batch, 0x77, sizeof batch);
    CHECK_RC(xg2_batch_fill_masks(ms, N, &batch[0][0], N + 3, NW, rows, 3), XG2_OK);
    for (int i = 0; i < N; i++) CHECKF(!memcmp(batch[rows[i]], single[i], sizeof single[i]), "row %d", rows[i]);
    CHECK(batch[0][0] == 0x77777777 && batch[1][0] == 0x77777777);
    /* More threads than matchers, one thread, zero matchers. */
    CHECK_RC(xg2_batch_fill_masks(ms, N, &batch[0][0], N + 3, NW, NULL, 64), XG2_OK);
    CHECK_RC(xg2_batch_fill_masks(ms, N, &batch[0][0], N + 3, NW, NULL, 1), XG2_OK);
    CHECK_RC(xg2_batch_fill_masks(ms, 0, &batch[0][0], N + 3, NW, NULL, 4), XG2_OK);
    /* Bad arguments. */
    CHECK_RC(xg2_batch_fill_masks(ms, N, &batch[0][0], N - 1, NW, NULL, 4), XG2_ERR_ARG);
    CHECK_RC(xg2_batch_fill_masks(ms, N, &batch[0][0], N + 3, NW + 1, NULL, 4), XG2_ERR_ARG);
    rows[3] = -1;
    CHECK_RC(xg2_batch_fill_masks(ms, N, &batch[0][0], N + 3, NW, rows, 4), XG2_ERR_ARG);
    rows[3] = N + 3;
    CHECK_RC(xg2_batch_fill_masks(ms, N, &batch[0][0], N + 3, NW, rows, 4), XG2_ERR_ARG);
    xg2_matcher *tmp = ms[4];
    ms[4] = NULL;
    CHECK_RC(xg2_batch_fill_masks(ms, N, &batch[0][0], N + 3, NW, NULL, 4), XG2_ERR_ARG);
    ms[4] = tmp;
    CHECK_RC(xg2_batch_fill_masks(ms, N, NULL, N + 3, NW, NULL, 4), XG2_ERR_ARG);
    for (int i = 0; i < N; i++) xg2_matcher_free(ms[i]);
    xg2_compiled_free(c);
    xg2_grammar_free(g);
}

int main(int argc, char **argv) {
    int rc = RUN_TESTS(argc, argv, T_(oracles_self_check), T_(accept_and_completion_match_oracle),
                       T_(masks_match_oracle), T_(rollback_restores_masks), T_(jump_forward_is_sound),
                       T_(jump_forward_is_longest), T_(accept_bytes_all_or_nothing), T_(no_dead_ends_with_lookahead),
                       T_(rollback_over_many_steps_and_reset), T_(fork_is_independent), T_(stop_tokens),
                       T_(mask_after_stop_token_allows_only_stop_tokens), T_(custom_stop_tokens), T_(terminate_without_stop),
                       T_(jump_forward_buffers), T_(fill_mask_arguments), T_(same_matcher_two_threads),
                       T_(parallel_matchers_match_sequential), T_(batch_fill_matches_single));
    xg2_vocab_free(the_vocab);
    return rc;
}
