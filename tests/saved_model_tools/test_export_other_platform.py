"""`jax2tf-native export --platforms tpu` on a CPU host writes the model and exits 0: verify
cannot run a TPU module here, checks its loads and signatures instead, and export says so (it
exited 1 before, as if the model were wrong)."""
import sys

import numpy as np

from saved_model_tools import cli, manifest

USER_MODULE = '''
import jax.numpy as jnp

def predict(params, x):
    return jnp.tanh(x @ params["w"])
'''


def test_export_for_tpu_on_a_cpu_host_exits_0_and_says_why_nothing_ran(
        tmp_path, monkeypatch, capsys):
    (tmp_path / "tpu_user_model.py").write_text(USER_MODULE)
    np.savez(tmp_path / "params.npz", w=np.eye(3, dtype=np.float32))
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "m" / "1"
    code = cli.main(["export", "tpu_user_model:predict", "--params", str(tmp_path / "params.npz"),
                     "--input", "x:float32[b,3]", "--out", str(out), "--platforms", "tpu",
                     "--no-gradient"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "verify without JAX: not-runnable-here" in printed
    assert "jax2tf-native verify" in printed
    assert manifest.read(out).platforms == ("tpu",)
    sys.modules.pop("tpu_user_model", None)
