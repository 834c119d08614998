/*
 * test_vocab.c -- token decoding (raw, byte fallback, byte level), token
 * flags, argument checking, and the next-token mask checked token by token
 * against accept_token on a fresh matcher (a brute-force oracle).
 */
#include "check.h"

/* Token `id` of v must decode to exactly want[0..want_len) with `want_flags`. */
#define CHECK_TOKEN(v, id, want, want_len, want_flags) check_token_((v), (id), (want), (want_len), (want_flags), __FILE__, __LINE__)
static void check_token_(const xg2_vocab *v, int32_t id, const char *want, size_t want_len, int want_flags,
                         const char *file, int line) {
    const char *data = NULL;
    size_t len = 12345;
    int flags = -1;
    check_total++;
    int rc = xg2_vocab_token(v, id, &data, &len, &flags);
    if (rc != XG2_OK) {
        check_report(file, line, "xg2_vocab_token(%d) returned %s: %s", id, rc_name(rc), xg2_last_error());
        return;
    }
    if (len != want_len || (len && memcmp(data, want, len) != 0))
        check_report(file, line, "token %d decodes to %s, expected %s", id, show(data, len), show(want, want_len));
    if (flags != want_flags) check_report(file, line, "token %d has flags %d, expected %d", id, flags, want_flags);
}

TEST(raw_decoding) {
    const char *toks[] = {"hello", "\xe2\x96\x81x", "<0x41>", "\xc4\xa0y", " ", "\xff\xfe", "a\tb"};
    xg2_vocab *v = make_vocab(XG2_VOCAB_RAW, toks, 7, 7, NULL, 0, NULL, 0);
    CHECK_EQ(xg2_vocab_size(v), 7);
    CHECK_EQ(xg2_vocab_num_tokens(v), 7);
    for (int i = 0; i < 7; i++) CHECK_TOKEN(v, i, toks[i], strlen(toks[i]), 0);
    xg2_vocab_free(v);
}

TEST(byte_fallback_decoding) {
    const char *toks[] = {
        "<0x41>",                       /* 0: byte A */
        "<0x0A>",                       /* 1: newline */
        "<0xff>",                       /* 2: lower-case hex */
        "<0x00>",                       /* 3: NUL byte */
        "\xe2\x96\x81hello",            /* 4: "▁hello" -> " hello" */
        "a\xe2\x96\x81\xe2\x96\x81" "b", /* 5: "a▁▁b" -> "a  b" */
        "<0x4>",                        /* 6: not a byte piece: kept */
        "<0x41>x",                      /* 7: not a byte piece: kept */
        "<0xZZ>",                       /* 8: not hex: kept */
        "\xe2\x96\x81",                 /* 9: lone "▁" -> " " */
        "\xc3\xa9t\xc3\xa9",            /* 10: "été" stays UTF-8 */
    };
    xg2_vocab *v = make_vocab(XG2_VOCAB_BYTE_FALLBACK, toks, 11, 11, NULL, 0, NULL, 0);
    CHECK_TOKEN(v, 0, "A", 1, 0);
    CHECK_TOKEN(v, 1, "\n", 1, 0);
    CHECK_TOKEN(v, 2, "\xff", 1, 0);
    CHECK_TOKEN(v, 3, "\0", 1, 0);
    CHECK_TOKEN(v, 4, " hello", 6, 0);
    CHECK_TOKEN(v, 5, "a  b", 4, 0);
    CHECK_TOKEN(v, 6, "<0x4>", 5, 0);
    CHECK_TOKEN(v, 7, "<0x41>x", 7, 0);
    CHECK_TOKEN(v, 8, "<0xZZ>", 6, 0);
    CHECK_TOKEN(v, 9, " ", 1, 0);
    CHECK_TOKEN(v, 10, "\xc3\xa9t\xc3\xa9", 5, 0);
    xg2_vocab_free(v);
}

TEST(byte_level_decoding) {
    const char *toks[] = {
        "\xc4\xa0hello",      /* 0: "Ġhello" -> " hello" */
        "\xc4\x8a",           /* 1: "Ċ" -> "\n" */
        "hello",              /* 2: printable ASCII maps to itself */
        "\xc4\xa0\xc4\xa0",   /* 3: "ĠĠ" -> two spaces */
        "\xc4\x80",           /* 4: U+0100 -> byte 0x00 */
        "\xc4\xa1",           /* 5: U+0121 -> byte 0x7F */
        "\xc5\x83",           /* 6: U+0143 -> byte 0xAD */
        "\xc3\xa9",           /* 7: U+00E9 -> the single byte 0xE9 */
        "\xc3\x83\xc4\xa4",   /* 8: "ÃĤ" -> C3 82, the UTF-8 of "Â" */
        "<|endoftext|>",      /* 9: all in the alphabet: decodes to itself */
        "\xe4\xbd\xa0\xe5\xa5\xbd", /* 10: "你好": added token, kept as UTF-8 */
        "\xc4\xa0\xe4\xbd\xa0",     /* 11: "Ġ你": outside the alphabet: kept whole */
        "hello world",        /* 12: a literal space is not in the alphabet: kept */
        "\xff",               /* 13: invalid UTF-8: kept */
        "\xc2\xa1",           /* 14: U+00A1 -> byte 0xA1 */
        "\xc4\xa2",           /* 15: U+0122 -> byte 0x80 */
    };
    xg2_vocab *v = make_vocab(XG2_VOCAB_BYTE_LEVEL, toks, 16, 16, NULL, 0, NULL, 0);
    CHECK_TOKEN(v, 0, " hello", 6, 0);
    CHECK_TOKEN(v, 1, "\n", 1, 0);
    CHECK_TOKEN(v, 2, "hello", 5, 0);
    CHECK_TOKEN(v, 3, "  ", 2, 0);
    CHECK_TOKEN(v, 4, "\0", 1, 0);
    CHECK_TOKEN(v, 5, "\x7f", 1, 0);
    CHECK_TOKEN(v, 6, "\xad", 1, 0);
    CHECK_TOKEN(v, 7, "\xe9", 1, 0);
    CHECK_TOKEN(v, 8, "\xc3\x82", 2, 0);
    CHECK_TOKEN(v, 9, "<|endoftext|>", 13, 0);
    CHECK_TOKEN(v, 10, "\xe4\xbd\xa0\xe5\xa5\xbd", 6, 0);
    CHECK_TOKEN(v, 11, "\xc4\xa0\xe4\xbd\xa0", 5, 0);
    CHECK_TOKEN(v, 12, "hello world", 11, 0);
    CHECK_TOKEN(v, 13, "\xff", 1, 0);
    CHECK_TOKEN(v, 14, "\xa1", 1, 0);
    CHECK_TOKEN(v, 15, "\x80", 1, 0);
    xg2_vocab_free(v);
}

/* All 256 bytes through the GPT-2 table: byte b's character decodes back to b. */
TEST(byte_level_full_alphabet) {
    char enc[256][4];
    const char *toks[256];
    int shifted = 0;
    for (int b = 0; b < 256; b++) {
        int kept = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        unsigned cp = kept ? (unsigned)b : 256u + (unsigned)shifted++;
        if (cp < 0x80) { enc[b][0] = (char)cp; enc[b][1] = 0; }
        else { enc[b][0] = (char)(0xC0 | (cp >> 6)); enc[b][1] = (char)(0x80 | (cp & 0x3F)); enc[b][2] = 0; }
        toks[b] = enc[b];
    }
    xg2_vocab *v = make_vocab(XG2_VOCAB_BYTE_LEVEL, toks, 256, 256, NULL, 0, NULL, 0);
    for (int b = 0; b < 256; b++) {
        char want = (char)b;
        CHECK_TOKEN(v, b, &want, 1, 0);
    }
    xg2_vocab_free(v);
}

TEST(flags_and_id_lists) {
    /* 0 "a", 1 "</s>" stop, 2 "<unk>" special, 3 "" empty (special), 4 "<eot>" stop+special,
     * 5 "b"; ids 6..39 padding. */
    const char *toks[] = {"a", "</s>", "<unk>", "", "<eot>", "b"};
    int32_t special[] = {2, 4};
    int32_t stop[] = {1, 4};
    xg2_vocab *v = make_vocab(XG2_VOCAB_RAW, toks, 6, 40, special, 2, stop, 2);
    CHECK_EQ(xg2_vocab_size(v), 40);
    CHECK_EQ(xg2_vocab_num_tokens(v), 6);
    CHECK_TOKEN(v, 0, "a", 1, 0);
    CHECK_TOKEN(v, 1, "</s>", 4, XG2_TOKEN_STOP);
    CHECK_TOKEN(v, 2, "<unk>", 5, XG2_TOKEN_SPECIAL);
    CHECK_TOKEN(v, 3, "", 0, XG2_TOKEN_SPECIAL);
    CHECK_TOKEN(v, 4, "<eot>", 5, XG2_TOKEN_SPECIAL | XG2_TOKEN_STOP);
    CHECK_TOKEN(v, 5, "b", 1, 0);
    for (int32_t id = 6; id < 40; id++) CHECK_TOKEN(v, id, "", 0, XG2_TOKEN_PADDING);

    int32_t buf[4] = {-7, -7, -7, -7};
    CHECK_EQ(xg2_vocab_stop_ids(v, buf, 4), 2);
    CHECK(buf[0] == 1 && buf[1] == 4 && buf[2] == -7);
    buf[0] = buf[1] = -7;
    CHECK_EQ(xg2_vocab_stop_ids(v, buf, 1), 2); /* count, but copies only cap */
    CHECK(buf[0] == 1 && buf[1] == -7);
    CHECK_EQ(xg2_vocab_stop_ids(v, NULL, 0), 2);
    buf[0] = buf[1] = -7;
    CHECK_EQ(xg2_vocab_special_ids(v, buf, 4), 2);
    CHECK(buf[0] == 2 && buf[1] == 4);
    CHECK_EQ(xg2_vocab_special_ids(v, NULL, 0), 2);

    /* Out-of-range ids and NULL outputs. */
    const char *d;
    size_t len;
    int fl;
    CHECK_RC(xg2_vocab_token(v, 40, &d, &len, &fl), XG2_ERR_ARG);
    CHECK(xg2_last_error()[0] != 0);
    CHECK_RC(xg2_vocab_token(v, -1, &d, &len, &fl), XG2_ERR_ARG);
    CHECK_RC(xg2_vocab_token(v, 0, NULL, &len, &fl), XG2_ERR_ARG);
    CHECK_RC(xg2_vocab_token(NULL, 0, &d, &len, &fl), XG2_ERR_ARG);
    xg2_vocab_free(v);
    xg2_vocab_free(NULL);
    CHECK_EQ(xg2_abi_version(), XG2_ABI_VERSION);
}

/* Tokens whose offsets do not start at 0, and an empty vocabulary. */
TEST(offsets_and_empty_vocab) {
    const char data[] = "XXXabcd";
    uint32_t off[] = {3, 5, 5, 7}; /* "ab", "", "cd" */
    xg2_vocab *v = NULL;
    CHECK_RC(xg2_vocab_new(XG2_VOCAB_RAW, data, off, 3, 3, NULL, 0, NULL, 0, &v), XG2_OK);
    if (v) {
        CHECK_TOKEN(v, 0, "ab", 2, 0);
        CHECK_TOKEN(v, 1, "", 0, XG2_TOKEN_SPECIAL);
        CHECK_TOKEN(v, 2, "cd", 2, 0);
        xg2_vocab_free(v);
    }
    v = NULL;
    CHECK_RC(xg2_vocab_new(XG2_VOCAB_RAW, NULL, NULL, 0, 5, NULL, 0, NULL, 0, &v), XG2_OK);
    if (v) {
        CHECK_EQ(xg2_vocab_size(v), 5);
        CHECK_TOKEN(v, 4, "", 0, XG2_TOKEN_PADDING);
        xg2_vocab_free(v);
    }
}

/* A failed vocab_new returns XG2_ERR_ARG, a message, and leaves *out alone. */
#define CHECK_BAD_VOCAB(call)                                                           \
    do {                                                                                \
        out = (xg2_vocab *)&sentinel;                                                   \
        CHECK_RC(call, XG2_ERR_ARG);                                                    \
        CHECKF(xg2_last_error()[0] != 0, "empty error message for %s", #call);          \
        CHECK(out == (xg2_vocab *)&sentinel);                                           \
    } while (0)

TEST(bad_arguments) {
    const char data[] = "abc";
    uint32_t off[] = {0, 1, 2, 3};
    uint32_t dec[] = {0, 2, 1, 3};
    int32_t stop_hi[] = {3}, stop_neg[] = {-1}, stop_ok[] = {2};
    int32_t special_hi[] = {100};
    int sentinel;
    xg2_vocab *out;
    CHECK_BAD_VOCAB(xg2_vocab_new(XG2_VOCAB_RAW, data, off, 3, 2, NULL, 0, NULL, 0, &out)); /* size < n */
    CHECK_BAD_VOCAB(xg2_vocab_new(XG2_VOCAB_RAW, data, off, 3, 0, NULL, 0, NULL, 0, &out));
    CHECK_BAD_VOCAB(xg2_vocab_new(XG2_VOCAB_RAW, data, dec, 3, 3, NULL, 0, NULL, 0, &out)); /* decreasing */
    CHECK_BAD_VOCAB(xg2_vocab_new(XG2_VOCAB_RAW, data, off, 3, 3, NULL, 0, stop_hi, 1, &out)); /* stop == size */
    CHECK_BAD_VOCAB(xg2_vocab_new(XG2_VOCAB_RAW, data, off, 3, 3, NULL, 0, stop_neg, 1, &out));
    CHECK_BAD_VOCAB(xg2_vocab_new(XG2_VOCAB_RAW, data, off, 3, 3, special_hi, 1, NULL, 0, &out));
    CHECK_BAD_VOCAB(xg2_vocab_new(XG2_VOCAB_RAW, data, off, 3, 3, NULL, 0, NULL, 1, &out)); /* n_stop, NULL */
    CHECK_BAD_VOCAB(xg2_vocab_new(XG2_VOCAB_RAW, data, off, 3, 3, NULL, 0, stop_ok, -1, &out));
    CHECK_BAD_VOCAB(xg2_vocab_new(7, data, off, 3, 3, NULL, 0, NULL, 0, &out)); /* unknown type */
    CHECK_BAD_VOCAB(xg2_vocab_new(-1, data, off, 3, 3, NULL, 0, NULL, 0, &out));
    CHECK_BAD_VOCAB(xg2_vocab_new(XG2_VOCAB_RAW, data, off, -1, 3, NULL, 0, NULL, 0, &out));
    CHECK_BAD_VOCAB(xg2_vocab_new(XG2_VOCAB_RAW, NULL, off, 3, 3, NULL, 0, NULL, 0, &out));
    CHECK_BAD_VOCAB(xg2_vocab_new(XG2_VOCAB_RAW, data, NULL, 3, 3, NULL, 0, NULL, 0, &out));
    CHECK_RC(xg2_vocab_new(XG2_VOCAB_RAW, data, off, 3, 3, NULL, 0, NULL, 0, NULL), XG2_ERR_ARG);
    /* The message names the problem. */
    xg2_vocab_new(XG2_VOCAB_RAW, data, dec, 3, 3, NULL, 0, NULL, 0, &out);
    CHECKF(strstr(xg2_last_error(), "offset") != NULL, "message: %s", xg2_last_error());
    xg2_vocab_new(XG2_VOCAB_RAW, data, off, 3, 3, NULL, 0, stop_hi, 1, &out);
    CHECKF(strstr(xg2_last_error(), "3") != NULL, "message: %s", xg2_last_error());
    /* A success after a failure clears the message. */
    out = NULL;
    CHECK_RC(xg2_vocab_new(XG2_VOCAB_RAW, data, off, 3, 3, NULL, 0, stop_ok, 1, &out), XG2_OK);
    CHECK(out != NULL);
    xg2_vocab_free(out);
}

/* ---- mask oracle: bit t == accept_token(t) on a fresh matcher ---- */

/* Compare the mask of m (which is left unchanged) with accept_token on a fork,
 * for every id in [0, vocab_size); `where` names the state in messages. */
static void check_mask_against_accept(xg2_matcher *m, const xg2_vocab *v, const char *grammar, const char *where) {
    int64_t nw = mask_words(v);
    int32_t *row = malloc(sizeof(int32_t) * (size_t)nw);
    int need_apply = -1;
    if (CHECK_RC(xg2_matcher_fill_mask(m, row, nw, &need_apply), XG2_OK)) { free(row); return; }
    int all = 1;
    for (int32_t t = 0; t < xg2_vocab_size(v); t++) {
        xg2_matcher *f = NULL;
        if (CHECK_RC(xg2_matcher_fork(m, &f), XG2_OK)) break;
        int acc = -1;
        CHECK_RC(xg2_matcher_accept_token(f, t, &acc), XG2_OK);
        const char *d;
        size_t len;
        int fl;
        xg2_vocab_token(v, t, &d, &len, &fl);
        CHECKF(acc == mask_bit(row, t), "grammar %s, after %s: token %d %s (flags %d): mask bit %d, accept_token %d",
               grammar, where, t, show(d, len), fl, mask_bit(row, t), acc);
        if (!mask_bit(row, t)) all = 0;
        xg2_matcher_free(f);
    }
    /* Bits past vocab_size stay clear. */
    for (int32_t t = xg2_vocab_size(v); t < nw * 32; t++) CHECK(!mask_bit(row, t));
    CHECK_EQ(need_apply, !all);
    free(row);
}

/* Depth-first over accepted token sequences up to `depth` tokens. */
static void walk_states(xg2_matcher *m, const xg2_vocab *v, const char *grammar, char *path, size_t plen, int depth) {
    /* After a stop token the mask is not compared (see test_matcher's stop tests). */
    if (xg2_matcher_is_terminated(m)) return;
    check_mask_against_accept(m, v, grammar, plen ? show(path, plen) : "nothing");
    if (!depth) return;
    for (int32_t t = 0; t < xg2_vocab_num_tokens(v); t++) {
        int acc = 0;
        if (xg2_matcher_accept_token(m, t, &acc) != XG2_OK || !acc) continue;
        const char *d;
        size_t len;
        int fl;
        xg2_vocab_token(v, t, &d, &len, &fl);
        if (plen + len + 8 < 256) {
            memcpy(path + plen, d, len);
            size_t extra = 0;
            if (fl & XG2_TOKEN_STOP) { memcpy(path + plen, "<stop>", 6); len = 0; extra = 6; }
            walk_states(m, v, grammar, path, plen + len + extra, depth - 1);
        }
        CHECK_RC(xg2_matcher_rollback(m, 1), XG2_OK);
    }
}

static const char *const mask_grammars[] = {
    "root ::= \"ab\"+\n",
    "root ::= [a-c]* \"}\"\n",
    "root ::= \"{\" (\"\\\"a\\\"\" | \"b\")? \"}\"\n",
    "root ::= \"\\u00e9\"+ | \"x\"\n",
    "root ::= x \"b\" | x \"c\"\nx ::= \"a\"+ (= \"b\")\n",
    "root ::= \"a\" root \"b\" | \"\"\n",
    "root ::= \" hello\" | \"\\n\" [a-c]\n",
    "root ::= [^a]{2,3}\n",
};

static void mask_oracle_for_vocab(int type, const char *const *toks, int32_t n, int32_t vocab_size,
                                  const int32_t *special, int32_t ns, const int32_t *stop, int32_t nst) {
    xg2_vocab *v = make_vocab(type, toks, n, vocab_size, special, ns, stop, nst);
    for (size_t gi = 0; gi < sizeof mask_grammars / sizeof *mask_grammars; gi++) {
        gcm x = MAKE_GCM(mask_grammars[gi], v);
        if (!x.m) { free_gcm(&x); continue; }
        char path[256];
        walk_states(x.m, v, mask_grammars[gi], path, 0, 3);
        free_gcm(&x);
    }
    xg2_vocab_free(v);
}

TEST(mask_matches_accept_token_raw) {
    const char *toks[] = {"a", "b", "c", "ab", "ba", "abab", "bc", "}", "{", "\"", "\"a\"", "\"a",
                          "\xc3\xa9", "\xc3", "\xa9", "\xc3\xa9\xc3\xa9", "x", "</s>", "<pad>", "",
                          " hello", " ", "\n", "\na", "ab}", "aab", "bb", "cc"};
    int32_t special[] = {18};
    int32_t stop[] = {17};
    mask_oracle_for_vocab(XG2_VOCAB_RAW, toks, 28, 64 + 3, special, 1, stop, 1);
}

TEST(mask_matches_accept_token_byte_fallback) {
    const char *toks[] = {"a", "b", "<0x61>", "<0x62>", "\xe2\x96\x81hello", "\xe2\x96\x81", "<0x0A>", "<0xC3>",
                          "<0xA9>", "\xc3\xa9", "}", "{", "\"", "</s>", "<s>", "ab", "\xe2\x96\x81h", "x", "c"};
    int32_t special[] = {14};
    int32_t stop[] = {13};
    mask_oracle_for_vocab(XG2_VOCAB_BYTE_FALLBACK, toks, 19, 33, special, 1, stop, 1);
}

TEST(mask_matches_accept_token_byte_level) {
    const char *toks[] = {"a", "b", "c", "ab", "\xc4\xa0hello", "\xc4\xa0", "\xc4\x8a", "\xc4\x8a" "a",
                          "\xc3\x83", "\xc2\xa9", "\xc3\x83\xc2\xa9", "\xc3\xa9", "}", "{", "\"", "<|endoftext|>",
                          "x", "hello world", "\xe4\xbd\xa0"};
    int32_t stop[] = {15};
    mask_oracle_for_vocab(XG2_VOCAB_BYTE_LEVEL, toks, 19, 19, NULL, 0, stop, 1);
}

int main(int argc, char **argv) {
    return RUN_TESTS(argc, argv, T_(raw_decoding), T_(byte_fallback_decoding), T_(byte_level_decoding),
                     T_(byte_level_full_alphabet), T_(flags_and_id_lists), T_(offsets_and_empty_vocab),
                     T_(bad_arguments), T_(mask_matches_accept_token_raw),
                     T_(mask_matches_accept_token_byte_fallback), T_(mask_matches_accept_token_byte_level));
}
