"""Installs the pure-Python package and, when one is found, a copy of libkvtune.so inside it
(kvtune/lib/libkvtune.so, with the kvtune-compile-worker beside it), so that the installed package
needs no environment variable.

The library is taken from $KVTUNE_LIBRARY, else from $KVTUNE_BUILD_DIR, else from ../build (the
build tree next to this folder). Without one the package installs anyway and finds the library at
run time ($KVTUNE_LIBRARY, the build tree, the system path: see kvtune/_capi.py).

  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j
  pip install --no-build-isolation --no-deps ./python
"""

import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def find_library():
    env = os.environ.get("KVTUNE_LIBRARY")
    if env:
        return env if os.path.exists(env) else None
    build = os.environ.get("KVTUNE_BUILD_DIR") or os.path.join(os.path.dirname(HERE), "build")
    # the versioned file itself, not the symlinks: wheels store links as copies anyway
    for pattern in ("libkvtune.so.*.*.*", "libkvtune.so.*", "libkvtune.so"):
        found = sorted(p for p in glob.glob(os.path.join(build, pattern)) if os.path.isfile(p))
        if found:
            return os.path.realpath(found[-1])
    return None


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        library = find_library()
        if library is None:
            print("kvtune: no libkvtune.so found (KVTUNE_LIBRARY, KVTUNE_BUILD_DIR, ../build); installing the "
                  "package without it: it will look for the library at run time")
            return
        target = os.path.join(self.build_lib, "kvtune", "lib")
        os.makedirs(target, exist_ok=True)
        shutil.copyfile(library, os.path.join(target, "libkvtune.so"))
        print(f"kvtune: bundled {library} as kvtune/lib/libkvtune.so")
        # The helper process tuning compiles in; the library looks for it in its own folder.
        worker = os.path.join(os.path.dirname(library), "kvtune-compile-worker")
        if os.path.isfile(worker):
            shutil.copy2(worker, os.path.join(target, "kvtune-compile-worker"))
            print(f"kvtune: bundled {worker} as kvtune/lib/kvtune-compile-worker")


setup(cmdclass={"build_py": BuildPyWithLibrary})
