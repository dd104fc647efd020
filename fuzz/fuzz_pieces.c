/* libFuzzer target: the pre-tokenizer scanners and the BPE counter of tokens.c and bpe.c on
 * arbitrary bytes. Whatever the input, for both encodings:
 *   - the pieces cover it, one after another, none empty;
 *   - a piece is where the scanner puts it whatever came before (each regex match starts at its
 *     own position and never looks back): the suffix from any piece start cuts alike;
 *   - each piece counts at least one token and at most one per byte, and the merge loop,
 *     backtracking and (for runs) the periodic method agree on it;
 *   - the text's exact count is the sum of its pieces' counts, and the default equals o200k
 *     (no input here reaches the 64 KB a piece needs to be estimated). */
#include <string.h>

#include "ctxkeel.h"
#include "../csrc/src/bpe.h"

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) __builtin_trap();                                                         \
    } while (0)

#define MAX_PIECES 4096
/* The input is cut to this: each piece is counted three ways, the merge loop is quadratic in
 * its piece, and coverage tracing makes every comparison slow; short inputs keep runs fast. */
#define MAX_INPUT 1024

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    const char *s = (const char *)data;
    if (size > MAX_INPUT) size = MAX_INPUT;
    static size_t ends[MAX_PIECES], tail[MAX_PIECES];
    for (int o200k = 0; o200k < 2; o200k++) {
        const ck__bpe *b = ck__bpe_get(o200k);
        size_t n = 0;
        uint64_t sum = 0;
        for (size_t i = 0, e; i < size; i = e) {
            e = ck__token_piece_end(s, size, i, o200k);
            REQUIRE(e > i && e <= size);
            if (n < MAX_PIECES) ends[n] = e;
            n++;
            uint64_t merge = ck__bpe_count_with(b, data + i, e - i, CK__BPE_MERGE);
            REQUIRE(merge >= 1 && merge <= e - i);
            if (e - i >= 2 && e - i <= 256)
                REQUIRE(ck__bpe_count_with(b, data + i, e - i, CK__BPE_BACKTRACK) == merge);
            /* The periodic method (on runs of 129 bytes and more) is slow to set up. */
            if (e - i > 128 && e - i <= 160)
                REQUIRE(ck__bpe_count_with(b, data + i, e - i, CK__BPE_PERIODIC) == merge);
            sum += merge;
        }
        ck_estimator est = o200k ? CK_EST_O200K : CK_EST_CL100K;
        REQUIRE(ck_estimate_text(s, size, est) == sum);
        if (o200k) REQUIRE(ck_estimate_text(s, size, CK_EST_DEFAULT) == sum);
        /* The suffix from the middle piece start cuts as the whole text does from there. */
        if (n >= 2 && n <= MAX_PIECES) {
            size_t from = ends[n / 2 - 1], k = 0;
            for (size_t i = from, e; i < size; i = e, k++) {
                e = ck__token_piece_end(s + from, size - from, i - from, o200k) + from;
                tail[k] = e;
            }
            REQUIRE(k == n - n / 2);
            REQUIRE(memcmp(tail, ends + n / 2, k * sizeof *tail) == 0);
        }
    }
    return 0;
}
