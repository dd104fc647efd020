/* The compactor's options: defaults filled in and every value checked, in one place. */
#include <string.h>

#include "./compaction.h"
#include "./fmt.h"

int ck__options_check(const ck_compactor_options *in, ck_compactor_options *o, ck_error *err) {
    *o = *in;
    if (!o->context_window)
        return ck__fail(err, CK_EINVAL, "context_window must be positive", CK_NONE,
                        "context_window");
    if (o->warn == 0) o->warn = 0.60;
    if (o->soft == 0) o->soft = 0.70;
    if (o->full == 0) o->full = 0.80;
    if (o->emergency == 0) o->emergency = 0.95;
    if (o->target == 0) o->target = 0.50;
    /* The comparisons are written so that NaN fails them. */
    if (!(o->warn > 0 && o->warn < o->soft))
        return ck__fail(err, CK_EINVAL, "thresholds must satisfy 0 < warn < soft", CK_NONE, "warn");
    if (!(o->soft < o->full))
        return ck__fail(err, CK_EINVAL, "thresholds must satisfy soft < full", CK_NONE, "soft");
    if (!(o->full < o->emergency))
        return ck__fail(err, CK_EINVAL, "thresholds must satisfy full < emergency", CK_NONE,
                        "full");
    if (!(o->emergency <= 1.0))
        return ck__fail(err, CK_EINVAL, "emergency must be at most 1", CK_NONE, "emergency");
    if (!(o->target > 0 && o->target < o->soft))
        return ck__fail(err, CK_EINVAL, "target must satisfy 0 < target < soft", CK_NONE,
                        "target");
    if (!o->keep_tail) o->keep_tail = 6;
    if (!o->keep_tail_tokens) o->keep_tail_tokens = o->context_window / 4;
    if (!o->offload_threshold) o->offload_threshold = 4000;
    if (!o->tool_offload_threshold) o->tool_offload_threshold = 10000;
    if (!o->summary_max_tokens) {
        uint64_t s = o->context_window / 20;
        o->summary_max_tokens = s < 256 ? 256 : (s > 8192 ? 8192 : s);
    }
    if (!o->min_gain) o->min_gain = o->context_window / 20;
    if (o->cache_read != 0 || o->cache_write != 0) {
        if (!(o->cache_read > 0 && o->cache_read <= 1))
            return ck__fail(err, CK_EINVAL, "the read price must be in (0, 1]", CK_NONE,
                            "prompt_cache");
        if (!(o->cache_write >= 1 && o->cache_write <= 10))
            return ck__fail(err, CK_EINVAL, "the write price must be in [1, 10]",
                            CK_NONE, "prompt_cache");
    }
    if (!ck_estimator_name(o->estimator))
        return ck__fail(err, CK_EINVAL, "unknown estimator", CK_NONE, "estimator");
    if (o->format != CK_FORMAT_AUTO && !ck__fmt_of(o->format))
        return ck__fail(err, CK_EINVAL, "unknown format", CK_NONE, "format");
    if (o->n_retention && !o->retention)
        return ck__fail(err, CK_EINVAL, "n_retention without policies", CK_NONE, "retention");
    if (o->backend && (!o->backend->put || !o->backend->get))
        return ck__fail(err, CK_EINVAL, "a backend needs both put and get", CK_NONE, "backend");
    return ck_backend_timeout(o->backend_timeout, &o->backend_timeout, err);
}

int ck_prompt_cache_preset(const char *name, double *read, double *write, ck_error *err) {
    static const struct {
        const char *name;
        double read, write;
    } presets[] = {{"anthropic", 0.1, 1.25}, {"openai", 0.1, 1.0}};
    ck__error_clear(err);
    for (size_t k = 0; name && k < sizeof presets / sizeof presets[0]; k++) {
        if (strcmp(name, presets[k].name) != 0) continue;
        if (read) *read = presets[k].read;
        if (write) *write = presets[k].write;
        return CK_OK;
    }
    return ck__fail(err, CK_EINVAL, "must be 'anthropic', 'openai' or read and write "
                                    "prices", CK_NONE, "prompt_cache");
}
