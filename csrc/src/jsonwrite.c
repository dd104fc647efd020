/* The JSON writer (see json.h). Commas come from one flag: a value or a container's end sets
 * it, a container's start or a key clears it, so a writer needs no stack of its own. */
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "./alloc.h"
#include "./internal.h"
#include "./json.h"

/* ---- strings ----------------------------------------------------------------------------- */

/* The length of the invalid sequence at s (n >= 1 bytes, known not to start a valid
 * character): a lead byte and the continuation bytes that could still have completed it, the
 * "maximal subpart" that Unicode (and Python's "replace") turns into one U+FFFD. */
static size_t jwrite_bad_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t need;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) need = 2;
    else if (c >= 0xF0 && c <= 0xF4) need = 3;
    else return 1;
    if (c == 0xE0) lo = 0xA0;
    else if (c == 0xED) hi = 0x9F;
    else if (c == 0xF0) lo = 0x90;
    else if (c == 0xF4) hi = 0x8F;
    size_t k = 1;
    if (k < n && s[k] >= lo && s[k] <= hi) {
        k++;
        while (k <= need && k < n && (s[k] & 0xC0) == 0x80) k++;
    }
    return k;
}

static int jwrite_plain(unsigned char c) { return c >= 0x20 && c != '"' && c != '\\' && c != 0x7F; }

/* Appends valid UTF-8, escaping the quote, the backslash and the control bytes. */
static void jwrite_escape(ck__buf *b, const unsigned char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && jwrite_plain(s[run])) run++;
        if (run > i) ck__buf_add(b, (const char *)s + i, run - i);
        if (run == n) return;
        unsigned char c = s[run];
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        size_t len = 2;
        switch (c) {
            case '"': esc[1] = '"'; break;
            case '\\': esc[1] = '\\'; break;
            case '\b': esc[1] = 'b'; break;
            case '\f': esc[1] = 'f'; break;
            case '\n': esc[1] = 'n'; break;
            case '\r': esc[1] = 'r'; break;
            case '\t': esc[1] = 't'; break;
            default:
                esc[1] = 'u';
                esc[2] = '0';
                esc[3] = '0';
                esc[4] = hex[c >> 4];
                esc[5] = hex[c & 15];
                len = 6;
        }
        ck__buf_add(b, esc, len);
        i = run + 1;
    }
}

void ck__jw_quote(ck__buf *b, const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    if (!s) len = 0;
    ck__buf_addc(b, '"');
    size_t i = 0;
    while (i < len && !b->failed) {
        size_t ok = ck__utf8_valid_prefix((const char *)u + i, len - i);
        jwrite_escape(b, u + i, ok);
        i += ok;
        if (i < len) {
            ck__buf_add(b, "\xef\xbf\xbd", 3);
            i += jwrite_bad_len(u + i, len - i);
        }
    }
    ck__buf_addc(b, '"');
}

/* ---- structure --------------------------------------------------------------------------- */

void ck__jw_init(ck__jwriter *w, ck__buf *out, int pretty) {
    w->out = out;
    w->pretty = pretty != 0;
    w->depth = 0;
    w->need_comma = 0;
    w->after_key = 0;
}

static void jwrite_newline(ck__jwriter *w) {
    ck__buf_addc(w->out, '\n');
    for (size_t i = 0; i < w->depth && !w->out->failed; i++) ck__buf_add(w->out, "  ", 2);
}

/* What goes before a value or a key: nothing after a key, else the comma and, indented, the
 * line break. */
static void jwrite_before(ck__jwriter *w) {
    if (w->after_key) {
        w->after_key = 0;
        return;
    }
    if (w->need_comma) ck__buf_addc(w->out, ',');
    if (w->pretty && w->depth > 0) jwrite_newline(w);
}

static void jwrite_open(ck__jwriter *w, char c) {
    jwrite_before(w);
    ck__buf_addc(w->out, c);
    w->depth++;
    w->need_comma = 0;
}

static void jwrite_close(ck__jwriter *w, char c) {
    if (w->depth) w->depth--;
    /* need_comma is still set when the container holds something: close on a line of its
     * own then; an empty one stays "{}" or "[]". */
    if (w->pretty && w->need_comma) jwrite_newline(w);
    ck__buf_addc(w->out, c);
    w->need_comma = 1;
    w->after_key = 0;
}

void ck__jw_begin_object(ck__jwriter *w) { jwrite_open(w, '{'); }
void ck__jw_end_object(ck__jwriter *w) { jwrite_close(w, '}'); }
void ck__jw_begin_array(ck__jwriter *w) { jwrite_open(w, '['); }
void ck__jw_end_array(ck__jwriter *w) { jwrite_close(w, ']'); }

void ck__jw_key(ck__jwriter *w, const char *key, size_t len) {
    w->after_key = 0;
    jwrite_before(w);
    ck__jw_quote(w->out, key, len);
    ck__buf_add(w->out, ": ", w->pretty ? 2 : 1);
    w->need_comma = 0;
    w->after_key = 1;
}

void ck__jw_keys(ck__jwriter *w, const char *key) { ck__jw_key(w, key, key ? strlen(key) : 0); }

/* ---- scalars ----------------------------------------------------------------------------- */

static void jwrite_scalar(ck__jwriter *w, const char *text, size_t len) {
    jwrite_before(w);
    ck__buf_add(w->out, text, len);
    w->need_comma = 1;
}

void ck__jw_string(ck__jwriter *w, const char *s, size_t len) {
    jwrite_before(w);
    ck__jw_quote(w->out, s, len);
    w->need_comma = 1;
}

void ck__jw_strings(ck__jwriter *w, const char *s) { ck__jw_string(w, s, s ? strlen(s) : 0); }

/* The digits of v, written backwards from the end of `end`; returns where they start. */
static char *jwrite_digits(uint64_t v, char *end) {
    do *--end = (char)('0' + v % 10);
    while (v /= 10);
    return end;
}

void ck__jw_u64(ck__jwriter *w, uint64_t v) {
    char digits[24], *end = digits + sizeof digits, *at = jwrite_digits(v, end);
    jwrite_scalar(w, at, (size_t)(end - at));
}

void ck__jw_i64(ck__jwriter *w, int64_t v) {
    /* The magnitude in unsigned arithmetic, where -INT64_MIN is defined. */
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    char digits[24], *end = digits + sizeof digits, *at = jwrite_digits(mag, end);
    if (v < 0) *--at = '-';
    jwrite_scalar(w, at, (size_t)(end - at));
}

/* Formats v (see json.h) into `out` (room for 64 bytes); returns the length. */
static size_t jwrite_double_text(double v, char *out) {
    if (!isfinite(v)) {
        memcpy(out, "null", 5);
        return 4;
    }
    int n = snprintf(out, 64, "%1.15g", v);
    /* Read back under the same locale as it was printed: the point is the locale's here. */
    if (strtod(out, NULL) != v) n = snprintf(out, 64, "%1.17g", v);
    if (n < 0) n = 0;
    const char *point = localeconv()->decimal_point;
    size_t pl = point ? strlen(point) : 0;
    char *at = pl && strcmp(point, ".") != 0 ? strstr(out, point) : NULL;
    if (at) {
        *at = '.';
        memmove(at + 1, at + pl, strlen(at + pl) + 1);
        n -= (int)(pl - 1);
    }
    return (size_t)n;
}

void ck__jw_double(ck__jwriter *w, double v) {
    char text[64];
    size_t n = jwrite_double_text(v, text);
    jwrite_scalar(w, text, n);
}

void ck__jw_bool(ck__jwriter *w, int v) {
    if (v) jwrite_scalar(w, "true", 4);
    else jwrite_scalar(w, "false", 5);
}

void ck__jw_null(ck__jwriter *w) { jwrite_scalar(w, "null", 4); }

void ck__jw_raw(ck__jwriter *w, const char *json, size_t len) { jwrite_scalar(w, json, len); }

/* ---- a parsed value ---------------------------------------------------------------------- */

typedef struct jwrite_frame {
    const ck__jval *container;
    size_t next;
} jwrite_frame;

/* Walks the value with a stack of its own, so that depth costs heap, not C stack. */
void ck__jw_value(ck__jwriter *w, const ck__jval *v) {
    jwrite_frame *stack = NULL;
    size_t n = 0, cap = 0;
    const ck__jval *cur = v;
    if (!cur) ck__jw_null(w);
    while (!w->out->failed) {
        if (cur) {
            switch (cur->kind) {
                case CK__JNULL: ck__jw_null(w); break;
                case CK__JBOOL: ck__jw_bool(w, cur->len != 0); break;
                case CK__JNUMBER: ck__jw_raw(w, cur->u.str, cur->len); break;
                case CK__JSTRING: ck__jw_string(w, cur->u.str, cur->len); break;
                case CK__JARRAY:
                case CK__JOBJECT:
                    if (cur->kind == CK__JARRAY) ck__jw_begin_array(w);
                    else ck__jw_begin_object(w);
                    if (ck__grow((void **)&stack, &cap, n + 1, sizeof *stack)) {
                        w->out->failed = 1;
                        break;
                    }
                    stack[n].container = cur;
                    stack[n++].next = 0;
                    break;
            }
            cur = NULL;
        }
        if (n == 0) break;
        jwrite_frame *f = &stack[n - 1];
        const ck__jval *c = f->container;
        if (f->next < c->len) {
            if (c->kind == CK__JOBJECT) {
                const ck__jmember *m = &c->u.members[f->next];
                ck__jw_key(w, m->key, m->key_len);
                cur = &m->value;
            } else {
                cur = &c->u.items[f->next];
            }
            f->next++;
        } else {
            if (c->kind == CK__JARRAY) ck__jw_end_array(w);
            else ck__jw_end_object(w);
            n--;
        }
    }
    ck__free(stack);
}
