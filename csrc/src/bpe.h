/* Private: exact byte-pair encoding counts for o200k_base and cl100k_base (see bpe.c), the
 * pre-tokenizers' piece boundaries (tokens.c), and the word loads that both files share. */
#ifndef CK_BPE_H_
#define CK_BPE_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* One encoding's rank table and its index (opaque). */
typedef struct ck__bpe ck__bpe;

/* The encoding: o200k_base (o200k nonzero) or cl100k_base. The first call for each indexes
 * its rank table (a few milliseconds, into static storage); thread-safe; never fails. */
const ck__bpe *ck__bpe_get(int o200k);

/* The exact number of tokens BPE makes of one pre-tokenizer piece p[0..len) (len > 0), as
 * tiktoken counts it; `room` (>= len) bytes may be read at p. A piece seen before is answered
 * from a per-process cache (thread-safe, lock-free) that knows pieces by a seeded 64-bit hash.
 * With `estimate` set, a piece of more than CK__BPE_GIANT bytes without a short period (which
 * costs the most per byte) is estimated from samples instead, a little above its count. Never
 * fails: should memory for a very long piece run out, the answer is its byte count, which no
 * encoding exceeds. */
#define CK__BPE_GIANT ((size_t)64 << 10)
uint64_t ck__bpe_count(const ck__bpe *b, const uint8_t *p, size_t len, size_t room,
                       int estimate);

/* The same without the cache, by one method: CK__BPE_MERGE, tiktoken's merge loop (quadratic
 * in the piece, so used on short pieces only; past 256 bytes this takes backtracking),
 * CK__BPE_BACKTRACK, the linear method bpe.c uses on long pieces, CK__BPE_PERIODIC, its method
 * for long runs of a short period (others take backtracking), or CK__BPE_AUTO, the choice
 * ck__bpe_count() makes. For the tests and the fuzz target, which hold the methods to the
 * same answer. */
enum { CK__BPE_AUTO = 0, CK__BPE_MERGE = 1, CK__BPE_BACKTRACK = 2, CK__BPE_PERIODIC = 3 };
uint64_t ck__bpe_count_with(const ck__bpe *b, const uint8_t *p, size_t len, int method);

/* Number of tokens in the encoding, and the bytes of token `rank` (borrowed from static data;
 * never free) with its length in *len; NULL past the last rank. For the tests. */
uint32_t ck__bpe_tokens(const ck__bpe *b);
const uint8_t *ck__bpe_token(const ck__bpe *b, uint32_t rank, size_t *len);

/* The end of the pre-tokenizer piece that starts at byte i (< len) of s, by the rules of
 * o200k_base (o200k nonzero) or cl100k_base (tokens.c). For the tests and the fuzz target. */
size_t ck__token_piece_end(const char *s, size_t len, size_t i, int o200k);

/* Up to 8 bytes at p (`room` of them may be read) as a little-endian word, zeros past room. */
static inline uint64_t ck__load8(const uint8_t *p, size_t room) {
    uint64_t w;
    if (room >= 8) {
        memcpy(&w, p, 8); /* one load; only a text's last bytes take the slow copy */
    } else {
        uint64_t tail = 0; /* apart, so that the common case keeps its word in a register */
        memcpy(&tail, p, room);
        w = tail;
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

/* The bytes at p as a little-endian 64-bit word, `k` (1-8) of them, the rest zero; `room`
 * (>= k) is how many bytes may be read at p. */
static inline uint64_t ck__word_at(const uint8_t *p, size_t k, size_t room) {
    uint64_t w = ck__load8(p, room);
    return k >= 8 ? w : w & ((UINT64_C(1) << 8 * k) - 1);
}

#endif
