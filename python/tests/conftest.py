"""Shared set-up of the Python tests.

The package is imported from this source tree (python/), not from an installed copy, unless
KVTUNE_TEST_INSTALLED=1. The library comes from $KVTUNE_LIBRARY, else the build tree (build/).
GPU tests run on a context with an in-memory cache and the heuristic policy unless KVTUNE_POLICY
is set (KVTUNE_POLICY=tune exercises tuning too, at the cost of minutes).
"""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if os.environ.get("KVTUNE_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.dirname(HERE))


def torch_status():
    """(torch module or None, reason it cannot run the torch tests or "")."""
    try:
        import torch
    except ImportError:
        return None, "torch is not installed"
    return torch, ""


def gpu_reason():
    """"" when torch >= 2.4 with a CUDA device is here, else why the GPU tests skip."""
    torch, why = torch_status()
    if torch is None:
        return why
    from kvtune.torch import TORCH_VERSION
    if TORCH_VERSION < (2, 4):
        return f"needs torch >= 2.4 (torch.library.custom_op), found {torch.__version__}"
    if not torch.cuda.is_available():
        return f"needs a CUDA device (torch {torch.__version__} sees none)"
    return ""


@pytest.fixture(scope="session")
def kvtune_context():
    """A context for the GPU tests (in-memory cache; the heuristic policy unless KVTUNE_POLICY)."""
    import kvtune
    policy = os.environ.get("KVTUNE_POLICY") or "heuristic"
    context = kvtune.Context(policy=policy, cache_path=os.environ.get("KVTUNE_CACHE", ""))
    kvtune.set_context(context)
    yield context
    kvtune.set_context(None)
