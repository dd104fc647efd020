/*
 * replay.c - replay() and cliMain(): the core's replay (ck_replay_run) and command line
 * (ck_cli_main), which index.js's replay() and the npm bin (node/bin/ctxkeel.js) call. The
 * rows come from the core as they are; this file reads the options and builds JS objects.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "napi_util.h"

/* The compactor options a replay takes, by their JS names. Numbers are range-checked by
 * ck_compactor_new(), which names the option in its error. */
typedef enum replay_kind { RK_COUNT, RK_FRACTION, RK_STRING, RK_FORMAT, RK_ESTIMATOR } replay_kind;

static const struct replay_option {
    const char *name;
    replay_kind kind;
    size_t offset;
} REPLAY_OPTIONS[] = {
    {"contextWindow", RK_COUNT, offsetof(ck_compactor_options, context_window)},
    {"warn", RK_FRACTION, offsetof(ck_compactor_options, warn)},
    {"soft", RK_FRACTION, offsetof(ck_compactor_options, soft)},
    {"full", RK_FRACTION, offsetof(ck_compactor_options, full)},
    {"emergency", RK_FRACTION, offsetof(ck_compactor_options, emergency)},
    {"keepTail", RK_COUNT, offsetof(ck_compactor_options, keep_tail)},
    {"offloadThreshold", RK_COUNT, offsetof(ck_compactor_options, offload_threshold)},
    {"toolOffloadThreshold", RK_COUNT, offsetof(ck_compactor_options, tool_offload_threshold)},
    {"summaryMaxTokens", RK_COUNT, offsetof(ck_compactor_options, summary_max_tokens)},
    {"sessionId", RK_STRING, offsetof(ck_compactor_options, session_id)},
    {"storeDir", RK_STRING, offsetof(ck_compactor_options, store_dir)},
    {"format", RK_FORMAT, offsetof(ck_compactor_options, format)},
    {"estimator", RK_ESTIMATOR, offsetof(ck_compactor_options, estimator)},
    {"minGain", RK_COUNT, offsetof(ck_compactor_options, min_gain)},
};
#define REPLAY_N_OPTIONS (sizeof REPLAY_OPTIONS / sizeof REPLAY_OPTIONS[0])

/* Reads `options` into `o`; strings are copied into strs[] (free them). Returns CK_OK or
 * CKJS_THROWN. */
static int replay_read_options(napi_env env, napi_value options, ck_compactor_options *o,
                               char **strs) {
    memset(o, 0, sizeof *o);
    for (size_t i = 0; i < REPLAY_N_OPTIONS; i++) {
        const struct replay_option *opt = &REPLAY_OPTIONS[i];
        char *field = (char *)o + opt->offset;
        napi_value v;
        napi_valuetype type;
        NODE_API_CALL_RC(env, napi_get_named_property(env, options, opt->name, &v));
        NODE_API_CALL_RC(env, napi_typeof(env, v, &type));
        if (type == napi_undefined) continue;
        int choice = 0;
        if (opt->kind == RK_FORMAT || opt->kind == RK_ESTIMATOR) {
            char what[48];
            snprintf(what, sizeof what, "options.%s", opt->name);
            if (opt->kind == RK_FORMAT) {
                ck_format *format = (ck_format *)(void *)field;
                *format = CK_FORMAT_AUTO;
                if (ckjs_format_arg(env, v, what, format)) return CKJS_THROWN;
                continue;
            }
            if (ckjs_choice(env, v, what, ckjs_estimator_names, 3, 0, &choice)) return CKJS_THROWN;
            *(ck_estimator *)(void *)field = (ck_estimator)choice;
            continue;
        }
        if (opt->kind == RK_STRING) {
            if (type != napi_string) {
                ckjs_throw_type_error(env, "options.%s must be a string, not %s", opt->name,
                                      ckjs_type_name(env, v));
                return CKJS_THROWN;
            }
            size_t len = 0;
            int rc = ckjs_dup_string(env, v, &strs[i], &len);
            if (rc == CK_ENOMEM) NODE_API_CALL_RC(env, napi_throw_error(env, "CK_ENOMEM",
                                                                        "ctxkeel: out of memory"));
            if (rc) return CKJS_THROWN;
            *(const char **)(void *)field = strs[i];
            continue;
        }
        double d = 0;
        if (type == napi_number) NODE_API_CALL_RC(env, napi_get_value_double(env, v, &d));
        if (type != napi_number) {
            ckjs_throw_type_error(env, "options.%s must be a number, not %s", opt->name,
                                  ckjs_type_name(env, v));
            return CKJS_THROWN;
        }
        if (opt->kind == RK_FRACTION) {
            if (!(d > 0 && d < 1)) {
                ckjs_throw_range_error(env, "options.%s must be a fraction in (0, 1)", opt->name);
                return CKJS_THROWN;
            }
            *(double *)(void *)field = d;
            continue;
        }
        if (!(d >= 0 && d <= 9007199254740991.0 && floor(d) == d)) {
            ckjs_throw_range_error(env, "options.%s must be a non-negative integer", opt->name);
            return CKJS_THROWN;
        }
        if (opt->offset == offsetof(ck_compactor_options, keep_tail)) {
            if (d > 4294967295.0) {
                ckjs_throw_range_error(env, "options.keepTail is too large");
                return CKJS_THROWN;
            }
            o->keep_tail = (uint32_t)d;
        } else {
            *(uint64_t *)(void *)field = (uint64_t)d;
        }
    }
    napi_value v;
    napi_valuetype type;
    const struct {
        const char *name;
        bool sets; /* the value that sets the flag */
        uint32_t flag;
    } flags[] = {{"pinFirstUser", false, CK_OPT_NO_PIN_FIRST_USER},
                 {"cacheBreakpoints", true, CK_OPT_CACHE_BREAKPOINTS}};
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
        NODE_API_CALL_RC(env, napi_get_named_property(env, options, flags[k].name, &v));
        NODE_API_CALL_RC(env, napi_typeof(env, v, &type));
        if (type == napi_boolean) {
            bool b = !flags[k].sets;
            NODE_API_CALL_RC(env, napi_get_value_bool(env, v, &b));
            if (b == flags[k].sets) o->flags |= flags[k].flag;
        } else if (type != napi_undefined) {
            ckjs_throw_type_error(env, "options.%s must be a boolean, not %s", flags[k].name,
                                  ckjs_type_name(env, v));
            return CKJS_THROWN;
        }
    }
    NODE_API_CALL_RC(env, napi_get_named_property(env, options, "promptCache", &v));
    if (ckjs_prompt_cache_arg(env, v, "options.promptCache", &o->cache_read, &o->cache_write))
        return CKJS_THROWN;
    return CK_OK;
}

static int replay_set(napi_env env, napi_value obj, const char *key, napi_value value) {
    if (!value) return CKJS_THROWN;
    NODE_API_CALL_RC(env, napi_set_named_property(env, obj, key, value));
    return CK_OK;
}

static napi_value replay_number(napi_env env, double d) {
    napi_value v;
    NODE_API_CALL(env, napi_create_double(env, d, &v));
    return v;
}

/* A string, or null for NULL. */
static napi_value replay_text(napi_env env, const char *s, size_t len) {
    napi_value v;
    if (s) return ckjs_string(env, s, len);
    NODE_API_CALL(env, napi_get_null(env, &v));
    return v;
}

static napi_value replay_row(napi_env env, const ck_replay_row *row) {
    napi_value obj, record, flag;
    NODE_API_CALL(env, napi_create_object(env, &obj));
    if (row->record) {
        if (ckjs_json_parse(env, row->record, row->record_len, &record)) return NULL;
    } else {
        NODE_API_CALL(env, napi_get_null(env, &record));
    }
    NODE_API_CALL(env, napi_get_boolean(env, row->fallback != 0, &flag));
    const char *tier = ck_tier_name(row->tier);
    if (replay_set(env, obj, "call", replay_number(env, (double)row->call)) ||
        replay_set(env, obj, "messages", replay_number(env, (double)row->messages)) ||
        replay_set(env, obj, "viewMessages", replay_number(env, (double)row->view_messages)) ||
        replay_set(env, obj, "historyTokens", replay_number(env, (double)row->history_tokens)) ||
        replay_set(env, obj, "tokensBefore", replay_number(env, (double)row->tokens_before)) ||
        replay_set(env, obj, "tokensAfter", replay_number(env, (double)row->tokens_after)) ||
        replay_set(env, obj, "ratioBefore", replay_number(env, row->ratio_before)) ||
        replay_set(env, obj, "ratioAfter", replay_number(env, row->ratio_after)) ||
        replay_set(env, obj, "prefixKept", replay_number(env, (double)row->prefix_kept)) ||
        replay_set(env, obj, "prefixBroken", replay_number(env, (double)row->prefix_broken)) ||
        replay_set(env, obj, "tier", ckjs_string(env, tier, strlen(tier))) ||
        replay_set(env, obj, "compaction", replay_number(env, (double)row->compaction)) ||
        replay_set(env, obj, "summarized", replay_number(env, (double)row->summarized)) ||
        replay_set(env, obj, "offloaded", replay_number(env, (double)row->offloaded)) ||
        replay_set(env, obj, "summaryCalls", replay_number(env, (double)row->summary_calls)) ||
        replay_set(env, obj, "summaryTokens", replay_number(env, (double)row->summary_tokens)) ||
        replay_set(env, obj, "fallback", flag) ||
        replay_set(env, obj, "action", ckjs_string(env, row->action, strlen(row->action))) ||
        replay_set(env, obj, "checkpoint",
                   replay_text(env, row->checkpoint, row->checkpoint_len)) ||
        replay_set(env, obj, "placeholder",
                   replay_text(env, row->placeholder, row->placeholder_len)) ||
        replay_set(env, obj, "record", record))
        return NULL;
    return obj;
}

static napi_value replay_totals(napi_env env, const ck_replay *r) {
    ck_replay_total t;
    ck_replay_totals(r, &t);
    napi_value obj, tiers;
    NODE_API_CALL(env, napi_create_object(env, &obj));
    NODE_API_CALL(env, napi_create_object(env, &tiers));
    for (int k = 0; k <= CK_TIER_EMERGENCY; k++)
        if (replay_set(env, tiers, ck_tier_name((ck_tier)k),
                       replay_number(env, (double)t.per_tier[k])))
            return NULL;
    if (replay_set(env, obj, "calls", replay_number(env, (double)t.calls)) ||
        replay_set(env, obj, "perTier", tiers) ||
        replay_set(env, obj, "compactions", replay_number(env, (double)t.compactions)) ||
        replay_set(env, obj, "summaryCalls", replay_number(env, (double)t.summary_calls)) ||
        replay_set(env, obj, "summaryTokens", replay_number(env, (double)t.summary_tokens)) ||
        replay_set(env, obj, "offloaded", replay_number(env, (double)t.offloaded)) ||
        replay_set(env, obj, "tokensSent", replay_number(env, (double)t.tokens_sent)) ||
        replay_set(env, obj, "tokensWithout", replay_number(env, (double)t.tokens_without)) ||
        replay_set(env, obj, "prefixKept", replay_number(env, (double)t.prefix_kept)) ||
        replay_set(env, obj, "prefixBreaks", replay_number(env, (double)t.prefix_breaks)) ||
        replay_set(env, obj, "peakRatio", replay_number(env, t.peak_ratio)) ||
        replay_set(env, obj, "peakRatioWithout", replay_number(env, t.peak_ratio_without)) ||
        replay_set(env, obj, "overWindowWithout",
                   replay_number(env, (double)t.over_window_without)) ||
        replay_set(env, obj, "firstOverWithout",
                   replay_number(env, (double)t.first_over_without)))
        return NULL;
    return obj;
}

/* {rows, totals, svg, sessionId} of a finished replay. */
static napi_value replay_result(napi_env env, const ck_replay *r, const ck_compactor *k,
                                const char *title) {
    napi_value out, rows;
    NODE_API_CALL(env, napi_create_object(env, &out));
    NODE_API_CALL(env, napi_create_array_with_length(env, ck_replay_count(r), &rows));
    for (size_t i = 0; i < ck_replay_count(r); i++) {
        napi_value row = replay_row(env, ck_replay_get(r, i));
        if (!row) return NULL;
        NODE_API_CALL(env, napi_set_element(env, rows, (uint32_t)i, row));
    }
    char *svg = NULL;
    size_t len = 0;
    if (ck_replay_svg(r, title, &svg, &len)) {
        NODE_API_CALL(env, napi_throw_error(env, "CK_ENOMEM", "ctxkeel: out of memory"));
        return NULL;
    }
    napi_value svg_value = ckjs_string(env, svg, len);
    ck_free(svg);
    const char *session = ck_compactor_session_id(k);
    if (replay_set(env, out, "rows", rows) ||
        replay_set(env, out, "totals", replay_totals(env, r)) ||
        replay_set(env, out, "svg", svg_value) ||
        replay_set(env, out, "sessionId", ckjs_string(env, session, strlen(session))))
        return NULL;
    return out;
}

/* replay(messagesJson, options, title): index.js has checked the option names. */
static napi_value replay(napi_env env, napi_callback_info info) {
    napi_value argv[3];
    if (ckjs_get_args(env, info, argv, 3, NULL)) return NULL;
    napi_valuetype type = napi_undefined;
    if (argv[0]) NODE_API_CALL(env, napi_typeof(env, argv[0], &type));
    if (type != napi_string)
        return ckjs_throw_type_error(env, "messages must be JSON text, not %s",
                                     ckjs_type_name(env, argv[0]));
    type = napi_undefined;
    if (argv[1]) NODE_API_CALL(env, napi_typeof(env, argv[1], &type));
    if (type != napi_object)
        return ckjs_throw_type_error(env, "options must be an object, not %s",
                                     ckjs_type_name(env, argv[1]));
    char *strs[REPLAY_N_OPTIONS] = {NULL}, *json = NULL, *title = NULL;
    size_t json_len = 0, title_len = 0;
    napi_value result = NULL;
    ck_compactor *k = NULL;
    ck_history *h = NULL;
    ck_replay *r = NULL;
    ck_compactor_options o;
    ck_error err;
    memset(&err, 0, sizeof err);
    if (replay_read_options(env, argv[1], &o, strs)) goto done;
    type = napi_undefined;
    if (argv[2]) NODE_API_CALL(env, napi_typeof(env, argv[2], &type));
    if (type == napi_string && ckjs_dup_string(env, argv[2], &title, &title_len)) goto done;
    int rc = ckjs_dup_string(env, argv[0], &json, &json_len);
    if (rc == CKJS_THROWN) goto done;
    if (rc == CK_OK && !(k = ck_compactor_new(&o, &err))) rc = err.code;
    if (rc == CK_OK && !(h = ck_json_read(json, json_len, &err))) rc = err.code;
    if (rc == CK_OK) rc = ck_replay_run(k, h, NULL, NULL, &r, &err);
    if (rc != CK_OK) {
        if (err.code != rc) {
            memset(&err, 0, sizeof err);
            err.code = rc;
            err.index = CK_NONE;
        }
        ckjs_throw_status(env, &err);
        goto done;
    }
    result = replay_result(env, r, k, title);

done:
    ck_replay_free(r);
    ck_history_free(h);
    ck_compactor_free(k);
    for (size_t i = 0; i < REPLAY_N_OPTIONS; i++) free(strs[i]);
    free(json);
    free(title);
    return result;
}

/* cliMain(args): the ctxkeel command with `args` (without the program name); its exit
 * status. It writes to the process's stdout and stderr through C stdio. */
static napi_value cli_main(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    if (ckjs_get_args(env, info, argv, 1, NULL)) return NULL;
    bool is_array = false;
    if (argv[0]) NODE_API_CALL(env, napi_is_array(env, argv[0], &is_array));
    if (!is_array) return ckjs_throw_type_error(env, "args must be an array of strings");
    uint32_t n = 0;
    NODE_API_CALL(env, napi_get_array_length(env, argv[0], &n));
    char **args = calloc((size_t)n + 2, sizeof *args);
    if (!args) return ckjs_throw_type_error(env, "out of memory");
    napi_value result = NULL;
    int ok = (args[0] = strdup("ctxkeel")) != NULL;
    for (uint32_t i = 0; ok && i < n; i++) {
        napi_value item;
        napi_valuetype type = napi_undefined;
        size_t len = 0;
        ok = napi_get_element(env, argv[0], i, &item) == napi_ok &&
             napi_typeof(env, item, &type) == napi_ok;
        if (ok && type != napi_string) {
            ckjs_throw_type_error(env, "args[%u] must be a string, not %s", i,
                                  ckjs_type_name(env, item));
            ok = 0;
        }
        if (ok) ok = ckjs_dup_string(env, item, &args[i + 1], &len) == CK_OK;
    }
    if (ok) {
        int status = ck_cli_main((int)n + 1, args);
        if (napi_create_int32(env, status, &result) != napi_ok) result = NULL;
    } else {
        ckjs_throw_last_error(env, "cliMain");
    }
    for (uint32_t i = 0; i <= n; i++) free(args[i]);
    free(args);
    return result;
}

int ckjs_replay_init(napi_env env, napi_value exports) {
    const napi_property_descriptor props[] = {
        {"replay", NULL, replay, NULL, NULL, NULL, napi_enumerable, NULL},
        {"cliMain", NULL, cli_main, NULL, NULL, NULL, napi_enumerable, NULL},
    };
    NODE_API_CALL_RC(env, napi_define_properties(env, exports, 2, props));
    return CK_OK;
}
