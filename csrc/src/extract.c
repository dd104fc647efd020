/* What the compactor extracts from history without a model (DESIGN section 3): identifiers,
 * file operations, rule-stating lines, failed tool results, and the extractive checkpoint.
 *
 * Everything here reads untrusted text: tool outputs of any size, JSON arguments that may not
 * be JSON, megabytes without a blank. So every scanner makes one pass, copies only bounded
 * pieces, works on (pointer, length) spans because NUL bytes do occur, and cuts text only
 * between UTF-8 sequences. Nothing depends on hash order or addresses, so the same input
 * always gives the same output.
 *
 * The amalgamation compiles this file together with every other core file, so its generic
 * static helpers carry an `ext_` prefix and the others a topic word (ident_, fileop_, rule_,
 * fail_, xsum_) to keep clear of other files' statics. */
#include "./extract.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "./alloc.h"
#include "./idmap.h"
#include "./internal.h"
#include "./json.h"

/* ------------------------------------------------------------------------------------------ */
/* Text helpers                                                                               */
/* ------------------------------------------------------------------------------------------ */

static unsigned char ext_lower(unsigned char c) {
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
}
static int ext_alpha(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int ext_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int ext_alnum(unsigned char c) { return ext_alpha(c) || ext_digit(c); }
static int ext_upper(unsigned char c) { return c >= 'A' && c <= 'Z'; }
/* Blanks and control bytes, NUL included. */
static int ext_blank(unsigned char c) { return c <= ' ' || c == 0x7f; }

/* True when s[0..n) begins with `lit`, a lower-case ASCII literal, in any case. */
static int ext_prefix_ci(const char *s, size_t n, const char *lit) {
    size_t k = strlen(lit);
    if (k > n) return 0;
    for (size_t i = 0; i < k; i++)
        if (ext_lower((unsigned char)s[i]) != (unsigned char)lit[i]) return 0;
    return 1;
}

static int ext_equal_ci(const char *s, size_t n, const char *lit) {
    return strlen(lit) == n && ext_prefix_ci(s, n, lit);
}

static int ext_in_list_ci(const char *s, size_t n, const char *const *list) {
    for (; *list; list++)
        if (ext_equal_ci(s, n, *list)) return 1;
    return 0;
}

static void ext_trim(const char **s, size_t *n) {
    while (*n && ext_blank((unsigned char)**s)) (*s)++, (*n)--;
    while (*n && ext_blank((unsigned char)(*s)[*n - 1])) (*n)--;
}

/* Shortens a buffer that holds at least `len` bytes. */
static void ext_truncate(ck__buf *b, size_t len) {
    if (b->data && len <= b->len) b->data[b->len = len] = '\0';
}

size_t ck__clip(const char *text, size_t len, size_t max) {
    if (len <= max) return len;
    /* text[max] exists because len > max. Backing up over continuation bytes puts the cut
     * between two sequences, since valid UTF-8 has at most three of them in a row. */
    size_t cut = max;
    while (cut > 0 && ((unsigned char)text[cut] & 0xC0) == 0x80) cut--;
    size_t low = cut - cut / 4;
    for (size_t i = cut; i > 0 && i >= low; i--)
        if (text[i] == '\n') return i;
    for (size_t i = cut; i > 0 && i >= low; i--)
        if (text[i] == ' ' || text[i] == '\t') return i;
    return cut;
}

/* Appends s[0..n) on one line: trimmed, every run of blanks and control bytes folded to one
 * space, cut to `max` bytes with "..." added when something was cut. Text decoded from JSON
 * escapes may hold invalid UTF-8 (a lone surrogate), so only the valid prefix is kept: an
 * anchor must always be valid UTF-8. */
static void ext_add_flat(ck__buf *b, const char *s, size_t n, size_t max) {
    ext_trim(&s, &n);
    size_t cut = ck__clip(s, n, max);
    size_t valid = ck__utf8_valid_prefix(s, cut), run = 0;
    for (size_t i = 0; i < valid; i++) {
        if (!ext_blank((unsigned char)s[i])) continue;
        if (run < i) {
            ck__buf_add(b, s + run, i - run);
            ck__buf_addc(b, ' ');
        }
        run = i + 1;
    }
    ck__buf_add(b, s + run, valid - run);
    if (cut < n || valid < cut) ck__buf_add(b, "...", 3);
}

/* ------------------------------------------------------------------------------------------ */
/* Identifiers                                                                                */
/* ------------------------------------------------------------------------------------------ */

/* Candidate tokens longer than this are skipped whole: no path, URL or hash worth carrying is
 * longer, and a bound keeps 1 MB of hex from becoming one giant "identifier". */
#define IDENT_MAX 512

/* Past IDENTS_CAP distinct identifiers the set keeps only its IDENTS_KEEP best-ranked ones, so
 * that hostile input (a megabyte of distinct hashes) cannot grow it without bound. */
#define IDENTS_CAP 16384
#define IDENTS_KEEP 8192

typedef struct ident_entry {
    char *text; /* NUL-terminated copy */
    size_t len, seq;
    unsigned count;
    unsigned prio; /* CK__IDENT_* the highest source it was seen in */
} ident_entry;

/* Entries stay where they are once added (until a prune), so the map can index them; `order`
 * is the ranked permutation, recomputed lazily after a change. */
struct ck__idents {
    ident_entry *ents;
    size_t n, cap;
    size_t *order;
    size_t order_cap;
    int ranked;
    ck__idmap map;
};

ck__idents *ck__idents_new(void) {
    ck__idents *s = ck__calloc(1, sizeof *s);
    if (s && ck__idmap_init(&s->map, 64)) {
        ck__free(s);
        return NULL;
    }
    return s;
}

void ck__idents_free(ck__idents *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) ck__free(s->ents[i].text);
    ck__free(s->ents);
    ck__free(s->order);
    ck__idmap_dispose(&s->map);
    ck__free(s);
}

/* What the agent acted on first (seen in user messages or in the agent's own calls and text),
 * then newest, then most frequent, then by bytes. Texts are distinct, so the order is total
 * and any correct sort gives the same result. */
static int ident_before(const ident_entry *a, const ident_entry *b) {
    if (a->prio != b->prio) return a->prio > b->prio;
    if (a->seq != b->seq) return a->seq > b->seq;
    if (a->count != b->count) return a->count > b->count;
    int c = memcmp(a->text, b->text, a->len < b->len ? a->len : b->len);
    return c ? c < 0 : a->len < b->len;
}

/* Sift-down in a heap whose root ranks last. */
static void ident_sift(const ident_entry *e, size_t *ord, size_t root, size_t n) {
    for (size_t child; (child = 2 * root + 1) < n; root = child) {
        if (child + 1 < n && ident_before(&e[ord[child]], &e[ord[child + 1]])) child++;
        if (!ident_before(&e[ord[root]], &e[ord[child]])) return;
        size_t t = ord[root];
        ord[root] = ord[child];
        ord[child] = t;
    }
}

/* Heap sort needs no memory, so ranked reads on a const set cannot fail. The cast is sound: a
 * set is never created const, and ranking is a cache that leaves its contents unchanged (one
 * thread per object, as everywhere in the core). */
static void idents_rank(const ck__idents *cs) {
    ck__idents *s = (ck__idents *)cs;
    if (s->ranked) return;
    for (size_t i = 0; i < s->n; i++) s->order[i] = i;
    for (size_t i = s->n / 2; i-- > 0;) ident_sift(s->ents, s->order, i, s->n);
    for (size_t end = s->n; end > 1; end--) {
        size_t t = s->order[0];
        s->order[0] = s->order[end - 1];
        s->order[end - 1] = t;
        ident_sift(s->ents, s->order, 0, end - 1);
    }
    s->ranked = 1;
}

/* Keeps the `keep` best-ranked entries. The new map is made first, so running out of memory
 * leaves the set as it was. */
static int idents_prune(ck__idents *s, size_t keep) {
    if (s->n <= keep) return CK_OK;
    ck__idmap map;
    if (ck__idmap_init(&map, keep)) return CK_ENOMEM;
    idents_rank(s);
    for (size_t r = keep; r < s->n; r++) {
        ck__free(s->ents[s->order[r]].text);
        s->ents[s->order[r]].text = NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (!s->ents[i].text) continue;
        s->ents[k] = s->ents[i];
        /* Sized for `keep` keys, the map does not grow here, so this cannot fail. */
        ck__idmap_put(&map, s->ents[k].text, s->ents[k].len, k);
        k++;
    }
    ck__idmap_dispose(&s->map);
    s->map = map;
    s->n = k;
    s->ranked = 0;
    return CK_OK;
}

static int idents_put(ck__idents *s, const char *text, size_t len, size_t seq, unsigned count,
                      unsigned prio) {
    size_t at = ck__idmap_get(&s->map, text, len);
    s->ranked = 0;
    if (at != SIZE_MAX) {
        ident_entry *e = &s->ents[at];
        if (seq > e->seq) e->seq = seq;
        if (prio > e->prio) e->prio = prio;
        e->count = e->count > UINT_MAX - count ? UINT_MAX : e->count + count;
        return CK_OK;
    }
    if (s->n >= IDENTS_CAP && idents_prune(s, IDENTS_KEEP)) return CK_ENOMEM;
    if (ck__grow((void **)&s->ents, &s->cap, s->n + 1, sizeof *s->ents) ||
        ck__grow((void **)&s->order, &s->order_cap, s->n + 1, sizeof *s->order))
        return CK_ENOMEM;
    char *copy = ck__strndup(text, len);
    if (!copy || ck__idmap_put(&s->map, copy, len, s->n) < 0) {
        ck__free(copy);
        return CK_ENOMEM;
    }
    ident_entry e = {copy, len, seq, count, prio};
    s->ents[s->n++] = e;
    return CK_OK;
}

int ck__idents_add(ck__idents *s, const char *id, size_t len, size_t seq, unsigned count,
                   unsigned prio) {
    if (!s) return CK_EINVAL;
    if (!id || len == 0 || len > IDENT_MAX) return CK_OK;
    return idents_put(s, id, len, seq, count ? count : 1, prio);
}

int ck__idents_merge(ck__idents *s, const ck__idents *from) {
    if (!s || !from) return CK_EINVAL;
    for (size_t i = 0; i < from->n; i++) {
        const ident_entry *e = &from->ents[i];
        int rc = idents_put(s, e->text, e->len, e->seq, e->count, e->prio);
        if (rc) return rc;
    }
    return CK_OK;
}

int ck__idents_prune_to(ck__idents *s, size_t keep) { return s ? idents_prune(s, keep) : CK_OK; }

/* What the scanner, which reads every byte of every scanned text, needs to know of a byte, in
 * one table lookup. IDENT_END: the byte ends a candidate token: blanks, control bytes, quotes,
 * brackets, backslashes (JSON escapes), and every non-ASCII byte, so a token is plain ASCII
 * and can never split a UTF-8 sequence. IDENT_MARK: every kind of identifier has one of these:
 * '/' (paths), ':' (URLs), '#', '-', a digit or a capital (tickets, UUIDs, hashes, error
 * codes, errno names); most tokens of prose and code have none and are skipped unclassified.
 * IDENT_SEP: ':' and '=', which split a token into pieces (and ':' starts a URL scheme's
 * "://"); a token without one is a single piece. The table is generated from the predicates
 * at compile time. */
enum { IDENT_END = 1, IDENT_MARK = 2, IDENT_SEP = 4 };
#define IDENT_PUNCT(c)                                                                         \
    ((c) == '"' || (c) == '\'' || (c) == '`' || (c) == '<' || (c) == '>' || (c) == '(' ||      \
     (c) == ')' || (c) == '[' || (c) == ']' || (c) == '{' || (c) == '}' || (c) == '|' ||        \
     (c) == ',' || (c) == ';' || (c) == '\\')
#define IDENT_MARKS(c)                                                                         \
    (((c) >= '0' && (c) <= '9') || ((c) >= 'A' && (c) <= 'Z') || (c) == '/' || (c) == ':' ||   \
     (c) == '#' || (c) == '-')
#define IDENT_CLASS(c)                                                                         \
    ((c) <= ' ' || (c) >= 0x7f || IDENT_PUNCT(c)                                               \
         ? IDENT_END                                                                           \
         : (IDENT_MARKS(c) ? IDENT_MARK : 0) | ((c) == ':' || (c) == '=' ? IDENT_SEP : 0))
#define IDENT_ROW(r)                                                                           \
    IDENT_CLASS(r), IDENT_CLASS(r + 1), IDENT_CLASS(r + 2), IDENT_CLASS(r + 3),                \
        IDENT_CLASS(r + 4), IDENT_CLASS(r + 5), IDENT_CLASS(r + 6), IDENT_CLASS(r + 7),        \
        IDENT_CLASS(r + 8), IDENT_CLASS(r + 9), IDENT_CLASS(r + 10), IDENT_CLASS(r + 11),      \
        IDENT_CLASS(r + 12), IDENT_CLASS(r + 13), IDENT_CLASS(r + 14), IDENT_CLASS(r + 15)
static const unsigned char ident_class[256] = {
    IDENT_ROW(0x00), IDENT_ROW(0x10), IDENT_ROW(0x20), IDENT_ROW(0x30),
    IDENT_ROW(0x40), IDENT_ROW(0x50), IDENT_ROW(0x60), IDENT_ROW(0x70),
    IDENT_ROW(0x80), IDENT_ROW(0x90), IDENT_ROW(0xA0), IDENT_ROW(0xB0),
    IDENT_ROW(0xC0), IDENT_ROW(0xD0), IDENT_ROW(0xE0), IDENT_ROW(0xF0),
};

static int ident_hex(unsigned char c) {
    return ext_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int ident_all_digits(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!ext_digit((unsigned char)p[i])) return 0;
    return n > 0;
}

/* A last path component with an extension: 1 to 10 letters or digits after its last dot, at
 * least one a letter, so "2.5" in "1/2.5" is not one. */
static int ident_has_ext(const char *c, size_t n) {
    size_t dot = n, letter = 0;
    while (dot > 0 && c[dot - 1] != '.') dot--;
    if (dot == 0 || n - dot < 1 || n - dot > 10) return 0;
    for (size_t i = dot; i < n; i++) {
        if (!ext_alnum((unsigned char)c[i])) return 0;
        letter += ext_alpha((unsigned char)c[i]);
    }
    return letter > 0;
}

/* A file path: a '/' and either a leading '/', './', '../' or '~/', or a dotted extension on
 * the last component. Fractions, dates and "and/or" have neither; a leading-'/' path needs two
 * components or an extension, so that "/div" of "</div>" is not one. *pn loses trailing '/'. */
static int ident_path(const char *p, size_t *pn) {
    size_t n = *pn, comps = 0, cs = 0, letter = 0;
    while (n > 1 && p[n - 1] == '/') n--;
    if (n < 3) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        int other = c == '.' || c == '_' || c == '-' || c == '/' || c == '~' || c == '+' ||
                    c == '@' || c == '%';
        if ((!ext_alnum(c) && !other) || (c == '/' && i + 1 < n && p[i + 1] == '/')) return 0;
        letter += ext_alpha(c);
    }
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '/') continue;
        size_t cl = i - cs;
        /* "e.g./i.e." is prose: a real component ends in a dot only as "." or "..". */
        if (cl && p[i - 1] == '.' && cl > 1 && !(cl == 2 && p[cs] == '.')) return 0;
        comps += cl > 0;
        cs = i + 1;
    }
    size_t last = n;
    while (last > 0 && p[last - 1] != '/') last--;
    int ext = ident_has_ext(p + last, n - last);
    *pn = n;
    if (!letter) return 0;
    if (p[0] == '/') return comps >= 2 || ext;
    if (ext_prefix_ci(p, n, "./") || ext_prefix_ci(p, n, "../") || ext_prefix_ci(p, n, "~/"))
        return comps >= 2;
    return ext && comps >= 2;
}

static int ident_uuid(const char *p, size_t n) {
    if (n != 36) return 0;
    for (size_t i = 0; i < n; i++) {
        int dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? p[i] != '-' : !ident_hex((unsigned char)p[i])) return 0;
    }
    return 1;
}

/* Commit hashes as git prints them: 7 to 40 lower-case hex digits with a digit and a letter,
 * so that "1234567" and words like "deadbeef" are not taken. */
static int ident_hash(const char *p, size_t n) {
    int digit = 0, letter = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        digit |= ext_digit(c);
        letter |= c >= 'a' && c <= 'f';
        if (!ext_digit(c) && !(c >= 'a' && c <= 'f')) return 0;
    }
    return n >= 7 && n <= 40 && digit && letter;
}

/* [A-Z]{1,4}[0-9]{3,5}: E0308, TS2304, C4996. */
static int ident_error_code(const char *p, size_t n) {
    size_t i = 0;
    while (i < n && ext_upper((unsigned char)p[i])) i++;
    return i >= 1 && i <= 4 && n - i >= 3 && n - i <= 5 && ident_all_digits(p + i, n - i);
}

/* Errno names as the C library spells them, upper case only. */
static int ident_errno(const char *p, size_t n) {
    static const char *const names[] = {
        "E2BIG", "EACCES", "EADDRINUSE", "EADDRNOTAVAIL", "EAGAIN", "EBADF", "EBUSY", "ECHILD",
        "ECONNABORTED", "ECONNREFUSED", "ECONNRESET", "EDEADLK", "EEXIST", "EFAULT", "EFBIG",
        "EHOSTUNREACH", "EINTR", "EINVAL", "EIO", "EISDIR", "ELOOP", "EMFILE", "ENAMETOOLONG",
        "ENETUNREACH", "ENFILE", "ENODEV", "ENOENT", "ENOEXEC", "ENOMEM", "ENOSPC", "ENOSYS",
        "ENOTCONN", "ENOTDIR", "ENOTEMPTY", "ENOTFOUND", "ENOTSUP", "ENXIO", "EOPNOTSUPP",
        "EOVERFLOW", "EPERM", "EPIPE", "ERANGE", "EROFS", "ESPIPE", "ESRCH", "ETIMEDOUT",
        "ETXTBSY", "EWOULDBLOCK", "EXDEV", NULL,
    };
    /* Most words fail the cheap tests, so the list is walked only for E-led capitals. */
    if (n < 3 || n > 13 || p[0] != 'E') return 0;
    for (size_t i = 1; i < n; i++)
        if (!ext_upper((unsigned char)p[i]) && !ext_digit((unsigned char)p[i])) return 0;
    for (const char *const *e = names; *e; e++)
        if (strlen(*e) == n && memcmp(*e, p, n) == 0) return 1;
    return 0;
}

/* Ticket-like ids: "#1234" (two to seven digits, so list numbers like "#1" are not taken),
 * CVE ids, and "ABC-123": a prefix of 2 to 10 upper-case letters and digits with at least two
 * letters, then two to seven digits, unless the prefix names a standard (UTF-16, SHA-256). */
static int ident_ticket(const char *p, size_t n) {
    static const char *const standards[] = {
        "aes", "crc", "des", "gpt", "hmac", "iso", "md", "rsa", "sha", "ucs", "utf", NULL,
    };
    if (p[0] == '#') return n >= 3 && n <= 8 && ident_all_digits(p + 1, n - 1);
    if (n >= 13 && memcmp(p, "CVE-", 4) == 0 && ident_all_digits(p + 4, 4) && p[8] == '-' &&
        ident_all_digits(p + 9, n - 9))
        return 1;
    size_t dash = 0, letters = 0;
    for (; dash < n && (ext_upper((unsigned char)p[dash]) || ext_digit((unsigned char)p[dash]));
         dash++)
        letters += ext_upper((unsigned char)p[dash]);
    size_t digits = n - dash - (dash < n);
    return dash >= 2 && dash <= 10 && letters >= 2 && ext_upper((unsigned char)p[0]) &&
           dash < n && p[dash] == '-' && digits >= 2 && digits <= 7 &&
           ident_all_digits(p + dash + 1, digits) && !ext_in_list_ci(p, dash, standards);
}

/* Classifies one piece of a token (a token split at ':' and '=') and adds what it is. */
static int ident_piece(ck__idents *s, const char *p, size_t n, size_t seq, unsigned prio) {
    while (n && *p == '*') p++, n--;
    while (n && (p[n - 1] == '.' || p[n - 1] == '!' || p[n - 1] == '?' || p[n - 1] == '*')) n--;
    if (n < 3) return CK_OK;
    int take = memchr(p, '/', n) ? ident_path(p, &n)
                                 : ident_ticket(p, n) || ident_uuid(p, n) || ident_hash(p, n) ||
                                       ident_error_code(p, n) || ident_errno(p, n);
    return take ? idents_put(s, p, n, seq, 1, prio) : CK_OK;
}

/* Where a URL with a known scheme starts inside a token, or n. */
static size_t ident_url_start(const char *t, size_t n) {
    static const char *const schemes[] = {"http", "https", "ftp", "file", NULL};
    for (size_t j = 1; j + 2 < n; j++) {
        if (t[j] != ':' || t[j + 1] != '/' || t[j + 2] != '/') continue;
        size_t k = j;
        while (k > 0 && ext_alpha((unsigned char)t[k - 1])) k--;
        if (ext_in_list_ci(t + k, j - k, schemes)) return k;
    }
    return n;
}

static int ident_token(ck__idents *s, const char *t, size_t n, size_t seq, unsigned prio) {
    size_t url = ident_url_start(t, n);
    int rc = CK_OK;
    /* Outside a URL, ':' and '=' separate things ("src/a.c:12:5", "--file=x.py", "commit:abc"),
     * which also drops line numbers from paths. */
    for (size_t i = 0, j; i < url && rc == CK_OK; i = j + 1) {
        for (j = i; j < url && t[j] != ':' && t[j] != '='; j++) {}
        rc = ident_piece(s, t + i, j - i, seq, prio);
    }
    if (rc || url == n) return rc;
    const char *u = t + url;
    size_t un = n - url, named = 0;
    while (un && strchr(".,:;!?*", u[un - 1])) un--;
    for (size_t i = (size_t)((const char *)memchr(u, ':', un) - u) + 3; i < un; i++)
        named += ext_alnum((unsigned char)u[i]);
    return named ? idents_put(s, u, un, seq, 1, prio) : CK_OK;
}

int ck__idents_scan(ck__idents *s, const char *text, size_t len, size_t seq, unsigned prio) {
    if (!s) return CK_EINVAL;
    for (size_t i = 0; i < len;) {
        while (i < len && (ident_class[(unsigned char)text[i]] & IDENT_END)) i++;
        size_t start = i;
        unsigned seen = 0, k;
        for (; i < len && !((k = ident_class[(unsigned char)text[i]]) & IDENT_END); i++) seen |= k;
        if (i == start || i - start > IDENT_MAX || !(seen & IDENT_MARK)) continue;
        int rc = seen & IDENT_SEP ? ident_token(s, text + start, i - start, seq, prio)
                                  : ident_piece(s, text + start, i - start, seq, prio);
        if (rc) return rc;
    }
    return CK_OK;
}

/* Knuth-Morris-Pratt, so a hostile summary costs time linear in its length per identifier.
 * With nothing matched yet, memchr() finds the next place the first byte occurs. */
static int ident_occurs(const char *hay, size_t hn, const char *needle, size_t nn) {
    uint16_t fail[IDENT_MAX];
    if (nn > hn || nn > IDENT_MAX || nn == 0) return nn == 0;
    fail[0] = 0;
    for (size_t i = 1, k = 0; i < nn; i++) {
        while (k && needle[i] != needle[k]) k = fail[k - 1];
        k += needle[i] == needle[k];
        fail[i] = (uint16_t)k;
    }
    for (size_t i = 0, k = 0; i < hn; i++) {
        if (!k) {
            const char *at = memchr(hay + i, needle[0], hn - i);
            if (!at) return 0;
            i = (size_t)(at - hay);
        }
        while (k && hay[i] != needle[k]) k = fail[k - 1];
        k += hay[i] == needle[k];
        if (k == nn) return 1;
    }
    return 0;
}

size_t ck__idents_render(const ck__idents *s, const char *summary, size_t summary_len,
                         size_t max_items, size_t max_bytes, ck__buf *out, size_t *left) {
    if (left) *left = 0;
    if (!s || !out) return 0;
    idents_rank(s);
    size_t listed = 0, used = 0, skipped = 0, r = 0;
    /* An item that does not fit is skipped rather than ending the list: a shorter one further
     * down may still fit. The summary test runs only for items that would be listed, so its
     * cost is bounded by (listed + identifiers the summary holds) times the summary's length. */
    for (; r < s->n && listed < max_items && max_bytes - used >= 4; r++) {
        const ident_entry *e = &s->ents[s->order[r]];
        if (summary && ident_occurs(summary, summary_len, e->text, e->len)) continue;
        if (e->len + 3 > max_bytes - used) {
            skipped++;
            continue;
        }
        ck__buf_add(out, "- ", 2);
        ck__buf_add(out, e->text, e->len);
        ck__buf_addc(out, '\n');
        used += e->len + 3;
        listed++;
    }
    /* What stays unlisted, without paying the summary test for it: an upper bound that the
     * caller states as "up to". */
    if (left) *left = skipped + (s->n - r);
    return listed;
}

size_t ck__idents_count(const ck__idents *s) { return s ? s->n : 0; }

const char *ck__idents_get(const ck__idents *s, size_t i, size_t *len, size_t *seq,
                           unsigned *count, unsigned *prio) {
    const ident_entry *e = NULL;
    if (s && i < s->n) {
        idents_rank(s);
        e = &s->ents[s->order[i]];
    }
    if (len) *len = e ? e->len : 0;
    if (seq) *seq = e ? e->seq : 0;
    if (count) *count = e ? e->count : 0;
    if (prio) *prio = e ? e->prio : 0;
    return e ? e->text : NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* File operations                                                                            */
/* ------------------------------------------------------------------------------------------ */

/* Besides CK__FILE_READ and CK__FILE_MODIFIED, a tool's name can say EDITOR (its "command"
 * argument decides) or SHELL (it runs a command line, which is a file operation only in the
 * few clear shapes fileop_shell() knows). */
#define FILEOP_EDITOR 3
#define FILEOP_SHELL 4

static const char *const fileop_read_words[] = {
    "read", "view", "cat", "open", "head", "tail", NULL,
};
static const char *const fileop_write_words[] = {
    "write", "edit", "create", "replace", "insert", "patch", "append", "overwrite", "save",
    "delete", "remove", "rename", "move", "multiedit", "str_replace", "apply_patch", NULL,
};
static const char *const fileop_shell_words[] = {
    "bash", "sh", "zsh", "shell", "terminal", "exec", "execute", "run", "cmd", "command",
    "powershell", "console", NULL,
};

static int fileop_word_kind(const char *w, size_t n) {
    if (ext_in_list_ci(w, n, fileop_read_words)) return CK__FILE_READ;
    if (ext_in_list_ci(w, n, fileop_write_words)) return CK__FILE_MODIFIED;
    return ext_in_list_ci(w, n, fileop_shell_words) ? FILEOP_SHELL : CK__FILE_NONE;
}

/* Classifies a tool name: the part after the last '.', ':', '/' or "__" (MCP namespacing),
 * as a whole, then its last word, then its first word, where words split at '_', '-', blanks
 * and camelCase humps ("read_file", "file_read", "NotebookEdit", "execute_bash"). */
static int fileop_name_kind(const char *name, size_t n) {
    static const char *const editors[] = {
        "str_replace_editor", "str_replace_based_edit_tool", NULL,
    };
    size_t seg = 0;
    for (size_t i = 0; i < n; i++) {
        if (name[i] == '.' || name[i] == ':' || name[i] == '/') seg = i + 1;
        if (name[i] == '_' && i + 1 < n && name[i + 1] == '_') seg = i + 2;
    }
    const char *s = name + seg;
    size_t sn = n - seg, first_end = n - seg, last_start = 0;
    if (sn == 0 || sn > 128) return CK__FILE_NONE;
    if (ext_in_list_ci(s, sn, editors)) return FILEOP_EDITOR;
    int kind = fileop_word_kind(s, sn);
    if (kind) return kind;
    for (size_t i = 0; i < sn; i++) {
        int cut = s[i] == '_' || s[i] == '-' || s[i] == ' ';
        int hump = i > 0 && ext_upper((unsigned char)s[i]) && ext_alpha((unsigned char)s[i - 1]) &&
                   !ext_upper((unsigned char)s[i - 1]);
        if (cut || hump) {
            if (first_end == sn) first_end = i;
            last_start = cut ? i + 1 : i;
        }
    }
    kind = fileop_word_kind(s + last_start, sn - last_start);
    return kind ? kind : fileop_word_kind(s, first_end);
}

/* Finds `"value"` inside the raw JSON so the result can borrow from the caller's text. Only
 * values without quotes, backslashes or control bytes can appear there unescaped. Each try
 * stops at the next quote, so the scan stays linear. */
static const char *fileop_find_raw(const char *args, size_t n, const char *v, size_t vn) {
    for (size_t i = 0; i < vn; i++)
        if (v[i] == '"' || v[i] == '\\' || (unsigned char)v[i] < 0x20) return NULL;
    for (size_t q = 0; q + vn + 1 < n; q++)
        if (args[q] == '"' && memcmp(args + q + 1, v, vn) == 0 && args[q + 1 + vn] == '"')
            return args + q + 1;
    return NULL;
}

/* Tool arguments as the tool runtime reads them: text after the object or a repeated key
 * is what JSON.parse and json.loads decide (refused, and the last one), so a call whose
 * arguments the runtime refused touched no file. Bytes that are not UTF-8 stay as they are. */
static ck__jdoc *fileop_parse(const char *args, size_t n) {
    ck__jread_options o = {CK__JREAD_ANY_BYTES, 0};
    return args && n ? ck__jread(args, n, o, NULL) : NULL;
}

/* obj[key] when it is a string (with its length: NUL bytes are kept), else NULL. */
static const char *fileop_string(const ck__jval *obj, const char *key, size_t *n) {
    return ck__jstr(ck__jgets(obj, key), n);
}

/* A plain file operand: no option, no number, no glob, no control byte. */
static int fileop_plain_file(const char *s, size_t n) {
    if (n == 0 || s[0] == '-' || ident_all_digits(s, n)) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == '*' || s[i] == '?' || s[i] == '[') return 0;
    return 1;
}

static int fileop_is(const char *s, size_t n, const char *lit) {
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

#define SHELL_MAX 4096
#define SHELL_WORDS 32

/* Reads a one-line shell command conservatively: `cat/head/tail/less/more/nl FILE` and
 * `sed [-n] SCRIPT FILE` read FILE; `... > FILE`, `... >> FILE`, `... | tee [-a] FILE` and
 * `sed -i ... FILE` modify it. Anything else (lists with ';' or '&&', substitutions, variables,
 * globs, escapes, other pipes) is not a file operation. */
static int fileop_shell(const char *cmd, size_t n, const char **file, size_t *file_n) {
    const char *ws[SHELL_WORDS], *target = NULL;
    size_t wn[SHELL_WORDS], nw = 0, pipe_at = SIZE_MAX, target_n = 0;
    int pending = 0; /* 1: the next word is a '>' target; 2: a '2>' target */
    if (n > SHELL_MAX) return CK__FILE_NONE;
    for (size_t i = 0; i < n;) {
        char c = cmd[i];
        if (c == ' ' || c == '\t') {
            i++;
        } else if (c == '|') {
            if (pipe_at != SIZE_MAX || pending) return CK__FILE_NONE;
            pipe_at = nw;
            i++;
        } else if (c == '>' || (ext_digit((unsigned char)c) && i + 1 < n && cmd[i + 1] == '>')) {
            i += c == '>' ? 1 : 2;
            if (i < n && cmd[i] == '>') i++;
            if (pending || (i < n && cmd[i] == '&')) return CK__FILE_NONE;
            pending = c == '>' ? 1 : 2;
        } else {
            const char *w = cmd + i;
            if ((unsigned char)c < 0x20) return CK__FILE_NONE;
            if (c == '\'' || c == '"') {
                const char *close = memchr(cmd + i + 1, c, n - i - 1);
                if (!close) return CK__FILE_NONE;
                w++;
                i = (size_t)(close - cmd) + 1;
                if (c == '"' && (memchr(w, '$', (size_t)(close - w)) ||
                                 memchr(w, '`', (size_t)(close - w)) ||
                                 memchr(w, '\\', (size_t)(close - w))))
                    return CK__FILE_NONE;
                if (i < n && !strchr(" \t|>", cmd[i])) return CK__FILE_NONE;
            } else {
                for (; i < n && !strchr(" \t|>", cmd[i]); i++)
                    if ((unsigned char)cmd[i] < 0x20 || strchr(";&`$()<*?{}[]\\!#\"'", cmd[i]))
                        return CK__FILE_NONE;
            }
            size_t len = (size_t)(cmd + i - w) - (c == '\'' || c == '"');
            if (pending == 1 && target) return CK__FILE_NONE;
            if (pending == 2 && !fileop_is(w, len, "/dev/null")) return CK__FILE_NONE;
            if (pending == 1) target = w, target_n = len;
            if (!pending && nw == SHELL_WORDS) return CK__FILE_NONE;
            if (!pending) ws[nw] = w, wn[nw++] = len;
            pending = 0;
        }
    }
    if (pending) return CK__FILE_NONE;
    if (target && !fileop_is(target, target_n, "/dev/null")) {
        *file = target;
        *file_n = target_n;
        return fileop_plain_file(target, target_n) ? CK__FILE_MODIFIED : CK__FILE_NONE;
    }
    if (nw < 2 || !fileop_plain_file(ws[nw - 1], wn[nw - 1])) return CK__FILE_NONE;
    *file = ws[nw - 1];
    *file_n = wn[nw - 1];
    if (pipe_at != SIZE_MAX) {
        size_t k = nw - pipe_at;
        int tee = k >= 2 && fileop_is(ws[pipe_at], wn[pipe_at], "tee");
        int opt = k == 3 && (fileop_is(ws[pipe_at + 1], wn[pipe_at + 1], "-a") ||
                             fileop_is(ws[pipe_at + 1], wn[pipe_at + 1], "--append"));
        return tee && (k == 2 || opt) ? CK__FILE_MODIFIED : CK__FILE_NONE;
    }
    /* The program's base name, so "/bin/cat" counts as cat. */
    size_t base = wn[0];
    while (base > 0 && ws[0][base - 1] != '/') base--;
    const char *prog = ws[0] + base;
    size_t pn = wn[0] - base;
    static const char *const readers[] = {"cat", "head", "tail", "less", "more", "nl", NULL};
    if (ext_in_list_ci(prog, pn, readers)) return CK__FILE_READ;
    if (!fileop_is(prog, pn, "sed") || nw < 3) return CK__FILE_NONE;
    for (size_t k = 1; k + 1 < nw; k++)
        if (ext_prefix_ci(ws[k], wn[k], "-i") || fileop_is(ws[k], wn[k], "--in-place"))
            return CK__FILE_MODIFIED;
    return CK__FILE_READ;
}

/* Hands out the path: borrowed when `borrowed`, else copied into `scratch` (which is reset,
 * so a path from an earlier call is gone). Returns 0 when there is no usable path. */
static int fileop_result(const char *s, size_t n, int borrowed, ck__buf *scratch,
                         const char **path, size_t *path_len) {
    /* A path holding a line break or a NUL byte names no file anyone opened. */
    if (n == 0 || memchr(s, '\n', n) || memchr(s, '\0', n) || (!borrowed && !scratch))
        return 0;
    if (!borrowed) {
        scratch->failed = 0;
        ext_truncate(scratch, 0);
        ck__buf_add(scratch, s, n);
        if (scratch->failed) return 0;
        s = scratch->data;
    }
    *path = s;
    *path_len = n;
    return 1;
}

ck__file_op ck__file_op_of(const char *name, size_t name_len, const char *args, size_t args_len,
                           ck__buf *scratch, const char **path, size_t *path_len) {
    static const char *const path_keys[] = {
        "path", "file_path", "filename", "file", "target_file", "filepath", "notebook_path", NULL,
    };
    static const char *const read_commands[] = {"view", "read", NULL};
    static const char *const write_commands[] = {
        "create", "str_replace", "insert", "write", "undo_edit", "edit", "append", NULL,
    };
    const char *p0, *value = NULL, *file = NULL;
    size_t n0, vn = 0, fn = 0, cn = 0;
    if (!path) path = &p0;
    if (!path_len) path_len = &n0;
    *path = NULL;
    *path_len = 0;
    int kind = name ? fileop_name_kind(name, name_len) : CK__FILE_NONE, op = CK__FILE_NONE;
    ck__jdoc *doc = fileop_parse(args, args_len);
    const ck__jval *obj = ck__jdoc_root(doc);
    int is_object = ck__jis(obj, CK__JOBJECT);
    const char *command = fileop_string(obj, "command", &cn);
    if (is_object && kind == FILEOP_SHELL) {
        if (!command) command = fileop_string(obj, "cmd", &cn);
        /* The words point into whichever copy of the command is scanned. */
        const char *raw = command ? fileop_find_raw(args, args_len, command, cn) : NULL;
        if (command) op = fileop_shell(raw ? raw : command, cn, &file, &fn);
        if (op && !fileop_result(file, fn, raw != NULL, scratch, path, path_len)) op = 0;
    } else if (is_object) {
        for (const char *const *key = path_keys; *key && !value; key++)
            value = fileop_string(obj, *key, &vn);
        if (value && command && ext_in_list_ci(command, cn, read_commands)) op = CK__FILE_READ;
        else if (value && command && ext_in_list_ci(command, cn, write_commands))
            op = CK__FILE_MODIFIED;
        else if (value && (kind == CK__FILE_READ || kind == CK__FILE_MODIFIED)) op = kind;
        const char *raw = op ? fileop_find_raw(args, args_len, value, vn) : NULL;
        if (op && !fileop_result(raw ? raw : value, vn, raw != NULL, scratch, path, path_len))
            op = CK__FILE_NONE;
    }
    ck__jdoc_free(doc);
    return (ck__file_op)op;
}

/* ------------------------------------------------------------------------------------------ */
/* Rules and failures                                                                         */
/* ------------------------------------------------------------------------------------------ */

/* Letters, digits and '_' make up a word, so "alwaysfoo", "must_have" and "2never" are not
 * the rule words they contain. */
static int rule_word_byte(unsigned char c) { return ext_alnum(c) || c == '_'; }

/* True when the word after position i (past at least one blank) is `lit`; *end is set past it. */
static int rule_next_is(const char *s, size_t n, size_t i, const char *lit, size_t *end) {
    size_t j = i;
    while (j < n && (s[j] == ' ' || s[j] == '\t')) j++;
    size_t ws = j;
    while (j < n && rule_word_byte((unsigned char)s[j])) j++;
    *end = j;
    return ws > i && ext_equal_ci(s + ws, j - ws, lit);
}

/* True when s[i..] is "'t" or "’t" (U+2019) ending a word, as in "don't". */
static int rule_apostrophe_t(const char *s, size_t n, size_t i) {
    size_t k = i < n && s[i] == '\'' ? i + 1 : 0;
    if (i + 2 < n && memcmp(s + i, "\xe2\x80\x99", 3) == 0) k = i + 3;
    return k && k < n && ext_lower((unsigned char)s[k]) == 't' &&
           (k + 1 >= n || !rule_word_byte((unsigned char)s[k + 1]));
}

/* The offset of the first rule word of line[0..len), or len when there is none. */
static size_t rule_word_at(const char *line, size_t len) {
    static const char *const words[] = {
        "never", "always", "must", "only", "avoid", "ensure", "remember", NULL,
    };
    /* 不要, 禁止, 必须, 务必, 一定, 只能, and their close cousins 请勿, 切勿, 不得,
     * 不许. Chinese has no spaces between words, so these match anywhere. */
    static const char *const cjk[] = {
        "\xe4\xb8\x8d\xe8\xa6\x81", "\xe7\xa6\x81\xe6\xad\xa2", "\xe5\xbf\x85\xe9\xa1\xbb",
        "\xe5\x8a\xa1\xe5\xbf\x85", "\xe4\xb8\x80\xe5\xae\x9a", "\xe5\x8f\xaa\xe8\x83\xbd",
        "\xe8\xaf\xb7\xe5\x8b\xbf", "\xe5\x88\x87\xe5\x8b\xbf", "\xe4\xb8\x8d\xe5\xbe\x97",
        "\xe4\xb8\x8d\xe8\xae\xb8", NULL,
    };
    size_t e;
    for (size_t i = 0; line && i < len;) {
        unsigned char c = (unsigned char)line[i];
        for (const char *const *w = cjk; c >= 0xE0 && *w; w++)
            if (len - i >= 6 && memcmp(line + i, *w, 6) == 0) return i;
        if (!rule_word_byte(c)) {
            i++;
            continue;
        }
        size_t ws = i;
        while (i < len && rule_word_byte((unsigned char)line[i])) i++;
        const char *w = line + ws;
        size_t wn = i - ws;
        if (ext_in_list_ci(w, wn, words) ||
            (ext_equal_ci(w, wn, "don") && rule_apostrophe_t(line, len, i)) ||
            (ext_equal_ci(w, wn, "do") && rule_next_is(line, len, i, "not", &e)) ||
            (ext_equal_ci(w, wn, "make") && rule_next_is(line, len, i, "sure", &e)) ||
            (ext_equal_ci(w, wn, "from") && rule_next_is(line, len, i, "now", &e) &&
             rule_next_is(line, len, e, "on", &e)))
            return ws;
    }
    return len;
}

int ck__is_rule_line(const char *line, size_t len) {
    return line && len && rule_word_at(line, len) < len;
}

/* The length of a sentence end at s[i] (0 when there is none): a line break; '.', '!', '?'
 * or ';' before a blank or the end (so "src/a.c" and "v1.2" do not end one); or a full-width
 * 。！？； (three bytes each in UTF-8). */
static size_t rule_sentence_end(const char *s, size_t n, size_t i) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\n' || c == '\r') return 1;
    if (c == '.' || c == '!' || c == '?' || c == ';')
        return i + 1 >= n || s[i + 1] == ' ' || s[i + 1] == '\t' || s[i + 1] == '\n' ||
                       s[i + 1] == '\r'
                   ? 1
                   : 0;
    if (c == 0xE3 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 &&
        (unsigned char)s[i + 2] == 0x82)
        return 3; /* 。 */
    if (c == 0xEF && i + 2 < n && (unsigned char)s[i + 1] == 0xBC &&
        ((unsigned char)s[i + 2] == 0x81 || (unsigned char)s[i + 2] == 0x9F ||
         (unsigned char)s[i + 2] == 0x9B))
        return 3; /* ！ ？ ； */
    return 0;
}

/* Hands fn the piece s[0..n) trimmed of list marks and blanks, when it holds a rule. */
static int rule_emit(const char *p, size_t n, int (*fn)(void *ctx, const char *s, size_t n),
                     void *ctx) {
    while (n && (*p == ' ' || *p == '\t' || *p == '-' || *p == '*' || *p == '>')) p++, n--;
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
    return n && ck__is_rule_line(p, n) ? fn(ctx, p, n) : 0;
}

/* How far before its rule word a window over an over-long sentence starts. */
#define RULE_LEAD 160

int ck__rule_sentences(const char *text, size_t len, size_t max,
                       int (*fn)(void *ctx, const char *s, size_t n), void *ctx) {
    size_t start = 0;
    while (start < len) {
        /* The sentence: up to its end mark (kept) or a line break (not). */
        size_t i = start, end = 0;
        while (i < len && !(end = rule_sentence_end(text, len, i))) i++;
        size_t stop = i < len && text[i] != '\n' && text[i] != '\r' ? i + end : i;
        size_t next = i < len ? i + end : len;
        int rc;
        if (stop - start <= max) {
            rc = rule_emit(text + start, stop - start, fn, ctx);
        } else {
            /* Longer than a rule line may be: a window of at most `max` bytes around each
             * rule word in it, starting at a blank a little before the word and never inside
             * a UTF-8 sequence, so a rule after a long run without full stops is kept. */
            rc = 0;
            for (size_t at = start; at < stop && !rc;) {
                size_t w = at + rule_word_at(text + at, stop - at);
                if (w >= stop) break;
                size_t ws = w - at > RULE_LEAD ? w - RULE_LEAD : at;
                while (ws < w && ((unsigned char)text[ws] & 0xC0) == 0x80) ws++;
                for (size_t k = ws; k < w; k++)
                    if (text[k] == ' ' || text[k] == '\t') {
                        ws = k + 1;
                        break;
                    }
                size_t n = ck__clip(text + ws, stop - ws, max);
                if (n == 0) n = w - ws + 1;
                rc = rule_emit(text + ws, n, fn, ctx);
                at = ws + n > w ? ws + n : w + 1;
            }
        }
        if (rc) return rc;
        start = next > start ? next : start + 1;
    }
    return 0;
}

/* Only the head and the tail of a large output are read: errors show up at one end or the
 * other, and a failure check must stay cheap on megabytes of log. */
#define FAIL_SCAN 4096

/* How a failure signal counts: plainly; unless "0 " precedes it (a "0 failed" test summary);
 * only with "uncaught "/"unhandled " before it; or as an exit code whose number follows. */
enum { FAIL_PLAIN, FAIL_NOT_ZERO, FAIL_UNCAUGHT, FAIL_EXIT };

typedef struct fail_signal {
    const char *text; /* lower case */
    unsigned char len, how;
} fail_signal;

#define FAIL_SIG(text, how) {text, (unsigned char)(sizeof(text) - 1), how}
#define FAIL_LIST(...) ((const fail_signal[]){__VA_ARGS__, {NULL, 0, 0}})
#define FAIL_PAIR(a, b) [((a) & 31) << 5 | ((b) & 31)]

/* The scan runs over every byte it reads, so it looks up each pair of bytes by the low five
 * bits of each, which a letter shares with its other case: the signals that start with those
 * two letters, NULL for most pairs. Only those few are compared with the text; the comparison
 * itself rejects the non-letters that share the bits. Each list ends with an empty entry. */
static const fail_signal *const fail_pairs[32 * 32] = {
    FAIL_PAIR('c', 'a') = FAIL_LIST(FAIL_SIG("cannot access", FAIL_PLAIN)),
    FAIL_PAIR('c', 'm') = FAIL_LIST(FAIL_SIG("cmake error", FAIL_PLAIN)),
    FAIL_PAIR('c', 'o') = FAIL_LIST(FAIL_SIG("command not found", FAIL_PLAIN)),
    FAIL_PAIR('e', 'r') = FAIL_LIST(FAIL_SIG("error:", FAIL_PLAIN), FAIL_SIG("error[", FAIL_PLAIN),
                                    FAIL_SIG("errors occurred", FAIL_PLAIN)),
    FAIL_PAIR('e', 'x') = FAIL_LIST(FAIL_SIG("exception:", FAIL_PLAIN),
                                    FAIL_SIG("exception in thread", FAIL_PLAIN),
                                    FAIL_SIG("exception", FAIL_UNCAUGHT),
                                    FAIL_SIG("exit code", FAIL_EXIT),
                                    FAIL_SIG("exit_code", FAIL_EXIT),
                                    FAIL_SIG("exit status", FAIL_EXIT)),
    FAIL_PAIR('f', 'a') = FAIL_LIST(FAIL_SIG("failed", FAIL_NOT_ZERO),
                                    FAIL_SIG("failure", FAIL_NOT_ZERO),
                                    FAIL_SIG("fatal:", FAIL_PLAIN),
                                    FAIL_SIG("fatal error", FAIL_PLAIN)),
    FAIL_PAIR('m', 'a') = FAIL_LIST(FAIL_SIG("make: ***", FAIL_PLAIN)),
    FAIL_PAIR('n', 'o') = FAIL_LIST(FAIL_SIG("no such file", FAIL_PLAIN),
                                    FAIL_SIG("no replacement was performed", FAIL_PLAIN),
                                    FAIL_SIG("non-zero exit", FAIL_PLAIN)),
    FAIL_PAIR('p', 'a') = FAIL_LIST(FAIL_SIG("panic:", FAIL_PLAIN),
                                    FAIL_SIG("panicked", FAIL_PLAIN)),
    FAIL_PAIR('p', 'e') = FAIL_LIST(FAIL_SIG("permission denied", FAIL_PLAIN)),
    FAIL_PAIR('r', 'e') = FAIL_LIST(FAIL_SIG("returned non-zero", FAIL_PLAIN)),
    FAIL_PAIR('s', 'e') = FAIL_LIST(FAIL_SIG("segmentation fault", FAIL_PLAIN)),
    FAIL_PAIR('t', 'r') = FAIL_LIST(FAIL_SIG("traceback (", FAIL_PLAIN),
                                    FAIL_SIG("traceback:", FAIL_PLAIN)),
    FAIL_PAIR('u', 'n') = FAIL_LIST(FAIL_SIG("unable to locate", FAIL_PLAIN)),
};

/* The number after "exit code" (blanks, ':', '=' and quotes skipped): 1 for a non-zero code,
 * 0 for zero, -1 when no number follows. */
static int fail_exit_value(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == ':' || s[i] == '=' || s[i] == '"'))
        i++;
    if (i + 1 < n && s[i] == '-' && ext_digit((unsigned char)s[i + 1])) return 1;
    if (i >= n || !ext_digit((unsigned char)s[i])) return -1;
    int nonzero = 0;
    for (; i < n && ext_digit((unsigned char)s[i]); i++) nonzero |= s[i] != '0';
    return nonzero;
}

/* True when sig matches at s, which has `room` bytes. */
static int fail_matches(const char *s, size_t room, const fail_signal *sig) {
    if (sig->len > room) return 0;
    for (size_t k = 0; k < sig->len; k++)
        if (ext_lower((unsigned char)s[k]) != (unsigned char)sig->text[k]) return 0;
    return 1;
}

/* Notes what the signals in `sig` that match at s[i] say. */
static void fail_note(const char *s, size_t n, size_t i, const fail_signal *sig, int found[3]) {
    for (; sig->len; sig++) {
        if (!fail_matches(s + i, n - i, sig)) continue;
        if (sig->how == FAIL_EXIT) {
            int v = fail_exit_value(s, n, i + sig->len);
            if (v >= 0) found[1 + v] = 1;
        } else if (sig->how == FAIL_NOT_ZERO) {
            found[0] |= !(i >= 2 && s[i - 1] == ' ' && s[i - 2] == '0' &&
                          (i < 3 || !ext_digit((unsigned char)s[i - 3])));
        } else if (sig->how == FAIL_UNCAUGHT) {
            found[0] |= (i >= 9 && ext_prefix_ci(s + i - 9, 9, "uncaught ")) ||
                        (i >= 10 && ext_prefix_ci(s + i - 10, 10, "unhandled "));
        } else {
            found[0] = 1;
        }
    }
}

/* Looks for signals starting in s[from..to) (a match may run past `to`, never past `n`).
 * found[0]: a text signal; found[1]: an exit code 0; found[2]: a non-zero exit code, which
 * settles the answer, so the scan stops there. The loop only looks up pairs of bytes (every
 * signal is longer than two), which keeps it to a few instructions a byte. */
static void fail_scan(const char *s, size_t n, size_t from, size_t to, int found[3]) {
    if (to > n - (n > 0)) to = n - (n > 0);
    for (size_t i = from; i < to; i++) {
        const fail_signal *sig = fail_pairs[((unsigned char)s[i] & 31) << 5 |
                                            ((unsigned char)s[i + 1] & 31)];
        if (!sig) continue;
        fail_note(s, n, i, sig, found);
        if (found[2]) return;
    }
}

/* An explicit exit code is the strongest evidence: a non-zero one is a failure, and a zero one
 * (without a non-zero one) means success even when the output quotes an "error:" line, as a
 * grep for errors does. Without one, any text signal counts. */
int ck__looks_failed(const char *text, size_t len, uint32_t part_flags) {
    int found[3] = {0, 0, 0};
    if (part_flags & CK_PART_IS_ERROR) return 1;
    if (!text) return 0;
    if (len <= 2 * FAIL_SCAN) {
        fail_scan(text, len, 0, len, found);
    } else {
        fail_scan(text, len, 0, FAIL_SCAN, found);
        fail_scan(text, len, len - FAIL_SCAN, len, found);
    }
    return found[2] || (!found[1] && found[0]);
}

int ck__part_failed(const ck_history *h, size_t g, unsigned char *verdicts) {
    const ck_part *p = &h->parts[g];
    if (!verdicts) return ck__looks_failed(p->text, p->text_len, p->flags);
    if (!verdicts[g])
        verdicts[g] = (unsigned char)(1 + ck__looks_failed(p->text, p->text_len, p->flags));
    return verdicts[g] - 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Extractive summarizer                                                                      */
/* ------------------------------------------------------------------------------------------ */

#define XSUM_NAME_MAX 64            /* bytes of a tool name shown */
#define XSUM_ARGS_MAX 160           /* bytes of tool arguments shown in Execution Progress */
#define XSUM_TRIED_ARGS 100         /* ... and in Tried Solutions */
#define XSUM_LINE_MAX 200           /* bytes of a sentence or an error line */
#define XSUM_PARSE_MAX (256 * 1024) /* larger arguments are shown raw, not parsed */

typedef struct xsum {
    const ck_history *h;
    unsigned char *verdicts; /* ck__part_failed()'s table, or NULL */
    size_t start, end, budget;
    ck__idmap calls; /* tool-call id -> index into h->parts, over [0, end) */
    ck__buf out;     /* the anchor being written */
    ck__buf lines;   /* its lines, each ending in '\n', when the newest are chosen */
    size_t *ends;    /* offset just past each line */
    size_t n_lines, cap_lines;
    int failed;
    size_t n_calls, n_failed;
} xsum;

/* Ends the line being written at the end of x->lines. With `dedup`, a line equal to the one
 * before it is dropped (an agent often repeats itself). */
static void xsum_line_end(xsum *x, int dedup) {
    size_t start = x->n_lines ? x->ends[x->n_lines - 1] : 0;
    size_t prev = x->n_lines > 1 ? x->ends[x->n_lines - 2] : 0;
    if (x->lines.failed) return;
    if (dedup && x->n_lines && start - prev - 1 == x->lines.len - start &&
        memcmp(x->lines.data + prev, x->lines.data + start, start - prev - 1) == 0) {
        ext_truncate(&x->lines, start);
        return;
    }
    ck__buf_addc(&x->lines, '\n');
    if (ck__grow((void **)&x->ends, &x->cap_lines, x->n_lines + 1, sizeof *x->ends))
        x->failed = 1;
    else x->ends[x->n_lines++] = x->lines.len;
}

/* Writes the lines to x->out within the budget: all of them when they fit, else the newest
 * that fit after a note counting the others (the newest clipped when even it alone does not),
 * and empties the list. */
static void xsum_emit(xsum *x, const char *what) {
    const ck__buf *l = &x->lines;
    size_t n = x->n_lines, budget = x->budget;
    if (n && l->len <= budget) ck__buf_add(&x->out, l->data, l->len);
    if (n && l->len > budget) {
        char note[96];
        int nn = snprintf(note, sizeof note, "- (%zu earlier %s not shown)\n", n, what);
        size_t room = budget > (size_t)nn ? budget - (size_t)nn : 0, first = n, used = 0;
        for (; first > 0; first--) {
            size_t ln = x->ends[first - 1] - (first > 1 ? x->ends[first - 2] : 0);
            if (used + ln > room) break;
            used += ln;
        }
        int clip = first == n;
        first -= clip;
        if (first) {
            nn = snprintf(note, sizeof note, "- (%zu earlier %s not shown)\n", first, what);
            ck__buf_add(&x->out, note, (size_t)nn);
        } else {
            room = budget;
        }
        size_t from = first ? x->ends[first - 1] : 0;
        size_t keep = clip ? ck__clip(l->data + from, l->len - from - 1, room ? room - 1 : 0)
                           : l->len - from;
        ck__buf_add(&x->out, l->data + from, keep);
        if (clip) ck__buf_addc(&x->out, '\n');
    }
    ext_truncate(&x->lines, 0);
    x->n_lines = 0;
}

static int xsum_has_text(const ck_history *h, size_t i) {
    const ck_part *p = ck__msg_parts(h, i);
    for (size_t k = 0; k < h->msgs[i].n_parts; k++)
        for (size_t j = 0; p[k].kind == CK_PART_TEXT && j < p[k].text_len; j++)
            if (!ext_blank((unsigned char)p[k].text[j])) return 1;
    return 0;
}

/* Appends the TEXT parts of message i joined by newlines, cut to `max` bytes at a line or word
 * boundary. At most max + 1 bytes are copied: ck__clip() needs one past the cut. */
static void xsum_add_text(const ck_history *h, size_t i, size_t max, ck__buf *b) {
    const ck_part *p = ck__msg_parts(h, i);
    size_t base = b->len, cap = max + 1;
    for (size_t k = 0; k < h->msgs[i].n_parts && !b->failed && b->len - base < cap; k++) {
        if (p[k].kind != CK_PART_TEXT || p[k].text_len == 0) continue;
        if (b->len > base) ck__buf_addc(b, '\n');
        size_t room = b->len - base < cap ? cap - (b->len - base) : 0;
        ck__buf_add(b, p[k].text, p[k].text_len < room ? p[k].text_len : room);
    }
    if (!b->failed && b->len > base)
        ext_truncate(b, base + ck__clip(b->data + base, b->len - base, max));
}

static int xsum_same_text(const ck_history *h, size_t a, size_t b) {
    const ck_part *pa = ck__msg_parts(h, a), *pb = ck__msg_parts(h, b);
    size_t ka = 0, kb = 0, na = h->msgs[a].n_parts, nb = h->msgs[b].n_parts;
    for (;; ka++, kb++) {
        while (ka < na && pa[ka].kind != CK_PART_TEXT) ka++;
        while (kb < nb && pb[kb].kind != CK_PART_TEXT) kb++;
        if (ka == na || kb == nb) return ka == na && kb == nb;
        if (pa[ka].text_len != pb[kb].text_len ||
            (pa[ka].text_len && memcmp(pa[ka].text, pb[kb].text, pa[ka].text_len) != 0))
            return 0;
    }
}

/* Shows tool arguments compactly: the values of the keys that say what a call does (command,
 * path, query...), else the only string field, else the JSON on one line. */
static void xsum_add_args(ck__buf *b, const char *args, size_t n, size_t max) {
    static const char *const keys[] = {
        "command", "cmd", "path", "file_path", "query", "pattern", "url", NULL,
    };
    ck__jdoc *doc = n <= XSUM_PARSE_MAX ? fileop_parse(args, n) : NULL;
    const ck__jval *root = ck__jdoc_root(doc);
    size_t base = b->len, shown = 0, vn;
    int is_object = ck__jis(root, CK__JOBJECT);
    for (const char *const *key = keys; is_object && *key && shown < 2; key++) {
        const char *v = fileop_string(root, *key, &vn);
        if (!v || vn == 0 || (shown && b->len - base + 4 >= max)) continue;
        if (shown++) ck__buf_addc(b, ' ');
        ext_add_flat(b, v, vn, max - (b->len - base));
    }
    /* The one string of an object or an array that holds nothing else. */
    const ck__jval *only = NULL;
    if (ck__jcount(root) == 1)
        only = ck__jis(root, CK__JOBJECT) ? &ck__jmember_at(root, 0)->value : ck__jat(root, 0);
    const char *single = ck__jstr(only, &vn);
    if (!shown && single) ext_add_flat(b, single, vn, max);
    else if (!shown && args) ext_add_flat(b, args, n, max);
    ck__jdoc_free(doc);
}

static void xsum_add_name(ck__buf *b, const ck_part *p) {
    if (p->name_len) ext_add_flat(b, p->name, p->name_len, XSUM_NAME_MAX);
    else ck__buf_adds(b, "(unnamed tool)");
}

/* The line of a failed result that best says what went wrong: the first line, in the parts
 * ck__looks_failed() reads, that carries a failure signal, else the first non-blank line. A
 * short heading such as "ERROR:" is joined with the line after it. */
static void xsum_error_line(const char *t, size_t n, const char **line, size_t *line_n) {
    size_t head = n > 2 * FAIL_SCAN ? FAIL_SCAN : n;
    *line = NULL;
    *line_n = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = pass ? n - (n - head < FAIL_SCAN ? n - head : FAIL_SCAN) : 0,
                    to = pass ? n : head, e;
             i < to; i = e + 1) {
            for (e = i; e < n && e - i < FAIL_SCAN && t[e] != '\n'; e++) {}
            const char *s = t + i;
            size_t ln = e - i;
            ext_trim(&s, &ln);
            if (ln == 0) continue;
            if (!*line) *line = s, *line_n = ln;
            if (!ck__looks_failed(s, ln, 0)) continue;
            if (ln < 40 && s[ln - 1] == ':' && e < n) {
                size_t e2 = e + 1;
                while (e2 < n && e2 - e < XSUM_LINE_MAX && t[e2] != '\n') e2++;
                ln = (size_t)(t + e2 - s);
            }
            *line = s;
            *line_n = ln;
            return;
        }
    }
}

static void xsum_progress(xsum *x) {
    for (size_t i = x->start; i < x->end; i++) {
        const ck_part *p = ck__msg_parts(x->h, i);
        for (size_t k = 0; k < x->h->msgs[i].n_parts; k++) {
            if (p[k].kind != CK_PART_TOOL_CALL) continue;
            x->n_calls++;
            ck__buf_add(&x->lines, "- ", 2);
            xsum_add_name(&x->lines, &p[k]);
            ck__buf_add(&x->lines, ": ", 2);
            xsum_add_args(&x->lines, p[k].text, p[k].text_len, XSUM_ARGS_MAX);
            xsum_line_end(x, 0);
        }
    }
    xsum_emit(x, "tool calls");
}

/* The first sentence of each assistant text, without headings and list markup. */
static void xsum_decisions(xsum *x) {
    for (size_t i = x->start; i < x->end; i++) {
        const ck_part *p = ck__msg_parts(x->h, i);
        for (size_t k = 0; x->h->msgs[i].role == CK_ROLE_ASSISTANT && k < x->h->msgs[i].n_parts;
             k++) {
            const char *s = p[k].text;
            size_t n = p[k].kind == CK_PART_TEXT ? p[k].text_len : 0;
            /* A heading says nothing by itself ("## Plan"); the sentence after it does. */
            for (;;) {
                while (n && (ext_blank((unsigned char)*s) || strchr("*->_`", *s))) s++, n--;
                const char *nl = n && *s == '#' ? memchr(s, '\n', n) : NULL;
                if (!n || *s != '#') break;
                n = nl ? n - (size_t)(nl - s) : 0;
                s = nl ? nl : s;
            }
            if (n == 0) continue;
            size_t e = 0, lim = n < 4 * XSUM_LINE_MAX ? n : 4 * XSUM_LINE_MAX;
            for (; e < lim && s[e] != '\n'; e++) {
                if (s[e] && strchr(".!?", s[e]) &&
                    (e + 1 == n || ext_blank((unsigned char)s[e + 1]))) {
                    e++;
                    break;
                }
                /* 。！？ end a sentence in Chinese and Japanese. */
                if (e + 2 < n && (memcmp(s + e, "\xe3\x80\x82", 3) == 0 ||
                                  memcmp(s + e, "\xef\xbc\x81", 3) == 0 ||
                                  memcmp(s + e, "\xef\xbc\x9f", 3) == 0)) {
                    e += 3;
                    break;
                }
            }
            ck__buf_add(&x->lines, "- ", 2);
            ext_add_flat(&x->lines, s, e, XSUM_LINE_MAX);
            xsum_line_end(x, 1);
            break;
        }
    }
    xsum_emit(x, "statements");
}

static void xsum_tried(xsum *x) {
    const ck_history *h = x->h;
    for (size_t i = x->start; i < x->end; i++) {
        const ck_part *p = ck__msg_parts(h, i);
        for (size_t k = 0; k < h->msgs[i].n_parts; k++) {
            if (p[k].kind != CK_PART_TOOL_RESULT) continue;
            if (!ck__part_failed(h, h->msgs[i].first_part + k, x->verdicts)) continue;
            x->n_failed++;
            size_t at = p[k].id_len ? ck__idmap_get(&x->calls, p[k].id, p[k].id_len) : SIZE_MAX;
            const char *line;
            size_t ln;
            ck__buf_add(&x->lines, "- ", 2);
            if (at != SIZE_MAX) {
                xsum_add_name(&x->lines, &h->parts[at]);
                ck__buf_addc(&x->lines, ' ');
                xsum_add_args(&x->lines, h->parts[at].text, h->parts[at].text_len,
                              XSUM_TRIED_ARGS);
            } else {
                ck__buf_adds(&x->lines, "(unknown call)");
            }
            ck__buf_add(&x->lines, ": ", 2);
            xsum_error_line(p[k].text, p[k].text_len, &line, &ln);
            if (line) ext_add_flat(&x->lines, line, ln, XSUM_LINE_MAX);
            else ck__buf_adds(&x->lines, "(no output)");
            xsum_line_end(x, 0);
        }
    }
    xsum_emit(x, "failures");
}

/* The task (the first user message of the whole history) and, when the span holds a later,
 * different user message, that one too: the newest instruction is what the agent must follow
 * next. The task gets two thirds of the budget then. */
static void xsum_intent(xsum *x) {
    static const char label[] = "\n\nLatest user message: ";
    const ck_history *h = x->h;
    size_t first = CK_NONE, last = CK_NONE;
    for (size_t i = 0; i < h->n_msgs && first == CK_NONE; i++)
        if (h->msgs[i].role == CK_ROLE_USER && xsum_has_text(h, i)) first = i;
    for (size_t i = x->end; i > x->start && last == CK_NONE; i--)
        if (h->msgs[i - 1].role == CK_ROLE_USER && xsum_has_text(h, i - 1)) last = i - 1;
    if (first == CK_NONE) return;
    int both = last != CK_NONE && last != first && !xsum_same_text(h, first, last) &&
               x->budget >= 3 * (sizeof label + 16);
    xsum_add_text(h, first, both ? x->budget * 2 / 3 : x->budget, &x->out);
    if (!both || x->out.failed) return;
    size_t room = x->budget - x->out.len - (sizeof label - 1);
    ck__buf_add(&x->out, label, sizeof label - 1);
    xsum_add_text(h, last, room, &x->out);
}

static void xsum_next(xsum *x) {
    for (size_t i = x->end; i > x->start; i--) {
        if (x->h->msgs[i - 1].role == CK_ROLE_ASSISTANT && xsum_has_text(x->h, i - 1)) {
            xsum_add_text(x->h, i - 1, x->budget, &x->out);
            return;
        }
    }
}

/* Stores x->out as anchor `which` and empties it. */
static int xsum_store(xsum *x, ck_anchors *a, ck_anchor which) {
    if (x->out.failed || x->lines.failed || x->failed) return CK_ENOMEM;
    int rc = x->out.len ? ck_anchors_set(a, which, x->out.data, x->out.len) : CK_OK;
    ext_truncate(&x->out, 0);
    return rc;
}

static int xsum_index_calls(xsum *x) {
    const ck_history *h = x->h;
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass && ck__idmap_init(&x->calls, n)) return CK_ENOMEM;
        for (size_t i = 0; i < x->end; i++) {
            const ck_part *p = ck__msg_parts(h, i);
            for (size_t k = 0; k < h->msgs[i].n_parts; k++) {
                if (p[k].kind != CK_PART_TOOL_CALL || p[k].id_len == 0) continue;
                if (!pass) n++;
                else if (ck__idmap_put(&x->calls, p[k].id, p[k].id_len,
                                       h->msgs[i].first_part + k) < 0)
                    return CK_ENOMEM;
            }
        }
    }
    return CK_OK;
}

static int xsum_run(xsum *x, ck_anchors *a) {
    int rc = xsum_index_calls(x);
    if (!rc) xsum_intent(x);
    if (!rc) rc = xsum_store(x, a, CK_ANCHOR_USER_INTENT);
    if (!rc) xsum_progress(x);
    if (!rc) rc = xsum_store(x, a, CK_ANCHOR_EXECUTION_PROGRESS);
    if (!rc) xsum_decisions(x);
    if (!rc) rc = xsum_store(x, a, CK_ANCHOR_KEY_DECISIONS);
    if (!rc) xsum_tried(x);
    if (!rc) rc = xsum_store(x, a, CK_ANCHOR_TRIED_SOLUTIONS);
    if (!rc) xsum_next(x);
    if (!rc) rc = xsum_store(x, a, CK_ANCHOR_NEXT_STEPS);
    if (rc) return rc;
    size_t msgs = x->end - x->start;
    ck__buf_printf(&x->out, "Compacted %zu message%s: %zu tool call%s, %zu failed.", msgs,
                   msgs == 1 ? "" : "s", x->n_calls, x->n_calls == 1 ? "" : "s", x->n_failed);
    return x->out.failed ? CK_ENOMEM : ck_anchors_set_summary(a, x->out.data, x->out.len);
}

ck_anchors *ck__extractive(const ck_history *h, size_t start, size_t end, uint64_t max_tokens,
                           unsigned char *failed) {
    ck_anchors *a = ck_anchors_new();
    if (!a || !h) return a;
    xsum x;
    memset(&x, 0, sizeof x);
    x.h = h;
    x.verdicts = failed;
    x.end = end < h->n_msgs ? end : h->n_msgs;
    x.start = start < x.end ? start : x.end;
    /* max_tokens / 6 tokens at 4 bytes a token; never below 64 bytes, never absurdly large. */
    uint64_t bytes = max_tokens / 6 * 4;
    x.budget = bytes < 64 ? 64 : bytes > ((uint64_t)1 << 30) ? (size_t)1 << 30 : (size_t)bytes;
    ck__buf_init(&x.out);
    ck__buf_init(&x.lines);
    int rc = xsum_run(&x, a);
    ck__idmap_dispose(&x.calls);
    ck__buf_dispose(&x.out);
    ck__buf_dispose(&x.lines);
    ck__free(x.ends);
    if (rc) {
        ck_anchors_free(a);
        return NULL;
    }
    return a;
}
