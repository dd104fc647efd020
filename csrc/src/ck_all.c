/* The amalgamation: every core file in one translation unit. setup.py and binding.gyp
 * compile only this file, so the two builds cannot list different sources. */
#include "./alloc.c"
#include "./buf.c"
#include "./anchors.c"
#include "./errors.c"
#include "./history.c"
#include "./idmap.c"
#include "./json.c"
#include "./pairs.c"
#include "./status.c"
#include "./tokens.c"
#include "./view.c"
