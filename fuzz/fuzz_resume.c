/* libFuzzer target: resume from a hostile audit log. The input is written as the log of
 * session "fz" in a store whose audit key is fixed (so the seeds, real logs made with that key
 * by tools/fuzz_resume_seeds.py, carry valid MACs and mutations reach past the MAC check); a
 * compactor is made on it, which resumes from the log, and compacts a fixed history that the
 * seeds' records cover. What must hold: making the compactor never fails on the log's
 * content (a record it cannot trust starts the session afresh); the compaction succeeds, its
 * view keeps every tool-call pair and is never larger than what it was given. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctxkeel.h"
#include "fuzz_store.h"

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) __builtin_trap();                                                         \
    } while (0)

int ck__history_from_view(const ck_view *v, const ck_history *src, ck_history **out);

/* The history the seeds were made on (tools/fuzz_resume_seeds.py has the same). */
static const char HISTORY[] =
    "[{\"role\":\"system\",\"content\":\"You are a coding agent.\"},"
    "{\"role\":\"user\",\"content\":\"Fix the parser. Never touch vendor/.\"},"
    "{\"role\":\"assistant\",\"content\":\"Reading it.\",\"tool_calls\":[{\"id\":\"c1\","
    "\"type\":\"function\",\"function\":{\"name\":\"read_file\","
    "\"arguments\":\"{\\\"path\\\":\\\"src/parser.c\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"int parse(void) { return 1; }\"},"
    "{\"role\":\"assistant\",\"content\":\"Running the tests.\",\"tool_calls\":[{\"id\":\"c2\","
    "\"type\":\"function\",\"function\":{\"name\":\"bash\","
    "\"arguments\":\"{\\\"cmd\\\":\\\"make test\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":\"FAIL test_parse: expected 2\"},"
    "{\"role\":\"assistant\",\"content\":\"The parser returns 1; it should return 2.\"},"
    "{\"role\":\"user\",\"content\":\"Go ahead and fix it.\"}]";

/* Writes `len` bytes to `dir`/`name`, replacing it. */
static void put(const char *dir, const char *name, const void *data, size_t len) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        REQUIRE(n > 0);
        p += n;
        len -= (size_t)n;
    }
    close(fd);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    static ck_history *h;
    ck_error err;
    if (!h) {
        h = ck_json_read(HISTORY, sizeof HISTORY - 1, &err);
        REQUIRE(h != NULL);
    }
    const char *store = fuzz_store("resume");
    char logs[512];
    snprintf(logs, sizeof logs, "%s/compactions", store);
    mkdir(logs, 0700);
    static const unsigned char key[32] = "ctxkeel-fuzz-resume-fixed-key-32";
    put(logs, ".key", key, sizeof key);
    put(logs, "fz.jsonl", data, size);
    ck_compactor_options o;
    memset(&o, 0, sizeof o);
    o.context_window = 160;
    o.store_dir = store;
    o.session_id = "fz";
    ck_compactor *k = ck_compactor_new(&o, &err);
    REQUIRE(k != NULL);
    ck_compaction *c = NULL;
    int rc = ck_compactor_compact(k, h, 0, NULL, NULL, &c, &err);
    /* The one failure a history this size may meet: a window its pinned part cannot share
     * with a resumed checkpoint; never an input error, since the history is valid. */
    REQUIRE(rc == CK_OK || rc == CK_EOVERFLOW || rc == CK_EIO);
    if (rc == CK_OK) {
        REQUIRE(ck_compaction_tokens_after(c) <= ck_compaction_tokens_before(c) ||
                ck_compaction_tier(c) == CK_TIER_NONE);
        ck_history *mat = NULL;
        REQUIRE(ck__history_from_view(ck_compaction_view(c), h, &mat) == CK_OK);
        ck_pair_violation *v = NULL;
        size_t n = 0;
        REQUIRE(ck_check_pairs(mat, CK_FORMAT_AUTO, &v, &n, &err) == CK_OK && n == 0);
        ck_free(v);
        ck_history_free(mat);
        ck_compaction_free(c);
    }
    ck_compactor_free(k);
    return 0;
}
