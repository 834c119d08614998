/*
 * driver.c -- runs a libFuzzer target without libFuzzer (gcc, ASan/UBSan), for CI:
 * replays every file given (or every file in a directory given), then mutates them
 * for N iterations with a fixed-seed random generator, so a run is reproducible.
 *
 *   driver [-n ITERATIONS] [-s SEED] [-m MAX_LEN] PATH...
 *
 * If an input crashes (a sanitizer report, abort, a signal), it is written to
 * $DRIVER_CRASH_FILE (default ./driver-crash-input) as its reproducer.  Mutations: flip a bit, set a byte, insert or delete
 * a run, duplicate a run, splice another input, insert a dictionary token.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* the sanitizers' hook, called before they end the process */
void __sanitizer_set_death_callback(void (*callback)(void));

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    uint8_t *p;
    size_t n;
} input;

static input *corpus;
static size_t n_corpus, cap_corpus;
static const char *crash_path = "driver-crash-input";
static const uint8_t *current;
static size_t current_n;

/* Write the running input out (async-signal-safe: open/write/close only). */
static void dump_current(void) {
    if (!current) return;
    int fd = open(crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    for (size_t off = 0; off < current_n;) {
        ssize_t w = write(fd, current + off, current_n - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    close(fd);
    current = NULL;
}

static void on_signal(int sig) {
    dump_current();
    signal(sig, SIG_DFL);
    raise(sig);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}
static size_t below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

/* The target's verdict: -1 keeps the input out of the corpus (as in libFuzzer). */
static int run(const uint8_t *p, size_t n) {
    /* a private copy, exactly n bytes: ASan sees any read past the end */
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy) abort();
    memcpy(copy, p, n);
    current = copy;
    current_n = n;
    int keep = LLVMFuzzerTestOneInput(copy, n);
    current = NULL;
    free(copy);
    return keep;
}

static void add(const uint8_t *p, size_t n) {
    if (n_corpus == cap_corpus) {
        cap_corpus = cap_corpus ? 2 * cap_corpus : 64;
        corpus = realloc(corpus, cap_corpus * sizeof *corpus);
        if (!corpus) abort();
    }
    corpus[n_corpus].p = malloc(n ? n : 1);
    if (!corpus[n_corpus].p) abort();
    memcpy(corpus[n_corpus].p, p, n);
    corpus[n_corpus++].n = n;
}

static void load_file(const char *path, size_t max_len) {
    FILE *f = fopen(path, "rb");
    if (!f) return;
    uint8_t *buf = malloc(max_len ? max_len : 1);
    size_t n = buf ? fread(buf, 1, max_len, f) : 0;
    fclose(f);
    if (!buf) return;
    run(buf, n);
    add(buf, n);
    free(buf);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void load(const char *path, size_t max_len) {
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "driver: cannot read %s\n", path);
        exit(2);
    }
    if (!S_ISDIR(st.st_mode)) {
        load_file(path, max_len);
        return;
    }
    DIR *d = opendir(path);
    if (!d) return;
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        if (n == cap && !(names = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names))) abort();
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name); /* a fixed order: runs are reproducible */
    for (size_t i = 0; i < n; i++) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", path, names[i]);
        load_file(full, max_len);
        free(names[i]);
    }
    free(names);
}

static const char *const DICT[] = {
    "::=", "|", "(", ")", "*", "+", "?", "{2,3}", "{0,}", "[a-z]", "[^\\n]", "\"", "\"a\"", "\\u00e9",
    "root", "root ::= ", "\n", " ", "\0", "(= \"a\")", "TagDispatch(", "[\\x00-\\xff]", "\"\\\\\"", "#",
};
#define N_DICT (sizeof DICT / sizeof *DICT)

/* Mutate out[0 .. n) in place (at most max_len bytes); the new length. */
static size_t mutate_range(uint8_t *out, size_t n, size_t max_len) {
    for (int k = 1 + (int)below(4); k > 0; k--) {
        size_t at = below(n + 1), len = 1 + below(8);
        switch (below(7)) {
        case 0:
            if (n) out[below(n)] ^= (uint8_t)(1u << below(8));
            break;
        case 1:
            if (n) out[below(n)] = (uint8_t)rnd();
            break;
        case 2: /* insert random bytes */
            if (n + len > max_len) break;
            memmove(out + at + len, out + at, n - at);
            for (size_t i = 0; i < len; i++) out[at + i] = (uint8_t)rnd();
            n += len;
            break;
        case 3: /* delete a run */
            if (at + len > n) break;
            memmove(out + at, out + at + len, n - at - len);
            n -= len;
            break;
        case 4: { /* duplicate a run */
            if (!n) break;
            size_t from = below(n);
            if (len > n - from) len = n - from;
            if (n + len > max_len) break;
            uint8_t tmp[8];
            memcpy(tmp, out + from, len);
            memmove(out + at + len, out + at, n - at);
            memcpy(out + at, tmp, len);
            n += len;
            break;
        }
        case 5: { /* splice: our head, another input's tail */
            const input *o = &corpus[below(n_corpus)];
            size_t from = below(o->n + 1), tail = o->n - from;
            if (at + tail > max_len) tail = max_len - at;
            memcpy(out + at, o->p + from, tail);
            n = at + tail;
            break;
        }
        default: { /* a dictionary token */
            size_t i = below(N_DICT), tl = strlen(DICT[i]);
            if (tl == 0) tl = 1; /* the NUL token */
            if (n + tl > max_len) break;
            memmove(out + at + tl, out + at, n - at);
            memcpy(out + at, DICT[i], tl);
            n += tl;
            break;
        }
        }
    }
    return n;
}

/* One mutated copy of a corpus entry into out (at most max_len bytes); its length.
 * Half the time only the script after the NUL changes: a grammar mutated at random
 * rarely parses, so the matcher would hardly be fuzzed. */
static size_t mutate(uint8_t *out, size_t max_len) {
    const input *src = &corpus[below(n_corpus)];
    size_t n = src->n < max_len ? src->n : max_len;
    memcpy(out, src->p, n);
    const uint8_t *nul = memchr(out, 0, n);
    size_t lo = nul && (rnd() & 1) ? (size_t)(nul - out) + 1 : 0;
    return lo + mutate_range(out + lo, n - lo, max_len - lo);
}

int main(int argc, char **argv) {
    long iterations = 0;
    size_t max_len = 4096;
    int first = 1;
    for (; first + 1 < argc && argv[first][0] == '-'; first += 2) {
        if (!strcmp(argv[first], "-n")) iterations = atol(argv[first + 1]);
        else if (!strcmp(argv[first], "-s")) rng_state += (uint64_t)strtoull(argv[first + 1], NULL, 10) * 0xbf58476d1ce4e5b9ull;
        else if (!strcmp(argv[first], "-m")) max_len = (size_t)atol(argv[first + 1]);
        else break;
    }
    if (!rng_state) rng_state = 1; /* xorshift's one fixed point */
    if (getenv("DRIVER_CRASH_FILE")) crash_path = getenv("DRIVER_CRASH_FILE");
    __sanitizer_set_death_callback(dump_current);
    signal(SIGABRT, on_signal);
    signal(SIGSEGV, on_signal);
    signal(SIGBUS, on_signal);
    signal(SIGFPE, on_signal);
    for (int i = first; i < argc; i++) load(argv[i], max_len);
    if (!n_corpus) add((const uint8_t *)"root ::= \"a\"", 12);
    printf("driver: %zu inputs replayed\n", n_corpus);
    uint8_t *buf = malloc(max_len);
    if (!buf) abort();
    for (long it = 0; it < iterations; it++) {
        size_t n = mutate(buf, max_len);
        /* no coverage here: keep some of the mutants the target did not refuse */
        if (run(buf, n) == 0 && it % 4 == 0 && n_corpus < 4096) add(buf, n);
    }
    printf("driver: %ld mutations run, no find\n", iterations);
    for (size_t i = 0; i < n_corpus; i++) free(corpus[i].p);
    free(corpus);
    free(buf);
    return 0;
}
