/* Private: a growable byte buffer for building text. */
#ifndef CK_BUF_H_
#define CK_BUF_H_

#include <stddef.h>

/* Once an append fails, `failed` stays set and later appends do nothing, so a builder can run
 * to the end and check once. `data` is always NUL-terminated when not NULL. */
typedef struct ck__buf {
    char *data;
    size_t len, cap;
    int failed;
} ck__buf;

void ck__buf_init(ck__buf *b);
void ck__buf_dispose(ck__buf *b);
void ck__buf_add(ck__buf *b, const char *s, size_t len);
void ck__buf_adds(ck__buf *b, const char *s); /* NUL-terminated */
void ck__buf_addc(ck__buf *b, char c);
void ck__buf_printf(ck__buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Appends a string the caller chose (an id, a tool name) so that it stays on one line: at most
 * `max` bytes (cut on a UTF-8 boundary, then "..."), control bytes as '?'. */
void ck__buf_add_inline(ck__buf *b, const char *s, size_t len, size_t max);
/* Hands the text to the caller (release with ck__free) and resets the buffer; NULL when an
 * append failed (the buffer is freed then). */
char *ck__buf_take(ck__buf *b, size_t *len);

#endif
