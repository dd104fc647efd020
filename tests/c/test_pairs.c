/* check_pairs and repair_pairs over both formats. */
#include "util.h"

#define A_CALL(id) "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"" id "\",\"type\":\"function\",\"function\":{\"name\":\"bash\",\"arguments\":\"{}\"}}]}"
#define A_CALL2(a, b) "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"" a "\",\"type\":\"function\",\"function\":{\"name\":\"bash\",\"arguments\":\"{}\"}},{\"id\":\"" b "\",\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]}"
#define T_RES(id, text) "{\"role\":\"tool\",\"tool_call_id\":\"" id "\",\"content\":\"" text "\"}"
#define U(text) "{\"role\":\"user\",\"content\":\"" text "\"}"
#define SYS "{\"role\":\"system\",\"content\":\"be brief\"}"

#define AN_CALL(id) "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"run\"},{\"type\":\"tool_use\",\"id\":\"" id "\",\"name\":\"bash\",\"input\":{\"cmd\":\"ls\"}}]}"
#define AN_RES(id, text) "{\"type\":\"tool_result\",\"tool_use_id\":\"" id "\",\"content\":\"" text "\"}"
#define AN_TEXT(text) "{\"type\":\"text\",\"text\":\"" text "\"}"
#define AN_USER(blocks) "{\"role\":\"user\",\"content\":[" blocks "]}"
#define AN_ASSIST(blocks) "{\"role\":\"assistant\",\"content\":[" blocks "]}"

/* After repair: no violation, and a second repair changes nothing. */
static void repaired_is_clean(const char *json, ck_format f) {
    int identity = -1;
    char *once = repair_json(json, f, &identity);
    OK(once != NULL);
    if (!once) return;
    INT_EQ(count_issues(once, f, -1), 0);
    char *twice = repair_json(once, f, &identity);
    OK(twice != NULL);
    INT_EQ(identity, 1);
    if (twice) STR_EQ(twice, once);
    ck_free(once);
    ck_free(twice);
}

TEST(valid_openai_is_clean_and_kept) {
    const char *j = "[" SYS "," U("hi") "," A_CALL2("a", "b") "," T_RES("b", "2") "," T_RES("a", "1")
                    "," U("ok") "]";
    INT_EQ(count_issues(j, CK_FORMAT_AUTO, -1), 0);
    int identity = 0;
    char *out = repair_json(j, CK_FORMAT_AUTO, &identity);
    INT_EQ(identity, 1);
    ck_free(out);
}

TEST(orphan_result) {
    const char *j = "[" U("hi") "," T_RES("x", "lost") "," U("again") "]";
    INT_EQ(count_issues(j, CK_FORMAT_OPENAI, CK_PAIR_ORPHAN_RESULT), 1);
    char *out = repair_json(j, CK_FORMAT_OPENAI, NULL);
    STR_EQ(out, "[" U("hi") "," U("again") "]");
    ck_free(out);
    repaired_is_clean(j, CK_FORMAT_OPENAI);
}

TEST(missing_result_gets_stub) {
    const char *j = "[" U("hi") "," A_CALL("a") "," U("next") "]";
    INT_EQ(count_issues(j, CK_FORMAT_AUTO, CK_PAIR_MISSING_RESULT), 1);
    char *out = repair_json(j, CK_FORMAT_AUTO, NULL);
    STR_EQ(out, "[" U("hi") "," A_CALL("a") ","
                "{\"role\":\"tool\",\"tool_call_id\":\"a\",\"content\":\"result unavailable: "
                "context was compacted\"}," U("next") "]");
    ck_free(out);
    repaired_is_clean(j, CK_FORMAT_AUTO);
}

TEST(not_adjacent_result_moves) {
    const char *j = "[" A_CALL("a") "," U("wait") "," T_RES("a", "done") "]";
    INT_EQ(count_issues(j, CK_FORMAT_AUTO, CK_PAIR_NOT_ADJACENT), 1);
    char *out = repair_json(j, CK_FORMAT_AUTO, NULL);
    STR_EQ(out, "[" A_CALL("a") "," T_RES("a", "done") "," U("wait") "]");
    ck_free(out);
    /* A result standing before its call moves behind it too. */
    const char *before = "[" T_RES("a", "early") "," A_CALL("a") "]";
    INT_EQ(count_issues(before, CK_FORMAT_AUTO, CK_PAIR_NOT_ADJACENT), 1);
    out = repair_json(before, CK_FORMAT_AUTO, NULL);
    STR_EQ(out, "[" A_CALL("a") "," T_RES("a", "early") "]");
    ck_free(out);
    repaired_is_clean(j, CK_FORMAT_AUTO);
}

TEST(duplicate_result_dropped) {
    const char *j = "[" A_CALL("a") "," T_RES("a", "1") "," T_RES("a", "2") "]";
    INT_EQ(count_issues(j, CK_FORMAT_AUTO, CK_PAIR_DUPLICATE_RESULT), 1);
    char *out = repair_json(j, CK_FORMAT_AUTO, NULL);
    STR_EQ(out, "[" A_CALL("a") "," T_RES("a", "1") "]");
    ck_free(out);
}

TEST(reused_ids_pair_turn_by_turn) {
    /* OpenAI: an agent that names every call "a" keeps every pair; each result answers the
     * newest call before it. */
    const char *j = "[" A_CALL("a") "," T_RES("a", "1") "," A_CALL("a") "," T_RES("a", "2") "]";
    INT_EQ(count_issues(j, CK_FORMAT_AUTO, -1), 0);
    int identity = 0;
    char *out = repair_json(j, CK_FORMAT_AUTO, &identity);
    OK(identity);
    ck_free(out);
    /* A result before every call of its id still finds that call (and is moved behind it). */
    const char *early = "[" T_RES("b", "0") "," A_CALL("b") "]";
    INT_EQ(count_issues(early, CK_FORMAT_AUTO, CK_PAIR_NOT_ADJACENT), 1);
    out = repair_json(early, CK_FORMAT_AUTO, NULL);
    STR_EQ(out, "[" A_CALL("b") "," T_RES("b", "0") "]");
    ck_free(out);
    repaired_is_clean(early, CK_FORMAT_AUTO);
}

TEST(duplicate_call_removed_and_message_kept) {
    /* Anthropic wants tool_use ids unique in the whole request: the second call goes, with a
     * note of what it was, and its result with it. */
    const char *j = "[" AN_ASSIST("{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"f\",\"input\":{}}")
                    "," AN_USER("{\"type\":\"tool_result\",\"tool_use_id\":\"a\",\"content\":\"1\"}")
                    "," AN_ASSIST("{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"g\",\"input\":{\"x\":2}}")
                    "," AN_USER("{\"type\":\"tool_result\",\"tool_use_id\":\"a\",\"content\":\"2\"}") "]";
    INT_EQ(count_issues(j, CK_FORMAT_AUTO, CK_PAIR_DUPLICATE_CALL), 1);
    INT_EQ(count_issues(j, CK_FORMAT_AUTO, CK_PAIR_DUPLICATE_RESULT), 1);
    char *out = repair_json(j, CK_FORMAT_AUTO, NULL);
    /* The second assistant message stays (turn order), a note in place of its call. */
    OK(out && strstr(out, "(tool call g removed by ctxkeel: its id was already used; its "
                          "arguments were: {\\\"x\\\":2})"));
    OK(out && !strstr(out, "\"content\":\"2\""));
    ck_free(out);
    repaired_is_clean(j, CK_FORMAT_AUTO);
}

TEST(empty_ids) {
    const char *j = "[" A_CALL("") "," T_RES("", "1") "," U("x") "]";
    INT_EQ(count_issues(j, CK_FORMAT_AUTO, CK_PAIR_EMPTY_ID), 2);
    char *out = repair_json(j, CK_FORMAT_AUTO, NULL);
    STR_EQ(out, "[{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"\"},"
                "{\"type\":\"text\",\"text\":\"(tool call bash removed by ctxkeel: its id was empty; "
                "its arguments were: {})\"}]}," U("x") "]");
    ck_free(out);
    /* An assistant message with nothing left keeps the note rather than vanishing. */
    const char *only = "[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"\",\"type\":\"function\","
                       "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]";
    out = repair_json(only, CK_FORMAT_AUTO, NULL);
    OK(out && strstr(out, "\"role\":\"assistant\"") && strstr(out, "removed by ctxkeel"));
    OK(out && !strstr(out, "tool_calls"));
    ck_free(out);
    repaired_is_clean(only, CK_FORMAT_AUTO);
}

TEST(misplaced_call_in_user_message) {
    const char *j = "[{\"role\":\"user\",\"content\":\"hi\",\"tool_calls\":[{\"id\":\"u\",\"type\":"
                    "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]";
    INT_EQ(count_issues(j, CK_FORMAT_AUTO, CK_PAIR_MISPLACED), 1);
    char *out = repair_json(j, CK_FORMAT_AUTO, NULL);
    STR_EQ(out, "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"},"
                "{\"type\":\"text\",\"text\":\"(tool call f removed by ctxkeel: it stood outside "
                "an assistant message; its arguments were: {})\"}]}]");
    ck_free(out);
    /* A user message whose only part is a misplaced call is kept, with a note. */
    const char *only = "[" AN_USER("{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"f\","
                       "\"input\":{}}") ",{\"role\":\"assistant\",\"content\":\"ok\"}]";
    INT_EQ(count_issues(only, CK_FORMAT_AUTO, CK_PAIR_MISPLACED), 1);
    out = repair_json(only, CK_FORMAT_AUTO, NULL);
    OK(out && strstr(out, "\"role\":\"user\"") && strstr(out, "removed by ctxkeel"));
    OK(out && strstr(out, "\"content\":\"ok\""));
    ck_free(out);
    repaired_is_clean(only, CK_FORMAT_AUTO);
}

/* Found by fuzzing: a tool message that also holds tool_calls loses both and must go, not
 * turn into a note that would stand as a result without a call. */
TEST(tool_message_with_calls) {
    const char *j = "[" U("hi") ",{\"role\":\"tool\",\"tool_call_id\":\"zz\",\"content\":\"x\","
                    "\"tool_calls\":[{\"id\":\"q\",\"function\":{\"name\":\"f\"}}]}]";
    INT_EQ(count_issues(j, CK_FORMAT_AUTO, -1), 2);
    char *out = repair_json(j, CK_FORMAT_AUTO, NULL);
    /* The call's note becomes a user message of its own. */
    STR_EQ(out, "[" U("hi") "," U("(tool call f removed by ctxkeel: it stood outside an "
                                   "assistant message; its arguments were: )") "]");
    ck_free(out);
}

TEST(parallel_results_stay_together_in_order) {
    /* b answered after an interruption; a answered in place. */
    const char *j = "[" A_CALL2("a", "b") "," T_RES("a", "1") "," U("hm") "," T_RES("b", "2") "]";
    INT_EQ(count_issues(j, CK_FORMAT_AUTO, -1), 1);
    char *out = repair_json(j, CK_FORMAT_AUTO, NULL);
    STR_EQ(out, "[" A_CALL2("a", "b") "," T_RES("a", "1") "," T_RES("b", "2") "," U("hm") "]");
    ck_free(out);
}

TEST(anthropic_valid_and_missing) {
    const char *ok = "[" AN_USER(AN_TEXT("task")) "," AN_CALL("t1") "," AN_USER(AN_RES("t1", "out") "," AN_TEXT("more")) "]";
    INT_EQ(count_issues(ok, CK_FORMAT_AUTO, -1), 0);
    int identity = 0;
    char *out = repair_json(ok, CK_FORMAT_AUTO, &identity);
    INT_EQ(identity, 1);
    ck_free(out);
    /* Missing: the stub goes first into the next user message. */
    const char *miss = "[" AN_USER(AN_TEXT("task")) "," AN_CALL("t1") "," AN_USER(AN_TEXT("well?")) "]";
    INT_EQ(count_issues(miss, CK_FORMAT_AUTO, CK_PAIR_MISSING_RESULT), 1);
    out = repair_json(miss, CK_FORMAT_AUTO, NULL);
    STR_EQ(out, "[" AN_USER(AN_TEXT("task")) "," AN_CALL("t1") "," AN_USER(AN_RES("t1", "result unavailable: context was compacted") "," AN_TEXT("well?")) "]");
    ck_free(out);
    /* Missing at the end: a new user message carries the stub. */
    const char *end = "[" AN_USER(AN_TEXT("task")) "," AN_CALL("t1") "]";
    out = repair_json(end, CK_FORMAT_AUTO, NULL);
    STR_EQ(out, "[" AN_USER(AN_TEXT("task")) "," AN_CALL("t1") "," AN_USER(AN_RES("t1", "result unavailable: context was compacted")) "]");
    ck_free(out);
    repaired_is_clean(miss, CK_FORMAT_AUTO);
    repaired_is_clean(end, CK_FORMAT_AUTO);
}

TEST(anthropic_order_and_moves) {
    const char *order = "[" AN_CALL("t1") "," AN_USER(AN_TEXT("note") "," AN_RES("t1", "out")) "]";
    INT_EQ(count_issues(order, CK_FORMAT_AUTO, CK_PAIR_RESULT_ORDER), 1);
    char *out = repair_json(order, CK_FORMAT_AUTO, NULL);
    STR_EQ(out, "[" AN_CALL("t1") "," AN_USER(AN_RES("t1", "out") "," AN_TEXT("note")) "]");
    ck_free(out);
    /* A result two messages late moves into the zone; its now-empty message goes. */
    const char *late = "[" AN_CALL("t1") "," AN_USER(AN_TEXT("hey")) ",{\"role\":\"assistant\",\"content\":\"hm\"}," AN_USER(AN_RES("t1", "out")) "]";
    INT_EQ(count_issues(late, CK_FORMAT_AUTO, CK_PAIR_NOT_ADJACENT), 1);
    out = repair_json(late, CK_FORMAT_AUTO, NULL);
    STR_EQ(out, "[" AN_CALL("t1") "," AN_USER(AN_RES("t1", "out") "," AN_TEXT("hey")) ",{\"role\":\"assistant\",\"content\":\"hm\"}]");
    ck_free(out);
    /* Orphans and misplaced results. */
    const char *orphan = "[" AN_USER(AN_RES("zz", "x") "," AN_TEXT("hi")) "]";
    INT_EQ(count_issues(orphan, CK_FORMAT_AUTO, CK_PAIR_ORPHAN_RESULT), 1);
    out = repair_json(orphan, CK_FORMAT_AUTO, NULL);
    STR_EQ(out, "[" AN_USER(AN_TEXT("hi")) "]");
    ck_free(out);
    repaired_is_clean(order, CK_FORMAT_AUTO);
    repaired_is_clean(late, CK_FORMAT_AUTO);
}

#define AN_IMG "{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"iVBORw0K\"}}"
#define AN_RES_IMG(id) "{\"type\":\"tool_result\",\"tool_use_id\":\"" id "\",\"content\":[" AN_TEXT("shot") "," AN_IMG "]}"

/* An image inside a tool result travels with it: moved with the result, dropped with an
 * orphan, never left behind as a block of its own. */
TEST(attached_items_go_with_their_result) {
    const char *late = "[" AN_CALL("t1") "," AN_USER(AN_TEXT("hey")) ",{\"role\":\"assistant\",\"content\":\"hm\"}," AN_USER(AN_RES_IMG("t1")) "]";
    INT_EQ(count_issues(late, CK_FORMAT_AUTO, CK_PAIR_NOT_ADJACENT), 1);
    INT_EQ(count_issues(late, CK_FORMAT_AUTO, -1), 1);
    char *out = repair_json(late, CK_FORMAT_AUTO, NULL);
    STR_EQ(out, "[" AN_CALL("t1") "," AN_USER(AN_RES_IMG("t1") "," AN_TEXT("hey")) ",{\"role\":\"assistant\",\"content\":\"hm\"}]");
    ck_free(out);
    repaired_is_clean(late, CK_FORMAT_AUTO);
    /* In place, with text after it: valid, nothing to report. */
    const char *kept = "[" AN_CALL("t1") "," AN_USER(AN_RES_IMG("t1") "," AN_TEXT("next")) "]";
    INT_EQ(count_issues(kept, CK_FORMAT_AUTO, -1), 0);
    const char *orphan = "[" AN_USER(AN_RES_IMG("zz")) "," AN_USER(AN_TEXT("hi")) "]";
    INT_EQ(count_issues(orphan, CK_FORMAT_AUTO, -1), 1);
    out = repair_json(orphan, CK_FORMAT_AUTO, NULL);
    STR_EQ(out, "[" AN_USER(AN_TEXT("hi")) "]");
    ck_free(out);
    /* Chat Completions: a tool message with an image part moves whole behind its call. */
    const char *oa_res = "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":[{\"type\":\"text\",\"text\":\"shot\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,iVBORw0K\"}}]}";
    char oa[2048];
    snprintf(oa, sizeof oa, "[%s,%s,%s]", A_CALL("c1"), U("wait"), oa_res);
    INT_EQ(count_issues(oa, CK_FORMAT_AUTO, CK_PAIR_NOT_ADJACENT), 1);
    out = repair_json(oa, CK_FORMAT_AUTO, NULL);
    char want[2048];
    snprintf(want, sizeof want, "[%s,%s,%s]", A_CALL("c1"), oa_res, U("wait"));
    STR_EQ(out, want);
    ck_free(out);
}

/* A call misplaced in the user message that holds its turn's results leaves its note there. */
TEST(misplaced_call_beside_results_leaves_a_note) {
    const char *j = "[" AN_USER(AN_TEXT("go")) "," AN_ASSIST("{\"type\":\"tool_use\",\"id\":\"d\",\"name\":\"bash\",\"input\":{}}") ","
                    AN_USER(AN_RES("d", "ok") ",{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"bash\",\"input\":{\"cmd\":\"ls\"}}") "]";
    INT_EQ(count_issues(j, CK_FORMAT_AUTO, CK_PAIR_MISPLACED), 1);
    char *out = repair_json(j, CK_FORMAT_AUTO, NULL);
    STR_EQ(out, "[" AN_USER(AN_TEXT("go")) "," AN_ASSIST("{\"type\":\"tool_use\",\"id\":\"d\",\"name\":\"bash\",\"input\":{}}") ","
                AN_USER(AN_RES("d", "ok") "," AN_TEXT("(tool call bash removed by ctxkeel: it stood outside an assistant message; its arguments were: {\\\"cmd\\\":\\\"ls\\\"})")) "]");
    ck_free(out);
    repaired_is_clean(j, CK_FORMAT_AUTO);
}

TEST(format_detection) {
    const char *mixed = "[" A_CALL("a") "," T_RES("a", "1") "," AN_CALL("t") "]";
    INT_EQ(count_issues(mixed, CK_FORMAT_AUTO, -1), -1000 + CK_EFORMAT);
    const char *an = "[" AN_CALL("t") "]";
    INT_EQ(count_issues(an, CK_FORMAT_OPENAI, -1), -1000 + CK_EFORMAT);
    /* The dialect is decided as the messages are read: a message of another one is named. */
    ck_error err;
    ck_history *h = ck_json_read(mixed, strlen(mixed), &err);
    OK(h == NULL);
    INT_EQ(err.code, CK_EFORMAT);
    INT_EQ(err.index, 2);
    OK(strstr(err.where, "messages[2] (anthropic, not openai)") != NULL);
    ck_format f;
    h = ck_json_read("[]", 2, &err);
    INT_EQ(ck_history_format(h, CK_FORMAT_AUTO, &f, &err), CK_OK);
    INT_EQ(f, CK_FORMAT_OPENAI);
    ck_history_free(h);
}

/* The core words every violation once, for both bindings: the id quoted as JSON quotes it,
 * cut at 64 bytes on a character boundary. */
TEST(violations_are_described_with_quoted_ids) {
    /* a tool result whose id holds a quote, a line break and a tab, then one of 70 bytes of
     * two-byte characters, both answering no call */
    char j[512];
    snprintf(j, sizeof j,
             "[" U("hi") ",{\"role\":\"tool\",\"tool_call_id\":\"a\\\"b\\n\\tc\","
             "\"content\":\"x\"},{\"role\":\"tool\",\"tool_call_id\":\"%s\",\"content\":\"y\"}]",
             "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
             "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
             "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
             "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9");
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    OK(h != NULL);
    ck_pair_violation *v = NULL;
    size_t n = 0;
    INT_EQ(ck_check_pairs(h, CK_FORMAT_OPENAI, &v, &n, &err), CK_OK);
    INT_EQ(n, 2);
    char *text = NULL;
    size_t len = 0;
    if (n == 2) {
        INT_EQ(ck_pair_violation_describe(h, &v[0], CK_FORMAT_OPENAI, &text, &len), CK_OK);
        STR_EQ(text, "messages[1]: tool result \"a\\\"b\\n\\tc\" answers no tool call");
        INT_EQ(len, strlen(text));
        ck_free(text);
        INT_EQ(ck_pair_violation_describe(h, &v[1], CK_FORMAT_OPENAI, &text, NULL), CK_OK);
        /* 64 bytes are 32 whole characters */
        OK(strstr(text, "\"\xc3\xa9") && strstr(text, "\xc3\xa9\" answers no tool call"));
        const char *q = strchr(text, '"');
        OK(q && strchr(q + 1, '"') - (q + 1) == 64);
        ck_free(text);
    }
    INT_EQ(ck_pair_violation_describe(NULL, NULL, CK_FORMAT_OPENAI, &text, NULL), CK_EINVAL);
    ck_free(v);
    ck_history_free(h);
}

TEST(issue_names_and_violation_fields) {
    STR_EQ(ck_pair_issue_name(CK_PAIR_ORPHAN_RESULT), "orphan_result");
    STR_EQ(ck_pair_issue_name(CK_PAIR_RESULT_ORDER), "result_order");
    STR_EQ(ck_pair_issue_name((ck_pair_issue)99), "unknown");
    const char *j = "[" U("hi") "," A_CALL("abc") "]";
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    ck_pair_violation *v = NULL;
    size_t n = 0;
    INT_EQ(ck_check_pairs(h, CK_FORMAT_AUTO, &v, &n, &err), CK_OK);
    INT_EQ(n, 1);
    if (n == 1) {
        INT_EQ(v[0].kind, CK_PAIR_MISSING_RESULT);
        INT_EQ(v[0].index, 1);
        INT_EQ(v[0].part, 1); /* content "" is part 0, the call part 1 */
        MEM_EQ(v[0].id, v[0].id_len, "abc");
    }
    ck_free(v);
    ck_history_free(h);
}

/* Every allocation in read, check, repair and write may fail without a leak or a crash. */
TEST(allocation_failures) {
    const char *json = "[" SYS "," A_CALL2("a", "b") "," U("x") "," T_RES("a", "1") "]";
    FAIL_EACH_ALLOC({
        char *out = repair_json(json, CK_FORMAT_AUTO, NULL);
        ck_free(out);
        (void)count_issues(json, CK_FORMAT_AUTO, -1);
    });
    const char *an = "[" AN_CALL("t1") "," AN_USER(AN_TEXT("note") "," AN_RES("t1", "out")) "]";
    FAIL_EACH_ALLOC({
        char *out = repair_json(an, CK_FORMAT_AUTO, NULL);
        ck_free(out);
    });
    OK(1);
}

/* Many ids in one history: the hash map grows and stays correct. */
TEST(many_calls) {
    size_t n = 3000;
    size_t cap = n * 200 + 16;
    char *j = malloc(cap);
    size_t at = 0;
    at += (size_t)snprintf(j + at, cap - at, "[");
    for (size_t i = 0; i < n; i++) {
        at += (size_t)snprintf(j + at, cap - at,
                               "%s{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c%zu\",\"function\""
                               ":{\"name\":\"f\",\"arguments\":\"\"}}]}",
                               i ? "," : "", i);
        if (i % 2 == 0)
            at += (size_t)snprintf(j + at, cap - at,
                                   ",{\"role\":\"tool\",\"tool_call_id\":\"c%zu\",\"content\":\"r\"}", i);
    }
    snprintf(j + at, cap - at, "]");
    INT_EQ(count_issues(j, CK_FORMAT_AUTO, CK_PAIR_MISSING_RESULT), (long)(n / 2));
    repaired_is_clean(j, CK_FORMAT_AUTO);
    free(j);
}

HARNESS_MAIN(RUN(valid_openai_is_clean_and_kept) RUN(orphan_result) RUN(missing_result_gets_stub)
                 RUN(not_adjacent_result_moves) RUN(duplicate_result_dropped) RUN(reused_ids_pair_turn_by_turn)
                     RUN(duplicate_call_removed_and_message_kept) RUN(empty_ids)
                         RUN(misplaced_call_in_user_message)
                             RUN(tool_message_with_calls) RUN(parallel_results_stay_together_in_order)
                                 RUN(anthropic_valid_and_missing) RUN(anthropic_order_and_moves) RUN(attached_items_go_with_their_result) RUN(misplaced_call_beside_results_leaves_a_note)
                                     RUN(format_detection) RUN(violations_are_described_with_quoted_ids) RUN(issue_names_and_violation_fields)
                                         RUN(allocation_failures) RUN(many_calls))
