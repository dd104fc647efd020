/* Private: reading a provider's usage object (see ck_usage_prompt_tokens() in ctxkeel.h). */
#ifndef CK_USAGE_H_
#define CK_USAGE_H_

#include <stdint.h>

#include "ctxkeel.h"

#include "./json.h"

/* The whole prompt's tokens of a parsed usage value (a usage object, a wrapper holding one, or
 * a bare count) into *out. `path` is what err->where names the value as ("" for a root).
 * Returns CK_OK or CK_EINVAL (err->where names the field), as ck_usage_prompt_tokens(). */
int ck__usage_prompt(const ck__jval *usage, const char *path, uint64_t *out, ck_error *err);

#endif
