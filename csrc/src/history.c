/* ck_history: the host's message list as borrowed parts, plus storage the host may borrow. */
#include <string.h>

#include "./alloc.h"
#include "./hash.h"
#include "./idmap.h"
#include "./internal.h"

/* Host strings copied into the history live in a chain of blocks that is freed at once. */
struct ck__arena_block {
    struct ck__arena_block *next;
    size_t size, used;
    _Alignas(max_align_t) unsigned char data[];
};

#define ARENA_BLOCK_MIN (64 * 1024)
#define MAX_MESSAGES ((size_t)1 << 31)

ck_history *ck_history_new(uint32_t flags) {
    ck_history *self = ck__calloc(1, sizeof *self);
    if (!self) return NULL;
    self->flags = flags;
    return self;
}

static void arena_free(struct ck__arena_block *block) {
    while (block) {
        struct ck__arena_block *next = block->next;
        ck__free(block);
        block = next;
    }
}

void ck_history_free(ck_history *self) {
    if (!self) return;
    arena_free(self->arena);
    ck__json_doc_free(self->json);
    ck__free(self->msg_values);
    ck__free(self->part_values);
    ck__free(self->inner_values);
    ck__free(self->msgs);
    ck__free(self->parts);
    ck__free(self->id_num);
    ck__free(self->id_slots);
    ck__free(self);
}

void ck_history_clear(ck_history *self) {
    if (!self) return;
    self->n_msgs = 0;
    self->n_parts = 0;
    if (self->id_slots) memset(self->id_slots, 0, self->cap_id_slots * sizeof *self->id_slots);
    self->n_id_slots = 0;
    self->n_ids = 0;
    self->dialect = CK_FORMAT_AUTO;
    self->dialect_decided = 0;
    ck__json_doc_free(self->json);
    self->json = NULL;
    /* Keep the newest block (usually the largest) for the next fill; drop the others. */
    if (self->arena) {
        arena_free(self->arena->next);
        self->arena->next = NULL;
        self->arena->used = 0;
    }
}

void ck_history_truncate(ck_history *self, size_t n) {
    if (!self || n >= self->n_msgs) return;
    self->n_parts = self->msgs[n].first_part;
    self->n_msgs = n;
    /* The dialect a cut message decided is decided again by what is read next, as a fresh
     * read of the same list would. */
    if (n == 0) {
        self->dialect = CK_FORMAT_AUTO;
        self->dialect_decided = 0;
    } else if (self->dialect_decided && self->decided_at >= n) {
        self->dialect = self->guess;
        self->dialect_decided = 0;
    }
}

char *ck_history_alloc(ck_history *self, size_t size) {
    size_t rounded = (size + 15) & ~(size_t)15;
    if (rounded < size) return NULL;
    struct ck__arena_block *block = self->arena;
    if (!block || block->size - block->used < rounded) {
        size_t want = rounded > ARENA_BLOCK_MIN ? rounded : ARENA_BLOCK_MIN;
        if (want > SIZE_MAX - sizeof *block) return NULL;
        block = ck__malloc(sizeof *block + want);
        if (!block) return NULL;
        block->size = want;
        block->used = 0;
        block->next = self->arena;
        self->arena = block;
    }
    char *out = (char *)block->data + block->used;
    block->used += rounded;
    return out;
}

/* The two hashes a history keeps per message, one step at a time so that add_part can keep
 * them as a message grows: a step for the start, then one per part. The message hash starts
 * from the role (its value is stored in session files: it must not change); the content hash
 * starts from a constant, so that the same parts have the same cost key in any role. */
#define CONTENT_SEED 0x510E527FADE682D1ull

static uint64_t hash_start(uint64_t seed) { return ck__hash_fast(NULL, 0, seed); }

static uint64_t hash_part(uint64_t x, const ck_part *p) {
    x = ck__hash_fast(p->text, p->text_len, x + (uint64_t)p->kind);
    x = ck__hash_fast(p->id, p->id_len, x);
    return ck__hash_fast(p->name, p->name_len, x);
}

uint64_t ck__parts_content(const ck_part *parts, size_t stride, size_t n) {
    uint64_t x = hash_start(CONTENT_SEED);
    const char *at = (const char *)parts;
    for (size_t k = 0; k < n; k++, at += stride)
        x = hash_part(x, (const ck_part *)(const void *)at);
    return x | 1;
}

/* ---- id numbers ----
 *
 * The table maps an id to its number through the first part that has it, so it holds no
 * string of its own (a part's strings live as long as the part). A slot is live while that
 * part is in the history and still has the number; a part cut by ck_history_truncate() and
 * read again, or renumbered by ck__history_rehash(), gets a new number, so its old slot is
 * dead: never matched again, and dropped when the table is rebuilt. A cut thus costs
 * nothing here, and a dead slot can never give a number that a live part does not have. */

static int slot_live(const ck_history *h, const ck__id_slot *s) {
    size_t first = (size_t)s->part - 1;
    return first < h->n_parts && h->id_num[first] == s->num;
}

static void slot_put(ck__id_slot *slots, size_t cap, ck__id_slot s) {
    size_t j = s.hash & (cap - 1);
    while (slots[j].part) j = (j + 1) & (cap - 1);
    slots[j] = s;
}

/* Rebuilds the table with its live slots at most half full after one more. When most
 * numbers given out are dead, the live ones are numbered again from 1 (and every part with
 * them), so that n_ids stays within about twice the distinct ids. */
static int ids_rebuild(ck_history *h) {
    size_t live = 0;
    for (size_t j = 0; j < h->cap_id_slots; j++)
        live += h->id_slots[j].part && slot_live(h, &h->id_slots[j]);
    size_t cap = 16;
    while (cap < (live + 1) * 2) cap *= 2;
    ck__id_slot *slots = ck__calloc(cap, sizeof *slots);
    if (!slots) return CK_ENOMEM;
    uint32_t *renumber = NULL;
    if (h->n_ids > 2 * live + 1024 && !(renumber = ck__calloc(h->n_ids, sizeof *renumber))) {
        ck__free(slots);
        return CK_ENOMEM;
    }
    uint32_t next = 1;
    for (size_t j = 0; j < h->cap_id_slots; j++) {
        ck__id_slot s = h->id_slots[j];
        if (!s.part || !slot_live(h, &s)) continue;
        if (renumber) s.num = renumber[s.num] = next++;
        slot_put(slots, cap, s);
    }
    if (renumber) {
        for (size_t g = 0; g < h->n_parts; g++) h->id_num[g] = renumber[h->id_num[g]];
        h->n_ids = next;
        ck__free(renumber);
    }
    ck__free(h->id_slots);
    h->id_slots = slots;
    h->cap_id_slots = cap;
    h->n_id_slots = live;
    return CK_OK;
}

/* Gives part g (in the history, its id_num 0) the number of its id. */
static int id_number(ck_history *h, size_t g) {
    const ck_part *p = &h->parts[g];
    if (!p->id_len) return CK_OK;
    if ((h->n_id_slots + 1) * 10 > h->cap_id_slots * 7 && ids_rebuild(h)) return CK_ENOMEM;
    uint64_t hash = ck__hash_bytes(p->id, p->id_len);
    size_t cap = h->cap_id_slots, j = hash & (cap - 1);
    for (; h->id_slots[j].part; j = (j + 1) & (cap - 1)) {
        const ck__id_slot *s = &h->id_slots[j];
        if (s->hash != hash || !slot_live(h, s)) continue;
        const ck_part *first = &h->parts[s->part - 1];
        if (first->id_len == p->id_len && memcmp(first->id, p->id, p->id_len) == 0) {
            h->id_num[g] = s->num;
            return CK_OK;
        }
    }
    if (h->n_ids == UINT32_MAX) return CK_ETOOBIG;
    if (!h->n_ids) h->n_ids = 1;
    h->id_slots[j] = (ck__id_slot){hash, (uint32_t)(g + 1), h->n_ids};
    h->id_num[g] = h->n_ids++;
    h->n_id_slots++;
    return CK_OK;
}

size_t *ck__id_index(const ck_history *h) {
    size_t n = h->n_ids ? h->n_ids : 1;
    size_t *index = ck__malloc(n * sizeof *index);
    if (index) memset(index, 0xff, n * sizeof *index);
    return index;
}

int ck__history_rehash(ck_history *h, size_t i) {
    ck__msg *m = &h->msgs[i];
    const ck_part *parts = ck__msg_parts(h, i);
    m->hash = hash_start((uint64_t)m->role + 1);
    m->content = hash_start(CONTENT_SEED);
    for (size_t k = 0; k < m->n_parts; k++) {
        h->id_num[m->first_part + k] = 0;
        m->hash = hash_part(m->hash, &parts[k]);
        m->content = hash_part(m->content, &parts[k]);
    }
    int rc = CK_OK;
    for (size_t k = 0; k < m->n_parts && !rc; k++) rc = id_number(h, m->first_part + k);
    return rc;
}

int ck_history_add_message(ck_history *self, ck_role role, uint32_t flags) {
    if (!self || (unsigned)role > CK_ROLE_OTHER) return CK_EINVAL;
    if (self->n_msgs >= MAX_MESSAGES) return CK_ETOOBIG;
    if (ck__grow((void **)&self->msgs, &self->cap_msgs, self->n_msgs + 1, sizeof *self->msgs))
        return CK_ENOMEM;
    ck__msg *m = &self->msgs[self->n_msgs++];
    m->role = role;
    m->flags = flags;
    m->first_part = self->n_parts;
    m->n_parts = 0;
    m->hash = hash_start((uint64_t)role + 1);
    m->content = hash_start(CONTENT_SEED);
    return CK_OK;
}

static int check_string(const ck_history *self, const char *s, size_t len, const char *field,
                        ck_error *err) {
    size_t index = self->n_msgs - 1;
    if (!s && len) return ck__fail(err, CK_EINVAL, "NULL string with a length", index, "%s", field);
    if (len > CK_MAX_STRING)
        return ck__fail(err, CK_ETOOBIG, CK__MSG_TOO_BIG, index,
                        "messages[%zu].%s", index, field);
    if (self->flags & CK_HISTORY_TRUSTED_UTF8) return CK_OK;
    size_t ok = ck__utf8_valid_prefix(s, len);
    if (ok == len) return CK_OK;
    ck__fail(err, CK_EUTF8, "text is not valid UTF-8", index, "messages[%zu].%s", index, field);
    if (err) err->offset = ok;
    return CK_EUTF8;
}

/* Adds `part` to the newest message, checked, with its id numbered, but not hashed into the
 * message's hashes (the caller does that). */
static int history_push_part(ck_history *self, const ck_part *part, ck_error *err) {
    if (!self || !part) return ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
    if (!self->n_msgs) return ck__fail(err, CK_ESTATE, "a part needs a message", CK_NONE, NULL);
    if ((unsigned)part->kind > CK_PART_OTHER)
        return ck__fail(err, CK_EINVAL, "unknown part kind", self->n_msgs - 1, NULL);
    int rc;
    if ((rc = check_string(self, part->text, part->text_len, "text", err)) ||
        (rc = check_string(self, part->id, part->id_len, "id", err)) ||
        (rc = check_string(self, part->name, part->name_len, "name", err)))
        return rc;
    if (self->n_parts >= UINT32_MAX - 1)
        return ck__fail(err, CK_ETOOBIG, "too many parts", self->n_msgs - 1, NULL);
    if (ck__grow((void **)&self->parts, &self->cap_parts, self->n_parts + 1, sizeof *self->parts) ||
        ck__grow((void **)&self->id_num, &self->cap_id_num, self->n_parts + 1,
                 sizeof *self->id_num))
        return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    size_t g = self->n_parts++;
    ck_part *p = &self->parts[g];
    *p = *part;
    /* Empty strings are normalised to a non-NULL pointer so readers never test for NULL. */
    if (!p->text) p->text = "";
    if (!p->id) p->id = "";
    if (!p->name) p->name = "";
    self->id_num[g] = 0;
    if ((rc = id_number(self, g))) {
        self->n_parts--;
        return ck__fail(err, rc, NULL, self->n_msgs - 1, NULL);
    }
    self->msgs[self->n_msgs - 1].n_parts++;
    return CK_OK;
}

int ck_history_add_part(ck_history *self, const ck_part *part, ck_error *err) {
    int rc = history_push_part(self, part, err);
    if (rc) return rc;
    ck__msg *m = &self->msgs[self->n_msgs - 1];
    const ck_part *p = &self->parts[self->n_parts - 1];
    m->hash = hash_part(m->hash, p);
    m->content = hash_part(m->content, p);
    return CK_OK;
}

int ck__history_add_kept(ck_history *self, const ck_history *src, size_t i, uint32_t flags) {
    const ck__msg *from = &src->msgs[i];
    int rc = ck_history_add_message(self, from->role, flags);
    const ck_part *parts = ck__msg_parts(src, i);
    for (size_t k = 0; k < from->n_parts && !rc; k++) rc = history_push_part(self, &parts[k], NULL);
    if (rc) return rc;
    self->msgs[self->n_msgs - 1].hash = from->hash;
    self->msgs[self->n_msgs - 1].content = from->content;
    return CK_OK;
}

/* Shrinks an array of `elem` byte items to `n` when more than an eighth of it is unused. */
static void fit(void **ptr, size_t *cap, size_t n, size_t elem) {
    if (!*ptr || !n || *cap - n <= *cap / 8) return;
    void *fitted = ck__realloc(*ptr, n * elem);
    if (!fitted) return; /* the larger array is still there */
    *ptr = fitted;
    *cap = n;
}

void ck__history_fit_parts(ck_history *h) {
    fit((void **)&h->parts, &h->cap_parts, h->n_parts, sizeof *h->parts);
    fit((void **)&h->part_values, &h->cap_part_values, h->n_parts, sizeof *h->part_values);
    fit((void **)&h->id_num, &h->cap_id_num, h->n_parts, sizeof *h->id_num);
}

size_t ck_history_count(const ck_history *self) { return self ? self->n_msgs : 0; }

int ck_history_get(const ck_history *self, size_t i, ck_role *role, uint32_t *flags,
                   const ck_part **parts, size_t *n_parts) {
    if (!self || i >= self->n_msgs) return CK_EINVAL;
    const ck__msg *m = &self->msgs[i];
    if (role) *role = m->role;
    if (flags) *flags = m->flags;
    if (parts) *parts = self->parts + m->first_part;
    if (n_parts) *n_parts = m->n_parts;
    return CK_OK;
}

ck_format ck_history_dialect(const ck_history *self) {
    return self ? self->dialect : CK_FORMAT_AUTO;
}

int ck_history_format(const ck_history *self, ck_format requested, ck_format *out,
                      ck_error *err) {
    if (!self || !out || (unsigned)requested >= CK_FORMAT_COUNT)
        return ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
    /* A history read by a dialect is in that dialect. */
    if (self->dialect != CK_FORMAT_AUTO) {
        if (requested != CK_FORMAT_AUTO && requested != self->dialect)
            return ck__fail(err, CK_EFORMAT, "the messages were read in another format",
                            CK_NONE, NULL);
        *out = self->dialect;
        return CK_OK;
    }
    if (requested > CK_FORMAT_ANTHROPIC)
        return ck__fail(err, CK_EFORMAT, "a history made part by part is OpenAI or Anthropic",
                        CK_NONE, NULL);
    ck_format seen = CK_FORMAT_AUTO;
    for (size_t i = 0; i < self->n_msgs; i++) {
        const ck_part *parts = ck__msg_parts(self, i);
        for (size_t k = 0; k < self->msgs[i].n_parts; k++) {
            ck_format f = (parts[k].flags & CK_PART_ANTHROPIC)
                              ? CK_FORMAT_ANTHROPIC
                              : ((parts[k].flags & CK_PART_OPENAI) ? CK_FORMAT_OPENAI
                                                                   : CK_FORMAT_AUTO);
            if (f == CK_FORMAT_AUTO) continue;
            if (requested != CK_FORMAT_AUTO && f != requested)
                return ck__fail(err, CK_EFORMAT,
                                f == CK_FORMAT_ANTHROPIC
                                    ? "an Anthropic-shaped message in the openai format"
                                    : "an OpenAI-shaped message in the anthropic format",
                                i, "messages[%zu]", i);
            if (seen != CK_FORMAT_AUTO && f != seen)
                return ck__fail(err, CK_EFORMAT, "messages mix OpenAI and Anthropic shapes", i,
                                "messages[%zu]", i);
            seen = f;
        }
    }
    if (requested != CK_FORMAT_AUTO) *out = requested;
    else *out = seen == CK_FORMAT_AUTO ? CK_FORMAT_OPENAI : seen;
    return CK_OK;
}
