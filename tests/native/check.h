/*
 * check.h -- a tiny test framework for the native tests, plus helpers that
 * build xg2 objects.  Tests use only the public ABI (xg2.h).
 *
 *   TEST(name) { CHECK(x == 1); CHECK_RC(xg2_f(...), XG2_OK); }
 *   int main(int argc, char **argv) { return RUN_TESTS(argc, argv, name, other); }
 *
 * A test binary runs every test, or only the ones named on the command line;
 * `--list` prints the names.  A failed CHECK prints file:line and the
 * expression, and the test goes on (so one run shows every failure).  The exit
 * status is 1 if any check failed.
 */
#ifndef XG2_TEST_CHECK_H
#define XG2_TEST_CHECK_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "xg2.h"

static int check_failed;       /* checks failed in the current test */
static long check_total;       /* checks run in total */
static int check_quiet_after;  /* stop printing after this many failures per test */

static void check_report(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void check_report(const char *file, int line, const char *fmt, ...) {
    check_failed++;
    if (check_failed > check_quiet_after) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: FAILED: ", file, line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (check_failed == check_quiet_after) fprintf(stderr, "  (further failures of this test not printed)\n");
}

#define CHECK(cond)                                                                     \
    do {                                                                                \
        check_total++;                                                                  \
        if (!(cond)) check_report(__FILE__, __LINE__, "%s", #cond);                     \
    } while (0)

/* CHECK with a printf-style explanation. */
#define CHECKF(cond, ...)                                                               \
    do {                                                                                \
        check_total++;                                                                  \
        if (!(cond)) {                                                                  \
            char check_buf_[1024];                                                      \
            snprintf(check_buf_, sizeof check_buf_, __VA_ARGS__);                       \
            check_report(__FILE__, __LINE__, "%s -- %s", #cond, check_buf_);            \
        }                                                                               \
    } while (0)

#define CHECK_EQ(a, b)                                                                  \
    do {                                                                                \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                 \
        check_total++;                                                                  \
        if (check_a_ != check_b_)                                                       \
            check_report(__FILE__, __LINE__, "%s == %s (%lld != %lld)", #a, #b, check_a_, \
                         check_b_);                                                     \
    } while (0)

/* A status-returning call must return `want`; on mismatch the library's last
 * error message is shown.  Evaluates to the actual status. */
#define CHECK_RC(call, want)                                                            \
    check_rc_((call), (want), #call, __FILE__, __LINE__)

static const char *rc_name(int rc) {
    switch (rc) {
    case XG2_OK: return "XG2_OK";
    case XG2_ERR_ARG: return "XG2_ERR_ARG";
    case XG2_ERR_GRAMMAR: return "XG2_ERR_GRAMMAR";
    case XG2_ERR_NOMEM: return "XG2_ERR_NOMEM";
    case XG2_ERR_LIMIT: return "XG2_ERR_LIMIT";
    case XG2_ERR_STATE: return "XG2_ERR_STATE";
    case XG2_ERR_INTERNAL: return "XG2_ERR_INTERNAL";
    }
    return "unknown status";
}

static int check_rc_(int rc, int want, const char *expr, const char *file, int line) {
    check_total++;
    if (rc != want)
        check_report(file, line, "%s returned %s (%d), expected %s; last error: \"%s\"", expr,
                     rc_name(rc), rc, rc_name(want), xg2_last_error());
    return rc;
}

/* ---- running ---- */

typedef struct {
    const char *name;
    void (*fn)(void);
} test_entry;

#define TEST(name) static void name(void)
#define T_(name) {#name, name}

static int run_tests_(int argc, char **argv, const test_entry *tests, int n) {
    check_quiet_after = getenv("CHECK_VERBOSE") ? 1000000 : 25;
    if (argc > 1 && !strcmp(argv[1], "--list")) {
        for (int i = 0; i < n; i++) printf("%s\n", tests[i].name);
        return 0;
    }
    int failed_tests = 0, ran = 0;
    for (int i = 0; i < n; i++) {
        int want = argc <= 1;
        for (int k = 1; k < argc; k++)
            if (!strcmp(argv[k], tests[i].name)) want = 1;
        if (!want) continue;
        ran++;
        check_failed = 0;
        fprintf(stderr, "[ RUN  ] %s\n", tests[i].name);
        tests[i].fn();
        fprintf(stderr, "[ %s ] %s (%d failed checks)\n", check_failed ? "FAIL" : " OK ", tests[i].name,
                check_failed);
        if (check_failed) failed_tests++;
    }
    if (!ran) {
        fprintf(stderr, "no test matched the arguments\n");
        return 2;
    }
    fprintf(stderr, "%d tests, %d failed, %ld checks\n", ran, failed_tests, check_total);
    return failed_tests ? 1 : 0;
}

#define RUN_TESTS(argc, argv, ...)                                                      \
    run_tests_((argc), (argv), (const test_entry[]){__VA_ARGS__},                      \
               (int)(sizeof((const test_entry[]){__VA_ARGS__}) / sizeof(test_entry)))

/* ---- helpers that build objects ---- */

/* A vocab from NUL-terminated token strings (tokens cannot contain NUL; use
 * make_vocab_n for that). */
static int make_vocab_rc(int type, const char *const *toks, int32_t n, int32_t vocab_size,
                         const int32_t *special, int32_t n_special, const int32_t *stop,
                         int32_t n_stop, xg2_vocab **out) {
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) total += strlen(toks[i]);
    char *data = malloc(total + 1);
    uint32_t *off = malloc(sizeof(uint32_t) * ((size_t)n + 1));
    size_t pos = 0;
    for (int32_t i = 0; i < n; i++) {
        off[i] = (uint32_t)pos;
        size_t l = strlen(toks[i]);
        memcpy(data + pos, toks[i], l);
        pos += l;
    }
    off[n] = (uint32_t)pos;
    int rc = xg2_vocab_new(type, data, off, n, vocab_size, special, n_special, stop, n_stop, out);
    /* The vocab must have copied everything: scribble over the inputs. */
    memset(data, 0x5A, total + 1);
    memset(off, 0xA5, sizeof(uint32_t) * ((size_t)n + 1));
    free(data);
    free(off);
    return rc;
}

static xg2_vocab *make_vocab(int type, const char *const *toks, int32_t n, int32_t vocab_size,
                             const int32_t *special, int32_t n_special, const int32_t *stop,
                             int32_t n_stop) {
    xg2_vocab *v = NULL;
    int rc = make_vocab_rc(type, toks, n, vocab_size, special, n_special, stop, n_stop, &v);
    if (rc != XG2_OK) {
        fprintf(stderr, "fatal: xg2_vocab_new failed: %s (%s)\n", rc_name(rc), xg2_last_error());
        exit(3);
    }
    return v;
}

/* A grammar that must parse; NULL (and a failed check) if it does not. */
#define MAKE_GRAMMAR(text) make_grammar_((text), __FILE__, __LINE__)
static xg2_grammar *make_grammar_(const char *text, const char *file, int line) {
    xg2_grammar *g = NULL;
    int rc = xg2_grammar_from_ebnf(text, strlen(text), "root", &g);
    check_total++;
    if (rc != XG2_OK) {
        check_report(file, line, "grammar did not compile: %s: \"%s\"\n--- grammar ---\n%s\n---",
                     rc_name(rc), xg2_last_error(), text);
        return NULL;
    }
    return g;
}

/* Compiled grammar + matcher for (grammar text, vocab); NULLs on failure. */
typedef struct {
    xg2_grammar *g;
    xg2_compiled *c;
    xg2_matcher *m;
} gcm;

#define MAKE_GCM(text, vocab) make_gcm_((text), (vocab), __FILE__, __LINE__)
static gcm make_gcm_(const char *text, const xg2_vocab *v, const char *file, int line) {
    gcm r = {0};
    r.g = make_grammar_(text, file, line);
    if (!r.g) return r;
    int rc = xg2_compiled_new(r.g, v, &r.c);
    if (rc == XG2_OK) rc = xg2_matcher_new(r.c, NULL, -1, 0, &r.m);
    if (rc != XG2_OK) {
        check_total++;
        check_report(file, line, "compiled/matcher creation failed: %s (%s)", rc_name(rc), xg2_last_error());
    }
    return r;
}

static void free_gcm(gcm *r) {
    xg2_matcher_free(r->m);
    xg2_compiled_free(r->c);
    xg2_grammar_free(r->g);
    memset(r, 0, sizeof *r);
}

static inline int64_t mask_words(const xg2_vocab *v) { return ((int64_t)xg2_vocab_size(v) + 31) / 32; }
static inline int mask_bit(const int32_t *row, int32_t t) { return (int)(((uint32_t)row[t >> 5] >> (t & 31)) & 1u); }

/* Render a byte string printable for messages (static buffer, one at a time). */
static const char *show(const char *s, size_t n) {
    static char buf[4][512];
    static int which;
    char *o = buf[which++ & 3];
    size_t k = 0;
    o[k++] = '"';
    for (size_t i = 0; i < n && k < sizeof buf[0] - 8; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') o[k++] = (char)c;
        else k += (size_t)snprintf(o + k, 8, "\\x%02x", c);
    }
    o[k++] = '"';
    o[k] = 0;
    return o;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Run fn(arg) in a child process with a deadline, so that a test of something
 * that may take far too long (or crash) costs at most `seconds`.  Checks made
 * in the child count through its exit status.  Returns 0 if the child
 * finished cleanly in time, 1 if its checks failed, 2 if it was killed at the
 * deadline, 3 if it crashed; *took gets the elapsed time. */
static int run_with_deadline(void (*fn)(void *), void *arg, double seconds, double *took) {
    fflush(stdout);
    fflush(stderr);
    double t0 = now_s();
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 3; }
    if (pid == 0) {
        check_failed = 0;
        fn(arg);
        fflush(stderr);
        _exit(check_failed ? 1 : 0);
    }
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (now_s() - t0 > seconds) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            *took = now_s() - t0;
            return 2;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    *took = now_s() - t0;
    if (WIFEXITED(status)) return WEXITSTATUS(status) == 0 ? 0 : 1;
    return 3;
}

#endif /* XG2_TEST_CHECK_H */
