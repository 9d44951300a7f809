"""setup.py's build bundles the library and the compile worker beside it (kvtune/lib/), where the
library looks for the worker when tuning (core/compile_workers.h)."""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.dirname(HERE)


def library_path():
    env = os.environ.get("KVTUNE_LIBRARY")
    if env:
        return env
    path = os.path.join(os.path.dirname(PACKAGE), "build", "libkvtune.so")
    return path if os.path.exists(path) else None


def test_build_bundles_the_library_and_the_compile_worker(tmp_path):
    library = library_path()
    if library is None or not os.path.exists(library):
        pytest.skip("no libkvtune.so built")
    worker = os.path.join(os.path.dirname(os.path.realpath(library)), "kvtune-compile-worker")
    if not os.path.exists(worker):
        pytest.skip("no kvtune-compile-worker beside the library")
    env = dict(os.environ, KVTUNE_LIBRARY=library)
    subprocess.run([sys.executable, "setup.py", "-q", "build", "--build-base", str(tmp_path / "base"), "build_py",
                    "--build-lib", str(tmp_path / "lib")], cwd=PACKAGE, env=env, check=True, capture_output=True)
    bundled = tmp_path / "lib" / "kvtune" / "lib"
    assert (bundled / "libkvtune.so").is_file()
    assert (bundled / "kvtune-compile-worker").is_file()
    assert os.access(bundled / "kvtune-compile-worker", os.X_OK)
    # The bundled worker is the helper, not a stray file: asked directly, it says what it is.
    done = subprocess.run([str(bundled / "kvtune-compile-worker")], capture_output=True, text=True)
    assert done.returncode == 2 and "kvtune-compile-worker" in done.stderr
