#!/usr/bin/env python3
"""Makes a prebuilt Node addon carry the shared libraries it links, as auditwheel does for the
wheel: every library `ldd` resolves for it, except glibc's own, is copied next to it under a
name that no system library has (name-<hash>.so...), the copies' sonames and every DT_NEEDED
entry are rewritten to those names, and the addon and each copy get the RUNPATH $ORIGIN. So the
addon loads its own copies wherever the package is, and a process that already loaded a system
copy of one of them (Node's own libssl, say) keeps both apart by name.

    bundle_libs.py ADDON OUTDIR [--patchelf PATH]
    bundle_libs.py --licenses-only ELF OUTDIR

Writes OUTDIR/<addon's name> and the libraries, and prints what it bundled with their sizes.
Either way OUTDIR/licenses/ gets the Debian copyright file (license texts) of the package each
bundled library came from; --licenses-only writes only those (make wheel adds them to the
wheel's ctxkeel.libs/, whose libraries auditwheel copied).
What it bundles is whatever the addon links today (libcurl and its dependencies, libcjson while
the core still uses it), not a list written here.
"""

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys

# glibc and the dynamic loader: present on every glibc system, and never to be copied.
SYSTEM = {
    "linux-vdso.so.1", "ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libdl.so.2",
    "libpthread.so.0", "librt.so.1", "libresolv.so.2", "libutil.so.1", "libnsl.so.1",
    "libanl.so.1",
}


def resolved(path):
    """{soname: path} of every library `ldd` resolves for `path` (its whole closure)."""
    out = subprocess.run(["ldd", path], check=True, capture_output=True, text=True).stdout
    libs = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (not found|\S+)", line)
        if not m:
            continue
        if m.group(2) == "not found":
            sys.exit("bundle_libs: %s needs %s, which ldd cannot find" % (path, m.group(1)))
        libs[m.group(1)] = m.group(2)
    return libs


def hashed_name(soname, path):
    """libcurl.so.4 -> libcurl-1a2b3c4d.so.4, from the file's contents."""
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:8]
    stem, dot, rest = soname.partition(".so")
    return "%s-%s%s%s" % (stem, digest, dot, rest)


def licenses(libs, outdir):
    """Copies the Debian copyright file of each library's package into outdir/licenses/."""
    target = os.path.join(outdir, "licenses")
    os.makedirs(target, exist_ok=True)
    packages = set()
    for path in libs.values():
        real = os.path.realpath(path)
        # With merged /usr, dpkg may know the file under /lib rather than /usr/lib.
        for candidate in (real, real[4:] if real.startswith("/usr/") else path, path):
            owner = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
            if owner.returncode == 0:
                break
        if owner.returncode != 0:
            sys.exit("bundle_libs: no Debian package owns %s: its license is unknown" % path)
        packages.add(owner.stdout.split(":")[0])
    for package in sorted(packages):
        shutil.copyfile("/usr/share/doc/%s/copyright" % package,
                        os.path.join(target, "%s.copyright" % package))
    print("licenses: %d packages (%s)" % (len(packages), ", ".join(sorted(packages))))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("addon")
    parser.add_argument("outdir")
    parser.add_argument("--patchelf", default=shutil.which("patchelf") or "patchelf")
    parser.add_argument("--licenses-only", action="store_true")
    args = parser.parse_args()
    libs = {name: path for name, path in resolved(args.addon).items() if name not in SYSTEM}
    if args.licenses_only:
        # Only the libraries that were bundled there (auditwheel leaves out its policy's); it
        # names a copy of libldap-2.5.so.0 libldap-2-<hash>.5.so.0, cutting at the first dot.
        present = os.listdir(args.outdir) if os.path.isdir(args.outdir) else []
        libs = {name: path for name, path in libs.items()
                if any(f.startswith(name.split(".")[0] + "-") for f in present)}
        licenses(libs, args.outdir)
        return
    licenses(libs, args.outdir)

    def patchelf(*argv):
        subprocess.run([args.patchelf, *argv], check=True)

    os.makedirs(args.outdir, exist_ok=True)
    names = {name: hashed_name(name, path) for name, path in libs.items()}
    addon = os.path.join(args.outdir, os.path.basename(args.addon))
    shutil.copyfile(args.addon, addon)
    copies = [addon]
    for name, path in sorted(libs.items()):
        copy = os.path.join(args.outdir, names[name])
        shutil.copyfile(os.path.realpath(path), copy)
        os.chmod(copy, 0o755)
        patchelf("--set-soname", names[name], copy)
        copies.append(copy)
    for copy in copies:
        needed = subprocess.run([args.patchelf, "--print-needed", copy], check=True,
                                capture_output=True, text=True).stdout.split()
        for name in needed:
            if name in names:
                patchelf("--replace-needed", name, names[name], copy)
        patchelf("--set-rpath", "$ORIGIN", "--force-rpath", copy)
    # Every library of the closure must now come from outdir (or be glibc's).
    for name, path in resolved(addon).items():
        if name not in SYSTEM and os.path.dirname(os.path.realpath(path)) != os.path.realpath(
                args.outdir):
            sys.exit("bundle_libs: %s still resolves %s from %s" % (addon, name, path))
    total = 0
    for copy in copies:
        size = os.path.getsize(copy)
        total += size
        print("%9d  %s" % (size, os.path.basename(copy)))
    print("%9d  in all, %d libraries bundled" % (total, len(copies) - 1))


if __name__ == "__main__":
    main()
