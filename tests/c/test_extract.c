/* Tests for extract.c: identifiers (every kind, with the false positives it must avoid),
 * ranking and rendering, file operations for each tool shape, rule lines, failure detection,
 * the extractive summarizer on a scripted history and on real transcripts, hostile input, and
 * every allocation failure. Texts are handed over in buffers of exactly their length where it
 * matters, so a sanitizer catches any read past `len`. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#include "../../csrc/src/extract.h"
#include "../../csrc/src/internal.h"

/* ---- helpers ---- */

static ck__idents *scan_str(const char *text) {
    ck__idents *s = ck__idents_new();
    OK(s != NULL);
    if (!s) return NULL;
    size_t n = strlen(text);
    char *copy = malloc(n ? n : 1);
    memcpy(copy, text, n);
    INT_EQ(ck__idents_scan(s, copy, n, 1, 0), CK_OK);
    free(copy);
    return s;
}

static int has_ident(const ck__idents *s, const char *id) {
    for (size_t i = 0; i < ck__idents_count(s); i++) {
        size_t len;
        const char *t = ck__idents_get(s, i, &len, NULL, NULL, NULL);
        if (len == strlen(id) && memcmp(t, id, len) == 0) return 1;
    }
    return 0;
}

/* Scans `text` and checks that it yields exactly the `n` identifiers listed. */
static void expect_idents(const char *text, const char *const *ids, size_t n) {
    ck__idents *s = scan_str(text);
    if (!s) return;
    for (size_t i = 0; i < n; i++) {
        if (!has_ident(s, ids[i])) {
            H_REPORT("identifier found");
            fprintf(stderr, "    missing \"%s\" in \"%s\"\n", ids[i], text);
        }
    }
    if (ck__idents_count(s) != n) {
        H_REPORT("no other identifier");
        fprintf(stderr, "    \"%s\": %zu found, %zu expected:", text, ck__idents_count(s), n);
        for (size_t i = 0; i < ck__idents_count(s); i++)
            fprintf(stderr, " [%s]", ck__idents_get(s, i, NULL, NULL, NULL, NULL));
        fprintf(stderr, "\n");
    } else {
        h_pass++;
    }
    ck__idents_free(s);
}

#define IDS(text, ...)                                                                         \
    do {                                                                                       \
        static const char *const ids_[] = {__VA_ARGS__};                                       \
        expect_idents(text, ids_ + 1, sizeof ids_ / sizeof ids_[0] - 1);                       \
    } while (0)
#define NO_IDS(text) expect_idents(text, NULL, 0)

static ck_history *read_json(const char *json) {
    ck_error err;
    ck_history *h = ck_json_read(json, strlen(json), &err);
    if (!h) fprintf(stderr, "    json error %d at %s\n", err.code, err.where);
    OK(h != NULL);
    return h;
}

static const char *anchor(const ck_anchors *a, ck_anchor which) {
    size_t len = 0;
    const char *s = ck_anchors_get(a, which, &len);
    if (s) INT_EQ(strlen(s), len);
    return s;
}

static int contains(const char *hay, const char *needle) {
    return hay && strstr(hay, needle) != NULL;
}

/* ---- clip ---- */

TEST(clip_cuts_at_boundaries) {
    INT_EQ(ck__clip("hello", 5, 10), 5);
    INT_EQ(ck__clip("hello", 5, 5), 5);
    /* A word boundary in the last quarter, and none before it. */
    INT_EQ(ck__clip("aaaaaaaaa bbbbbb", 16, 10), 9);
    INT_EQ(ck__clip("aaaaaaa bbbbbbbb", 16, 10), 10);
    /* A line boundary wins over a later word boundary. */
    INT_EQ(ck__clip("aaaaaaaaaaaaaa\nbb ccccccc", 25, 18), 14);
    /* No boundary in the last quarter: a hard cut. */
    INT_EQ(ck__clip("ab cdefghijklmnop", 17, 12), 12);
    /* Never inside a UTF-8 sequence: "é" is two bytes, "中" three. */
    const char *e = "\xc3\xa9\xc3\xa9\xc3\xa9";
    INT_EQ(ck__clip(e, 6, 3), 2);
    INT_EQ(ck__clip(e, 6, 4), 4);
    const char *z = "\xe4\xb8\xad\xe4\xb8\xad";
    INT_EQ(ck__clip(z, 6, 5), 3);
    INT_EQ(ck__clip(z, 6, 2), 0);
    INT_EQ(ck__clip("abc", 3, 0), 0);
    /* A four-byte sequence (U+1F600) is kept whole or not at all. */
    const char *emoji = "a\xf0\x9f\x98\x80" "b";
    INT_EQ(ck__clip(emoji, 6, 3), 1);
    INT_EQ(ck__clip(emoji, 6, 5), 5);
}

/* ---- identifiers ---- */

TEST(ident_paths) {
    IDS("edit src/foo.c now", "", "src/foo.c");
    IDS("see /usr/include/node and ./run.sh", "", "/usr/include/node", "./run.sh");
    IDS("at ~/notes.txt and ../lib/util.py", "", "~/notes.txt", "../lib/util.py");
    IDS("error in src/a.c:12:5: bad", "", "src/a.c");
    IDS("(see `docs/README.md`).", "", "docs/README.md");
    IDS("**tests/c/test.c**, then", "", "tests/c/test.c");
    IDS("--config=conf/app.yaml", "", "conf/app.yaml");
    IDS("open /etc/hosts/ please", "", "/etc/hosts");
    IDS("node_modules/@types/node/index.d.ts", "", "node_modules/@types/node/index.d.ts");
    IDS("\xe4\xbf\xae\xe6\x94\xb9src/main.rs\xe6\x96\x87\xe4\xbb\xb6", "", "src/main.rs");
    IDS("\"{\\\"path\\\": \\\"lib/x.py\\\"}\"", "", "lib/x.py");
    /* Fractions, dates, prose and markup are not paths. */
    NO_IDS("1/2 of 2024/01/02 and/or km/h TCP/IP I/O");
    NO_IDS("ratio 1/2.5 or 4.5/5, e.g./i.e. stuff");
    NO_IDS("<div>text</div> // comment /");
    NO_IDS("github.com/owner/repo and $HOME/x.c and a/b*.c");
    NO_IDS("s/x/y/ and ../ and ./ and ~/");
}

TEST(ident_urls) {
    IDS("go to https://example.com/a?b=1&c=2.", "", "https://example.com/a?b=1&c=2");
    IDS("[docs](http://x.org/y/z)", "", "http://x.org/y/z");
    IDS("ftp://files.host/pub/f.tgz, file:///etc/hosts", "", "ftp://files.host/pub/f.tgz",
        "file:///etc/hosts");
    IDS("url=https://a.io/x:", "", "https://a.io/x");
    IDS("HTTPS://EXAMPLE.COM", "", "HTTPS://EXAMPLE.COM");
    NO_IDS("http:// and https://. and mailto:a@b.c and ssh://host/x gopher://h");
}

TEST(ident_hashes_and_uuids) {
    IDS("commit a1b2c3d fixed it", "", "a1b2c3d");
    IDS("3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e", "", "3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e");
    IDS("id 123e4567-e89b-12d3-a456-426614174000.", "", "123e4567-e89b-12d3-a456-426614174000");
    IDS("HEAD is now at 0f9e8d7: msg", "", "0f9e8d7");
    /* A UUID may have no digit at all: its dashes are what make it a candidate. */
    IDS("run abcdefab-cdef-abcd-efab-cdefabcdefab ok", "", "abcdefab-cdef-abcd-efab-cdefabcdefab");
    /* Too short, too long, no digit, no letter, upper case, not hex, wrong dashes. */
    NO_IDS("1234567 deadbeef abcdef a1b2c3 A1B2C3D4 g1b2c3d4 0x1234abcd");
    NO_IDS("3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e1");
    NO_IDS("123e4567e-89b-12d3-a456-426614174000 123e4567-e89b-12d3-a456-42661417400g");
}

TEST(ident_error_codes) {
    IDS("error[E0308]: mismatched types", "", "E0308");
    IDS("TS2304: Cannot find name", "", "TS2304");
    IDS("warning C4996 and HTTP404", "", "C4996", "HTTP404");
    IDS("open failed: ENOENT (EACCES)", "", "ENOENT", "EACCES");
    /* '=' alone splits a token too, and a piece can be all capitals. */
    IDS("status=ENOENT rc=E0308", "", "ENOENT", "E0308");
    NO_IDS("ERROR E12 ABCDE1234 Enoent EXAMPLE HTTP E123456 e0308");
}

TEST(ident_tickets) {
    IDS("fixes ABC-123 and GH-12", "", "ABC-123", "GH-12");
    IDS("see #1234.", "", "#1234");
    IDS("CVE-2021-44228 is bad", "", "CVE-2021-44228");
    IDS("JIRA2-4567", "", "JIRA2-4567");
    NO_IDS("UTF-8 UTF-16 SHA-256 AES-128 GPT-4 #1 #include x-123 A-12 X86-64 ABC-1 abc-123");
    NO_IDS("#12345678 ABCDEFGHIJK-12");
}

TEST(ident_nul_and_long_tokens) {
    static const char text[] = "src/a.c\0src/b.c";
    ck__idents *s = ck__idents_new();
    INT_EQ(ck__idents_scan(s, text, sizeof text - 1, 0, 0), CK_OK);
    OK(has_ident(s, "src/a.c"));
    OK(has_ident(s, "src/b.c"));
    INT_EQ(ck__idents_count(s), 2);
    /* A token longer than 512 bytes is skipped whole; one of 512 is taken. */
    char big[700];
    memset(big, 'a', sizeof big);
    memcpy(big, "src/", 4);
    memcpy(big + 600 - 2, ".c", 2);
    INT_EQ(ck__idents_scan(s, big, 600, 0, 0), CK_OK);
    INT_EQ(ck__idents_count(s), 2);
    memcpy(big + 512 - 2, ".c", 2);
    INT_EQ(ck__idents_scan(s, big, 512, 0, 0), CK_OK);
    INT_EQ(ck__idents_count(s), 3);
    ck__idents_free(s);
}

TEST(ident_ranking) {
    ck__idents *s = ck__idents_new();
    const char *t1 = "src/y.c src/x.c src/b.c src/b.c src/b.c";
    const char *t2 = "src/c.c";
    INT_EQ(ck__idents_scan(s, t1, strlen(t1), 1, 0), CK_OK);
    INT_EQ(ck__idents_scan(s, t2, strlen(t2), 2, 0), CK_OK);
    INT_EQ(ck__idents_count(s), 4);
    size_t len, seq;
    unsigned count;
    STR_EQ(ck__idents_get(s, 0, &len, &seq, &count, NULL), "src/c.c");
    INT_EQ(seq, 2);
    INT_EQ(count, 1);
    STR_EQ(ck__idents_get(s, 1, &len, &seq, &count, NULL), "src/b.c");
    INT_EQ(count, 3);
    STR_EQ(ck__idents_get(s, 2, NULL, NULL, NULL, NULL), "src/x.c");
    STR_EQ(ck__idents_get(s, 3, NULL, NULL, NULL, NULL), "src/y.c");
    STR_EQ(ck__idents_get(s, 4, &len, &seq, &count, NULL), NULL);
    INT_EQ(len, 0);
    /* Seeing an old one again in a newer message moves it up. */
    INT_EQ(ck__idents_scan(s, "src/y.c", 7, 3, 0), CK_OK);
    STR_EQ(ck__idents_get(s, 0, NULL, NULL, &count, NULL), "src/y.c");
    INT_EQ(count, 2);
    /* Carried over from an earlier checkpoint, with its count. */
    INT_EQ(ck__idents_add(s, "ABC-9", 5, 3, 7, 0), CK_OK);
    STR_EQ(ck__idents_get(s, 0, NULL, NULL, &count, NULL), "ABC-9");
    INT_EQ(count, 7);
    INT_EQ(ck__idents_add(s, "ABC-9", 5, 0, 1, 0), CK_OK);
    STR_EQ(ck__idents_get(s, 0, NULL, &seq, &count, NULL), "ABC-9");
    INT_EQ(seq, 3);
    INT_EQ(count, 8);
    INT_EQ(ck__idents_add(s, "x", 0, 9, 1, 0), CK_OK);
    INT_EQ(ck__idents_count(s), 5);
    INT_EQ(ck__idents_add(NULL, "x", 1, 9, 1, 0), CK_EINVAL);
    ck__idents_free(s);
    ck__idents_free(NULL);
    INT_EQ(ck__idents_count(NULL), 0);
}

TEST(ident_render) {
    ck__idents *s = ck__idents_new();
    const char *t = "src/a.c src/bb.c https://x.io/long/path/here.html";
    INT_EQ(ck__idents_scan(s, t, strlen(t), 1, 0), CK_OK);
    INT_EQ(ck__idents_scan(s, "ENOENT", 6, 2, 0), CK_OK);
    ck__buf b;
    ck__buf_init(&b);
    INT_EQ(ck__idents_render(s, NULL, 0, 100, 10000, &b, NULL), 4);
    STR_EQ(b.data, "- ENOENT\n- https://x.io/long/path/here.html\n- src/a.c\n- src/bb.c\n");
    ck__buf_dispose(&b);
    /* Identifiers the summary already holds verbatim are left out. */
    const char *summary = "We fixed src/bb.c after ENOENT.";
    INT_EQ(ck__idents_render(s, summary, strlen(summary), 100, 10000, &b, NULL), 2);
    STR_EQ(b.data, "- https://x.io/long/path/here.html\n- src/a.c\n");
    ck__buf_dispose(&b);
    /* Near misses are not quotes: the first byte everywhere, a prefix that restarts inside
     * itself, the identifier cut at the very end; a quote at the very end is one. */
    const char *const misses[] = {"sssrc/bb.", "src/bsrc/b.c", "ENOENENOEN", "src/bb.", "ENOEN"};
    for (size_t k = 0; k < sizeof misses / sizeof misses[0]; k++) {
        INT_EQ(ck__idents_render(s, misses[k], strlen(misses[k]), 100, 10000, &b, NULL), 4);
        ck__buf_dispose(&b);
    }
    const char *at_end = "xx src/src/bb.c src/a.cENOENT";
    INT_EQ(ck__idents_render(s, at_end, strlen(at_end), 100, 10000, &b, NULL), 1);
    STR_EQ(b.data, "- https://x.io/long/path/here.html\n");
    ck__buf_dispose(&b);
    /* The item cap. */
    INT_EQ(ck__idents_render(s, NULL, 0, 2, 10000, &b, NULL), 2);
    STR_EQ(b.data, "- ENOENT\n- https://x.io/long/path/here.html\n");
    ck__buf_dispose(&b);
    /* The byte cap: the URL does not fit and is skipped, shorter ones still do. */
    INT_EQ(ck__idents_render(s, NULL, 0, 100, 30, &b, NULL), 3);
    STR_EQ(b.data, "- ENOENT\n- src/a.c\n- src/bb.c\n");
    OK(b.len <= 30);
    ck__buf_dispose(&b);
    INT_EQ(ck__idents_render(s, NULL, 0, 100, 3, &b, NULL), 0);
    INT_EQ(ck__idents_render(s, NULL, 0, 0, 1000, &b, NULL), 0);
    ck__buf_dispose(&b);
    ck__idents_free(s);
}

/* A megabyte of distinct hex hashes stays bounded and fast; the newest survive pruning. */
TEST(ident_hostile) {
    size_t n = 1 << 20;
    char *text = malloc(n);
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        text[i] = "0123456789abcdef"[x % 16];
    }
    for (size_t i = 40; i < n; i += 41) text[i] = ' ';
    ck__idents *s = ck__idents_new();
    clock_t t0 = clock();
    INT_EQ(ck__idents_scan(s, text, n, 1, 0), CK_OK);
    for (size_t k = 0; k < 4; k++) {
        char id[16];
        snprintf(id, sizeof id, "abc%04zu", k + 1000);
        INT_EQ(ck__idents_scan(s, id, strlen(id), 2, 0), CK_OK);
    }
    OK(ck__idents_count(s) <= 16384 && ck__idents_count(s) >= 8192);
    OK(has_ident(s, "abc1003"));
    ck__buf b;
    ck__buf_init(&b);
    INT_EQ(ck__idents_render(s, text, 4096, 50, 4000, &b, NULL), 50);
    ck__buf_dispose(&b);
    /* No blank at all, and a long run of slashes. */
    memset(text, 'a', n);
    INT_EQ(ck__idents_scan(s, text, n, 3, 0), CK_OK);
    for (size_t i = 0; i < n; i++) text[i] = (i % 2) ? '/' : 'a';
    INT_EQ(ck__idents_scan(s, text, n, 3, 0), CK_OK);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    OK(secs < 5.0);
    ck__idents_free(s);
    free(text);
}

/* ---- file operations ---- */

static void expect_op(const char *name, const char *args, ck__file_op want, const char *path) {
    ck__buf scratch;
    ck__buf_init(&scratch);
    const char *p = (const char *)1;
    size_t pn = 99;
    ck__file_op op = ck__file_op_of(name, strlen(name), args, strlen(args), &scratch, &p, &pn);
    if (op != want || (path && (!p || pn != strlen(path) || memcmp(p, path, pn) != 0)) ||
        (!path && (p || pn))) {
        H_REPORT("file op");
        fprintf(stderr, "    %s %s: got %d \"%.*s\", expected %d \"%s\"\n", name, args, (int)op,
                p ? (int)pn : 0, p ? p : "", (int)want, path ? path : "(none)");
    } else {
        h_pass++;
    }
    ck__buf_dispose(&scratch);
}

TEST(file_op_named_tools) {
    expect_op("read_file", "{\"path\":\"src/a.c\"}", CK__FILE_READ, "src/a.c");
    expect_op("Read", "{\"file_path\":\"/x/y.py\"}", CK__FILE_READ, "/x/y.py");
    expect_op("view", "{\"filename\":\"a.txt\"}", CK__FILE_READ, "a.txt");
    expect_op("cat", "{\"file\":\"a.txt\"}", CK__FILE_READ, "a.txt");
    expect_op("open_file", "{\"path\":\"a.txt\",\"line\":3}", CK__FILE_READ, "a.txt");
    expect_op("file_read", "{\"path\":\"a.txt\"}", CK__FILE_READ, "a.txt");
    expect_op("mcp__fs__read_file", "{\"path\":\"a.txt\"}", CK__FILE_READ, "a.txt");
    expect_op("write_file", "{\"file_path\":\"x.py\",\"content\":\"x\"}", CK__FILE_MODIFIED,
              "x.py");
    expect_op("Write", "{\"file_path\":\"x.py\"}", CK__FILE_MODIFIED, "x.py");
    expect_op("edit_file", "{\"target_file\":\"x.py\"}", CK__FILE_MODIFIED, "x.py");
    expect_op("MultiEdit", "{\"file_path\":\"x.py\"}", CK__FILE_MODIFIED, "x.py");
    expect_op("NotebookEdit", "{\"notebook_path\":\"n.ipynb\"}", CK__FILE_MODIFIED, "n.ipynb");
    expect_op("apply_patch", "{\"path\":\"p.diff\"}", CK__FILE_MODIFIED, "p.diff");
    expect_op("create", "{\"path\":\"new.md\"}", CK__FILE_MODIFIED, "new.md");
    expect_op("fs.write_file", "{\"path\":\"w.txt\"}", CK__FILE_MODIFIED, "w.txt");
    expect_op("insert", "{\"path\":\"w.txt\"}", CK__FILE_MODIFIED, "w.txt");
    /* Other tools, missing or odd paths, and arguments that are not a JSON object. */
    expect_op("grep", "{\"path\":\"src\",\"pattern\":\"x\"}", CK__FILE_NONE, NULL);
    expect_op("list_dir", "{\"path\":\"src\"}", CK__FILE_NONE, NULL);
    expect_op("read_file", "{\"offset\":3}", CK__FILE_NONE, NULL);
    expect_op("read_file", "{\"path\":\"\"}", CK__FILE_NONE, NULL);
    expect_op("read_file", "{\"path\":7}", CK__FILE_NONE, NULL);
    expect_op("read_file", "{\"path\":\"a\\nb\"}", CK__FILE_NONE, NULL);
    expect_op("read_file", "{\"path\":", CK__FILE_NONE, NULL);
    expect_op("read_file", "[\"a.txt\"]", CK__FILE_NONE, NULL);
    expect_op("read_file", "", CK__FILE_NONE, NULL);
    expect_op("think", "{\"thought\":\"a.c\"}", CK__FILE_NONE, NULL);
}

/* Arguments are read as a tool runtime reads them (JSON.parse, json.loads): the last of a
 * repeated key counts, text after the object makes them invalid (the call touched nothing),
 * and a NUL byte is part of a value, not its end. cJSON took the first key, ignored the tail
 * and cut "a\u0000b" to "a". */
TEST(file_op_reads_args_as_the_runtime_does) {
    expect_op("read_file", "{\"path\":\"decoy.txt\",\"path\":\"real.txt\"}", CK__FILE_READ,
              "real.txt");
    const char *ed = "str_replace_based_edit_tool";
    expect_op(ed, "{\"command\":\"view\",\"path\":\"x.c\",\"command\":\"create\"}",
              CK__FILE_MODIFIED, "x.c");
    expect_op("execute_bash", "{\"command\":\"cat a.txt\",\"command\":\"echo hi > b.txt\"}",
              CK__FILE_MODIFIED, "b.txt");
    expect_op("read_file", "{\"path\":\"a.txt\"} and more", CK__FILE_NONE, NULL);
    expect_op("read_file", "{\"path\":\"a.txt\"}}", CK__FILE_NONE, NULL);
    expect_op("read_file", "{\"path\":\"a.txt\"} \n", CK__FILE_READ, "a.txt");
    expect_op("read_file", "{\"path\":\"a\\u0000b.txt\"}", CK__FILE_NONE, NULL);
    expect_op("execute_bash", "{\"command\":\"cat a\\u0000b\"}", CK__FILE_NONE, NULL);
    /* The view command with a NUL after it is no view command. */
    expect_op(ed, "{\"command\":\"view\\u0000\",\"path\":\"x.c\"}", CK__FILE_NONE, NULL);
}

TEST(file_op_editor_commands) {
    const char *ed = "str_replace_based_edit_tool";
    expect_op(ed, "{\"command\":\"view\",\"path\":\"/a/b.c\"}", CK__FILE_READ, "/a/b.c");
    expect_op(ed, "{\"command\":\"create\",\"path\":\"/a/n.c\",\"file_text\":\"x\"}",
              CK__FILE_MODIFIED, "/a/n.c");
    expect_op(ed, "{\"command\":\"str_replace\",\"path\":\"/a/b.c\",\"old_str\":\"x\"}",
              CK__FILE_MODIFIED, "/a/b.c");
    expect_op(ed, "{\"command\":\"insert\",\"path\":\"/a/b.c\"}", CK__FILE_MODIFIED, "/a/b.c");
    expect_op(ed, "{\"command\":\"undo_edit\",\"path\":\"/a/b.c\"}", CK__FILE_MODIFIED, "/a/b.c");
    expect_op("str_replace_editor", "{\"command\":\"view\",\"path\":\"/a\"}", CK__FILE_READ, "/a");
    expect_op("str_replace_editor", "{\"path\":\"/a/b.c\"}", CK__FILE_NONE, NULL);
    expect_op("str_replace_editor", "{\"command\":\"frob\",\"path\":\"/a/b.c\"}", CK__FILE_NONE,
              NULL);
    /* The command decides even for a name that says otherwise. */
    expect_op("edit", "{\"command\":\"view\",\"path\":\"x.c\"}", CK__FILE_READ, "x.c");
    expect_op("file_tool", "{\"command\":\"write\",\"path\":\"x.c\"}", CK__FILE_MODIFIED, "x.c");
}

TEST(file_op_borrows_or_copies) {
    const char *args = "{\"path\":\"src/a.c\"}";
    ck__buf scratch;
    ck__buf_init(&scratch);
    const char *p;
    size_t pn;
    INT_EQ(ck__file_op_of("read", 4, args, strlen(args), &scratch, &p, &pn), CK__FILE_READ);
    OK(p >= args && p + pn <= args + strlen(args));
    /* Escaped text cannot be borrowed: it is decoded into the scratch buffer. */
    const char *esc = "{\"path\":\"src\\/d\\u00e9j\\u00e0.txt\"}";
    INT_EQ(ck__file_op_of("read", 4, esc, strlen(esc), &scratch, &p, &pn), CK__FILE_READ);
    MEM_EQ(p, pn, "src/d\xc3\xa9j\xc3\xa0.txt");
    OK(p == scratch.data);
    ck__buf_dispose(&scratch);
    /* Without scratch storage such a path cannot be handed out. */
    INT_EQ(ck__file_op_of("read", 4, esc, strlen(esc), NULL, &p, &pn), CK__FILE_NONE);
    OK(p == NULL);
    INT_EQ(ck__file_op_of("read", 4, args, strlen(args), NULL, &p, &pn), CK__FILE_READ);
    INT_EQ(ck__file_op_of("read", 4, args, strlen(args), NULL, NULL, NULL), CK__FILE_READ);
    INT_EQ(ck__file_op_of(NULL, 0, args, strlen(args), NULL, &p, &pn), CK__FILE_NONE);
}

TEST(file_op_shell_commands) {
    const char *sh = "execute_bash";
    expect_op(sh, "{\"command\":\"cat src/a.c\"}", CK__FILE_READ, "src/a.c");
    expect_op(sh, "{\"command\":\"cat -n 'my file.txt'\"}", CK__FILE_READ, "my file.txt");
    expect_op(sh, "{\"command\":\"head -n 20 /var/log/x.log\"}", CK__FILE_READ, "/var/log/x.log");
    expect_op(sh, "{\"command\":\"/bin/tail x.log 2>/dev/null\"}", CK__FILE_READ, "x.log");
    expect_op(sh, "{\"command\":\"sed -n '1,5p' x.c\"}", CK__FILE_READ, "x.c");
    expect_op(sh, "{\"command\":\"sed -i 's/a$/b/' x.c\"}", CK__FILE_MODIFIED, "x.c");
    expect_op(sh, "{\"command\":\"sed -i '317s/^/\\t  /' /w/m.c\"}", CK__FILE_MODIFIED, "/w/m.c");
    expect_op(sh, "{\"command\":\"echo hi > out.txt\"}", CK__FILE_MODIFIED, "out.txt");
    expect_op(sh, "{\"command\":\"echo hi >>log.txt\"}", CK__FILE_MODIFIED, "log.txt");
    expect_op(sh, "{\"command\":\"ls | tee -a list.txt\"}", CK__FILE_MODIFIED, "list.txt");
    expect_op("bash", "{\"cmd\":\"cat \\\"a b.txt\\\"\"}", CK__FILE_READ,
              "a b.txt");
    expect_op("run_terminal_cmd", "{\"command\":\"cat a.txt\"}", CK__FILE_READ, "a.txt");
    /* Not clearly about one file: nothing. */
    expect_op(sh, "{\"command\":\"cd /x && make\"}", CK__FILE_NONE, NULL);
    expect_op(sh, "{\"command\":\"cat a | grep b\"}", CK__FILE_NONE, NULL);
    expect_op(sh, "{\"command\":\"cat $HOME/x\"}", CK__FILE_NONE, NULL);
    expect_op(sh, "{\"command\":\"cat *.c\"}", CK__FILE_NONE, NULL);
    expect_op(sh, "{\"command\":\"cat \\\"$F\\\"\"}", CK__FILE_NONE, NULL);
    expect_op(sh, "{\"command\":\"python run.py\"}", CK__FILE_NONE, NULL);
    expect_op(sh, "{\"command\":\"grep -n foo x.c\"}", CK__FILE_NONE, NULL);
    expect_op(sh, "{\"command\":\"ls > /dev/null\"}", CK__FILE_NONE, NULL);
    expect_op(sh, "{\"command\":\"make 2>&1\"}", CK__FILE_NONE, NULL);
    expect_op(sh, "{\"command\":\"cat\"}", CK__FILE_NONE, NULL);
    expect_op(sh, "{\"command\":\"tail -f\"}", CK__FILE_NONE, NULL);
    expect_op(sh, "{\"command\":\"cat a.txt\\nrm b\"}", CK__FILE_NONE, NULL);
    expect_op(sh, "{\"command\":\"cat 'unterminated\"}", CK__FILE_NONE, NULL);
    expect_op(sh, "{\"command\":\"echo a > b > c\"}", CK__FILE_NONE, NULL);
    expect_op(sh, "{\"path\":\"a.txt\"}", CK__FILE_NONE, NULL);
    expect_op(sh, "{\"command\":[\"cat\",\"a\"]}", CK__FILE_NONE, NULL);
}

/* ---- rules ---- */

static int rule(const char *s) {
    size_t n = strlen(s);
    char *copy = malloc(n ? n : 1);
    memcpy(copy, s, n);
    int r = ck__is_rule_line(copy, n);
    free(copy);
    return r;
}

/* The rule sentences of a text, joined by "|". */
static int collect_rule(void *ctx, const char *s, size_t n) {
    ck__buf *b = ctx;
    if (b->len) ck__buf_addc(b, '|');
    ck__buf_add(b, s, n);
    return 0;
}

static char *rules_of(const char *text, size_t len, size_t max) {
    ck__buf b;
    ck__buf_init(&b);
    ck__rule_sentences(text, len, max, collect_rule, &b);
    ck__buf_addc(&b, '\0');
    return ck__buf_take(&b, NULL);
}

/* Rule sentences over long runs: never cut inside a character, and a rule after a long run
 * without full stops is still found, whole, even where it straddles a window. */
TEST(rule_sentences_in_long_runs) {
    char *r = rules_of("Fix it. Never touch vendor/. ok", 31, 1000);
    STR_EQ(r, "Never touch vendor/.");
    ck_free(r);
    /* 'always ' and 300 emoji: the window ends on a character boundary. */
    static char emoji[7 + 1200 + 3 + 1];
    memcpy(emoji, "always ", 7);
    for (int i = 0; i < 300; i++) memcpy(emoji + 7 + 4 * i, "\xf0\x9f\x99\x82", 4);
    memcpy(emoji + 1207, " ok", 3);
    r = rules_of(emoji, 1210, 1000);
    OK(r && strlen(r) <= 1000 && strncmp(r, "always ", 7) == 0);
    if (r) INT_EQ(ck__utf8_valid_prefix(r, strlen(r)), strlen(r));
    ck_free(r);
    /* 5,000 bytes without a full stop, then the rule: found at each place in the run. */
    for (size_t at = 0; at < 5000; at += 997) {
        static char t[6000];
        memset(t, 'x', sizeof t);
        for (size_t i = 0; i < 5000; i += 7) t[i] = ' ';
        const char *rule = "Never edit vendor/ at all";
        memcpy(t + at, rule, strlen(rule));
        if (at) t[at - 1] = ' ';
        t[at + strlen(rule)] = ' ';
        size_t n = 5000 + (at + strlen(rule) > 5000 ? at + strlen(rule) - 5000 : 0);
        r = rules_of(t, n, 1000);
        OK(r && strstr(r, rule) != NULL);
        if (r) OK(strlen(r) <= 1000);
        ck_free(r);
    }
}

TEST(rule_lines) {
    const char *yes[] = {
        "Never push to main.",
        "ALWAYS run the tests first",
        "You must use tabs",
        "Do not touch prod",
        "do   not",
        "DO\tNOT run it",
        "Don't delete files",
        "Don\xe2\x80\x99t delete files",
        "From now on, use pnpm",
        "make sure to lint",
        "Only edit src/",
        "avoid globals",
        "Ensure it builds",
        "remember: 4 spaces",
        "(never)",
        "\xe4\xb8\x8d\xe8\xa6\x81\xe4\xbf\xae\xe6\x94\xb9\xe8\xbf\x99\xe4\xb8\xaa\xe6\x96\x87\xe4"
        "\xbb\xb6",                                    /* 不要修改这个文件 */
        "\xe7\xa6\x81\xe6\xad\xa2\xe5\x88\xa0\xe9\x99\xa4", /* 禁止删除 */
        "\xe4\xbd\xa0\xe5\xbf\x85\xe9\xa1\xbb\xe6\xb5\x8b\xe8\xaf\x95", /* 你必须测试 */
        "\xe5\x8a\xa1\xe5\xbf\x85",                       /* 务必 */
        "\xe4\xb8\x80\xe5\xae\x9a\xe8\xa6\x81",           /* 一定要 */
        "\xe5\x8f\xaa\xe8\x83\xbd\xe7\x94\xa8 pnpm",      /* 只能用 pnpm */
    };
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (rule(yes[i])) h_pass++;
        else {
            H_REPORT("rule line");
            fprintf(stderr, "    \"%s\" is a rule\n", yes[i]);
        }
    }
    const char *no[] = {
        "alwaysfoo",  "mustard and ketchup", "commonly done", "the donut", "from now",
        "do nothing", "make sense",          "",              "never_mind", "2never",
        "dont",       "don'ts",              "ensured",       "please fix the bug", "\xe4\xb8\x8d",
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        if (!rule(no[i])) h_pass++;
        else {
            H_REPORT("not a rule line");
            fprintf(stderr, "    \"%s\" is not a rule\n", no[i]);
        }
    }
    static const char nul[] = "ok\0never";
    OK(ck__is_rule_line(nul, sizeof nul - 1));
    OK(!ck__is_rule_line(nul, 2));
    OK(!ck__is_rule_line(NULL, 0));
}

/* ---- failures ---- */

static int failed(const char *s, uint32_t flags) {
    size_t n = strlen(s);
    char *copy = malloc(n ? n : 1);
    memcpy(copy, s, n);
    int r = ck__looks_failed(copy, n, flags);
    free(copy);
    return r;
}

TEST(failure_detection) {
    OK(!failed("all good", 0));
    OK(!failed("", 0));
    OK(failed("", CK_PART_IS_ERROR));
    OK(failed("ok", CK_PART_IS_ERROR));
    OK(!failed("[Command finished with exit code 0]", 0));
    OK(failed("[Command finished with exit code 1]", 0));
    OK(failed("Exit status: 2", 0));
    OK(failed("\"exit_code\": 127", 0));
    OK(failed("exit code -1", 0));
    OK(!failed("exit code 00", 0));
    OK(!failed("exit codes vary", 0));
    OK(failed("Traceback (most recent call last):\n  File \"x.py\"", 0));
    OK(failed("src/a.c:3: error: expected ';'", 0));
    OK(failed("ValueError: bad", 0));
    OK(failed("Build FAILED.", 0));
    OK(failed("1 failed, 3 passed", 0));
    OK(!failed("10 passed, 0 failed", 0));
    OK(failed("10 failed", 0));
    OK(failed("bash: foo: command not found", 0));
    OK(failed("cat: x: No such file or directory", 0));
    OK(failed("open: Permission denied", 0));
    OK(failed("CalledProcessError: returned non-zero exit status 1", 0));
    OK(failed("thread 'main' panicked at src/main.rs", 0));
    OK(failed("panic: runtime error", 0));
    OK(failed("fatal: not a git repository", 0));
    OK(failed("Exception: boom", 0));
    OK(failed("Uncaught exception here", 0));
    OK(!failed("except Exception as e:", 0));
    OK(failed("make: *** [Makefile:192: build] Error 2", 0));
    /* A zero exit code outweighs quoted error text (a grep for errors succeeded). */
    OK(!failed("x.c:1: error: foo\n[exit code 0]", 0));
    OK(failed("exit code 0\nexit code 3", 0));
    static const char nul[] = "ok\0Traceback (most recent call last)";
    OK(ck__looks_failed(nul, sizeof nul - 1, 0));
    OK(!ck__looks_failed(nul, 2, 0));
    OK(!ck__looks_failed(NULL, 0, 0));
    /* Only the first and last 4 KB of a large output are read. */
    size_t n = 1 << 20;
    char *big = malloc(n);
    memset(big, 'a', n);
    memcpy(big + n / 2, "Traceback (", 11);
    OK(!ck__looks_failed(big, n, 0));
    memcpy(big + n - 20, "Traceback (", 11);
    OK(ck__looks_failed(big, n, 0));
    memset(big, 'a', n);
    memcpy(big + 10, "error:", 6);
    OK(ck__looks_failed(big, n, 0));
    memcpy(big + n - 6, "error:", 6);
    OK(ck__looks_failed(big, n, 0));
    free(big);
}

/* ck__looks_failed() on exactly `n` bytes of `s` (a copy, so a sanitizer sees any overread). */
static int failed_n(const char *s, size_t n) {
    char *copy = malloc(n ? n : 1);
    memcpy(copy, s, n);
    int r = ck__looks_failed(copy, n, 0);
    free(copy);
    return r;
}

/* `s` with every letter upper-cased (mode 1) or every other one (mode 2), into out. */
static void recase(const char *s, int mode, char *out) {
    size_t i = 0;
    for (; s[i]; i++) {
        int up = mode == 1 || (mode == 2 && i % 2);
        out[i] = up && s[i] >= 'a' && s[i] <= 'z' ? (char)(s[i] - 'a' + 'A') : s[i];
    }
    out[i] = '\0';
}

/* Every signal counts in any case, alone in its buffer, first, last or in the middle of a
 * line, and after multi-byte UTF-8; cut by its last byte, or with its first byte swapped for
 * one that shares the low five bits (the scan's first filter), it does not. */
TEST(failure_signals_everywhere) {
    static const char *const signals[] = {
        "error:", "error[", "errors occurred", "exception:", "exception in thread", "failed",
        "failure", "fatal:", "fatal error", "traceback (", "traceback:", "panic:", "panicked",
        "permission denied", "command not found", "cannot access", "no such file",
        "no replacement was performed", "non-zero exit", "returned non-zero",
        "segmentation fault", "make: ***", "cmake error", "unable to locate",
        "uncaught exception", "unhandled exception", "exit code 1", "exit_code=2",
        "exit status: 3",
    };
    char sig[64], buf[160];
    for (size_t k = 0; k < sizeof signals / sizeof signals[0]; k++) {
        for (int mode = 0; mode < 3; mode++) {
            recase(signals[k], mode, sig);
            size_t n = strlen(sig);
            OK(failed_n(sig, n));
            OK(!failed_n(sig, n - 1));
            int len = snprintf(buf, sizeof buf, "%s and more", sig);
            OK(failed_n(buf, (size_t)len));
            len = snprintf(buf, sizeof buf, "all was fine until %s", sig);
            OK(failed_n(buf, (size_t)len));
            len = snprintf(buf, sizeof buf, "\xe7\xbc\x96\xe8\xaf\x91%s\xe5\xa4\xb1\xe8\xb4\xa5",
                           sig);
            OK(failed_n(buf, (size_t)len));
            for (unsigned flip = 0x40; flip <= 0xC0; flip += 0x40) {
                memcpy(buf, sig, n + 1);
                buf[0] = (char)((unsigned char)buf[0] ^ flip);
                OK(!failed_n(buf, n));
            }
        }
    }
    /* An exit code needs its number; zero clears the text signals, unless another is not. */
    OK(!failed("exit code", 0));
    OK(!failed("exit code ", 0));
    OK(!failed("exit code -", 0));
    OK(failed("EXIT CODE: -2", 0));
    OK(failed("\"Exit_Code\": \"7\"", 0));
    OK(!failed("exit status:\t=\"0\"", 0));
    OK(!failed("exit code 0 and exit status 0", 0));
    OK(failed("exit code 0 and exit status 10", 0));
    /* "0 failed" is a count of none, with or without capitals, unless another digit leads. */
    OK(!failed("0 failed", 0));
    OK(!failed("0 FAILED", 0));
    OK(!failed("0 Failures", 0));
    OK(!failed("passed: 3, 0 failed", 0));
    OK(failed("20 failed", 0));
    OK(failed("0  failed", 0));
    OK(failed("0failed", 0));
    OK(!failed("a0 failed", 0));
    /* "exception" alone is only a failure when uncaught or unhandled. */
    OK(!failed("exception", 0));
    OK(!failed("caught exception", 0));
    OK(!failed("uncaught  exception", 0));
    OK(!failed("unhandledexception", 0));
    OK(failed("UNHANDLED EXCEPTION", 0));
    /* Text made only of bytes that pass the first filter but no signal. */
    OK(!failed("%r&a-a.o0a2e3e4r5n #o#m", 0));
    OK(!failed("\xe5\xf2\xe6\xe1 \xc5\xd2 erro fata pani", 0));
}

/* A large output is read in its first and last FAIL_SCAN (4096) bytes: a signal that starts
 * in either window counts, even where it runs out of it; one that starts outside does not. */
TEST(failure_scan_windows) {
    enum { W = 4096, N = 3 * W };
    static const char sig[] = "Traceback (";
    const size_t len = sizeof sig - 1;
    const size_t at[] = {0, W - len, W - 1, W, N / 2, N - W - 1, N - W, N - len};
    const int hit[] = {1, 1, 1, 0, 0, 0, 1, 1};
    char *big = malloc(N);
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        memset(big, 'x', N);
        memcpy(big + at[k], sig, len);
        INT_EQ(ck__looks_failed(big, N, 0), hit[k]);
    }
    /* Up to twice the window, everything is read. */
    memset(big, 'x', N);
    memcpy(big + W, sig, len);
    OK(ck__looks_failed(big, 2 * W, 0));
    OK(!ck__looks_failed(big, 2 * W + 1, 0));
    /* An exit code that starts just before the tail window is not read, so it cannot clear an
     * error; one inside the window can. */
    memset(big, ' ', N);
    memcpy(big + N - W - 4, "exit code 0", 11);
    memcpy(big, "error:", 6);
    OK(ck__looks_failed(big, N, 0));
    memcpy(big + N - 11, "exit code 0", 11);
    OK(!ck__looks_failed(big, N, 0));
    free(big);
}

/* ---- extractive summarizer ---- */

static const char *scripted =
    "[{\"role\":\"system\",\"content\":\"You are a coding agent.\"},"
    "{\"role\":\"user\",\"content\":\"Fix the bug in src/parser.c. Never change the public "
    "API.\"},"
    "{\"role\":\"assistant\",\"content\":\"I will look at the parser first. Then fix it.\","
    "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"read_file\","
    "\"arguments\":\"{\\\"path\\\":\\\"src/parser.c\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"int parse(void) { return 0; }\"},"
    "{\"role\":\"assistant\",\"content\":\"The bug is an off-by-one in parse(). I will patch "
    "it.\",\"tool_calls\":[{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"bash\","
    "\"arguments\":\"{\\\"command\\\":\\\"make test\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":\"cc -c parser.c\\nparser.o: "
    "error: undefined reference to foo\\nmake: *** [all] Error 1\"},"
    "{\"role\":\"user\",\"content\":\"Also update the README.\"},"
    "{\"role\":\"assistant\",\"content\":\"## Plan\\nBuild fixed; next I will update README.md "
    "and rerun the tests.\"}]";

TEST(extractive_scripted) {
    ck_history *h = read_json(scripted);
    if (!h) return;
    ck_anchors *a = ck__extractive(h, 1, ck_history_count(h), 4000, NULL);
    OK(a != NULL);
    STR_EQ(anchor(a, CK_ANCHOR_USER_INTENT),
           "Fix the bug in src/parser.c. Never change the public API.\n\n"
           "Latest user message: Also update the README.");
    STR_EQ(anchor(a, CK_ANCHOR_EXECUTION_PROGRESS), "- read_file: src/parser.c\n- bash: make test");
    STR_EQ(anchor(a, CK_ANCHOR_KEY_DECISIONS),
           "- I will look at the parser first.\n- The bug is an off-by-one in parse().\n"
           "- Build fixed; next I will update README.md and rerun the tests.");
    STR_EQ(anchor(a, CK_ANCHOR_TRIED_SOLUTIONS),
           "- bash make test: parser.o: error: undefined reference to foo");
    STR_EQ(anchor(a, CK_ANCHOR_NEXT_STEPS),
           "## Plan\nBuild fixed; next I will update README.md and rerun the tests.");
    STR_EQ(ck_anchors_summary(a, NULL), "Compacted 7 messages: 2 tool calls, 1 failed.");
    ck_anchors_free(a);

    /* A span of one tool result: the task still comes from the whole history. */
    a = ck__extractive(h, 3, 4, 4000, NULL);
    STR_EQ(anchor(a, CK_ANCHOR_USER_INTENT),
           "Fix the bug in src/parser.c. Never change the public API.");
    STR_EQ(anchor(a, CK_ANCHOR_EXECUTION_PROGRESS), NULL);
    STR_EQ(anchor(a, CK_ANCHOR_KEY_DECISIONS), NULL);
    STR_EQ(anchor(a, CK_ANCHOR_TRIED_SOLUTIONS), NULL);
    STR_EQ(anchor(a, CK_ANCHOR_NEXT_STEPS), NULL);
    STR_EQ(ck_anchors_summary(a, NULL), "Compacted 1 message: 0 tool calls, 0 failed.");
    ck_anchors_free(a);

    /* The span of the failed result alone still names its call, found before the span. */
    a = ck__extractive(h, 5, 6, 4000, NULL);
    STR_EQ(anchor(a, CK_ANCHOR_TRIED_SOLUTIONS),
           "- bash make test: parser.o: error: undefined reference to foo");
    STR_EQ(ck_anchors_summary(a, NULL), "Compacted 1 message: 0 tool calls, 1 failed.");
    ck_anchors_free(a);

    /* Out-of-range and empty spans. */
    a = ck__extractive(h, 50, 40, 4000, NULL);
    OK(a != NULL);
    STR_EQ(ck_anchors_summary(a, NULL), "Compacted 0 messages: 0 tool calls, 0 failed.");
    ck_anchors_free(a);
    ck_history_free(h);

    a = ck__extractive(NULL, 0, 0, 10, NULL);
    OK(a != NULL);
    STR_EQ(anchor(a, CK_ANCHOR_USER_INTENT), NULL);
    ck_anchors_free(a);
}

TEST(extractive_anthropic) {
    const char *j =
        "{\"system\":\"be brief\",\"messages\":["
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"List the files.\"}]},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Listing now.\"},"
        "{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"str_replace_based_edit_tool\","
        "\"input\":{\"command\":\"view\",\"path\":\"/repo\"}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\","
        "\"is_error\":true,\"content\":\"\"}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"zz\","
        "\"content\":\"ERROR:\\nParameter `old_str` is required.\"}]}]}";
    ck_history *h = read_json(j);
    if (!h) return;
    ck_anchors *a = ck__extractive(h, 0, ck_history_count(h), 1000, NULL);
    STR_EQ(anchor(a, CK_ANCHOR_USER_INTENT), "List the files.");
    STR_EQ(anchor(a, CK_ANCHOR_EXECUTION_PROGRESS), "- str_replace_based_edit_tool: view /repo");
    STR_EQ(anchor(a, CK_ANCHOR_TRIED_SOLUTIONS),
           "- str_replace_based_edit_tool view /repo: (no output)\n"
           "- (unknown call): ERROR: Parameter `old_str` is required.");
    STR_EQ(anchor(a, CK_ANCHOR_NEXT_STEPS), "Listing now.");
    STR_EQ(ck_anchors_summary(a, NULL), "Compacted 4 messages: 1 tool call, 2 failed.");
    ck_anchors_free(a);
    ck_history_free(h);
}

/* Many calls and a small budget: the newest are kept after a count of the others. */
TEST(extractive_budget) {
    ck__buf j;
    ck__buf_init(&j);
    ck__buf_adds(&j, "[{\"role\":\"user\",\"content\":\"");
    for (int i = 0; i < 3000; i++) ck__buf_adds(&j, "task ");
    ck__buf_adds(&j, "\"}");
    for (int i = 0; i < 200; i++) {
        ck__buf_printf(&j,
                       ",{\"role\":\"assistant\",\"content\":\"Step %d is done. More.\","
                       "\"tool_calls\":[{\"id\":\"c%d\",\"type\":\"function\",\"function\":"
                       "{\"name\":\"bash\",\"arguments\":\"{\\\"command\\\":\\\"make step%d\\\","
                       "\\\"timeout\\\":5}\"}}]},"
                       "{\"role\":\"tool\",\"tool_call_id\":\"c%d\",\"content\":\"exit code %d\"}",
                       i, i, i, i, i % 2);
    }
    ck__buf_adds(&j, "]");
    ck_history *h = read_json(j.data);
    ck__buf_dispose(&j);
    if (!h) return;
    uint64_t tokens[] = {0, 100, 600, 3000};
    for (size_t t = 0; t < sizeof tokens / sizeof tokens[0]; t++) {
        size_t budget = tokens[t] / 6 * 4 < 64 ? 64 : tokens[t] / 6 * 4;
        ck_anchors *a = ck__extractive(h, 1, ck_history_count(h), tokens[t], NULL);
        OK(a != NULL);
        if (!a) continue;
        for (int k = 0; k < CK_ANCHOR_COUNT; k++) {
            size_t len = 0;
            ck_anchors_get(a, (ck_anchor)k, &len);
            OK(len <= budget);
        }
        const char *p = anchor(a, CK_ANCHOR_EXECUTION_PROGRESS);
        OK(contains(p, "make step199"));
        if (tokens[t] >= 600) {
            OK(contains(p, "earlier tool calls not shown)"));
            OK(!contains(p, "make step0\n"));
            OK(contains(anchor(a, CK_ANCHOR_KEY_DECISIONS), "- Step 199 is done."));
            OK(contains(anchor(a, CK_ANCHOR_TRIED_SOLUTIONS), "- bash make step199: exit code 1"));
        }
        OK(contains(anchor(a, CK_ANCHOR_USER_INTENT), "task task"));
        STR_EQ(ck_anchors_summary(a, NULL), "Compacted 400 messages: 200 tool calls, 100 failed.");
        ck_anchors_free(a);
    }
    ck_history_free(h);
}

/* Hostile texts: huge arguments, a megabyte of one line, NUL bytes, invalid JSON escapes. */
TEST(extractive_hostile) {
    size_t n = 3 * 349525;
    char *j = malloc(n + 4096);
    size_t k = 0;
    k += (size_t)sprintf(j + k, "[{\"role\":\"user\",\"content\":\"a\\u0000b ");
    for (size_t i = 0; i < n; i++) j[k++] = (i % 3) ? "\xe4\xb8\xad"[i % 3] : '\xe4';
    k += (size_t)sprintf(j + k, "\"},{\"role\":\"assistant\",\"content\":\"x\",\"tool_calls\":"
                                "[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":"
                                "\"bash\",\"arguments\":\"{\\\"command\\\":\\\"\\\\ud800 ");
    for (size_t i = 0; i < 1000; i++) j[k++] = 'x';
    k += (size_t)sprintf(j + k, "\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c\","
                                "\"content\":\"error: ");
    for (size_t i = 0; i < 2000; i++) j[k++] = 'y';
    k += (size_t)sprintf(j + k, "\"}]");
    ck_error err;
    ck_history *h = ck_json_read(j, k, &err);
    OK(h != NULL);
    free(j);
    if (!h) return;
    clock_t t0 = clock();
    ck_anchors *a = ck__extractive(h, 0, ck_history_count(h), 300, NULL);
    OK((double)(clock() - t0) / CLOCKS_PER_SEC < 2.0);
    OK(a != NULL);
    for (int i = 0; a && i < CK_ANCHOR_COUNT; i++) {
        size_t len = 0;
        const char *s = ck_anchors_get(a, (ck_anchor)i, &len);
        OK(len <= 200);
        if (s) INT_EQ(ck__utf8_valid_prefix(s, len), len);
    }
    const char *p = anchor(a, CK_ANCHOR_EXECUTION_PROGRESS);
    OK(p && strncmp(p, "- bash: ", 8) == 0);
    ck_anchors_free(a);
    ck_history_free(h);
}

/* ---- real transcripts ---- */

static int anchors_equal(const ck_anchors *x, const ck_anchors *y) {
    for (int i = 0; i < CK_ANCHOR_COUNT; i++) {
        size_t lx, ly;
        const char *sx = ck_anchors_get(x, (ck_anchor)i, &lx);
        const char *sy = ck_anchors_get(y, (ck_anchor)i, &ly);
        if (!sx != !sy || lx != ly || (sx && memcmp(sx, sy, lx) != 0)) return 0;
    }
    size_t lx, ly;
    const char *sx = ck_anchors_summary(x, &lx), *sy = ck_anchors_summary(y, &ly);
    return lx == ly && memcmp(sx, sy, lx) == 0;
}

/* The first user message's first text, trimmed at the front. */
static const char *first_user_text(const ck_history *h, size_t *len) {
    for (size_t i = 0; i < ck_history_count(h); i++) {
        ck_role role;
        uint32_t flags;
        const ck_part *parts;
        size_t np;
        ck_history_get(h, i, &role, &flags, &parts, &np);
        if (role != CK_ROLE_USER) continue;
        for (size_t k = 0; k < np; k++) {
            if (parts[k].kind != CK_PART_TEXT) continue;
            const char *s = parts[k].text;
            size_t n = parts[k].text_len;
            while (n && (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')) {
                s++;
                n--;
            }
            if (n) {
                *len = n;
                return s;
            }
        }
    }
    return NULL;
}

static void check_transcript(const ck_history *h, const char *name) {
    size_t n = ck_history_count(h);
    uint64_t tokens[] = {300, 1500, 12000};
    for (size_t t = 0; t < sizeof tokens / sizeof tokens[0]; t++) {
        size_t budget = tokens[t] / 6 * 4;
        ck_anchors *a = ck__extractive(h, 1, n, tokens[t], NULL);
        ck_anchors *b = ck__extractive(h, 1, n, tokens[t], NULL);
        OK(a && b);
        if (a && b) {
            OK(anchors_equal(a, b));
            for (int i = 0; i < CK_ANCHOR_COUNT; i++) {
                size_t len = 0;
                const char *s = ck_anchors_get(a, (ck_anchor)i, &len);
                if (len > budget) {
                    H_REPORT("anchor within budget");
                    fprintf(stderr, "    %s: %s is %zu bytes, budget %zu\n", name,
                            ck_anchor_key((ck_anchor)i), len, budget);
                }
                if (s) INT_EQ(ck__utf8_valid_prefix(s, len), len);
            }
            size_t ul = 0, ql = 0;
            const char *intent = ck_anchors_get(a, CK_ANCHOR_USER_INTENT, &ul);
            const char *task = first_user_text(h, &ql);
            OK(intent && task);
            if (intent && task) {
                size_t cmp = ql < 40 ? ql : 40;
                OK(ul >= cmp && memcmp(intent, task, cmp) == 0);
            }
            OK(ck_anchor_key(CK_ANCHOR_EXECUTION_PROGRESS) &&
               ck_anchors_get(a, CK_ANCHOR_EXECUTION_PROGRESS, NULL) != NULL);
            size_t sl = 0;
            ck_anchors_summary(a, &sl);
            OK(sl > 0);
        }
        ck_anchors_free(a);
        ck_anchors_free(b);
    }
    /* Identifiers and file operations over the whole transcript. */
    ck__idents *ids = ck__idents_new();
    ck__buf scratch;
    ck__buf_init(&scratch);
    size_t file_ops = 0;
    for (size_t i = 0; i < n; i++) {
        ck_role role;
        uint32_t flags;
        const ck_part *parts;
        size_t np;
        ck_history_get(h, i, &role, &flags, &parts, &np);
        for (size_t k = 0; k < np; k++) {
            INT_EQ(ck__idents_scan(ids, parts[k].text, parts[k].text_len, i, 0), CK_OK);
            if (parts[k].kind != CK_PART_TOOL_CALL) continue;
            const char *p;
            size_t pn;
            ck__file_op op = ck__file_op_of(parts[k].name, parts[k].name_len, parts[k].text,
                                            parts[k].text_len, &scratch, &p, &pn);
            if (op) {
                file_ops++;
                OK(p && pn > 0);
            }
        }
    }
    OK(ck__idents_count(ids) > 0);
    ck__buf out;
    ck__buf_init(&out);
    size_t listed = ck__idents_render(ids, NULL, 0, 40, 2000, &out, NULL);
    OK(listed > 0 && out.len <= 2000);
    ck__buf_dispose(&out);
    ck__buf_dispose(&scratch);
    ck__idents_free(ids);
    if (strstr(name, "openhands")) OK(file_ops > 0);
}

static void extract_corpus_file(void *ctx, const char *name, const char *text, size_t len) {
    (void)ctx;
    ck_error err;
    ck_history *h = ck_json_read(text, len, &err);
    OK(h != NULL);
    if (h) check_transcript(h, name);
    ck_history_free(h);
}

TEST(extractive_corpus) {
    int files = h_each_corpus("extractive_corpus", extract_corpus_file, NULL);
    OK(files != 0);
}

/* ---- allocation failures ---- */

TEST(fail_each_alloc) {
    const char *text = "src/a.c https://x.io/p ENOENT a1b2c3d ABC-12 #123 src/a.c "
                       "123e4567-e89b-12d3-a456-426614174000 ./run.sh";
    FAIL_EACH_ALLOC({
        ck__idents *s = ck__idents_new();
        if (s) {
            int rc = ck__idents_scan(s, text, strlen(text), 1, 0);
            OK(rc == CK_OK || rc == CK_ENOMEM);
            if (rc == CK_OK) rc = ck__idents_add(s, "carried", 7, 0, 2, 0);
            ck__buf b;
            ck__buf_init(&b);
            size_t listed = ck__idents_render(s, "src/a.c", 7, 10, 1000, &b, NULL);
            OK(listed <= ck__idents_count(s));
            if (rc == CK_OK && !b.failed) INT_EQ(listed, 8);
            ck__buf_dispose(&b);
            ck__idents_free(s);
        }
    });
    ck_history *h = read_json(scripted);
    if (!h) return;
    ck_anchors *ref = ck__extractive(h, 1, ck_history_count(h), 4000, NULL);
    FAIL_EACH_ALLOC({
        ck_anchors *a = ck__extractive(h, 1, ck_history_count(h), 4000, NULL);
        if (a) {
            STR_EQ(ck_anchors_summary(a, NULL), ck_anchors_summary(ref, NULL));
            STR_EQ(anchor(a, CK_ANCHOR_USER_INTENT), anchor(ref, CK_ANCHOR_USER_INTENT));
        }
        ck_anchors_free(a);
    });
    FAIL_EACH_ALLOC({
        ck__buf scratch;
        ck__buf_init(&scratch);
        const char *args = "{\"command\":\"view\",\"path\":\"src\\/x.c\"}";
        const char *p;
        size_t pn;
        ck__file_op op = ck__file_op_of("str_replace_editor", 18, args, strlen(args), &scratch,
                                        &p, &pn);
        if (op) OK(pn == 7 && memcmp(p, "src/x.c", 7) == 0);
        ck__buf_dispose(&scratch);
    });
    ck_anchors_free(ref);
    ck_history_free(h);
}

HARNESS_MAIN(RUN(clip_cuts_at_boundaries) RUN(ident_paths) RUN(ident_urls)
             RUN(ident_hashes_and_uuids) RUN(ident_error_codes) RUN(ident_tickets)
             RUN(ident_nul_and_long_tokens) RUN(ident_ranking) RUN(ident_render)
             RUN(ident_hostile) RUN(file_op_named_tools)
             RUN(file_op_reads_args_as_the_runtime_does) RUN(file_op_editor_commands)
             RUN(file_op_borrows_or_copies) RUN(file_op_shell_commands) RUN(rule_lines) RUN(rule_sentences_in_long_runs)
             RUN(failure_detection) RUN(failure_signals_everywhere)
             RUN(failure_scan_windows) RUN(extractive_scripted) RUN(extractive_anthropic)
             RUN(extractive_budget) RUN(extractive_hostile) RUN(extractive_corpus)
             RUN(fail_each_alloc))
