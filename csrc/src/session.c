/* The session state: its life (init, copy, dispose, forget), the changes a compaction makes,
 * and its record form (snapshot or delta) in the audit log. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "./alloc.h"
#include "./buf.h"
#include "./json.h"
#include "./session.h"

/* ---- life ---- */

void ck__offload_dispose(ck__offload *o) {
    ck__free(o->id);
    ck__free(o->ref);
    ck__free(o->tool);
    ck__free(o->path);
    memset(o, 0, sizeof *o);
}

void ck__archive_dispose(ck__archive *a) {
    ck__free(a->ref);
    ck__free(a->path);
    memset(a, 0, sizeof *a);
}

int ck__state_init(ck__state *st) {
    memset(st, 0, sizeof *st);
    st->factor = 1.0;
    st->idents = ck__idents_new();
    if (!st->idents || ck__idmap_init(&st->offloaded, 16)) {
        ck__idents_free(st->idents);
        st->idents = NULL;
        return CK_ENOMEM;
    }
    return CK_OK;
}

static void session_users_dispose(ck__state *st) {
    for (size_t i = 0; i < st->n_users; i++) {
        ck__free(st->users[i].text);
        ck__free(st->users[i].ref);
    }
    ck__free(st->users);
    st->users = NULL;
    st->n_users = st->cap_users = 0;
}

void ck__state_dispose(ck__state *st) {
    ck_anchors_free(st->anchors);
    ck__free(st->checkpoint);
    session_users_dispose(st);
    ck__strs_dispose(&st->constraints);
    ck__strs_dispose(&st->files_read);
    ck__strs_dispose(&st->files_modified);
    for (size_t i = 0; i < st->n_offloads; i++) ck__offload_dispose(&st->offloads[i]);
    ck__free(st->offloads);
    for (size_t i = 0; i < st->n_archives; i++) ck__archive_dispose(&st->archives[i]);
    ck__free(st->archives);
    ck__idmap_dispose(&st->offloaded);
    ck__idents_free(st->idents);
    memset(st, 0, sizeof *st);
}

int ck__state_forget(ck__state *st) {
    ck__state fresh;
    if (ck__state_init(&fresh)) return CK_ENOMEM;
    fresh.records = st->records;
    memcpy(fresh.usage, st->usage, sizeof fresh.usage);
    fresh.n_usage = st->n_usage;
    fresh.factor = st->factor;
    fresh.last_view = st->last_view;
    fresh.growth = st->growth;
    ck__state_dispose(st);
    *st = fresh;
    return CK_OK;
}

static char *session_dup(const char *s) { return s ? ck__strndup(s, strlen(s)) : NULL; }

int ck__state_add_offload(ck__state *st, const ck__offload *o) {
    if (ck__idmap_get(&st->offloaded, o->ref, strlen(o->ref)) != SIZE_MAX) return CK_OK;
    ck__offload c = {ck__strndup(o->id, o->id_len), o->id_len, session_dup(o->ref),
                     ck__strndup(o->tool ? o->tool : "", o->tool ? o->tool_len : 0), o->tool_len,
                     session_dup(o->path), o->bytes, o->lines, o->hash, o->keep};
    if (!c.id || !c.ref || !c.tool || !c.path ||
        ck__grow((void **)&st->offloads, &st->cap_offloads, st->n_offloads + 1, sizeof c) ||
        ck__idmap_put(&st->offloaded, c.ref, strlen(c.ref), st->n_offloads) < 0) {
        ck__offload_dispose(&c);
        return CK_ENOMEM;
    }
    st->offloads[st->n_offloads++] = c;
    if (strcmp(c.tool, CK__EXCERPT_TOOL) == 0) st->has_excerpts = 1;
    return CK_OK;
}

int ck__state_add_archive(ck__state *st, const ck__archive *a) {
    ck__archive c = {session_dup(a->ref), session_dup(a->path), a->first, a->end, a->bytes,
                     a->lines};
    if (!c.ref || !c.path ||
        ck__grow((void **)&st->archives, &st->cap_archives, st->n_archives + 1, sizeof c)) {
        ck__archive_dispose(&c);
        return CK_ENOMEM;
    }
    st->archives[st->n_archives++] = c;
    return CK_OK;
}

int ck__state_add_user(ck__state *st, const char *text, size_t len, const char *ref,
                       uint64_t line) {
    if (ck__grow((void **)&st->users, &st->cap_users, st->n_users + 1, sizeof *st->users))
        return CK_ENOMEM;
    ck__user_msg u = {ck__strndup(text, len), len, session_dup(ref), line};
    if (!u.text || (ref && !u.ref)) {
        ck__free(u.text);
        ck__free(u.ref);
        return CK_ENOMEM;
    }
    st->users[st->n_users++] = u;
    return CK_OK;
}

const ck__offload *ck__state_offload(const ck__state *st, const char *ref, size_t len) {
    size_t at = ck__idmap_get(&st->offloaded, ref, len);
    return at == SIZE_MAX ? NULL : &st->offloads[at];
}

void ck__state_offload_shown(ck__state *st, const char *ref, size_t len, uint32_t keep) {
    size_t at = ck__idmap_get(&st->offloaded, ref, len);
    if (at == SIZE_MAX || !keep) return;
    ck__offload *o = &st->offloads[at];
    if (!o->keep || keep < o->keep) o->keep = keep;
}

int ck__state_touch_file(ck__state *st, char kind, const char *path, size_t len) {
    if (kind == 'm') {
        ck__strs_remove(&st->files_read, ck__strs_find(&st->files_read, path, len));
        return ck__strs_push_unique(&st->files_modified, path, len);
    }
    if (ck__strs_find(&st->files_modified, path, len) != (size_t)-1) return CK_OK;
    return ck__strs_push_unique(&st->files_read, path, len);
}

int ck__state_copy_lists(ck__state *dst, const ck__state *src) {
    if (ck__state_init(dst)) return CK_ENOMEM;
    for (size_t i = 0; i < src->n_users; i++) {
        const ck__user_msg *u = &src->users[i];
        if (ck__state_add_user(dst, u->text, u->len, u->ref, u->line)) return CK_ENOMEM;
    }
    for (size_t i = 0; i < src->n_archives; i++)
        if (ck__state_add_archive(dst, &src->archives[i])) return CK_ENOMEM;
    if (ck__strs_copy(&dst->constraints, &src->constraints) ||
        ck__strs_copy(&dst->files_read, &src->files_read) ||
        ck__strs_copy(&dst->files_modified, &src->files_modified) ||
        ck__idents_merge(dst->idents, src->idents))
        return CK_ENOMEM;
    return CK_OK;
}

/* Swaps the list fields of a and b. */
static void session_swap_lists(ck__state *a, ck__state *b) {
    ck__state t = *a;
    a->users = b->users;
    a->n_users = b->n_users;
    a->cap_users = b->cap_users;
    a->archives = b->archives;
    a->n_archives = b->n_archives;
    a->cap_archives = b->cap_archives;
    a->constraints = b->constraints;
    a->files_read = b->files_read;
    a->files_modified = b->files_modified;
    a->idents = b->idents;
    b->users = t.users;
    b->n_users = t.n_users;
    b->cap_users = t.cap_users;
    b->archives = t.archives;
    b->n_archives = t.n_archives;
    b->cap_archives = t.cap_archives;
    b->constraints = t.constraints;
    b->files_read = t.files_read;
    b->files_modified = t.files_modified;
    b->idents = t.idents;
}

void ck__state_take_lists(ck__state *st, ck__state *next) {
    /* `next` takes the old lists, so disposing of it frees them. */
    if (next) session_swap_lists(st, next);
}

/* ---- the record form ---- */

static void session_hex64(ck__jwriter *w, uint64_t v) {
    char hex[20];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)v);
    ck__jw_strings(w, hex);
}

void ck__offload_write(ck__jwriter *w, const ck__offload *o) {
    ck__jw_begin_object(w);
    ck__jw_keys(w, "tool_call_id");
    ck__jw_string(w, o->id, o->id_len);
    ck__jw_keys(w, "ref");
    ck__jw_strings(w, o->ref);
    ck__jw_keys(w, "hash");
    session_hex64(w, o->hash);
    ck__jw_keys(w, "tool_name");
    ck__jw_string(w, o->tool, o->tool_len);
    ck__jw_keys(w, "path");
    ck__jw_strings(w, o->path);
    ck__jw_keys(w, "bytes");
    ck__jw_u64(w, o->bytes);
    ck__jw_keys(w, "lines");
    ck__jw_u64(w, o->lines);
    ck__jw_end_object(w);
}

static void session_archive_write(ck__jwriter *w, const ck__archive *a) {
    ck__jw_begin_object(w);
    ck__jw_keys(w, "ref");
    ck__jw_strings(w, a->ref);
    ck__jw_keys(w, "path");
    ck__jw_strings(w, a->path);
    ck__jw_keys(w, "first");
    ck__jw_u64(w, a->first);
    ck__jw_keys(w, "end");
    ck__jw_u64(w, a->end);
    ck__jw_keys(w, "bytes");
    ck__jw_u64(w, a->bytes);
    ck__jw_keys(w, "lines");
    ck__jw_u64(w, a->lines);
    ck__jw_end_object(w);
}

static void session_strs_write(ck__jwriter *w, const ck__strs *l) {
    ck__jw_begin_array(w);
    for (size_t i = 0; l && i < l->n; i++) ck__jw_string(w, l->v[i].s, l->v[i].len);
    ck__jw_end_array(w);
}

static void session_idents_write(ck__jwriter *w, const ck__idents *s) {
    ck__jw_begin_array(w);
    for (size_t i = 0; s && i < ck__idents_count(s); i++) {
        size_t len, seq;
        unsigned count, prio;
        const char *id = ck__idents_get(s, i, &len, &seq, &count, &prio);
        ck__jw_begin_array(w);
        ck__jw_string(w, id, len);
        ck__jw_u64(w, seq);
        ck__jw_u64(w, count);
        ck__jw_u64(w, prio);
        ck__jw_end_array(w);
    }
    ck__jw_end_array(w);
}

static void session_users_write(ck__jwriter *w, const ck__state *st, size_t from) {
    ck__jw_begin_array(w);
    for (size_t i = from; i < st->n_users; i++) {
        const ck__user_msg *u = &st->users[i];
        ck__jw_begin_object(w);
        ck__jw_keys(w, "text");
        ck__jw_string(w, u->text, u->len);
        ck__jw_keys(w, "ref");
        if (u->ref) ck__jw_strings(w, u->ref);
        else ck__jw_null(w);
        ck__jw_keys(w, "line");
        ck__jw_u64(w, u->line);
        ck__jw_end_object(w);
    }
    ck__jw_end_array(w);
}

int ck__state_write(const ck__state *st, const ck__delta *d, ck__buf *out) {
    ck__jwriter w;
    ck__jw_init(&w, out, 0);
    ck__jw_begin_object(&w);
    ck__jw_keys(&w, "kind");
    ck__jw_strings(&w, d ? "delta" : "snapshot");
    ck__jw_keys(&w, "origin");
    ck__jw_begin_object(&w);
    ck__jw_keys(&w, "count");
    ck__jw_u64(&w, st->origin_n);
    ck__jw_keys(&w, "fingerprint");
    session_hex64(&w, st->origin_fp);
    ck__jw_end_object(&w);
    ck__jw_keys(&w, "users");
    session_users_write(&w, st, d ? d->users_from : 0);
    ck__jw_keys(&w, "constraints");
    session_strs_write(&w, d ? d->constraints : &st->constraints);
    if (d) {
        ck__jw_keys(&w, "files");
        ck__jw_begin_array(&w);
        for (size_t i = 0; d->files && i < d->files->n; i++) {
            const ck__str *f = &d->files->v[i];
            ck__jw_begin_array(&w);
            ck__jw_string(&w, f->len && f->s[0] == 'm' ? "m" : "r", 1);
            ck__jw_string(&w, f->s + (f->len ? 1 : 0), f->len ? f->len - 1 : 0);
            ck__jw_end_array(&w);
        }
        ck__jw_end_array(&w);
    } else {
        ck__jw_keys(&w, "files_read");
        session_strs_write(&w, &st->files_read);
        ck__jw_keys(&w, "files_modified");
        session_strs_write(&w, &st->files_modified);
    }
    ck__jw_keys(&w, "identifiers");
    session_idents_write(&w, d ? d->idents : st->idents);
    if (!d) {
        ck__jw_keys(&w, "offloads");
        ck__jw_begin_array(&w);
        for (size_t i = 0; i < st->n_offloads; i++) ck__offload_write(&w, &st->offloads[i]);
        ck__jw_end_array(&w);
    }
    ck__jw_keys(&w, "archives");
    ck__jw_begin_array(&w);
    for (size_t i = d ? d->archives_from : 0; i < st->n_archives; i++)
        session_archive_write(&w, &st->archives[i]);
    ck__jw_end_array(&w);
    ck__jw_keys(&w, "compactions");
    ck__jw_u64(&w, st->compactions);
    ck__jw_keys(&w, "compacted");
    ck__jw_u64(&w, st->compacted);
    ck__jw_keys(&w, "usage_factor");
    ck__jw_double(&w, st->factor);
    ck__jw_keys(&w, "usage");
    ck__jw_begin_array(&w);
    for (unsigned i = 0; i < st->n_usage; i++) ck__jw_double(&w, st->usage[i]);
    ck__jw_end_array(&w);
    ck__jw_end_object(&w);
    return out->failed ? CK_ENOMEM : CK_OK;
}

/* ---- reading a record back: every value is checked before it is used ---- */

/* Records may be rewritten by anyone who can write the store, so nothing in one is trusted:
 * strings are bounded, counts must be integers in range, and anything that does not check
 * out makes the whole record unusable rather than half-applied. */
#define SESSION_TEXT_MAX ((size_t)64 << 20)
#define SESSION_COUNT_MAX ((uint64_t)1 << 53)

/* A string member (NULL when absent or null and `optional`). */
static int session_str(const ck__jval *obj, const char *key, const char **out, size_t *len,
                       int optional) {
    const ck__jval *v = ck__jgets(obj, key);
    *out = NULL;
    *len = 0;
    if (!v || ck__jis(v, CK__JNULL)) return optional ? CK_OK : CK_ESYNTAX;
    const char *s = ck__jstr(v, len);
    if (!s || *len > SESSION_TEXT_MAX) return CK_ESYNTAX;
    *out = s;
    return CK_OK;
}

/* A string member that must hold no NUL (refs, paths: used as C strings). */
static int session_cstr(const ck__jval *obj, const char *key, const char **out, int optional) {
    size_t len;
    int rc = session_str(obj, key, out, &len, optional);
    if (!rc && *out && memchr(*out, '\0', len)) return CK_ESYNTAX;
    return rc;
}

static int session_uint(const ck__jval *v, uint64_t max, uint64_t *out) {
    uint64_t x;
    if (!ck__ju64(v, &x) || x > max) return CK_ESYNTAX;
    *out = x;
    return CK_OK;
}

static int session_field_uint(const ck__jval *obj, const char *key, uint64_t max,
                              uint64_t *out) {
    return session_uint(ck__jgets(obj, key), max, out);
}

/* Exactly 16 hex digits. */
static int session_hex(const ck__jval *obj, const char *key, uint64_t *out) {
    const char *s;
    size_t len;
    if (session_str(obj, key, &s, &len, 0) || len != 16) return CK_ESYNTAX;
    uint64_t v = 0;
    for (size_t i = 0; i < 16; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return CK_ESYNTAX;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return CK_OK;
}

static int session_offload(ck__state *st, const ck__jval *v) {
    const char *id, *ref, *tool, *path;
    size_t il, tl;
    uint64_t bytes, lines, hash = 0;
    if (!ck__jis(v, CK__JOBJECT) || session_str(v, "tool_call_id", &id, &il, 0) ||
        session_cstr(v, "ref", &ref, 0) || session_str(v, "tool_name", &tool, &tl, 0) ||
        session_cstr(v, "path", &path, 0) ||
        session_field_uint(v, "bytes", SESSION_COUNT_MAX, &bytes) ||
        session_field_uint(v, "lines", SESSION_COUNT_MAX, &lines) || session_hex(v, "hash", &hash) ||
        !ref[0])
        return CK_ESYNTAX;
    ck__offload o = {(char *)id, il, (char *)ref, (char *)tool, tl, (char *)path, bytes, lines,
                     hash, 0};
    return ck__state_add_offload(st, &o);
}

static int session_archive(ck__state *st, const ck__jval *v) {
    const char *ref, *path;
    uint64_t first, end, bytes, lines;
    if (!ck__jis(v, CK__JOBJECT) || session_cstr(v, "ref", &ref, 0) ||
        session_cstr(v, "path", &path, 0) ||
        session_field_uint(v, "first", SESSION_COUNT_MAX, &first) ||
        session_field_uint(v, "end", SESSION_COUNT_MAX, &end) ||
        session_field_uint(v, "bytes", SESSION_COUNT_MAX, &bytes) ||
        session_field_uint(v, "lines", SESSION_COUNT_MAX, &lines) || first > end || !ref[0])
        return CK_ESYNTAX;
    ck__archive a = {(char *)ref, (char *)path, (size_t)first, (size_t)end, bytes, lines};
    return ck__state_add_archive(st, &a);
}

static int session_user(ck__state *st, const ck__jval *v) {
    const char *text, *ref;
    size_t tl;
    uint64_t line;
    if (!ck__jis(v, CK__JOBJECT) || session_str(v, "text", &text, &tl, 0) ||
        session_cstr(v, "ref", &ref, 1) ||
        session_field_uint(v, "line", SESSION_COUNT_MAX, &line))
        return CK_ESYNTAX;
    return ck__state_add_user(st, text, tl, ref, line);
}

static int session_ident(ck__state *st, const ck__jval *v) {
    size_t len;
    const char *id = ck__jstr(ck__jat(v, 0), &len);
    uint64_t seq, count, prio;
    if (ck__jcount(v) != 4 || !ck__jis(v, CK__JARRAY) || !id ||
        session_uint(ck__jat(v, 1), SESSION_COUNT_MAX, &seq) ||
        session_uint(ck__jat(v, 2), UINT32_MAX, &count) ||
        session_uint(ck__jat(v, 3), CK__IDENT_ACTED, &prio))
        return CK_ESYNTAX;
    return ck__idents_add(st->idents, id, len, (size_t)seq, (unsigned)count, (unsigned)prio);
}

/* Runs `fn` over each item of the array `key` of `obj` (absent: none; not an array: bad). */
static int session_each(ck__state *st, const ck__jval *obj, const char *key,
                        int (*fn)(ck__state *, const ck__jval *)) {
    const ck__jval *arr = ck__jgets(obj, key);
    if (!arr) return CK_OK;
    if (!ck__jis(arr, CK__JARRAY)) return CK_ESYNTAX;
    for (size_t i = 0; i < ck__jcount(arr); i++) {
        int rc = fn(st, ck__jat(arr, i));
        if (rc) return rc;
    }
    return CK_OK;
}

static int session_constraint(ck__state *st, const ck__jval *v) {
    size_t len;
    const char *s = ck__jstr(v, &len);
    if (!s) return CK_ESYNTAX;
    return ck__strs_push_unique(&st->constraints, s, len);
}

static int session_file_touch(ck__state *st, const ck__jval *v) {
    size_t kl, pl;
    const char *k = ck__jstr(ck__jat(v, 0), &kl), *p = ck__jstr(ck__jat(v, 1), &pl);
    if (ck__jcount(v) != 2 || !k || !p || kl != 1 || (k[0] != 'r' && k[0] != 'm'))
        return CK_ESYNTAX;
    return ck__state_touch_file(st, k[0], p, pl);
}

static int session_file_read(ck__state *st, const ck__jval *v) {
    size_t len;
    const char *s = ck__jstr(v, &len);
    return s ? ck__state_touch_file(st, 'r', s, len) : CK_ESYNTAX;
}

static int session_file_modified(ck__state *st, const ck__jval *v) {
    size_t len;
    const char *s = ck__jstr(v, &len);
    return s ? ck__state_touch_file(st, 'm', s, len) : CK_ESYNTAX;
}

/* The usage correction: readings and the factor, each within the clamp observe_usage uses. */
static int session_usage(ck__state *st, const ck__jval *state) {
    const ck__jval *factor = ck__jgets(state, "usage_factor"), *usage = ck__jgets(state, "usage");
    double f;
    if (factor) {
        if (!ck__jdouble(factor, &f) || !(f >= 0.5) || !(f <= 2.0)) return CK_ESYNTAX;
        st->factor = f;
    }
    if (usage && !ck__jis(usage, CK__JARRAY)) return CK_ESYNTAX;
    st->n_usage = 0;
    for (size_t i = 0; i < ck__jcount(usage); i++) {
        if (st->n_usage == 5 || !ck__jdouble(ck__jat(usage, i), &f) || !(f >= 0.5) ||
            !(f <= 2.0))
            return CK_ESYNTAX;
        st->usage[st->n_usage++] = f;
    }
    return CK_OK;
}

/* Applies record `r` to `st` (a scratch copy: the caller keeps it only on success). */
static int session_apply(ck__state *st, const ck__jval *r, int *snapshot) {
    const ck__jval *state = ck__jgets(r, "state");
    const ck__jval *covered = ck__jgets(r, "covered");
    if (!ck__jis(r, CK__JOBJECT) || !ck__jis(state, CK__JOBJECT)) return CK_ESYNTAX;
    size_t kl;
    const char *kind = ck__jstr(ck__jgets(state, "kind"), &kl);
    if (!kind) return CK_ESYNTAX;
    *snapshot = strcmp(kind, "snapshot") == 0;
    if (!*snapshot && strcmp(kind, "delta") != 0) return CK_ESYNTAX;
    int rc = CK_OK;
    if (*snapshot) {
        ck__state fresh;
        if (ck__state_init(&fresh)) return CK_ENOMEM;
        fresh.records = st->records;
        ck__state_dispose(st);
        *st = fresh;
        rc = session_each(st, state, "users", session_user);
        if (!rc) rc = session_each(st, state, "constraints", session_constraint);
        if (!rc) rc = session_each(st, state, "files_read", session_file_read);
        if (!rc) rc = session_each(st, state, "files_modified", session_file_modified);
        if (!rc) rc = session_each(st, state, "offloads", session_offload);
    } else {
        rc = session_each(st, state, "users", session_user);
        if (!rc) rc = session_each(st, state, "constraints", session_constraint);
        if (!rc) rc = session_each(st, state, "files", session_file_touch);
        /* A delta's new offloads are the record's own "offloaded" list. */
        if (!rc) rc = session_each(st, r, "offloaded", session_offload);
    }
    if (!rc) rc = session_each(st, state, "identifiers", session_ident);
    if (!rc) rc = ck__idents_prune_to(st->idents, CK__STATE_IDENTS);
    if (!rc) rc = session_each(st, state, "archives", session_archive);
    const ck__jval *origin = ck__jgets(state, "origin");
    uint64_t on = 0;
    if (!rc && (!ck__jis(origin, CK__JOBJECT) ||
                session_field_uint(origin, "count", SIZE_MAX, &on) ||
                session_hex(origin, "fingerprint", &st->origin_fp)))
        rc = CK_ESYNTAX;
    st->origin_n = (size_t)on;
    if (!rc && (session_field_uint(state, "compactions", SESSION_COUNT_MAX, &st->compactions) ||
                session_field_uint(state, "compacted", SESSION_COUNT_MAX, &st->compacted)))
        rc = CK_ESYNTAX;
    if (!rc) rc = session_usage(st, state);
    if (rc) return rc;
    /* The checkpoint: text, anchors and what it covers replace the state's. */
    const char *checkpoint;
    size_t n;
    if (session_str(r, "checkpoint", &checkpoint, &n, 1)) return CK_ESYNTAX;
    ck_anchors_free(st->anchors);
    st->anchors = NULL;
    ck__free(st->checkpoint);
    st->checkpoint = NULL;
    st->checkpoint_len = 0;
    st->active = 0;
    st->covered = 0;
    if (!checkpoint) return CK_OK;
    uint64_t count;
    size_t ml = strlen(ck_checkpoint_marker());
    if (!ck__jis(covered, CK__JOBJECT) || session_field_uint(covered, "count", SIZE_MAX, &count) ||
        session_hex(covered, "fingerprint", &st->fingerprint) || n < ml ||
        memcmp(checkpoint, ck_checkpoint_marker(), ml) != 0)
        return CK_ESYNTAX;
    st->covered = (size_t)count;
    st->checkpoint = ck__strndup(checkpoint, n);
    st->checkpoint_len = n;
    st->anchors = ck_anchors_new();
    if (!st->checkpoint || !st->anchors) return CK_ENOMEM;
    const ck__jval *anchors = ck__jgets(r, "anchors");
    if (!ck__jis(anchors, CK__JOBJECT)) return CK_ESYNTAX;
    for (int k = 0; k < CK_ANCHOR_COUNT; k++) {
        const char *v;
        size_t al;
        if (session_str(anchors, ck_anchor_key((ck_anchor)k), &v, &al, 1)) return CK_ESYNTAX;
        if (v && (rc = ck_anchors_set(st->anchors, (ck_anchor)k, v, al))) return rc;
    }
    st->active = 1;
    return CK_OK;
}

int ck__state_apply_record(ck__state *st, const char *line, size_t len, int *snapshot) {
    int snap = 0;
    if (snapshot) *snapshot = 0;
    ck__jread_options opts = {CK__JREAD_NO_DUPLICATES, 64};
    ck_error jerr;
    ck__jdoc *doc = ck__jread(line, len, opts, &jerr);
    if (!doc) return jerr.code == CK_ENOMEM ? CK_ENOMEM : CK_ESYNTAX;
    const ck__jval *r = ck__jdoc_root(doc);
    /* The record is applied to a copy, which replaces the state only when all of it checked
     * out; a record id tells how many records the log held. */
    ck__state work;
    int rc = ck__state_copy_lists(&work, st);
    if (!rc) {
        for (size_t i = 0; !rc && i < st->n_offloads; i++)
            rc = ck__state_add_offload(&work, &st->offloads[i]);
        work.records = st->records;
        work.origin_n = st->origin_n;
        work.origin_fp = st->origin_fp;
        work.compactions = st->compactions;
        work.compacted = st->compacted;
        memcpy(work.usage, st->usage, sizeof work.usage);
        work.n_usage = st->n_usage;
        work.factor = st->factor;
    }
    if (!rc) rc = session_apply(&work, r, &snap);
    size_t il;
    const char *id = ck__jstr(ck__jgets(r, "id"), &il);
    if (!rc && id && !memchr(id, '\0', il)) {
        const char *colon = strrchr(id, ':');
        char *end = NULL;
        unsigned long long seq = colon ? strtoull(colon + 1, &end, 10) : 0;
        if (colon && end && !*end && seq < SESSION_COUNT_MAX) work.records = seq;
    }
    ck__jdoc_free(doc);
    if (rc) {
        ck__state_dispose(&work);
        return rc;
    }
    ck__state_dispose(st);
    *st = work;
    if (snapshot) *snapshot = snap;
    return CK_OK;
}
