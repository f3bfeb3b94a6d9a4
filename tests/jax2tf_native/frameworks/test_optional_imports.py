"""The frameworks stay optional: our packages import none of them until a model of that
framework is given. And our errors import cheaply: no linear algebra (one child process for
both)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[3]

_CODE = """
import json, sys
import jax2tf_native
after_package = sorted(m for m in sys.modules if m.split(".")[0] in ("flax", "equinox", "keras"))
import jax2tf_native.errors
after_errors = sorted(m for m in sys.modules if m.split(".")[0] in ("jax2tf_native", "tf_ops"))
import saved_model_tools
jax2tf_native.convert, jax2tf_native.convert_model, jax2tf_native.frameworks
saved_model_tools.save, saved_model_tools.save_model
import jax.numpy as jnp, numpy as np
jax2tf_native.convert(jnp.sin)(np.ones(2, np.float32))
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("flax", "equinox")
                or m.startswith(("jax2tf_native.frameworks.", "jax2tf_native.keras_layer")))
print(json.dumps({"after_package": after_package, "after_errors": after_errors,
                  "loaded": loaded}))
"""


@pytest.fixture(scope="module")
def result():
    proc = subprocess.run([sys.executable, "-c", _CODE], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_errors_import_no_linear_algebra(result):
    # `except jax2tf_native.errors.X` must not load 2.7k lines of portable linear algebra
    # (NonPortableLinalgError is defined in errors.py, not in jax2tf_native.linalg).
    loaded = result["after_errors"]
    assert "jax2tf_native.errors" in loaded
    linear_algebra = ("jax2tf_native.linalg", "jax2tf_native.lapack_rewrite")
    assert not [m for m in loaded if m.startswith(linear_algebra)], loaded


def test_front_doors_import_no_framework(result):
    assert result["after_package"] == []
    # Only the framework-free dispatch module; no adapter, no flax/equinox.
    assert result["loaded"] == ["jax2tf_native.frameworks.functional"]
