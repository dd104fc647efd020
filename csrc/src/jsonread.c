/* The JSON reader (see json.h): one pass over the text with an explicit stack, values
 * gathered on a value stack and copied into the arena when their container closes, so that
 * every array and object ends up as one contiguous block and the parse never recurses. */
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "./alloc.h"
#include "./idmap.h"
#include "./internal.h"
#include "./json.h"

/* Arena blocks start small and double up to this size; a request larger than a quarter of
 * it gets a block of its own, so no block is ever much larger than what it holds. */
#define JREAD_BLOCK_MIN 1024
#define JREAD_BLOCK_MAX ((size_t)1 << 20)
/* Objects with more members than this are checked for duplicates through a hash map. */
#define JREAD_DUP_PAIRWISE 8
/* Integer literals of at most this many digits are exact in a double. */
#define JREAD_EXACT_DIGITS 15

typedef struct jread_block {
    struct jread_block *next;
    size_t used, cap;
    max_align_t data[]; /* aligned for anything a value holds */
} jread_block;

struct ck__jdoc {
    jread_block *blocks;
    ck__jval root;
    size_t end;
};

/* An open array or object: where its items start on the value stack, and its offset. */
typedef struct jread_frame {
    size_t base;
    size_t offset;
    int object;
} jread_frame;

typedef struct jread_parser {
    const unsigned char *s;
    size_t len, pos;
    uint32_t flags;
    size_t max_depth;
    ck__jdoc *doc;
    ck__jmember *stack; /* values of the open containers (array items have no key) */
    size_t n_stack, cap_stack;
    jread_frame *frames;
    size_t n_frames, cap_frames;
    ck_error *err;
} jread_parser;

static int jread_fail(jread_parser *p, int code, const char *msg, size_t offset) {
    ck__fail(p->err, code, msg, CK_NONE, NULL);
    if (p->err) p->err->offset = offset;
    return code;
}

/* ---- the arena --------------------------------------------------------------------------- */

static void *jread_alloc(ck__jdoc *doc, size_t size) {
    const size_t align = _Alignof(max_align_t);
    if (size > SIZE_MAX - align - sizeof(jread_block)) return NULL;
    size = (size + align - 1) & ~(align - 1);
    jread_block *b = doc->blocks;
    if (b && b->cap - b->used >= size) {
        void *at = (unsigned char *)b->data + b->used;
        b->used += size;
        return at;
    }
    size_t cap = b ? (b->cap < JREAD_BLOCK_MAX ? b->cap * 2 : JREAD_BLOCK_MAX) : JREAD_BLOCK_MIN;
    int alone = size > cap / 4;
    if (alone) cap = size;
    jread_block *nb = ck__malloc(sizeof *nb + cap);
    if (!nb) return NULL;
    nb->cap = cap;
    nb->used = size;
    /* A block of its own goes behind the current one, whose free room stays in use. */
    if (alone && b) {
        nb->next = b->next;
        b->next = nb;
    } else {
        nb->next = b;
        doc->blocks = nb;
    }
    return nb->data;
}

void ck__jdoc_free(ck__jdoc *doc) {
    if (!doc) return;
    for (jread_block *b = doc->blocks, *next; b; b = next) {
        next = b->next;
        ck__free(b);
    }
    ck__free(doc);
}

/* ---- scanning ---------------------------------------------------------------------------- */

static void jread_ws(jread_parser *p) {
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return;
        p->pos++;
    }
}

static int jread_hex(const unsigned char *s, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

static size_t jread_utf8(uint32_t cp, unsigned char *out) {
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes the escapes of the n raw bytes at `at` into out, which has room for n bytes (an
 * escape never decodes longer than it is written), and sets *decoded to the length. */
static int jread_unescape(jread_parser *p, size_t at, size_t n, unsigned char *out,
                          size_t *decoded) {
    const unsigned char *raw = p->s + at;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (raw[i] != '\\') {
            const unsigned char *bs = memchr(raw + i, '\\', n - i);
            size_t run = bs ? (size_t)(bs - raw) - i : n - i;
            memcpy(out + o, raw + i, run);
            o += run;
            i += run;
            continue;
        }
        /* The scan guaranteed a byte after every backslash. */
        unsigned char c = raw[i + 1], e;
        switch (c) {
            case '"': e = '"'; break;
            case '\\': e = '\\'; break;
            case '/': e = '/'; break;
            case 'b': e = '\b'; break;
            case 'f': e = '\f'; break;
            case 'n': e = '\n'; break;
            case 'r': e = '\r'; break;
            case 't': e = '\t'; break;
            case 'u': e = 0; break;
            default: return jread_fail(p, CK_ESYNTAX, "invalid escape in a string", at + i);
        }
        if (c != 'u') {
            out[o++] = e;
            i += 2;
            continue;
        }
        uint32_t cp, lo;
        if (n - i < 6 || jread_hex(raw + i + 2, &cp))
            return jread_fail(p, CK_ESYNTAX, "invalid \\u escape", at + i);
        i += 6;
        if (cp >= 0xD800 && cp <= 0xDBFF && n - i >= 6 && raw[i] == '\\' && raw[i + 1] == 'u' &&
            jread_hex(raw + i + 2, &lo) == 0 && lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
        } else if (cp >= 0xD800 && cp <= 0xDFFF) {
            cp = 0xFFFD; /* a lone surrogate (see json.h) */
        }
        o += jread_utf8(cp, out + o);
    }
    *decoded = o;
    return CK_OK;
}

/* Bytes that end a run of plain string content: the quote, the backslash, control bytes and
 * (for the UTF-8 check) bytes past ASCII. */
static int jread_special(unsigned char c) { return c == '"' || c == '\\' || c < 0x20 || c >= 0x80; }

/* Reads the string whose quote is at p->pos into the arena; p->pos ends past its close. */
static int jread_string(jread_parser *p, const char **out, size_t *out_len) {
    size_t open = p->pos, i = open + 1, len = p->len;
    const unsigned char *s = p->s;
    int escapes = 0, high = 0;
    for (;;) {
        while (i < len && !jread_special(s[i])) i++;
        if (i >= len) return jread_fail(p, CK_ESYNTAX, "unterminated string", open);
        unsigned char c = s[i];
        if (c == '"') break;
        if (c == '\\') {
            if (len - i < 2) return jread_fail(p, CK_ESYNTAX, "unterminated string", open);
            escapes = 1;
            i += 2;
        } else if (c < 0x20) {
            return jread_fail(p, CK_ESYNTAX, "control character in a string", i);
        } else {
            high = 1;
            i++;
        }
    }
    size_t start = open + 1, n = i - start;
    /* Escapes are ASCII, so checking the raw bytes checks every byte the text will hold. */
    if (high && !(p->flags & CK__JREAD_ANY_BYTES)) {
        size_t ok = ck__utf8_valid_prefix((const char *)s + start, n);
        if (ok < n) return jread_fail(p, CK_EUTF8, "invalid UTF-8 in a string", start + ok);
    }
    unsigned char *text = jread_alloc(p->doc, n + 1);
    if (!text) return jread_fail(p, CK_ENOMEM, NULL, open);
    size_t decoded = n;
    if (!escapes) {
        if (n) memcpy(text, s + start, n);
    } else {
        int rc = jread_unescape(p, start, n, text, &decoded);
        if (rc) return rc;
    }
    text[decoded] = '\0';
    *out = (const char *)text;
    *out_len = decoded;
    p->pos = i + 1;
    return CK_OK;
}

static int jread_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* The double of a number's text (NUL-terminated, JSON syntax). strtod() reads the locale's
 * decimal point, which a host may have set to ','; the text is then rewritten to match. */
static double jread_strtod(const char *text, size_t len) {
    const char *point = localeconv()->decimal_point;
    const char *dot = memchr(text, '.', len);
    if (!dot || !point || strcmp(point, ".") == 0) return strtod(text, NULL);
    size_t pl = strlen(point);
    char small[128], *copy = len + pl < sizeof small ? small : ck__malloc(len + pl);
    if (!copy) return strtod(text, NULL); /* out of memory: the digits before the point */
    size_t head = (size_t)(dot - text);
    memcpy(copy, text, head);
    memcpy(copy + head, point, pl);
    memcpy(copy + head + pl, dot + 1, len - head); /* the rest and the NUL */
    double d = strtod(copy, NULL);
    if (copy != small) ck__free(copy);
    return d;
}

static int jread_number(jread_parser *p, ck__jval *v) {
    const unsigned char *s = p->s;
    size_t start = p->pos, i = start, len = p->len;
    int integer = 1;
    if (i < len && s[i] == '-') i++;
    if (i < len && s[i] == '0') {
        i++;
    } else if (i < len && s[i] >= '1' && s[i] <= '9') {
        while (i < len && jread_digit(s[i])) i++;
    } else {
        return jread_fail(p, CK_ESYNTAX, "invalid number", start);
    }
    if (i < len && s[i] == '.') {
        integer = 0;
        if (++i >= len || !jread_digit(s[i]))
            return jread_fail(p, CK_ESYNTAX, "invalid number", start);
        while (i < len && jread_digit(s[i])) i++;
    }
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        integer = 0;
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= len || !jread_digit(s[i]))
            return jread_fail(p, CK_ESYNTAX, "invalid number", start);
        while (i < len && jread_digit(s[i])) i++;
    }
    size_t n = i - start;
    char *text = jread_alloc(p->doc, n + 1);
    if (!text) return jread_fail(p, CK_ENOMEM, NULL, start);
    memcpy(text, s + start, n);
    text[n] = '\0';
    v->kind = CK__JNUMBER;
    v->len = n;
    v->offset = start;
    v->u.str = text;
    size_t digits = n - (text[0] == '-');
    if (integer && digits <= JREAD_EXACT_DIGITS) {
        uint64_t m = 0;
        for (size_t k = n - digits; k < n; k++) m = m * 10 + (uint64_t)(text[k] - '0');
        v->num = text[0] == '-' ? -(double)m : (double)m;
    } else {
        v->num = jread_strtod(text, n);
    }
    p->pos = i;
    return CK_OK;
}

static int jread_literal(jread_parser *p, ck__jval *v) {
    static const struct {
        const char *text;
        size_t len;
        ck__jkind kind;
        size_t value;
    } lits[] = {{"true", 4, CK__JBOOL, 1}, {"false", 5, CK__JBOOL, 0}, {"null", 4, CK__JNULL, 0}};
    for (size_t k = 0; k < sizeof lits / sizeof lits[0]; k++) {
        if (p->len - p->pos >= lits[k].len &&
            memcmp(p->s + p->pos, lits[k].text, lits[k].len) == 0) {
            v->kind = lits[k].kind;
            v->len = lits[k].value;
            v->offset = p->pos;
            p->pos += lits[k].len;
            return CK_OK;
        }
    }
    return jread_fail(p, CK_ESYNTAX, p->pos < p->len ? "unexpected character" : "no value",
                      p->pos);
}

/* ---- containers -------------------------------------------------------------------------- */

static int jread_push(jread_parser *p, const char *key, size_t key_len, size_t key_offset) {
    if (ck__grow((void **)&p->stack, &p->cap_stack, p->n_stack + 1, sizeof *p->stack))
        return jread_fail(p, CK_ENOMEM, NULL, p->pos);
    ck__jmember *m = &p->stack[p->n_stack++];
    memset(m, 0, sizeof *m);
    m->key = key;
    m->key_len = key_len;
    m->key_offset = key_offset;
    return CK_OK;
}

/* Reads `"key" :` at p->pos and pushes the member whose value comes next. */
static int jread_key(jread_parser *p) {
    jread_ws(p);
    if (p->pos >= p->len || p->s[p->pos] != '"')
        return jread_fail(p, CK_ESYNTAX, p->pos < p->len ? "expected a key" : "unexpected end",
                          p->pos);
    size_t at = p->pos, n = 0;
    const char *key = NULL;
    int rc = jread_string(p, &key, &n);
    if (rc) return rc;
    jread_ws(p);
    if (p->pos >= p->len || p->s[p->pos] != ':')
        return jread_fail(p, CK_ESYNTAX, "expected ':'", p->pos);
    p->pos++;
    return jread_push(p, key, n, at);
}

/* The first member that repeats an earlier key, SIZE_MAX for none, SIZE_MAX - 1 on OOM. */
static size_t jread_duplicate(const ck__jmember *m, size_t n) {
    if (n <= JREAD_DUP_PAIRWISE) {
        for (size_t j = 1; j < n; j++)
            for (size_t i = 0; i < j; i++)
                if (m[i].key_len == m[j].key_len && memcmp(m[i].key, m[j].key, m[j].key_len) == 0)
                    return j;
        return SIZE_MAX;
    }
    ck__idmap seen;
    if (ck__idmap_init(&seen, n)) return SIZE_MAX - 1;
    size_t found = SIZE_MAX;
    for (size_t j = 0; j < n && found == SIZE_MAX; j++) {
        int put = ck__idmap_put(&seen, m[j].key, m[j].key_len, j);
        if (put < 0) found = SIZE_MAX - 1;
        else if (put == 0) found = j;
    }
    ck__idmap_dispose(&seen);
    return found;
}

/* Closes the innermost container into *v: its items leave the value stack for the arena. */
static int jread_close(jread_parser *p, ck__jval *v) {
    jread_frame f = p->frames[--p->n_frames];
    size_t n = p->n_stack - f.base;
    /* Empty containers before any value leave the stack unallocated: NULL + 0 is undefined. */
    const ck__jmember *items = n ? p->stack + f.base : NULL;
    memset(v, 0, sizeof *v);
    v->kind = f.object ? CK__JOBJECT : CK__JARRAY;
    v->len = n;
    v->offset = f.offset;
    if (n && f.object) {
        if (p->flags & CK__JREAD_NO_DUPLICATES) {
            size_t dup = jread_duplicate(items, n);
            if (dup == SIZE_MAX - 1) return jread_fail(p, CK_ENOMEM, NULL, f.offset);
            if (dup != SIZE_MAX)
                return jread_fail(p, CK_ESYNTAX, "duplicate key", items[dup].key_offset);
        }
        ck__jmember *copy = n <= SIZE_MAX / sizeof *copy ? jread_alloc(p->doc, n * sizeof *copy)
                                                         : NULL;
        if (!copy) return jread_fail(p, CK_ENOMEM, NULL, f.offset);
        memcpy(copy, items, n * sizeof *copy);
        v->u.members = copy;
    } else if (n) {
        ck__jval *copy = n <= SIZE_MAX / sizeof *copy ? jread_alloc(p->doc, n * sizeof *copy)
                                                      : NULL;
        if (!copy) return jread_fail(p, CK_ENOMEM, NULL, f.offset);
        for (size_t i = 0; i < n; i++) copy[i] = items[i].value;
        v->u.items = copy;
    }
    p->n_stack = f.base;
    return CK_OK;
}

/* Opens an array or object at p->pos. *closed is set when it is empty and already closed. */
static int jread_open(jread_parser *p, ck__jval *v, int *closed) {
    int object = p->s[p->pos] == '{';
    if (p->n_frames >= p->max_depth)
        return jread_fail(p, CK_ETOOBIG, "nesting deeper than the limit", p->pos);
    if (ck__grow((void **)&p->frames, &p->cap_frames, p->n_frames + 1, sizeof *p->frames))
        return jread_fail(p, CK_ENOMEM, NULL, p->pos);
    jread_frame *f = &p->frames[p->n_frames++];
    f->base = p->n_stack;
    f->offset = p->pos;
    f->object = object;
    p->pos++;
    jread_ws(p);
    *closed = 0;
    if (p->pos < p->len && p->s[p->pos] == (object ? '}' : ']')) {
        p->pos++;
        *closed = 1;
        return jread_close(p, v);
    }
    return object ? jread_key(p) : CK_OK;
}

/* The parse: a loop that reads one value, then climbs out of every container the value
 * completes, until the top-level value is done. */
static int jread_run(jread_parser *p) {
    ck__jval v;
    for (;;) {
        int rc, closed = 0;
        jread_ws(p);
        if (p->pos >= p->len) return jread_fail(p, CK_ESYNTAX, "unexpected end", p->pos);
        unsigned char c = p->s[p->pos];
        memset(&v, 0, sizeof v);
        if (c == '{' || c == '[') {
            rc = jread_open(p, &v, &closed);
            if (rc) return rc;
            if (!closed) continue;
        } else if (c == '"') {
            v.kind = CK__JSTRING;
            v.offset = p->pos;
            rc = jread_string(p, &v.u.str, &v.len);
        } else if (c == '-' || jread_digit(c)) {
            rc = jread_number(p, &v);
        } else {
            rc = jread_literal(p, &v);
        }
        if (rc) return rc;
        for (;;) {
            if (p->n_frames == 0) {
                p->doc->root = v;
                return CK_OK;
            }
            jread_frame *f = &p->frames[p->n_frames - 1];
            if (f->object) p->stack[p->n_stack - 1].value = v;
            else if ((rc = jread_push(p, NULL, 0, 0)) != CK_OK) return rc;
            else p->stack[p->n_stack - 1].value = v;
            jread_ws(p);
            if (p->pos >= p->len) return jread_fail(p, CK_ESYNTAX, "unexpected end", p->pos);
            c = p->s[p->pos];
            if (c == ',') {
                p->pos++;
                if (f->object && (rc = jread_key(p)) != CK_OK) return rc;
                break;
            }
            if (c != (f->object ? '}' : ']'))
                return jread_fail(p, CK_ESYNTAX,
                                  f->object ? "expected ',' or '}'" : "expected ',' or ']'",
                                  p->pos);
            p->pos++;
            if ((rc = jread_close(p, &v)) != CK_OK) return rc;
        }
    }
}

ck__jdoc *ck__jread(const char *text, size_t len, ck__jread_options opts, ck_error *err) {
    ck__error_clear(err);
    jread_parser p;
    memset(&p, 0, sizeof p);
    p.s = (const unsigned char *)(text ? text : "");
    p.len = text ? len : 0;
    p.flags = opts.flags;
    p.max_depth = opts.max_depth ? opts.max_depth : CK__JREAD_DEPTH;
    p.err = err;
    p.doc = ck__calloc(1, sizeof *p.doc);
    if (!p.doc) {
        jread_fail(&p, CK_ENOMEM, NULL, 0);
        return NULL;
    }
    if (p.len >= 3 && memcmp(p.s, "\xef\xbb\xbf", 3) == 0) p.pos = 3;
    int rc = jread_run(&p);
    if (rc == CK_OK) {
        p.doc->end = p.pos;
        jread_ws(&p);
        if (p.pos < p.len && !(p.flags & CK__JREAD_TRAILING))
            rc = jread_fail(&p, CK_ESYNTAX, "content after the JSON value", p.pos);
    }
    ck__free(p.stack);
    ck__free(p.frames);
    if (rc != CK_OK) {
        ck__jdoc_free(p.doc);
        return NULL;
    }
    return p.doc;
}

/* ---- accessors --------------------------------------------------------------------------- */

const ck__jval *ck__jdoc_root(const ck__jdoc *doc) { return doc ? &doc->root : NULL; }

size_t ck__jdoc_end(const ck__jdoc *doc) { return doc ? doc->end : 0; }

int ck__jis(const ck__jval *v, ck__jkind kind) { return v && v->kind == kind; }

const char *ck__jstr(const ck__jval *v, size_t *len) {
    if (!ck__jis(v, CK__JSTRING)) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = v->len;
    return v->u.str;
}

size_t ck__jcount(const ck__jval *v) {
    return v && (v->kind == CK__JARRAY || v->kind == CK__JOBJECT) ? v->len : 0;
}

const ck__jval *ck__jat(const ck__jval *array, size_t i) {
    return ck__jis(array, CK__JARRAY) && i < array->len ? &array->u.items[i] : NULL;
}

const ck__jmember *ck__jmember_at(const ck__jval *object, size_t i) {
    return ck__jis(object, CK__JOBJECT) && i < object->len ? &object->u.members[i] : NULL;
}

const ck__jval *ck__jget(const ck__jval *object, const char *key, size_t key_len) {
    if (!ck__jis(object, CK__JOBJECT) || (!key && key_len)) return NULL;
    for (size_t i = object->len; i-- > 0;) {
        const ck__jmember *m = &object->u.members[i];
        if (m->key_len == key_len && (key_len == 0 || memcmp(m->key, key, key_len) == 0))
            return &m->value;
    }
    return NULL;
}

const ck__jval *ck__jgets(const ck__jval *object, const char *key) {
    return key ? ck__jget(object, key, strlen(key)) : NULL;
}

int ck__jbool(const ck__jval *v, int *out) {
    if (!ck__jis(v, CK__JBOOL)) return 0;
    *out = v->len != 0;
    return 1;
}

int ck__jdouble(const ck__jval *v, double *out) {
    if (!ck__jis(v, CK__JNUMBER)) return 0;
    *out = v->num;
    return 1;
}

/* The magnitude of an integer literal (JSON syntax, no fraction or exponent) into *mag, and
 * whether it is negative. Returns 0 when the text is not such a literal or the magnitude
 * passes 2^64 - 1. */
static int jread_int_literal(const ck__jval *v, uint64_t *mag, int *neg) {
    const char *t = v->u.str;
    size_t n = v->len, k = 0;
    *neg = n && t[0] == '-';
    k = (size_t)*neg;
    if (k == n) return 0;
    uint64_t m = 0;
    for (; k < n; k++) {
        if (!jread_digit((unsigned char)t[k])) return 0;
        unsigned d = (unsigned)(t[k] - '0');
        if (m > (UINT64_MAX - d) / 10) return 0;
        m = m * 10 + d;
    }
    *mag = m;
    return 1;
}

/* Whether a number that is not an integer literal has an integral value that the double
 * holds: not when it is 0 only because a tiny literal (1e-400) underflowed. */
static int jread_integral(const ck__jval *v) {
    double d = v->num;
    if (!isfinite(d) || d != floor(d)) return 0;
    if (d != 0) return 1;
    for (size_t k = 0; k < v->len && v->u.str[k] != 'e' && v->u.str[k] != 'E'; k++)
        if (v->u.str[k] >= '1' && v->u.str[k] <= '9') return 0;
    return 1;
}

int ck__ju64(const ck__jval *v, uint64_t *out) {
    if (!ck__jis(v, CK__JNUMBER)) return 0;
    uint64_t mag;
    int neg;
    if (jread_int_literal(v, &mag, &neg)) {
        if (neg && mag) return 0;
        *out = neg ? 0 : mag;
        return 1;
    }
    /* 18446744073709551616.0 is 2^64: every double below it converts exactly. */
    double d = v->num;
    if (!jread_integral(v) || !(d >= 0 && d < 18446744073709551616.0)) return 0;
    *out = (uint64_t)d;
    return 1;
}

int ck__ji64(const ck__jval *v, int64_t *out) {
    if (!ck__jis(v, CK__JNUMBER)) return 0;
    uint64_t mag;
    int neg;
    if (jread_int_literal(v, &mag, &neg)) {
        if (!neg && mag > (uint64_t)INT64_MAX) return 0;
        if (neg && mag > (uint64_t)INT64_MAX + 1) return 0;
        /* -(INT64_MAX) - 1 spelled without overflowing. */
        *out = !neg ? (int64_t)mag : mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
        return 1;
    }
    double d = v->num;
    if (!jread_integral(v) || !(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
        return 0;
    *out = (int64_t)d;
    return 1;
}

/* Two values side by side, with a stack of pairs of containers, so that depth costs heap. */
typedef struct jread_pair {
    const ck__jval *a, *b;
    size_t next;
} jread_pair;

static int jread_same_scalar(const ck__jval *a, const ck__jval *b) {
    if (a->kind != b->kind || a->len != b->len) return 0;
    if (a->kind == CK__JSTRING || a->kind == CK__JNUMBER)
        return a->len == 0 || memcmp(a->u.str, b->u.str, a->len) == 0;
    return 1;
}

int ck__jequal(const ck__jval *a, const ck__jval *b) {
    if (!a || !b) return a == b ? 1 : 0;
    jread_pair *stack = NULL;
    size_t n = 0, cap = 0;
    int result = 1;
    const ck__jval *x = a, *y = b;
    for (;;) {
        if (x) {
            if (!jread_same_scalar(x, y)) {
                result = 0;
                break;
            }
            if ((x->kind == CK__JARRAY || x->kind == CK__JOBJECT) && x->len) {
                if (ck__grow((void **)&stack, &cap, n + 1, sizeof *stack)) {
                    result = -1;
                    break;
                }
                stack[n].a = x;
                stack[n].b = y;
                stack[n++].next = 0;
            }
            x = y = NULL;
        }
        if (n == 0) break;
        jread_pair *f = &stack[n - 1];
        if (f->next == f->a->len) {
            n--;
            continue;
        }
        size_t i = f->next++;
        if (f->a->kind == CK__JARRAY) {
            x = &f->a->u.items[i];
            y = &f->b->u.items[i];
        } else {
            const ck__jmember *ma = &f->a->u.members[i], *mb = &f->b->u.members[i];
            if (ma->key_len != mb->key_len ||
                (ma->key_len && memcmp(ma->key, mb->key, ma->key_len) != 0)) {
                result = 0;
                break;
            }
            x = &ma->value;
            y = &mb->value;
        }
    }
    ck__free(stack);
    return result;
}
