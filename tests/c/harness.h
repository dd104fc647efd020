/* A small test harness: checks that count passes and failures, a counting allocator that
 * fails a test on any outstanding allocation, and a mode that fails the Nth allocation so
 * error paths run through every allocation site.
 *
 *   TEST(name) { OK(x); INT_EQ(a, b); STR_EQ(s, "x"); MEM_EQ(p, len, "x"); }
 *   HARNESS_MAIN(RUN(name) RUN(other))
 *
 * FAIL_EACH_ALLOC(body) runs `body` (a block that must clean up after itself whatever fails)
 * once per allocation site, failing that allocation, and checks it leaks nothing. */
#ifndef CK_TEST_HARNESS_H_
#define CK_TEST_HARNESS_H_

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "ctxkeel.h"

static int h_pass, h_fail;
static const char *h_test = "";
static long h_live;          /* allocations outstanding */
static long h_count;         /* allocations made since the counter was reset */
static long h_fail_at = -1;  /* fail the allocation with this number (0-based), or -1 */

static void *h_malloc(size_t n) {
    if (h_fail_at >= 0 && h_count++ == h_fail_at) return NULL;
    void *p = malloc(n ? n : 1);
    if (p) h_live++;
    return p;
}
static void *h_calloc(size_t c, size_t n) {
    if (h_fail_at >= 0 && h_count++ == h_fail_at) return NULL;
    void *p = calloc(c ? c : 1, n ? n : 1);
    if (p) h_live++;
    return p;
}
static void *h_realloc(void *old, size_t n) {
    if (h_fail_at >= 0 && h_count++ == h_fail_at) return NULL;
    void *p = realloc(old, n ? n : 1);
    if (p && !old) h_live++;
    return p;
}
static void h_free(void *p) {
    if (p) h_live--;
    free(p);
}

#define H_REPORT(cond_text)                                                                    \
    do {                                                                                       \
        h_fail++;                                                                              \
        fprintf(stderr, "FAIL %s (%s:%d): %s\n", h_test, __FILE__, __LINE__, cond_text);       \
    } while (0)

#define OK(cond)                                                                               \
    do {                                                                                       \
        if (cond) h_pass++;                                                                    \
        else H_REPORT(#cond);                                                                  \
    } while (0)

#define INT_EQ(a, b)                                                                           \
    do {                                                                                       \
        long long h_a = (long long)(a), h_b = (long long)(b);                                  \
        if (h_a == h_b) h_pass++;                                                              \
        else {                                                                                 \
            H_REPORT(#a " == " #b);                                                            \
            fprintf(stderr, "    got %lld, expected %lld\n", h_a, h_b);                        \
        }                                                                                      \
    } while (0)

#define STR_EQ(a, b)                                                                           \
    do {                                                                                       \
        const char *h_a = (a), *h_b = (b);                                                     \
        if ((!h_a && !h_b) || (h_a && h_b && strcmp(h_a, h_b) == 0)) h_pass++;                 \
        else {                                                                                 \
            H_REPORT(#a " == " #b);                                                            \
            fprintf(stderr, "    got \"%s\", expected \"%s\"\n", h_a ? h_a : "(null)",           \
                    h_b ? h_b : "(null)");                                                     \
        }                                                                                      \
    } while (0)

#define MEM_EQ(ptr, len, str)                                                                  \
    do {                                                                                       \
        const char *h_p = (const char *)(ptr), *h_s = (str);                                   \
        size_t h_n = (len);                                                                    \
        if (h_p && h_n == strlen(h_s) && memcmp(h_p, h_s, h_n) == 0) h_pass++;                 \
        else {                                                                                 \
            H_REPORT(#ptr " == " #str);                                                        \
            fprintf(stderr, "    got \"%.*s\", expected \"%s\"\n", h_p ? (int)h_n : 6,          \
                    h_p ? h_p : "(null)", h_s);                                                \
        }                                                                                      \
    } while (0)

#define TEST(name) static void name(void)

/* Runs one test under the counting allocator and fails it on any leak. */
#define RUN(name)                                                                              \
    do {                                                                                       \
        h_test = #name;                                                                        \
        long h_before = h_live;                                                                \
        name();                                                                                \
        if (h_live != h_before) {                                                              \
            H_REPORT("no allocation outstanding");                                             \
            fprintf(stderr, "    %ld allocation(s) leaked\n", h_live - h_before);              \
        }                                                                                      \
    } while (0);

#define FAIL_EACH_ALLOC(...)                                                                  \
    do {                                                                                       \
        for (long h_nth = 0;; h_nth++) {                                                           \
            long h_before = h_live;                                                            \
            h_count = 0;                                                                       \
            h_fail_at = h_nth;                                                                   \
            __VA_ARGS__;                                                                       \
            h_fail_at = -1;                                                                    \
            if (h_live != h_before) {                                                          \
                H_REPORT("no leak when an allocation fails");                                  \
                fprintf(stderr, "    allocation %ld failed, %ld leaked\n", h_nth,               \
                        h_live - h_before);                                                    \
                break;                                                                         \
            }                                                                                  \
            if (h_count <= h_nth) break; /* the body ran with no failure: every site done */     \
        }                                                                                      \
    } while (0)

#define HARNESS_MAIN(runs)                                                                     \
    int main(void) {                                                                           \
        ck_set_allocator(h_malloc, h_calloc, h_realloc, h_free);                               \
        /* cJSON's hooks are process-wide; a test process may take them to count its use. */  \
        cJSON_Hooks h_hooks = {h_malloc, h_free};                                              \
        cJSON_InitHooks(&h_hooks);                                                             \
        runs;                                                                                  \
        printf("%s: %d passed, %d failed\n", __FILE__, h_pass, h_fail);                        \
        return h_fail ? 1 : (h_pass ? 0 : 1);                                                  \
    }

/* Reads a whole file; NULL when it cannot be read. Caller frees with free(). */
static inline char *h_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) free(buf);
            buf = grown;
        }
    }
    fclose(f);
    if (buf) *len = n;
    return buf;
}

/* Calls fn(ctx, name, text, len) for every .json file of the corpus folder named by $CK_CORPUS
 * (the real transcripts of ../shared/corpus). Returns the number of files read, or -1 after
 * printing that `test` was skipped when there is no corpus. */
typedef void (*h_corpus_fn)(void *ctx, const char *name, const char *text, size_t len);
static inline int h_each_corpus(const char *test, h_corpus_fn fn, void *ctx) {
    const char *dir = getenv("CK_CORPUS");
    DIR *d = dir ? opendir(dir) : NULL;
    if (!d) {
        printf("%s: skipped (no CK_CORPUS folder)\n", test);
        return -1;
    }
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name), len = 0;
        if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *text = h_read_file(path, &len);
        if (!text) {
            H_REPORT("corpus file readable");
            continue;
        }
        files++;
        fn(ctx, e->d_name, text, len);
        free(text);
    }
    closedir(d);
    return files;
}

#endif
