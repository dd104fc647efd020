# Builds the ctxkeel Node-API addon. The core is compiled from its amalgamation only
# (csrc/src/ck_all.c), so this build and setup.py cannot list different sources; the addon sees
# nothing of the core but its public header (csrc/include).
{
  "targets": [
    {
      "target_name": "ck_core",
      "type": "static_library",
      "sources": ["csrc/src/ck_all.c"],
      "include_dirs": [
        "csrc/include",
        "<!@(pkg-config --cflags-only-I libcjson libcurl | sed s/-I//g)"
      ],
      "defines": ["_POSIX_C_SOURCE=200112L", "_DEFAULT_SOURCE", "CK_STATIC"],
      "cflags": ["-fvisibility=hidden", "-fPIC", "-Wall", "-Wextra"],
      "cflags_c": ["-std=c11"],
      "xcode_settings": {
        "GCC_SYMBOLS_PRIVATE_EXTERN": "YES",
        "OTHER_CFLAGS": ["-std=c11"]
      }
    },
    {
      "target_name": "ctxkeel",
      "dependencies": ["ck_core"],
      "sources": [
        "node/src/addon.c",
        "node/src/compactor.c",
        "node/src/host.c",
        "node/src/http.c",
        "node/src/replay.c",
        "node/src/values.c"
      ],
      "include_dirs": ["csrc/include"],
      "defines": [
        "NAPI_VERSION=8",
        "_POSIX_C_SOURCE=200112L",
        "_DEFAULT_SOURCE",
        "CK_STATIC"
      ],
      "cflags": ["-fvisibility=hidden", "-Wall", "-Wextra"],
      "cflags_c": ["-std=c11"],
      "libraries": ["<!@(pkg-config --libs libcjson libcurl)"],
      "xcode_settings": {
        "GCC_SYMBOLS_PRIVATE_EXTERN": "YES",
        "OTHER_CFLAGS": ["-std=c11"]
      }
    }
  ]
}
