/* Private: the compactor object and one compaction in progress, as the L3 files share them.
 *
 * compaction.c is the only orchestrator: it reads the history, asks tiers.c where to cut,
 * offload.c to move outputs to the store, checkpoint.c to fold the span and render the
 * checkpoint, request.c for the summary prompt, record.c for the audit record, and session.c
 * to keep the state. None of those calls another, or back into compaction.c. */
#ifndef CK_COMPACTION_H_
#define CK_COMPACTION_H_

#include <time.h>

#include "./buf.h"
#include "./internal.h"
#include "./session.h"
#include "./store.h"
#include "./strs.h"
#include "./tiers.h"
#include "./tokcache.h"

struct ck_compactor {
    ck_compactor_options opt; /* defaults filled in; the strings point at the copies below */
    char *session_id;
    char *store_dir;
    ck__store *store;
    ck_retention *retention; /* copies, tool patterns owned */
    size_t n_retention;
    ck_evidence_backend backend;
    ck_s3_backend *s3;  /* made from opt.store, owned; NULL without one */
    ck__strs tool_refs; /* with a backend: refs stored by ck_compactor_offload() */
    ck__tokcache tokcache;
    ck__state st;
    /* The view the last compaction returned, per message: a hash of its role and content, and
     * its cost (what the provider may hold as a cached prefix). In memory only. */
    uint64_t *sent_key, *sent_tok;
    size_t n_sent;
    char *resume_note; /* why the audit log could not be resumed, for the next record */
};

/* One change a compaction made to a tool-call pairing. */
typedef struct ck__repair_rec {
    ck_repair_kind kind;
    size_t index; /* message of the host's history */
    char *id;
    size_t id_len;
} ck__repair_rec;

struct ck_compaction {
    ck_compactor *owner;
    ck__state *st;   /* the state this compaction works from: the owner's, or `fresh` when the
                        history belongs to another conversation (the owner's is replaced by it
                        only when the compaction finishes) */
    ck__state fresh;
    double factor;   /* the usage factor at begin */
    const ck_history *src; /* the host's history */
    ck_history *fixed;     /* src with its tool-call pairs repaired, or NULL when src is valid */
    ck_view *repair;       /* the repair, over src */
    const ck_history *h;   /* what the compaction works on: fixed or src */
    ck_format format;
    ck_tier tier;
    int finished;
    ck__limits lim;
    uint64_t tool_tokens, tokens_before, tokens_after, view_before;
    uint64_t overflow_need; /* the smallest view planned, when it exceeds the window */
    uint64_t prefix_kept, prefix_broken; /* against the last view sent (ck_compaction_cache) */
    size_t base;     /* first message not covered by the state's checkpoint */
    size_t marker;   /* a checkpoint of ours written back into the history, or CK_NONE */
    size_t task;     /* the first user message (pinned unless the options say not), or CK_NONE */
    size_t tail;     /* first message of the verbatim tail */
    size_t min_tail; /* first message of the smallest tail any view keeps */
    size_t cut;      /* end of the span to fold; == base when nothing is folded */
    int quiet;       /* ck_compactor_compact_quiet(): nothing may be stored (compaction.c) */
    int summarize;   /* a model summary is wanted */
    int resting;     /* a fold was due but waits (ck__compaction_rests) */
    uint64_t cp_plan; /* the checkpoint's planned cost, an upper bound of the real one */
    uint64_t growth;  /* the view's growth per call, this call's included (the cost model) */
    /* The cost model's estimate for the change this compaction made (has_estimate): over the
     * next `horizon` calls it saves `saves` billed tokens of cached reads and re-bills
     * `invalidates` (prompt_cache prices applied). */
    int has_estimate;
    uint64_t horizon, saves, invalidates;
    /* Per message of h. */
    uint64_t *tok;       /* cost with this compaction's substitutions applied */
    unsigned char *cls;  /* CK__M_* */
    /* Per part of h: the text that replaces it in the view (a placeholder or an excerpt). */
    char **subst;
    size_t *subst_len;
    unsigned char *subst_kind; /* CK__SUB_* */
    uint32_t *subst_keep;      /* the form of a smaller substitution (ck__offload.keep), else 0 */
    unsigned char *failed;     /* ck__part_failed()'s verdicts */
    size_t failed_stores;      /* outputs or texts the store could not take (they stay) */
    ck__offload *new_offloads; /* offloads done by this compaction */
    size_t n_new_offloads, cap_new_offloads;
    ck__archive *archives;     /* the folded span, stored in chunks */
    size_t n_archives, cap_archives;
    uint64_t *archive_lines;   /* per message of the span: its first line in its chunk */
    const char **archive_refs; /* per message of the span: its chunk's ref (borrowed) */
    ck__repair_rec *repairs;
    size_t n_repairs, cap_repairs;
    ck_repair *repair_view;    /* repairs as the public struct, built on request */
    ck__buf prompt;
    char *previous; /* the previous checkpoint text handed to the summarizer */
    size_t previous_len;
    char *reply;
    size_t reply_len;
    int have_reply;
    char *failure;  /* why the summarizer failed */
    char *fallback; /* why the extractive summarizer was used instead, for the record */
    ck__strs notes;  /* routine decisions, for the record's "notes" */
    ck__strs errors; /* what went wrong, for the record's "error" */
    char *checkpoint;
    size_t checkpoint_len;
    ck_anchors *anchors; /* the anchors of the new checkpoint */
    ck__state *next;     /* the state's lists with this compaction's span folded in */
    ck__strs touched_constraints, touched_files;
    ck__idents *span_idents;
    size_t users_before, archives_before, offloads_before;
    uint64_t repairs_fp; /* of this call's repairs, to record each set once */
    ck_view *view;
    char *record;
    size_t record_len;
    size_t summarized; /* messages folded into the checkpoint */
    int reset;         /* the state was started afresh for this history */
    int force_snapshot; /* the record carries the whole state (it follows another writer's) */
    struct timespec started;
};

/* Reloads the session state from the newest audit records (compactor.c): what a fresh
 * compactor on the same session would resume. CK_OK or CK_ENOMEM. */
int ck__compactor_resume(ck_compactor *self);

/* Fills `o` from `in`: defaults for zero fields, every value checked (err->where names the
 * option). Returns CK_OK or CK_EINVAL (options.c). */
int ck__options_check(const ck_compactor_options *in, ck_compactor_options *o, ck_error *err);

/* subst_kind values. */
#define CK__SUB_NONE 0
#define CK__SUB_KNOWN 1   /* a placeholder of an output offloaded before */
#define CK__SUB_WARN 2    /* offloaded by this compaction outside the tail */
#define CK__SUB_TAIL 3    /* offloaded to keep the tail within its budget */
#define CK__SUB_FIT 4     /* offloaded or excerpted to bring the view under its limit */

/* Adds a routine note / an error for the record. */
void ck__compaction_note(ck_compaction *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void ck__compaction_error(ck_compaction *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- checkpoint.c ---- */

/* What the checkpoint is rendered from. No I/O: every string is at hand. */
typedef struct ck__cp_input {
    const ck_anchors *anchors;
    const ck__state *lists;     /* users, constraints, files, identifiers, archives */
    const ck__offload *offloads; /* every output offloaded in the session, oldest first */
    size_t n_offloads;
    const ck__offload *more_offloads; /* and this compaction's */
    size_t n_more_offloads;
    uint64_t messages;    /* earlier messages the checkpoint stands for */
    uint64_t compactions; /* this one included */
    uint64_t body_tokens; /* summary_max_tokens: the anchors and summary */
    uint64_t cap_tokens;  /* the whole checkpoint, as a message (overhead included) */
    ck__tokcache *tokens; /* measures the whole; sections are sized by its estimator alone */
} ck__cp_input;

/* Renders the checkpoint within in->cap_tokens (cutting, in this order: the summary, the
 * anchors to their shares, identifiers, offloaded outputs, files read, user messages to
 * excerpts, modified files, constraints last). Caller owns *out (ck__free). CK_OK/CK_ENOMEM. */
int ck__checkpoint_render(const ck__cp_input *in, char **out, size_t *len);

/* What a checkpoint holds before the summary body gets its share: the header, every rule
 * sentence and every modified file, uncut. Caller owns *out (ck__free). CK_OK/CK_ENOMEM. */
int ck__checkpoint_must(const ck__cp_input *in, char **out, size_t *len);

/* The smallest checkpoint: the marker and the lines that say where the history is. */
int ck__checkpoint_minimal(const ck__cp_input *in, char **out, size_t *len);
/* Smaller still, the last resort: the marker and one line. */
int ck__checkpoint_bare(const ck__cp_input *in, char **out, size_t *len);

/* Folds messages [from, to) of h into the lists of `next`: user messages (with the ref and
 * line of the archive chunk holding each, refs[i - from] and lines[i - from], or the single
 * `ref` and line 0 when `refs` is NULL), the rule sentences they state, the files the tool calls
 * touched, and the identifiers of the span (into `idents`, ranked by where they were seen).
 * Messages whose `cls` says CK__M_PINNED or CK__M_SKIP stay in the view and are skipped.
 * Touched constraints and files are appended to `touched_*` (for the record's delta). Returns
 * the number of messages folded in *folded. CK_OK or CK_ENOMEM. */
int ck__checkpoint_fold(const ck_history *h, size_t from, size_t to,
                        const unsigned char *cls, const char *ref, const char *const *refs,
                        const uint64_t *lines, ck__state *next, ck__idents *idents,
                        ck__strs *touched_constraints, ck__strs *touched_files,
                        size_t *folded);

/* ---- archive.c ----
 * The archive of a folded span is plain lines, written in chunks: a header line, each
 * message (a header line, then its parts, each text ending in a line break; outputs offloaded
 * before appear as their placeholders, from `subst`), and a closing line. *line counts the
 * lines written, so a caller knows where each message starts. */
void ck__archive_header(ck__buf *out, const char *session, size_t from, uint64_t *line);
void ck__archive_message(ck__buf *out, const ck_history *h, size_t i,
                         const char *const *subst, const size_t *subst_len, uint64_t *line);
void ck__archive_footer(ck__buf *out, size_t from, size_t to, uint64_t *line);

/* ---- request.c ---- */

/* The summarizer's system prompt. Static string. */
const char *ck__request_system(size_t *len);

/* Builds c->prompt for the span [c->base, c->cut), bounded so the request fits the window with
 * the reply. CK_OK or CK_ENOMEM. */
int ck__request_build(ck_compaction *c);

/* ---- record.c ---- */

/* Builds c->record (one JSON line, with its integrity tag when `key` is not NULL). */
int ck__record_build(ck_compaction *c, const unsigned char *key, size_t key_len);

/* Checks a record line's integrity tag with `key`: 1 good, 0 bad or missing. */
int ck__record_verify(const char *line, size_t len, const unsigned char *key, size_t key_len);

#endif
