"""`gradient_ops.one_xla_cluster`: a training step's forward and backward ops become one XLA
program in a `tf.function` without `jit_compile`, through TF's private `Graph._attr_scope`
and TF's clustering of `_XlaCompile` ops. Both are pinned here: a TF upgrade that moves either fails these tests."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import tensorflow as tf

from tf_ops import gradient_ops


def test_attr_scope_marks_the_ops_built_inside_only():
    graph = tf.compat.v1.get_default_graph
    assert callable(getattr(tf.Graph, "_attr_scope", None)), "TF moved Graph._attr_scope"

    @tf.function(autograph=False)
    def f(x):
        with gradient_ops.one_xla_cluster():
            inside = tf.identity(x, name="inside")
        return tf.identity(inside, name="outside")

    ops = {op.name: op for op in
           f.get_concrete_function(tf.TensorSpec([2], tf.float32)).graph.get_operations()}
    assert ops["inside"].get_attr("_XlaCompile") is True
    assert "_XlaCompile" not in ops["outside"].node_def.attr
    assert graph is tf.compat.v1.get_default_graph  # nothing was replaced


def test_eagerly_nothing_is_marked():
    with gradient_ops.one_xla_cluster():
        y = tf.identity(tf.constant([1.0, 2.0]))
    assert y.numpy().tolist() == [1.0, 2.0]


_CHILD = """
import os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import jax, jax.numpy as jnp, numpy as np, tensorflow as tf
import jax2tf_native
fun = lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2)
w_np = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
x_np = np.linspace(0, 2, 8, dtype=np.float32).reshape(2, 4)
w = tf.Variable(w_np)
f = jax2tf_native.convert(fun)
square_in_tf = {square_in_tf}

@tf.function(autograph=False)
def step(x):
    with tf.GradientTape() as tape:
        y = f(w, x)
        if square_in_tf:
            y = y * y  # a TF op fed by the forward op, on the cotangent's path
    return y, tape.gradient(y, w)

y, g = step(tf.constant(x_np))
want = jax.grad(lambda w: fun(w, x_np) ** (2 if square_in_tf else 1))(w_np)
np.testing.assert_allclose(g.numpy(), want, rtol=1e-5, atol=1e-6)
print("ok")
"""


def _compiled_modules(tmp_path: Path, square_in_tf: bool) -> set[str]:
    """Runs the step in a child process that dumps what XLA compiles; the names of the
    modules TF compiled (JAX's own `jit_*` ones, for the reference values, left out)."""
    dump = tmp_path / "dump"
    env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={dump}")
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CHILD.format(square_in_tf=square_in_tf))],
        env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-3000:]
    names = {p.name.split(".")[1] for p in dump.iterdir() if p.name.startswith("module_")}
    return {name for name in names if not name.startswith("jit_")}


def test_training_step_in_a_plain_tf_function_is_one_xla_program(tmp_path):
    modules = _compiled_modules(tmp_path, square_in_tf=False)
    assert len(modules) == 1 and next(iter(modules)).startswith("cluster_"), modules


def test_a_tf_op_between_forward_and_backward_keeps_two_programs(tmp_path):
    # y * y needs the forward's output to make the backward's cotangent: one cluster would
    # form a cycle, so TF compiles the two apart (values still JAX's).
    modules = _compiled_modules(tmp_path, square_in_tf=True)
    assert len(modules) == 2, modules
