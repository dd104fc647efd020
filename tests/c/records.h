/* Sessions whose audit records live in an evidence backend (store.h): an agent session that a
 * compactor folds with one summary, the summarizer that counts its calls, and the checks that
 * test_records.c (an in-memory backend) and test_s3.c (SeaweedFS) share: the records listed
 * under a session's prefix, each seq once and each record a JSON object. */
#ifndef CK_TEST_RECORDS_H_
#define CK_TEST_RECORDS_H_

#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* An OpenAI message list: a system prompt, a task, then `turns` turns of a call and its
 * output, every output `out_bytes` long (distinct per turn and per `salt`). Caller frees. */
static char *rec_session(int turns, size_t out_bytes, int salt) {
    size_t cap = 1024 + (size_t)turns * (400 + out_bytes);
    char *j = malloc(cap);
    size_t at = (size_t)snprintf(j, cap,
                                 "[{\"role\":\"system\",\"content\":\"You are a coding agent.\"},"
                                 "{\"role\":\"user\",\"content\":\"Fix the parser test.\"}");
    for (int t = 0; t < turns; t++) {
        at += (size_t)snprintf(j + at, cap - at,
                               ",{\"role\":\"assistant\",\"content\":\"Step %d.\",\"tool_calls\":"
                               "[{\"id\":\"call_%d_%d\",\"type\":\"function\",\"function\":"
                               "{\"name\":\"bash\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\","
                               "\"tool_call_id\":\"call_%d_%d\",\"content\":\"",
                               t, salt, t, salt, t);
        for (size_t i = 0; i < out_bytes; i++)
            j[at++] = i % 50 == 49 ? ' ' : (char)('a' + (i * 7 + (size_t)t + (size_t)salt) % 26);
        at += (size_t)snprintf(j + at, cap - at, " error: test_parse failed\"}");
    }
    snprintf(j + at, cap - at, "]");
    return j;
}

typedef struct rec_summarizer {
    int calls;
} rec_summarizer;

static int rec_summarize(void *ctx, const ck_summary_request *req, ck_compaction *c) {
    (void)req;
    ((rec_summarizer *)ctx)->calls++;
    static const char reply[] = "## User Intent\nFix the parser test.\n## Execution Progress\n"
                                "Ran the tests.\n## Next Steps\nRead src/parser.c.\n"
                                "## Summary\nStill failing.";
    return ck_compaction_set_summary(c, reply, sizeof reply - 1);
}

/* Options for `session` over `backend`, with a window that puts rec_session(30, 300, .)
 * into the soft tier. Local files (none expected) would go under `dir`. */
static ck_compactor_options rec_options(const ck_evidence_backend *backend, const char *session,
                                        const char *dir) {
    ck_compactor_options o;
    memset(&o, 0, sizeof o);
    o.context_window = 3500;
    o.estimator = CK_EST_CHARS4;
    o.keep_tail = 4;
    o.summary_max_tokens = 300;
    o.session_id = session;
    o.store_dir = dir;
    o.backend = backend;
    return o;
}

/* Compacts `json` on `k`; the view's JSON text (ck_free), or NULL. *record gets a copy of the
 * record (free(); NULL when none) when record is not NULL. */
static char *rec_compact(ck_compactor *k, const char *json, rec_summarizer *s, char **record,
                         int *code) {
    ck_error err;
    ck_history *h = ck_json_read(json, strlen(json), &err);
    ck_compaction *c = NULL;
    char *out = NULL;
    int rc = h ? ck_compactor_compact(k, h, 0, rec_summarize, s, &c, &err) : CK_EINVAL;
    if (code) *code = rc;
    if (record) *record = NULL;
    if (rc == CK_OK) {
        out = ck_json_write(h, ck_compaction_view(c), CK_FORMAT_AUTO, 0, &err);
        size_t len;
        const char *rec = ck_compaction_record(c, &len);
        if (record && rec) *record = strndup(rec, len);
    } else if (record) {
        *record = strdup(err.where);
    }
    ck_compaction_free(c);
    ck_history_free(h);
    return out;
}

/* A session compacted twice on one compactor made from `o` (one summary call), then once on a
 * fresh one: no summary call there, and the view the first gave the second time. */
static void rec_check_resume(const ck_compactor_options *o, const char *json) {
    ck_error err;
    ck_compactor *k = ck_compactor_new(o, &err);
    OK(k != NULL);
    if (!k) return;
    rec_summarizer s = {0};
    char *v1 = rec_compact(k, json, &s, NULL, NULL);
    char *v2 = rec_compact(k, json, &s, NULL, NULL);
    INT_EQ(s.calls, 1);
    ck_compactor_free(k);
    k = ck_compactor_new(o, &err);
    rec_summarizer s2 = {0};
    char *v3 = rec_compact(k, json, &s2, NULL, NULL);
    INT_EQ(s2.calls, 0);
    OK(v1 && v2 && v3 && strcmp(v2, v3) == 0);
    ck_compactor_free(k);
    ck_free(v1);
    ck_free(v2);
    ck_free(v3);
}

typedef struct rec_listing {
    char *keys[512];
    int n;
} rec_listing;

static int rec_on_key(void *ctx, const char *key, size_t len) {
    rec_listing *l = ctx;
    if (l->n < 512) l->keys[l->n++] = strndup(key, len);
    return 0;
}

static void rec_listing_free(rec_listing *l) {
    for (int i = 0; i < l->n; i++) free(l->keys[i]);
    l->n = 0;
}

/* Checks the records of `prefix` ("compactions/<session>/"): seqs 1..n each once, in order,
 * every one a JSON object whose "id" ends in ":<seq>". Returns n, or -1 (reported). */
static int rec_check_records(const ck_evidence_backend *be, const char *prefix) {
    rec_listing l = {{0}, 0};
    ck_error err;
    memset(&err, 0, sizeof err);
    INT_EQ(be->list(be->ctx, prefix, NULL, rec_on_key, &l, &err), CK_OK);
    int bad = 0;
    for (int i = 0; i < l.n && !bad; i++) {
        char want[300];
        snprintf(want, sizeof want, "%s%020d.json", prefix, i + 1);
        if (strcmp(l.keys[i], want) != 0) {
            fprintf(stderr, "  record %d is %s, not %s\n", i + 1, l.keys[i], want);
            bad = 1;
            break;
        }
        char *text = NULL;
        size_t len = 0;
        INT_EQ(be->get(be->ctx, l.keys[i], &text, &len, &err), CK_OK);
        cJSON *doc = text ? cJSON_ParseWithLength(text, len) : NULL;
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(doc, "id");
        char tail[32];
        snprintf(tail, sizeof tail, ":%d", i + 1);
        size_t tl = strlen(tail);
        if (!cJSON_IsString(id) || strlen(id->valuestring) < tl ||
            strcmp(id->valuestring + strlen(id->valuestring) - tl, tail) != 0) {
            fprintf(stderr, "  record %s does not parse or has the wrong id\n", l.keys[i]);
            bad = 1;
        }
        cJSON_Delete(doc);
        ck_free(text);
    }
    int n = bad ? -1 : l.n;
    OK(n >= 0);
    rec_listing_free(&l);
    return n;
}

#endif
