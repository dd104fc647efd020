/* The public header must compile as strict C99 (-std=c99 -pedantic-errors). */
#include "ctxkeel.h"

int ck_header_c99_probe(void);
int ck_header_c99_probe(void) { return CK_ANCHOR_COUNT + (int)sizeof(ck_error); }
