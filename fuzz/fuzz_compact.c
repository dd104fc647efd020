/* libFuzzer target: a whole compaction with a scripted summarizer. The first input byte picks
 * the window (as a fraction of the history's size) and the summarizer's behaviour; the rest is
 * a JSON message list in any dialect. Invariants: the view, written and read back, passes
 * check_pairs in that dialect, and is never larger; a quiet call after it (the common call,
 * ck_compactor_compact_quiet) that answers is at tier none, with no record, and is what the
 * full call gives. */
#include <stdlib.h>
#include <string.h>

#include "ctxkeel.h"
#include "fuzz_store.h"

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) __builtin_trap();                                                         \
    } while (0)

static int scripted(void *ctx, const ck_summary_request *req, ck_compaction *c) {
    unsigned mode = *(const unsigned char *)ctx;
    REQUIRE(req->prompt && req->prompt_len > 0);
    switch (mode % 4) {
        case 0: return ck_compaction_set_summary(c, "## Next Steps\nkeep going", 24);
        case 1: return ck_compaction_set_summary(c, req->prompt, req->prompt_len / 3);
        case 2: return ck_compaction_set_summary(c, "", 0);
        default: return CK_ESUMMARY;
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    if (size < 2) return 0;
    unsigned char mode = data[0];
    ck_error err;
    ck_history *h = ck_json_read((const char *)data + 1, size - 1, &err);
    if (!h) return 0;
    uint64_t total = ck_estimate_history(h, CK_EST_DEFAULT);
    ck_compactor_options o;
    memset(&o, 0, sizeof o);
    o.context_window = total * 100 / (40 + (mode % 70)) + 1;
    o.store_dir = fuzz_store("compact");
    o.keep_tail = 1 + mode % 5;
    o.summary_max_tokens = 256;
    ck_compactor *k = ck_compactor_new(&o, &err);
    REQUIRE(k != NULL);
    ck_compaction *c = NULL;
    int rc = ck_compactor_compact(k, h, 0, scripted, &mode, &c, &err);
    if (rc == CK_OK) {
        REQUIRE(ck_compaction_tokens_after(c) <= ck_compaction_tokens_before(c));
        /* The view as written, read back in the history's dialect (a history made part by
         * part knows only the OpenAI and Anthropic rules), passes that dialect's rules. */
        ck_format dialect = ck_history_dialect(h);
        char *json = ck_json_write(h, ck_compaction_view(c), dialect, 0, &err);
        REQUIRE(json != NULL);
        ck_history *mat = ck_json_read_as(json, strlen(json), dialect, &err);
        REQUIRE(mat != NULL);
        ck_pair_violation *v = NULL;
        size_t n = 0;
        REQUIRE(ck_check_pairs(mat, dialect, &v, &n, &err) == CK_OK && n == 0);
        ck_free(v);
        ck_history_free(mat);
        ck_free(json);
        ck_compaction_free(c);
        /* The next call on the same history, quietly: when it answers, it is at tier none with
         * no record, and the full call after it gives the same view. */
        c = NULL;
        rc = ck_compactor_compact_quiet(k, h, 0, &c, &err);
        REQUIRE(rc == CK_OK || rc == CK_EOVERFLOW);
        if (c) {
            REQUIRE(ck_compaction_tier(c) == CK_TIER_NONE);
            REQUIRE(ck_compaction_record(c, NULL) == NULL);
            ck_compaction *again = NULL;
            REQUIRE(ck_compactor_compact(k, h, 0, scripted, &mode, &again, &err) == CK_OK);
            REQUIRE(ck_compaction_tier(again) == CK_TIER_NONE);
            REQUIRE(ck_compaction_tokens_after(again) == ck_compaction_tokens_after(c));
            REQUIRE(ck_view_count(ck_compaction_view(again)) ==
                    ck_view_count(ck_compaction_view(c)));
            ck_compaction_free(again);
            ck_compaction_free(c);
        }
    } else {
        /* A window the pinned messages cannot share with the smallest checkpoint is refused
         * (the bound holds; err.where says what they need), as is bad input. */
        REQUIRE(CK_IS_INPUT_ERROR(rc) || rc == CK_EOVERFLOW);
    }
    ck_compactor_free(k);
    ck_history_free(h);
    return 0;
}
