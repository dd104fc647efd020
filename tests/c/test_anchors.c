/* Tests for ck_anchors: Markdown and JSON shapes, N/A spellings, merging, hostile input and
 * every allocation failure. Inputs are handed over in buffers of exactly their length, with
 * no terminator, so that a sanitizer catches any read past `len`. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Parses `n` bytes from a private, unterminated copy of `s`. */
static ck_anchors *parse_n(const char *s, size_t n) {
    char *copy = malloc(n ? n : 1);
    if (!copy) return NULL;
    if (n) memcpy(copy, s, n);
    ck_anchors *a = ck_anchors_parse(copy, n);
    free(copy);
    return a;
}

static ck_anchors *parse(const char *s) { return parse_n(s, strlen(s)); }

/* An anchor's text; also checks that the reported length matches the terminator. */
static const char *get(const ck_anchors *a, ck_anchor which) {
    size_t len = 12345;
    const char *s = ck_anchors_get(a, which, &len);
    if (s) INT_EQ(strlen(s), len);
    else INT_EQ(len, 0);
    return s;
}

static const char *summary(const ck_anchors *a) {
    size_t len = 12345;
    const char *s = ck_anchors_summary(a, &len);
    INT_EQ(strlen(s), len);
    return s;
}

static void expect_all_na(const ck_anchors *a) {
    OK(a != NULL);
    for (int i = 0; i < CK_ANCHOR_COUNT; i++) STR_EQ(get(a, (ck_anchor)i), NULL);
    STR_EQ(summary(a), "");
}

TEST(keys_and_titles) {
    STR_EQ(ck_anchor_key(CK_ANCHOR_USER_INTENT), "user_intent");
    STR_EQ(ck_anchor_key(CK_ANCHOR_EXECUTION_PROGRESS), "execution_progress");
    STR_EQ(ck_anchor_key(CK_ANCHOR_KEY_DECISIONS), "key_decisions");
    STR_EQ(ck_anchor_key(CK_ANCHOR_TRIED_SOLUTIONS), "tried_solutions");
    STR_EQ(ck_anchor_key(CK_ANCHOR_NEXT_STEPS), "next_steps");
    STR_EQ(ck_anchor_title(CK_ANCHOR_USER_INTENT), "User Intent");
    STR_EQ(ck_anchor_title(CK_ANCHOR_EXECUTION_PROGRESS), "Execution Progress");
    STR_EQ(ck_anchor_title(CK_ANCHOR_KEY_DECISIONS), "Key Decisions");
    STR_EQ(ck_anchor_title(CK_ANCHOR_TRIED_SOLUTIONS), "Tried Solutions");
    STR_EQ(ck_anchor_title(CK_ANCHOR_NEXT_STEPS), "Next Steps");
    STR_EQ(ck_anchor_key((ck_anchor)CK_ANCHOR_COUNT), NULL);
    STR_EQ(ck_anchor_key((ck_anchor)-1), NULL);
    STR_EQ(ck_anchor_title((ck_anchor)CK_ANCHOR_COUNT), NULL);
    STR_EQ(ck_anchor_title((ck_anchor)-1), NULL);
}

TEST(new_is_empty) {
    ck_anchors *a = ck_anchors_new();
    expect_all_na(a);
    size_t len = 7;
    OK(ck_anchors_get(a, (ck_anchor)CK_ANCHOR_COUNT, &len) == NULL);
    INT_EQ(len, 0);
    OK(ck_anchors_get(a, (ck_anchor)-1, NULL) == NULL);
    OK(ck_anchors_get(NULL, CK_ANCHOR_USER_INTENT, &len) == NULL);
    STR_EQ(ck_anchors_summary(NULL, NULL), "");
    ck_anchors_free(a);
    ck_anchors_free(NULL);
}

TEST(atx_headers_all_levels) {
    ck_anchors *a = parse("# User Intent\nFix the login bug.\n\n"
                          "## Execution Progress\n- read auth.py\n- wrote a test\n\n"
                          "### Key Decisions\nUse bcrypt.\n"
                          "#### Tried Solutions\nPatching the cookie failed.\n"
                          "## Next Steps\nRun the suite.\n"
                          "## Summary\nHalfway there.\n");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "Fix the login bug.");
    STR_EQ(get(a, CK_ANCHOR_EXECUTION_PROGRESS), "- read auth.py\n- wrote a test");
    STR_EQ(get(a, CK_ANCHOR_KEY_DECISIONS), "Use bcrypt.");
    STR_EQ(get(a, CK_ANCHOR_TRIED_SOLUTIONS), "Patching the cookie failed.");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "Run the suite.");
    STR_EQ(summary(a), "Halfway there.");
    ck_anchors_free(a);

    /* Five hashes are not a section header; a header needs a blank after unknown hashes. */
    a = parse("## User Intent\nA\n##### Next Steps\n#include <x.h>\n##Next Steps\nB");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "A\n##### Next Steps\n#include <x.h>");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "B");
    ck_anchors_free(a);
}

TEST(bold_headers) {
    ck_anchors *a = parse("**User Intent:**\nShip v2.\n\n"
                          "**Key Decisions**:\n- keep the API\n"
                          "**Next Steps**\nTag the release.\n"
                          "__Tried Solutions:__\nNothing worked.\n"
                          "***Execution Progress***\nDone.\n");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "Ship v2.");
    STR_EQ(get(a, CK_ANCHOR_KEY_DECISIONS), "- keep the API");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "Tag the release.");
    STR_EQ(get(a, CK_ANCHOR_TRIED_SOLUTIONS), "Nothing worked.");
    STR_EQ(get(a, CK_ANCHOR_EXECUTION_PROGRESS), "Done.");
    ck_anchors_free(a);

    /* A bold known name followed by text but no colon is emphasis, not a header. */
    a = parse("## User Intent\n**Next Steps** are unclear.\n");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "**Next Steps** are unclear.");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), NULL);
    ck_anchors_free(a);
}

TEST(inline_values) {
    ck_anchors *a = parse("**User Intent:** fix CI\n"
                          "**Next Steps:** run tests\n- then deploy\n"
                          "## Key Decisions: pin gcc 12\n"
                          "### Summary: short one\n");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "fix CI");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "run tests\n- then deploy");
    STR_EQ(get(a, CK_ANCHOR_KEY_DECISIONS), "pin gcc 12");
    STR_EQ(summary(a), "short one");
    ck_anchors_free(a);

    a = parse("**Key Decisions**: use SQLite\n*Next Steps:*\nwrite docs\n");
    STR_EQ(get(a, CK_ANCHOR_KEY_DECISIONS), "use SQLite");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "write docs");
    ck_anchors_free(a);
}

TEST(numbered_and_plain_headers) {
    ck_anchors *a = parse("## 1. User Intent\nA\n## 2) Execution Progress\nB\n"
                          "3. **Key Decisions**\nC\n**4. Tried Solutions:**\nD\n"
                          "Next Steps:\nE\n");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "A");
    STR_EQ(get(a, CK_ANCHOR_EXECUTION_PROGRESS), "B");
    STR_EQ(get(a, CK_ANCHOR_KEY_DECISIONS), "C");
    STR_EQ(get(a, CK_ANCHOR_TRIED_SOLUTIONS), "D");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "E");
    ck_anchors_free(a);

    /* A plain "Name: text" line is content: only a bare "Name:" line opens a section. */
    a = parse("## User Intent\nNext steps: none decided\n");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "Next steps: none decided");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), NULL);
    ck_anchors_free(a);
}

TEST(names_case_plural_and_spelling) {
    ck_anchors *a = parse("## USER INTENTS\na\n## execution_progress:\nb\n### Key Decision\nc\n"
                          "## tried solution\nd\n## Next-Step\ne\n## Summaries\nf\n");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "a");
    STR_EQ(get(a, CK_ANCHOR_EXECUTION_PROGRESS), "b");
    STR_EQ(get(a, CK_ANCHOR_KEY_DECISIONS), "c");
    STR_EQ(get(a, CK_ANCHOR_TRIED_SOLUTIONS), "d");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "e");
    STR_EQ(summary(a), "f");
    ck_anchors_free(a);

    a = parse("## next_steps\nx\n## \xf0\x9f\x94\xa7 Tried Solutions (so far)\ny\n"
              "## Key Decisions ##\nz\n");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "x");
    STR_EQ(get(a, CK_ANCHOR_TRIED_SOLUTIONS), "y");
    STR_EQ(get(a, CK_ANCHOR_KEY_DECISIONS), "z");
    ck_anchors_free(a);

    /* Near misses stay unknown. */
    a = parse("## User Intentions\na\n## Next\nb\n## Decisions\nc\n## s\nd\n## ies\ne\n"
              "**S:**\nf\n");
    expect_all_na(a);
    ck_anchors_free(a);
}

TEST(text_before_first_section_is_ignored) {
    ck_anchors *a = parse("Sure! Here is the checkpoint you asked for.\n"
                          "The user wanted many things.\n\n"
                          "## User Intent\nRefactor the parser.\n");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "Refactor the parser.");
    for (int i = 1; i < CK_ANCHOR_COUNT; i++) STR_EQ(get(a, (ck_anchor)i), NULL);
    STR_EQ(summary(a), "");
    ck_anchors_free(a);

    /* A reply with no section at all is not an error: everything is N/A. */
    a = parse("I could not summarize this conversation.");
    expect_all_na(a);
    ck_anchors_free(a);
}

TEST(unknown_sections_end_the_previous_one) {
    ck_anchors *a = parse("# Checkpoint\n## User Intent\nX\n## Constraints\nnever push\n"
                          "## Next Steps\nY\n## Appendix\nnoise\n");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "X");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "Y");
    ck_anchors_free(a);

    a = parse("**User Intent:**\nX\n**Constraints:**\nnever push\n**Next Steps:**\nY\n");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "X");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "Y");
    ck_anchors_free(a);

    a = parse("**User Intent:** X\n**Note:** never push\n**Next Steps:** Y\n**Files:** a.c\n");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "X");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "Y");
    ck_anchors_free(a);

    /* A deeper unknown header is a subsection and stays in the anchor. */
    a = parse("## Execution Progress\n### Done\n- a\n### Pending\n- b\n**Blocked:**\n- c\n"
              "## Next Steps\nship\n");
    STR_EQ(get(a, CK_ANCHOR_EXECUTION_PROGRESS),
           "### Done\n- a\n### Pending\n- b\n**Blocked:**\n- c");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "ship");
    ck_anchors_free(a);
}

TEST(bulleted_bold_labels) {
    ck_anchors *a = parse("Checkpoint:\n- **User Intent**: fix login\n- **Constraints**: no force "
                          "push\n- **Next Steps**: run tests\n  and lint\n* **Summary:** ok\n");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "fix login");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "run tests\n  and lint");
    STR_EQ(summary(a), "ok");
    ck_anchors_free(a);

    /* Bold labels in a list under a "##" section are its content. */
    a = parse("## Execution Progress\n- **Done:** parser\n- **Todo:** writer\n");
    STR_EQ(get(a, CK_ANCHOR_EXECUTION_PROGRESS), "- **Done:** parser\n- **Todo:** writer");
    ck_anchors_free(a);
}

TEST(na_spellings) {
    static const char *const na[] = {
        "", "   ", "N/A", "n/a", "- N/A", "n/a.", "none", "None.", "NONE", "-", "---", "* none",
        "  - N/A  \n", "(none)", "*N/A*", "null", "Not applicable.", "\xe6\x97\xa0", "`n/a`",
        "\t\r\n- n/a.\r\n",
    };
    static const char *const not_na[] = {
        "Nope", "none of the tests pass", "N/A but check later", "-1", "a", "- N/A\n- fix",
        "n", "nonee",
    };
    for (size_t i = 0; i < sizeof na / sizeof na[0]; i++) {
        if (!ck_is_na(na[i], strlen(na[i]))) fprintf(stderr, "    not N/A: \"%s\"\n", na[i]);
        OK(ck_is_na(na[i], strlen(na[i])));
    }
    for (size_t i = 0; i < sizeof not_na / sizeof not_na[0]; i++) {
        if (ck_is_na(not_na[i], strlen(not_na[i])))
            fprintf(stderr, "    N/A: \"%s\"\n", not_na[i]);
        OK(!ck_is_na(not_na[i], strlen(not_na[i])));
    }
    OK(ck_is_na(NULL, 0));
    OK(ck_is_na(NULL, 10));
    /* Only `len` bytes count: "nonexistent" cut after four bytes reads "none". */
    OK(ck_is_na("nonexistent", 4));
    OK(!ck_is_na("nonexistent", 11));

    ck_anchors *a = parse("## User Intent\nN/A\n## Execution Progress\n- N/A\n"
                          "## Key Decisions\nNone.\n## Tried Solutions\n\n## Next Steps\n-\n"
                          "## Summary\nn/a\n");
    expect_all_na(a);
    ck_anchors_free(a);
}

TEST(crlf) {
    ck_anchors *a = parse("Intro\r\n## User Intent\r\nline1\r\nline2\r\n\r\n"
                          "**Next Steps:**\r\nrun\r\n**Key Decisions:** inline\r\n");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "line1\nline2");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "run");
    STR_EQ(get(a, CK_ANCHOR_KEY_DECISIONS), "inline");
    ck_anchors_free(a);

    a = parse("{\"user_intent\": \"a\\r\\nb\"}");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "a\nb");
    ck_anchors_free(a);
}

TEST(json_bare) {
    ck_anchors *a = parse("{\"user_intent\": \"  Fix it \\n\", \"execution_progress\": null,"
                          " \"key_decisions\": {\"db\": \"sqlite\", \"n\": 2},"
                          " \"tried_solutions\": \"N/A\", \"next_steps\": [\"test\", \"ship\"],"
                          " \"summary\": \"Going well.\", \"other\": \"ignored\"}");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "Fix it");
    STR_EQ(get(a, CK_ANCHOR_EXECUTION_PROGRESS), NULL);
    STR_EQ(get(a, CK_ANCHOR_KEY_DECISIONS), "{\"db\":\"sqlite\",\"n\":2}");
    STR_EQ(get(a, CK_ANCHOR_TRIED_SOLUTIONS), NULL);
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "- test\n- ship");
    STR_EQ(summary(a), "Going well.");
    ck_anchors_free(a);

    /* Arrays of other values, empty arrays, N/A items and keys spelled differently. */
    a = parse("  \n{\"User Intent\": [1, \"x\", null, [true]], \"nextSteps\": [],"
              " \"key_decision\": [\"N/A\"], \"Tried Solutions\": 42}\ntrailing words");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "- 1\n- x\n- null\n- [true]");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), NULL);
    STR_EQ(get(a, CK_ANCHOR_KEY_DECISIONS), NULL);
    STR_EQ(get(a, CK_ANCHOR_TRIED_SOLUTIONS), "42");
    ck_anchors_free(a);

    /* Prose before a bare object. */
    a = parse("Here is the checkpoint:\n{\n  \"next_steps\": \"deploy\"\n}\n");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "deploy");
    ck_anchors_free(a);

    /* JSON that is not an object, or has none of our keys, gives nothing. */
    a = parse("[\"user_intent\", \"x\"]");
    expect_all_na(a);
    ck_anchors_free(a);
    a = parse("{\"foo\": \"bar\"}");
    expect_all_na(a);
    ck_anchors_free(a);
}

/* An escaped NUL in a JSON reply is kept with what follows it (cJSON cut the string there). */
TEST(json_keeps_nul) {
    ck_anchors *a = parse("{\"next_steps\": \"run a\\u0000b then ship\","
                          " \"user_intent\": [\"x\\u0000y\", {\"k\\u0000\": \"v\"}]}");
    size_t len = 0;
    const char *v = ck_anchors_get(a, CK_ANCHOR_NEXT_STEPS, &len);
    INT_EQ(len, 17);
    OK(v && memcmp(v, "run a\0b then ship", 17) == 0);
    v = ck_anchors_get(a, CK_ANCHOR_USER_INTENT, &len);
    INT_EQ(len, 23);
    OK(v && memcmp(v, "- x\0y\n- {\"k\\u0000\":\"v\"}", 23) == 0);
    ck_anchors_free(a);
}

TEST(json_fenced) {
    ck_anchors *a = parse("Here you go:\n\n```json\n{\"user_intent\": \"A\",\n"
                          " \"next_steps\": \"B\"}\n```\nHope this helps.\n");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "A");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "B");
    ck_anchors_free(a);

    /* A plain fence, after another fence that holds no anchors. */
    a = parse("```json\n{\"x\": 1}\n```\ntext\n```\n{\"key_decisions\": \"K\"}\n```\n");
    STR_EQ(get(a, CK_ANCHOR_KEY_DECISIONS), "K");
    ck_anchors_free(a);

    /* An unterminated fence runs to the end of the text. */
    a = parse("```json\n{\"tried_solutions\": [\"a\", \"b\"]}\n");
    STR_EQ(get(a, CK_ANCHOR_TRIED_SOLUTIONS), "- a\n- b");
    ck_anchors_free(a);

    a = parse("~~~\r\n{\"summary\": \"S\"}\r\n~~~\r\n");
    STR_EQ(summary(a), "S");
    ck_anchors_free(a);
}

TEST(markdown_in_fences) {
    /* A reply wrapped whole in a markdown fence. */
    ck_anchors *a = parse("```markdown\n## User Intent\nA\n## Next Steps\nB\n```\n");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "A");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "B");
    ck_anchors_free(a);

    /* A code block inside a section is content, its comments are not headers. */
    a = parse("## Execution Progress\n```bash\n# next steps\nmake\n```\n## Next Steps\nship\n");
    STR_EQ(get(a, CK_ANCHOR_EXECUTION_PROGRESS), "```bash\n# next steps\nmake\n```");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "ship");
    ck_anchors_free(a);

    /* Inline code at the start of a line opens no fence. */
    a = parse("## User Intent\n```x``` is slow\n## Next Steps\ny\n");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "```x``` is slow");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "y");
    ck_anchors_free(a);

    /* A comment in a code block is never read as a section. */
    a = parse("Done.\n```python\n# next steps\nfoo()\n```\n");
    expect_all_na(a);
    ck_anchors_free(a);
}

TEST(rules_and_repeats) {
    ck_anchors *a = parse("## User Intent\nX\n\n---\n\n## Next Steps\na\n***\n## Next Steps\nb\n");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "X");
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "a\n\nb");
    ck_anchors_free(a);

    /* A repeated section that is N/A adds nothing. */
    a = parse("## Key Decisions\nK\n## Key Decisions\nN/A\n");
    STR_EQ(get(a, CK_ANCHOR_KEY_DECISIONS), "K");
    ck_anchors_free(a);
}

TEST(empty_input) {
    ck_anchors *a = ck_anchors_parse("", 0);
    expect_all_na(a);
    ck_anchors_free(a);
    a = ck_anchors_parse(NULL, 0);
    expect_all_na(a);
    ck_anchors_free(a);
    a = ck_anchors_parse(NULL, 99);
    expect_all_na(a);
    ck_anchors_free(a);
    a = parse("\n\n\r\n   \n");
    expect_all_na(a);
    ck_anchors_free(a);
    a = parse("\xef\xbb\xbf## User Intent\nwith BOM");
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "with BOM");
    ck_anchors_free(a);
}

/* Fills `n` bytes with repeats of `unit`. Caller frees with free(). */
static char *repeat(const char *unit, size_t n) {
    char *s = malloc(n);
    size_t u = strlen(unit);
    for (size_t i = 0; s && i < n; i++) s[i] = unit[i % u];
    return s;
}

TEST(hostile_inputs) {
    static const char *const units[] = {
        "a", "{", "[", "**", "```\n", "```a\n", "## ", "#", "- **x:** ", ":", "\n", "\r",
        "{\"user_intent\":", "## User Intent\n", "**Next Steps:**", "\0", "(", "~~~~",
    };
    const size_t big = 1 << 20;
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        char *s = units[u][0] ? repeat(units[u], big) : calloc(big, 1);
        ck_anchors *a = parse_n(s, big);
        OK(a != NULL);
        ck_anchors_free(a);
        free(s);
    }

    /* One huge anchor keeps every byte. */
    const char *head = "## User Intent\n";
    size_t hl = strlen(head);
    char *s = repeat("a", hl + big);
    memcpy(s, head, hl);
    ck_anchors *a = parse_n(s, hl + big);
    size_t len = 0;
    const char *v = ck_anchors_get(a, CK_ANCHOR_USER_INTENT, &len);
    INT_EQ(len, big);
    OK(v && v[0] == 'a' && v[big - 1] == 'a' && v[big] == '\0');
    ck_anchors_free(a);
    free(s);

    /* Many repeats of one section are joined in linear time. */
    const char *unit = "## Next Steps\nx\n";
    size_t count = 100000, ul = strlen(unit);
    s = repeat(unit, count * ul);
    a = parse_n(s, count * ul);
    ck_anchors_get(a, CK_ANCHOR_NEXT_STEPS, &len);
    INT_EQ(len, count * 3 - 2);
    ck_anchors_free(a);
    free(s);

    /* Unterminated fence and unterminated JSON. */
    a = parse("```json\n{\"user_intent\": \"x");
    expect_all_na(a);
    ck_anchors_free(a);

    /* NUL bytes inside the text are data. */
    static const char nul[] = "## User Intent\nab\0cd\n## Next Steps\n\0\n## Key Decisions\nk\0";
    a = parse_n(nul, sizeof nul - 1);
    v = ck_anchors_get(a, CK_ANCHOR_USER_INTENT, &len);
    INT_EQ(len, 5);
    OK(v && memcmp(v, "ab\0cd", 5) == 0);
    v = ck_anchors_get(a, CK_ANCHOR_KEY_DECISIONS, &len);
    INT_EQ(len, 2);
    OK(v && memcmp(v, "k\0", 2) == 0);
    ck_anchors_free(a);

    /* A NUL byte inside fenced JSON ends nothing badly. */
    static const char nul_json[] = "```\n{\"next_steps\": \"a\0b\"}\n```";
    a = parse_n(nul_json, sizeof nul_json - 1);
    OK(a != NULL);
    ck_anchors_free(a);

    /* Deep nesting is refused by the JSON layer's depth limit, not by the stack. */
    s = repeat("[", 200000);
    memcpy(s, "{\"summary\":", 11);
    a = parse_n(s, 200000);
    expect_all_na(a);
    ck_anchors_free(a);
    free(s);
}

/* Real agent transcripts are odd text for this parser: it must return, and every anchor it
 * finds must be consistent. Skipped when the shared corpus is absent. */
static void parse_corpus_file(void *ctx, const char *name, const char *text, size_t len) {
    (void)ctx;
    (void)name;
    ck_anchors *a = parse_n(text, len);
    OK(a != NULL);
    for (int i = 0; i < CK_ANCHOR_COUNT; i++) get(a, (ck_anchor)i);
    summary(a);
    ck_anchors_free(a);
}

TEST(corpus_text_never_fails) {
    int files = h_each_corpus("corpus_text_never_fails", parse_corpus_file, NULL);
    OK(files != 0);
}

TEST(set_and_set_summary) {
    ck_anchors *a = ck_anchors_new();
    INT_EQ(ck_anchors_set(a, CK_ANCHOR_NEXT_STEPS, "  \n run tests \n\n", 16), CK_OK);
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "run tests");
    INT_EQ(ck_anchors_set(a, CK_ANCHOR_NEXT_STEPS, "- N/A", 5), CK_OK);
    STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), NULL);
    INT_EQ(ck_anchors_set(a, CK_ANCHOR_USER_INTENT, "abcdef", 3), CK_OK);
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "abc");
    INT_EQ(ck_anchors_set(a, CK_ANCHOR_USER_INTENT, NULL, 3), CK_OK);
    STR_EQ(get(a, CK_ANCHOR_USER_INTENT), NULL);
    INT_EQ(ck_anchors_set(a, (ck_anchor)CK_ANCHOR_COUNT, "x", 1), CK_EINVAL);
    INT_EQ(ck_anchors_set(a, (ck_anchor)-1, "x", 1), CK_EINVAL);
    INT_EQ(ck_anchors_set(NULL, CK_ANCHOR_USER_INTENT, "x", 1), CK_EINVAL);

    INT_EQ(ck_anchors_set_summary(a, " as is ", 7), CK_OK);
    STR_EQ(summary(a), " as is ");
    INT_EQ(ck_anchors_set_summary(a, NULL, 5), CK_OK);
    STR_EQ(summary(a), "");
    INT_EQ(ck_anchors_set_summary(a, "xy", 0), CK_OK);
    STR_EQ(summary(a), "");
    ck_anchors_free(a);
}

TEST(merge) {
    ck_anchors *older = parse("## User Intent\nA\n## Execution Progress\nB\n## Key Decisions\nK\n"
                              "## Summary\nS1\n");
    ck_anchors *newer = parse("## User Intent\n- N/A\n## Execution Progress\nC\n"
                              "## Next Steps\nN\n");
    ck_anchors *m = ck_anchors_merge(older, newer);
    ck_anchors_free(older);
    ck_anchors_free(newer);
    STR_EQ(get(m, CK_ANCHOR_USER_INTENT), "A");
    STR_EQ(get(m, CK_ANCHOR_EXECUTION_PROGRESS), "C");
    STR_EQ(get(m, CK_ANCHOR_KEY_DECISIONS), "K");
    STR_EQ(get(m, CK_ANCHOR_TRIED_SOLUTIONS), NULL);
    STR_EQ(get(m, CK_ANCHOR_NEXT_STEPS), "N");
    STR_EQ(summary(m), "S1");

    /* Order matters: the second argument wins, including for the summary. */
    ck_anchors *b = parse("## Execution Progress\nD\n## Summary\nS2\n");
    ck_anchors *m2 = ck_anchors_merge(m, b);
    STR_EQ(get(m2, CK_ANCHOR_EXECUTION_PROGRESS), "D");
    STR_EQ(get(m2, CK_ANCHOR_USER_INTENT), "A");
    STR_EQ(summary(m2), "S2");
    ck_anchors *m3 = ck_anchors_merge(b, m);
    STR_EQ(get(m3, CK_ANCHOR_EXECUTION_PROGRESS), "C");
    STR_EQ(summary(m3), "S1");
    ck_anchors_free(m2);
    ck_anchors_free(m3);

    /* NULL on either side means all N/A; the result is always a fresh copy. */
    ck_anchors *n1 = ck_anchors_merge(NULL, b);
    ck_anchors *n2 = ck_anchors_merge(b, NULL);
    ck_anchors *n3 = ck_anchors_merge(NULL, NULL);
    ck_anchors_free(b);
    STR_EQ(get(n1, CK_ANCHOR_EXECUTION_PROGRESS), "D");
    STR_EQ(summary(n1), "S2");
    STR_EQ(get(n2, CK_ANCHOR_EXECUTION_PROGRESS), "D");
    STR_EQ(get(n2, CK_ANCHOR_USER_INTENT), NULL);
    expect_all_na(n3);
    ck_anchors_free(n1);
    ck_anchors_free(n2);
    ck_anchors_free(n3);
    ck_anchors_free(m);
}

static const char *const oom_markdown =
    "intro\n## User Intent\nA\n**Next Steps:** B\n## Next Steps\nC\n## Summary\nS\n";

TEST(every_allocation_failure) {
    /* A result is either NULL (out of memory) or complete. */
    FAIL_EACH_ALLOC({
        ck_anchors *a = parse(oom_markdown);
        if (a) {
            STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "A");
            STR_EQ(get(a, CK_ANCHOR_NEXT_STEPS), "B\n\nC");
            STR_EQ(summary(a), "S");
        }
        ck_anchors_free(a);
    });
    /* Out of memory inside the JSON parse fails the whole parse, leaking nothing; else the
     * result is complete. */
    FAIL_EACH_ALLOC({
        ck_anchors *a = parse("```json\n{\"user_intent\": [1, {\"a\": 2}], \"summary\": "
                              "\"S\"}\n```");
        if (a) {
            STR_EQ(get(a, CK_ANCHOR_USER_INTENT), "- 1\n- {\"a\":2}");
            STR_EQ(summary(a), "S");
        }
        ck_anchors_free(a);
    });
    ck_anchors *x = parse("## User Intent\nA\n## Summary\nS\n");
    ck_anchors *y = parse("## Next Steps\nN\n");
    FAIL_EACH_ALLOC({
        ck_anchors *m = ck_anchors_merge(x, y);
        if (m) {
            STR_EQ(get(m, CK_ANCHOR_USER_INTENT), "A");
            STR_EQ(get(m, CK_ANCHOR_NEXT_STEPS), "N");
        }
        ck_anchors_free(m);
    });
    /* A failed set keeps the old value. */
    FAIL_EACH_ALLOC({
        ck_anchors *c = ck_anchors_merge(NULL, y);
        if (c) {
            int rc = ck_anchors_set(c, CK_ANCHOR_NEXT_STEPS, "M", 1);
            OK(rc == CK_OK || rc == CK_ENOMEM);
            STR_EQ(get(c, CK_ANCHOR_NEXT_STEPS), rc == CK_OK ? "M" : "N");
        }
        ck_anchors_free(c);
    });
    ck_anchors_free(x);
    ck_anchors_free(y);
}

HARNESS_MAIN(RUN(keys_and_titles) RUN(new_is_empty) RUN(atx_headers_all_levels)
             RUN(bold_headers) RUN(inline_values) RUN(numbered_and_plain_headers)
             RUN(names_case_plural_and_spelling) RUN(text_before_first_section_is_ignored)
             RUN(unknown_sections_end_the_previous_one) RUN(bulleted_bold_labels)
             RUN(na_spellings) RUN(crlf) RUN(json_bare) RUN(json_keeps_nul) RUN(json_fenced)
             RUN(markdown_in_fences) RUN(rules_and_repeats) RUN(empty_input)
             RUN(hostile_inputs) RUN(corpus_text_never_fails) RUN(set_and_set_summary) RUN(merge)
             RUN(every_allocation_failure))
