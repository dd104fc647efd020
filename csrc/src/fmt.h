/* Private: the dialect ABI. Every message format the core speaks is one descriptor, in one
 * file fmt_<name>.c, that owns everything dialect-specific: how a host message reads into
 * parts (through the host reader), how an edited or new message is built back (through the
 * host builder), how calls pair with results, and how the dialect is recognized. The core
 * above this layer sees only parts and the descriptor's pairing rules; a binding sees only
 * the reader and builder it implements. A new dialect is one file and one line in fmt.c's
 * registry. */
#ifndef CK_FMT_H_
#define CK_FMT_H_

#include "ctxkeel.h"

#include "./buf.h"
#include "./internal.h"

/* ---- reading ---- */

/* One read in progress: the host's reader, the history being filled, the message being read
 * (index and value), and where errors go. */
typedef struct ck__rd {
    const ck_host_reader *r;
    ck_history *h;
    size_t index;
    ck_error *err;
    /* The indices a helper's `path` names with "%zu" (at most two, in order), so a dialect
     * passes a literal like ".content[%zu].text" after setting at[0] = k, and the place is
     * formatted only when an error happens. A path without "%zu" is used as it is. */
    size_t at[2];
} ck__rd;

ck_value_kind ck__rd_kind(ck__rd *rd, ck_value v);
/* 1 present, 0 absent (or null, when `null_absent`), < 0 an error. */
int ck__rd_field(ck__rd *rd, ck_value obj, ck_key key, ck_value *out);
int ck__rd_count(ck__rd *rd, ck_value arr, size_t *n);
int ck__rd_item(ck__rd *rd, ck_value arr, size_t i, ck_value *out);

/* The places errors name: "messages[<index>]" followed by `path` (printf-style, may be NULL). */
int ck__rd_fail(ck__rd *rd, int code, const char *msg, const char *path, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* The string value v (CK_ETYPE naming `path` when it is not one). */
int ck__rd_string(ck__rd *rd, ck_value v, const char **s, size_t *len, const char *path);
/* A required string field: CK_EMISSING / CK_ETYPE naming `path`. */
int ck__rd_need_string(ck__rd *rd, ck_value obj, ck_key key, const char **s, size_t *len,
                       const char *path);
/* An optional string field: *s = "" and *len = 0 when absent or null; CK_ETYPE when it is
 * something else. */
int ck__rd_opt_string(ck__rd *rd, ck_value obj, ck_key key, const char **s, size_t *len,
                      const char *path);
/* A string, or any other value as its compact JSON (arguments, inputs). */
int ck__rd_text_or_json(ck__rd *rd, ck_value v, const char **s, size_t *len, const char *path);
/* True when field `key` of obj is the boolean true. */
int ck__rd_true(ck__rd *rd, ck_value obj, ck_key key);
/* True when string field `key` of obj equals `lit`. */
int ck__rd_is(ck__rd *rd, ck_value obj, ck_key key, const char *lit);

/* Starts message rd->index with its host value; parts follow with ck__rd_part(). */
int ck__rd_message(ck__rd *rd, ck_value msg, ck_role role, uint32_t flags);
/* Appends a part read from host value `item` (an ABSENT value when the part has none). */
int ck__rd_part(ck__rd *rd, const ck_part *p, ck_value item);
/* Records, for the message just started, the object its fields stand in when the dialect
 * wraps them (ck__wr_inner_value() gives it back when building). */
int ck__rd_inner(ck__rd *rd, ck_value inner);
/* Reads a Chat Completions family content (value `content`, of kind `kind`) into parts: a
 * string is one TEXT part (host CK__HOST_WHOLE), null or absent none, a list one `item` call
 * per item; anything else is CK_ETYPE at "<at>.content" (`at` "" or where the fields stand). */
int ck__rd_chat_content(ck__rd *rd, ck_value content, ck_value_kind kind, const char *at,
                        int (*item)(ck__rd *rd, ck_value item, size_t k, const char *at));
/* Appends result part *p (id, name and flags set) whose text is `content`: a string, or the
 * text items of a list joined by newlines, its other items following as attached parts. */
int ck__rd_chat_result(ck__rd *rd, ck_part *p, ck_value content, const char *where);
/* Reads what every dialect's message starts with: an object with a string "role" (its role in
 * *role) and an optional "content" (*content, and its kind in *kind: CK_VALUE_ABSENT, and
 * *content the empty value, when there is none). Errors name the message's place. */
int ck__rd_head(ck__rd *rd, ck_value msg, ck_role *role, ck_value *content,
                ck_value_kind *kind);
/* Reads item k of a content list when it is a bare string (a text part, added) or anything
 * but an object (an error naming .content[k]): returns 1 then, with the result in *rc;
 * returns 0 for an object, left to the dialect. `p` is the part to fill, host set. */
int ck__rd_plain_item(ck__rd *rd, ck_value item, size_t k, ck_part *p, int *rc);

/* Starts reading item k of a content list into p (zeroed, host k): a bare string or a
 * non-object is done as by ck__rd_plain_item() and returns 1 (*rc its status); an object
 * without a string "type" returns 1 with the error in *rc; else returns 0 with the type. */
int ck__rd_item_head(ck__rd *rd, ck_value item, size_t k, ck_part *p, const char **type,
                     size_t *tl, int *rc);
/* Makes p, for item k of a content list, a TEXT part of the item's required "text". */
int ck__rd_text_item(ck__rd *rd, ck_value item, size_t k, ck_part *p);
/* Reads a content that is a string (one TEXT part, the whole content), null or absent (no
 * part), or a list: its items are left to the dialect, *n their number (0 for anything but
 * a list). Anything else is CK_ETYPE at .content. */
int ck__rd_simple_content(ck__rd *rd, ck_value content, ck_value_kind kind, size_t *n);

/* The text of a content that may be a string or a list of items with "text" (joined by
 * newlines, other items skipped); `path` names the content for errors. The joined text lives
 * in the history's storage. */
int ck__rd_joined_text(ck__rd *rd, ck_value content, const char **out, size_t *len,
                       const char *path);

/* Appends, after a tool result part, a CK_PART_ATTACHED part for every item of its content
 * list that is not text (an image, a document), so that they travel with the result and
 * survive its text being replaced. */
int ck__rd_attachments(ck__rd *rd, ck_value content, const char *path);

/* ck_role of a role string. */
ck_role ck__role_of(const char *s, size_t len);
/* The role string of a ck_role in the Chat Completions family ("user"...; OTHER: "user"). */
const char *ck__role_name(ck_role r);

/* ---- writing ---- */

typedef struct ck__wr {
    const ck_host_builder *b;
    const ck_history *h;
} ck__wr;

/* The host value message i / part g of the history was read from. */
ck_value ck__wr_msg_value(const ck__wr *w, size_t i);
ck_value ck__wr_part_value(const ck__wr *w, size_t msg, size_t part);
/* The object message i's fields stand in (ck__rd_inner()); an empty value when none. */
ck_value ck__wr_inner_value(const ck__wr *w, size_t i);

/* Builder calls that also release what they were given on failure, so a writer can chain
 * them and check once: each returns CK_OK or the failure. */
int ck__wr_string(ck__wr *w, const char *s, size_t len, ck_value *out);
int ck__wr_set_string(ck__wr *w, ck_value obj, ck_key key, const char *s, size_t len);
int ck__wr_set(ck__wr *w, ck_value obj, ck_key key, ck_value v);
int ck__wr_push(ck__wr *w, ck_value arr, ck_value v);
int ck__wr_ref(ck__wr *w, ck_value v, ck_value *out);
void ck__wr_drop(ck__wr *w, ck_value v);

/* The start of output message m (EDIT or NEW): a shallow copy of its source message, or a
 * new message whose "role" is `role`. */
int ck__wr_head(ck__wr *w, const ck_out_msg *m, const char *role, ck_value *out);

/* A content item whose text field `key` is replaced: a copy of item (when it is an object)
 * with `key` set to the text; else a new {"type": type, key: text}. */
int ck__wr_replaced_item(ck__wr *w, ck_value item, ck_key key, const char *type,
                         const char *text, size_t len, ck_value *out);

/* How many CK_PART_ATTACHED parts follow part `part` of message `msg` (a result's images). */
size_t ck__wr_attached(const ck__wr *w, size_t msg, size_t part);

/* Builds the content of a tool result whose text was replaced: the text alone (a string)
 * when nothing is attached, else a list of a text item and the attached items (message
 * `msg`, parts after `part`). */
int ck__wr_result_content(ck__wr *w, size_t msg, size_t part, const char *text, size_t len,
                          ck_value *out);

/* The same, with the text item of the given type ("input_text" for Responses). */
int ck__wr_result_content_as(ck__wr *w, size_t msg, size_t part, const char *type,
                             const char *text, size_t len, ck_value *out);

/* The content list of an edited message: each of its parts that `skip` (may be NULL) does not
 * leave out, and that is not attached to a result, as the source's own item, as a copy of it
 * with "text" replaced, or, for a part without an item of its own (new, or the whole string
 * content), as a new {"type": type, "text": ...} item. */
int ck__wr_content_list(ck__wr *w, const ck_out_msg *m, int (*skip)(const ck_out_part *op),
                        const char *type, ck_value *out);

/* For detection: 0 when msg cannot be a chat message of the Anthropic or Responses kind (not
 * an object, no role, role "tool", tool_calls); else 1, with its content list in *content
 * and *n its items (0 when the content is not a list). */
int ck__rd_chat_shape(ck__rd *rd, ck_value msg, ck_value *content, size_t *n);

/* The content of message m (EDIT or NEW) in the Chat Completions family, whose calls stand
 * beside the content in a list (parts with CK__HOST_CALL): a string when the source had one
 * and its one part stays, or a new message has one text (several join by newlines); else a
 * list of the kept items as the host's own values, replaced ones copied with "text" replaced,
 * new ones as text items; a tool message's content is its result's (replaced) text, with its
 * attached items beside it. *none is set when there is no content. */
int ck__wr_chat_content(ck__wr *w, const ck_out_msg *m, ck_value *out, int *none);
/* Sets field `key` of the copy `msg` to the list of m's kept calls (the source's own call
 * objects, in view order), or unsets it when none is left. */
int ck__wr_chat_calls(ck__wr *w, const ck_out_msg *m, ck_value msg, ck_key key);

/* A block of the source kept as the host's own value, or replaced (not a result) as a copy
 * with "text" replaced: returns 1 with the status in *rc. Returns 0 for a new part or a
 * replaced result, which the dialect builds. */
int ck__wr_plain_block(ck__wr *w, const ck_out_part *op, ck_value *out, int *rc);
/* A shallow copy of host value `item` with field `key` set to v (released on failure). */
int ck__wr_copy_set(ck__wr *w, ck_value item, ck_key key, ck_value v, ck_value *out);

/* Builds message m (EDIT: a shallow copy of its source; NEW: {"role":role}) whose content is
 * a list of blocks, one `block` call per part (attached parts skipped: they live inside their
 * result's block); a string again when the source's string content stays as its one part,
 * and for a new message of one text when `new_text_string`. */
int ck__wr_block_message(ck__wr *w, const ck_out_msg *m, int new_text_string,
                         int (*block)(ck__wr *w, const ck_out_part *op, ck_value *out),
                         ck_value *out);

/* ck_part.host for parts a dialect read: where in the message the part's value stands. */
#define CK__HOST_WHOLE 0xFFFFFFu   /* the message's whole content (a string) */
#define CK__HOST_CALL (1u << 24)   /* | j: item j of the message's list of tool calls */
/* (otherwise: the index of the item in the message's content list) */

/* ---- the descriptor ---- */

/* ck__fmt.pairing */
#define CK__PAIR_NEXT_MESSAGE 1u /* results stand in the message right after their call's,
                                    before any other content there (Anthropic, Gemini); else
                                    in result messages right after it (Chat Completions) */
#define CK__PAIR_IDS_UNIQUE 2u   /* a call id may be used once in the whole request */
#define CK__PAIR_ANY_LATER 4u    /* results may stand anywhere after their call (items) */
#define CK__PAIR_RESULT_NAMED 8u /* a result names its tool (a stub made for a call carries
                                    the call's name; elsewhere it would be counted, unwritten) */
#define CK__PAIR_SIDES_ALTERNATE 16u /* the provider refuses two turns of one side in a row
                                        (Gemini): what a view or a repair puts together
                                        is joined (ck__view_join_sides) */

typedef struct ck__fmt {
    ck_format format;
    const char *name;
    /* How sure the dialect is that `msg` is one of its own: 0 it is not, 1 it could be (a
     * plain text message every chat dialect shares), 2 only this dialect writes it. */
    int (*detect)(ck__rd *rd, ck_value msg);
    /* Reads message rd->index (value `msg`) into rd->h. */
    int (*read)(ck__rd *rd, ck_value msg);
    /* Builds output message m (EDIT or NEW) into *out. */
    int (*write)(ck__wr *w, const ck_out_msg *m, ck_value *out);
    unsigned pairing;   /* CK__PAIR_* */
    ck_role result_role; /* the role of the messages that carry results */
} ck__fmt;

/* The descriptor of a format (AUTO and bad values: NULL). */
const ck__fmt *ck__fmt_of(ck_format f);

extern const ck__fmt ck__fmt_openai;
extern const ck__fmt ck__fmt_ai_sdk;
extern const ck__fmt ck__fmt_anthropic;
extern const ck__fmt ck__fmt_gemini;
extern const ck__fmt ck__fmt_responses;
extern const ck__fmt ck__fmt_langchain;

#endif
