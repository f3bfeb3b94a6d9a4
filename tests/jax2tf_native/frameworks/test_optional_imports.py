"""The frameworks stay optional: our packages import none of them until a model of that
framework is given."""
import json
import subprocess
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[3]

_CODE = """
import json, sys
import jax2tf_native
after_package = sorted(m for m in sys.modules if m.split(".")[0] in ("flax", "equinox", "keras"))
import saved_model_tools
jax2tf_native.convert, jax2tf_native.convert_model, jax2tf_native.frameworks
saved_model_tools.save, saved_model_tools.save_model
import jax.numpy as jnp, numpy as np
jax2tf_native.convert(jnp.sin)(np.ones(2, np.float32))
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("flax", "equinox")
                or m.startswith(("jax2tf_native.frameworks.", "jax2tf_native.keras_layer")))
print(json.dumps({"after_package": after_package, "loaded": loaded}))
"""


def test_front_doors_import_no_framework():
    proc = subprocess.run([sys.executable, "-c", _CODE], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["after_package"] == []
    # Only the framework-free dispatch module; no adapter, no flax/equinox.
    assert result["loaded"] == ["jax2tf_native.frameworks.functional"]
