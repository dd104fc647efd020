/* The ctxkeel command: a main() around ck_cli_main() (csrc/src/cli.c), which the Python
 * console script and the npm bin call too. */
#include "ctxkeel.h"

int main(int argc, char **argv) { return ck_cli_main(argc, argv); }
