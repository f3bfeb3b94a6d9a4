"""Functions the peer (jax2tf on JAX 0.10 / TF 2.21) cannot run because its StableHLO is newer
than TF reads: with us they run, eagerly and in tf.function, polymorphic too."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

import jax2tf_native
from tests.conftest import assert_tree_allclose

FUNCTIONS = {
    "erf": jax.lax.erf,
    "arcsin": jnp.arcsin,
    "arccos": jnp.arccos,
    "sinh": jnp.sinh,
    "cosh": jnp.cosh,
    "arcsinh": jnp.arcsinh,
    "arctanh": jnp.arctanh,
    "top_k": lambda x: jax.lax.top_k(x, 2),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_runs_where_the_peer_fails(name, rng):
    fun = FUNCTIONS[name]
    f_tf = jax2tf_native.convert(fun, polymorphic_shapes=["b, ..."])
    f_graph = tf.function(f_tf, autograph=False,
                          input_signature=[tf.TensorSpec([None, 5], tf.float32)])
    for batch in (1, 4):
        x = (rng.uniform(-0.9, 0.9, size=(batch, 5)) if name != "cosh"
             else rng.standard_normal((batch, 5))).astype(np.float32)
        want = jax.tree.map(np.asarray, fun(x))
        to_np = lambda t: jax.tree.map(lambda v: v.numpy(), t)
        assert_tree_allclose(to_np(f_tf(x)), want, rtol=2e-6, atol=2e-6)
        assert_tree_allclose(to_np(f_graph(x)), want, rtol=2e-6, atol=2e-6)


def test_the_peer_indeed_fails_on_erf():
    """Pins the premise: if a JAX/TF upgrade fixes the peer, this tells us."""
    from jax.experimental import jax2tf
    with pytest.raises(tf.errors.InvalidArgumentError, match="deserialize"):
        jax2tf.convert(jax.lax.erf)(tf.ones((2,)))
