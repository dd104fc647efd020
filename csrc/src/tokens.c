/* Token counts.
 *
 * chars4 is UTF-8 bytes / 4, kept exactly for compatibility. The other estimators count as
 * tiktoken-family tokenizers do, in one pass over the text:
 *
 *   1. Cut the text into pieces with the tokenizer's own pre-tokenizer rules, written out below
 *      as scanners for o200k_base and cl100k_base (no regex engine; the Unicode classes are a
 *      generated table). BPE never merges across pieces, so the count of a text is the sum of
 *      the counts of its pieces.
 *   2. One byte, or one to three digits, is one token.
 *   3. Look the piece up in a small hash table of frequent pieces with their exact counts
 *      (token_table.h, generated offline by tools/gen_token_table.js), which stays in cache.
 *   4. Else count it exactly by byte-pair encoding (bpe.c), which caches what it counted.
 *
 * The default estimator is o200k_base counted so, except that one unbroken piece of more than
 * 64 KB (a run with no pre-tokenizer boundary, as hostile input has) is estimated from samples,
 * a little above its count (see ck__bpe_count()). Every function here is thread-safe. What
 * counts toward a message (content, ids, names, arguments, images, the per-message and
 * per-request overheads) is decided here too. */
#include <stdatomic.h>
#include <string.h>

#include "./bpe.h"
#include "./internal.h"
#include "./token_table.h"

/* Regex classes of the class byte (bits 0-2). NL is \r or \n; WS is any other \s. */
enum { RC_P = 0, RC_LU = 1, RC_LL = 2, RC_LO = 3, RC_M = 4, RC_N = 5, RC_WS = 6, RC_NL = 7 };

#define FAIL ((size_t)-1)

/* What a pre-tokenizer's fast path knows of the piece it cut, so that pricing it need not find
 * out again: nothing, that it is all ASCII, or that it is one to three ASCII digits. */
enum { PK_ANY, PK_ASCII, PK_DIGITS };

/* The pre-tokenizers and the table lookup are inlined into the loop over a text, where the
 * compiler would otherwise leave them as calls; what is rare there is kept out of it. */
#if defined(__GNUC__) || defined(__clang__)
#define HOT_INLINE static inline __attribute__((always_inline))
#define NOINLINE static __attribute__((noinline))
#else
#define HOT_INLINE static inline
#define NOINLINE static
#endif

/* One encoding's table of frequent pieces (see token_table.h). */
typedef struct profile {
    uint32_t mask;
    const uint32_t *meta;
    const uint64_t *keys;
    const uint8_t *blob;
} profile;

static const profile O200K = {CK_TT_O200K_MASK, ck_tt_o200k_meta, ck_tt_o200k_keys,
                              ck_tt_o200k_blob};
static const profile CL100K = {CK_TT_CL100K_MASK, ck_tt_cl100k_meta, ck_tt_cl100k_keys,
                               ck_tt_cl100k_blob};

static uint64_t div4(uint64_t bytes) { return (bytes + 3) / 4; }

/* ---- Characters ------------------------------------------------------------------------- */

/* The class of a byte that does not start a valid UTF-8 sequence: a one-byte character of
 * class P. */
#define INVALID RC_P

/* The class byte of the character at s[i], its length in *len and its code point in *cp.
 * Invalid bytes are INVALID, so any input is measurable. */
static inline uint8_t decode_at(const uint8_t *s, size_t n, size_t i, size_t *len,
                                uint32_t *cp) {
    uint32_t c = s[i];
    *cp = c;
    if (c < 0x80) {
        *len = 1;
        return ck_tt_stage2[c]; /* stage1[0] is block 0 */
    }
    size_t k;
    uint32_t v;
    *len = 1;
    if (c - 0xE0 < 0x10 && n - i >= 3) { /* three bytes, as most CJK: one test for both tails */
        uint32_t b1 = s[i + 1], b2 = s[i + 2];
        v = (c & 0x0F) << 12 | (b1 & 0x3F) << 6 | (b2 & 0x3F);
        if (((b1 | b2 << 8) & 0xC0C0) != 0x8080 || v < 0x800) return INVALID;
        *len = 3;
        *cp = v;
        return ck_tt_stage2[(size_t)ck_tt_stage1[v >> 8] << 8 | (v & 0xFF)];
    }
    if (c >= 0xC2 && c <= 0xDF) k = 2, v = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) k = 3, v = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) k = 4, v = c & 0x07;
    else k = 0, v = 0;
    if (k == 0 || k > n - i) return INVALID;
    for (size_t j = 1; j < k; j++) {
        uint8_t b = s[i + j];
        if ((b & 0xC0) != 0x80) return INVALID;
        v = v << 6 | (b & 0x3F);
    }
    if ((k == 3 && v < 0x800) || (k == 4 && (v < 0x10000 || v > 0x10FFFF))) return INVALID;
    *len = k;
    *cp = v;
    return ck_tt_stage2[(size_t)ck_tt_stage1[v >> 8] << 8 | (v & 0xFF)];
}

static inline uint8_t class_at(const uint8_t *s, size_t n, size_t i, size_t *len) {
    uint32_t cp;
    return decode_at(s, n, i, len, &cp);
}

#define BYTES(x) (UINT64_C(0x0101010101010101) * (x))

/* The high bit of every byte of w that is ASCII and within [lo, hi] (lo > 0). Adding to the
 * low seven bits of each byte cannot carry into the next byte. */
static inline uint64_t bytes_in(uint64_t w, unsigned lo, unsigned hi) {
    uint64_t low7 = w & BYTES(0x7F);
    return (low7 + BYTES(0x80 - lo)) & ~(low7 + BYTES(0x7F - hi)) & ~w & BYTES(0x80);
}

/* Index of the first byte whose high bit is set in m (m has only byte high bits, not 0). */
static inline unsigned first_byte(uint64_t m) {
#if defined(__GNUC__) || defined(__clang__)
    return (unsigned)__builtin_ctzll(m) / 8;
#else
    unsigned k = 0;
    while (!(m & 0x80)) m >>= 8, k++;
    return k;
#endif
}

/* Index of the last byte whose high bit is set in m (m has only byte high bits, not 0). */
static inline unsigned last_byte(uint64_t m) {
#if defined(__GNUC__) || defined(__clang__)
    return (63u - (unsigned)__builtin_clzll(m)) / 8;
#else
    unsigned k = 7;
    while (!(m >> 63)) m <<= 8, k--;
    return k;
#endif
}

/* Past the run of ASCII letters at e: capitals (`lower` 0), small letters (`lower` 1), or
 * both (`lower` 2), eight bytes at a time, so that a word costs no branch per letter. */
static inline size_t alpha_run(const uint8_t *s, size_t n, size_t e, int lower) {
    for (; e < n; e += 8) {
        uint64_t w = ck__load8(s + e, n - e);
        uint64_t in = lower == 0 ? bytes_in(w, 'A', 'Z')
                      : lower == 1 ? bytes_in(w, 'a', 'z')
                                   : bytes_in(w, 'A', 'Z') | bytes_in(w, 'a', 'z');
        uint64_t out = ~in & BYTES(0x80); /* the zeros past the end are never letters */
        if (out) return e + first_byte(out);
    }
    return n;
}

static inline unsigned rc_at(const uint8_t *s, size_t n, size_t i, size_t *len) {
    return class_at(s, n, i, len) & 7u;
}

/* The sets the regexes name. o200k's "upper" letters are [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and
 * its "lower" letters [\p{Ll}\p{Lm}\p{Lo}\p{M}]: Lm, Lo and marks belong to both. */
#define IS_UPPER(rc) ((rc) == RC_LU || (rc) == RC_LO || (rc) == RC_M)
#define IS_LOWER(rc) ((rc) == RC_LL || (rc) == RC_LO || (rc) == RC_M)
#define IS_LETTER(rc) ((rc) >= RC_LU && (rc) <= RC_LO)                  /* \p{L} */
#define IS_LEAD(rc) ((rc) == RC_P || (rc) == RC_M || (rc) == RC_WS)    /* [^\r\n\p{L}\p{N}] */
#define IS_PUNCT(rc) ((rc) == RC_P || (rc) == RC_M)                    /* [^\s\p{L}\p{N}] */
#define IS_SPACE(rc) ((rc) == RC_WS || (rc) == RC_NL)                  /* \s */
#define IS_ASCII_ALPHA(c) ((unsigned)(((c) | 0x20u) - 'a') < 26)
/* An ASCII character that may precede a word in its piece: not a letter, digit, \r or \n. */
#define IS_ASCII_LEAD(c) ((c) < 0x80 && IS_LEAD(ck_tt_stage2[c] & 7u))

/* ---- The pre-tokenizers ------------------------------------------------------------------ */

/* Past the optional contraction suffix '(?:[sS]|[dD]|[mM]|[tT]|[lL][lL]|[vV][eE]|[rR][eE]). */
static inline size_t contraction(const uint8_t *s, size_t n, size_t e) {
    if (e + 1 >= n || s[e] != '\'') return e;
    unsigned a = s[e + 1] | 0x20u, b = e + 2 < n ? s[e + 2] | 0x20u : 0;
    if (a == 's' || a == 'd' || a == 'm' || a == 't') return e + 2;
    if ((a == 'l' && b == 'l') || (a == 'v' && b == 'e') || (a == 'r' && b == 'e')) return e + 3;
    return e;
}

/* Past a run of characters whose regex class is in `set` (a bit mask of classes). ASCII, the
 * bulk of most text, is classified straight from the first block of the class table. */
static inline size_t run_of(const uint8_t *s, size_t n, size_t i, unsigned set) {
    for (;;) {
        while (i < n && s[i] < 0x80) {
            if (!(set >> (ck_tt_stage2[s[i]] & 7u) & 1u)) return i;
            i++;
        }
        size_t len;
        if (i >= n || !(set >> rc_at(s, n, i, &len) & 1u)) return i;
        i += len;
    }
}

#define SET(rc) (1u << (rc))
#define UPPER_SET (SET(RC_LU) | SET(RC_LO) | SET(RC_M))
#define LOWER_SET (SET(RC_LL) | SET(RC_LO) | SET(RC_M))
#define LETTER_SET (SET(RC_LU) | SET(RC_LL) | SET(RC_LO))
#define PUNCT_SET (SET(RC_P) | SET(RC_M))

/* o200k's [UPPER]*[LOWER]+ at j, as a backtracking regex matches it: the upper run as long as
 * possible, then lower letters; failing that, the run gives back characters until it ends
 * just before one that is in both sets (Lm, Lo or a mark), which then matches alone. */
static size_t o200k_upper_lower(const uint8_t *s, size_t n, size_t j) {
    size_t k = j, len, both_end = FAIL;
    unsigned rc = 0;
    while (k < n && IS_UPPER(rc = rc_at(s, n, k, &len))) {
        if (rc != RC_LU) both_end = k + len;
        k += len;
    }
    if (k < n && rc == RC_LL) return run_of(s, n, k, LOWER_SET);
    return both_end;
}

/* o200k's [UPPER]+[LOWER]* at j. */
static size_t o200k_upper_plus(const uint8_t *s, size_t n, size_t j) {
    size_t k = run_of(s, n, j, UPPER_SET);
    return k == j ? FAIL : run_of(s, n, k, LOWER_SET);
}

/* Past a whitespace run at i, with where the last newline in it ends (FAIL if none) and where
 * its last character starts. */
static size_t space_run(const uint8_t *s, size_t n, size_t i, size_t *nl_end, size_t *last) {
    size_t len;
    unsigned rc;
    *nl_end = FAIL;
    *last = i;
    while (i < n) {
        if (s[i] < 0x80) {
            rc = ck_tt_stage2[s[i]] & 7u;
            len = 1;
        } else {
            rc = rc_at(s, n, i, &len);
        }
        if (!IS_SPACE(rc)) break;
        *last = i;
        i += len;
        if (rc == RC_NL) *nl_end = i;
    }
    return i;
}

/* ` ?[^\s\p{L}\p{N}]+[\r\n/]*` (o200k) or ` ?[^\s\p{L}\p{N}]+[\r\n]*` (cl100k) at i. */
static size_t punct_piece(const uint8_t *s, size_t n, size_t i, int slash) {
    size_t j = i, len;
    if (s[i] == ' ' && i + 1 < n && IS_PUNCT(rc_at(s, n, i + 1, &len))) j = i + 1;
    size_t e = run_of(s, n, j, PUNCT_SET);
    if (e == j) return FAIL;
    while (e < n && (s[e] == '\r' || s[e] == '\n' || (slash && s[e] == '/'))) e++;
    return e;
}

/* \s*[\r\n]+ | \s+(?!\S) | \s+ at i (o200k): through the last newline of the run if it has
 * one, else the run, less its last character when a non-space follows (that one goes with the
 * next word). */
static size_t space_piece_o200k(const uint8_t *s, size_t n, size_t i) {
    size_t nl_end, last, e = space_run(s, n, i, &nl_end, &last);
    if (nl_end != FAIL) return nl_end;
    return e == n || last == i ? e : last;
}

/* \s+$ | \s*[\r\n] | \s+(?!\S) | \s at i (cl100k): the same, except that a run reaching
 * the end of the text is one piece. */
static size_t space_piece_cl100k(const uint8_t *s, size_t n, size_t i) {
    size_t nl_end, last, e = space_run(s, n, i, &nl_end, &last);
    if (e == n) return e;
    if (nl_end != FAIL) return nl_end;
    return last == i ? e : last;
}

/* The white-space piece at i (s[i] is ASCII white space) by the rules of space_piece_o200k() or
 * space_piece_cl100k(), when its run is all ASCII; else FAIL. The run is found eight bytes at a
 * time: ASCII white space (class WS or NL in the table) is \t, \n, \v, \f, \r and ' ', and
 * \r and \n (NL) end lines. */
static inline size_t ascii_space_piece(const uint8_t *s, size_t n, size_t i, int o200k) {
    size_t e = i, nl_end = FAIL;
    for (;; e += 8) {
        uint64_t w = ck__load8(s + e, n - e); /* the zeros past the end are not white space */
        uint64_t other = ~(bytes_in(w, '\t', '\r') | bytes_in(w, ' ', ' ')) & BYTES(0x80);
        uint64_t nl = bytes_in(w, '\n', '\n') | bytes_in(w, '\r', '\r');
        unsigned k = other ? first_byte(other) : 8;
        if (k < 8) nl &= (UINT64_C(1) << 8 * k) - 1;
        if (nl) nl_end = e + last_byte(nl) + 1;
        if (k < 8) {
            e += k;
            break;
        }
    }
    if (e < n && s[e] >= 0x80) return FAIL; /* a character that may be white space too */
    if (o200k) {
        if (nl_end != FAIL) return nl_end;
        return e == n || e - i == 1 ? e : e - 1;
    }
    if (e == n) return e;
    if (nl_end != FAIL) return nl_end;
    return e - i == 1 ? e : e - 1;
}

/* The end of the o200k_base piece that starts at i (< n). The alternatives, in order:
 *   [^\r\n\p{L}\p{N}]?[UPPER]*[LOWER]+(contraction)?
 *   [^\r\n\p{L}\p{N}]?[UPPER]+[LOWER]*(contraction)?
 *   \p{N}{1,3} |  ?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 * A fast path that knows more of the piece than PK_ANY says so in *kind (else left alone). */
HOT_INLINE size_t o200k_piece(const uint8_t *s, size_t n, size_t i, int *kind) {
    size_t len0, e;
    unsigned c = s[i], next = i + 1 < n ? s[i + 1] : ' '; /* a space ends nothing */
    /* Fast paths for a piece that starts with two ASCII characters, the bulk of most text.
     * Each returns only when no other byte could change the match; otherwise the general
     * rules below take over from the start of the piece and decide it exactly. */
    if ((c | next) < 0x80) {
        unsigned rc = ck_tt_stage2[c] & 7u;
        if (IS_ASCII_ALPHA(c) || (IS_LEAD(rc) && IS_ASCII_ALPHA(next))) {
            /* A word, bare or after one space or mark. In ASCII the letter rules reduce to
             * "capitals, then small letters". */
            e = i + !IS_ASCII_ALPHA(c);
            uint64_t w = ck__load8(s + e, n - e), not_lower;
            if ((unsigned)(s[e] - 'a') < 26) { /* most words: small letters only */
                not_lower = ~bytes_in(w, 'a', 'z') & BYTES(0x80);
            } else {
                uint64_t not_upper = ~bytes_in(w, 'A', 'Z') & BYTES(0x80);
                not_lower = not_upper ? ~bytes_in(w, 'a', 'z') & BYTES(0x80) &
                                            (~UINT64_C(0) << 8 * first_byte(not_upper))
                                      : 0;
            }
            if (not_lower) e += first_byte(not_lower); /* the word ends within 8 bytes */
            else e = alpha_run(s, n, alpha_run(s, n, e, 0), 1);
            if (e == n || s[e] < 0x80) {
                *kind = PK_ASCII;
                return contraction(s, n, e);
            }
        } else if (rc == RC_N) {
            for (e = i + 1; e < n && e < i + 3 && (unsigned)(s[e] - '0') < 10;) e++;
            if (e == i + 3 || e == n || s[e] < 0x80) {
                *kind = PK_DIGITS;
                return e;
            }
        } else if (rc == RC_P || (c == ' ' && (ck_tt_stage2[next] & 7u) == RC_P)) {
            /* No word can start here: the next character is ASCII and not a letter. */
            for (e = i + 1; e < n && s[e] < 0x80 && (ck_tt_stage2[s[e]] & 7u) == RC_P;) e++;
            if (e < n && s[e] >= 0x80) return punct_piece(s, n, i, 1); /* a mark may follow */
            while (e < n && (s[e] == '\r' || s[e] == '\n' || s[e] == '/')) e++;
            *kind = PK_ASCII;
            return e;
        } else {
            if ((e = ascii_space_piece(s, n, i, 1)) == FAIL) return space_piece_o200k(s, n, i);
            *kind = PK_ASCII;
            return e;
        }
    }
    unsigned rc = rc_at(s, n, i, &len0);
    if (IS_LEAD(rc) || IS_UPPER(rc) || IS_LOWER(rc)) {
        int lead = IS_LEAD(rc) && i + len0 < n;
        if ((lead && (e = o200k_upper_lower(s, n, i + len0)) != FAIL) ||
            (e = o200k_upper_lower(s, n, i)) != FAIL ||
            (lead && (e = o200k_upper_plus(s, n, i + len0)) != FAIL) ||
            (e = o200k_upper_plus(s, n, i)) != FAIL)
            return contraction(s, n, e);
    }
    if (rc == RC_N) {
        e = i + len0;
        for (int k = 1; k < 3 && e < n && rc_at(s, n, e, &len0) == RC_N; k++) e += len0;
        return e;
    }
    if ((e = punct_piece(s, n, i, 1)) != FAIL) return e;
    return space_piece_o200k(s, n, i);
}

/* The end of the cl100k_base piece that starts at i (< n):
 *   (contraction) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,3} |  ?[^\s\p{L}\p{N}]+[\r\n]*
 *   | \s+$ | \s*[\r\n] | \s+(?!\S) | \s
 * *kind as for o200k_piece(). */
HOT_INLINE size_t cl100k_piece(const uint8_t *s, size_t n, size_t i, int *kind) {
    size_t len0, e;
    unsigned c = s[i], next = i + 1 < n ? s[i + 1] : ' '; /* a space ends nothing */
    if (c == '\'' && (e = contraction(s, n, i)) != i) return e;
    if ((c | next) < 0x80) { /* the fast paths of o200k_piece(), without the case rule */
        unsigned rc = ck_tt_stage2[c] & 7u;
        if (IS_ASCII_ALPHA(c) || (IS_LEAD(rc) && IS_ASCII_ALPHA(next))) {
            e = alpha_run(s, n, i + !IS_ASCII_ALPHA(c), 2);
            if (e == n || s[e] < 0x80) {
                *kind = PK_ASCII;
                return e;
            }
        } else if (rc == RC_N) {
            for (e = i + 1; e < n && e < i + 3 && (unsigned)(s[e] - '0') < 10;) e++;
            if (e == i + 3 || e == n || s[e] < 0x80) {
                *kind = PK_DIGITS;
                return e;
            }
        } else if (rc == RC_P || (c == ' ' && (ck_tt_stage2[next] & 7u) == RC_P)) {
            for (e = i + 1; e < n && s[e] < 0x80 && (ck_tt_stage2[s[e]] & 7u) == RC_P;) e++;
            if (e < n && s[e] >= 0x80) return punct_piece(s, n, i, 0);
            while (e < n && (s[e] == '\r' || s[e] == '\n')) e++;
            *kind = PK_ASCII;
            return e;
        } else {
            if ((e = ascii_space_piece(s, n, i, 0)) == FAIL) return space_piece_cl100k(s, n, i);
            *kind = PK_ASCII;
            return e;
        }
    }
    unsigned rc = rc_at(s, n, i, &len0);
    if (IS_LEAD(rc) && i + len0 < n && (e = run_of(s, n, i + len0, LETTER_SET)) != i + len0)
        return e;
    if (IS_LETTER(rc)) return run_of(s, n, i, LETTER_SET);
    if (rc == RC_N) {
        e = i + len0;
        for (int k = 1; k < 3 && e < n && rc_at(s, n, e, &len0) == RC_N; k++) e += len0;
        return e;
    }
    if ((e = punct_piece(s, n, i, 0)) != FAIL) return e;
    return space_piece_cl100k(s, n, i);
}

/* ---- Counting ---------------------------------------------------------------------------- */

/* The hash that places a piece in the table of frequent pieces: its bytes as 64-bit words, each
 * xored in and multiplied; the slot is the top half, which every bit reaches
 * (gen_token_table.js hashes the same way). The table compares the bytes, so a weak hash costs
 * only a probe. `room` (>= len) bytes may be read at p; *first gets the first word. */
static inline uint64_t piece_hash(const uint8_t *p, size_t len, size_t room, uint64_t *first) {
    const uint64_t mix = UINT64_C(0xbf58476d1ce4e5b9);
    uint64_t w = ck__word_at(p, len, room);
    uint64_t h = ((uint64_t)len * UINT64_C(0x9e3779b97f4a7c15) ^ w) * mix;
    *first = w;
    for (size_t k = 8; k < len; k += 8) h = (h ^ ck__word_at(p + k, len - k, room - k)) * mix;
    return h;
}

/* Whether the piece p[0..len) (len > 8, `room` bytes readable) has the bytes at b past its first
 * word. The blob that b points into ends with 8 spare bytes. */
NOINLINE int same_rest(const uint8_t *b, const uint8_t *p, size_t len, size_t room) {
    for (size_t k = 8; k < len; k += 8)
        if (ck__word_at(b + k, len - k, 8) != ck__word_at(p + k, len - k, room - k)) return 0;
    return 1;
}

/* The exact count of the piece p[0..len) if the table of frequent pieces has it, else 0,
 * probing from slot `at`; `first` is its first word. A slot holds the piece's length and first
 * word, so most lookups read one slot and compare one word. The probe stops at an empty slot,
 * or at one that no piece probes past (META_MORE clear). */
#define META_MORE (1u << 19)
HOT_INLINE uint64_t table_count(const profile *pf, const uint8_t *p, size_t len, size_t room,
                                uint32_t at, uint64_t first) {
    for (;; at = (at + 1) & pf->mask) {
        uint32_t meta = pf->meta[at];
        if (!meta) return 0;
        if ((meta >> 20 & 63u) == len && pf->keys[at] == first &&
            (len <= 8 || same_rest(pf->blob + (meta & (META_MORE - 1)), p, len, room)))
            return meta >> 26;
        if (!(meta & META_MORE)) return 0;
    }
}

/* The counts of short pieces met lately, per encoding and per process: a direct-mapped table
 * small enough to stay in the first-level cache, in front of the table of frequent pieces and
 * of bpe.c's cache, both of which lie further out. A piece of two to seven bytes is held
 * inline, whole: its bytes in bits 0-55, its length in 56-58 and its count (never more than
 * its length) in 59-61, so that a slot is one word, read and written atomically, and a hit is
 * exact whatever the hash; 0 is an empty slot. The slot comes from the hash the frequent
 * table is probed by, which only decides what evicts what. */
#define SMALL_BITS 11
#define SMALL_MAX 7
static _Atomic uint64_t o200k_small[1u << SMALL_BITS], cl100k_small[1u << SMALL_BITS];

/* The exact count of the piece p[0..len) (2 <= len <= CK_TT_MAX_PIECE, `room` bytes readable)
 * from the caches in turn, counting it by BPE (bpe.c) if none has it. */
HOT_INLINE uint64_t short_count(const profile *pf, const ck__bpe *b, _Atomic uint64_t *small,
                                const uint8_t *p, size_t len, size_t room, int estimate) {
    uint64_t first, h = piece_hash(p, len, room, &first);
    _Atomic uint64_t *slot = &small[h >> (64 - SMALL_BITS)];
    uint64_t key = first | (uint64_t)len << 56;
    if (len <= SMALL_MAX) {
        uint64_t seen = atomic_load_explicit(slot, memory_order_relaxed);
        if ((seen & ~(UINT64_C(7) << 59)) == key) return seen >> 59;
    }
    uint64_t c = table_count(pf, p, len, room, (uint32_t)(h >> 32) & pf->mask, first);
    if (!c) c = ck__bpe_count(b, p, len, room, estimate);
    if (len <= SMALL_MAX) atomic_store_explicit(slot, key | c << 59, memory_order_relaxed);
    return c;
}

/* The tokens of a text: the sum of the exact counts of its pieces (bpe.c), or of estimates
 * for giant ones when `estimate` is set. One byte is one token, and so are one to three digits
 * in both encodings (a test checks all 1,110). */
HOT_INLINE uint64_t count_with(const profile *pf, const ck__bpe *b, _Atomic uint64_t *small,
                               const uint8_t *s, size_t len, int o200k, int estimate) {
    uint64_t tokens = 0;
    for (size_t i = 0, e; i < len; i = e) {
        int kind = PK_ANY;
        e = o200k ? o200k_piece(s, len, i, &kind) : cl100k_piece(s, len, i, &kind);
        if (e - i == 1 || kind == PK_DIGITS) {
            tokens++;
            continue;
        }
        tokens += e - i <= CK_TT_MAX_PIECE
                      ? short_count(pf, b, small, s + i, e - i, len - i, estimate)
                      : ck__bpe_count(b, s + i, e - i, len - i, estimate);
    }
    return tokens;
}

size_t ck__token_piece_end(const char *s, size_t len, size_t i, int o200k) {
    int kind = PK_ANY;
    const uint8_t *u = (const uint8_t *)s;
    return o200k ? o200k_piece(u, len, i, &kind) : cl100k_piece(u, len, i, &kind);
}

/* Tokens of one string by an estimator other than chars4. */
static uint64_t text_tokens(ck_estimator est, const char *data, size_t len) {
    const uint8_t *s = (const uint8_t *)data;
    switch (est) {
        case CK_EST_O200K: return count_with(&O200K, ck__bpe_get(1), o200k_small, s, len, 1, 0);
        case CK_EST_CL100K:
            return count_with(&CL100K, ck__bpe_get(0), cl100k_small, s, len, 0, 0);
        default: return count_with(&O200K, ck__bpe_get(1), o200k_small, s, len, 1, 1);
    }
}

/* ---- Public estimates ------------------------------------------------------------------- */

uint64_t ck_estimate_text(const char *data, size_t len, ck_estimator est) {
    if (!data || !len) return 0;
    if (est == CK_EST_CHARS4) return div4(len);
    return text_tokens(est, data, len);
}

/* Bytes that count toward a message, and the number of image parts (which cost a fixed
 * amount in every estimator instead of their bytes). Parts stand `stride` bytes apart so that
 * both ck_part arrays and ck_out_part arrays can be measured. */
static uint64_t parts_bytes(const ck_part *parts, size_t stride, size_t n, uint64_t *images) {
    uint64_t bytes = 0;
    const char *at = (const char *)parts;
    for (size_t k = 0; k < n; k++, at += stride) {
        const ck_part *p = (const ck_part *)(const void *)at;
        if (p->kind == CK_PART_IMAGE) {
            (*images)++;
            continue;
        }
        bytes += p->text_len + p->id_len + p->name_len;
    }
    return bytes;
}

/* Tokens of the same parts by an estimator other than chars4. Each string is its own text to the
 * tokenizer (a provider renders them in separate fields), so pieces never span two of them,
 * and each is rounded on its own: a message then costs exactly what its strings cost apart,
 * and a sum over single parts (as the compactor makes) equals the message's estimate. */
static uint64_t parts_tokens(ck_estimator est, const ck_part *parts, size_t stride, size_t n,
                             uint64_t *images) {
    uint64_t tokens = 0;
    const char *at = (const char *)parts;
    for (size_t k = 0; k < n; k++, at += stride) {
        const ck_part *p = (const ck_part *)(const void *)at;
        if (p->kind == CK_PART_IMAGE) {
            (*images)++;
            continue;
        }
        if (p->text_len) tokens += text_tokens(est, p->text, p->text_len);
        if (p->id_len) tokens += text_tokens(est, p->id, p->id_len);
        if (p->name_len) tokens += text_tokens(est, p->name, p->name_len);
    }
    return tokens;
}

uint64_t ck__estimate_parts(const ck_part *parts, size_t stride, size_t n, ck_estimator est) {
    uint64_t images = 0;
    if (est == CK_EST_CHARS4)
        return div4(parts_bytes(parts, stride, n, &images)) + images * CK_IMAGE_TOKENS;
    uint64_t tokens = parts_tokens(est, parts, stride, n, &images);
    return tokens + images * CK_IMAGE_TOKENS + CK_MESSAGE_OVERHEAD;
}

uint64_t ck_estimate_message(const ck_history *history, size_t i, ck_estimator est) {
    if (!history || i >= history->n_msgs) return 0;
    return ck__estimate_parts(ck__msg_parts(history, i), sizeof(ck_part),
                              history->msgs[i].n_parts, est);
}

uint64_t ck_estimate_history(const ck_history *history, ck_estimator est) {
    if (!history || !history->n_msgs) return 0;
    if (est == CK_EST_CHARS4) {
        /* chars4 divides the whole once, as the compatibility mode is documented to do. */
        uint64_t images = 0, bytes = 0;
        for (size_t i = 0; i < history->n_msgs; i++)
            bytes += parts_bytes(ck__msg_parts(history, i), sizeof(ck_part),
                                 history->msgs[i].n_parts, &images);
        return div4(bytes) + images * CK_IMAGE_TOKENS;
    }
    /* The sum of the messages, so that a history's estimate equals what its messages say. */
    uint64_t tokens = CK_REQUEST_OVERHEAD;
    for (size_t i = 0; i < history->n_msgs; i++) tokens += ck_estimate_message(history, i, est);
    return tokens;
}

uint64_t ck_estimate_tools(const char *json, size_t len, ck_estimator est) {
    return ck_estimate_text(json, len, est);
}

const char *ck_estimator_name(ck_estimator est) {
    switch (est) {
        case CK_EST_DEFAULT: return "default";
        case CK_EST_CHARS4: return "chars4";
        case CK_EST_CL100K: return "cl100k";
        case CK_EST_O200K: return "o200k";
    }
    return NULL;
}

int ck_estimator_from_name(const char *name, size_t len, ck_estimator *out) {
    if (!name || !out) return CK_EINVAL;
    for (int e = 0;; e++) {
        const char *known = ck_estimator_name((ck_estimator)e);
        if (!known) return CK_EINVAL;
        if (strlen(known) == len && memcmp(known, name, len) == 0) {
            *out = (ck_estimator)e;
            return CK_OK;
        }
    }
}
