/* Private: the compactor's state and one compaction in progress, shared by compactor.c (tiers,
 * cut points, views) and checkpoint.c (the checkpoint text, the summary request, the audit
 * record and resuming from it). */
#ifndef CK_COMPACTOR_H_
#define CK_COMPACTOR_H_

#include <time.h>

#include "./buf.h"
#include "./extract.h"
#include "./idmap.h"
#include "./internal.h"
#include "./store.h"

/* An owned string. */
typedef struct ck__str {
    char *s;
    size_t len;
} ck__str;

/* A growable list of owned strings. */
typedef struct ck__strs {
    ck__str *v;
    size_t n, cap;
} ck__strs;

int ck__strs_push(ck__strs *l, const char *s, size_t len);
/* Pushes unless an equal string is present; moves an equal one to the end (newest). */
int ck__strs_push_unique(ck__strs *l, const char *s, size_t len);
void ck__strs_dispose(ck__strs *l);

/* One tool output moved to the evidence store. */
typedef struct ck__offload {
    char *id;   /* the tool-call id */
    char *ref;  /* the evidence id it is stored under: the id, or "<id>#<hash>" when the id
                   already held another output (agents that reuse ids) */
    char *tool;
    char *path;
    uint64_t bytes, lines;
    uint64_t hash; /* of the output's text; 0 when unknown (records of older versions) */
} ck__offload;

/* Frees the strings of an offload record. */
void ck__offload_dispose(ck__offload *o);
/* A 64-bit hash of text, fast enough for every output and message on every call. */
uint64_t ck__hash_text(const char *data, size_t len);

/* A user message carried in the checkpoint: its text and, when it may need excerpting, the
 * evidence id under which its full text is stored. */
typedef struct ck__user_msg {
    char *text;
    size_t len;
    char *ref;
} ck__user_msg;

/* What survives between compactions (and is saved in every audit record). */
typedef struct ck__state {
    int active;            /* a checkpoint exists */
    size_t covered;        /* history messages the checkpoint covers, from the start */
    uint64_t fingerprint;  /* of those messages */
    ck_anchors *anchors;
    char *checkpoint;      /* the rendered checkpoint message text */
    size_t checkpoint_len;
    ck__user_msg *users;
    size_t n_users, cap_users;
    ck__strs constraints;
    ck__strs files_read, files_modified;
    ck__offload *offloads;
    size_t n_offloads, cap_offloads;
    ck__idmap offloaded; /* ref -> index into offloads (keys borrowed from offloads[i].ref) */
    ck__idents *idents;
    uint64_t records;    /* audit records written in this session */
    double usage[5];     /* the last readings of provider count / own estimate */
    unsigned n_usage;
    double factor;       /* the correction applied to estimates (median of usage) */
    uint64_t last_view;  /* estimated tokens of the last view returned */
    int over_noted;      /* a record already said the view cannot get under the soft limit */
    size_t futile_cut;   /* a fold of [.., futile_cut) of the history with this fingerprint did
                            not shrink the view: it is not asked for again (0: none) */
    uint64_t futile_fp;
    size_t compacted;    /* messages compacted over the session */
} ck__state;

/* Message token costs by content hash (see compactor.c). */
typedef struct ck__tokcache {
    struct ck__tokslot {
        uint64_t key, tokens; /* key 0: free */
    } *slots;
    size_t cap, count; /* cap: a power of two, or 0 */
} ck__tokcache;

void ck__tokcache_dispose(ck__tokcache *tc);

/* Tokens of a text by the compactor's counter or estimator (uncached). */
uint64_t ck__compactor_text_tokens(const ck_compactor *self, const char *text, size_t len);

struct ck_compactor {
    ck_compactor_options opt; /* defaults filled in; the strings point at the copies below */
    char *session_id;
    char *store_dir;
    ck__store *store;
    ck_retention *retention; /* copies, tool patterns owned */
    size_t n_retention;
    ck_evidence_backend backend;
    ck__strs tool_refs; /* with a backend: refs stored by ck_compactor_offload() */
    ck__tokcache tokcache;
    ck__state st;
    int resume_error; /* the audit log existed but its last record could not be used */
};

struct ck_compaction {
    ck_compactor *owner;
    const ck_history *src; /* the host's history */
    ck_history *fixed;     /* src with its tool-call pairs repaired, or NULL when src is valid */
    ck_view *repair;       /* the repair, over src */
    const ck_history *h;   /* what the compaction works on: fixed or src */
    ck_format format;
    ck_tier tier;
    int finished;
    uint64_t tool_tokens, tokens_before, tokens_after;
    size_t base;     /* first message not covered by the state's checkpoint */
    size_t marker;   /* index of a checkpoint message found in the history, or CK_NONE */
    size_t tail;     /* first message of the tail */
    size_t task;     /* the first user message (pinned unless the options say not), or
                        CK_NONE */
    size_t cut;      /* end of the span to compact; == base when nothing is compacted */
    int summarize;   /* a model summary is wanted */
    uint64_t *tok;   /* per message of h, with placeholders applied */
    char **subst;    /* per part of h: the placeholder text replacing it, or NULL */
    size_t *subst_len;
    unsigned char *failed; /* per part of h: ck__part_failed()'s verdicts, so that the
                              placeholders and the checkpoint work each out once */
    size_t failed_offloads;    /* outputs the store could not take (they stay in the view) */
    ck__offload *new_offloads; /* offloads done by this compaction (borrowed from owner) */
    size_t n_new_offloads, cap_new_offloads;
    ck__buf prompt;
    char *previous; /* the previous checkpoint text handed to the summarizer */
    size_t previous_len;
    char *reply;
    size_t reply_len;
    int have_reply;
    char *failure; /* why the summarizer failed */
    char *fallback; /* why the extractive summarizer was used instead, for the record */
    ck__buf notes;   /* errors for the record ("; "-separated) */
    char *checkpoint;
    size_t checkpoint_len;
    ck_anchors *anchors; /* the anchors of the new checkpoint */
    ck__state *next;     /* the state's lists with this compaction's span folded in; they
                            replace the state's lists when the compaction is kept */
    ck_view *view;
    char *record;
    size_t record_len;
    size_t summarized; /* messages folded into the checkpoint */
    struct timespec started;
};

/* Appends a note for the record's "error" field. */
void ck__compaction_note(ck_compaction *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* True when message i of h is a user message authored by the user (text, no tool results) and
 * not a checkpoint. */
int ck__is_user_text(const ck_history *h, size_t i);
/* True when message i of the compaction's history is pinned (system, developer, the task). */
int ck__compaction_pinned(const ck_compaction *c, size_t i);
/* True when message i of h is a checkpoint message (its first text starts with the marker). */
int ck__is_checkpoint_msg(const ck_history *h, size_t i);
/* The joined text parts of message i (borrowed when there is one part, else built in *scratch). */
const char *ck__msg_text(const ck_history *h, size_t i, ck__buf *scratch, size_t *len);

/* checkpoint.c */

/* Builds c->prompt for the span [c->base, c->cut) (pinned messages shown as context, marked
 * as staying in the view), bounded so the request fits the window with the reply. Returns
 * CK_OK or CK_ENOMEM. */
int ck__build_request(ck_compaction *c);

/* Folds the span into the state (user messages, constraints, identifiers, files) and renders
 * the bounded checkpoint text into c->checkpoint. Returns CK_OK or CK_ENOMEM. */
int ck__build_checkpoint(ck_compaction *c, const ck_anchors *anchors);

/* Builds c->record (one JSON line). Returns CK_OK or CK_ENOMEM. */
int ck__build_record(ck_compaction *c);

/* Restores the state from a record line. Returns CK_OK, CK_ENOMEM or CK_ESYNTAX. */
int ck__state_from_record(ck_compactor *self, const char *line, size_t len);

void ck__state_dispose(ck__state *st);
/* Moves next's lists (user messages, constraints, files, identifiers) into st. */
void ck__state_take_lists(ck__state *st, ck__state *next);
int ck__state_init(ck__state *st);

/* The 64-bit content hash of messages [0, count) of h (roles and parts, not host details). */
uint64_t ck__fingerprint(const ck_history *h, size_t count);

#endif
