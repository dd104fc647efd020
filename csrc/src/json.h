/* Private: the core's JSON layer (L0), a reader and a writer that know every string's length.
 *
 * The reader parses UTF-8 JSON text of a given length (no terminator needed) into an immutable
 * tree, a ck__jdoc, whose every node, string and array lives in one arena released with
 * ck__jdoc_free(). Strings and keys are decoded (escapes, surrogate pairs) and keep NUL bytes:
 * their length is authoritative, and each also ends in a NUL that is not part of it. Numbers
 * keep their text as written beside a double, and the integer accessors say exactly when a
 * number is an integer that fits, so no caller casts an out-of-range double. Arrays index in
 * O(1); objects keep their members in document order, duplicates included. Time and memory
 * are linear in the input; nesting is iterative, so no input can exhaust the C stack.
 *
 * Decisions a caller may rely on:
 *   - a lone surrogate escape (\uD800 without its pair, or a stray \uDC00) decodes to U+FFFD:
 *     JSON's grammar allows it (JavaScript's JSON.stringify writes it), and UTF-8 cannot hold
 *     it, so it is replaced rather than refused;
 *   - a UTF-8 byte-order mark before the value is skipped;
 *   - whitespace is JSON's four characters only;
 *   - ck__jget() returns the LAST member with the key, as JSON.parse, Python's json and the
 *     providers do; CK__JREAD_NO_DUPLICATES refuses such input instead.
 *
 * The writer appends compact or indented JSON to a ck__buf, putting commas in by itself. It
 * escapes '"', '\' and every control byte (NUL included) and replaces invalid UTF-8 with
 * U+FFFD, so whatever bytes it is given, its output is valid JSON and valid UTF-8. A failed
 * append marks the buffer failed (see buf.h); check it once at the end.
 *
 * Names: reader statics are jread_*, writer statics jwrite_*. Thread safety: a document is
 * read-only once made and may be read from several threads; a writer is one thread's. */
#ifndef CK_JSON_H_
#define CK_JSON_H_

#include <stddef.h>
#include <stdint.h>

#include "ctxkeel.h"

#include "./buf.h"

/* ------------------------------------------------------------------------------------------ */
/* Reader                                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef enum ck__jkind {
    CK__JNULL = 0,
    CK__JBOOL = 1,
    CK__JNUMBER = 2,
    CK__JSTRING = 3,
    CK__JARRAY = 4,
    CK__JOBJECT = 5,
} ck__jkind;

typedef struct ck__jval ck__jval;
typedef struct ck__jmember ck__jmember;

/* One value. Read it through the accessors below; the fields are documented so that a loop
 * over a large array or object need not call a function per item.
 *   kind    the kind;
 *   len     STRING: bytes of the decoded text; NUMBER: bytes of its text as written;
 *           ARRAY: items; OBJECT: members; BOOL: 1 for true, 0 for false; NULL: 0;
 *   offset  byte offset of the value's first character in the text given to ck__jread();
 *   u       STRING and NUMBER: u.str; ARRAY: u.items; OBJECT: u.members (NULL when empty);
 *   num     NUMBER: the nearest double (±HUGE_VAL past its range); 0 for the others. */
struct ck__jval {
    ck__jkind kind;
    size_t len;
    size_t offset;
    union {
        const char *str;
        const ck__jval *items;
        const ck__jmember *members;
    } u;
    double num;
};

/* A member of an object: its decoded key (key_len bytes, NUL bytes kept), the offset of the
 * key's opening quote, and the value. */
struct ck__jmember {
    const char *key;
    size_t key_len;
    size_t key_offset;
    ck__jval value;
};

/* A parsed document. Opaque. */
typedef struct ck__jdoc ck__jdoc;

/* ck__jread_options.flags */
#define CK__JREAD_NO_DUPLICATES (1u << 0) /* refuse an object with a repeated key */
#define CK__JREAD_TRAILING (1u << 1)      /* accept text after the value (see ck__jdoc_end) */
#define CK__JREAD_ANY_BYTES (1u << 2)     /* keep invalid UTF-8 in strings as it is */

/* The nesting limit when ck__jread_options.max_depth is 0. */
#define CK__JREAD_DEPTH 1000

/* Options of ck__jread(). Zero-initialized means: reject trailing content, reject invalid
 * UTF-8 in strings, allow duplicate keys, nesting up to CK__JREAD_DEPTH. */
typedef struct ck__jread_options {
    uint32_t flags;   /* CK__JREAD_* */
    size_t max_depth; /* arrays and objects nested deeper than this fail; 0: CK__JREAD_DEPTH */
} ck__jread_options;

/*
 * Parses `len` bytes of `text` (not NUL-terminated; NULL allowed when len is 0). The text is
 * not kept: every string of the result is a copy. On failure returns NULL and fills `err`
 * (NULL allowed) with a static msg and err->offset, the byte offset of the problem:
 *   CK_ESYNTAX  malformed JSON, trailing content, or (with CK__JREAD_NO_DUPLICATES) a repeated
 *               key, the offset then being that of the repeating key;
 *   CK_EUTF8    invalid UTF-8 inside a string (unless CK__JREAD_ANY_BYTES);
 *   CK_ETOOBIG  nesting deeper than the limit (the offset of the first bracket too many);
 *   CK_ENOMEM.
 * Caller owns the result; release it with ck__jdoc_free().
 */
ck__jdoc *ck__jread(const char *text, size_t len, ck__jread_options opts, ck_error *err);

/* Releases a document and every value in it. NULL is a no-op. */
void ck__jdoc_free(ck__jdoc *doc);

/* The top-level value. Borrowed from `doc`; valid until it is freed. */
const ck__jval *ck__jdoc_root(const ck__jdoc *doc);

/* The offset just past the top-level value: with CK__JREAD_TRAILING, where the rest begins. */
size_t ck__jdoc_end(const ck__jdoc *doc);

/* Every accessor takes NULL and a value of the wrong kind, and then answers "nothing" (NULL,
 * 0), so that lookups chain: ck__jget(ck__jget(root, "usage", 5), "input_tokens", 12). What
 * they return is borrowed from the document; valid until it is freed. */

/* True (1) when `v` is not NULL and of `kind`. */
int ck__jis(const ck__jval *v, ck__jkind kind);

/* A string's decoded text and length (`len` may be NULL), or NULL when `v` is no string. */
const char *ck__jstr(const ck__jval *v, size_t *len);

/* Items of an array or members of an object; 0 for anything else. */
size_t ck__jcount(const ck__jval *v);

/* Item `i` of an array, or NULL (not an array, or i out of range). */
const ck__jval *ck__jat(const ck__jval *array, size_t i);

/* Member `i` of an object in document order, or NULL. */
const ck__jmember *ck__jmember_at(const ck__jval *object, size_t i);

/* The value of the LAST member named `key` (key_len bytes, NUL bytes allowed), or NULL. A
 * linear scan: fine for the handful of keys callers look up; loop over the members to visit
 * them all. ck__jgets() takes a NUL-terminated key. */
const ck__jval *ck__jget(const ck__jval *object, const char *key, size_t key_len);
const ck__jval *ck__jgets(const ck__jval *object, const char *key);

/* A boolean's value into *out; returns 1, or 0 when `v` is no boolean (*out untouched). */
int ck__jbool(const ck__jval *v, int *out);

/* A number's double into *out (±HUGE_VAL for a literal beyond double's range, such as 1e400);
 * returns 1, or 0 when `v` is no number. */
int ck__jdouble(const ck__jval *v, double *out);

/* A number whose value is an integer in [0, UINT64_MAX] (ck__ju64) or [INT64_MIN, INT64_MAX]
 * (ck__ji64) into *out; returns 1, or 0 when `v` is no number or its value is not an integer
 * that fits (*out untouched). Integer literals are read digit by digit, so every value in
 * range is exact (18446744073709551615 included); "12.0" and "1e3" are integers too, read
 * from the double and range-checked before any conversion. */
int ck__ju64(const ck__jval *v, uint64_t *out);
int ck__ji64(const ck__jval *v, int64_t *out);

/* Whether two values are the same JSON: same kinds, strings and keys byte for byte, numbers
 * with the same text, members in the same order. Returns 1 or 0, or -1 when out of memory
 * (it walks nesting with a heap stack). Two NULLs are equal. */
int ck__jequal(const ck__jval *a, const ck__jval *b);

/* ------------------------------------------------------------------------------------------ */
/* Writer                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* A writer over a ck__buf. Fill it with ck__jw_init(); the fields are its own. One writer
 * writes one top-level value; keys go only inside objects, each followed by one value. */
typedef struct ck__jwriter {
    ck__buf *out;
    int pretty;
    size_t depth;
    int need_comma; /* an item was written at this level */
    int after_key;  /* a key was written; its value comes next */
} ck__jwriter;

/* Starts a writer appending to `out` (not cleared: the JSON follows what it holds). `pretty`
 * indents by two spaces and writes "key": value; otherwise the output has no whitespace. */
void ck__jw_init(ck__jwriter *w, ck__buf *out, int pretty);

void ck__jw_begin_object(ck__jwriter *w);
void ck__jw_end_object(ck__jwriter *w);
void ck__jw_begin_array(ck__jwriter *w);
void ck__jw_end_array(ck__jwriter *w);

/* A member's key (`len` bytes, escaped as a string is); its value is written next. _keys
 * takes a NUL-terminated key. */
void ck__jw_key(ck__jwriter *w, const char *key, size_t len);
void ck__jw_keys(ck__jwriter *w, const char *key);

/* A string value: `len` bytes of `s` (NULL allowed when len is 0), escaped. */
void ck__jw_string(ck__jwriter *w, const char *s, size_t len);
void ck__jw_strings(ck__jwriter *w, const char *s); /* NUL-terminated */

/* Integers as their decimal digits. */
void ck__jw_u64(ck__jwriter *w, uint64_t v);
void ck__jw_i64(ck__jwriter *w, int64_t v);

/* A double as %.15g, or %.17g when that does not read back as the same double ("3", "0.1",
 * "1e+15", "-0", "0.30000000000000004"), always with a '.' whatever the locale: a reader gets
 * the very value that was written (cJSON 1.7.15 accepted one ulp off, so a record's ratio
 * could differ from the result's). NaN and infinities are written as null. */
void ck__jw_double(ck__jwriter *w, double v);

void ck__jw_bool(ck__jwriter *w, int v);
void ck__jw_null(ck__jwriter *w);

/* `len` bytes of JSON text inserted as one value, unchecked: the caller vouches for it. */
void ck__jw_raw(ck__jwriter *w, const char *json, size_t len);

/* A value of a parsed document, with everything inside it: strings escaped anew, numbers as
 * their text as written. */
void ck__jw_value(ck__jwriter *w, const ck__jval *v);

/* Appends `len` bytes of `s` to `b` as a quoted JSON string, escaped as the writer does. */
void ck__jw_quote(ck__buf *b, const char *s, size_t len);

#endif
