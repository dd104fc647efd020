/* ck_usage_prompt_tokens(): the whole prompt's tokens from each provider's usage object, as
 * their APIs and SDKs return them, and a clear error for anything else. */
#include "harness.h"

static uint64_t tokens_of(const char *json, int *rc, ck_error *err) {
    uint64_t out = 424242;
    *rc = ck_usage_prompt_tokens(json, strlen(json), &out, err);
    return out;
}

static void expect_tokens(const char *json, uint64_t want) {
    ck_error err;
    int rc;
    uint64_t got = tokens_of(json, &rc, &err);
    INT_EQ(rc, CK_OK);
    OK(got == want);
    if (rc != CK_OK || got != want)
        fprintf(stderr, "    %s: rc %d (%s %s), got %" PRIu64 "\n", json, rc, err.msg, err.where,
                got);
}

static void expect_error(const char *json, int code, const char *where) {
    ck_error err;
    int rc;
    uint64_t got = tokens_of(json, &rc, &err);
    INT_EQ(rc, code);
    INT_EQ(err.code, code);
    OK(got == 424242); /* untouched */
    OK(err.msg && err.msg[0]);
    if (where) STR_EQ(err.where, where);
}

TEST(each_provider) {
    /* OpenAI Chat Completions: cached tokens are part of prompt_tokens. */
    expect_tokens("{\"prompt_tokens\":1200,\"completion_tokens\":50,\"total_tokens\":1250,"
                  "\"prompt_tokens_details\":{\"cached_tokens\":1024}}",
                  1200);
    /* OpenAI Responses: likewise for input_tokens. */
    expect_tokens("{\"input_tokens\":900,\"input_tokens_details\":{\"cached_tokens\":512},"
                  "\"output_tokens\":10,\"total_tokens\":910}",
                  900);
    /* Anthropic: input_tokens leaves the cached part out; the two cache fields are added. */
    expect_tokens("{\"input_tokens\":50,\"cache_read_input_tokens\":10000,"
                  "\"cache_creation_input_tokens\":2000,\"output_tokens\":300}",
                  12050);
    expect_tokens("{\"input_tokens\":50,\"cache_read_input_tokens\":null,"
                  "\"cache_creation_input_tokens\":null,\"output_tokens\":3}",
                  50);
    expect_tokens("{\"input_tokens\":50,\"output_tokens\":3}", 50);
    /* AI SDK 5 and 6 (inputTokens is the total; cachedInputTokens and the details are parts
     * of it), the provider-level shape, and AI SDK 4. */
    expect_tokens("{\"inputTokens\":700,\"outputTokens\":20,\"totalTokens\":720,"
                  "\"cachedInputTokens\":600}",
                  700);
    expect_tokens("{\"inputTokens\":700,\"inputTokenDetails\":{\"noCacheTokens\":100,"
                  "\"cacheReadTokens\":600,\"cacheWriteTokens\":0},\"outputTokens\":20}",
                  700);
    expect_tokens("{\"inputTokens\":{\"total\":700,\"noCache\":100,\"cacheRead\":600},"
                  "\"outputTokens\":{\"total\":20}}",
                  700);
    expect_tokens("{\"promptTokens\":333,\"completionTokens\":4,\"totalTokens\":337}", 333);
    /* Gemini, as the REST API and the Python SDK's model_dump() give it. */
    expect_tokens("{\"promptTokenCount\":4000,\"cachedContentTokenCount\":3000,"
                  "\"candidatesTokenCount\":12}",
                  4000);
    expect_tokens("{\"prompt_token_count\":4000,\"candidates_token_count\":12}", 4000);
    /* Bedrock Converse leaves the cache out of inputTokens, as Anthropic does. */
    expect_tokens("{\"inputTokens\":40,\"cacheReadInputTokens\":900,"
                  "\"cacheWriteInputTokens\":60,\"outputTokens\":5}",
                  1000);
    /* A bare count. */
    expect_tokens("12345", 12345);
    expect_tokens("0", 0);
}

TEST(wrappers) {
    /* A whole response: OpenAI, Anthropic, Gemini, the AI SDK result, a LangChain message. */
    expect_tokens("{\"id\":\"chatcmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":77,"
                  "\"completion_tokens\":1}}",
                  77);
    expect_tokens("{\"id\":\"msg_1\",\"type\":\"message\",\"usage\":{\"input_tokens\":3,"
                  "\"cache_read_input_tokens\":7}}",
                  10);
    expect_tokens("{\"candidates\":[],\"usageMetadata\":{\"promptTokenCount\":88}}", 88);
    expect_tokens("{\"text\":\"hi\",\"usage\":{\"inputTokens\":5},\"totalUsage\":"
                  "{\"inputTokens\":50}}",
                  5);
    expect_tokens("{\"content\":\"hi\",\"usage_metadata\":{\"input_tokens\":21,"
                  "\"output_tokens\":2,\"input_token_details\":{\"cache_read\":20}}}",
                  21);
    /* A field of the object itself wins over a wrapper; a null usage is no usage. */
    expect_tokens("{\"prompt_tokens\":1,\"usage\":{\"prompt_tokens\":2}}", 1);
    expect_tokens("{\"usage\":null,\"usageMetadata\":{\"promptTokenCount\":9}}", 9);
    /* Only one level: a wrapper inside a wrapper is not looked into. */
    expect_error("{\"response\":{\"usage\":{\"prompt_tokens\":1}}}", CK_EINVAL, NULL);
    expect_error("{\"usage\":{\"usage\":{\"prompt_tokens\":1}}}", CK_EINVAL, NULL);
}

TEST(bad_counts_name_the_field) {
    expect_error("{\"prompt_tokens\":-1}", CK_EINVAL, "prompt_tokens");
    expect_error("{\"prompt_tokens\":1.5}", CK_EINVAL, "prompt_tokens");
    expect_error("{\"prompt_tokens\":\"12\"}", CK_EINVAL, "prompt_tokens");
    expect_error("{\"prompt_tokens\":1e300}", CK_EINVAL, "prompt_tokens");
    expect_error("{\"usage\":{\"input_tokens\":5,\"cache_read_input_tokens\":-2}}", CK_EINVAL,
                 "usage.cache_read_input_tokens");
    expect_error("{\"usage\":{\"inputTokens\":{\"total\":\"x\"}}}", CK_EINVAL,
                 "usage.inputTokens.total");
    expect_error("{\"input_tokens\":18446744073709551615,\"cache_read_input_tokens\":1}",
                 CK_EINVAL, "cache_read_input_tokens");
    expect_error("-3", CK_EINVAL, NULL);
    expect_tokens("{\"input_tokens\":18446744073709551614,\"cache_read_input_tokens\":1}",
                  UINT64_MAX);
    expect_tokens("{\"prompt_tokens\":12.0}", 12);
}

TEST(unknown_shapes) {
    ck_error err;
    int rc;
    tokens_of("{\"completion_tokens\":5,\"total_tokens\":9}", &rc, &err);
    INT_EQ(rc, CK_EINVAL);
    /* The error names every field it looked for. */
    OK(strstr(err.where, "prompt_tokens") && strstr(err.where, "input_tokens") &&
       strstr(err.where, "inputTokens") && strstr(err.where, "promptTokenCount"));
    OK(strstr(err.msg, "usageMetadata") != NULL);
    expect_error("{}", CK_EINVAL, NULL);
    expect_error("{\"prompt_tokens\":null}", CK_EINVAL, NULL);
    expect_error("[{\"prompt_tokens\":1}]", CK_EINVAL, NULL);
    expect_error("\"12\"", CK_EINVAL, NULL);
    expect_error("null", CK_EINVAL, NULL);
    /* Not JSON at all, or with text after it. */
    expect_error("{\"prompt_tokens\":", CK_ESYNTAX, NULL);
    expect_error("{\"prompt_tokens\":1} x", CK_ESYNTAX, NULL);
    expect_error("", CK_ESYNTAX, NULL);
    uint64_t out = 0;
    INT_EQ(ck_usage_prompt_tokens(NULL, 3, &out, NULL), CK_EINVAL);
    INT_EQ(ck_usage_prompt_tokens("1", 1, NULL, NULL), CK_EINVAL);
    INT_EQ(ck_usage_prompt_tokens("1", 1, &out, NULL), CK_OK);
    INT_EQ(out, 1);
    /* Repeated keys: the last one, as the provider's clients read them. */
    expect_tokens("{\"prompt_tokens\":1,\"prompt_tokens\":2}", 2);
}

TEST(every_allocation_failing) {
    const char *json = "{\"id\":\"msg\",\"usage\":{\"input_tokens\":3,"
                       "\"cache_read_input_tokens\":7,\"cache_creation_input_tokens\":1}}";
    int ok = 0;
    FAIL_EACH_ALLOC({
        uint64_t out = 0;
        ck_error err;
        int rc = ck_usage_prompt_tokens(json, strlen(json), &out, &err);
        if (rc == CK_OK && out == 11) ok++;
        else if (rc != CK_ENOMEM) H_REPORT("CK_OK or CK_ENOMEM");
    });
    OK(ok == 1);
}

HARNESS_MAIN(RUN(each_provider) RUN(wrappers) RUN(bad_counts_name_the_field)
                 RUN(unknown_shapes) RUN(every_allocation_failing))
