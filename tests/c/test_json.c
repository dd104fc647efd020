/* The JSON host: reading with errors that name the place, writing that keeps what it kept,
 * and the real transcripts of ../shared/corpus. */
#include <cJSON.h>

#include "util.h"

/* Reads `json` expecting failure with `code`; checks `where` (a substring of err.where). */
static void read_fails(const char *json, int code, const char *where, size_t index) {
    ck_error err;
    ck_history *h = ck_json_read(json, strlen(json), &err);
    OK(h == NULL);
    ck_history_free(h);
    INT_EQ(err.code, code);
    if (where) {
        OK(strstr(err.where, where) != NULL);
        if (!strstr(err.where, where)) fprintf(stderr, "    where = \"%s\"\n", err.where);
    }
    INT_EQ(err.index, index);
    OK(err.msg != NULL && err.msg[0] != '\0');
}

TEST(bad_input_names_the_place) {
    read_fails("[{\"role\":\"user\",\"content\":\"x\"", CK_ESYNTAX, NULL, CK_NONE);
    read_fails("", CK_ESYNTAX, NULL, CK_NONE);
    read_fails("42", CK_ETYPE, NULL, CK_NONE);
    read_fails("{\"model\":\"m\"}", CK_EMISSING, "messages", CK_NONE);
    read_fails("{\"messages\":{}}", CK_ETYPE, "messages", CK_NONE);
    read_fails("[{\"role\":\"user\",\"content\":\"a\"},7]", CK_ETYPE, "messages[1]", 1);
    read_fails("[{\"content\":\"a\"}]", CK_EMISSING, "messages[0].role", 0);
    read_fails("[{\"role\":5}]", CK_ETYPE, "messages[0].role", 0);
    read_fails("[{\"role\":\"user\",\"content\":5}]", CK_ETYPE, "messages[0].content", 0);
    read_fails("[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":1}]}]", CK_ETYPE,
               "messages[0].content[0].text", 0);
    read_fails("[{\"role\":\"user\",\"content\":[{\"text\":\"a\"}]}]", CK_EMISSING,
               "messages[0].content[0].type", 0);
    read_fails("[{\"role\":\"user\",\"content\":[3]}]", CK_ETYPE, "messages[0].content[0]", 0);
    read_fails("[{\"role\":\"tool\",\"content\":\"r\"}]", CK_EMISSING, "messages[0].tool_call_id",
               0);
    read_fails("[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\"}}]}]",
               CK_EMISSING, "messages[0].tool_calls[0].id", 0);
    read_fails("[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"a\",\"function\":{}}]}]",
               CK_EMISSING, "messages[0].tool_calls[0].function.name", 0);
    read_fails("[{\"role\":\"assistant\",\"tool_calls\":{}}]", CK_ETYPE, "messages[0].tool_calls",
               0);
    read_fails("[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"content\":\"x\"}]}]",
               CK_EMISSING, "messages[0].content[0].tool_use_id", 0);
    read_fails("[{\"role\":\"user\",\"content\":\"ok\"},{\"role\":\"user\",\"content\":\"\xff\"}]",
               CK_EUTF8, "messages[1].text", 1);
    read_fails("[{\"role\":\"user\",\"content\":\"\xed\xa0\x80\"}]", CK_EUTF8, NULL, 0);
    read_fails("[{\"role\":\"user\",\"content\":\"\xc0\xaf\"}]", CK_EUTF8, NULL, 0);
}

TEST(syntax_error_offset) {
    ck_error err;
    const char *j = "[{\"role\":\"user\", oops}]";
    OK(ck_json_read(j, strlen(j), &err) == NULL);
    INT_EQ(err.code, CK_ESYNTAX);
    OK(err.offset >= 16 && err.offset <= 18);
}

TEST(reads_shapes) {
    const char *j =
        "{\"model\":\"m\",\"system\":\"s\",\"messages\":["
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"},{\"type\":\"image\","
        "\"source\":{}}]},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"hmm\"},"
        "{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{\"a\":[1,2]}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t\","
        "\"is_error\":true,\"content\":[{\"type\":\"text\",\"text\":\"l1\"},{\"type\":\"text\","
        "\"text\":\"l2\"}]}]},"
        "{\"role\":\"critic\",\"content\":null}]}";
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    OK(h != NULL);
    if (!h) return;
    INT_EQ(ck_history_count(h), 4);
    ck_role role;
    uint32_t flags;
    const ck_part *p;
    size_t n;
    ck_history_get(h, 0, &role, &flags, &p, &n);
    INT_EQ(role, CK_ROLE_USER);
    INT_EQ(n, 2);
    INT_EQ(p[1].kind, CK_PART_IMAGE);
    INT_EQ(p[1].flags, CK_PART_ANTHROPIC);
    ck_history_get(h, 1, &role, &flags, &p, &n);
    INT_EQ(p[0].kind, CK_PART_OTHER);
    MEM_EQ(p[0].text, p[0].text_len, "hmm");
    INT_EQ(p[1].kind, CK_PART_TOOL_CALL);
    MEM_EQ(p[1].text, p[1].text_len, "{\"a\":[1,2]}");
    MEM_EQ(p[1].name, p[1].name_len, "n");
    ck_history_get(h, 2, &role, &flags, &p, &n);
    INT_EQ(p[0].kind, CK_PART_TOOL_RESULT);
    OK(p[0].flags & CK_PART_IS_ERROR);
    MEM_EQ(p[0].text, p[0].text_len, "l1\nl2");
    ck_history_get(h, 3, &role, &flags, &p, &n);
    INT_EQ(role, CK_ROLE_OTHER);
    INT_EQ(n, 0);
    ck_format f;
    INT_EQ(ck_history_format(h, CK_FORMAT_AUTO, &f, &err), CK_OK);
    INT_EQ(f, CK_FORMAT_ANTHROPIC);
    /* Writing an identity view gives back the document, wrapper fields included. */
    ck_view *v = NULL;
    INT_EQ(ck_repair_pairs(h, f, &v, &err), CK_OK);
    OK(ck_view_is_identity(v));
    char *out = ck_json_write(h, v, f, 0, &err);
    cJSON *a = cJSON_Parse(j), *b = out ? cJSON_Parse(out) : NULL;
    OK(b != NULL && cJSON_Compare(a, b, 1));
    cJSON_Delete(a);
    cJSON_Delete(b);
    ck_free(out);
    ck_view_free(v);
    ck_history_free(h);
}

TEST(edits_keep_unknown_fields) {
    const char *j = "[{\"role\":\"assistant\",\"name\":\"bot\",\"x_meta\":{\"k\":[1]},\"content\":\"c\","
                    "\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\",\"function\":{\"name\":\"f\","
                    "\"arguments\":\"{}\"}},{\"id\":\"a\",\"type\":\"function\",\"function\":{\"name\":"
                    "\"g\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"a\","
                    "\"content\":\"r\",\"extra\":1}]";
    char *out = repair_json(j, CK_FORMAT_AUTO, NULL);
    /* The second call under one id goes; a note with its arguments stays in its place. */
    STR_EQ(out, "[{\"role\":\"assistant\",\"name\":\"bot\",\"x_meta\":{\"k\":[1]},\"content\":"
                "[{\"type\":\"text\",\"text\":\"c\"},{\"type\":\"text\",\"text\":\"(tool call g "
                "removed by ctxkeel: its id was already used; its arguments were: {})\"}],"
                "\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\",\"function\":{\"name\":\"f\","
                "\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"a\",\"content\":"
                "\"r\",\"extra\":1}]");
    ck_free(out);
}

TEST(write_needs_a_json_history) {
    ck_history *h = ck_history_new(0);
    ck_view *v = NULL;
    ck_error err;
    INT_EQ(ck_repair_pairs(h, CK_FORMAT_OPENAI, &v, &err), CK_OK);
    OK(ck_json_write(h, v, CK_FORMAT_OPENAI, 0, &err) == NULL);
    INT_EQ(err.code, CK_EINVAL);
    ck_view_free(v);
    ck_history_free(h);
}

/* Drops every third tool message and moves one result to the end: repair must leave no
 * violation and change nothing else about user and assistant messages. */
static void corrupt_and_repair(const char *text, size_t len, const char *name) {
    cJSON *doc = cJSON_ParseWithLength(text, len);
    OK(doc != NULL);
    if (!doc) return;
    int n = cJSON_GetArraySize(doc), tools = 0, others_before = 0;
    for (int i = n - 1; i >= 0; i--) {
        cJSON *m = cJSON_GetArrayItem(doc, i);
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItem(m, "role"));
        if (role && strcmp(role, "tool") == 0 && ++tools % 3 == 0) cJSON_DeleteItemFromArray(doc, i);
    }
    n = cJSON_GetArraySize(doc);
    for (int i = 0; i < n; i++) {
        const char *role =
            cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(doc, i), "role"));
        if (role && strcmp(role, "tool") == 0) {
            cJSON_AddItemToArray(doc, cJSON_DetachItemFromArray(doc, i));
            break;
        }
    }
    for (int i = 0; i < n; i++) {
        const char *role =
            cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(doc, i), "role"));
        others_before += role && strcmp(role, "tool") != 0;
    }
    char *bad = cJSON_PrintUnformatted(doc);
    OK(count_issues(bad, CK_FORMAT_AUTO, -1) > 0);
    char *fixed = repair_json(bad, CK_FORMAT_AUTO, NULL);
    OK(fixed != NULL);
    if (fixed) {
        INT_EQ(count_issues(fixed, CK_FORMAT_AUTO, -1), 0);
        cJSON *out = cJSON_Parse(fixed);
        int others_after = 0, k = 0;
        for (int i = 0; i < cJSON_GetArraySize(out); i++) {
            cJSON *m = cJSON_GetArrayItem(out, i);
            const char *role = cJSON_GetStringValue(cJSON_GetObjectItem(m, "role"));
            if (!role || strcmp(role, "tool") == 0) continue;
            /* User and assistant messages in their original order, unchanged. */
            while (k < n) {
                cJSON *orig = cJSON_GetArrayItem(doc, k++);
                const char *r = cJSON_GetStringValue(cJSON_GetObjectItem(orig, "role"));
                if (r && strcmp(r, "tool") != 0) {
                    OK(cJSON_Compare(orig, m, 1));
                    break;
                }
            }
            others_after++;
        }
        INT_EQ(others_after, others_before);
        cJSON_Delete(out);
    }
    (void)name;
    cJSON_free(bad);
    ck_free(fixed);
    cJSON_Delete(doc);
}

static void check_corpus_file(void *ctx, const char *name, const char *text, size_t len) {
    (void)ctx;
    ck_error err;
    ck_history *h = ck_json_read(text, len, &err);
    OK(h != NULL);
    ck_pair_violation *v = NULL;
    size_t n = 99;
    INT_EQ(ck_check_pairs(h, CK_FORMAT_AUTO, &v, &n, &err), CK_OK);
    INT_EQ(n, 0);
    ck_free(v);
    OK(ck_estimate_history(h, CK_EST_CHARS4) > len / 8);
    ck_history_free(h);
    corrupt_and_repair(text, len, name);
}

TEST(corpus) { OK(h_each_corpus("corpus", check_corpus_file, NULL) != 0); }

HARNESS_MAIN(RUN(bad_input_names_the_place) RUN(syntax_error_offset) RUN(reads_shapes)
                 RUN(edits_keep_unknown_fields) RUN(write_needs_a_json_history) RUN(corpus))
