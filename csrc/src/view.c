/* ck_view: a plan for an output message list, applied by the host to its own objects. */
#include <string.h>

#include "./alloc.h"
#include "./internal.h"

typedef struct out_rec {
    ck_op op;
    size_t src;
    ck_role role;
    uint32_t flags;
    size_t first_part;
    size_t n_parts;
} out_rec;

struct ck_view {
    out_rec *msgs;
    size_t n_msgs, cap_msgs;
    ck_out_part *parts;
    size_t n_parts, cap_parts;
    int open; /* a message was begun and not yet ended */
    char **owned; /* texts the view owns (placeholders made for it) */
    size_t n_owned, cap_owned;
};

ck_view *ck__view_new(void) { return ck__calloc(1, sizeof(ck_view)); }

void ck_view_free(ck_view *self) {
    if (!self) return;
    for (size_t i = 0; i < self->n_owned; i++) ck__free(self->owned[i]);
    ck__free(self->owned);
    ck__free(self->msgs);
    ck__free(self->parts);
    ck__free(self);
}

size_t ck_view_count(const ck_view *self) { return self ? self->n_msgs : 0; }

int ck_view_get(const ck_view *self, size_t i, ck_out_msg *out) {
    if (!self || !out || i >= self->n_msgs) return CK_EINVAL;
    const out_rec *m = &self->msgs[i];
    out->op = m->op;
    out->src = m->src;
    out->role = m->role;
    out->flags = m->flags;
    out->parts = m->op == CK_OP_KEEP ? NULL : self->parts + m->first_part;
    out->n_parts = m->op == CK_OP_KEEP ? 0 : m->n_parts;
    return CK_OK;
}

int ck_view_is_identity(const ck_view *self) {
    if (!self) return 0;
    for (size_t i = 0; i < self->n_msgs; i++)
        if (self->msgs[i].op != CK_OP_KEEP || self->msgs[i].src != i) return 0;
    return 1;
}

const char *ck__view_own(ck_view *v, const char *text, size_t len) {
    if (ck__grow((void **)&v->owned, &v->cap_owned, v->n_owned + 1, sizeof *v->owned))
        return NULL;
    char *copy = ck__strndup(text, len);
    if (copy) v->owned[v->n_owned++] = copy;
    return copy;
}

int ck__view_begin(ck_view *v, ck_op op, size_t src, ck_role role, uint32_t flags) {
    if (ck__grow((void **)&v->msgs, &v->cap_msgs, v->n_msgs + 1, sizeof *v->msgs))
        return CK_ENOMEM;
    out_rec *m = &v->msgs[v->n_msgs++];
    m->op = op;
    m->src = src;
    m->role = role;
    m->flags = flags;
    m->first_part = v->n_parts;
    m->n_parts = 0;
    v->open = op != CK_OP_KEEP;
    return CK_OK;
}

int ck__view_keep(ck_view *v, const ck_history *h, size_t src) {
    return ck__view_begin(v, CK_OP_KEEP, src, h->msgs[src].role, h->msgs[src].flags);
}

static int push_part(ck_view *v, const ck_out_part *p) {
    if (ck__grow((void **)&v->parts, &v->cap_parts, v->n_parts + 1, sizeof *v->parts))
        return CK_ENOMEM;
    v->parts[v->n_parts++] = *p;
    v->msgs[v->n_msgs - 1].n_parts++;
    return CK_OK;
}

int ck__view_add_src_part(ck_view *v, const ck_history *h, size_t msg, size_t part) {
    ck_out_part p;
    p.src_msg = msg;
    p.src_part = part;
    p.replaced = 0;
    p.part = ck__msg_parts(h, msg)[part];
    return push_part(v, &p);
}

int ck__view_add_replaced_part(ck_view *v, const ck_history *h, size_t msg, size_t part,
                               const char *text, size_t len) {
    ck_out_part p;
    p.src_msg = msg;
    p.src_part = part;
    p.replaced = 1;
    p.part = ck__msg_parts(h, msg)[part];
    p.part.text = text;
    p.part.text_len = len;
    return push_part(v, &p);
}

int ck__view_add_new_part(ck_view *v, const ck_part *part) {
    ck_out_part p;
    p.src_msg = CK_NONE;
    p.src_part = CK_NONE;
    p.replaced = 0;
    p.part = *part;
    return push_part(v, &p);
}

void ck__view_end(ck_view *v, const ck_history *h) {
    if (!v->open || !v->n_msgs) return;
    v->open = 0;
    out_rec *m = &v->msgs[v->n_msgs - 1];
    if (m->op != CK_OP_EDIT || m->n_parts != h->msgs[m->src].n_parts ||
        (m->flags & CK_MSG_CACHE_BREAKPOINT))
        return;
    const ck_out_part *p = v->parts + m->first_part;
    for (size_t k = 0; k < m->n_parts; k++)
        if (p[k].src_msg != m->src || p[k].src_part != k || p[k].replaced) return;
    /* Identical to the source: hand back the source object itself. */
    v->n_parts -= m->n_parts;
    m->op = CK_OP_KEEP;
    m->n_parts = 0;
}

int ck__view_copy_msg(ck_view *v, const ck_out_msg *m) {
    int rc = ck__view_begin(v, m->op, m->src, m->role, m->flags);
    for (size_t k = 0; k < m->n_parts && !rc; k++) rc = push_part(v, &m->parts[k]);
    v->open = 0;
    return rc;
}

static int out_side(ck_role r) { return r == CK_ROLE_ASSISTANT; }

/* The number of parts of out message i (a KEEP's source's). */
static size_t out_n_parts(const ck_view *v, size_t i, const ck_history *src) {
    const out_rec *m = &v->msgs[i];
    return m->op == CK_OP_KEEP ? src->msgs[m->src].n_parts : m->n_parts;
}

/* Part k of out message i: its kind (a KEEP's from its source). */
static ck_part_kind out_part_kind(const ck_view *v, size_t i, const ck_history *src, size_t k) {
    const out_rec *m = &v->msgs[i];
    return m->op == CK_OP_KEEP ? ck__msg_parts(src, m->src)[k].kind
                               : v->parts[m->first_part + k].part.kind;
}

/* Appends the parts of out message i of v to the message t is building. */
static int join_parts(ck_view *t, const ck_view *v, size_t i, const ck_history *src) {
    const out_rec *m = &v->msgs[i];
    int rc = CK_OK;
    if (m->op == CK_OP_KEEP) {
        for (size_t k = 0; k < src->msgs[m->src].n_parts && !rc; k++)
            rc = ck__view_add_src_part(t, src, m->src, k);
        return rc;
    }
    for (size_t k = 0; k < m->n_parts && !rc; k++) rc = push_part(t, &v->parts[m->first_part + k]);
    return rc;
}

int ck__view_join_sides(ck_view *v, const ck_history *src) {
    size_t i = 1;
    for (; i < v->n_msgs; i++) /* most views need nothing: find the first join first */
        if (out_side(v->msgs[i].role) == out_side(v->msgs[i - 1].role)) break;
    if (i >= v->n_msgs) return CK_OK;
    ck_view *t = ck__view_new();
    if (!t) return CK_ENOMEM;
    int rc = CK_OK;
    size_t last_src = CK_NONE; /* the source of the last message joined into t's last */
    int last_call = 0;         /* t's last message has a tool call */
    for (i = 0; i < v->n_msgs && !rc; i++) {
        const out_rec *m = &v->msgs[i];
        size_t n = out_n_parts(v, i, src);
        int call = 0;
        for (size_t k = 0; k < n && !call; k++) call = out_part_kind(v, i, src, k) == CK_PART_TOOL_CALL;
        out_rec *prev = t->n_msgs ? &t->msgs[t->n_msgs - 1] : NULL;
        int join = prev && out_side(prev->role) == out_side(m->role) && !last_call &&
                   !(n && out_part_kind(v, i, src, 0) == CK_PART_TOOL_RESULT) &&
                   !(last_src != CK_NONE && m->op != CK_OP_NEW && m->src == last_src + 1);
        if (!join) {
            rc = ck__view_begin(t, m->op, m->src, m->role, m->flags);
            if (!rc && m->op != CK_OP_KEEP) rc = join_parts(t, v, i, src);
            t->open = 0;
        } else {
            if (prev->op == CK_OP_KEEP) {
                /* The first one's parts, now listed: the message becomes an edit of it. */
                prev->op = CK_OP_EDIT;
                for (size_t k = 0; k < src->msgs[prev->src].n_parts && !rc; k++)
                    rc = ck__view_add_src_part(t, src, prev->src, k);
            } else if (prev->op == CK_OP_NEW && m->op != CK_OP_NEW) {
                prev->op = CK_OP_EDIT;
                prev->src = m->src;
                prev->role = m->role;
                prev->flags = m->flags;
            }
            if (!rc) rc = join_parts(t, v, i, src);
        }
        last_src = m->op == CK_OP_NEW ? CK_NONE : m->src;
        last_call = call; /* (a join needs !last_call) */
    }
    if (!rc) { /* t's lists become v's; v keeps the texts it owns */
        out_rec *msgs = v->msgs;
        ck_out_part *parts = v->parts;
        v->msgs = t->msgs;
        v->n_msgs = t->n_msgs;
        v->cap_msgs = t->cap_msgs;
        v->parts = t->parts;
        v->n_parts = t->n_parts;
        v->cap_parts = t->cap_parts;
        t->msgs = msgs;
        t->parts = parts;
    }
    ck_view_free(t);
    return rc;
}

int ck__history_from_view(const ck_view *v, const ck_history *src, ck_history **out) {
    *out = NULL;
    ck_history *h = ck_history_new(CK_HISTORY_TRUSTED_UTF8);
    if (!h) return CK_ENOMEM;
    int rc = CK_OK;
    for (size_t i = 0; i < v->n_msgs && !rc; i++) {
        ck_out_msg m;
        rc = ck_view_get(v, i, &m);
        if (rc) break;
        if (m.op == CK_OP_KEEP && m.role == src->msgs[m.src].role) {
            /* The same message: its hashes too, rather than its bytes hashed again. */
            rc = ck__history_add_kept(h, src, m.src, m.flags);
            continue;
        }
        rc = ck_history_add_message(h, m.role, m.flags);
        if (m.op == CK_OP_KEEP) {
            const ck_part *parts = ck__msg_parts(src, m.src);
            for (size_t k = 0; k < src->msgs[m.src].n_parts && !rc; k++)
                rc = ck_history_add_part(h, &parts[k], NULL);
        } else {
            for (size_t k = 0; k < m.n_parts && !rc; k++)
                rc = ck_history_add_part(h, &m.parts[k].part, NULL);
        }
    }
    if (rc) {
        ck_history_free(h);
        return rc;
    }
    *out = h;
    return CK_OK;
}

int ck__view_compose(const ck_view *outer, const ck_view *inner, const ck_history *src,
                     ck_view **out) {
    *out = NULL;
    ck_view *v = ck__view_new();
    if (!v) return CK_ENOMEM;
    int rc = CK_OK;
    for (size_t i = 0; i < outer->n_msgs && !rc; i++) {
        ck_out_msg o, m;
        memset(&m, 0, sizeof m);
        if ((rc = ck_view_get(outer, i, &o))) break;
        if (o.op == CK_OP_KEEP) {
            rc = ck_view_get(inner, o.src, &m);
            if (!rc) rc = ck__view_copy_msg(v, &m);
            continue;
        }
        if (o.op == CK_OP_EDIT) {
            if ((rc = ck_view_get(inner, o.src, &m))) break;
            uint32_t mark = o.flags & CK_MSG_CACHE_BREAKPOINT;
            rc = m.op == CK_OP_NEW ? ck__view_begin(v, CK_OP_NEW, CK_NONE, m.role, mark)
                                   : ck__view_begin(v, CK_OP_EDIT, m.src, m.role, m.flags | mark);
        } else {
            rc = ck__view_begin(v, CK_OP_NEW, CK_NONE, o.role, o.flags & CK_MSG_CACHE_BREAKPOINT);
        }
        for (size_t k = 0; k < o.n_parts && !rc; k++) {
            ck_out_part p = o.parts[k];
            if (p.src_msg != CK_NONE) {
                ck_out_msg im;
                if ((rc = ck_view_get(inner, p.src_msg, &im))) break;
                if (im.op != CK_OP_KEEP) {
                    const ck_out_part *ip = &im.parts[p.src_part];
                    p.src_msg = ip->src_msg;
                    p.src_part = ip->src_part;
                    p.replaced = p.replaced || ip->replaced;
                } else {
                    p.src_msg = im.src;
                }
            }
            rc = push_part(v, &p);
        }
        ck__view_end(v, src);
    }
    if (rc) {
        ck_view_free(v);
        return rc;
    }
    *out = v;
    return CK_OK;
}
