// The public header must compile as C++ (extern "C", no C-only constructs).
#include "ctxkeel.h"

int ck_header_cpp_probe();
int ck_header_cpp_probe() { return CK_STATUS_COUNT + static_cast<int>(CK_OK); }
