/*
 * compiled.c -- the grammar/vocabulary pair.
 */
#include "token_edges.h"

int xg2_compiled_new(const xg2_grammar *g, const xg2_vocab *v, xg2_compiled **out) {
    xg2__clear_error();
    if (!g || !v || !out) return xg2__fail(XG2_ERR_ARG, "NULL argument");
    xg2_compiled *c = xg2__calloc(1, sizeof *c);
    if (!c) return XG2_NOMEM();
    c->refs = 1;
    xg2__grammar_retain(g);
    xg2__vocab_retain(v);
    c->g = g;
    c->v = v;
    int rc = xg2__token_bind(c);
    if (rc) {
        xg2_compiled_free(c);
        return rc;
    }
    *out = c;
    return XG2_OK;
}

void xg2__compiled_retain(const xg2_compiled *c) { XG2_REF_INC((xg2_compiled *)c); }

void xg2_compiled_free(xg2_compiled *c) {
    if (!c || XG2_REF_DEC(c) != 0) return;
    xg2_grammar_free((xg2_grammar *)c->g);
    xg2_vocab_free((xg2_vocab *)c->v);
    xg2__free(c);
}

size_t xg2_compiled_memory_bytes(const xg2_compiled *c) {
    return c ? sizeof *c + c->g->memory_bytes : 0;
}
