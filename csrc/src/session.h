/* Private: what a compactor remembers of its session between calls, and how that state is
 * written to and read from the audit log.
 *
 * The state is one struct with plain lists. session.c owns its whole life: init, copy, dispose,
 * the changes a compaction makes (folded in as a delta), and the record form. A record carries
 * either a snapshot of the whole state or a delta (what this compaction added); resuming reads
 * the last snapshot and applies the deltas after it, so the log grows linearly with the work
 * done rather than quadratically. */
#ifndef CK_SESSION_H_
#define CK_SESSION_H_

#include "ctxkeel.h"

#include "./extract.h"
#include "./idmap.h"
#include "./strs.h"

/* One tool output moved to the evidence store. */
typedef struct ck__offload {
    char *id;      /* the tool-call id (any bytes, NUL included) */
    size_t id_len;
    char *ref;     /* how the model names it: the id when it is printable and short, the path
                      when not, "<id>#<hash>" when the id already held another output */
    char *tool;
    size_t tool_len;
    char *path;
    uint64_t bytes, lines;
    uint64_t hash; /* of the output's text */
    uint32_t keep; /* the smallest form a view has shown of it, which later views keep (a view
                      must not grow back silently): 0 the usual one; else, for an output, its
                      placeholder without the preview, for an excerpted text, an excerpt of
                      `keep` bytes (not kept in the records: a resumed session starts again
                      from the usual form) */
} ck__offload;

/* A span of folded messages written to the store. */
typedef struct ck__archive {
    char *ref;  /* "history:<first>-<end>" (or its alternate when that name was taken) */
    char *path;
    size_t first, end; /* history messages [first, end) */
    uint64_t bytes, lines;
} ck__archive;

/* A user message carried in the checkpoint, and where its full text is archived. */
typedef struct ck__user_msg {
    char *text;
    size_t len;
    char *ref;     /* the archive holding it (NULL when it could not be archived) */
    uint64_t line; /* its first line there (0-based, as read_evidence counts) */
} ck__user_msg;

typedef struct ck__state {
    /* The checkpoint and what it covers. */
    int active;
    size_t covered;       /* leading history messages the checkpoint stands for */
    uint64_t fingerprint; /* of those messages */
    ck_anchors *anchors;
    char *checkpoint;
    size_t checkpoint_len;
    /* Which conversation this is: the fingerprint of its first `origin_n` messages (through
     * the task), so that a history of another conversation is never mixed into this one. */
    size_t origin_n;
    uint64_t origin_fp;
    /* What the checkpoint carries, oldest first. */
    ck__user_msg *users;
    size_t n_users, cap_users;
    ck__strs constraints; /* rule sentences, newest last */
    ck__strs files_read, files_modified;
    ck__idents *idents;
    ck__archive *archives;
    size_t n_archives, cap_archives;
    /* Outputs offloaded so far, and an index by ref (keys borrowed from offloads[i].ref). */
    ck__offload *offloads;
    size_t n_offloads, cap_offloads;
    ck__idmap offloaded;
    /* Counters. */
    uint64_t records;     /* audit records written (ids); never reset within a session */
    uint64_t compactions; /* compactions of this conversation */
    uint64_t compacted;   /* messages folded in this conversation */
    uint64_t since_snapshot; /* records written since the last full snapshot */
    /* The usage correction. */
    double usage[5];
    unsigned n_usage;
    double factor;
    /* Per-call memory (not written to records). */
    uint64_t last_view;  /* estimated tokens of the last view returned */
    uint64_t growth;     /* how much the view grows per call, a running mean (the cost model) */
    int over_noted;      /* a record already said the view cannot get under the soft limit */
    size_t futile_cut;   /* a fold of [.., futile_cut) with this fingerprint did not shrink */
    uint64_t futile_fp;
    uint64_t repairs_fp; /* the repairs the last record told (0: none) */
    size_t rest_n;       /* messages of the history at the last fold when it could not bring
                            the view to the target, else 0: the next fold waits until what came
                            after them is worth folding (ck__compaction_rests) */
    int has_excerpts;    /* some message texts were excerpted (offloads of tool "message") */
} ck__state;

/* The tool name of an offload that is an excerpted message text rather than a tool output. */
#define CK__EXCERPT_TOOL "message"

int ck__state_init(ck__state *st);
void ck__state_dispose(ck__state *st);
/* Forgets the conversation (checkpoint, lists, offloads, counts) but keeps the record counter
 * and the usage correction, which belong to the session and the model. Returns CK_OK or
 * CK_ENOMEM (then the state is as it was). */
int ck__state_forget(ck__state *st);

void ck__offload_dispose(ck__offload *o);
void ck__archive_dispose(ck__archive *a);

/* Appends copies. Return CK_OK or CK_ENOMEM. */
int ck__state_add_offload(ck__state *st, const ck__offload *o);
int ck__state_add_archive(ck__state *st, const ck__archive *a);
int ck__state_add_user(ck__state *st, const char *text, size_t len, const char *ref,
                       uint64_t line);

/* The lists a compaction folds into, as a copy of the state's (users, constraints, files,
 * identifiers, archives), so that a compaction dropped unfinished leaves the state as it was.
 * ck__state_take_lists() moves them into the state. */
int ck__state_copy_lists(ck__state *dst, const ck__state *src);
void ck__state_take_lists(ck__state *st, ck__state *next);

/* The offload of `ref`, or NULL. */
const ck__offload *ck__state_offload(const ck__state *st, const char *ref, size_t len);

/* Notes that a view showed the offload `ref` in the smaller form `keep` (see ck__offload).
 * Nothing happens when the state does not know the ref or already keeps a smaller form. */
void ck__state_offload_shown(ck__state *st, const char *ref, size_t len, uint32_t keep);

/* What one compaction added to the state, for a delta record. */
typedef struct ck__delta {
    size_t users_from;            /* st->users[users_from..] are new */
    size_t offloads_from;         /* st->offloads[offloads_from..] are new */
    size_t archives_from;         /* st->archives[archives_from..] are new */
    const ck__strs *constraints;  /* the rule sentences touched, in order (NULL: none) */
    const ck__strs *files;        /* the files touched, in order, each "r" or "m" + path */
    const ck__idents *idents;     /* the identifiers of the folded span (NULL: none) */
} ck__delta;

struct ck__buf;
/* Appends the state as a JSON object for a record: the whole state when `d` is NULL (a
 * snapshot), else what `d` says was added (a delta). Returns CK_OK or CK_ENOMEM. */
int ck__state_write(const ck__state *st, const ck__delta *d, struct ck__buf *out);

/* Applies one audit record (a JSON line) to `st`: a snapshot replaces the lists, a delta adds
 * to them, and the record's checkpoint fields replace the checkpoint. Every value is checked
 * (types, ranges, lengths) first; a record that does not check out is CK_ESYNTAX and leaves
 * `st` as it was. Returns CK_OK, CK_ESYNTAX or CK_ENOMEM; *snapshot tells whether the record
 * held a snapshot. */
int ck__state_apply_record(ck__state *st, const char *line, size_t len, int *snapshot);

/* Writes an offload as the JSON object records list it. */
struct ck__jwriter;
void ck__offload_write(struct ck__jwriter *w, const ck__offload *o);

/* The most identifiers the state carries between compactions. */
#define CK__STATE_IDENTS 1024

/* Touches a file in the lists, as a tool call `kind` ('r' read, 'm' modified) on it does: a
 * modified file leaves the read list and is never listed as read again. Returns CK_OK or
 * CK_ENOMEM. */
int ck__state_touch_file(ck__state *st, char kind, const char *path, size_t len);

#endif
