/* The matcher behind evidence search (see regex.h for the syntax). A pattern is parsed into a
 * tree, the tree compiled to a Thompson NFA (a program of CHAR, SPLIT, JMP, ASSERT and MATCH
 * instructions), and the NFA run as a DFA whose states are made the first time the text needs
 * them: a state is the set of instructions waiting for the next character, with two flags (at
 * the start of the line, after a word character). Characters are grouped into classes that
 * no instruction tells apart, so a state's transition table has one entry per class rather
 * than one per code point. Each step costs at most one pass over the program, so the work is
 * linear in the text whatever the pattern. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "./alloc.h"
#include "./idmap.h"
#include "./internal.h"
#include "./regex.h"

/* Characters are code points, and each byte that is not part of valid UTF-8 is REGEX_RAW plus
 * the byte: every text decodes, and such a byte only matches what names it. */
#define REGEX_RAW 0x110000u
#define REGEX_END 0x110100u /* one past the largest character */

#define REGEX_NIL UINT32_MAX
#define REGEX_MAX_DEPTH 200

/* Instructions. */
enum { REGEX_CHAR, REGEX_SPLIT, REGEX_JMP, REGEX_ASSERT, REGEX_MATCH };
/* Assertions: ^ $ \b \B \< \>. */
enum { REGEX_BOL, REGEX_EOL, REGEX_WORDB, REGEX_NWORDB, REGEX_WSTART, REGEX_WEND };
/* Tree nodes. */
enum { REGEX_N_EMPTY, REGEX_N_SET, REGEX_N_CAT, REGEX_N_ALT, REGEX_N_REPEAT, REGEX_N_ASSERT };

/* DFA state flags, and the special targets of a transition. */
#define REGEX_F_BOL 1u
#define REGEX_F_WORD 2u
#define REGEX_UNKNOWN (-1)
#define REGEX_MATCHED (-2)
#define REGEX_NOROOM (-3)

/* The DFA cache is flushed when it holds this many states or bytes. */
#define REGEX_DFA_STATES 4096
#define REGEX_DFA_BYTES ((size_t)2 << 20)
#define REGEX_TABLE (2 * REGEX_DFA_STATES) /* hash slots, a power of two */

typedef struct regex_range {
    uint32_t lo, hi; /* inclusive */
} regex_range;

typedef struct regex_node {
    uint8_t kind, what;   /* what: the assertion */
    int32_t min, max;     /* repeat counts; max -1 means no bound */
    uint32_t child, next; /* first child (cat, alt, repeat) and next sibling, or REGEX_NIL */
    uint32_t set, n_set;  /* a set's ranges in the pool, later its class intervals */
} regex_node;

typedef struct regex_parser {
    const unsigned char *start, *p, *end;
    regex_node *nodes;
    size_t n_nodes, cap_nodes;
    regex_range *ranges;
    size_t n_ranges, cap_ranges;
    int depth, words;
    int rc;
    const char *msg;
    size_t at;
} regex_parser;

typedef struct regex_inst {
    uint8_t op, what;
    uint32_t x, y; /* next instruction(s); CHAR: y is the first of n class intervals */
    uint32_t n;
} regex_inst;

typedef struct regex_state {
    uint64_t hash;
    uint32_t flags, n;
    int eol;       /* whether the text may end here: -1 not known yet, 0, 1 */
    int32_t *next; /* per class: a state index, REGEX_UNKNOWN or REGEX_MATCHED */
    uint32_t pcs[];
} regex_state;

struct ck__regex {
    regex_inst *prog;
    uint32_t n_prog;
    uint32_t *ivals; /* class intervals of CHAR instructions, lo and hi pairs */
    uint32_t *bounds; /* class k holds the characters [bounds[k], bounds[k + 1]) */
    uint32_t n_classes;
    uint32_t ascii[128];
    uint8_t *class_word;
    int words;     /* the program has word assertions: states track the last character */
    int dead_idle; /* no match can start after the first character (the pattern begins ^) */
    int prefilter; /* first[] is valid */
    uint8_t first[128]; /* ASCII characters that can begin a match */
    /* Scratch for steps. */
    uint32_t *mark, *mark2, gen, gen2;
    uint32_t *stack, *chars, *kern_a, *kern_b;
    /* The DFA. */
    regex_state **states;
    uint32_t n_states;
    int32_t *table;
    size_t bytes;
    uint64_t flushes;
    int32_t idle[2]; /* the states with no thread and no BOL, by the last-word flag */
    uint32_t spill_n, spill_flags; /* see regex_transition() */
};

/* ---- characters ---- */

/* Decodes the character at s (n > 0 bytes left); returns its length. */
static size_t regex_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        if (n >= 2 && (s[1] & 0xC0) == 0x80) {
            *cp = (uint32_t)(c & 0x1F) << 6 | (s[1] & 0x3Fu);
            return 2;
        }
    } else if (c >= 0xE0 && c <= 0xEF) {
        unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        if (n >= 3 && s[1] >= lo && s[1] <= hi && (s[2] & 0xC0) == 0x80) {
            *cp = (uint32_t)(c & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3Fu);
            return 3;
        }
    } else if (c >= 0xF0 && c <= 0xF4) {
        unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        if (n >= 4 && s[1] >= lo && s[1] <= hi && (s[2] & 0xC0) == 0x80 &&
            (s[3] & 0xC0) == 0x80) {
            *cp = (uint32_t)(c & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 |
                  (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3Fu);
            return 4;
        }
    }
    *cp = REGEX_RAW + c;
    return 1;
}

static int regex_is_word(uint32_t c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

/* ---- parsing ---- */

static uint32_t regex_parse_alt(regex_parser *p);

static uint32_t regex_fail(regex_parser *p, int rc, const char *msg) {
    if (!p->rc) {
        p->rc = rc;
        p->msg = msg;
        p->at = (size_t)(p->p - p->start);
    }
    return REGEX_NIL;
}

static uint32_t regex_node_new(regex_parser *p, int kind) {
    if (ck__grow((void **)&p->nodes, &p->cap_nodes, p->n_nodes + 1, sizeof *p->nodes))
        return regex_fail(p, CK_ENOMEM, NULL);
    regex_node *n = &p->nodes[p->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->child = n->next = REGEX_NIL;
    return (uint32_t)p->n_nodes++;
}

static int regex_add_range(regex_parser *p, uint32_t lo, uint32_t hi) {
    if (ck__grow((void **)&p->ranges, &p->cap_ranges, p->n_ranges + 1, sizeof *p->ranges)) {
        regex_fail(p, CK_ENOMEM, NULL);
        return -1;
    }
    p->ranges[p->n_ranges].lo = lo;
    p->ranges[p->n_ranges].hi = hi;
    p->n_ranges++;
    return 0;
}

static int regex_range_order(const void *a, const void *b) {
    const regex_range *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Sorts and merges the ranges from `begin` on, and complements them when `negate`. */
static int regex_close_set(regex_parser *p, size_t begin, int negate) {
    regex_range *r = p->ranges + begin;
    size_t n = p->n_ranges - begin, k = 0;
    if (n > 1) qsort(r, n, sizeof *r, regex_range_order);
    for (size_t i = 0; i < n; i++) {
        if (k && r[i].lo <= r[k - 1].hi + 1) {
            if (r[i].hi > r[k - 1].hi) r[k - 1].hi = r[i].hi;
        } else {
            r[k++] = r[i];
        }
    }
    p->n_ranges = begin + k;
    if (!negate) return 0;
    /* The complement of k ranges has at most k + 1, written over them in order: entry m is
     * written only after entry m (m <= i) was read. */
    if (regex_add_range(p, 0, 0)) return -1;
    r = p->ranges + begin;
    size_t m = 0;
    uint32_t from = 0;
    for (size_t i = 0; i < k; i++) {
        uint32_t lo = r[i].lo, hi = r[i].hi;
        if (lo > from) {
            r[m].lo = from;
            r[m].hi = lo - 1;
            m++;
        }
        from = hi + 1;
    }
    if (from < REGEX_END) {
        r[m].lo = from;
        r[m].hi = REGEX_END - 1;
        m++;
    }
    p->n_ranges = begin + m;
    return 0;
}

/* The ASCII classes, as range lists ending in {0, 0}. */
static const regex_range REGEX_DIGIT[] = {{'0', '9'}, {0, 0}};
static const regex_range REGEX_WORD[] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}, {0, 0}};
static const regex_range REGEX_SPACE[] = {{'\t', '\r'}, {' ', ' '}, {0, 0}};

static const struct {
    const char *name;
    regex_range r[5];
} regex_classes[] = {
    {"alpha", {{'A', 'Z'}, {'a', 'z'}, {0, 0}}},
    {"digit", {{'0', '9'}, {0, 0}}},
    {"alnum", {{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {0, 0}}},
    {"upper", {{'A', 'Z'}, {0, 0}}},
    {"lower", {{'a', 'z'}, {0, 0}}},
    {"space", {{'\t', '\r'}, {' ', ' '}, {0, 0}}},
    {"blank", {{'\t', '\t'}, {' ', ' '}, {0, 0}}},
    {"punct", {{'!', '/'}, {':', '@'}, {'[', '`'}, {'{', '~'}, {0, 0}}},
    {"print", {{' ', '~'}, {0, 0}}},
    {"graph", {{'!', '~'}, {0, 0}}},
    {"cntrl", {{0, 0x1F}, {0x7F, 0x7F}, {0, 0}}},
    {"xdigit", {{'0', '9'}, {'A', 'F'}, {'a', 'f'}, {0, 0}}},
};

/* Adds a class's ranges, or their complement: in a set of its own, merged, then copied. */
static int regex_add_class(regex_parser *p, const regex_range *r, int negate) {
    size_t begin = p->n_ranges;
    for (; r->hi; r++)
        if (regex_add_range(p, r->lo, r->hi)) return -1;
    if (!negate) return 0;
    return regex_close_set(p, begin, 1);
}

/* The class an escape names (\d \D \w \W \s \S), or NULL; *negate for the capital forms. */
static const regex_range *regex_escape_class(unsigned c, int *negate) {
    *negate = c == 'D' || c == 'W' || c == 'S';
    switch (c) {
        case 'd': case 'D': return REGEX_DIGIT;
        case 'w': case 'W': return REGEX_WORD;
        case 's': case 'S': return REGEX_SPACE;
        default: return NULL;
    }
}

/* The control character an escape names (\t \n \r \f \v), or -1. */
static int regex_escape_control(unsigned c) {
    switch (c) {
        case 't': return '\t';
        case 'n': return '\n';
        case 'r': return '\r';
        case 'f': return '\f';
        case 'v': return '\v';
        default: return -1;
    }
}

/* One character of the pattern, taken literally. */
static uint32_t regex_take_char(regex_parser *p) {
    uint32_t cp;
    p->p += regex_decode(p->p, (size_t)(p->end - p->p), &cp);
    return cp;
}

/* A bracket element that is one character: c, \c, [.c.] or [=c=]. Returns 0 with *cp set, 1
 * when the element was a class (added already), -1 on error. */
static int regex_bracket_char(regex_parser *p, uint32_t *cp) {
    const unsigned char *s = p->p;
    size_t left = (size_t)(p->end - s);
    if (left >= 2 && s[0] == '[' && (s[1] == '.' || s[1] == '=')) {
        unsigned kind = s[1];
        p->p += 2;
        if (p->p >= p->end) {
            regex_fail(p, CK_EINVAL, "unterminated [. or [=");
            return -1;
        }
        *cp = regex_take_char(p);
        if (p->end - p->p < 2 || p->p[0] != kind || p->p[1] != ']') {
            regex_fail(p, CK_EINVAL, "[. and [= take one character, as in [[.-.]]");
            return -1;
        }
        p->p += 2;
        return 0;
    }
    if (left >= 2 && s[0] == '[' && s[1] == ':') {
        const unsigned char *name = s + 2, *q = name;
        while (q + 1 < p->end && !(q[0] == ':' && q[1] == ']')) q++;
        if (q + 1 >= p->end) {
            regex_fail(p, CK_EINVAL, "unterminated [: class");
            return -1;
        }
        size_t len = (size_t)(q - name);
        for (size_t i = 0; i < sizeof regex_classes / sizeof regex_classes[0]; i++) {
            const char *known = regex_classes[i].name;
            if (strlen(known) == len && memcmp(known, name, len) == 0) {
                p->p = q + 2;
                return regex_add_class(p, regex_classes[i].r, 0) ? -1 : 1;
            }
        }
        regex_fail(p, CK_EINVAL, "unknown character class (alpha, digit, alnum, upper, lower, "
                              "space, blank, punct, print, graph, cntrl, xdigit)");
        return -1;
    }
    if (s[0] == '\\') {
        if (left < 2) {
            regex_fail(p, CK_EINVAL, "unterminated bracket expression");
            return -1;
        }
        int negate, control = regex_escape_control(s[1]);
        const regex_range *cls = regex_escape_class(s[1], &negate);
        if (cls) {
            p->p += 2;
            return regex_add_class(p, cls, negate) ? -1 : 1;
        }
        p->p++;
        if (control >= 0) {
            p->p++;
            *cp = (uint32_t)control;
            return 0;
        }
    }
    *cp = regex_take_char(p);
    return 0;
}

/* A bracket expression, p->p just past its '['. */
static uint32_t regex_parse_bracket(regex_parser *p) {
    int negate = 0;
    if (p->p < p->end && *p->p == '^') {
        negate = 1;
        p->p++;
    }
    size_t begin = p->n_ranges;
    int first = 1;
    for (;;) {
        if (p->p >= p->end) return regex_fail(p, CK_EINVAL, "unterminated bracket expression");
        if (*p->p == ']' && !first) {
            p->p++;
            break;
        }
        first = 0;
        uint32_t lo, hi;
        int got = regex_bracket_char(p, &lo);
        if (got < 0) return REGEX_NIL;
        if (got > 0) continue;
        hi = lo;
        if (p->end - p->p >= 2 && p->p[0] == '-' && p->p[1] != ']') {
            const unsigned char *dash = p->p++;
            got = regex_bracket_char(p, &hi);
            if (got < 0) return REGEX_NIL;
            if (got > 0 || hi < lo) {
                p->p = dash;
                return regex_fail(p, CK_EINVAL, "invalid range in a bracket expression");
            }
        }
        if (regex_add_range(p, lo, hi)) return REGEX_NIL;
    }
    if (regex_close_set(p, begin, negate)) return REGEX_NIL;
    uint32_t n = regex_node_new(p, REGEX_N_SET);
    if (n == REGEX_NIL) return n;
    p->nodes[n].set = (uint32_t)begin;
    p->nodes[n].n_set = (uint32_t)(p->n_ranges - begin);
    return n;
}

/* A set node of one range, or of a class. */
static uint32_t regex_set_node(regex_parser *p, uint32_t lo, uint32_t hi, const regex_range *cls,
                            int negate) {
    size_t begin = p->n_ranges;
    if (cls ? regex_add_class(p, cls, negate) : regex_add_range(p, lo, hi)) return REGEX_NIL;
    uint32_t n = regex_node_new(p, REGEX_N_SET);
    if (n == REGEX_NIL) return n;
    p->nodes[n].set = (uint32_t)begin;
    p->nodes[n].n_set = (uint32_t)(p->n_ranges - begin);
    return n;
}

static uint32_t regex_assert_node(regex_parser *p, int what) {
    uint32_t n = regex_node_new(p, REGEX_N_ASSERT);
    if (n != REGEX_NIL) p->nodes[n].what = (uint8_t)what;
    if (what >= REGEX_WORDB) p->words = 1;
    return n;
}

/* An escape outside brackets, p->p at its backslash. */
static uint32_t regex_parse_escape(regex_parser *p) {
    if (p->end - p->p < 2) return regex_fail(p, CK_EINVAL, "trailing backslash");
    unsigned c = p->p[1];
    if (c >= '1' && c <= '9')
        return regex_fail(p, CK_EINVAL,
                       "backreferences (\\1 to \\9) are not supported: they cannot be matched "
                       "in linear time");
    int negate, control = regex_escape_control(c);
    const regex_range *cls = regex_escape_class(c, &negate);
    if (cls) {
        p->p += 2;
        return regex_set_node(p, 0, 0, cls, negate);
    }
    if (control >= 0) {
        p->p += 2;
        return regex_set_node(p, (uint32_t)control, (uint32_t)control, NULL, 0);
    }
    int what = c == 'b' ? REGEX_WORDB : c == 'B' ? REGEX_NWORDB : c == '<' ? REGEX_WSTART
                                    : c == '>' ? REGEX_WEND : -1;
    if (what >= 0) {
        p->p += 2;
        return regex_assert_node(p, what);
    }
    p->p++;
    uint32_t cp = regex_take_char(p);
    return regex_set_node(p, cp, cp, NULL, 0);
}

static uint32_t regex_parse_atom(regex_parser *p) {
    unsigned c = *p->p;
    switch (c) {
        case '(': {
            if (++p->depth > REGEX_MAX_DEPTH)
                return regex_fail(p, CK_EINVAL, "pattern nests too deeply");
            const unsigned char *open = p->p++;
            if (p->p < p->end && *p->p == '?') {
                if (p->end - p->p < 2 || p->p[1] != ':')
                    return regex_fail(p, CK_EINVAL, "only (?: groups are supported after (?");
                p->p += 2;
            }
            uint32_t inner = regex_parse_alt(p);
            if (inner == REGEX_NIL) return REGEX_NIL;
            if (p->p >= p->end || *p->p != ')') {
                p->p = open;
                return regex_fail(p, CK_EINVAL, "unmatched (");
            }
            p->p++;
            p->depth--;
            return inner;
        }
        case '[': p->p++; return regex_parse_bracket(p);
        case '.': p->p++; return regex_set_node(p, 0, REGEX_END - 1, NULL, 0);
        case '^':
            /* As in GNU grep, a quantifier right after ^ is a literal: ^* finds a leading *. */
            p->p++;
            return regex_assert_node(p, REGEX_BOL);
        case '$': p->p++; return regex_assert_node(p, REGEX_EOL);
        case '\\': return regex_parse_escape(p);
        default: {
            uint32_t cp = regex_take_char(p);
            return regex_set_node(p, cp, cp, NULL, 0);
        }
    }
}

/* Reads a count of {m,n}; -1 when there are no digits. */
static long regex_count(regex_parser *p, const unsigned char **q) {
    long v = -1;
    while (*q < p->end && **q >= '0' && **q <= '9') {
        v = (v < 0 ? 0 : v) * 10 + (**q - '0');
        if (v > 100000) v = 100000;
        ++*q;
    }
    return v;
}

/* At '{': a count {m} {m,} {m,n} {,n} sets *min and *max (-1: no bound) and returns 1; 0 when
 * the brace does not start one (it is then a literal); -1 on error. */
static int regex_parse_count(regex_parser *p, int32_t *min, int32_t *max) {
    const unsigned char *q = p->p + 1;
    long lo = regex_count(p, &q), hi = lo;
    if (q < p->end && *q == ',') {
        q++;
        hi = regex_count(p, &q);
        if (hi < 0 && lo < 0) return 0;
        if (hi < 0) hi = -2; /* {m,}: no bound */
    }
    if (lo < 0 && hi < 0) return 0;
    if (q >= p->end || *q != '}') return 0;
    if (lo < 0) lo = 0;
    if (lo > CK__REGEX_MAX_COUNT || hi > CK__REGEX_MAX_COUNT) {
        regex_fail(p, CK_EINVAL, "a repetition count is above 1000");
        return -1;
    }
    if (hi >= 0 && hi < lo) {
        regex_fail(p, CK_EINVAL, "a repetition count's minimum is above its maximum");
        return -1;
    }
    *min = (int32_t)lo;
    *max = hi == -2 ? -1 : (int32_t)hi;
    p->p = q + 1;
    return 1;
}

static uint32_t regex_parse_repeat(regex_parser *p) {
    int bol = *p->p == '^';
    uint32_t atom = regex_parse_atom(p);
    if (bol) return atom;
    int wraps = 0;
    while (atom != REGEX_NIL && p->p < p->end) {
        int32_t min, max;
        unsigned c = *p->p;
        if (c == '*' || c == '+' || c == '?') {
            min = c == '+';
            max = c == '?' ? 1 : -1;
            p->p++;
        } else if (c == '{') {
            int got = regex_parse_count(p, &min, &max);
            if (got < 0) return REGEX_NIL;
            if (!got) break;
        } else {
            break;
        }
        if (++wraps + p->depth > REGEX_MAX_DEPTH)
            return regex_fail(p, CK_EINVAL, "pattern nests too deeply");
        uint32_t r = regex_node_new(p, REGEX_N_REPEAT);
        if (r == REGEX_NIL) return r;
        p->nodes[r].child = atom;
        p->nodes[r].min = min;
        p->nodes[r].max = max;
        atom = r;
    }
    return atom;
}

/* A concatenation, up to '|', ')' or the end. A quantifier that begins it, or follows ^, is
 * a literal. */
static uint32_t regex_parse_cat(regex_parser *p) {
    uint32_t first = REGEX_NIL, cat = REGEX_NIL, last = REGEX_NIL;
    size_t count = 0;
    while (p->p < p->end && *p->p != '|' && *p->p != ')') {
        uint32_t r;
        unsigned c = *p->p;
        int after_bol = count > 0 && p->nodes[last].kind == REGEX_N_ASSERT &&
                        p->nodes[last].what == REGEX_BOL;
        if ((count == 0 || after_bol) && (c == '*' || c == '+' || c == '?' || c == '{')) {
            p->p++;
            r = regex_set_node(p, c, c, NULL, 0);
        } else {
            r = regex_parse_repeat(p);
        }
        if (r == REGEX_NIL) return REGEX_NIL;
        if (count == 0) {
            first = r;
        } else if (count == 1) {
            if ((cat = regex_node_new(p, REGEX_N_CAT)) == REGEX_NIL) return REGEX_NIL;
            p->nodes[cat].child = first;
            p->nodes[first].next = r;
        } else {
            p->nodes[last].next = r;
        }
        last = r;
        count++;
    }
    if (count == 0) return regex_node_new(p, REGEX_N_EMPTY);
    return count == 1 ? first : cat;
}

static uint32_t regex_parse_alt(regex_parser *p) {
    uint32_t first = regex_parse_cat(p);
    if (first == REGEX_NIL || p->p >= p->end || *p->p != '|') return first;
    uint32_t alt = regex_node_new(p, REGEX_N_ALT), last = first;
    if (alt == REGEX_NIL) return REGEX_NIL;
    p->nodes[alt].child = first;
    while (p->p < p->end && *p->p == '|') {
        p->p++;
        uint32_t next = regex_parse_cat(p);
        if (next == REGEX_NIL) return REGEX_NIL;
        p->nodes[last].next = next;
        last = next;
    }
    return alt;
}

/* ---- compiling ---- */

typedef struct regex_comp {
    const regex_parser *p;
    ck__regex *re;
    uint32_t pc;
} regex_comp;

#define REGEX_TOO_BIG ((uint64_t)CK__REGEX_MAX_PROGRAM + 1)

/* The number of instructions node `n` compiles to, saturated at REGEX_TOO_BIG. */
static uint64_t regex_size(const regex_parser *p, uint32_t n) {
    const regex_node *node = &p->nodes[n];
    uint64_t size = 0;
    switch (node->kind) {
        case REGEX_N_EMPTY: return 0;
        case REGEX_N_SET:
        case REGEX_N_ASSERT: return 1;
        case REGEX_N_CAT:
        case REGEX_N_ALT:
            for (uint32_t c = node->child; c != REGEX_NIL; c = p->nodes[c].next) {
                size += regex_size(p, c) + (node->kind == REGEX_N_ALT && c != node->child ? 2 : 0);
                if (size > REGEX_TOO_BIG) return REGEX_TOO_BIG;
            }
            return size;
        default: {
            uint64_t c = regex_size(p, node->child), min = (uint64_t)node->min;
            if (node->max < 0) size = min ? min * c + 1 : c + 2;
            else size = min * c + ((uint64_t)node->max - min) * (c + 1);
            return size > REGEX_TOO_BIG ? REGEX_TOO_BIG : size;
        }
    }
}

static uint32_t regex_inst_new(regex_comp *c, int op, uint32_t x, uint32_t y) {
    regex_inst *in = &c->re->prog[c->pc];
    in->op = (uint8_t)op;
    in->what = 0;
    in->x = x;
    in->y = y;
    in->n = 0;
    return c->pc++;
}

static void regex_emit(regex_comp *c, uint32_t n) {
    const regex_node *node = &c->p->nodes[n];
    switch (node->kind) {
        case REGEX_N_EMPTY: return;
        case REGEX_N_SET: {
            uint32_t at = regex_inst_new(c, REGEX_CHAR, c->pc + 1, node->set);
            c->re->prog[at].n = node->n_set;
            return;
        }
        case REGEX_N_ASSERT: {
            uint32_t at = regex_inst_new(c, REGEX_ASSERT, c->pc + 1, 0);
            c->re->prog[at].what = node->what;
            return;
        }
        case REGEX_N_CAT:
            for (uint32_t k = node->child; k != REGEX_NIL; k = c->p->nodes[k].next)
                regex_emit(c, k);
            return;
        case REGEX_N_ALT: {
            /* SPLIT a, next; a; JMP end; next: SPLIT b, next2; b; JMP end; ... last; end:
             * the JMPs are chained through their x until the end is known. */
            uint32_t jumps = REGEX_NIL;
            for (uint32_t k = node->child; k != REGEX_NIL; k = c->p->nodes[k].next) {
                if (c->p->nodes[k].next == REGEX_NIL) {
                    regex_emit(c, k);
                    break;
                }
                uint32_t split = regex_inst_new(c, REGEX_SPLIT, c->pc + 1, 0);
                regex_emit(c, k);
                jumps = regex_inst_new(c, REGEX_JMP, jumps, 0);
                c->re->prog[split].y = c->pc;
            }
            while (jumps != REGEX_NIL) {
                uint32_t prev = c->re->prog[jumps].x;
                c->re->prog[jumps].x = c->pc;
                jumps = prev;
            }
            return;
        }
        default: {
            int32_t min = node->min, max = node->max;
            if (max < 0 && min == 0) {
                uint32_t loop = regex_inst_new(c, REGEX_SPLIT, c->pc + 1, 0);
                regex_emit(c, node->child);
                regex_inst_new(c, REGEX_JMP, loop, 0);
                c->re->prog[loop].y = c->pc;
                return;
            }
            for (int32_t i = 0; i < (max < 0 ? min - 1 : min); i++) regex_emit(c, node->child);
            if (max < 0) {
                uint32_t body = c->pc;
                regex_emit(c, node->child);
                regex_inst_new(c, REGEX_SPLIT, body, c->pc + 1);
                return;
            }
            /* x{0,k} as x?x?...x?, which has the same language. */
            for (int32_t i = min; i < max; i++) {
                uint32_t split = regex_inst_new(c, REGEX_SPLIT, c->pc + 1, 0);
                regex_emit(c, node->child);
                c->re->prog[split].y = c->pc;
            }
            return;
        }
    }
}

static int regex_u32_order(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The class holding character `cp` (cp may be REGEX_END: then n_classes). */
static uint32_t regex_class(const ck__regex *re, uint32_t cp) {
    if (cp < 128) return re->ascii[cp];
    uint32_t lo = 0, hi = re->n_classes + 1; /* bounds has n_classes + 1 entries */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (re->bounds[mid] <= cp) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* Splits the characters into classes that no set tells apart, and turns every set's ranges
 * into intervals of class numbers (in place: a set never has more intervals than ranges). */
static int regex_make_classes(ck__regex *re, regex_parser *p) {
    size_t n = 2 * p->n_ranges + 2 + (p->words ? 8 : 0);
    uint32_t *b = ck__malloc(n * sizeof *b);
    if (!b) return CK_ENOMEM;
    size_t k = 0;
    b[k++] = 0;
    b[k++] = REGEX_END;
    for (size_t i = 0; i < p->n_ranges; i++) {
        b[k++] = p->ranges[i].lo;
        b[k++] = p->ranges[i].hi + 1;
    }
    if (p->words) {
        static const uint32_t edges[8] = {'0', '9' + 1, 'A', 'Z' + 1, '_', '_' + 1, 'a', 'z' + 1};
        memcpy(b + k, edges, sizeof edges);
        k += 8;
    }
    qsort(b, k, sizeof *b, regex_u32_order);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (!u || b[i] != b[u - 1]) b[u++] = b[i];
    re->bounds = b;
    re->n_classes = (uint32_t)(u - 1);
    re->class_word = ck__calloc(re->n_classes, 1);
    if (!re->class_word) return CK_ENOMEM;
    for (uint32_t c = 0; c < 128; c++) {
        uint32_t lo = 0, hi = re->n_classes + 1;
        while (hi - lo > 1) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (b[mid] <= c) lo = mid;
            else hi = mid;
        }
        re->ascii[c] = lo;
    }
    for (uint32_t c = 0; c < re->n_classes; c++) re->class_word[c] = (uint8_t)regex_is_word(b[c]);
    /* Ranges become class intervals: [class(lo), class(hi + 1) - 1]. */
    re->ivals = ck__malloc((p->n_ranges ? p->n_ranges : 1) * 2 * sizeof *re->ivals);
    if (!re->ivals) return CK_ENOMEM;
    for (size_t i = 0; i < p->n_ranges; i++) {
        re->ivals[2 * i] = regex_class(re, p->ranges[i].lo);
        re->ivals[2 * i + 1] = regex_class(re, p->ranges[i].hi + 1) - 1;
    }
    return CK_OK;
}

/* Whether CHAR instruction `in` takes class `k`. */
static int regex_takes(const ck__regex *re, const regex_inst *in, uint32_t k) {
    const uint32_t *iv = re->ivals + 2 * (size_t)in->y;
    uint32_t lo = 0, hi = in->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (iv[2 * mid + 1] < k) lo = mid + 1;
        else hi = mid;
    }
    return lo < in->n && iv[2 * lo] <= k;
}

/* ---- running ---- */

/* Where the text is when a closure is taken: the flags of the state, and what follows. */
typedef struct regex_ctx {
    int bol, prev_word, next_word, eol;
} regex_ctx;

static int regex_assert_holds(int what, const regex_ctx *x) {
    switch (what) {
        case REGEX_BOL: return x->bol;
        case REGEX_EOL: return x->eol;
        case REGEX_WORDB: return x->prev_word != x->next_word;
        case REGEX_NWORDB: return x->prev_word == x->next_word;
        case REGEX_WSTART: return !x->prev_word && x->next_word;
        default: return x->prev_word && !x->next_word;
    }
}

/* A new generation of a mark array: every pc is unmarked again. */
static uint32_t regex_next_gen(uint32_t *mark, uint32_t *gen, uint32_t n) {
    if (++*gen == 0) {
        memset(mark, 0, n * sizeof *mark);
        *gen = 1;
    }
    return *gen;
}

/* Follows the empty moves from `kern` (n pcs) and from the start of the pattern, collecting
 * the CHAR instructions reached into re->chars (their count in *n_chars). `ctx` NULL follows
 * every assertion (an over-approximation, for the prefilter). Returns 1 when MATCH is reached.
 * *work grows by the instructions visited. */
static int regex_closure(ck__regex *re, const uint32_t *kern, uint32_t n, const regex_ctx *ctx,
                      uint32_t *n_chars, uint64_t *work) {
    uint32_t gen = regex_next_gen(re->mark, &re->gen, re->n_prog);
    uint32_t sp = 0, nc = 0, visited = 0;
    int matched = 0;
    re->mark[0] = gen;
    re->stack[sp++] = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (re->mark[kern[i]] == gen) continue;
        re->mark[kern[i]] = gen;
        re->stack[sp++] = kern[i];
    }
    while (sp) {
        uint32_t pc = re->stack[--sp];
        const regex_inst *in = &re->prog[pc];
        uint32_t to[2];
        int moves = 0;
        visited++;
        switch (in->op) {
            case REGEX_CHAR: re->chars[nc++] = pc; break;
            case REGEX_MATCH: matched = 1; break;
            case REGEX_JMP: to[moves++] = in->x; break;
            case REGEX_SPLIT:
                to[moves++] = in->y;
                to[moves++] = in->x;
                break;
            default:
                if (!ctx || regex_assert_holds(in->what, ctx)) to[moves++] = in->x;
                break;
        }
        for (int m = 0; m < moves; m++) {
            if (re->mark[to[m]] == gen) continue;
            re->mark[to[m]] = gen;
            re->stack[sp++] = to[m];
        }
    }
    *n_chars = nc;
    *work += visited;
    return matched;
}

/* One step: from the threads `kern` in a state with `flags`, on a character of class k
 * (k == n_classes: the end of the text). Writes the next threads, sorted, to `out`; returns
 * 1 when a match ended before the character. */
static int regex_step(ck__regex *re, const uint32_t *kern, uint32_t n, uint32_t flags, uint32_t k,
                   uint32_t *out, uint32_t *n_out, uint64_t *work) {
    int end = k == re->n_classes;
    regex_ctx ctx = {(flags & REGEX_F_BOL) != 0, (flags & REGEX_F_WORD) != 0,
                  !end && re->class_word[k], end};
    uint32_t nc, m = 0;
    *n_out = 0;
    if (regex_closure(re, kern, n, &ctx, &nc, work)) return 1;
    if (end) return 0;
    uint32_t gen = regex_next_gen(re->mark2, &re->gen2, re->n_prog);
    for (uint32_t i = 0; i < nc; i++) {
        const regex_inst *in = &re->prog[re->chars[i]];
        if (!regex_takes(re, in, k) || re->mark2[in->x] == gen) continue;
        re->mark2[in->x] = gen;
        out[m++] = in->x;
    }
    *work += nc;
    if (m > 1) qsort(out, m, sizeof *out, regex_u32_order);
    *n_out = m;
    return 0;
}

static void regex_flush(ck__regex *re) {
    for (uint32_t i = 0; i < re->n_states; i++) ck__free(re->states[i]);
    re->n_states = 0;
    re->bytes = 0;
    re->flushes++;
    re->idle[0] = re->idle[1] = REGEX_UNKNOWN;
    if (re->table)
        for (size_t i = 0; i < REGEX_TABLE; i++) re->table[i] = REGEX_UNKNOWN;
}

/* What making a DFA state costs beyond its closure, in work units: the allocation, the copy of
 * its threads, its transition table; and what a flush costs per state freed. Measured so that
 * a search making a state at every byte spends about as much time per unit as one that only
 * follows transitions. */
#define REGEX_STATE_COST 64
#define REGEX_FLUSH_COST 16

/* The state of threads `pcs` (n, sorted) with `flags`: found, or made (flushing the cache
 * when it is full; *work grows by what that costs). REGEX_NOROOM when memory runs out. */
static int32_t regex_intern(ck__regex *re, const uint32_t *pcs, uint32_t n, uint32_t flags,
                            uint64_t *work) {
    if (!re->table) {
        re->states = ck__malloc(REGEX_DFA_STATES * sizeof *re->states);
        re->table = ck__malloc(REGEX_TABLE * sizeof *re->table);
        if (!re->states || !re->table) {
            ck__free(re->states);
            ck__free(re->table);
            re->states = NULL;
            re->table = NULL;
            return REGEX_NOROOM;
        }
        for (size_t i = 0; i < REGEX_TABLE; i++) re->table[i] = REGEX_UNKNOWN;
    }
    static const uint32_t none[1] = {0};
    if (!n) pcs = none;
    uint64_t hash =
        ck__hash_bytes((const char *)pcs, n * sizeof *pcs) ^ (flags * 0x9e3779b97f4a7c15ull);
    size_t slot = (size_t)hash & (REGEX_TABLE - 1);
    for (; re->table[slot] != REGEX_UNKNOWN; slot = (slot + 1) & (REGEX_TABLE - 1)) {
        const regex_state *s = re->states[re->table[slot]];
        if (s->hash == hash && s->flags == flags && s->n == n &&
            memcmp(s->pcs, pcs, n * sizeof *pcs) == 0)
            return re->table[slot];
    }
    size_t size = sizeof(regex_state) + (size_t)n * sizeof *pcs +
                  (size_t)re->n_classes * sizeof(int32_t);
    if (re->n_states == REGEX_DFA_STATES || re->bytes + size > REGEX_DFA_BYTES) {
        *work += (uint64_t)re->n_states * REGEX_FLUSH_COST + REGEX_TABLE / 8;
        regex_flush(re);
        slot = (size_t)hash & (REGEX_TABLE - 1);
    }
    *work += REGEX_STATE_COST + 2 * (uint64_t)n + re->n_classes;
    regex_state *s = ck__malloc(size);
    if (!s) return REGEX_NOROOM;
    s->hash = hash;
    s->flags = flags;
    s->n = n;
    s->eol = -1;
    if (n) memcpy(s->pcs, pcs, n * sizeof *pcs);
    s->next = (int32_t *)(void *)(s->pcs + n);
    for (uint32_t k = 0; k < re->n_classes; k++) s->next[k] = REGEX_UNKNOWN;
    int32_t index = (int32_t)re->n_states;
    re->states[re->n_states++] = s;
    re->bytes += size;
    re->table[slot] = index;
    return index;
}

/* The target of state `cur` on class k, made now: a state, REGEX_MATCHED or REGEX_NOROOM (then
 * the next threads are left in re->kern_b, re->spill_n and re->spill_flags). */
static int32_t regex_transition(ck__regex *re, int32_t cur, uint32_t k, uint64_t *work) {
    regex_state *s = re->states[cur];
    uint32_t n;
    if (regex_step(re, s->pcs, s->n, s->flags, k, re->kern_b, &n, work)) {
        s->next[k] = REGEX_MATCHED;
        return REGEX_MATCHED;
    }
    uint32_t flags = re->words && re->class_word[k] ? REGEX_F_WORD : 0;
    uint64_t flushes = re->flushes;
    int32_t next = regex_intern(re, re->kern_b, n, flags, work);
    /* A flush freed `s`; the transition is then found again when next needed. */
    if (next >= 0 && flushes == re->flushes) s->next[k] = next;
    re->spill_n = n;
    re->spill_flags = flags;
    return next;
}

/* Whether the text may end in state `cur`. */
static int regex_eol(ck__regex *re, int32_t cur, uint64_t *work) {
    regex_state *s = re->states[cur];
    if (s->eol < 0) {
        uint32_t n;
        s->eol = regex_step(re, s->pcs, s->n, s->flags, re->n_classes, re->kern_b, &n, work);
    }
    return s->eol;
}

static void regex_charge(uint64_t *budget, uint64_t cost) {
    *budget = cost < *budget ? *budget - cost : 0;
}

/* The search without a DFA (memory ran out): threads `kern` (n, in re->kern_a) and `flags`
 * at byte i of the text. */
static int regex_search_nfa(ck__regex *re, const unsigned char *s, size_t len, size_t i,
                         uint32_t n, uint32_t flags, uint64_t *budget) {
    uint32_t *cur = re->kern_a, *next = re->kern_b;
    for (;;) {
        if (!*budget) return CK__REGEX_CUT;
        uint32_t cp = 0, k = re->n_classes, m;
        size_t step = i < len ? regex_decode(s + i, len - i, &cp) : 0;
        if (i < len) k = regex_class(re, cp);
        uint64_t work = step;
        int matched = regex_step(re, cur, n, flags, k, next, &m, &work);
        regex_charge(budget, work);
        if (matched) return CK__REGEX_MATCH;
        if (i >= len) return CK__REGEX_NO_MATCH;
        flags = re->words && re->class_word[k] ? REGEX_F_WORD : 0;
        uint32_t *t = cur;
        cur = next;
        next = t;
        n = m;
        i += step;
        if (re->dead_idle && n == 0) return CK__REGEX_NO_MATCH;
    }
}

static int32_t regex_idle_state(ck__regex *re, int word, uint64_t *work) {
    if (re->idle[word] == REGEX_UNKNOWN)
        re->idle[word] = regex_intern(re, NULL, 0, word ? REGEX_F_WORD : 0, work);
    return re->idle[word];
}

int ck__regex_search(ck__regex *re, const char *text, size_t len, uint64_t *budget) {
    const unsigned char *s = (const unsigned char *)text;
    uint64_t work = 0;
    int32_t cur = regex_intern(re, NULL, 0, REGEX_F_BOL, &work);
    regex_charge(budget, work);
    if (cur < 0) return regex_search_nfa(re, s, len, 0, 0, REGEX_F_BOL, budget);
    size_t i = 0;
    while (i < len) {
        if (!*budget) return CK__REGEX_CUT;
        const regex_state *st = re->states[cur];
        if (st->n == 0 && !(st->flags & REGEX_F_BOL)) {
            /* No thread alive: a match can only start here. */
            if (re->dead_idle) return CK__REGEX_NO_MATCH;
            if (re->prefilter) {
                size_t j = i;
                while (j < len && s[j] < 0x80 && !re->first[s[j]]) j++;
                if (j > i) {
                    regex_charge(budget, j - i);
                    i = j;
                    int word = re->words && regex_is_word(s[j - 1]);
                    work = 0;
                    cur = regex_idle_state(re, word, &work);
                    regex_charge(budget, work);
                    if (cur < 0)
                        return regex_search_nfa(re, s, len, i, 0, word ? REGEX_F_WORD : 0, budget);
                    if (i == len) break;
                    st = re->states[cur];
                }
            }
        }
        uint32_t cp;
        size_t step = regex_decode(s + i, len - i, &cp);
        uint32_t k = regex_class(re, cp);
        int32_t next = st->next[k];
        if (next == REGEX_UNKNOWN) {
            work = 0;
            next = regex_transition(re, cur, k, &work);
            regex_charge(budget, work);
            if (next == REGEX_NOROOM) {
                regex_charge(budget, step);
                memcpy(re->kern_a, re->kern_b, re->spill_n * sizeof *re->kern_a);
                return regex_search_nfa(re, s, len, i + step, re->spill_n, re->spill_flags, budget);
            }
        }
        if (next == REGEX_MATCHED) return CK__REGEX_MATCH;
        cur = next;
        i += step;
        regex_charge(budget, step);
    }
    work = 0;
    int matched = regex_eol(re, cur, &work);
    regex_charge(budget, work);
    return matched ? CK__REGEX_MATCH : CK__REGEX_NO_MATCH;
}

/* ---- making and freeing ---- */

void ck__regex_free(ck__regex *re) {
    if (!re) return;
    regex_flush(re);
    ck__free(re->states);
    ck__free(re->table);
    ck__free(re->prog);
    ck__free(re->ivals);
    ck__free(re->bounds);
    ck__free(re->class_word);
    ck__free(re->mark);
    ck__free(re->mark2);
    ck__free(re->stack);
    ck__free(re->chars);
    ck__free(re->kern_a);
    ck__free(re->kern_b);
    ck__free(re);
}

/* What can be known before any text: whether a match can start after the first character
 * (not for a pattern that begins with ^), and which ASCII characters can begin one. */
static void regex_analyse(ck__regex *re) {
    uint64_t work = 0;
    uint32_t nc;
    re->dead_idle = 1;
    for (int v = 0; v < 6 && re->dead_idle; v++) {
        regex_ctx ctx = {0, v & 1, (v >> 1) & 1, v >= 4};
        if (v >= 4) ctx.next_word = 0;
        if (regex_closure(re, NULL, 0, &ctx, &nc, &work) || nc) re->dead_idle = 0;
    }
    if (regex_closure(re, NULL, 0, NULL, &nc, &work)) return;
    re->prefilter = 1;
    for (uint32_t c = 0; c < 128; c++) {
        for (uint32_t i = 0; i < nc && !re->first[c]; i++)
            re->first[c] = (uint8_t)regex_takes(re, &re->prog[re->chars[i]], re->ascii[c]);
    }
}

int ck__regex_new(const char *pattern, size_t len, ck__regex **out, ck_error *err) {
    ck__error_clear(err);
    *out = NULL;
    regex_parser p;
    memset(&p, 0, sizeof p);
    p.start = p.p = (const unsigned char *)(pattern ? pattern : "");
    p.end = p.start + (pattern ? len : 0);
    uint32_t root = regex_parse_alt(&p);
    if (root != REGEX_NIL && p.p < p.end) regex_fail(&p, CK_EINVAL, "unmatched )");
    uint64_t size = p.rc ? 0 : regex_size(&p, root) + 1;
    if (!p.rc && size > CK__REGEX_MAX_PROGRAM) {
        p.p = p.start;
        regex_fail(&p, CK_EINVAL, "the pattern compiles to more than 20000 instructions; use "
                               "smaller repetition counts");
    }
    ck__regex *re = p.rc ? NULL : ck__calloc(1, sizeof *re);
    if (!p.rc && !re) p.rc = CK_ENOMEM;
    if (re) {
        re->n_prog = (uint32_t)size;
        re->words = p.words;
        re->idle[0] = re->idle[1] = REGEX_UNKNOWN;
        size_t n = re->n_prog;
        re->prog = ck__malloc(n * sizeof *re->prog);
        re->mark = ck__calloc(n, sizeof *re->mark);
        re->mark2 = ck__calloc(n, sizeof *re->mark2);
        re->stack = ck__malloc(n * sizeof *re->stack);
        re->chars = ck__malloc(n * sizeof *re->chars);
        re->kern_a = ck__malloc(n * sizeof *re->kern_a);
        re->kern_b = ck__malloc(n * sizeof *re->kern_b);
        if (!re->prog || !re->mark || !re->mark2 || !re->stack || !re->chars || !re->kern_a ||
            !re->kern_b || regex_make_classes(re, &p))
            p.rc = CK_ENOMEM;
    }
    if (!p.rc) {
        regex_comp c = {&p, re, 0};
        regex_emit(&c, root);
        regex_inst_new(&c, REGEX_MATCH, 0, 0);
        regex_analyse(re);
    }
    ck__free(p.nodes);
    ck__free(p.ranges);
    if (p.rc) {
        ck__regex_free(re);
        if (p.rc == CK_ENOMEM) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        ck__fail(err, p.rc, p.msg, CK_NONE, "pattern");
        if (err) err->offset = p.at;
        return p.rc;
    }
    *out = re;
    return CK_OK;
}
