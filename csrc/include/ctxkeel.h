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
    X(ESTATE, -15, "call is not valid in the object's current state")                           \
    X(ECONFLICT, -16, "object was changed by another writer")                                  \
    X(EOVERFLOW, -17, "the pinned messages alone do not fit the context window")

#define CK__STATUS_ENUM(name, value, text) CK_##name = value,
typedef enum ck_status { CK_STATUS_LIST(CK__STATUS_ENUM) CK__STATUS_END = -18 } ck_status;
#undef CK__STATUS_ENUM

/* Number of codes in CK_STATUS_LIST; codes run from 0 down to -(CK_STATUS_COUNT - 1). */
#define CK_STATUS_COUNT 18

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

/* Message formats (dialects). AUTO detects from the shapes present (see ck_history_read()). */
typedef enum ck_format {
    CK_FORMAT_AUTO = 0,
    CK_FORMAT_OPENAI = 1,    /* Chat Completions: tool_calls, role "tool", tool_call_id */
    CK_FORMAT_ANTHROPIC = 2, /* Messages API: tool_use / tool_result content blocks */
    CK_FORMAT_RESPONSES = 3, /* OpenAI Responses input items: function_call / _output, reasoning */
    CK_FORMAT_GEMINI = 4,    /* Gemini contents: user / model turns, functionCall / Response */
    CK_FORMAT_AI_SDK = 5,    /* Vercel AI SDK ModelMessage: tool-call / tool-result parts */
    CK_FORMAT_LANGCHAIN = 6, /* LangChain message dicts (type human / ai / tool / system) */
} ck_format;

/* The number of formats, AUTO included. */
#define CK_FORMAT_COUNT 7

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
#define CK_PART_ATTACHED (1u << 3)  /* an item inside the content of the tool result before it
                                       (an image in the result): it travels with that result */
#define CK_PART_MADE_ID (1u << 4)   /* the id was made by the reader, the dialect has none (a
                                       Gemini call and its response paired by order and name):
                                       it pairs here and is never written back */
#define CK_PART_CACHE_MARK (1u << 5) /* the host's block carries a cache_control marker
                                        (Anthropic) */

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
#define CK_MSG_JOINED (1u << 1)         /* continues the message before it (a Responses
                                           function_call after its reasoning item): no fold,
                                           cut or drop ever separates the two */
#define CK_MSG_CACHE_BREAKPOINT (1u << 2) /* views only: the message is written with a
                                             cache_control marker on its last block
                                             (CK_OPT_CACHE_BREAKPOINTS) */

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

/* Token estimators. o200k and cl100k are exact: the count tiktoken gives for the encoding,
 * with special tokens such as <|endoftext|> counted as the text they are. */
typedef enum ck_estimator {
    CK_EST_DEFAULT = 0, /* o200k_base (GPT-4o and later), exact where that is cheap */
    CK_EST_CHARS4 = 1,  /* UTF-8 bytes / 4, rounded up, for compatibility */
    CK_EST_CL100K = 2,  /* exact cl100k_base counts (GPT-4, GPT-3.5) */
    CK_EST_O200K = 3,   /* exact o200k_base counts */
} ck_estimator;


/* Compaction tiers, in order of severity (DESIGN section 2). */
typedef enum ck_tier {
    CK_TIER_NONE = 0,      /* below warn: no new compaction (the view is the history, or the
                              pinned messages + the current checkpoint + what it does not cover) */
    CK_TIER_WARN = 1,      /* offload large tool outputs outside the tail */
    CK_TIER_SOFT = 2,      /* offload, then summarize the oldest part of the compactable span
                              that brings the view to the target */
    CK_TIER_FULL = 3,      /* offload, then summarize the whole compactable span */
    CK_TIER_EMERGENCY = 4, /* no model: offload, fold the span extractively, keep the newest
                              whole turns that fit within the target */
} ck_tier;

/* ck_compactor_options.flags */
#define CK_OPT_NO_PIN_FIRST_USER (1u << 0) /* do not pin the first user message (the task) */
#define CK_OPT_CACHE_BREAKPOINTS (1u << 1) /* Anthropic dialect: cache_control markers on the
                                              last pinned message and on the checkpoint, at most
                                              four in the view with the caller's own */

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
 * store directory. Keys are relative paths, made only of [A-Za-z0-9._~-] and '/' (the same
 * names the local store uses, <session> being the session id in the store's file-name form),
 * so no key can escape a prefix the host puts before it:
 *
 *   tool_results/<session>/<file>.txt   an offloaded output, written once
 *   compactions/<session>/<seq>.json    audit record number seq (1, 2, ...: 20 digits,
 *                                       zero-padded), one JSON line, created with put_new
 *   compactions/.key                    the key of the records' integrity tags (64 hex
 *                                       digits), created with put_new by the first writer
 *
 * The compactions/ keys exist only with a backend that has put_new and list: then the audit
 * log and the session state that ck_compactor_new() resumes live in the backend and nothing of
 * the session is written under store_dir, so a session can move between processes and
 * machines that share the backend. A compactor made for a session id lists
 * compactions/<session>/ and resumes from the newest records (the newest snapshot and the
 * deltas after it) with no summary call. Each record's seq has exactly one writer: when two
 * compactors on one session race, the one whose put_new loses the seq writes its record again
 * after the newest one, as a full snapshot of its own state, and says so in the record's
 * "notes" ("another writer recorded this session first (<key>)..."); the state resumed later
 * is then the last writer's, and every record stays. One that cannot find a free seq (after 8
 * tries, or when listing fails) fails the compaction with CK_ECONFLICT, err->where = the key it
 * lost, and reloads the compactor's state from the newest records. A backend without put_new
 * or list keeps the audit log in compactions/<session>.jsonl under store_dir, as before. The
 * objects are ctxkeel's: a host may copy or delete a whole session's keys; other keys under
 * compactions/<session>/ are ignored. The core asks
 * get() before it puts a new key and never puts a second text under a key it has seen hold
 * another. Callbacks run on the thread that called into the compactor, one at a time per
 * compactor; compactors sharing one backend may call it from several threads at once.
 *
 * put and get are required. put_new and list are optional (NULL when the host has no such
 * operation); a host that fills only put and get keeps working as before, and the features
 * built on the optional two (create-only records, listing the evidence) say what they need.
 *
 * Every callback receives NUL-terminated strings borrowed for the call only, and reports a
 * failure by returning an error code after writing a short reason into err->where (at most
 * sizeof err->where - 1 bytes, never a credential); err may be NULL. CK_EIO is the code for a
 * storage failure, CK_ETIMEDOUT for one that ran out of time. On a failed call the output
 * stays in the view (fail-open) and the reason reaches the record.
 */
typedef struct ck_evidence_backend {
    void *ctx;
    /* Stores `len` bytes of `data` under `key`, replacing what may be there. Returns CK_OK,
     * or an error code (see above). `data` is borrowed; the backend copies what it keeps. */
    int (*put)(void *ctx, const char *key, const char *data, size_t len, ck_error *err);
    /* Fetches the text under `key`: sets *out to a buffer from ck_malloc() (never NULL, even
     * for an empty text) that the core takes over, *out_len to its length, and returns CK_OK;
     * when nothing is stored, leaves *out NULL and returns CK_OK. Other codes are failures,
     * as for put. */
    int (*get)(void *ctx, const char *key, char **out, size_t *out_len, ck_error *err);
    /* Optional. Stores `len` bytes of `data` under `key` only if no object exists there, as
     * one atomic step of the storage: of several writers racing on one key, exactly one gets
     * CK_OK and the others CK_ECONFLICT, and nothing they wrote replaces the winner's text.
     * Returns CK_OK (stored), CK_ECONFLICT (an object was there; nothing was written), or an
     * error code as for put, after which the object may or may not exist: the caller reads
     * the key to find out. `data` is borrowed. */
    int (*put_new)(void *ctx, const char *key, const char *data, size_t len, ck_error *err);
    /* Optional. Calls each(each_ctx, key, len) for every stored key that starts with `prefix`
     * ("" for all) and, when `start_after` is not NULL, sorts after it, in byte order (memcmp
     * of the keys), with the whole key (prefix included) as put() takes it: NUL-terminated at
     * key[len], borrowed until `each` returns. A non-zero return from `each` stops the listing
     * and list returns CK_OK; the host keeps its own reason in each_ctx. `each` runs on the
     * calling thread. Returns CK_OK when every key was listed (or `each` stopped it), else an
     * error code as for put; keys reported before a failure stay reported, so a caller that
     * needs the whole list treats a failure as "not known". */
    int (*list)(void *ctx, const char *prefix, const char *start_after,
                int (*each)(void *each_ctx, const char *key, size_t len), void *each_ctx,
                ck_error *err);
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
    double target;      /* how far a compaction brings the view, as a fraction of the window;
                           0 means 0.50; must be below soft */
    uint64_t keep_tail_tokens; /* the verbatim tail's token budget; 0 means window / 4 */
    double backend_timeout; /* seconds one backend put or get may take; 0 means
                               CK_BACKEND_TIMEOUT_DEFAULT; see ck_backend_timeout() */
    const char *store; /* NULL or "": files under store_dir (or `backend`); else the URL of the
                          built-in S3 backend, "s3://BUCKET/PREFIX?region=..." (see
                          ck_s3_backend_new()), which the compactor makes, owns and frees, and
                          through which evidence, audit records and the resumed state go;
                          excludes `backend`. ck_compactor_get_options() gives it normalized,
                          without credentials (ck_s3_backend_url()) */
    uint64_t min_gain; /* tokens the warn tier's offloads must free together before they change
                          the view; 0 means window / 20 */
    double cache_read, cache_write; /* the provider's prompt-cache prices per token, relative to
                          uncached input (Anthropic 0.1 and 1.25; see ck_prompt_cache_preset()):
                          with both set, a soft compaction or a batched offload changes the
                          view only when the reads it saves outweigh the cache it invalidates;
                          both 0: no cost model. 0 < read <= 1 <= write <= 10 */
} ck_compactor_options;

/*
 * The prices of a named prompt-cache preset into *read / *write: "anthropic" (reads 0.1x,
 * writes 1.25x, its five-minute cache) and "openai" (cached input 0.1x as the gpt-5 family
 * bills it, no write premium: 1x). Returns CK_OK, or CK_EINVAL for another name (err->where
 * "prompt_cache").
 */
CK_API int ck_prompt_cache_preset(const char *name, double *read, double *write, ck_error *err);

/* The default and the largest time limit of one evidence-backend call, in seconds. */
#define CK_BACKEND_TIMEOUT_DEFAULT 10.0
#define CK_BACKEND_TIMEOUT_MAX 86400.0

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
    double timeout;          /* seconds for the whole call: every attempt, connect included,
                                and every wait between attempts; 0 means 60 */
    double connect_timeout;  /* seconds for one connection; 0 means 10 */
    int max_retries;         /* attempts after the first; 0 means 3, negative means none */
    double backoff;          /* first retry delay in seconds, doubled each time with jitter;
                                0 means 0.5 */
    const char *const *headers; /* extra "Name: value" lines, NULL-terminated list, or NULL */
    int reasoning_model;     /* OpenAI API only: 1 sends "max_completion_tokens" and no
                                "temperature", as reasoning models (o1, o3, o4-mini, gpt-5...)
                                require; -1 sends "max_tokens" and "temperature": 0; 0 decides
                                by the model name (see ck_http_reasoning_model()) */
    const char *extra_body;  /* a JSON object (text) whose members are added to every request
                                body, replacing ours of the same name ("temperature",
                                "reasoning_effort"...); NULL for none */
} ck_http_options;

/* An HTTP summarizer. Opaque. */
typedef struct ck_http_summarizer ck_http_summarizer;

/* The built-in S3 evidence backend (see ck_s3_backend_new()). Opaque. */
typedef struct ck_s3_backend ck_s3_backend;

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
 * One sentence for violation `v` of `history`, as ck_check_pairs() found it with `format`, for
 * logs and error messages: "messages[3]: tool call \"call_1\" has no tool result". The id is
 * quoted as JSON.stringify() quotes it (\" \\ \b \f \n \r \t, \u00XX for the other control
 * bytes) and cut to its first 64 bytes, so that a hostile id cannot make the sentence
 * ambiguous. Caller owns *out (NUL-terminated, *len bytes without the NUL; `len` may be NULL);
 * release it with ck_free(). Returns CK_OK, CK_EINVAL (a NULL argument), CK_ENOMEM.
 */
CK_API int ck_pair_violation_describe(const ck_history *history, const ck_pair_violation *v,
                                      ck_format format, char **out, size_t *len);

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
 * fail. Thread-safe. The first count by o200k or default (cl100k) in a process indexes that
 * encoding's rank table into static memory (about 20 ms and 5.5 MB; cl100k 10 ms and 3 MB, a
 * further 1 MB on the first unbroken piece of over 96 bytes); counts of text pieces are then
 * served from a per-process cache (512 KB of the 5.5 or 3 MB).
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

/* "default", "chars4", "cl100k" or "o200k"; NULL for a bad value, so that a loop from 0 up to
 * the first NULL lists every estimator. Static string; never free. */
CK_API const char *ck_estimator_name(ck_estimator est);

/* The estimator whose ck_estimator_name() is the `len` bytes at `name` (not NUL-terminated):
 * sets *out and returns CK_OK, or returns CK_EINVAL for any other name or a NULL argument
 * (*out untouched). Thread-safe. */
CK_API int ck_estimator_from_name(const char *name, size_t len, ck_estimator *out);

/* Tokens charged for one image part, in every estimator. */
#define CK_IMAGE_TOKENS 765
/* Tokens the counting estimators (default, cl100k and o200k) add per message, and once per
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
 * Reads a JSON message array (or an object with a "messages" array, as Anthropic requests
 * have, whose other fields are kept) into a new history, in the dialect its messages show (see
 * ck_history_read()). The history keeps the parsed document, so its strings stay valid until
 * it is freed. Errors name the place: CK_ESYNTAX (err->offset; duplicate keys and text after
 * the value too), CK_ETYPE, CK_EMISSING, CK_EUTF8, CK_ETOOBIG, CK_EFORMAT.
 * Caller owns the result; release it with ck_history_free(). Returns NULL on error.
 */
CK_API ck_history *ck_json_read(const char *json, size_t len, ck_error *err);

/* ck_json_read() in the dialect `format` (CK_FORMAT_AUTO detects it, as ck_json_read()
 * does). Errors as ck_json_read(), and CK_EFORMAT for a message of another dialect.
 * Caller owns the result; release it with ck_history_free(). Returns NULL on error. */
CK_API ck_history *ck_json_read_as(const char *json, size_t len, ck_format format,
                                   ck_error *err);

/*
 * Writes the message list that `view` describes as JSON text, built from the document that
 * `history` (made by ck_json_read()) parsed: kept messages and unknown fields as parsed
 * (numbers as written, strings with every byte), new and edited messages in the history's
 * dialect. `format` is ignored (the history's dialect writes). `pretty` indents.
 * Caller owns the result; release it with ck_free(). Returns NULL when out of memory or
 * when `history` was not made by ck_json_read() (then `err->code` says which).
 */
CK_API char *ck_json_write(const ck_history *history, const ck_view *view, ck_format format,
                           int pretty, ck_error *err);


/* ------------------------------------------------------------------------------------------ */
/* Section - Host values: how the core reads and builds the host's own messages              */
/* ------------------------------------------------------------------------------------------ */

/*
 * A host value: a handle the host gives the core for one of its values (a Python object, a JS
 * value, a node of a parsed JSON document) and gets back unchanged. The core never looks
 * inside; `ptr` and `aux` are the host's to use.
 */
typedef struct ck_value {
    void *ptr;
    uint64_t aux;
} ck_value;

/* What a host value is. */
typedef enum ck_value_kind {
    CK_VALUE_ABSENT = 0, /* no value (a field that is not there) */
    CK_VALUE_NULL = 1,
    CK_VALUE_BOOL = 2,
    CK_VALUE_NUMBER = 3,
    CK_VALUE_STRING = 4,
    CK_VALUE_ARRAY = 5,  /* a list: count and items */
    CK_VALUE_OBJECT = 6, /* fields by key */
    CK_VALUE_OTHER = 7,  /* anything else; read as its JSON where a value is taken whole */
} ck_value_kind;

/*
 * Every field name the dialects read or write, once: X(NAME, "name"). A host makes its own
 * key objects from this list once (ck_key_name()), so a lookup by key costs no string work.
 */
#define CK_KEY_LIST(X)                                                                         \
    X(ROLE, "role") X(CONTENT, "content") X(TYPE, "type") X(TEXT, "text")                      \
    X(TOOL_CALLS, "tool_calls") X(ID, "id") X(FUNCTION, "function") X(NAME, "name")           \
    X(ARGUMENTS, "arguments") X(TOOL_CALL_ID, "tool_call_id") X(TOOL_USE_ID, "tool_use_id")   \
    X(INPUT, "input") X(IS_ERROR, "is_error") X(THINKING, "thinking") X(SOURCE, "source")      \
    X(IMAGE_URL, "image_url") X(CALL_ID, "call_id") X(OUTPUT, "output")                        \
    X(SUMMARY, "summary") X(PARTS, "parts") X(FUNCTION_CALL, "functionCall")                   \
    X(FUNCTION_RESPONSE, "functionResponse") X(ARGS, "args") X(RESPONSE, "response")          \
    X(TOOL_CALL_ID_CAMEL, "toolCallId") X(TOOL_NAME, "toolName") X(RESULT, "result")          \
    X(VALUE, "value") X(DATA, "data") X(CACHE_CONTROL, "cache_control")                        \
    X(INLINE_DATA, "inlineData") X(FILE_DATA, "fileData") X(MESSAGES, "messages")             \
    X(SYSTEM, "system") X(THOUGHT, "thought") X(FUNCTION_CALL_SNAKE, "function_call")          \
    X(FUNCTION_RESPONSE_SNAKE, "function_response") X(INLINE_DATA_SNAKE, "inline_data")       \
    X(FILE_DATA_SNAKE, "file_data") X(ERROR, "error") X(STATUS, "status")                     \
    X(IS_ERROR_CAMEL, "isError") X(PROVIDER_EXECUTED, "providerExecuted")                     \
    X(MEDIA_TYPE, "mediaType") X(IMAGE, "image") X(CALL_ID_CAMEL, "callId")                  \
    X(RAW_CONTENT, "rawContent")

#define CK__KEY_ENUM(name, text) CK_KEY_##name,
typedef enum ck_key { CK_KEY_LIST(CK__KEY_ENUM) CK_KEY_COUNT } ck_key;
#undef CK__KEY_ENUM

/* The field name of a key ("role"...). Static string; never free. NULL for a bad value. */
CK_API const char *ck_key_name(ck_key key);

/*
 * How the core reads the host's values. Every callback returns CK_OK (or, for `field`, 1 when
 * the field is there and 0 when it is not) or a negative status; a status other than the
 * core's own is passed back to the caller unchanged, so a binding whose host code raised can
 * keep the exception and raise it again.
 *   kind     what `v` is;
 *   field    field `key` of object `v` into *out (absent: return 0);
 *   count    the number of items of array `v`;
 *   item     item i of array `v`;
 *   string   the UTF-8 bytes of string `v`, which must stay valid and unchanged until the
 *            history the read fills is cleared or freed (the host pins or copies them, e.g.
 *            with ck_history_alloc());
 *   boolean  a boolean's value;
 *   json     the compact JSON text of any value (a tool call's arguments object), kept valid
 *            as strings are;
 *   length   optional (NULL: none): the byte length of string `v`'s UTF-8, without a copy.
 *            A host whose `string` copies gives it, so that pieces joined into one text (a
 *            tool result's list of texts) are measured, and refused together over
 *            CK_MAX_STRING, before any of them is copied.
 * The callbacks run on the thread that called the core, one at a time.
 */
typedef struct ck_host_reader {
    void *ctx;
    ck_value_kind (*kind)(void *ctx, ck_value v);
    int (*field)(void *ctx, ck_value v, ck_key key, ck_value *out);
    int (*count)(void *ctx, ck_value v, size_t *n);
    int (*item)(void *ctx, ck_value v, size_t i, ck_value *out);
    int (*string)(void *ctx, ck_value v, const char **s, size_t *len);
    int (*boolean)(void *ctx, ck_value v, int *out);
    int (*json)(void *ctx, ck_value v, const char **s, size_t *len);
    int (*length)(void *ctx, ck_value v, size_t *len);
} ck_host_reader;

/*
 * How the core builds the host's values for a view. Values made here belong to the builder
 * until they are handed on: `set` and `push` take the value they are given (also on failure);
 * `drop` releases one that was not handed on. Every callback returns CK_OK or a negative
 * status, passed back as for the reader.
 *   object   a new empty object;
 *   message  a new empty message object of the dialect's kind `type` ("human", "tool"...;
 *            NULL when the dialect has none), like the host's message `like` (a value read
 *            from the same list, or an ABSENT value): a host whose messages are instances of
 *            classes makes one of the class that kind names; may be NULL (then `object`);
 *   array    a new empty array;
 *   string   a new string of `len` bytes of UTF-8;
 *   boolean  a new boolean;
 *   json     a new value from JSON text (a tool call's arguments as an object);
 *   set      sets field `key` of object `obj` (made by this builder, or a copy) to `v`;
 *   push     appends `v` to array `arr`;
 *   copy     a shallow copy of object `v` (a value read from the host): every field, known or
 *            not, the same values;
 *   ref      the value `v` read from the host itself, for a list or object being built;
 *   unset    removes field `key` from a copy;
 *   drop     releases a value that was not handed on.
 */
typedef struct ck_host_builder {
    void *ctx;
    int (*object)(void *ctx, ck_value *out);
    int (*message)(void *ctx, ck_value like, const char *type, ck_value *out);
    int (*array)(void *ctx, ck_value *out);
    int (*string)(void *ctx, const char *s, size_t len, ck_value *out);
    int (*boolean)(void *ctx, int v, ck_value *out);
    int (*json)(void *ctx, const char *json, size_t len, ck_value *out);
    int (*set)(void *ctx, ck_value obj, ck_key key, ck_value v);
    int (*push)(void *ctx, ck_value arr, ck_value v);
    int (*copy)(void *ctx, ck_value v, ck_value *out);
    int (*ref)(void *ctx, ck_value v, ck_value *out);
    int (*unset)(void *ctx, ck_value obj, ck_key key);
    void (*drop)(void *ctx, ck_value v);
} ck_host_builder;

/*
 * Reads messages [from, n) of the host's message list `list` (an array value) into `history`,
 * appending them: messages [0, from) must have been read into it already (by an earlier call,
 * from an unchanged list; ck_history_truncate() to `from` first when the rest changed).
 * `format` names the dialect; AUTO decides it from the messages (the first one that only one
 * dialect can read decides; a list no dialect tells apart reads as OpenAI), and *format_out,
 * when not NULL, gets the dialect used. The history keeps, per message and per part, the host
 * value it came from, for ck_view_build().
 * Errors name the place (err->where "messages[3].tool_calls[0].id", err->index 3):
 * CK_ETYPE, CK_EMISSING, CK_EUTF8, CK_ETOOBIG, CK_EFORMAT (a message of another dialect than
 * the one requested or detected), CK_ENOMEM, or a reader's own status. On error the history
 * holds the messages before the one that failed.
 */
CK_API int ck_history_read(ck_history *history, const ck_host_reader *reader, ck_value list,
                           size_t from, ck_format format, ck_format *format_out, ck_error *err);

/*
 * Whether the host array `list` holds tool schemas rather than messages (for a counter that
 * takes either): 1 when it is not empty, every item is an object, none has a "role" and no
 * dialect reads any item as a message only it writes (a LangChain message dict, a Responses
 * function_call item, a Gemini turn with a functionCall...); 0 otherwise, so that reading it as
 * messages names what is wrong; a reader's negative status when one fails. Allocates nothing.
 */
CK_API int ck_list_is_tools(const ck_host_reader *reader, ck_value list);

/* The dialect a history was read in (CK_FORMAT_AUTO for one built with add_message). */
CK_API ck_format ck_history_dialect(const ck_history *history);

/*
 * Builds the host's message list that `view` describes, over the messages `history` read with
 * ck_history_read(): kept messages are the host's own values (`ref`), edited ones shallow
 * copies with only what changed replaced (unknown fields kept), new ones (a checkpoint, a stub
 * result) made in the dialect's own shape. *out gets the new array. Errors: CK_EINVAL (the
 * history was not read with ck_history_read()), CK_ENOMEM, or a builder's own status (then
 * nothing is left over: every value made so far was dropped).
 */
CK_API int ck_view_build(const ck_view *view, const ck_history *history,
                         const ck_host_builder *builder, ck_value *out, ck_error *err);

/* "auto", "openai", "anthropic", "responses", "gemini", "ai-sdk", "langchain". Static string;
 * never free. NULL for a bad value. */
CK_API const char *ck_format_name(ck_format format);

/* The format a name stands for ("ai_sdk" and "aisdk" also name ai-sdk); CK_EINVAL when none
 * does. */
CK_API int ck_format_from_name(const char *name, size_t len, ck_format *out);

/* ------------------------------------------------------------------------------------------ */
/* Section - Compactor                                                                        */
/* ------------------------------------------------------------------------------------------ */

/*
 * Creates a compactor. With a session_id whose audit log exists under store_dir (or, with a
 * backend that has put_new and list, whose records are in the backend; see
 * ck_evidence_backend), the state of the last compaction (checkpoint, covered messages,
 * offloaded outputs) is resumed from it.
 * Errors: CK_EINVAL (err->where names the option: "context_window", "warn"...; for `store`,
 * "store" when a backend is given too, else the part of the URL or the variable
 * ck_s3_backend_new() names, with "url" spelled "store": "store.bucket", "AWS_ACCESS_KEY_ID"),
 * CK_EIO (libcurl could not start), CK_ENOMEM. No request is made here when the session is new
 * (session_id NULL); resuming one lists its records, and a store that cannot be read then
 * starts the session afresh, the next record saying why.
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
 * the tier, repairs broken tool-call pairs (storing what a repair drops), offloads large tool
 * outputs and archives the span it will fold (writing the evidence store first), and, for soft
 * and full, prepares the summary request (see ck_compaction_needs_summary()).
 *
 * The view it plans is bounded (DESIGN section 2): after warn, soft, full or emergency it is
 * at most soft x window, and it is never above the window (tool schemas and the usage factor
 * included). To get there it offloads, folds, then turns the largest outputs of the tail into
 * placeholders (the newest turn's last), folds older tail turns, and shows over-long messages
 * of the newest turn as head and tail; everything that leaves the view is stored first. Only
 * when even the pinned messages, the tool schemas and a bare checkpoint exceed the window does
 * it fail, with CK_EOVERFLOW (err->where says how many tokens they need and the window, and,
 * when they fit alone, "; with a checkpoint: N", what they need with the smallest one). A
 * store that cannot be written leaves outputs in the view: the bound may then be missed, and
 * the record's "error" says why.
 *
 * The session state changes only when the compaction is finished: one freed unfinished leaves
 * the compactor as it was (evidence it wrote stays in the store). Errors: CK_EFORMAT and the
 * other input errors of ck_history_format(), CK_EOVERFLOW, CK_ENOMEM. Caller owns *out; release
 * it with ck_compaction_free().
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
 * already), CK_ECONFLICT (records in a backend: another writer kept taking the record's seq;
 * err->where names the key; the compactor's state was reloaded from the newest records, and
 * the compaction's view must not be sent: compact again). An audit log that cannot be written
 * does not fail the compaction: the record's "error" says so.
 */
CK_API int ck_compactor_finish(ck_compactor *self, ck_compaction *c, ck_error *err);

/*
 * begin + summarize + finish in one call. `summarize` may be NULL: the extractive summarizer.
 * Caller owns *out; release it with ck_compaction_free().
 */
CK_API int ck_compactor_compact(ck_compactor *self, const ck_history *history,
                                uint64_t tool_tokens, ck_summarize_fn summarize, void *ctx,
                                ck_compaction **out, ck_error *err);

/*
 * ck_compactor_compact() of a call that needs nothing but the decision: a view at tier none
 * that stores nothing (no repair drops a result, nothing is offloaded or archived) and writes
 * no record. Such a call does no I/O, only the reading and the decision, so a host with an
 * event loop can take it there at once, and the rest (which may write the store and
 * summarize) elsewhere. On CK_OK, *out is the finished compaction (caller owns it; release it
 * with ck_compaction_free()), or NULL when the call would do more: the compactor is then as it
 * was (its token cache aside), and ck_compactor_begin() / ck_compactor_compact() does the call.
 * Errors as ck_compactor_begin()'s.
 */
CK_API int ck_compactor_compact_quiet(ck_compactor *self, const ck_history *history,
                                      uint64_t tool_tokens, ck_compaction **out,
                                      ck_error *err);

/* The tier chosen for the compaction. */
CK_API ck_tier ck_compaction_tier(const ck_compaction *c);

/* The resulting view over the history given to begin (after finish; NULL before). Borrowed
 * from `c`; valid until it is freed. */
CK_API const ck_view *ck_compaction_view(const ck_compaction *c);

/* The audit record as one line of JSON, or NULL when the compaction changed nothing (and wrote
 * no record). Borrowed from `c`; valid until it is freed; do not free or modify. */
CK_API const char *ck_compaction_record(const ck_compaction *c, size_t *len);

/* Estimated tokens of the view before and after (both count the tool schemas). The raw
 * estimates: the usage factor is not applied. */
CK_API uint64_t ck_compaction_tokens_before(const ck_compaction *c);
CK_API uint64_t ck_compaction_tokens_after(const ck_compaction *c);

/* What the view does to the provider's prompt cache, estimated like every other count (raw,
 * the tool schemas not counted): *prefix_kept the tokens of the view's leading messages that
 * are the same, in role and content, as those of the view this compactor returned last
 * (they may be billed as a cached prefix), *prefix_broken the tokens of the last view after
 * that run (cached, and now sent again or gone). Both 0 before ck_compactor_finish(), and on a
 * compactor's first view (a compactor made afresh, or resumed from its audit log, has no last
 * view). Either pointer may be NULL. */
CK_API void ck_compaction_cache(const ck_compaction *c, uint64_t *prefix_kept,
                                uint64_t *prefix_broken);

/* The view before and after as a fraction of the window, the figures the tiers are chosen on:
 * tool schemas included and the usage factor applied. */
CK_API double ck_compaction_ratio_before(const ck_compaction *c);
CK_API double ck_compaction_ratio_after(const ck_compaction *c);

/* What a repair did to a tool-call pairing (ck_compaction_repairs()). */
typedef enum ck_repair_kind {
    CK_REPAIR_ORPHAN_DROPPED = 0,    /* a result whose call is nowhere: stored, then dropped */
    CK_REPAIR_DUPLICATE_DROPPED = 1, /* a second result for one call: stored, then dropped */
    CK_REPAIR_MISPLACED_DROPPED = 2, /* a result outside a result message: stored, dropped */
    CK_REPAIR_STUB_ADDED = 3,        /* a call without a result got the stub result */
    CK_REPAIR_CALL_DROPPED = 4,      /* a call with an empty or repeated id, or outside an
                                        assistant message: stored, then dropped */
    CK_REPAIR_RESULT_MOVED = 5,      /* a result moved right behind its call */
    CK_REPAIR_KEPT_AS_TEXT = 6,      /* a result that had to go but could not be stored: kept
                                        in the view as a user message of text */
} ck_repair_kind;

typedef struct ck_repair {
    ck_repair_kind kind;
    size_t index;   /* the message in the history given to begin */
    const char *id; /* the tool-call id; borrowed from the compaction */
    size_t id_len;
} ck_repair;

/* Every change the pairing repair made, in message order (NULL and *n = 0 when none). The
 * array is borrowed from `c`; valid until it is freed. */
CK_API const ck_repair *ck_compaction_repairs(const ck_compaction *c, size_t *n);

/* "orphan_dropped", "duplicate_dropped"... Static string; never free. NULL for a bad value. */
CK_API const char *ck_repair_kind_name(ck_repair_kind kind);

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
 * Finds lines matching `pattern` (NUL-terminated) in one piece of evidence (`ref`) or, with ref
 * NULL, in all of the session's. The syntax is POSIX extended regular expressions as grep -E
 * takes them, plus \d \w \s (and \D \W \S, ASCII classes), \b \B \< \> and (?:...);
 * matching is case-sensitive, on UTF-8 characters, and takes time linear in the text (no
 * backtracking). The result is a JSON array of {"ref", "line", "text"}, at most `max_hits`
 * entries (0: 1000), where "line" counts from 0 as read_evidence offsets do, so reading at that
 * offset lands on the line. The work of one call is capped at about a second: a search cut
 * short returns what it found, followed by {"ref": "", "line": 0, "text": why, "cut": true}.
 * Errors: CK_EINVAL (bad pattern, including backreferences, which are not supported, and
 * repetition counts above 1000: err->where = "pattern", err->offset = the byte; unknown ref),
 * CK_EIO (a store that cannot be read, or a symbolic link inside it: err->where = "symlink
 * refused: <path>"), CK_ENOMEM. Caller owns *out; release it with ck_free().
 * Thread safety: on a compactor made without a backend, a search reads only what
 * ck_compactor_new() set up (the options and the store's paths), so searches may run on other
 * threads beside each other and beside any other call on the compactor but its free.
 */
CK_API int ck_compactor_search_evidence(const ck_compactor *self, const char *ref, size_t ref_len,
                                        const char *pattern, size_t max_hits, char **out,
                                        size_t *out_len, ck_error *err);

/*
 * The time limit a host gives each call of its evidence backend (ck_evidence_backend), for
 * ck_compactor_options.backend_timeout = `seconds`: 0 means CK_BACKEND_TIMEOUT_DEFAULT (10 s);
 * other values must be in (0, CK_BACKEND_TIMEOUT_MAX]. The core cannot interrupt a callback,
 * so the host that runs the backend enforces the limit; a call past it fails as a storage
 * failure (fail-open: the output stays in the view and the record says "backend timed out").
 * Sets *effective (may be NULL). Errors: CK_EINVAL (err->where = "backend_timeout").
 * Thread-safe.
 */
CK_API int ck_backend_timeout(double seconds, double *effective, ck_error *err);

/*
 * The definition of the read_evidence tool for a tool list, as JSON text: OpenAI's function
 * shape or Anthropic's tool shape. The tool reads a piece of evidence by `ref` (lines from
 * `offset`, counted from 0, `limit` of them), or, given a `pattern`, finds the lines that match
 * it in one piece (`ref`) or in the whole session (no ref), each with the offset to read at.
 * Static string; never free.
 */
CK_API const char *ck_read_evidence_tool(ck_format format);

/*
 * Answers a model's call of the read_evidence tool: `args` is the call's arguments as JSON
 * text ({"ref", "offset", "limit", "pattern"}; an empty text means {}). The answer is the text
 * for the tool result: the lines read, the matches found, or what was wrong with the call
 * (a bad argument, an unknown ref), so the model can correct it; *is_error says which. Errors
 * (as codes): CK_ENOMEM only. Caller owns *out; release it with ck_free().
 */
CK_API int ck_compactor_answer_read_evidence(const ck_compactor *self, const char *args,
                                             size_t len, char **out, size_t *out_len,
                                             int *is_error);

/*
 * Tells the compactor how many prompt tokens the provider counted for the last view it
 * returned. The ratio to ctxkeel's own estimate becomes a correction factor (the median of
 * the last five readings, each clamped to [0.5, 2]) applied to every later tier decision and
 * saved in the session state. Readings of 0 are ignored.
 */
CK_API void ck_compactor_observe_usage(ck_compactor *self, uint64_t prompt_tokens);

/* The current correction factor (1.0 until usage was observed). */
CK_API double ck_compactor_usage_factor(const ck_compactor *self);

/*
 * The whole prompt's token count, for ck_compactor_observe_usage(), from a provider's usage
 * object given as `len` bytes of JSON text, as the provider (or its SDK) returned it:
 *   OpenAI Chat Completions  {"prompt_tokens": N, ...}        (cached tokens are inside N)
 *   OpenAI Responses         {"input_tokens": N, ...}         (likewise)
 *   Anthropic Messages       {"input_tokens": N, "cache_read_input_tokens": R,
 *                             "cache_creation_input_tokens": C}: N + R + C, because
 *                            Anthropic's input_tokens leaves the cached part out
 *   AI SDK usage/totalUsage  {"inputTokens": N}, or {"inputTokens": {"total": N}};
 *                            AI SDK 4 {"promptTokens": N}
 *   Gemini usageMetadata     {"promptTokenCount": N} (Python SDK: "prompt_token_count")
 *   Bedrock Converse         {"inputTokens": N, "cacheReadInputTokens": R,
 *                             "cacheWriteInputTokens": W}: N + R + W
 * or a wrapper holding one of these under "usage", "usageMetadata" or "usage_metadata" (a
 * whole response or message), or a bare number. A field that is null counts as absent; a
 * cache field that is absent counts 0. Pure: reads nothing else, keeps nothing.
 * Returns CK_OK with *out set, or:
 *   CK_ESYNTAX  the text is not JSON (err->offset);
 *   CK_EINVAL   no shape above: err->where lists the fields looked for; or a count that is no
 *               non-negative integer (a string, -1, 1.5, 1e30) or a sum past 2^64:
 *               err->where names it ("usage.cache_read_input_tokens");
 *   CK_ENOMEM.
 * Thread-safe.
 */
CK_API int ck_usage_prompt_tokens(const char *json, size_t len, uint64_t *out, ck_error *err);

/* "none", "warn", "soft", "full", "emergency". Static string; never free. */
CK_API const char *ck_tier_name(ck_tier tier);

/* The marker that starts every checkpoint message. Static string; never free. */
CK_API const char *ck_checkpoint_marker(void);


/* ------------------------------------------------------------------------------------------ */
/* Section - HTTP summarizer (libcurl)                                                        */
/* ------------------------------------------------------------------------------------------ */

/*
 * Creates an HTTP summarizer. Errors: CK_EINVAL (err->where names the option: "base_url",
 * "model", "timeout", "headers[2]", "extra_body"... an extra_body that is not one JSON object
 * without repeated keys included; err->offset then says where in its text), CK_ENOMEM.
 * Returns NULL on error. Caller owns the result; release it with ck_http_summarizer_free().
 * Thread-safe once made: calls from several threads run independent transfers.
 */
CK_API ck_http_summarizer *ck_http_summarizer_new(const ck_http_options *opts, ck_error *err);

/* Releases an HTTP summarizer. NULL is a no-op. No call may be running on it. */
CK_API void ck_http_summarizer_free(ck_http_summarizer *self);

/*
 * Sends `req` and waits for the reply (blocking; run it off the event loop or without the
 * GIL). Retries connection errors, 429 and 5xx with exponential backoff and jitter, honouring
 * Retry-After; other 4xx fail at once. The whole call, retries and waits included, ends
 * within the `timeout` option: a wait that would pass it is not begun, and the call fails with
 * the last attempt's error. `cancel`, when not NULL, is polled during the transfer and the
 * waits: a non-zero value aborts with CK_ECANCELED within about 100 ms.
 * The API key is read from the environment at each call; one holding a control byte (a line
 * break that would start a header of its own) is never sent: the call fails with CK_EINVAL.
 * Every text the provider returns has the key blanked out ("[redacted]") before it reaches
 * *reply or *why, so a server that echoes the key puts it in no checkpoint, record or log.
 * On success *reply holds the text (NUL bytes kept; caller owns it; release it with
 * ck_free()) and *prompt_tokens / *completion_tokens (either may be NULL) the usage the
 * provider reported: the whole prompt as ck_usage_prompt_tokens() counts it, and the reply's
 * tokens; a count that is absent or no non-negative integer leaves its variable untouched.
 * On failure *why (when not NULL) holds a one-line reason naming the HTTP status and the
 * provider's error message, truncated (caller owns it; ck_free()).
 * Errors: CK_ETIMEDOUT, CK_ECANCELED, CK_EIO (connection), CK_ESUMMARY (an HTTP error or a
 * reply without text), CK_EINVAL (the key), CK_ENOMEM.
 */
CK_API int ck_http_summarize(ck_http_summarizer *self, const ck_summary_request *req,
                             const volatile int *cancel, char **reply, size_t *reply_len,
                             uint64_t *prompt_tokens, uint64_t *completion_tokens, char **why);

/* A ck_summarize_fn over ck_http_summarize(): `ctx` is the ck_http_summarizer. A failure
 * becomes the compaction's fallback reason. */
CK_API int ck_http_summarize_fn(void *ctx, const ck_summary_request *req, ck_compaction *c);

/*
 * True (1) when `model` (NUL-terminated) names an OpenAI reasoning model, which refuses
 * "max_tokens" and a "temperature": an o-series name ("o1", "o3-mini", "o4-mini-2025-04-16")
 * or a gpt-5 one ("gpt-5", "gpt-5-mini", "gpt-5.1"), in any case, after any "provider/"
 * prefix ("openai/o3"). This is the default of ck_http_options.reasoning_model. Thread-safe.
 */
CK_API int ck_http_reasoning_model(const char *model);

/* ------------------------------------------------------------------------------------------ */
/* Section - S3 evidence backend (libcurl)                                                    */
/* ------------------------------------------------------------------------------------------ */

/*
 * Creates an evidence backend over an S3 bucket (AWS S3 or an S3-compatible server), from the
 * `len` bytes of `url` (not NUL-terminated; copied):
 *
 *   s3://BUCKET[/PREFIX][?region=R][&endpoint=E][&timeout=T][&retries=N][&max_keys=M]
 *
 *   BUCKET    3-63 of a-z, 0-9, '.' and '-' (required);
 *   PREFIX    put before every key ("a/b" and "a/b/" are the same); A-Z a-z 0-9 . _ ~ - and
 *             '/' only, with no empty, "." or ".." segment;
 *   region    the signing region, such as us-east-1; default $AWS_REGION, then
 *             $AWS_DEFAULT_REGION (one of the three is required);
 *   endpoint  "http[s]://host[:port]" of an S3-compatible server, addressed path-style
 *             (E/BUCKET/KEY); default https://BUCKET.s3.R.amazonaws.com (path-style on
 *             https://s3.R.amazonaws.com for dotted bucket names);
 *   timeout   seconds one call may take, retries and their waits included, every page of a
 *             listing together (default 10);
 *   retries   attempts after the first for connection errors, timeouts, 429 and 5xx, with
 *             exponential backoff (100 ms doubled, at most 2 s) and jitter, and the server's
 *             Retry-After when it fits the time left (0 to 10, default 3);
 *   max_keys  keys per ListObjectsV2 page (1 to 1000, default 1000).
 * Values may be percent-encoded. Requests are signed with libcurl's AWS SigV4; the
 * credentials are read here, once, from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
 * (required) and AWS_SESSION_TOKEN (optional, sent as x-amz-security-token). They are never
 * copied into an error, a reason or the normalized URL, and are wiped when the backend is freed.
 * The headers are signed, a body is not (x-amz-content-sha256: UNSIGNED-PAYLOAD, as the AWS
 * SDKs upload): on an http:// endpoint nothing but the network protects a body in transit.
 *
 * The operations, through ck_s3_backend_evidence(): put is a PUT that replaces the object
 * (retried safely, since the core puts one text per key); get is a GET, where 404 means "not
 * stored" (CK_OK, *out NULL) unless the bucket itself is missing; put_new is a PUT with
 * If-None-Match: * where 412 gives CK_ECONFLICT, and a retried put_new that finds the bytes it
 * was sending under the key counts as stored (its earlier attempt won); list is
 * ListObjectsV2 with prefix, start-after and continuation tokens, each key reported without
 * the URL's PREFIX, and fails with CK_EIO if the server's keys do not rise in byte order. Keys
 * follow the PREFIX rules (1 to 1024 bytes with it); another key gives CK_EINVAL. Failures
 * write a reason into err->where, such as "S3 GET: HTTP 403 access denied
 * (SignatureDoesNotMatch)" or "S3 PUT: Couldn't connect to server (4 attempts)": CK_EIO for
 * a refusal (403 says "access denied"), an unreachable server or exhausted retries,
 * CK_ETIMEDOUT when the time ran out waiting for an answer, CK_ENOMEM. put_new relies on the
 * server's conditional writes (AWS S3 has them; a server that ignores If-None-Match
 * overwrites).
 *
 * Errors: CK_EINVAL naming the part in err->where ("url.scheme", "url.bucket", "url.prefix",
 * "url.region", "url.endpoint", "url.timeout", "url.retries", "url.max_keys", "url.<unknown
 * parameter>", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
 * "AWS_REGION"), CK_EIO (libcurl could not start), CK_ENOMEM. Makes no request: a wrong
 * endpoint or secret shows at the first call. Returns NULL on error.
 * Caller owns the result; release it with ck_s3_backend_free().
 * Thread-safe once made: calls from several threads (several compactors sharing it) run
 * independent transfers; idle connections are kept for reuse.
 */
CK_API ck_s3_backend *ck_s3_backend_new(const char *url, size_t len, ck_error *err);

/* Releases an S3 backend and its connections. NULL is a no-op. No call may be running on it,
 * and no compactor may still hold its ck_s3_backend_evidence(). */
CK_API void ck_s3_backend_free(ck_s3_backend *self);

/*
 * The backend's operations (put, get, put_new, list; ctx is `self`), for
 * ck_compactor_options.backend or for calling directly. NULL when self is NULL.
 * Borrowed from `self`; valid until it is freed; do not free or modify.
 */
CK_API const ck_evidence_backend *ck_s3_backend_evidence(const ck_s3_backend *self);

/*
 * The URL in normalized form, "s3://BUCKET/PREFIX/?region=R[&endpoint=E]", with no
 * credential: what a record or a log may say about where evidence went. NULL when self is
 * NULL. Borrowed from `self`; valid until it is freed; do not free or modify.
 */
CK_API const char *ck_s3_backend_url(const ck_s3_backend *self);

/* ------------------------------------------------------------------------------------------ */
/* Section - Replay                                                                           */
/* ------------------------------------------------------------------------------------------ */

/*
 * A replay feeds a recorded transcript to a compactor as an agent loop would have: before
 * every assistant message (a model call) the history up to it, and once more after the last
 * message. Each call gives one row. The CLI's `replay`, Python's ctxkeel.replay() and Node's
 * replay() all run ck_replay_run(), so their rows agree.
 *
 * Rows are read through ck_replay_get(), which hands out a pointer into the replay, so fields
 * added at the end of this struct in later versions do not break callers built against this
 * one. Strings in a row are NUL-terminated as well as counted.
 */
typedef struct ck_replay_row {
    size_t call;             /* 1-based number of the model call */
    size_t messages;         /* messages of the history at this call */
    size_t view_messages;    /* messages of the view sent */
    uint64_t history_tokens; /* estimated tokens of the whole history at this call: what would
                                be sent without ctxkeel (the compactor's estimator or counter,
                                without its usage factor) */
    uint64_t tokens_before;  /* the view before this call's compaction (see
                                ck_compaction_tokens_before()) */
    uint64_t tokens_after;   /* the view sent */
    double ratio_before;     /* tokens_before / context_window */
    double ratio_after;      /* tokens_after / context_window */
    uint64_t prefix_kept;    /* tokens of the view that are a prefix of the call before's view,
                                and */
    uint64_t prefix_broken;  /* tokens of the call before's view after that prefix (see
                                ck_compaction_cache()) */
    ck_tier tier;            /* the tier this call's compaction chose */
    size_t compaction;       /* 1-based number of the compaction this call made (an audit
                                record written), 0 when the view needed no change */
    size_t summarized;       /* messages folded into the checkpoint by it */
    size_t offloaded;        /* tool outputs moved to the evidence store by it */
    size_t summary_calls;    /* summary requests it made (0 or 1): answered by the summarizer
                                given to ck_replay_run(), or by the extractive one without */
    uint64_t summary_tokens; /* estimated tokens of those requests (system prompt + prompt) */
    int fallback;            /* 1 when the summarizer failed and the extractive one wrote the
                                checkpoint (the record's "fallback" says why) */
    const char *action;      /* one line that says what the call did: "-" for nothing, else
                                ">> compaction N: ..." */
    const char *record;      /* the audit record, one line of JSON; NULL without a compaction */
    size_t record_len;
    const char *checkpoint;  /* the text of the checkpoint message, on the call whose view first
                                holds it (NULL on the calls that resend it, and before any) */
    size_t checkpoint_len;
    const char *placeholder; /* the text that replaced the first output this compaction
                                offloaded, as the view shows it; NULL when none */
    size_t placeholder_len;
} ck_replay_row;

/* Sums over the rows of a replay (see ck_replay_totals()). */
typedef struct ck_replay_total {
    size_t calls;                       /* model calls */
    size_t per_tier[CK_TIER_EMERGENCY + 1]; /* calls per tier, indexed by ck_tier */
    size_t compactions;                 /* calls that changed the view */
    size_t summary_calls;               /* summary requests */
    uint64_t summary_tokens;            /* their estimated tokens */
    size_t offloaded;                   /* outputs moved to the evidence store */
    uint64_t tokens_sent;               /* tokens_after summed over the calls: sent with ctxkeel */
    uint64_t tokens_without;            /* history_tokens summed: sent without ctxkeel */
    uint64_t prefix_kept;               /* prefix_kept summed: tokens a prompt cache can hold */
    size_t prefix_breaks;               /* calls after the first whose view changed a message
                                           of the call before's (prefix_broken > 0) */
    double peak_ratio;                  /* the largest ratio_after */
    double peak_ratio_without;          /* the largest history_tokens / context_window */
    size_t over_window_without;         /* calls whose whole history exceeds the window: a
                                           provider would refuse them without ctxkeel */
    size_t first_over_without;          /* the first of those calls (1-based), 0 when none */
} ck_replay_total;

/* A finished replay: its rows. Opaque. */
typedef struct ck_replay ck_replay;

/*
 * Replays `history` through `compactor` (whose session state and evidence store it uses and
 * changes, as real calls would): one ck_compactor_compact() per model call, on the history up
 * to that call. `summarize` and `ctx` are as for ck_compactor_compact(); NULL is the
 * extractive summarizer. The history must stay alive and unchanged during the call; nothing
 * of it is kept after. Errors: those of ck_compactor_compact() (the replay stops at the first
 * and returns nothing), CK_EINVAL (a NULL argument), CK_ENOMEM.
 * Caller owns *out; release it with ck_replay_free().
 */
CK_API int ck_replay_run(ck_compactor *compactor, const ck_history *history,
                         ck_summarize_fn summarize, void *ctx, ck_replay **out, ck_error *err);

/* Releases a replay and its rows. NULL is a no-op. */
CK_API void ck_replay_free(ck_replay *self);

/* Number of rows (model calls). */
CK_API size_t ck_replay_count(const ck_replay *self);

/* Row `i` (0-based), or NULL when i is out of range. Borrowed from `self`; valid until it is
 * freed; do not free or modify. */
CK_API const ck_replay_row *ck_replay_get(const ck_replay *self, size_t i);

/* The context window the replay measured against. */
CK_API uint64_t ck_replay_window(const ck_replay *self);

/* Fills `out` with the sums over every row (all zero for NULL). */
CK_API void ck_replay_totals(const ck_replay *self, ck_replay_total *out);

/*
 * The chart of a replay as an SVG document: tokens sent per model call as a share of the
 * window, with the compactor's tier thresholds as bands, a dashed marker at each compaction,
 * the view before and after compaction and the whole history (what would be sent without
 * ctxkeel), axes labelled. `title` (NUL-terminated, may be NULL) heads it, escaped.
 * Returns CK_OK, CK_EINVAL (NULL arguments) or CK_ENOMEM. `len` may be NULL.
 * Caller owns *out; release it with ck_free().
 */
CK_API int ck_replay_svg(const ck_replay *self, const char *title, char **out, size_t *len);

/* ------------------------------------------------------------------------------------------ */
/* Section - Command line                                                                     */
/* ------------------------------------------------------------------------------------------ */

/*
 * The ctxkeel command: `ctxkeel check|repair|tokens|compact|replay FILE [options]`, and
 * `ctxkeel --help`, which explains every subcommand, flag and output column. argv[0] is the
 * program's name; the rest are the arguments as a shell passes them. Returns the exit status:
 * 0 success, 1 violations found (check), 2 bad usage or input.
 *
 * This is the one function of the library that does I/O of its own: it reads the FILE it is
 * given (or standard input for "-"), writes its report to stdout and its diagnostics to
 * stderr through C stdio, writes the files named by -o and --svg, and uses the evidence store
 * of --store. It flushes stdout and stderr before it returns, so a host that calls it in its
 * own process (the Python console script, the npm bin) and writes through other buffers
 * afterwards keeps the order. The csrc/cli/ctxkeel.c program is only a main() around it.
 * Not thread-safe (stdio, and the environment variable of --api-key-env).
 */
CK_API int ck_cli_main(int argc, char **argv);

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
