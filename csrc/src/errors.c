/* Filling ck_error, and UTF-8 validation for text that reaches the core unchecked. */
#include <stdio.h>
#include <string.h>

#include "./internal.h"

void ck__error_clear(ck_error *err) {
    if (!err) return;
    err->code = CK_OK;
    err->msg = ck_strerror(CK_OK);
    err->offset = 0;
    err->index = CK_NONE;
    err->where[0] = '\0';
}

int ck__fail(ck_error *err, int code, const char *msg, size_t index, const char *where, ...) {
    if (!err) return code;
    err->code = code;
    err->msg = msg ? msg : ck_strerror(code);
    err->offset = 0;
    err->index = index;
    err->where[0] = '\0';
    if (where) {
        va_list ap;
        va_start(ap, where);
        vsnprintf(err->where, sizeof err->where, where, ap);
        va_end(ap);
    }
    return code;
}

size_t ck__utf8_valid_prefix(const char *text, size_t len) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        /* ASCII dominates agent transcripts, so skip it eight bytes at a time. */
        while (i + 8 <= len) {
            uint64_t word;
            memcpy(&word, s + i, 8);
            if (word & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= len) break;
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            cp = c & 0x07;
        } else {
            return i;
        }
        if (len - i <= need) return i;
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((need == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (need == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return i;
        i += need + 1;
    }
    return len;
}
