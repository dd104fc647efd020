/* The prompt's size from a provider's usage object. Each provider counts the prompt under its
 * own name, and Anthropic (like Bedrock) leaves the cached part out of input_tokens, so the
 * whole prompt is the sum of three fields there and one field everywhere else. A shape is
 * recognised by the field it holds; a wrapper (a whole response, a message) by the key it
 * keeps the usage under. */
#include <stdio.h>
#include <string.h>

#include "./internal.h"
#include "./usage.h"

/* Wrappers hold their usage one level down; a wrapper inside a wrapper is not looked into. */
#define USAGE_WRAP_DEPTH 1

static const char USAGE_BAD_COUNT[] = "a token count must be a non-negative integer";
static const char USAGE_OVERFLOW[] = "the token counts add up past 2^64";
static const char USAGE_UNKNOWN[] =
    "no prompt token count: looked for prompt_tokens (OpenAI Chat), input_tokens (OpenAI "
    "Responses, Anthropic), inputTokens (AI SDK), promptTokens (AI SDK 4), promptTokenCount "
    "(Gemini), and for usage, usageMetadata or usage_metadata holding one";
static const char USAGE_NOT_OBJECT[] = "usage must be a JSON object or a number";

/* Where the name of a field goes: "path.name", or "name" at the root. */
static int usage_fail(ck_error *err, const char *msg, const char *path, const char *name) {
    return ck__fail(err, CK_EINVAL, msg, CK_NONE, "%s%s%s", path, path[0] && name[0] ? "." : "",
                    name);
}

/* obj[name] as a count: 1 with *out set, 0 when absent or null, CK_EINVAL when it is there
 * and no count (a string, a negative or fractional number, one past 2^64). */
static int usage_count(const ck__jval *obj, const char *name, const char *path, uint64_t *out,
                       ck_error *err) {
    const ck__jval *v = ck__jgets(obj, name);
    if (!v || ck__jis(v, CK__JNULL)) return 0;
    if (!ck__ju64(v, out)) return usage_fail(err, USAGE_BAD_COUNT, path, name);
    return 1;
}

/* Adds the optional counts `names` (absent or null is 0) to *total. */
static int usage_add(const ck__jval *obj, const char *const *names, const char *path,
                     uint64_t *total, ck_error *err) {
    for (; *names; names++) {
        uint64_t part = 0;
        int rc = usage_count(obj, *names, path, &part, err);
        if (rc < 0) return rc;
        if (part > UINT64_MAX - *total) return usage_fail(err, USAGE_OVERFLOW, path, *names);
        *total += part;
    }
    return CK_OK;
}

/* Reads one usage object; 1 with *out set, 0 when it holds no field we know, or CK_EINVAL. */
static int usage_object(const ck__jval *u, const char *path, uint64_t *out, ck_error *err) {
    static const char *const anthropic_cache[] = {"cache_read_input_tokens",
                                                  "cache_creation_input_tokens", NULL};
    static const char *const bedrock_cache[] = {"cacheReadInputTokens", "cacheWriteInputTokens",
                                                NULL};
    /* Fields that hold the whole prompt by themselves. Gemini's Python SDK dumps its
     * promptTokenCount as prompt_token_count. */
    static const char *const whole[] = {"prompt_tokens", "promptTokens", "promptTokenCount",
                                        "prompt_token_count", NULL};
    int rc;
    for (const char *const *name = whole; *name; name++)
        if ((rc = usage_count(u, *name, path, out, err)) != 0) return rc;
    /* input_tokens: OpenAI Responses counts the cached part in it and names it elsewhere;
     * Anthropic leaves it out and reports it in the two cache fields, which are added. */
    if ((rc = usage_count(u, "input_tokens", path, out, err)) != 0) {
        if (rc < 0 || (rc = usage_add(u, anthropic_cache, path, out, err)) < 0) return rc;
        return 1;
    }
    /* inputTokens: the AI SDK's total (its cachedInputTokens and inputTokenDetails are parts
     * of it), or the provider-level {total, noCache, ...}; Bedrock's, which leaves the cache
     * out, comes with cacheReadInputTokens and cacheWriteInputTokens. */
    const ck__jval *in = ck__jgets(u, "inputTokens");
    if (ck__jis(in, CK__JOBJECT)) {
        char inner[sizeof err->where];
        snprintf(inner, sizeof inner, "%s%sinputTokens", path, path[0] ? "." : "");
        return usage_count(in, "total", inner, out, err);
    }
    if ((rc = usage_count(u, "inputTokens", path, out, err)) != 0) {
        if (rc < 0 || (rc = usage_add(u, bedrock_cache, path, out, err)) < 0) return rc;
        return 1;
    }
    return 0;
}

static int usage_read(const ck__jval *v, const char *path, int depth, uint64_t *out,
                      ck_error *err) {
    static const char *const wrappers[] = {"usage", "usageMetadata", "usage_metadata", NULL};
    if (ck__jis(v, CK__JNUMBER)) {
        if (!ck__ju64(v, out)) return usage_fail(err, USAGE_BAD_COUNT, path, "");
        return 1;
    }
    if (!ck__jis(v, CK__JOBJECT)) return 0;
    int rc = usage_object(v, path, out, err);
    if (rc != 0 || depth >= USAGE_WRAP_DEPTH) return rc;
    for (const char *const *key = wrappers; *key; key++) {
        const ck__jval *inner = ck__jgets(v, *key);
        if (!ck__jis(inner, CK__JOBJECT)) continue;
        char where[sizeof err->where];
        snprintf(where, sizeof where, "%s%s%s", path, path[0] ? "." : "", *key);
        if ((rc = usage_read(inner, where, depth + 1, out, err)) != 0) return rc;
    }
    return 0;
}

int ck__usage_prompt(const ck__jval *usage, const char *path, uint64_t *out, ck_error *err) {
    ck__error_clear(err);
    uint64_t tokens = 0;
    if (!ck__jis(usage, CK__JOBJECT) && !ck__jis(usage, CK__JNUMBER))
        return usage_fail(err, USAGE_NOT_OBJECT, path ? path : "", "");
    int rc = usage_read(usage, path ? path : "", 0, &tokens, err);
    if (rc < 0) return rc;
    if (rc == 0)
        return ck__fail(err, CK_EINVAL, USAGE_UNKNOWN, CK_NONE,
                        "prompt_tokens|input_tokens|inputTokens|promptTokens|promptTokenCount");
    *out = tokens;
    return CK_OK;
}

int ck_usage_prompt_tokens(const char *json, size_t len, uint64_t *out, ck_error *err) {
    ck_error local;
    if (!err) err = &local;
    ck__error_clear(err);
    if (!out || (!json && len)) return ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
    ck__jread_options strict = {0, 0};
    ck__jdoc *doc = ck__jread(json, len, strict, err);
    if (!doc) return err->code;
    int rc = ck__usage_prompt(ck__jdoc_root(doc), "", out, err);
    ck__jdoc_free(doc);
    return rc;
}
