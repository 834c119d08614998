/*
 * regex.c -- a regular expression to IR, for the Regex("...") intrinsic.
 *
 *   alternation -> concat ( '|' concat )*
 *   concat      -> quantified*
 *   quantified  -> atom ( '*' | '+' | '?' | '{' n ( ',' m? )? '}' ) '?'?
 *   atom        -> char | '.' | class | escape | '(' ( '?:' | '?P<name>' | '?<name>' )? alternation ')'
 *
 * Semantics are those of Python's re with re.ASCII (and of ECMAScript for the
 * patterns JSON Schema uses): \d \w \s are ASCII classes, '.' is any character
 * but '\n', lazy quantifiers match the same language as greedy ones.  '^' may
 * only start and '$' only end the pattern.  Lookaround, backreferences, \b and
 * inline flags change what a grammar can express and are errors.
 */
#include <stdio.h>

#include "ir.h"

typedef struct {
    const uint8_t *s;
    size_t n, i;
    xg2_ir *ir;
    int depth;
    int rc;
} rx;

static int rerr(rx *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int rerr(rx *p, const char *fmt, ...) {
    if (p->rc) return p->rc;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->rc = xg2__fail(XG2_ERR_GRAMMAR, "invalid regex at position %zu: %s", p->i, msg);
    return p->rc;
}

static int peek(const rx *p, size_t k) { return p->i + k < p->n ? p->s[p->i + k] : -1; }

static int hexv(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One UTF-8 code point of the pattern. */
static int32_t next_cp(rx *p) {
    int c = peek(p, 0);
    int len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || p->i + (size_t)len > p->n) { rerr(p, "invalid UTF-8"); return -1; }
    int32_t v = len == 1 ? c : c & (0x7F >> len);
    for (int k = 1; k < len; k++) {
        int d = peek(p, (size_t)k);
        if ((d & 0xC0) != 0x80) { rerr(p, "invalid UTF-8"); return -1; }
        v = (v << 6) | (d & 0x3F);
    }
    p->i += (size_t)len;
    return v;
}

static int add_range(xg2_u32vec *r, uint32_t lo, uint32_t hi) { return vec_push(r, lo) || vec_push(r, hi); }

/* Append the ranges of \d \w \s (or their negations) to r. */
static int class_escape(xg2_u32vec *r, int e) {
    static const uint32_t d[] = {'0', '9'};
    static const uint32_t w[] = {'0', '9', 'A', 'Z', '_', '_', 'a', 'z'};
    static const uint32_t s[] = {'\t', '\r', ' ', ' '};
    int lower = e >= 'a';
    int k = lower ? e : e + 32;
    const uint32_t *src = k == 'd' ? d : k == 'w' ? w : s;
    uint32_t n = k == 'd' ? 1 : k == 'w' ? 4 : 2;
    if (lower) {
        for (uint32_t j = 0; j < n; j++)
            if (add_range(r, src[2 * j], src[2 * j + 1])) return 1;
        return 0;
    }
    uint32_t next = 0;
    for (uint32_t j = 0; j < n; j++) {
        if (src[2 * j] > next && add_range(r, next, src[2 * j] - 1)) return 1;
        next = src[2 * j + 1] + 1;
    }
    return add_range(r, next, 0x10FFFF);
}

static int32_t escape_body(rx *p, int in_class, int *cls, int c);

/* After a backslash: a code point, or a class letter in *cls. -1 on error. */
static int32_t escape(rx *p, int in_class, int *cls) {
    int c = peek(p, 0);
    size_t start = p->i - 1; /* the backslash: where errors are reported */
    *cls = 0;
    if (c < 0) { p->i = start; rerr(p, "pattern ends with a backslash"); return -1; }
    p->i++;
    int32_t v = escape_body(p, in_class, cls, c);
    if (v < 0 && p->rc) {
        /* Re-report at the backslash (the message is already formatted). */
        char msg[600];
        const char *m = xg2_last_error();
        const char *colon = strstr(m, ": ");
        snprintf(msg, sizeof msg, "%s", colon ? colon + 2 : m);
        p->rc = xg2__fail(p->rc, "invalid regex at position %zu: %s", start, msg);
    }
    return v;
}

/* After "\c": the escape's code point, or a class letter in *cls. */
static int32_t escape_body(rx *p, int in_class, int *cls, int c) {
    switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    case 'a': return 7;
    case '0': { /* octal: \0, \0o, \0oo */
        int32_t v = 0;
        for (int k = 0; k < 2 && peek(p, 0) >= '0' && peek(p, 0) <= '7'; k++) v = v * 8 + (peek(p, 0) - '0'), p->i++;
        return v;
    }
    case 'd': case 'D': case 'w': case 'W': case 's': case 'S': *cls = c; return 0;
    case 'b':
        if (in_class) return 8;
        rerr(p, "\\b (word boundary) cannot be expressed by a grammar");
        return -1;
    case 'B': case 'A': case 'Z': case 'z': case 'G':
        rerr(p, "the anchor \\%c cannot be expressed by a grammar", c);
        return -1;
    case 'x': case 'u': case 'U': {
        int nd = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        int32_t v = 0;
        if (c == 'u' && peek(p, 0) == '{') { /* \u{H..H} */
            p->i++;
            int k = 0;
            while (peek(p, 0) >= 0 && peek(p, 0) != '}' && k < 7) {
                int h = hexv(peek(p, 0));
                if (h < 0) break;
                v = v * 16 + h;
                p->i++;
                k++;
            }
            if (peek(p, 0) != '}' || k == 0 || v > 0x10FFFF) { rerr(p, "bad \\u{...} escape"); return -1; }
            p->i++;
            return v;
        }
        for (int k = 0; k < nd; k++) {
            int h = hexv(peek(p, 0));
            if (h < 0) { rerr(p, "\\%c needs %d hex digits", c, nd); return -1; }
            v = v * 16 + h;
            p->i++;
        }
        if (v > 0x10FFFF) { rerr(p, "code point beyond U+10FFFF"); return -1; }
        return v;
    }
    case 'p': case 'P':
        rerr(p, "Unicode property classes (\\%c{...}) are not supported", c);
        return -1;
    default:
        /* \ooo with three octal digits is a character; other \digit are backreferences. */
        if (c >= '1' && c <= '7' && peek(p, 0) >= '0' && peek(p, 0) <= '7' && peek(p, 1) >= '0' && peek(p, 1) <= '7') {
            int32_t v = (c - '0') * 64 + (peek(p, 0) - '0') * 8 + (peek(p, 1) - '0');
            if (v > 0377) { rerr(p, "octal escape above \\377"); return -1; }
            p->i += 2;
            return v;
        }
        if (c >= '1' && c <= '9') { rerr(p, "backreferences cannot be expressed by a grammar"); return -1; }
        if (c == 'k') { rerr(p, "named backreferences cannot be expressed by a grammar"); return -1; }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) { rerr(p, "unknown escape \\%c", c); return -1; }
        p->i--;
        return next_cp(p); /* an escaped punctuation or non-ASCII character stands for itself */
    }
}

static uint32_t parse_class(rx *p) {
    xg2_u32vec r = {0};
    int negated = 0;
    p->i++; /* '[' */
    if (peek(p, 0) == '^') { negated = 1; p->i++; }
    for (int first = 1;; first = 0) {
        int c = peek(p, 0);
        if (c < 0) { rerr(p, "unterminated character class"); break; }
        if (c == ']' && !first) { p->i++; break; }
        int cls = 0;
        int32_t lo;
        if (c == '\\') { p->i++; lo = escape(p, 1, &cls); }
        else if (c == '[' && peek(p, 1) == ':') { rerr(p, "POSIX classes like [:alpha:] are not supported"); break; }
        else lo = next_cp(p);
        if (lo < 0) break;
        if (cls) {
            if (peek(p, 0) == '-' && peek(p, 1) != ']' && peek(p, 1) >= 0) { rerr(p, "bad character range: a class escape cannot start a range"); break; }
            if (class_escape(&r, cls)) { p->rc = XG2_NOMEM(); break; }
            continue;
        }
        int32_t hi = lo;
        if (peek(p, 0) == '-' && peek(p, 1) != ']' && peek(p, 1) >= 0) {
            p->i++;
            if (peek(p, 0) == '\\') { p->i++; hi = escape(p, 1, &cls); }
            else hi = next_cp(p);
            if (hi < 0) break;
            if (cls) { rerr(p, "a class escape cannot end a range"); break; }
            if (hi < lo) { rerr(p, "character range is reversed"); break; }
        }
        if (add_range(&r, (uint32_t)lo, (uint32_t)hi)) { p->rc = XG2_NOMEM(); break; }
    }
    uint32_t id = p->rc ? 0 : xg2__ir_class(p->ir, r.a, r.n / 2, negated);
    vec_free(&r);
    return id;
}

static uint32_t literal(rx *p, uint32_t cp) {
    uint8_t b[4];
    int n;
    if (cp < 0x80) { b[0] = (uint8_t)cp; n = 1; }
    else if (cp < 0x800) { b[0] = (uint8_t)(0xC0 | (cp >> 6)); b[1] = (uint8_t)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        if (cp >= 0xD800 && cp <= 0xDFFF) { rerr(p, "surrogate code point"); return 0; }
        b[0] = (uint8_t)(0xE0 | (cp >> 12)); b[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F)); b[2] = (uint8_t)(0x80 | (cp & 0x3F)); n = 3;
    } else {
        b[0] = (uint8_t)(0xF0 | (cp >> 18)); b[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F)); b[3] = (uint8_t)(0x80 | (cp & 0x3F)); n = 4;
    }
    return xg2__ir_bytes(p->ir, b, (uint32_t)n);
}

static uint32_t parse_alt(rx *p);

/* Does "{" at the current position start a quantifier ({n}, {n,}, {n,m}, {,m})?
 * Otherwise it is a literal brace, as in Python. */
static int quantifier_at(const rx *p) {
    size_t k = 1;
    int digits = 0;
    while (peek(p, k) >= '0' && peek(p, k) <= '9') { k++; digits = 1; }
    if (peek(p, k) == ',') {
        k++;
        while (peek(p, k) >= '0' && peek(p, k) <= '9') { k++; digits = 1; }
    }
    return digits && peek(p, k) == '}';
}

static uint32_t parse_atom(rx *p) {
    int c = peek(p, 0);
    if (c == '(') {
        p->i++;
        if (peek(p, 0) == '?') {
            int d = peek(p, 1);
            if (d == ':') p->i += 2;
            else if (d == 'P' && peek(p, 2) == '<') { p->i += 3; while (peek(p, 0) >= 0 && peek(p, 0) != '>') p->i++; p->i++; }
            else if (d == '<' && peek(p, 2) != '=' && peek(p, 2) != '!') { p->i += 2; while (peek(p, 0) >= 0 && peek(p, 0) != '>') p->i++; p->i++; }
            else if (d == '=' || d == '!' || (d == '<' && (peek(p, 2) == '=' || peek(p, 2) == '!'))) { rerr(p, "lookaround assertions cannot be expressed by a grammar"); return 0; }
            else if (d == 'P' && peek(p, 2) == '=') { rerr(p, "named backreferences cannot be expressed by a grammar"); return 0; }
            else { rerr(p, "inline flags and other (?...) groups are not supported"); return 0; }
        }
        if (++p->depth > XG2_MAX_NEST_DEPTH) {
            p->rc = xg2__fail(XG2_ERR_LIMIT, "invalid regex at position %zu: groups nested deeper than %d", p->i, XG2_MAX_NEST_DEPTH);
            return 0;
        }
        uint32_t e = parse_alt(p);
        if (p->rc) return 0;
        if (peek(p, 0) != ')') { rerr(p, "missing ')'"); return 0; }
        p->i++;
        p->depth--;
        return e;
    }
    if (c == '[') return parse_class(p);
    if (c == '.') {
        p->i++;
        uint32_t nl[2] = {'\n', '\n'};
        return xg2__ir_class(p->ir, nl, 1, 1);
    }
    if (c == '\\') {
        p->i++;
        int cls = 0;
        int32_t cp = escape(p, 0, &cls);
        if (cp < 0) return 0;
        if (cls) {
            xg2_u32vec r = {0};
            uint32_t id = 0;
            if (class_escape(&r, cls)) p->rc = XG2_NOMEM();
            else id = xg2__ir_class(p->ir, r.a, r.n / 2, 0);
            vec_free(&r);
            return id;
        }
        return literal(p, (uint32_t)cp);
    }
    if (c == '^') { rerr(p, "'^' is only supported at the start of the pattern"); return 0; }
    if (c == '$') { rerr(p, "'$' is only supported at the end of the pattern"); return 0; }
    if (c == '*' || c == '+' || c == '?') { rerr(p, "nothing to repeat"); return 0; }
    if (c == '{' && quantifier_at(p)) { rerr(p, "nothing to repeat"); return 0; }
    int32_t cp = next_cp(p);
    return cp < 0 ? 0 : literal(p, (uint32_t)cp);
}

static int read_int(rx *p, int64_t *v) {
    int any = 0;
    *v = 0;
    while (peek(p, 0) >= '0' && peek(p, 0) <= '9') {
        *v = *v * 10 + (peek(p, 0) - '0');
        if (*v > XG2_MAX_REPEAT) {
            p->rc = xg2__fail(XG2_ERR_LIMIT, "invalid regex at position %zu: repetition bound exceeds the limit of %d", p->i, XG2_MAX_REPEAT);
            return 0;
        }
        p->i++;
        any = 1;
    }
    return any;
}

static uint32_t parse_quantified(rx *p) {
    uint32_t e = parse_atom(p);
    while (!p->rc) {
        int c = peek(p, 0);
        int64_t lo, hi;
        if (c == '*') { lo = 0; hi = -1; p->i++; }
        else if (c == '+') { lo = 1; hi = -1; p->i++; }
        else if (c == '?') { lo = 0; hi = 1; p->i++; }
        else if (c == '{') {
            size_t save = p->i;
            p->i++;
            if (!read_int(p, &lo)) {
                if (p->rc) return 0;
                if (peek(p, 0) != ',') { p->i = save; break; } /* a literal '{' as in Python */
                lo = 0; /* {,m} is {0,m} */
            }
            hi = lo;
            if (peek(p, 0) == ',') {
                p->i++;
                if (!read_int(p, &hi)) {
                    if (p->rc) return 0;
                    hi = -1;
                }
            }
            if (peek(p, 0) != '}') { p->i = save; break; }
            p->i++;
            if (hi >= 0 && hi < lo) { rerr(p, "repetition {%lld,%lld} is reversed", (long long)lo, (long long)hi); return 0; }
        } else {
            break;
        }
        if (peek(p, 0) == '?') p->i++; /* lazy: same language */
        else if (peek(p, 0) == '+') { rerr(p, "possessive quantifiers are not supported"); return 0; }
        e = xg2__ir_repeat(p->ir, e, (int32_t)lo, (int32_t)hi);
        int d = peek(p, 0);
        if (d == '*' || d == '+' || d == '?' || (d == '{' && quantifier_at(p))) {
            rerr(p, "multiple repeat");
            return 0;
        }
    }
    return e;
}

static uint32_t parse_concat(rx *p) {
    xg2_u32vec kids = {0};
    while (!p->rc) {
        int c = peek(p, 0);
        if (c < 0 || c == '|' || c == ')') break;
        if (c == '$' && p->i + 1 == p->n) break;
        uint32_t e = parse_quantified(p);
        if (!p->rc && vec_push(&kids, e)) p->rc = XG2_NOMEM();
    }
    uint32_t id = p->rc ? 0 : xg2__ir_list(p->ir, XE_SEQ, kids.a, kids.n);
    vec_free(&kids);
    return id;
}

static uint32_t parse_alt(rx *p) {
    xg2_u32vec kids = {0};
    for (;;) {
        uint32_t e = parse_concat(p);
        if (p->rc) break;
        if (vec_push(&kids, e)) { p->rc = XG2_NOMEM(); break; }
        if (peek(p, 0) != '|') break;
        p->i++;
    }
    uint32_t id = p->rc ? 0 : xg2__ir_list(p->ir, XE_CHOICE, kids.a, kids.n);
    vec_free(&kids);
    return id;
}

/* Compile pattern into an expression of ir; *out receives its id. */
XG2_HIDDEN int xg2__regex_to_ir(xg2_ir *ir, const uint8_t *pattern, size_t len, uint32_t *out) {
    /* Anchors at the very ends change nothing for a full match: strip them. */
    if (len >= 2 && pattern[len - 2] == '\\' && pattern[len - 1] == 'Z') {
        size_t bs = 0; /* count the backslashes before Z: an even number means it is escaped itself */
        while (bs < len - 1 && pattern[len - 2 - bs] == '\\') bs++;
        if (bs % 2 == 1) len -= 2;
    }
    rx p = {pattern, len, 0, ir, 0, 0};
    if (peek(&p, 0) == '^') p.i++;
    else if (peek(&p, 0) == '\\' && peek(&p, 1) == 'A') p.i += 2;
    uint32_t e = parse_alt(&p);
    if (!p.rc && peek(&p, 0) == '$' && p.i + 1 == p.n) p.i++;
    if (!p.rc && p.i < p.n) rerr(&p, peek(&p, 0) == ')' ? "unbalanced ')'" : "unexpected character");
    if (!p.rc && ir->err) p.rc = XG2_NOMEM();
    if (p.rc) return p.rc;
    *out = e;
    return XG2_OK;
}
