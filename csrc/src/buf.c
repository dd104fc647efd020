/* Growable text buffer. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "./alloc.h"
#include "./buf.h"

void ck__buf_init(ck__buf *b) {
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}

void ck__buf_dispose(ck__buf *b) {
    ck__free(b->data);
    ck__buf_init(b);
}

static int reserve(ck__buf *b, size_t more) {
    if (b->failed) return -1;
    if (more > (size_t)-1 - b->len - 1 || ck__grow((void **)&b->data, &b->cap, b->len + more + 1, 1)) {
        b->failed = 1;
        return -1;
    }
    return 0;
}

void ck__buf_add(ck__buf *b, const char *s, size_t len) {
    if (reserve(b, len)) return;
    if (len) memcpy(b->data + b->len, s, len);
    b->len += len;
    b->data[b->len] = '\0';
}

void ck__buf_adds(ck__buf *b, const char *s) { ck__buf_add(b, s, strlen(s)); }

void ck__buf_addc(ck__buf *b, char c) { ck__buf_add(b, &c, 1); }

void ck__buf_printf(ck__buf *b, const char *fmt, ...) {
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        ck__buf_add(b, small, (size_t)n);
        return;
    }
    if (reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *ck__buf_take(ck__buf *b, size_t *len) {
    if (b->failed) {
        ck__buf_dispose(b);
        return NULL;
    }
    if (!b->data && reserve(b, 0) == 0) b->data[0] = '\0';
    if (b->failed) {
        ck__buf_dispose(b);
        return NULL;
    }
    char *out = b->data;
    if (len) *len = b->len;
    ck__buf_init(b);
    return out;
}

void ck__buf_add_inline(ck__buf *b, const char *s, size_t len, size_t max) {
    size_t n = len <= max ? len : max;
    /* Back off a cut UTF-8 sequence: no continuation byte may start what is left out. */
    while (n < len && n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
    if (reserve(b, n + 3)) return;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        b->data[b->len++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    if (n < len) {
        memcpy(b->data + b->len, "...", 3);
        b->len += 3;
    }
    b->data[b->len] = '\0';
}
