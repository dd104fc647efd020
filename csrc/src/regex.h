/* Private: the regular-expression matcher behind evidence search (ck__store_search).
 *
 * It answers one question, "does this line contain a match?", in time linear in the line: the
 * pattern is compiled to a Thompson NFA, which runs as a DFA built lazily, one state per set of
 * NFA states met, cached across lines and flushed when it outgrows its memory cap. There is no
 * backtracking, so no pattern can make it take exponential (or polynomial) time.
 *
 * Syntax: POSIX extended regular expressions as grep -E takes them, plus the escapes people
 * and models write:
 *   literals, '.', bracket expressions ([abc], [^a-z], []x], [a-], the classes [[:alpha:]]
 *   [[:digit:]] [[:alnum:]] [[:upper:]] [[:lower:]] [[:space:]] [[:blank:]] [[:punct:]]
 *   [[:print:]] [[:graph:]] [[:cntrl:]] [[:xdigit:]], and [[.c.]] [[=c=]] for one character),
 *   '^' '$' (the ends of the line), '*' '+' '?' and {m} {m,} {m,n} {,n} with counts up to
 *   CK__REGEX_MAX_COUNT, alternation '|', groups '(...)' and '(?:...)';
 *   escapes \d \D \w \W \s \S (ASCII classes, inside brackets too), \b \B \< \> (word
 *   boundaries, word characters being [A-Za-z0-9_]), \t \n \r \f \v, and '\' before any other
 *   character for that character itself.
 * Text is matched as UTF-8: '.' and negated sets take a whole character, ranges compare code
 * points, and each byte that is not part of valid UTF-8 is a character of its own, which only
 * '.', a negated set or that same byte in the pattern matches. Matching is case-sensitive.
 * A quantifier with nothing before it ('*' first, '{' not starting a count) is a literal.
 *
 * Refused with CK_EINVAL, err->where = "pattern", err->offset = the byte where the problem is:
 * backreferences (\1 to \9), (? groups other than (?:, unbalanced parentheses or brackets,
 * unknown [: classes, reversed ranges and counts, counts above CK__REGEX_MAX_COUNT, a
 * trailing backslash, nesting deeper than 200, and programs over CK__REGEX_MAX_PROGRAM
 * instructions (a{1000}{1000}, say). */
#ifndef CK_REGEX_H_
#define CK_REGEX_H_

#include <stddef.h>
#include <stdint.h>

#include "ctxkeel.h"

typedef struct ck__regex ck__regex;

/* The largest count in {m,n}, and the largest compiled program, in instructions. */
#define CK__REGEX_MAX_COUNT 1000
#define CK__REGEX_MAX_PROGRAM 20000

/* What ck__regex_search() found. */
#define CK__REGEX_NO_MATCH 0
#define CK__REGEX_MATCH 1
#define CK__REGEX_CUT 2 /* the budget ran out before the end of the text */

/* Compiles `len` bytes of `pattern` (NUL bytes are literal characters). Returns CK_OK with
 * *out set, CK_EINVAL (see above) or CK_ENOMEM. Caller owns *out (ck__regex_free). */
int ck__regex_new(const char *pattern, size_t len, ck__regex **out, ck_error *err);

/* Whether `len` bytes of `text` contain a match. `*budget` is the work left, in units of about
 * a byte scanned each (building a DFA state costs one unit per NFA state visited); it is
 * decreased by the work done, and when it reaches zero the search stops with CK__REGEX_CUT.
 * Never fails: when memory for the DFA runs out the NFA runs uncached. The regex caches DFA
 * states, so one regex is used by one thread at a time. */
int ck__regex_search(ck__regex *re, const char *text, size_t len, uint64_t *budget);

/* Releases a regex. NULL is a no-op. */
void ck__regex_free(ck__regex *re);

#endif
