/* The audit record of a compaction (DESIGN section 8): one JSON line, with the session state
 * as a snapshot or a delta, and an integrity tag that resuming checks. Every string keeps
 * every byte (the writer escapes NUL), so a record read back is the record written. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "./alloc.h"
#include "./compaction.h"
#include "./hash.h"
#include "./json.h"

/* A full snapshot of the state every this many records; the others carry deltas. */
#define RECORD_SNAPSHOT_EVERY 16

static void record_time(char *out, size_t size) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(out, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)(ts.tv_nsec / 1000000) % 1000);
}

static void record_anchors(ck__jwriter *w, const ck_anchors *a) {
    ck__jw_begin_object(w);
    for (int k = 0; k < CK_ANCHOR_COUNT; k++) {
        size_t len;
        const char *v = a ? ck_anchors_get(a, (ck_anchor)k, &len) : NULL;
        ck__jw_keys(w, ck_anchor_key((ck_anchor)k));
        if (v) ck__jw_string(w, v, len);
        else ck__jw_null(w);
    }
    ck__jw_end_object(w);
}

static void record_strs(ck__jwriter *w, const ck__strs *l) {
    ck__jw_begin_array(w);
    for (size_t i = 0; i < l->n; i++) ck__jw_string(w, l->v[i].s, l->v[i].len);
    ck__jw_end_array(w);
}

/* The record's "state": a snapshot at the session's first record, after a reset and every
 * RECORD_SNAPSHOT_EVERY records, and when it follows another writer's record; else what this
 * compaction added. */
static int record_state(const ck_compaction *c, ck__buf *b, int *snapshot) {
    const ck__state *st = &c->owner->st;
    *snapshot = st->records == 0 || c->reset || c->force_snapshot ||
                st->since_snapshot + 1 >= RECORD_SNAPSHOT_EVERY;
    ck__delta d = {c->users_before, c->offloads_before, c->archives_before,
                   &c->touched_constraints, &c->touched_files, c->span_idents};
    return ck__state_write(st, *snapshot ? NULL : &d, b);
}

int ck__record_build(ck_compaction *c, const unsigned char *key, size_t key_len) {
    ck_compactor *self = c->owner;
    const ck__state *st = &self->st;
    const ck_compactor_options *o = &self->opt;
    int compacted = c->anchors != NULL;
    char when[96], fp[20];
    record_time(when, sizeof when);
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)st->fingerprint);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double ms = (double)(now.tv_sec - c->started.tv_sec) * 1e3 +
                (double)(now.tv_nsec - c->started.tv_nsec) / 1e6;
    size_t kept = c->h->n_msgs > c->cut ? c->h->n_msgs - c->cut : 0;
    ck__buf b;
    ck__buf_init(&b);
    ck__jwriter w;
    ck__jw_init(&w, &b, 0);
    ck__jw_begin_object(&w);
    ck__jw_keys(&w, "id");
    {
        ck__buf id;
        ck__buf_init(&id);
        ck__buf_adds(&id, self->session_id);
        ck__buf_printf(&id, ":%llu", (unsigned long long)st->records + 1);
        ck__jw_string(&w, id.data ? id.data : "", id.len);
        if (id.failed) b.failed = 1;
        ck__buf_dispose(&id);
    }
    ck__jw_keys(&w, "session_id");
    ck__jw_strings(&w, self->session_id);
    ck__jw_keys(&w, "timestamp");
    ck__jw_strings(&w, when);
    ck__jw_keys(&w, "tier");
    ck__jw_strings(&w, ck_tier_name(c->tier));
    ck__jw_keys(&w, "tokens_before");
    ck__jw_u64(&w, c->tokens_before);
    ck__jw_keys(&w, "tokens_after");
    ck__jw_u64(&w, c->tokens_after);
    ck__jw_keys(&w, "ratio_before");
    ck__jw_double(&w, ck_compaction_ratio_before(c));
    ck__jw_keys(&w, "ratio_after");
    ck__jw_double(&w, ck_compaction_ratio_after(c));
    ck__jw_keys(&w, "window");
    ck__jw_u64(&w, o->context_window);
    ck__jw_keys(&w, "msgs_before");
    ck__jw_u64(&w, c->src->n_msgs);
    ck__jw_keys(&w, "msgs_after");
    ck__jw_u64(&w, ck_view_count(c->view));
    ck__jw_keys(&w, "cache");
    ck__jw_begin_object(&w);
    ck__jw_keys(&w, "prefix_kept");
    ck__jw_u64(&w, c->prefix_kept);
    ck__jw_keys(&w, "prefix_broken");
    ck__jw_u64(&w, c->prefix_broken);
    if (c->has_estimate) {
        /* The prompt_cache cost model's judgment of this change (compaction.c). */
        ck__jw_keys(&w, "estimate");
        ck__jw_begin_object(&w);
        ck__jw_keys(&w, "horizon");
        ck__jw_u64(&w, c->horizon);
        ck__jw_keys(&w, "saves");
        ck__jw_u64(&w, c->saves);
        ck__jw_keys(&w, "invalidates");
        ck__jw_u64(&w, c->invalidates);
        ck__jw_end_object(&w);
    }
    ck__jw_end_object(&w);
    ck__jw_keys(&w, "summarized");
    ck__jw_u64(&w, compacted ? c->summarized : 0);
    ck__jw_keys(&w, "preserved_tail");
    ck__jw_u64(&w, compacted ? kept : 0);
    ck__jw_keys(&w, "offloaded");
    ck__jw_begin_array(&w);
    for (size_t i = 0; i < c->n_new_offloads; i++) ck__offload_write(&w, &c->new_offloads[i]);
    ck__jw_end_array(&w);
    ck__jw_keys(&w, "repairs");
    ck__jw_begin_array(&w);
    for (size_t i = 0; i < c->n_repairs; i++) {
        const ck__repair_rec *r = &c->repairs[i];
        ck__jw_begin_object(&w);
        ck__jw_keys(&w, "kind");
        ck__jw_strings(&w, ck_repair_kind_name(r->kind));
        ck__jw_keys(&w, "index");
        ck__jw_u64(&w, r->index);
        ck__jw_keys(&w, "tool_call_id");
        ck__jw_string(&w, r->id, r->id_len);
        ck__jw_end_object(&w);
    }
    ck__jw_end_array(&w);
    ck__jw_keys(&w, "anchors");
    record_anchors(&w, st->anchors);
    ck__jw_keys(&w, "checkpoint");
    if (st->active) ck__jw_string(&w, st->checkpoint, st->checkpoint_len);
    else ck__jw_null(&w);
    ck__jw_keys(&w, "covered");
    if (st->active) {
        ck__jw_begin_object(&w);
        ck__jw_keys(&w, "count");
        ck__jw_u64(&w, st->covered);
        ck__jw_keys(&w, "fingerprint");
        ck__jw_strings(&w, fp);
        ck__jw_end_object(&w);
    } else {
        ck__jw_null(&w);
    }
    if (compacted) {
        ck__jw_keys(&w, "archived");
        ck__jw_begin_array(&w);
        for (size_t i = 0; i < c->n_archives; i++) {
            const ck__archive *a = &c->archives[i];
            ck__jw_begin_object(&w);
            ck__jw_keys(&w, "ref");
            ck__jw_strings(&w, a->ref);
            ck__jw_keys(&w, "path");
            ck__jw_strings(&w, a->path);
            ck__jw_keys(&w, "first");
            ck__jw_u64(&w, a->first);
            ck__jw_keys(&w, "end");
            ck__jw_u64(&w, a->end);
            ck__jw_end_object(&w);
        }
        ck__jw_end_array(&w);
    }
    ck__jw_keys(&w, "duration_ms");
    ck__jw_double(&w, ms);
    ck__jw_keys(&w, "error");
    if (c->errors.n) {
        ck__buf e;
        ck__buf_init(&e);
        for (size_t i = 0; i < c->errors.n; i++) {
            if (i) ck__buf_adds(&e, "; ");
            ck__buf_add(&e, c->errors.v[i].s, c->errors.v[i].len);
        }
        ck__jw_string(&w, e.data ? e.data : "", e.len);
        if (e.failed) b.failed = 1;
        ck__buf_dispose(&e);
    } else {
        ck__jw_null(&w);
    }
    ck__jw_keys(&w, "notes");
    record_strs(&w, &c->notes);
    ck__jw_keys(&w, "fallback");
    if (c->fallback) ck__jw_strings(&w, c->fallback);
    else ck__jw_null(&w);
    ck__jw_keys(&w, "estimator");
    ck__jw_strings(&w, o->counter.count ? "host" : ck_estimator_name(o->estimator));
    ck__jw_keys(&w, "state");
    int snapshot = 0;
    ck__buf state;
    ck__buf_init(&state);
    if (record_state(c, &state, &snapshot)) b.failed = 1;
    ck__jw_raw(&w, state.data ? state.data : "null", state.data ? state.len : 4);
    ck__buf_dispose(&state);
    if (key) {
        /* The tag covers the record as written so far, closed by its brace: resuming checks
         * it the same way (ck__record_verify). */
        ck__buf_addc(&b, '}');
        if (!b.failed) {
            unsigned char mac[32];
            char hex[65];
            ck__hmac_sha256(key, key_len, b.data, b.len, mac);
            ck__hex(mac, 32, hex);
            b.len--;
            ck__jw_keys(&w, "mac");
            ck__jw_strings(&w, hex);
        }
    }
    ck__jw_end_object(&w);
    if (b.failed) {
        ck__buf_dispose(&b);
        return CK_ENOMEM;
    }
    ck__free(c->record);
    c->record = ck__buf_take(&b, &c->record_len);
    if (!c->record) return CK_ENOMEM;
    if (snapshot) c->owner->st.since_snapshot = 0;
    else c->owner->st.since_snapshot++;
    return CK_OK;
}

int ck__record_verify(const char *line, size_t len, const unsigned char *key, size_t key_len) {
    static const char tag[] = ",\"mac\":\"";
    size_t tl = sizeof tag - 1, hex_len = 64;
    /* The tag is the last field: ,"mac":"<64 hex>"} */
    if (len < tl + hex_len + 2 || line[len - 1] != '}' || line[len - 2] != '"') return 0;
    size_t at = len - 2 - hex_len - tl;
    if (memcmp(line + at, tag, tl) != 0) return 0;
    ck__buf b;
    ck__buf_init(&b);
    ck__buf_add(&b, line, at);
    ck__buf_addc(&b, '}');
    if (b.failed) {
        ck__buf_dispose(&b);
        return 0;
    }
    unsigned char mac[32];
    char hex[65];
    ck__hmac_sha256(key, key_len, b.data, b.len, mac);
    ck__buf_dispose(&b);
    ck__hex(mac, 32, hex);
    /* Compared in full whatever differs first. */
    unsigned diff = 0;
    for (size_t i = 0; i < hex_len; i++) diff |= (unsigned)(hex[i] ^ line[at + tl + i]);
    return diff == 0;
}
