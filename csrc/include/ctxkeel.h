/*
 * ctxkeel.h - the one public header of the ctxkeel core.
 *
 * ctxkeel keeps a long-running LLM agent on course when its history outgrows the model's
 * context window. This header is the reference manual of the C core; the Python and Node
 * bindings are thin layers over exactly these functions.
 *
 * The model in one paragraph. A host (a binding, the CLI, a C program) describes its message
 * list to the core as a `ck_history`: one entry per message, each a list of `ck_part`s (text,
 * image, tool call, tool result). Strings in a history are borrowed, never parsed twice and
 * never mutated. Operations that change a message list do not build new messages; they return
 * a `ck_view`: a plan that says, for every output message, "the source message i as it is",
 * "source message i with these parts" or "a new message with these parts". The host applies
 * the plan to its own objects, so unknown fields survive untouched and unchanged messages are
 * returned as the very same objects.
 *
 * Thread safety, unless a function says otherwise: one object is used by one thread at a time;
 * distinct objects are independent; the only global state is the allocator hook.
 */
#ifndef CK_H_
#define CK_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(CK_STATIC)
#define CK_API
#elif defined(_WIN32)
#if defined(CK_BUILDING)
#define CK_API __declspec(dllexport)
#else
#define CK_API __declspec(dllimport)
#endif
#else
#define CK_API __attribute__((visibility("default")))
#endif

#define CK_VERSION_MAJOR 0
#define CK_VERSION_MINOR 1
#define CK_VERSION_PATCH 0
#define CK_VERSION_STRING "0.1.0"

/* An index that names nothing (no source message, no source part). */
#define CK_NONE ((size_t)-1)

/* ------------------------------------------------------------------------------------------ */
/* Section - Types                                                                            */
/* ------------------------------------------------------------------------------------------ */

/*
 * Every status code, once. X(name, value, text). The enum, ck_strerror(), ck_err_name() and
 * the error tables of both bindings are all generated from this list.
 */
#define CK_STATUS_LIST(X)                                                                      \
    X(OK, 0, "success")                                                                        \
    X(ENOMEM, -1, "out of memory")                                                             \
    X(EINVAL, -2, "invalid argument")                                                          \
    X(ESYNTAX, -3, "malformed JSON")                                                           \
    X(ETYPE, -4, "value has the wrong type")                                                   \
    X(EMISSING, -5, "required field is missing")                                               \
    X(EUTF8, -6, "text is not valid UTF-8")                                                    \
    X(EFORMAT, -7, "messages do not match the message format")                                 \
    X(ETOOBIG, -8, "input exceeds a size limit")                                               \
    X(EIO, -9, "input/output error")                                                           \
    X(ECLOSED, -10, "object is closed")                                                        \
    X(EBUSY, -11, "object is in use by another call")                                          \
    X(ETIMEDOUT, -12, "operation timed out")                                                   \
    X(ECANCELED, -13, "operation was canceled")                                                \
    X(ESUMMARY, -14, "summarizer failed")                                                      \
    X(ESTATE, -15, "call is not valid in the object's current state")

#define CK__STATUS_ENUM(name, value, text) CK_##name = value,
typedef enum ck_status { CK_STATUS_LIST(CK__STATUS_ENUM) CK__STATUS_END = -16 } ck_status;
#undef CK__STATUS_ENUM

/* Number of codes in CK_STATUS_LIST; codes run from 0 down to -(CK_STATUS_COUNT - 1). */
#define CK_STATUS_COUNT 16

/* True for the codes that mean "the caller's input is wrong" (bindings map these to
 * InputError / a ValueError). */
#define CK_IS_INPUT_ERROR(code)                                                                \
    ((code) == CK_EINVAL || (code) == CK_ESYNTAX || (code) == CK_ETYPE ||                      \
     (code) == CK_EMISSING || (code) == CK_EUTF8 || (code) == CK_EFORMAT ||                    \
     (code) == CK_ETOOBIG)

/*
 * Where an error happened. Every function that reads caller input takes an optional
 * `ck_error *err` (NULL is allowed) and fills it on failure:
 *   code    the ck_status;
 *   msg     a static description (never free);
 *   offset  byte offset into JSON text where that applies, else 0;
 *   index   index of the offending message, or CK_NONE;
 *   where   a NUL-terminated path inside the input such as "messages[3].tool_calls[0].id",
 *           empty when the error has no place.
 * The struct is caller-allocated; nothing in it needs freeing.
 */
typedef struct ck_error {
    int code;
    const char *msg;
    size_t offset;
    size_t index;
    char where[112];
} ck_error;

/* Message formats. AUTO detects from the tool-call shapes present. */
typedef enum ck_format {
    CK_FORMAT_AUTO = 0,
    CK_FORMAT_OPENAI = 1,    /* Chat Completions: tool_calls, role "tool", tool_call_id */
    CK_FORMAT_ANTHROPIC = 2, /* Messages API: tool_use / tool_result content blocks */
} ck_format;

typedef enum ck_role {
    CK_ROLE_SYSTEM = 0,
    CK_ROLE_DEVELOPER = 1,
    CK_ROLE_USER = 2,
    CK_ROLE_ASSISTANT = 3,
    CK_ROLE_TOOL = 4,
    CK_ROLE_OTHER = 5, /* any other role string; kept and passed through */
} ck_role;

typedef enum ck_part_kind {
    CK_PART_TEXT = 0,        /* text: the text */
    CK_PART_IMAGE = 1,       /* an image; text unused (a fixed token cost) */
    CK_PART_TOOL_CALL = 2,   /* id, name, text = arguments as JSON text */
    CK_PART_TOOL_RESULT = 3, /* id = the call's id, text = the result's text */
    CK_PART_OTHER = 4,       /* any other block (thinking, documents...); text if it has one */
} ck_part_kind;

/* ck_part.flags */
#define CK_PART_IS_ERROR (1u << 0)  /* a tool result marked as an error (is_error) */
#define CK_PART_OPENAI (1u << 1)    /* came from OpenAI shapes (tool_calls, role "tool") */
#define CK_PART_ANTHROPIC (1u << 2) /* came from an Anthropic content block */

/*
 * One part of a message. Strings are UTF-8, not NUL-terminated, and borrowed: the core never
 * frees or changes them. `host` belongs to the host: the core copies it into views untouched
 * so that the host can find the object the part came from (an index into a content list, say).
 */
typedef struct ck_part {
    ck_part_kind kind;
    uint32_t flags;
    const char *text;
    size_t text_len;
    const char *id;
    size_t id_len;
    const char *name;
    size_t name_len;
    uint32_t host;
} ck_part;

/* ck_history_add_message() flags */
#define CK_MSG_STRING_CONTENT (1u << 0) /* the message's content is a plain string */

/* The message list as the core sees it. Opaque. */
typedef struct ck_history ck_history;

/* What a view says to do for one output message. */
typedef enum ck_op {
    CK_OP_KEEP = 0, /* the source message, as it is (the same object) */
    CK_OP_EDIT = 1, /* a copy of the source message whose content is rebuilt from `parts` */
    CK_OP_NEW = 2,  /* a new message of `role` made of `parts` */
} ck_op;

/*
 * One part of an output message: either a part of some source message (src_msg, src_part),
 * possibly with its text replaced, or a new part (src_msg == CK_NONE). `part` always holds the
 * part's effective values (the source part's, with the replaced text where `replaced`).
 */
typedef struct ck_out_part {
    size_t src_msg;
    size_t src_part;
    int replaced;
    ck_part part;
} ck_out_part;

typedef struct ck_out_msg {
    ck_op op;
    size_t src; /* source message (KEEP, EDIT); CK_NONE for NEW */
    ck_role role;
    uint32_t flags; /* CK_MSG_* of the source message, 0 for NEW */
    const ck_out_part *parts;
    size_t n_parts; /* for KEEP: 0, the source message is used as it is */
} ck_out_msg;

/* A plan for an output message list. Opaque. */
typedef struct ck_view ck_view;

/* Kinds of tool-call pairing violation found by ck_check_pairs(). */
typedef enum ck_pair_issue {
    CK_PAIR_ORPHAN_RESULT = 0,    /* a tool result whose id matches no tool call */
    CK_PAIR_MISSING_RESULT = 1,   /* a tool call that no tool result answers */
    CK_PAIR_NOT_ADJACENT = 2,     /* a result that is not right after the message of its call */
    CK_PAIR_DUPLICATE_RESULT = 3, /* a second result for the same call */
    CK_PAIR_DUPLICATE_CALL = 4,   /* a second tool call with an id already used */
    CK_PAIR_EMPTY_ID = 5,         /* a tool call or tool result with an empty id */
    CK_PAIR_MISPLACED = 6,        /* a call outside an assistant message, a result outside a
                                     tool (OpenAI) or user (Anthropic) message */
    CK_PAIR_RESULT_ORDER = 7,     /* Anthropic: a tool_result after other content in a message */
} ck_pair_issue;

typedef struct ck_pair_violation {
    ck_pair_issue kind;
    size_t index; /* message index */
    size_t part;  /* part index within the message */
    const char *id; /* the tool-call id, borrowed from the history; may be empty */
    size_t id_len;
} ck_pair_violation;

/* The five anchors of a checkpoint, in their fixed order. */
typedef enum ck_anchor {
    CK_ANCHOR_USER_INTENT = 0,
    CK_ANCHOR_EXECUTION_PROGRESS = 1,
    CK_ANCHOR_KEY_DECISIONS = 2,
    CK_ANCHOR_TRIED_SOLUTIONS = 3,
    CK_ANCHOR_NEXT_STEPS = 4,
} ck_anchor;
#define CK_ANCHOR_COUNT 5

/* Five anchors plus a free summary. Opaque. An anchor that is N/A has no value. */
typedef struct ck_anchors ck_anchors;

/* Token estimators. */
typedef enum ck_estimator {
    CK_EST_DEFAULT = 0, /* the calibrated estimator, fitted to o200k_base (GPT-4o and later) */
    CK_EST_CHARS4 = 1,  /* UTF-8 bytes / 4, rounded up, for compatibility */
    CK_EST_CL100K = 2,  /* the calibrated estimator fitted to cl100k_base (GPT-4, GPT-3.5) */
} ck_estimator;


/* Compaction tiers, in order of severity (DESIGN section 2). */
typedef enum ck_tier {
    CK_TIER_NONE = 0,      /* below warn: the view is returned as it is */
    CK_TIER_WARN = 1,      /* offload large tool outputs outside the tail */
    CK_TIER_SOFT = 2,      /* offload, then summarize the oldest half of the compactable span */
    CK_TIER_FULL = 3,      /* offload, then summarize the whole compactable span */
    CK_TIER_EMERGENCY = 4, /* no model: fold the span into the checkpoint extractively */
} ck_tier;

/* ck_compactor_options.flags */
#define CK_OPT_NO_PIN_FIRST_USER (1u << 0) /* do not pin the first user message (the task) */

/*
 * A retention policy: what the placeholder of an offloaded output keeps of it, for the tools
 * whose name matches `tool` (a name, or a shell-style pattern with * ? and [...], matched by
 * fnmatch(3); NULL matches every tool). The first matching policy wins; outputs of tools no
 * policy matches keep the first lines, and, when they look like command, test or build
 * results, also their error lines and their last lines. Unlike the options, zero here means
 * zero: a policy with head = tail = error_lines = 0 keeps no preview at all.
 */
typedef struct ck_retention {
    const char *tool;     /* NUL-terminated; copied */
    uint32_t head;        /* first lines kept */
    uint32_t tail;        /* last lines kept */
    uint32_t error_lines; /* lines that carry errors (error, failed, exception, traceback,
                             panic, exit code...) kept between head and tail, at most this many */
    uint64_t max_bytes;   /* preview cap in bytes; 0 means the gate's (1 KB at compaction,
                             2 KB at tool time) */
    uint32_t flags;       /* CK_RETAIN_* */
} ck_retention;

/* ck_retention.flags */
#define CK_RETAIN_NEVER_OFFLOAD (1u << 0) /* outputs of these tools always stay in the view */

/*
 * An evidence backend: the host's own storage for offloaded outputs, used instead of the local
 * store directory (the audit log stays there). Keys are relative paths,
 * "tool_results/<session>/<file>.txt", made only of [A-Za-z0-9._~-] and '/': the same names
 * the local store uses, so no key can escape a prefix the host puts before it. The core asks
 * get() before it puts a new key and never puts a second text under a key it has seen hold
 * another. Callbacks run on the thread that called into the compactor, one at a time.
 */
typedef struct ck_evidence_backend {
    void *ctx;
    /* Stores `len` bytes of `data` under `key`. Returns CK_OK, or an error code (CK_EIO for a
     * storage failure) after writing a short reason into err->where; the output then stays in
     * the view (fail-open) and the reason reaches the record. */
    int (*put)(void *ctx, const char *key, const char *data, size_t len, ck_error *err);
    /* Fetches the text under `key`: sets *out to a buffer from ck_malloc() (never NULL, even
     * for an empty text) that the core takes over, *out_len to its length, and returns CK_OK;
     * when nothing is stored, leaves *out NULL and returns CK_OK. Other codes are failures,
     * as for put. */
    int (*get)(void *ctx, const char *key, char **out, size_t *out_len, ck_error *err);
} ck_evidence_backend;

/*
 * A host token counter: the number of tokens in `len` bytes of UTF-8 `text` (not
 * NUL-terminated), from the host's own tokenizer. The compactor calls it once for each
 * message content it has not seen (all strings of the message joined by newlines), caches the
 * answer by content, and adds CK_MESSAGE_OVERHEAD and CK_IMAGE_TOKENS per image as the
 * built-in estimators do. A counter that cannot answer returns UINT64_MAX; the built-in
 * estimator (`estimator`) answers instead.
 */
typedef struct ck_counter {
    uint64_t (*count)(void *ctx, const char *text, size_t len);
    void *ctx;
} ck_counter;

/*
 * Options of a compactor. A zero-initialized struct means "the defaults" for every field but
 * context_window, which is required. Strings are NUL-terminated and copied.
 */
typedef struct ck_compactor_options {
    uint64_t context_window;         /* the model's window, in tokens (required, > 0) */
    double warn, soft, full, emergency; /* tier thresholds as fractions of the window; 0 means
                                           0.60, 0.70, 0.80, 0.95; they must increase */
    uint32_t keep_tail;              /* messages kept verbatim at the end; 0 means 6 */
    uint64_t offload_threshold;      /* compaction gate, bytes; 0 means 4000 */
    uint64_t tool_offload_threshold; /* ck_compactor_offload() gate, bytes; 0 means 10000 */
    uint64_t summary_max_tokens;     /* checkpoint bound; 0 means window / 20 within
                                        [256, 8192] */
    ck_estimator estimator;
    ck_format format;
    uint32_t flags;         /* CK_OPT_* */
    const char *session_id; /* NULL: a new random id (then nothing is resumed) */
    const char *store_dir;  /* NULL: ".ctxkeel" */
    const ck_retention *retention; /* per-tool retention policies, copied; NULL for none */
    size_t n_retention;
    const ck_evidence_backend *backend; /* NULL: files under store_dir; else copied (the
                                           ctx it points at must outlive the compactor) */
    ck_counter counter; /* count NULL: the built-in `estimator` */
} ck_compactor_options;

/* A compactor: one agent session's compaction state. Opaque. */
typedef struct ck_compactor ck_compactor;

/* One compaction in progress, from ck_compactor_begin() to ck_compaction_free(). Opaque. */
typedef struct ck_compaction ck_compaction;

/*
 * What the summarizer is asked. The host hands it to its model (or to its own function) and
 * gives the reply back with ck_compaction_set_summary(). Strings are borrowed from the
 * compaction; valid until it is freed.
 */
typedef struct ck_summary_request {
    const char *system; /* the system prompt */
    size_t system_len;
    const char *prompt; /* the user prompt: instructions, previous checkpoint, the messages */
    size_t prompt_len;
    uint64_t max_tokens; /* the reply's budget */
    ck_tier tier;
    size_t span_start, span_end; /* the history messages being summarized: [start, end) */
    const char *previous;        /* the previous checkpoint's text, NULL when there is none */
    size_t previous_len;
} ck_summary_request;

/* A summarizer as a C function: answers `req` by calling ck_compaction_set_summary(c, ...)
 * (or ck_compaction_set_failure()) and returns CK_OK, or an error code, which makes the
 * compaction fall back to the extractive summarizer. */
typedef int (*ck_summarize_fn)(void *ctx, const ck_summary_request *req, ck_compaction *c);


/* Which HTTP API a summarizer speaks. */
typedef enum ck_http_api {
    CK_HTTP_OPENAI = 0,    /* POST {base_url}/chat/completions (OpenAI-compatible servers) */
    CK_HTTP_ANTHROPIC = 1, /* POST {base_url}/v1/messages with x-api-key and anthropic-version */
} ck_http_api;

/*
 * Options of the built-in HTTP summarizer. Zero means the default for numbers; strings are
 * NUL-terminated and copied.
 */
typedef struct ck_http_options {
    const char *base_url;    /* required: "http://127.0.0.1:8000/v1", "https://api.anthropic.com" */
    const char *model;       /* required */
    ck_http_api api;
    const char *api_key_env; /* the environment variable holding the key, read at call time;
                                NULL: OPENAI_API_KEY or ANTHROPIC_API_KEY; "" for no key */
    double timeout;          /* seconds for one attempt, connect included; 0 means 60 */
    double connect_timeout;  /* seconds; 0 means 10 */
    int max_retries;         /* attempts after the first; 0 means 3, negative means none */
    double backoff;          /* first retry delay in seconds, doubled each time with jitter;
                                0 means 0.5 */
    const char *const *headers; /* extra "Name: value" lines, NULL-terminated list, or NULL */
} ck_http_options;

/* An HTTP summarizer. Opaque. */
typedef struct ck_http_summarizer ck_http_summarizer;

/* ------------------------------------------------------------------------------------------ */
/* Section - Lifecycle                                                                        */
/* ------------------------------------------------------------------------------------------ */

/* The library version as "MAJOR.MINOR.PATCH". Static string; never free. */
CK_API const char *ck_version(void);

/* ck_history_new() flags */
#define CK_HISTORY_TRUSTED_UTF8 (1u << 0) /* the host guarantees every string is valid UTF-8,
                                             so ck_history_add_part() skips the check */

/*
 * Creates an empty history. Returns NULL when out of memory.
 * Caller owns the result; release it with ck_history_free().
 */
CK_API ck_history *ck_history_new(uint32_t flags);

/* Releases a history and the storage it allocated. NULL is a no-op. */
CK_API void ck_history_free(ck_history *self);

/* Forgets every message so the history can be refilled; keeps its memory for reuse. */
CK_API void ck_history_clear(ck_history *self);

/*
 * Forgets every message after the first `n`, so that a host whose list changed after message
 * n can append the rest again and keep the messages before it as they are. Does nothing when
 * the history has n messages or fewer. Storage taken with ck_history_alloc() stays allocated
 * (the strings of the kept messages live in it, mixed with the others) until the history is
 * cleared or freed; a host that truncates often should clear now and then.
 */
CK_API void ck_history_truncate(ck_history *self, size_t n);

/*
 * Appends a message with `role` and CK_MSG_* `flags`; its parts follow with
 * ck_history_add_part(). Returns CK_OK, CK_ENOMEM, or CK_ETOOBIG past 2^31 messages.
 */
CK_API int ck_history_add_message(ck_history *self, ck_role role, uint32_t flags);

/*
 * Appends a part to the last message. The part's strings are borrowed: they must stay valid
 * and unchanged until the history is cleared or freed, and so must the views made from it.
 * Unless the history was made with CK_HISTORY_TRUSTED_UTF8, every string is checked.
 * Returns CK_OK, CK_ENOMEM, CK_ESTATE (no message yet), CK_EINVAL (unknown kind, or NULL
 * string with a non-zero length), CK_ETOOBIG (a string over CK_MAX_STRING), CK_EUTF8
 * (err->where names "text", "id" or "name").
 */
CK_API int ck_history_add_part(ck_history *self, const ck_part *part, ck_error *err);

/*
 * Returns `size` bytes of storage owned by the history, for strings the host must copy before
 * it can lend them (a Node binding reading V8 strings, say). Returns NULL when out of memory.
 * Borrowed from `self`; valid until the history is cleared or freed; do not free it.
 */
CK_API char *ck_history_alloc(ck_history *self, size_t size);

/* Number of messages. */
CK_API size_t ck_history_count(const ck_history *self);

/*
 * Reads message `i`: its role, flags and parts. Returns CK_EINVAL when i is out of range.
 * `*parts` is borrowed from `self`; valid until the history is changed, cleared or freed.
 */
CK_API int ck_history_get(const ck_history *self, size_t i, ck_role *role, uint32_t *flags,
                          const ck_part **parts, size_t *n_parts);

/*
 * Decides the format of a history. With CK_FORMAT_AUTO: Anthropic if any part came from an
 * Anthropic block, else OpenAI. A history that mixes both shapes, or that holds shapes of the
 * other format when one is requested, fails with CK_EFORMAT naming the message.
 */
CK_API int ck_history_format(const ck_history *self, ck_format requested, ck_format *out,
                             ck_error *err);

/* Releases a view. NULL is a no-op. */
CK_API void ck_view_free(ck_view *self);

/* Number of output messages. */
CK_API size_t ck_view_count(const ck_view *self);

/*
 * Reads output message `i`. Returns CK_EINVAL when i is out of range. The parts and the
 * strings they point at are borrowed from the view and from the history it was made from;
 * valid until either is freed, cleared or changed.
 */
CK_API int ck_view_get(const ck_view *self, size_t i, ck_out_msg *out);

/* True (1) when the view is the source list unchanged: every message KEEP, in order. */
CK_API int ck_view_is_identity(const ck_view *self);

/* ------------------------------------------------------------------------------------------ */
/* Section - Operations                                                                       */
/* ------------------------------------------------------------------------------------------ */

/*
 * Finds every violation of the provider's tool-call rules (see ck_pair_issue), in message
 * order. On success `*out` holds `*n` violations (NULL and 0 when the history is valid).
 * Caller owns the result; release it with ck_free(). The ids in it are borrowed from the
 * history. Errors: CK_ENOMEM, CK_EFORMAT (see ck_history_format()).
 */
CK_API int ck_check_pairs(const ck_history *history, ck_format format, ck_pair_violation **out,
                          size_t *n, ck_error *err);

/*
 * Repairs tool-call pairing: drops results without a call and duplicate results, drops calls
 * with an empty or repeated id, moves each result right after the message of its call, adds a
 * stub result ("result unavailable: context was compacted") for a call without one, and puts
 * Anthropic tool_result blocks first. User and assistant messages keep their order and are
 * never dropped (an Anthropic user message that held only tool results that moved away is
 * dropped). The output passes ck_check_pairs(); repairing it again changes nothing; a valid
 * history gives an identity view.
 * Caller owns the result; release it with ck_view_free().
 * Errors: CK_ENOMEM, CK_EFORMAT.
 */
CK_API int ck_repair_pairs(const ck_history *history, ck_format format, ck_view **out,
                           ck_error *err);

/* The snake_case name of a pair issue ("orphan_result"...). Static string; never free. */
CK_API const char *ck_pair_issue_name(ck_pair_issue kind);

/* The text of the stub result that repair inserts. Static string; never free. */
CK_API const char *ck_stub_result_text(void);

/*
 * Token estimates. _text: one string. _message: message `i` of a history, with the
 * per-message overhead of the estimator. _history: every message plus the per-request overhead.
 * _tools: a tool-schema list given as its JSON text. All return 0 for empty input and never
 * fail. Thread-safe.
 */
CK_API uint64_t ck_estimate_text(const char *data, size_t len, ck_estimator est);
CK_API uint64_t ck_estimate_message(const ck_history *history, size_t i, ck_estimator est);
CK_API uint64_t ck_estimate_history(const ck_history *history, ck_estimator est);
CK_API uint64_t ck_estimate_tools(const char *json, size_t len, ck_estimator est);

/*
 * The same through a host counter (see ck_counter): message `i` is counted as one string (its
 * strings joined by newlines) plus the overhead; a history adds the per-request overhead.
 * UINT64_MAX when the counter could not answer, memory ran out, or an argument is NULL.
 * Thread-safe if the counter is.
 */
CK_API uint64_t ck_count_message(const ck_history *history, size_t i, const ck_counter *counter);
CK_API uint64_t ck_count_history(const ck_history *history, const ck_counter *counter);

/* The largest string (text, id or name) one part may hold: 256 MiB. A larger one is refused
 * with CK_ETOOBIG rather than truncated. */
#define CK_MAX_STRING ((size_t)256 << 20)

/* "default", "chars4" or "cl100k"; NULL for a bad value. Static string; never free. */
CK_API const char *ck_estimator_name(ck_estimator est);

/* Tokens charged for one image part, in every estimator. */
#define CK_IMAGE_TOKENS 765
/* Tokens the calibrated estimators (default and cl100k) add per message, and once per
 * request, as the providers' chat formats count them; chars4 adds none. */
#define CK_MESSAGE_OVERHEAD 4
#define CK_REQUEST_OVERHEAD 3

/*
 * Creates an anchor set with all five anchors N/A and no summary. Returns NULL when out of
 * memory. Caller owns the result; release it with ck_anchors_free().
 */
CK_API ck_anchors *ck_anchors_new(void);

/* Releases an anchor set. NULL is a no-op. */
CK_API void ck_anchors_free(ck_anchors *self);

/*
 * Parses a model's checkpoint reply: Markdown sections (## or ### headers, or bold lines, any
 * case, a trailing colon, singular or plural names: "Key Decision", "next step") or JSON (bare
 * or in a ``` fence) with the keys user_intent, execution_progress, key_decisions,
 * tried_solutions, next_steps and summary. Text before the first section is ignored. Missing,
 * empty, "N/A", "- N/A" and "none" all leave an anchor N/A. Never fails on odd text: the worst
 * case is five N/A anchors and an empty summary.
 * Caller owns the result; release it with ck_anchors_free(). Returns NULL only when out of
 * memory. The text is copied.
 */
CK_API ck_anchors *ck_anchors_parse(const char *text, size_t len);

/*
 * Anchor `which`'s text, or NULL when it is N/A (then *len is 0). `len` may be NULL.
 * Borrowed from `self`; valid until `self` is changed or freed; do not free or modify.
 */
CK_API const char *ck_anchors_get(const ck_anchors *self, ck_anchor which, size_t *len);

/* The free summary ("" when none). Borrowed from `self`; valid until `self` is changed or
 * freed; do not free or modify. */
CK_API const char *ck_anchors_summary(const ck_anchors *self, size_t *len);

/*
 * Sets anchor `which` to a copy of `text`, trimmed. Text that means N/A (see
 * ck_anchors_parse()) or NULL makes it N/A. Returns CK_OK, CK_EINVAL (bad `which`), CK_ENOMEM.
 */
CK_API int ck_anchors_set(ck_anchors *self, ck_anchor which, const char *text, size_t len);

/* Sets the summary to a copy of `text` (NULL clears it). Returns CK_OK or CK_ENOMEM. */
CK_API int ck_anchors_set_summary(ck_anchors *self, const char *text, size_t len);

/*
 * Merges: each anchor of `newer` that is not N/A replaces the one of `older`; N/A keeps the
 * older value. The summary is newer's when not empty, else older's. Either input may be NULL
 * (all N/A). Returns NULL only when out of memory.
 * Caller owns the result; release it with ck_anchors_free().
 */
CK_API ck_anchors *ck_anchors_merge(const ck_anchors *older, const ck_anchors *newer);

/* True (1) when `text` means N/A: empty, "N/A", "- N/A", "none", "n/a." and the like. */
CK_API int ck_is_na(const char *text, size_t len);

/* "user_intent"... for an anchor. Static string; never free. NULL for a bad value. */
CK_API const char *ck_anchor_key(ck_anchor which);

/* "User Intent"... for an anchor. Static string; never free. NULL for a bad value. */
CK_API const char *ck_anchor_title(ck_anchor which);

/*
 * Reads a JSON message array (or an object with a "messages" array and an optional "system"
 * field, as Anthropic requests have) into a new history. The history keeps the parsed
 * document, so its strings stay valid until it is freed. Errors name the place:
 * CK_ESYNTAX (err->offset), CK_ETYPE, CK_EMISSING, CK_EUTF8, CK_ETOOBIG.
 * Caller owns the result; release it with ck_history_free(). Returns NULL on error.
 */
CK_API ck_history *ck_json_read(const char *json, size_t len, ck_error *err);

/*
 * Writes the message list that `view` describes as JSON text, built from the document that
 * `history` (made by ck_json_read()) parsed: kept messages byte-for-byte as parsed, unknown
 * fields included. `format` is the view's format. `pretty` indents.
 * Caller owns the result; release it with ck_free(). Returns NULL when out of memory or
 * when `history` was not made by ck_json_read() (then `err->code` says which).
 */
CK_API char *ck_json_write(const ck_history *history, const ck_view *view, ck_format format,
                           int pretty, ck_error *err);


/* ------------------------------------------------------------------------------------------ */
/* Section - Compactor                                                                        */
/* ------------------------------------------------------------------------------------------ */

/*
 * Creates a compactor. With a session_id whose audit log exists under store_dir, the state of
 * the last compaction (checkpoint, covered messages, offloaded outputs) is resumed from it.
 * Errors: CK_EINVAL (err->where names the option: "context_window", "warn"...), CK_ENOMEM.
 * Returns NULL on error. Caller owns the result; release it with ck_compactor_free().
 */
CK_API ck_compactor *ck_compactor_new(const ck_compactor_options *opts, ck_error *err);

/* Releases a compactor. NULL is a no-op. Compactions begun on it must be freed first. */
CK_API void ck_compactor_free(ck_compactor *self);

/* Forgets the session state (checkpoint, coverage, offloads); the audit log stays. */
CK_API void ck_compactor_reset(ck_compactor *self);

/* The session id. Borrowed from `self`; valid until it is freed; do not free or modify. */
CK_API const char *ck_compactor_session_id(const ck_compactor *self);

/* The options in force, defaults filled in. */
CK_API void ck_compactor_get_options(const ck_compactor *self, ck_compactor_options *out);

/*
 * Starts a compaction of `history` (which must stay alive and unchanged until the compaction
 * is freed). `tool_tokens` is the token cost of the tool schemas sent with the request. Picks
 * the tier, offloads large tool outputs (writing the evidence store), and, for soft and full,
 * prepares the summary request (see ck_compaction_needs_summary()). The session state changes
 * only when the compaction is finished: one freed unfinished leaves the compactor as it was
 * (evidence it wrote stays in the store). Errors: CK_EFORMAT and the other input errors of
 * ck_history_format(), CK_ENOMEM. Caller owns *out; release it with ck_compaction_free().
 */
CK_API int ck_compactor_begin(ck_compactor *self, const ck_history *history, uint64_t tool_tokens,
                              ck_compaction **out, ck_error *err);

/* True (1) when the compaction wants a summary from a model before it can finish. */
CK_API int ck_compaction_needs_summary(const ck_compaction *c);

/* The summary request, built on the first call; CK_ESTATE when none is needed, CK_ENOMEM.
 * Borrowed from `c` (see the struct). */
CK_API int ck_compaction_request(const ck_compaction *c, ck_summary_request *out);

/* Gives the model's reply (copied). An empty or unusable reply makes finish fall back to the
 * extractive summarizer and say so in the record. Returns CK_OK or CK_ENOMEM. */
CK_API int ck_compaction_set_summary(ck_compaction *c, const char *text, size_t len);

/* Says that the summarizer failed, and why (copied into the record's "fallback" reason). */
CK_API int ck_compaction_set_failure(ck_compaction *c, const char *reason, size_t len);

/* Declines the summary: finish folds the span with the extractive summarizer as the default
 * (the record names no fallback), as ck_compactor_compact() does without a summarizer.
 * Returns CK_OK, CK_EINVAL (c NULL) or CK_ESTATE (finished already). */
CK_API int ck_compaction_use_extractive(ck_compaction *c);

/*
 * Finishes: builds the checkpoint (from the reply, or extractively), the view and the audit
 * record, appends the record to the log, and updates the session state. A compaction that
 * needs no summary can be finished right after begin. Errors: CK_ENOMEM, CK_ESTATE (finished
 * already). An audit log that cannot be written does not fail the compaction: the record's
 * "error" says so.
 */
CK_API int ck_compactor_finish(ck_compactor *self, ck_compaction *c, ck_error *err);

/*
 * begin + summarize + finish in one call. `summarize` may be NULL: the extractive summarizer.
 * Caller owns *out; release it with ck_compaction_free().
 */
CK_API int ck_compactor_compact(ck_compactor *self, const ck_history *history,
                                uint64_t tool_tokens, ck_summarize_fn summarize, void *ctx,
                                ck_compaction **out, ck_error *err);

/* The tier chosen for the compaction. */
CK_API ck_tier ck_compaction_tier(const ck_compaction *c);

/* The resulting view over the history given to begin (after finish; NULL before). Borrowed
 * from `c`; valid until it is freed. */
CK_API const ck_view *ck_compaction_view(const ck_compaction *c);

/* The audit record as one line of JSON, or NULL when the compaction changed nothing (and wrote
 * no record). Borrowed from `c`; valid until it is freed; do not free or modify. */
CK_API const char *ck_compaction_record(const ck_compaction *c, size_t *len);

/* Estimated tokens of the view before and after (both count the tool schemas). */
CK_API uint64_t ck_compaction_tokens_before(const ck_compaction *c);
CK_API uint64_t ck_compaction_tokens_after(const ck_compaction *c);

/* Releases a compaction and its view. NULL is a no-op. */
CK_API void ck_compaction_free(ck_compaction *c);

/*
 * The tool-time gate (DESIGN section 4): stores each tool result of message `i` of `history`
 * that is longer than tool_offload_threshold bytes, and returns a one-message view in which
 * they are replaced by placeholders (a 20-line preview, capped in bytes too). The view is KEEP
 * when nothing was offloaded: short outputs, placeholders already, or a store that could not be
 * written (fail-open; `err` is then filled with CK_EIO although CK_OK is returned).
 * Caller owns *out; release it with ck_view_free(). The view owns its placeholder texts and
 * borrows the rest from `history`. Errors: CK_EINVAL (i out of range), CK_ENOMEM.
 */
CK_API int ck_compactor_offload(ck_compactor *self, const ck_history *history, size_t i,
                                ck_view **out, ck_error *err);

/*
 * Reads lines [offset, offset + limit) of an offloaded output (or a stored user message):
 * `ref` is its tool-call id, or the path a placeholder states. The text is exactly the stored
 * bytes; "" past the end. Errors: CK_EINVAL (no such evidence; err->where = the ref),
 * CK_EIO, CK_ENOMEM. Caller owns *out; release it with ck_free().
 */
CK_API int ck_compactor_read_evidence(const ck_compactor *self, const char *ref, size_t ref_len,
                                      size_t offset, size_t limit, char **out, size_t *out_len,
                                      ck_error *err);

/*
 * Finds lines matching `pattern` (NUL-terminated POSIX extended regular expression) in one
 * piece of evidence (`ref`) or, with ref NULL, in all of the session's. The result is a JSON
 * array of {"ref", "line" (1-based), "text"}, at most `max_hits` entries (0: 1000).
 * Errors: CK_EINVAL (bad pattern: err->where = "pattern"; unknown ref), CK_EIO, CK_ENOMEM.
 * Caller owns *out; release it with ck_free().
 */
CK_API int ck_compactor_search_evidence(const ck_compactor *self, const char *ref, size_t ref_len,
                                        const char *pattern, size_t max_hits, char **out,
                                        size_t *out_len, ck_error *err);

/*
 * The definition of the read_evidence tool for a tool list, as JSON text: OpenAI's function
 * shape or Anthropic's tool shape. Static string; never free.
 */
CK_API const char *ck_read_evidence_tool(ck_format format);

/*
 * Tells the compactor how many prompt tokens the provider counted for the last view it
 * returned. The ratio to ctxkeel's own estimate becomes a correction factor (the median of
 * the last five readings, each clamped to [0.5, 2]) applied to every later tier decision and
 * saved in the session state. Readings of 0 are ignored.
 */
CK_API void ck_compactor_observe_usage(ck_compactor *self, uint64_t prompt_tokens);

/* The current correction factor (1.0 until usage was observed). */
CK_API double ck_compactor_usage_factor(const ck_compactor *self);

/* "none", "warn", "soft", "full", "emergency". Static string; never free. */
CK_API const char *ck_tier_name(ck_tier tier);

/* The marker that starts every checkpoint message. Static string; never free. */
CK_API const char *ck_checkpoint_marker(void);


/* ------------------------------------------------------------------------------------------ */
/* Section - HTTP summarizer (libcurl)                                                        */
/* ------------------------------------------------------------------------------------------ */

/*
 * Creates an HTTP summarizer. Errors: CK_EINVAL (err->where names the option: "base_url",
 * "model", "timeout"...), CK_ENOMEM. Returns NULL on error.
 * Caller owns the result; release it with ck_http_summarizer_free().
 * Thread-safe once made: calls from several threads run independent transfers.
 */
CK_API ck_http_summarizer *ck_http_summarizer_new(const ck_http_options *opts, ck_error *err);

/* Releases an HTTP summarizer. NULL is a no-op. No call may be running on it. */
CK_API void ck_http_summarizer_free(ck_http_summarizer *self);

/*
 * Sends `req` and waits for the reply (blocking; run it off the event loop or without the
 * GIL). Retries connection errors, 429 and 5xx with exponential backoff and jitter, honouring
 * Retry-After; other 4xx fail at once. `cancel`, when not NULL, is polled during the transfer
 * and the waits: a non-zero value aborts with CK_ECANCELED within about 100 ms.
 * On success *reply holds the text (caller owns it; release it with ck_free()) and
 * *prompt_tokens / *completion_tokens (either may be NULL) the usage the provider reported.
 * On failure *why (when not NULL) holds a one-line reason naming the HTTP status and the
 * provider's error message, truncated, and never the API key (caller owns it; ck_free()).
 * Errors: CK_ETIMEDOUT, CK_ECANCELED, CK_EIO (connection), CK_ESUMMARY (an HTTP error or a
 * reply without text), CK_ENOMEM.
 */
CK_API int ck_http_summarize(ck_http_summarizer *self, const ck_summary_request *req,
                             const volatile int *cancel, char **reply, size_t *reply_len,
                             uint64_t *prompt_tokens, uint64_t *completion_tokens, char **why);

/* A ck_summarize_fn over ck_http_summarize(): `ctx` is the ck_http_summarizer. A failure
 * becomes the compaction's fallback reason. */
CK_API int ck_http_summarize_fn(void *ctx, const ck_summary_request *req, ck_compaction *c);

/* ------------------------------------------------------------------------------------------ */
/* Section - Errors                                                                           */
/* ------------------------------------------------------------------------------------------ */

/* A short description of a status code. Static string; never free. */
CK_API const char *ck_strerror(int code);

/* The code's name, such as "CK_ESYNTAX" ("CK_UNKNOWN" for others). Static string; never free. */
CK_API const char *ck_err_name(int code);

/* ------------------------------------------------------------------------------------------ */
/* Section - Allocator                                                                        */
/* ------------------------------------------------------------------------------------------ */

/*
 * Replaces the allocator used by every core allocation. NULL for any argument restores libc's
 * function for it. Change it only while no ctxkeel object exists. Not thread-safe.
 */
CK_API void ck_set_allocator(void *(*new_malloc)(size_t), void *(*new_calloc)(size_t, size_t),
                             void *(*new_realloc)(void *, size_t), void (*new_free)(void *));

/* Releases memory that a ck_ function documents as "release it with ck_free()". NULL is a
 * no-op. */
CK_API void ck_free(void *ptr);

/* Allocates `size` bytes (at least 1) with the library's allocator, for buffers that a
 * callback hands to the core (ck_evidence_backend.get). NULL when out of memory. */
CK_API void *ck_malloc(size_t size);

#ifdef __cplusplus
}
#endif

#endif /* CK_H_ */
