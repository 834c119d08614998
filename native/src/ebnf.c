/*
 * ebnf.c -- EBNF text (XGrammar's dialect, GBNF compatible) to IR.
 *
 *   grammar    -> rule*
 *   rule       -> NAME ( '[' ( NAME '=' INT ) ,* ']' )? '::=' choices ( '(=' choices ')' )?
 *   choices    -> sequence ( '|' sequence )*
 *   sequence   -> quantified+          (ends before '|' ')' '(=' EOF or NAME '::=')
 *   quantified -> element ( '*' | '+' | '?' | '{' INT ( ',' INT? )? '}' )*
 *   element    -> STRING | CLASS | NAME | MACRO '(' args ')' | '(' choices? ')'
 *               | 'Length' '(' quantified ',' quantified ',' INT ( ',' INT )? ')'
 *               | 'TagDispatch' '(' ( '(' STRING ',' NAME ','? ')' | NAME '=' value ) ,* ')'
 *               | ('Token' | 'ExcludeToken') '(' INT ,* ')'
 *               | 'TokenTagDispatch' '(' ( '(' INT ',' NAME ')' | NAME '=' value ) ,* ')'
 *
 * Comments run from '#' to the end of the line.  Strings and classes take the
 * escapes \n \t \r \\ \" \' \xHH \uHHHH \UHHHHHHHH (code points, stored as UTF-8);
 * classes also take \d \w \s and their negations.  Errors name line and column.
 */
#include <stdio.h>

#include "fsm.h"

typedef struct {
    const char *s;
    size_t n, i;
    uint32_t line, col;
    xg2_ir *ir;
    int depth;
    int rc;
    uint32_t cur_rule;
    uint32_t n_tok; /* Token rules lifted so far (their names) */
    /* Those rules by their tokens (open addressing, rule id + 1; 0: empty): an equal
     * Token(...) refers to the same rule (a Harmony tag writes two for each tool). */
    uint32_t *tok_slot, tok_cap;
    xg2_charvec lit; /* a string literal's bytes (one buffer for all of them) */
    xg2_u32vec kids; /* the items of the sequences and choices being read, innermost last */
    xg2_u32vec cls;  /* a character class's ranges (one buffer for all of them) */
} parser;

static int perr(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(parser *p, const char *fmt, ...) {
    if (p->rc) return p->rc;
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->rc = xg2__fail(XG2_ERR_GRAMMAR, "EBNF error at line %u, column %u: %s", p->line, p->col, msg);
    return p->rc;
}

static int peekc(const parser *p, size_t k) { return p->i + k < p->n ? (unsigned char)p->s[p->i + k] : -1; }

static void adv(parser *p, size_t k) {
    for (; k && p->i < p->n; k--, p->i++) {
        if (p->s[p->i] == '\n') { p->line++; p->col = 1; }
        else p->col++;
    }
}

static void skip_ws(parser *p) {
    for (;;) {
        int c = peekc(p, 0);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') adv(p, 1);
        else if (c == '#') { while (peekc(p, 0) >= 0 && peekc(p, 0) != '\n') adv(p, 1); }
        else return;
    }
}

/* What the next token looks like, for error messages. */
static const char *describe(parser *p, char *buf, size_t cap) {
    int c = peekc(p, 0);
    if (c < 0) return "end of input";
    if (c >= 0x20 && c < 0x7F) snprintf(buf, cap, "'%c'", c);
    else snprintf(buf, cap, "byte 0x%02x", c);
    return buf;
}

static int is_name_start(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_name_char(int c) { return is_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.'; }

static size_t name_len_at(const parser *p, size_t at) {
    size_t k = 0;
    if (at >= p->n || !is_name_start((unsigned char)p->s[at])) return 0;
    while (at + k < p->n && is_name_char((unsigned char)p->s[at + k])) k++;
    return k;
}

/* Is the input at a rule definition "NAME ::=" ?  Does not move. */
static int at_rule_start(const parser *p) {
    size_t k = name_len_at(p, p->i);
    if (!k) return 0;
    size_t j = p->i + k;
    while (j < p->n && (p->s[j] == ' ' || p->s[j] == '\t' || p->s[j] == '\n' || p->s[j] == '\r')) j++;
    if (j < p->n && p->s[j] == '[') { /* rule attributes: [name=value, ...] on one line */
        while (j < p->n && p->s[j] != ']' && p->s[j] != '\n') j++;
        if (j == p->n || p->s[j] != ']') return 0;
        for (j++; j < p->n && (p->s[j] == ' ' || p->s[j] == '\t'); j++) {}
    }
    return j + 3 <= p->n && memcmp(p->s + j, "::=", 3) == 0;
}

/* ---- characters and escapes ---- */

static int hexdig(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Read one character (escape or UTF-8) as a code point; -1 on error (reported).
 * In a class, *set receives 'd','w','s' (or upper case) for a class escape. */
static int32_t read_char(parser *p, int in_class, int *set) {
    int c = peekc(p, 0);
    if (c == '\\') {
        int e = peekc(p, 1);
        int32_t v = -1;
        int ndig = 0;
        switch (e) {
        case 'n': v = '\n'; break;
        case 't': v = '\t'; break;
        case 'r': v = '\r'; break;
        case 'a': v = 7; break;
        case 'b': v = 8; break;
        case 'f': v = 12; break;
        case 'v': v = 11; break;
        case 'e': v = 27; break;
        case '0': v = 0; break;
        case '\\': case '"': case '\'': case '?': v = e; break;
        case 'x': ndig = 2; break;
        case 'u': ndig = 4; break;
        case 'U': ndig = 8; break;
        default:
            if (in_class && e >= 0 && strchr("[]-^/.*+(){}|$", e)) { v = e; break; }
            if (in_class && e >= 0 && strchr("dDwWsS", e)) {
                *set = e;
                adv(p, 2);
                return 0;
            }
            perr(p, "invalid escape sequence '\\%c'", e > 0x20 && e < 0x7F ? e : '?');
            return -1;
        }
        if (ndig) {
            v = 0;
            for (int k = 0; k < ndig; k++) {
                int h = hexdig(peekc(p, 2 + (size_t)k));
                if (h < 0) { perr(p, "escape '\\%c' needs %d hex digits", e, ndig); return -1; }
                v = v * 16 + h;
                if (v > 0x10FFFF) { perr(p, "code point beyond U+10FFFF in escape"); return -1; }
            }
            adv(p, 2 + (size_t)ndig);
        } else {
            adv(p, 2);
        }
        return v;
    }
    /* A UTF-8 character. */
    int len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || p->i + (size_t)len > p->n) { perr(p, "invalid UTF-8 in grammar text"); return -1; }
    int32_t v = len == 1 ? c : c & (0x7F >> len);
    for (int k = 1; k < len; k++) {
        int d = peekc(p, (size_t)k);
        if ((d & 0xC0) != 0x80) { perr(p, "invalid UTF-8 in grammar text"); return -1; }
        v = (v << 6) | (d & 0x3F);
    }
    /* overlong forms and code points past U+10FFFF are not UTF-8 (an escape of them is refused too) */
    static const int32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < least[len] || v > 0x10FFFF) { perr(p, "invalid UTF-8 in grammar text"); return -1; }
    adv(p, (size_t)len);
    return v;
}

static int utf8_put(uint8_t *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { o[0] = (uint8_t)(0xC0 | (cp >> 6)); o[1] = (uint8_t)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- elements ---- */

/* Read a string literal's bytes (UTF-8 of its code points) into buf. */
static int read_string(parser *p, xg2_charvec *buf) {
    uint32_t line = p->line, col = p->col;
    adv(p, 1);
    for (;;) {
        int c = peekc(p, 0);
        if (c < 0 || c == '\n' || c == '\r') {
            p->line = line;
            p->col = col;
            return perr(p, "unterminated string literal");
        }
        if (c == '"') { adv(p, 1); return 0; }
        int set = 0;
        int32_t cp = read_char(p, 0, &set);
        if (cp < 0) return p->rc;
        if (cp >= 0xD800 && cp <= 0xDFFF) return perr(p, "surrogate code point U+%04X in a string", cp);
        if (vec_reserve(buf, (uint64_t)buf->n + 4)) return p->rc = XG2_NOMEM();
        buf->n += (uint32_t)utf8_put((uint8_t *)buf->a + buf->n, (uint32_t)cp);
    }
}

static uint32_t parse_string(parser *p) {
    p->lit.n = 0;
    return read_string(p, &p->lit) ? 0 : xg2__ir_bytes(p->ir, (const uint8_t *)p->lit.a, p->lit.n);
}

static int add_range(xg2_u32vec *r, uint32_t lo, uint32_t hi) {
    return vec_push(r, lo) || vec_push(r, hi);
}

/* \d \w \s and negations as ranges. */
static int add_class_escape(xg2_u32vec *r, int e) {
    static const uint32_t d[] = {'0', '9'};
    static const uint32_t w[] = {'0', '9', 'A', 'Z', '_', '_', 'a', 'z'};
    static const uint32_t s[] = {'\t', '\r', ' ', ' '};
    const uint32_t *src = e == 'd' || e == 'D' ? d : e == 'w' || e == 'W' ? w : s;
    uint32_t n = e == 'd' || e == 'D' ? 1 : e == 'w' || e == 'W' ? 4 : 2;
    if (e >= 'a') {
        for (uint32_t k = 0; k < n; k++)
            if (add_range(r, src[2 * k], src[2 * k + 1])) return 1;
        return 0;
    }
    uint32_t next = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (src[2 * k] > next && add_range(r, next, src[2 * k] - 1)) return 1;
        next = src[2 * k + 1] + 1;
    }
    return add_range(r, next, 0x10FFFF);
}

static uint32_t parse_class(parser *p) {
    uint32_t line = p->line, col = p->col;
    xg2_u32vec *r = &p->cls;
    int negated = 0;
    r->n = 0;
    adv(p, 1);
    if (peekc(p, 0) == '^') { negated = 1; adv(p, 1); }
    for (int first = 1;; first = 0) {
        int c = peekc(p, 0);
        if (c < 0 || c == '\n' || c == '\r') {
            p->line = line;
            p->col = col;
            perr(p, "unterminated character class");
            break;
        }
        if (c == ']') { adv(p, 1); break; }
        int set = 0;
        int32_t lo = c == '-' && (first || peekc(p, 1) == ']') ? (adv(p, 1), '-') : read_char(p, 1, &set);
        if (lo < 0) break;
        if (set) {
            if (add_class_escape(r, set)) { p->rc = XG2_NOMEM(); break; }
            continue;
        }
        int32_t hi = lo;
        if (peekc(p, 0) == '-' && peekc(p, 1) != ']' && peekc(p, 1) >= 0) {
            adv(p, 1);
            hi = read_char(p, 1, &set);
            if (hi < 0) break;
            if (set) { perr(p, "a class escape cannot end a range"); break; }
            if (hi < lo) { perr(p, "character range is reversed (U+%04X > U+%04X)", lo, hi); break; }
        }
        if (add_range(r, (uint32_t)lo, (uint32_t)hi)) { p->rc = XG2_NOMEM(); break; }
    }
    return p->rc ? 0 : xg2__ir_class(p->ir, r->a, r->n / 2, negated);
}

static int64_t parse_int(parser *p) {
    skip_ws(p);
    int c = peekc(p, 0);
    if (c < '0' || c > '9') {
        char b[32];
        perr(p, "expected a number, found %s", describe(p, b, sizeof b));
        return -1;
    }
    int64_t v = 0;
    while ((c = peekc(p, 0)) >= '0' && c <= '9') {
        v = v * 10 + (c - '0');
        if (v > XG2_MAX_REPEAT) {
            p->rc = xg2__fail(XG2_ERR_LIMIT,
                              "EBNF error at line %u, column %u: repetition bound exceeds the limit of %d",
                              p->line, p->col, XG2_MAX_REPEAT);
            return -1;
        }
        adv(p, 1);
    }
    return v;
}

static uint32_t parse_choices(parser *p);

/* Macro arguments are parsed for syntax; values are not kept yet. */
static int skip_macro_value(parser *p) {
    skip_ws(p);
    int c = peekc(p, 0);
    char b[32];
    if (c == '"') { parse_string(p); return p->rc; }
    if ((c >= '0' && c <= '9') || c == '-') {
        if (c == '-') adv(p, 1);
        return parse_int(p) < 0 ? p->rc : 0;
    }
    if (is_name_start(c)) { adv(p, name_len_at(p, p->i)); return 0; }
    if (c == '(') {
        if (++p->depth > XG2_MAX_NEST_DEPTH) return perr(p, "nesting deeper than %d", XG2_MAX_NEST_DEPTH);
        adv(p, 1);
        skip_ws(p);
        while (!p->rc && peekc(p, 0) != ')') {
            skip_macro_value(p);
            skip_ws(p);
            if (peekc(p, 0) == ',') adv(p, 1);
            else if (peekc(p, 0) != ')') return perr(p, "expected ',' or ')', found %s", describe(p, b, sizeof b));
            skip_ws(p);
        }
        adv(p, 1);
        p->depth--;
        return p->rc;
    }
    return perr(p, "expected a macro argument, found %s", describe(p, b, sizeof b));
}

static uint32_t parse_macro(parser *p, const char *name) {
    char b[32];
    uint32_t n_args = 0;
    adv(p, 1); /* '(' */
    skip_ws(p);
    while (!p->rc && peekc(p, 0) != ')') {
        size_t k = name_len_at(p, p->i);
        if (k) {
            size_t j = p->i + k;
            while (j < p->n && (p->s[j] == ' ' || p->s[j] == '\t')) j++;
            if (j < p->n && p->s[j] == '=') { adv(p, j + 1 - p->i); }
        }
        if (skip_macro_value(p)) break;
        n_args++;
        skip_ws(p);
        if (peekc(p, 0) == ',') { adv(p, 1); skip_ws(p); }
        else if (peekc(p, 0) != ')') { perr(p, "expected ',' or ')' in %s(...), found %s", name, describe(p, b, sizeof b)); break; }
    }
    if (p->rc) return 0;
    adv(p, 1);
    return xg2__ir_macro(p->ir, name, n_args);
}

XG2_HIDDEN int xg2__regex_to_ir(xg2_ir *ir, const uint8_t *pattern, size_t len, uint32_t *out);

/* Regex("pattern"): the string's value (after EBNF unescaping) is the pattern. */
static uint32_t parse_regex(parser *p) {
    char b[32];
    uint32_t line = p->line, col = p->col;
    adv(p, 1); /* '(' */
    skip_ws(p);
    if (peekc(p, 0) != '"') { perr(p, "Regex(...) takes one string literal, found %s", describe(p, b, sizeof b)); return 0; }
    xg2_charvec pat = {0};
    uint32_t id = 0;
    if (read_string(p, &pat)) goto out;
    skip_ws(p);
    if (peekc(p, 0) != ')') { perr(p, "expected ')' after the Regex pattern, found %s", describe(p, b, sizeof b)); goto out; }
    adv(p, 1);
    int rc = xg2__regex_to_ir(p->ir, (const uint8_t *)pat.a, pat.n, &id);
    if (rc) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s", xg2_last_error());
        p->rc = xg2__fail(rc, "EBNF error at line %u, column %u: %s", line, col, msg);
        id = 0;
    }
out:
    vec_free(&pat);
    return id;
}

static const char *const macros[] = {"Regex"};

static uint32_t parse_quantified(parser *p);

/* Words of StringExcept, sorted by their bytes (qsort has no context argument). */
static _Thread_local const uint8_t *word_bytes;
static int cmp_word(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    uint32_t n = x[1] < y[1] ? x[1] : y[1];
    int c = n ? memcmp(word_bytes + x[0], word_bytes + y[0], n) : 0;
    return c ? c : (x[1] > y[1]) - (x[1] < y[1]);
}

/* StringExcept(any, one, escape, "word", ...): see ir.h. */
static uint32_t parse_string_except(parser *p) {
    char b[32];
    uint32_t args[3], id = 0;
    xg2_u32vec words = {0};
    xg2_charvec w = {0};
    uint64_t total = 0;
    adv(p, 1); /* '(' */
    for (int i = 0; i < 3 && !p->rc; i++) {
        skip_ws(p);
        args[i] = parse_quantified(p);
        skip_ws(p);
        if (!p->rc && peekc(p, 0) != ',')
            perr(p, "StringExcept(any, one, escape, \"word\", ...) needs three expressions and at least one word, found %s",
                 describe(p, b, sizeof b));
        adv(p, 1);
    }
    while (!p->rc) {
        skip_ws(p);
        if (peekc(p, 0) != '"') { perr(p, "expected a word (a string literal) in StringExcept(...), found %s", describe(p, b, sizeof b)); break; }
        w.n = 0;
        if (read_string(p, &w)) break;
        for (uint32_t k = 0; k < w.n; k++) {
            uint8_t c = (uint8_t)w.a[k];
            if (c < 0x20 || c > 0x7E || c == '"' || c == '\\') {
                perr(p, "the words of StringExcept(...) are printable ASCII other than quote and backslash");
                break;
            }
        }
        total += w.n;
        if (!p->rc && (words.n / 2 >= XG2_MAX_EXCEPT_WORDS || total > XG2_MAX_EXCEPT_BYTES)) {
            p->rc = xg2__fail(XG2_ERR_LIMIT, "EBNF error at line %u, column %u: StringExcept(...) has more than %d words or %d bytes",
                              p->line, p->col, XG2_MAX_EXCEPT_WORDS, XG2_MAX_EXCEPT_BYTES);
            break;
        }
        if (p->rc) break;
        xg2_ir *ir = p->ir;
        if (vec_reserve(&ir->bytes, (uint64_t)ir->bytes.n + w.n) || vec_push(&words, ir->bytes.n) || vec_push(&words, w.n)) {
            p->rc = XG2_NOMEM();
            break;
        }
        if (w.n) memcpy(ir->bytes.a + ir->bytes.n, w.a, w.n);
        ir->bytes.n += w.n;
        skip_ws(p);
        if (peekc(p, 0) == ',') { adv(p, 1); continue; }
        if (peekc(p, 0) == ')') { adv(p, 1); break; }
        perr(p, "expected ',' or ')' in StringExcept(...), found %s", describe(p, b, sizeof b));
    }
    if (!p->rc && p->ir->err) p->rc = XG2_NOMEM();
    if (!p->rc) {
        uint32_t n = words.n / 2, k = 0;
        word_bytes = p->ir->bytes.a;
        qsort(words.a, n, 2 * sizeof(uint32_t), cmp_word);
        for (uint32_t i = 0; i < n; i++) /* distinct */
            if (!k || cmp_word(words.a + 2 * (k - 1), words.a + 2 * i)) {
                words.a[2 * k] = words.a[2 * i];
                words.a[2 * k + 1] = words.a[2 * i + 1];
                k++;
            }
        id = xg2__ir_except(p->ir, args, words.a, k);
    }
    vec_free(&words);
    vec_free(&w);
    return p->rc ? 0 : id;
}

/* Append a string literal to ir->bytes: (offset, length) into out; 0 or p->rc. */
static int take_string(parser *p, xg2_charvec *w, xg2_u32vec *out, const char *what) {
    char b[32];
    w->n = 0;
    if (peekc(p, 0) != '"') return perr(p, "expected %s (a string literal), found %s", what, describe(p, b, sizeof b));
    uint32_t line = p->line, col = p->col;
    if (read_string(p, w)) return p->rc;
    if (!w->n) { p->line = line; p->col = col; return perr(p, "%s must not be empty", what); }
    xg2_ir *ir = p->ir;
    if (vec_reserve(&ir->bytes, (uint64_t)ir->bytes.n + w->n) || vec_push(out, ir->bytes.n) || vec_push(out, w->n))
        return p->rc = XG2_NOMEM();
    memcpy(ir->bytes.a + ir->bytes.n, w->a, w->n);
    ir->bytes.n += w->n;
    return 0;
}

/* TagDispatch's named arguments: loop_after_dispatch=true|false, excludes=("x", ...). */
static int tag_dispatch_option(parser *p, int *loop, xg2_u32vec *excl, int *seen, xg2_charvec *w) {
    char b[32];
    size_t k = name_len_at(p, p->i);
    int which = k == 19 && !memcmp(p->s + p->i, "loop_after_dispatch", 19) ? 1 : k == 8 && !memcmp(p->s + p->i, "excludes", 8) ? 2 : 0;
    if (!which)
        return perr(p, "TagDispatch(...) takes (\"trigger\", rule) pairs, loop_after_dispatch= and excludes=; found '%.*s'",
                    (int)(k > 40 ? 40 : k), p->s + p->i);
    if (*seen & which) return perr(p, "%s is given twice in TagDispatch(...)", which == 1 ? "loop_after_dispatch" : "excludes");
    *seen |= which;
    adv(p, k);
    skip_ws(p);
    if (peekc(p, 0) != '=') return perr(p, "expected '=' after the argument name, found %s", describe(p, b, sizeof b));
    adv(p, 1);
    skip_ws(p);
    if (which == 1) {
        size_t v = name_len_at(p, p->i);
        if (v == 4 && !memcmp(p->s + p->i, "true", 4)) *loop = 1;
        else if (v == 5 && !memcmp(p->s + p->i, "false", 5)) *loop = 0;
        else return perr(p, "loop_after_dispatch must be true or false");
        adv(p, v);
        return 0;
    }
    if (peekc(p, 0) != '(') return perr(p, "excludes must be a tuple of strings (\"x\", ...), found %s", describe(p, b, sizeof b));
    adv(p, 1);
    for (;;) { /* (a trailing comma is allowed, as in XGrammar) */
        skip_ws(p);
        if (peekc(p, 0) == ')') break;
        if (take_string(p, w, excl, "an excluded string")) return p->rc;
        skip_ws(p);
        if (peekc(p, 0) == ',') { adv(p, 1); continue; }
        if (peekc(p, 0) != ')') return perr(p, "expected ',' or ')' in excludes=(...), found %s", describe(p, b, sizeof b));
    }
    adv(p, 1);
    return 0;
}

/* ("trigger", rule) */
static int tag_dispatch_pair(parser *p, xg2_u32vec *trig, xg2_charvec *w) {
    char b[32];
    adv(p, 1); /* '(' */
    skip_ws(p);
    if (take_string(p, w, trig, "a trigger")) return p->rc;
    skip_ws(p);
    if (peekc(p, 0) != ',') return perr(p, "each TagDispatch element is a pair (\"trigger\", rule); found %s", describe(p, b, sizeof b));
    adv(p, 1);
    skip_ws(p);
    size_t k = name_len_at(p, p->i);
    if (!k) return perr(p, "expected a rule name after the trigger, found %s", describe(p, b, sizeof b));
    uint32_t rule = xg2__ir_rule_id(p->ir, p->s + p->i, k, p->line, p->col);
    if (p->ir->err) return p->rc = p->ir->err == XG2_ERR_LIMIT ? xg2__fail(XG2_ERR_LIMIT, "more than %d rules", XG2_MAX_RULES) : XG2_NOMEM();
    if (vec_push(trig, rule)) return p->rc = XG2_NOMEM();
    adv(p, k);
    skip_ws(p);
    if (peekc(p, 0) == ',') { adv(p, 1); skip_ws(p); }
    if (peekc(p, 0) != ')') return perr(p, "each TagDispatch element is a pair (\"trigger\", rule); found %s", describe(p, b, sizeof b));
    adv(p, 1);
    return 0;
}

/* TagDispatch(("trigger", rule), ..., loop_after_dispatch=true, excludes=("x", ...))
 * (XGrammar 0.2.8's syntax; see ir.h and tag_dispatch.c), lifted into a rule
 * of its own.  (line, col): where its name is, for errors found after parsing. */
static uint32_t parse_tag_dispatch(parser *p, uint32_t line, uint32_t col) {
    char b[32];
    xg2_u32vec trig = {0}, excl = {0};
    xg2_charvec w = {0};
    int loop = 1, seen = 0;
    uint32_t id = 0;
    adv(p, 1); /* '(' */
    skip_ws(p);
    while (!p->rc && peekc(p, 0) != ')') {
        if (peekc(p, 0) == '(') tag_dispatch_pair(p, &trig, &w);
        else if (name_len_at(p, p->i)) tag_dispatch_option(p, &loop, &excl, &seen, &w);
        else perr(p, "expected a (\"trigger\", rule) pair or a named argument in TagDispatch(...), found %s", describe(p, b, sizeof b));
        if (p->rc) break;
        if ((trig.n / 3 + excl.n / 2 > XG2_MAX_DISPATCH_STRINGS)) {
            p->rc = xg2__fail(XG2_ERR_LIMIT, "EBNF error at line %u, column %u: TagDispatch(...) has more than %d triggers and excluded strings",
                              p->line, p->col, XG2_MAX_DISPATCH_STRINGS);
            break;
        }
        skip_ws(p);
        if (peekc(p, 0) == ',') {
            adv(p, 1);
            skip_ws(p);
            if (peekc(p, 0) == ')') perr(p, "expected an argument after ',' in TagDispatch(...)");
        } else if (peekc(p, 0) != ')') {
            perr(p, "expected ',' or ')' in TagDispatch(...), found %s", describe(p, b, sizeof b));
        }
    }
    if (p->rc) goto out;
    adv(p, 1);
    xg2_ir *ir = p->ir;
    uint32_t expr = xg2__ir_dispatch(ir, trig.a, trig.n / 3, excl.a, excl.n / 2, loop);
    if (ir->err) { p->rc = XG2_NOMEM(); goto out; }
    int rc = xg2__dispatch_check(ir, expr);
    if (rc) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s", xg2_last_error());
        p->rc = xg2__fail(rc, "EBNF error at line %u, column %u: %s", line, col, msg);
        goto out;
    }
    char base[240];
    snprintf(base, sizeof base, "%.200s_dispatch", p->cur_rule < ir->rules.n ? xg2__ir_name(ir, p->cur_rule) : "rule");
    uint32_t rule = xg2__ir_new_rule(ir, base, expr);
    if (ir->err) {
        p->rc = ir->err == XG2_ERR_LIMIT ? xg2__fail(XG2_ERR_LIMIT, "more than %d rules", XG2_MAX_RULES) : XG2_NOMEM();
        goto out;
    }
    id = xg2__ir_ref(ir, rule);
out:
    vec_free(&trig);
    vec_free(&excl);
    vec_free(&w);
    return p->rc ? 0 : id;
}

/* Length(body, unit, min[, max]) (see ir.h): lifted into a rule of its own,
 * which its automaton needs (it counts in the parser item). */
static uint32_t parse_length(parser *p) {
    char b[32];
    uint32_t kids[2];
    if (++p->depth > XG2_MAX_NEST_DEPTH) return perr(p, "groups nested deeper than %d", XG2_MAX_NEST_DEPTH), 0;
    adv(p, 1); /* '(' */
    for (int i = 0; i < 2 && !p->rc; i++) {
        skip_ws(p);
        kids[i] = parse_quantified(p); /* (a group for anything longer) */
        skip_ws(p);
        if (!p->rc && peekc(p, 0) != ',')
            perr(p, "Length(body, unit, min, max) needs a body, a unit and a minimum count, found %s", describe(p, b, sizeof b));
        adv(p, 1);
    }
    if (p->rc) return 0;
    int64_t lo = parse_int(p), hi = -1;
    if (lo < 0) return 0;
    skip_ws(p);
    if (peekc(p, 0) == ',') {
        adv(p, 1);
        if ((hi = parse_int(p)) < 0) return 0;
        skip_ws(p);
    }
    if (peekc(p, 0) != ')') { perr(p, "expected ')' to close Length(...), found %s", describe(p, b, sizeof b)); return 0; }
    if (hi >= 0 && hi < lo) { perr(p, "Length(...) has its maximum count %lld below its minimum %lld", (long long)hi, (long long)lo); return 0; }
    adv(p, 1);
    p->depth--;
    xg2_ir *ir = p->ir;
    char base[240];
    snprintf(base, sizeof base, "%.200s_length", p->cur_rule < ir->rules.n ? xg2__ir_name(ir, p->cur_rule) : "rule");
    uint32_t rule = xg2__ir_new_rule(ir, base, xg2__ir_length(ir, kids[0], kids[1], (int32_t)lo, (int32_t)hi));
    if (ir->err) {
        p->rc = ir->err == XG2_ERR_LIMIT ? xg2__fail(XG2_ERR_LIMIT, "more than %d rules", XG2_MAX_RULES) : XG2_NOMEM();
        return 0;
    }
    return xg2__ir_ref(ir, rule);
}

/* ---- token edges (token_edges.c) ---- */

static int rule_limit(parser *p) {
    return p->rc = p->ir->err == XG2_ERR_LIMIT ? xg2__fail(XG2_ERR_LIMIT, "more than %d rules", XG2_MAX_RULES) : XG2_NOMEM();
}

/* One token id (a non-negative integer below 2^31) appended to ids. */
static int take_token_id(parser *p, xg2_u32vec *ids, const char *what) {
    char b[32];
    skip_ws(p);
    int c = peekc(p, 0);
    if (c < '0' || c > '9') return perr(p, "%s takes non-negative integer token ids, found %s", what, describe(p, b, sizeof b));
    uint64_t v = 0;
    while ((c = peekc(p, 0)) >= '0' && c <= '9') {
        v = v * 10 + (uint64_t)(c - '0');
        if (v > INT32_MAX) return perr(p, "a token id in %s exceeds %d", what, INT32_MAX);
        adv(p, 1);
    }
    if (ids->n >= XG2_MAX_TOKEN_IDS)
        return p->rc = xg2__fail(XG2_ERR_LIMIT, "EBNF error at line %u, column %u: %s has more than %d token ids",
                                 p->line, p->col, what, XG2_MAX_TOKEN_IDS);
    if (vec_push(ids, (uint32_t)v)) return p->rc = XG2_NOMEM();
    return 0;
}

static uint64_t token_hash(const uint32_t *ids, uint32_t n, int exclude) {
    uint64_t h = 0x746f6b656e0001ull ^ (uint64_t)(exclude != 0);
    for (uint32_t i = 0; i < n; i++) h = xg2__mix64(h, ids[i]);
    return h;
}

/* The slot of the Token rule with these (sorted, distinct) ids in p->tok_slot,
 * hashed h: its rule id + 1, or 0 where it is to go; NULL without memory (then
 * the rule is not shared). */
static uint32_t *token_slot(parser *p, uint64_t h, const uint32_t *ids, uint32_t n, int exclude) {
    const xg2_ir *ir = p->ir;
    if (2 * (uint64_t)(p->n_tok + 1) > p->tok_cap) { /* (at most half full) */
        uint32_t cap = p->tok_cap ? 2 * p->tok_cap : 16, *tab = xg2__calloc(cap, sizeof *tab);
        if (!tab) return NULL;
        for (uint32_t k = 0; k < p->tok_cap; k++) {
            uint32_t r = p->tok_slot[k];
            if (!r) continue;
            const xg2_expr *e = &ir->exprs.a[ir->rules.a[r - 1].body];
            uint32_t j = (uint32_t)token_hash(ir->pool.a + e->a, e->n, e->flags & XF_EXCLUDE) & (cap - 1);
            while (tab[j]) j = (j + 1) & (cap - 1);
            tab[j] = r;
        }
        xg2__free(p->tok_slot);
        p->tok_slot = tab;
        p->tok_cap = cap;
    }
    for (uint32_t j = (uint32_t)h & (p->tok_cap - 1);; j = (j + 1) & (p->tok_cap - 1)) {
        uint32_t r = p->tok_slot[j];
        if (!r) return &p->tok_slot[j];
        const xg2_expr *e = &ir->exprs.a[ir->rules.a[r - 1].body];
        if (e->n == n && ((e->flags & XF_EXCLUDE) != 0) == (exclude != 0) &&
            (!n || !memcmp(ir->pool.a + e->a, ids, sizeof *ids * n)))
            return &p->tok_slot[j];
    }
}

/* A reference to the rule whose body is Token(ids) (ExcludeToken if exclude),
 * made on first use; ids are sorted and made distinct here. */
static uint32_t token_rule(parser *p, xg2_u32vec *ids, int exclude, uint32_t line, uint32_t col) {
    xg2__sort_u32(ids->a, ids->n);
    uint32_t n = 0;
    for (uint32_t i = 0; i < ids->n; i++)
        if (!n || ids->a[n - 1] != ids->a[i]) ids->a[n++] = ids->a[i];
    xg2_ir *ir = p->ir;
    uint32_t *slot = token_slot(p, token_hash(ids->a, n, exclude), ids->a, n, exclude);
    if (slot && *slot) return xg2__ir_ref(ir, *slot - 1);
    char base[240]; /* (numbered: a name free at once, however many there are) */
    snprintf(base, sizeof base, "%.200s_%s%u", p->cur_rule < ir->rules.n ? xg2__ir_name(ir, p->cur_rule) : "rule",
             exclude ? "exclude_token" : "token", ++p->n_tok);
    uint32_t rule = xg2__ir_new_rule(ir, base, xg2__ir_token(ir, ids->a, n, exclude));
    if (ir->err) { rule_limit(p); return 0; }
    ir->rules.a[rule].line = line; /* (where the macro is: for the vocabulary's range check) */
    ir->rules.a[rule].col = col;
    if (slot) *slot = rule + 1;
    return xg2__ir_ref(ir, rule);
}

/* Token(id, ...) / ExcludeToken(id, ...): XGrammar's syntax; ExcludeToken()
 * (no ids) is any plain token, as XGrammar prints it. */
static uint32_t parse_token(parser *p, int exclude, uint32_t line, uint32_t col) {
    char b[32];
    const char *what = exclude ? "ExcludeToken(...)" : "Token(...)";
    xg2_u32vec ids = {0};
    uint32_t id = 0;
    adv(p, 1); /* '(' */
    for (;;) {
        skip_ws(p);
        if (peekc(p, 0) == ')') break;
        if (take_token_id(p, &ids, what)) goto out;
        skip_ws(p);
        if (peekc(p, 0) == ',') { adv(p, 1); continue; }
        if (peekc(p, 0) != ')') { perr(p, "expected ',' or ')' in %s, found %s", what, describe(p, b, sizeof b)); goto out; }
    }
    if (!exclude && !ids.n) { perr(p, "Token() needs at least one token id"); goto out; }
    adv(p, 1);
    id = token_rule(p, &ids, exclude, line, col);
out:
    vec_free(&ids);
    return p->rc ? 0 : id;
}

/* No trigger twice, none excluded (XGrammar's checks), in n log n. */
static int token_dispatch_check(parser *p, const xg2_u32vec *trig, const xg2_u32vec *excl) {
    xg2_u32vec t = {0}, x = {0};
    if (vec_reserve(&t, trig->n + 1) || vec_reserve(&x, excl->n + 1)) { vec_free(&t); return p->rc = XG2_NOMEM(); }
    if (trig->n) memcpy(t.a, trig->a, sizeof(uint32_t) * trig->n);
    if (excl->n) memcpy(x.a, excl->a, sizeof(uint32_t) * excl->n);
    xg2__sort_u32(t.a, trig->n);
    xg2__sort_u32(x.a, excl->n);
    for (uint32_t i = 0, j = 0; i < trig->n && !p->rc; i++) {
        if (i && t.a[i] == t.a[i - 1]) perr(p, "TokenTagDispatch(...) has the trigger token %u twice", t.a[i]);
        while (j < excl->n && x.a[j] < t.a[i]) j++;
        if (j < excl->n && x.a[j] == t.a[i]) perr(p, "TokenTagDispatch(...): the trigger token %u is also excluded", t.a[i]);
    }
    vec_free(&t);
    vec_free(&x);
    return p->rc;
}

/* TokenTagDispatch((id, rule), ..., loop_after_dispatch=true, excludes=(id, ...))
 * (XGrammar 0.2.8): any token but the triggers and the excluded ones (and no
 * special or stop token) until a trigger, then its rule; then again (loop) or
 * the end.  Written as (E | Token(t1) r1 | ...)* with E = ExcludeToken(the
 * triggers and excludes), or E* (Token(t1) r1 | ...)? without the loop. */
static uint32_t parse_token_dispatch(parser *p, uint32_t line, uint32_t col) {
    char b[32];
    xg2_u32vec trig = {0}, rules = {0}, excl = {0}, kids = {0};
    int loop = 1, seen = 0;
    uint32_t id = 0;
    xg2_ir *ir = p->ir;
    adv(p, 1); /* '(' */
    for (;;) {
        skip_ws(p);
        if (peekc(p, 0) == ')') break;
        if (peekc(p, 0) == '(') { /* (id, rule) */
            adv(p, 1);
            if (take_token_id(p, &trig, "TokenTagDispatch(...)")) goto out;
            skip_ws(p);
            if (peekc(p, 0) != ',') { perr(p, "each TokenTagDispatch element is a pair (token_id, rule); found %s", describe(p, b, sizeof b)); goto out; }
            adv(p, 1);
            skip_ws(p);
            size_t k = name_len_at(p, p->i);
            if (!k) { perr(p, "expected a rule name after the trigger token, found %s", describe(p, b, sizeof b)); goto out; }
            uint32_t r = xg2__ir_rule_id(ir, p->s + p->i, k, p->line, p->col);
            if (ir->err) { rule_limit(p); goto out; }
            if (vec_push(&rules, r)) { p->rc = XG2_NOMEM(); goto out; }
            adv(p, k);
            skip_ws(p);
            if (peekc(p, 0) == ',') { adv(p, 1); skip_ws(p); }
            if (peekc(p, 0) != ')') { perr(p, "each TokenTagDispatch element is a pair (token_id, rule); found %s", describe(p, b, sizeof b)); goto out; }
            adv(p, 1);
        } else {
            size_t k = name_len_at(p, p->i);
            int which = k == 19 && !memcmp(p->s + p->i, "loop_after_dispatch", 19) ? 1 : k == 8 && !memcmp(p->s + p->i, "excludes", 8) ? 2 : 0;
            if (!which) { perr(p, "TokenTagDispatch(...) takes (token_id, rule) pairs, loop_after_dispatch= and excludes=; found %s", describe(p, b, sizeof b)); goto out; }
            if (seen & which) { perr(p, "%s is given twice in TokenTagDispatch(...)", which == 1 ? "loop_after_dispatch" : "excludes"); goto out; }
            seen |= which;
            adv(p, k);
            skip_ws(p);
            if (peekc(p, 0) != '=') { perr(p, "expected '=' after the argument name, found %s", describe(p, b, sizeof b)); goto out; }
            adv(p, 1);
            skip_ws(p);
            if (which == 1) {
                size_t v = name_len_at(p, p->i);
                if (v == 4 && !memcmp(p->s + p->i, "true", 4)) loop = 1;
                else if (v == 5 && !memcmp(p->s + p->i, "false", 5)) loop = 0;
                else { perr(p, "loop_after_dispatch must be true or false"); goto out; }
                adv(p, v);
            } else {
                if (peekc(p, 0) != '(') { perr(p, "excludes must be a tuple of token ids (id, ...), found %s", describe(p, b, sizeof b)); goto out; }
                adv(p, 1);
                for (;;) {
                    skip_ws(p);
                    if (peekc(p, 0) == ')') break;
                    if (take_token_id(p, &excl, "excludes=(...)")) goto out;
                    skip_ws(p);
                    if (peekc(p, 0) == ',') { adv(p, 1); continue; }
                    if (peekc(p, 0) != ')') { perr(p, "expected ',' or ')' in excludes=(...), found %s", describe(p, b, sizeof b)); goto out; }
                }
                adv(p, 1);
            }
        }
        if (trig.n + excl.n > XG2_MAX_TOKEN_IDS) {
            p->rc = xg2__fail(XG2_ERR_LIMIT, "EBNF error at line %u, column %u: TokenTagDispatch(...) has more than %d token ids",
                              p->line, p->col, XG2_MAX_TOKEN_IDS);
            goto out;
        }
        skip_ws(p);
        if (peekc(p, 0) == ',') { adv(p, 1); continue; }
        if (peekc(p, 0) != ')') { perr(p, "expected ',' or ')' in TokenTagDispatch(...), found %s", describe(p, b, sizeof b)); goto out; }
    }
    if (token_dispatch_check(p, &trig, &excl)) goto out;
    adv(p, 1); /* ')' */
    for (uint32_t i = 0; i < rules.n; i++) ir->rules.a[rules.a[i]].tagged = 1;
    /* the free token, then each trigger followed by its rule */
    for (uint32_t i = 0; i < trig.n; i++)
        if (vec_push(&excl, trig.a[i])) { p->rc = XG2_NOMEM(); goto out; }
    uint32_t free_tok = token_rule(p, &excl, 1, line, col);
    if (p->rc) goto out;
    for (uint32_t i = 0; i < trig.n; i++) {
        xg2_u32vec one = {0};
        if (vec_push(&one, trig.a[i])) { p->rc = XG2_NOMEM(); goto out; }
        uint32_t pair[2] = {token_rule(p, &one, 0, line, col), xg2__ir_ref(ir, rules.a[i])};
        vec_free(&one);
        if (p->rc) goto out;
        if (vec_push(&kids, xg2__ir_list(ir, XE_SEQ, pair, 2))) { p->rc = XG2_NOMEM(); goto out; }
    }
    if (loop) {
        if (vec_push(&kids, free_tok)) { p->rc = XG2_NOMEM(); goto out; }
        id = xg2__ir_repeat(ir, xg2__ir_list(ir, XE_CHOICE, kids.a, kids.n), 0, -1);
    } else {
        uint32_t seq[2] = {xg2__ir_repeat(ir, free_tok, 0, -1), 0};
        uint32_t n = 1;
        if (kids.n) seq[n++] = xg2__ir_repeat(ir, xg2__ir_list(ir, XE_CHOICE, kids.a, kids.n), 0, 1);
        id = xg2__ir_list(ir, XE_SEQ, seq, n);
    }
    if (ir->err) rule_limit(p);
out:
    vec_free(&trig);
    vec_free(&rules);
    vec_free(&excl);
    vec_free(&kids);
    return p->rc ? 0 : id;
}

static uint32_t parse_element(parser *p) {
    char b[32];
    skip_ws(p);
    int c = peekc(p, 0);
    if (c == '"') return parse_string(p);
    if (c == '[') return parse_class(p);
    if (c == '(') {
        if (peekc(p, 1) == '=') { perr(p, "a lookahead assertion (= ...) may only end a rule"); return 0; }
        if (++p->depth > XG2_MAX_NEST_DEPTH) {
            p->rc = xg2__fail(XG2_ERR_LIMIT, "EBNF error at line %u, column %u: groups nested deeper than %d",
                              p->line, p->col, XG2_MAX_NEST_DEPTH);
            return 0;
        }
        adv(p, 1);
        skip_ws(p);
        uint32_t id = 0;
        if (peekc(p, 0) != ')') id = parse_choices(p);
        if (p->rc) return 0;
        skip_ws(p);
        if (peekc(p, 0) != ')') { perr(p, "expected ')', found %s", describe(p, b, sizeof b)); return 0; }
        adv(p, 1);
        p->depth--;
        return id;
    }
    size_t k = name_len_at(p, p->i);
    if (k) {
        char name[256];
        if (k >= sizeof name) { perr(p, "name longer than 255 characters"); return 0; }
        memcpy(name, p->s + p->i, k);
        name[k] = 0;
        uint32_t line = p->line, col = p->col;
        adv(p, k);
        if (peekc(p, 0) == '(') {
            if (!strcmp(name, "Regex")) return parse_regex(p);
            if (!strcmp(name, "StringExcept")) return parse_string_except(p);
            if (!strcmp(name, "Length")) return parse_length(p);
            if (!strcmp(name, "TagDispatch")) return parse_tag_dispatch(p, line, col);
            if (!strcmp(name, "Token")) return parse_token(p, 0, line, col);
            if (!strcmp(name, "ExcludeToken")) return parse_token(p, 1, line, col);
            if (!strcmp(name, "TokenTagDispatch")) return parse_token_dispatch(p, line, col);
            for (size_t m = 0; m < sizeof macros / sizeof *macros; m++)
                if (!strcmp(name, macros[m])) return parse_macro(p, name);
        }
        return xg2__ir_ref(p->ir, xg2__ir_rule_id(p->ir, name, k, line, col));
    }
    perr(p, "expected an element (a string, a character class, a rule name or a group), found %s",
         describe(p, b, sizeof b));
    return 0;
}

static uint32_t parse_quantified(parser *p) {
    uint32_t id = parse_element(p);
    char b[32];
    while (!p->rc) {
        skip_ws(p);
        int c = peekc(p, 0);
        if (c == '*') { adv(p, 1); id = xg2__ir_repeat(p->ir, id, 0, -1); }
        else if (c == '+') { adv(p, 1); id = xg2__ir_repeat(p->ir, id, 1, -1); }
        else if (c == '?') { adv(p, 1); id = xg2__ir_repeat(p->ir, id, 0, 1); }
        else if (c == '{') {
            adv(p, 1);
            int64_t lo = parse_int(p), hi;
            if (lo < 0) return 0;
            skip_ws(p);
            if (peekc(p, 0) == ',') {
                adv(p, 1);
                skip_ws(p);
                if (peekc(p, 0) == '}') hi = -1;
                else if ((hi = parse_int(p)) < 0) return 0;
            } else {
                hi = lo;
            }
            skip_ws(p);
            if (peekc(p, 0) != '}') { perr(p, "expected '}' to close the repetition, found %s", describe(p, b, sizeof b)); return 0; }
            if (hi >= 0 && hi < lo) { perr(p, "repetition {%lld,%lld} has its upper bound below the lower", (long long)lo, (long long)hi); return 0; }
            adv(p, 1);
            id = xg2__ir_repeat(p->ir, id, (int32_t)lo, (int32_t)hi);
        } else {
            break;
        }
    }
    return id;
}

static int at_sequence_end(parser *p) {
    skip_ws(p);
    int c = peekc(p, 0);
    return c < 0 || c == '|' || c == ')' || (c == '(' && peekc(p, 1) == '=') || at_rule_start(p);
}

static uint32_t parse_sequence(parser *p) {
    uint32_t base = p->kids.n;
    char b[32];
    if (at_sequence_end(p)) {
        perr(p, "expected an element, found %s", describe(p, b, sizeof b));
        return 0;
    }
    while (!p->rc && !at_sequence_end(p)) {
        uint32_t id = parse_quantified(p);
        if (!p->rc && vec_push(&p->kids, id)) p->rc = XG2_NOMEM();
    }
    uint32_t id = p->rc ? 0 : xg2__ir_list(p->ir, XE_SEQ, p->kids.a + base, p->kids.n - base);
    p->kids.n = base;
    return id;
}

static uint32_t parse_choices(parser *p) {
    uint32_t base = p->kids.n;
    for (;;) {
        uint32_t id = parse_sequence(p);
        if (p->rc) break;
        if (vec_push(&p->kids, id)) { p->rc = XG2_NOMEM(); break; }
        if ((p->rc = xg2__budget_check("parsing rule", xg2__ir_name(p->ir, p->cur_rule)))) break;
        skip_ws(p);
        if (peekc(p, 0) != '|') break;
        adv(p, 1);
    }
    uint32_t id = p->rc ? 0 : xg2__ir_list(p->ir, XE_CHOICE, p->kids.a + base, p->kids.n - base);
    p->kids.n = base;
    return id;
}

/* XGrammar's rule attributes [max_tokens=N, max_chars=M] (ir.h); the others
 * XGrammar has (capture, lazy, temperature, ...) are refused by name. */
static int parse_rule_attrs(parser *p, uint32_t r) {
    char b[32];
    int seen = 0;
    adv(p, 1); /* '[' */
    for (;;) {
        skip_ws(p);
        size_t k = name_len_at(p, p->i);
        int which = k == 10 && !memcmp(p->s + p->i, "max_tokens", 10) ? 1 : k == 9 && !memcmp(p->s + p->i, "max_chars", 9) ? 2 : 0;
        if (!which)
            return k ? perr(p, "the rule attribute '%.*s' is not supported (max_tokens and max_chars are)", (int)(k > 40 ? 40 : k), p->s + p->i)
                     : perr(p, "expected a rule attribute, found %s", describe(p, b, sizeof b));
        if (seen & which) return perr(p, "the rule attribute %s is given twice", which == 1 ? "max_tokens" : "max_chars");
        seen |= which;
        adv(p, k);
        skip_ws(p);
        if (peekc(p, 0) != '=') return perr(p, "expected '=' after the attribute name, found %s", describe(p, b, sizeof b));
        adv(p, 1);
        skip_ws(p);
        int c = peekc(p, 0);
        if (c < '0' || c > '9') return perr(p, "%s takes a non-negative integer, found %s", which == 1 ? "max_tokens" : "max_chars", describe(p, b, sizeof b));
        int64_t v = 0;
        while ((c = peekc(p, 0)) >= '0' && c <= '9') {
            v = v * 10 + (c - '0');
            if (v > INT32_MAX) return perr(p, "%s exceeds %d", which == 1 ? "max_tokens" : "max_chars", INT32_MAX);
            adv(p, 1);
        }
        if (which == 1) p->ir->rules.a[r].max_tokens = (int32_t)v;
        else p->ir->rules.a[r].max_chars = (int32_t)v;
        skip_ws(p);
        if (peekc(p, 0) == ',') { adv(p, 1); continue; }
        if (peekc(p, 0) != ']') return perr(p, "expected ',' or ']' after a rule attribute, found %s", describe(p, b, sizeof b));
        adv(p, 1);
        skip_ws(p);
        return 0;
    }
}

static int parse_rule(parser *p) {
    char b[32];
    size_t k = name_len_at(p, p->i);
    if (!k) return perr(p, "expected a rule name, found %s", describe(p, b, sizeof b));
    uint32_t line = p->line, col = p->col;
    uint32_t r = xg2__ir_rule_id(p->ir, p->s + p->i, k, line, col);
    if (p->ir->err) return p->rc = p->ir->err == XG2_ERR_LIMIT ? xg2__fail(XG2_ERR_LIMIT, "more than %d rules", XG2_MAX_RULES) : XG2_NOMEM();
    if (p->ir->rules.a[r].defined)
        return perr(p, "rule \"%s\" is defined twice", xg2__ir_name(p->ir, r));
    adv(p, k);
    skip_ws(p);
    if (peekc(p, 0) == '[' && parse_rule_attrs(p, r)) return p->rc;
    if (!(peekc(p, 0) == ':' && peekc(p, 1) == ':' && peekc(p, 2) == '='))
        return perr(p, "expected '::=' after the rule name, found %s", describe(p, b, sizeof b));
    adv(p, 3);
    p->cur_rule = r;
    uint32_t first_new = p->ir->rules.n;
    uint32_t body = parse_choices(p);
    if (p->rc) return p->rc;
    /* A body that is one Length(...), TagDispatch(...) or Token(...) is that rule's own (no
     * rule lifted for it: a printed grammar parses back to the same rules). */
    const xg2_expr *be = &p->ir->exprs.a[body];
    if (be->kind == XE_REF && be->a >= first_new && xg2__own_automaton(p->ir, be->a))
        body = p->ir->rules.a[be->a].body;
    int32_t la = -1;
    skip_ws(p);
    if (peekc(p, 0) == '(' && peekc(p, 1) == '=') {
        adv(p, 2);
        uint32_t id = parse_choices(p);
        if (p->rc) return p->rc;
        skip_ws(p);
        if (peekc(p, 0) != ')') return perr(p, "expected ')' to close the lookahead, found %s", describe(p, b, sizeof b));
        adv(p, 1);
        la = (int32_t)id;
        skip_ws(p);
        if (peekc(p, 0) >= 0 && !at_rule_start(p))
            return perr(p, "a lookahead assertion must end its rule; found %s after it", describe(p, b, sizeof b));
    }
    xg2_rule_ir *ru = &p->ir->rules.a[r];
    ru->body = body;
    ru->lookahead = la;
    ru->defined = 1;
    ru->def = p->ir->n_defs++;
    return 0;
}

/* Parse text into ir (initialised by the caller) and normalise it. */
XG2_HIDDEN int xg2__ebnf_parse(xg2_ir *ir, const char *text, size_t len, const char *root) {
    parser p = {text, len, 0, 1, 1, ir, 0, 0, 0, 0, NULL, 0, {0}, {0}, {0}};
    skip_ws(&p);
    if (peekc(&p, 0) < 0) return xg2__fail(XG2_ERR_GRAMMAR, "the grammar text is empty");
    while (!p.rc && peekc(&p, 0) >= 0) {
        parse_rule(&p);
        skip_ws(&p);
    }
    vec_free(&p.lit);
    vec_free(&p.kids);
    vec_free(&p.cls);
    xg2__free(p.tok_slot);
    if (!p.rc && ir->err) p.rc = ir->err == XG2_ERR_LIMIT ? xg2__fail(XG2_ERR_LIMIT, "more than %d rules", XG2_MAX_RULES) : XG2_NOMEM();
    if (p.rc) return p.rc;
    for (uint32_t r = 0; r < ir->rules.n; r++) {
        const xg2_rule_ir *ru = &ir->rules.a[r];
        if (!ru->defined)
            return xg2__fail(XG2_ERR_GRAMMAR, "EBNF error at line %u, column %u: rule \"%s\" is not defined",
                             ru->line, ru->col, xg2__ir_name(ir, r));
    }
    int32_t root_id = xg2__ir_find_rule(ir, root, strlen(root));
    if (root_id < 0) return xg2__fail(XG2_ERR_GRAMMAR, "the root rule \"%s\" is not defined", root);
    ir->root = (uint32_t)root_id;
    return xg2__ir_normalize(ir);
}

/* The rule names of an EBNF body, for the JSON Schema front-end (which reads
 * the rules a generated body mentions; its regex took ~20x longer).  Names are
 * maximal [A-Za-z_][A-Za-z0-9_.-]* runs outside string literals and character
 * classes; a quote or bracket that closes nowhere is one plain byte, and a
 * backslash escapes any byte but a newline (exactly the former pattern).
 * Writes each name followed by a space into out (up to cap bytes; 2 * len
 * always suffices); returns the bytes that takes, or -1 for a bad argument. */
int64_t xg2_ebnf_rule_names(const char *text, size_t len, char *out, size_t cap) {
    size_t n = 0, i = 0;
    if (!text || (cap && !out)) return -1;
    while (i < len) {
        unsigned char c = (unsigned char)text[i];
        if (c == '"' || c == '[') {
            char close = c == '"' ? '"' : ']';
            size_t j = i + 1;
            while (j < len && text[j] != close) {
                if (text[j] == '\\') {
                    if (j + 1 >= len || text[j + 1] == '\n') { j = len; break; }
                    j++;
                }
                j++;
            }
            i = j < len ? j + 1 : i + 1; /* unterminated: the opener alone */
        } else if (is_name_start(c)) {
            size_t j = i + 1;
            while (j < len && is_name_char((unsigned char)text[j])) j++;
            if (n + (j - i) + 1 <= cap) { memcpy(out + n, text + i, j - i); out[n + (j - i)] = ' '; }
            n += j - i + 1;
            i = j;
        } else {
            i++;
        }
    }
    return (int64_t)n;
}
