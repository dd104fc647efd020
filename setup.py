"""Build of the ctxkeel._ext extension module. Metadata lives in pyproject.toml.

The extension compiles the core amalgamation (csrc/src/ck_all.c) and the binding sources in
python/ctxkeel/_ext/. Only csrc/include is on the include path, so the binding can reach the
public header and nothing else. Environment switches:

    CK_DEBUG=1     -O0 -g -UNDEBUG
    CK_SANITIZE=1  -fsanitize=address,undefined (compile and link)
    CK_WERROR=1    -Wall -Wextra -Werror
"""

import os
import shlex
import subprocess
from glob import glob

from setuptools import Extension, setup

PKG_CONFIG_PACKAGES = ["libcjson", "libcurl"]


def env_flag(name):
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


def pkg_config(*args):
    """Flags from pkg-config for cJSON and libcurl; a clear error when they are missing."""
    command = ["pkg-config", *args, *PKG_CONFIG_PACKAGES]
    try:
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        raise SystemExit(
            "ctxkeel: `%s` failed: %s\nInstall pkg-config and the development files of cJSON "
            "and libcurl (Debian: libcjson-dev libcurl4-openssl-dev)."
            % (" ".join(command), detail.strip())
        )
    return shlex.split(out)


compile_args = ["-std=c11", "-fvisibility=hidden", *pkg_config("--cflags")]
link_args = pkg_config("--libs")

if env_flag("CK_DEBUG"):
    compile_args += ["-O0", "-g", "-UNDEBUG"]
if env_flag("CK_SANITIZE"):
    compile_args += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]
    link_args += ["-fsanitize=address,undefined"]
if env_flag("CK_WERROR"):
    compile_args += ["-Wall", "-Wextra", "-Werror"]

binding_sources = sorted(glob("python/ctxkeel/_ext/*.c"))

extension = Extension(
    name="ctxkeel._ext",
    sources=["csrc/src/ck_all.c", *binding_sources],
    include_dirs=["csrc/include"],
    define_macros=[
        ("_POSIX_C_SOURCE", "200112L"),
        ("_DEFAULT_SOURCE", None),
        ("CK_STATIC", None),
        ("PY_SSIZE_T_CLEAN", None),
    ],
    extra_compile_args=compile_args,
    extra_link_args=link_args,
    # The amalgamation #includes every core file, so a change to any of them must rebuild.
    depends=sorted(
        glob("csrc/src/*.c")
        + glob("csrc/src/*.h")
        + ["csrc/include/ctxkeel.h", "python/ctxkeel/_ext/state.h"]
    ),
)

# A sanitized build keeps its objects apart, so neither build reuses the other's.
build_base = "build-py-asan" if env_flag("CK_SANITIZE") else "build-py"
setup(ext_modules=[extension], options={"build": {"build_base": build_base}})
