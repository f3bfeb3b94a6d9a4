"""The README's workaround for a crash in TF 2.21's XLA CPU compiler holds.

TF's YNNPACK fusion pass segfaults compiling `((a @ a) @ (a @ a)).sum()` at 512x512 (jax2tf
alike). The README tells users to set `XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=`;
this runs that program in a child process with the flag and compares with JAX. If TF drops
the flag, the child fails on the unknown flag and this test says so.
"""
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np

_CHILD = textwrap.dedent("""
    import numpy as np, tensorflow as tf, jax.numpy as jnp
    import jax2tf_native
    a = np.load(__import__("sys").argv[1])
    f = jax2tf_native.convert(lambda a: ((a @ a) @ (a @ a)).sum(), with_gradient=False)
    print("RESULT", repr(float(f(tf.constant(a)).numpy())))
""")


def test_program_that_crashes_tf_xla_runs_with_the_documented_flag(tmp_path):
    a = (np.random.default_rng(0).random((512, 512), dtype=np.float32) / 512).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    env = dict(os.environ, XLA_FLAGS="--xla_cpu_experimental_ynn_fusion_type=",
               TF_CPP_MIN_LOG_LEVEL="2")
    child = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "a.npy")], env=env,
                           capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, (f"child exited {child.returncode} with the README's "
                                   f"XLA_FLAGS workaround:\n{child.stderr[-2000:]}")
    got = float(next(l for l in child.stdout.splitlines() if l.startswith("RESULT")).split()[1])
    want = float(jax.jit(lambda a: ((a @ a) @ (a @ a)).sum())(jnp.asarray(a)))
    np.testing.assert_allclose(got, want, rtol=1e-4)
