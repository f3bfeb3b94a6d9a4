"""check_grads_tf over a model zoo: TF tape gradients to order 2 vs JAX and finite differences."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax2tf_native


def _rng():
    return np.random.default_rng(42)


def _normal(rng, *shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def mlp_case():
    rng = _rng()
    params = {"w1": _normal(rng, 6, 16), "b1": _normal(rng, 16), "w2": _normal(rng, 16, 3)}
    fun = lambda p, x: jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"]
    return fun, [params, _normal(rng, 5, 6)], [None, "b, ..."]


def _cnn(pool):
    def fun(kernel, images):
        y = jax.lax.conv_general_dilated(images, kernel, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = jnp.tanh(y)
        if pool == "max":
            y = jax.lax.reduce_window(y, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                                      "VALID")
        else:
            y = jax.lax.reduce_window(y, 0.0, jax.lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        return jnp.mean(y, axis=(1, 2))
    return fun


def cnn_case():
    # Average pooling: max pooling is not smooth, so finite differences of its second
    # derivative flip where two window values are within the step (see the max-pool test).
    rng = _rng()
    return _cnn("avg"), [_normal(rng, 3, 3, 1, 4), _normal(rng, 2, 8, 8, 1)], \
        [None, "(b, 8, 8, 1)"]


def attention_case():
    rng = _rng()

    def fun(p, x):
        q, k, v = x @ p["q"], x @ p["k"], x @ p["v"]
        weights = jax.nn.softmax(q @ jnp.swapaxes(k, -1, -2) / np.sqrt(8.0), axis=-1)
        y = weights @ v + x
        mean = y.mean(-1, keepdims=True)
        return (y - mean) / jnp.sqrt(((y - mean) ** 2).mean(-1, keepdims=True) + 1e-5)

    params = {n: _normal(rng, 8, 8) for n in ("q", "k", "v")}
    return fun, [params, _normal(rng, 2, 5, 8)], [None, "(b, s, 8)"]


def scan_rnn_case():
    rng = _rng()

    def fun(w, xs):
        def step(h, x):
            h = jnp.tanh(h @ w["h"] + x @ w["x"])
            return h, h.sum()
        h, ys = jax.lax.scan(step, jnp.zeros((xs.shape[1], 4), xs.dtype), xs)
        return h, ys

    return fun, [{"h": _normal(rng, 4, 4), "x": _normal(rng, 3, 4)}, _normal(rng, 6, 2, 3)], \
        [None, "(t, b, 3)"]


def fori_loop_case():
    rng = _rng()
    # A while loop with a static trip count: JAX lowers it to a scan, which is differentiable.
    fun = lambda a, x: jax.lax.fori_loop(0, 4, lambda i, c: jnp.sin(c @ a) + c, x)
    return fun, [_normal(rng, 3, 3), _normal(rng, 2, 3)], [None, "b, ..."]


def sort_cumsum_gather_scatter_case():
    rng = _rng()

    def fun(x, idx):
        s = jnp.sort(x, axis=-1)
        c = jnp.cumsum(s * s, axis=-1)
        g = jnp.take(c, idx, axis=-1)
        return jnp.zeros_like(x).at[:, idx].add(g * x[:, :3])

    return fun, [_normal(rng, 3, 5), np.array([4, 0, 2], np.int32)], ["b, ...", None]


def pytree_case():
    rng = _rng()

    def fun(inputs, scale):
        (a, b), c = inputs["pair"], inputs["c"]
        return {"sum": a * b + jnp.sin(c) * scale, "prod": [a @ b.T, c ** 2]}

    inputs = {"pair": (_normal(rng, 2, 3), _normal(rng, 2, 3)), "c": _normal(rng, 2, 3)}
    return fun, [inputs, np.float32(1.5)], None


CASES = {"mlp": mlp_case, "cnn": cnn_case, "attention": attention_case,
         "scan_rnn": scan_rnn_case, "fori_loop": fori_loop_case,
         "sort_cumsum_gather_scatter": sort_cumsum_gather_scatter_case, "pytree": pytree_case}


@pytest.mark.parametrize("name", sorted(CASES))
def test_model_zoo_second_order(name):
    fun, args, poly = CASES[name]()
    rows = jax2tf_native.check_grads_tf(fun, args, order=2, polymorphic_shapes=poly)
    orders = {(r.order, r.reference) for r in rows}
    assert orders == {(1, "jax"), (2, "jax"), (1, "numeric"), (2, "numeric")}
    assert all(r.max_error <= r.tolerance for r in rows)


def test_max_pool_cnn():
    rng = _rng()
    args = [_normal(rng, 3, 3, 1, 4), _normal(rng, 2, 8, 8, 1)]
    fun = _cnn("max")
    jax2tf_native.check_grads_tf(fun, args, order=1, polymorphic_shapes=[None, "(b, 8, 8, 1)"])
    jax2tf_native.check_grads_tf(fun, args, order=2, numeric=False)


def test_recompute_mode_second_order():
    fun, args, poly = attention_case()
    rows = jax2tf_native.check_grads_tf(fun, args, order=2, polymorphic_shapes=poly,
                                        gradient_mode="recompute", numeric=False)
    assert {r.argument for r in rows} == {"args[0]['k']", "args[0]['q']", "args[0]['v']",
                                          "args[1]"}


def test_wrong_gradient_is_caught_and_named():
    @jax.custom_vjp
    def bad_square(x):
        return x * x

    bad_square.defvjp(lambda x: (x * x, x), lambda x, ct: (3.0 * x * ct,))  # should be 2x
    args = [np.array([0.5, 1.0, -2.0], np.float32), np.float32(2.0)]
    with pytest.raises(jax2tf_native.GradientCheckError,
                       match=r"order-1 gradient w\.r\.t\. args\[0\] differs from numeric"):
        jax2tf_native.check_grads_tf(lambda x, s: bad_square(x) * s, args, order=1)


def test_bad_order():
    with pytest.raises(ValueError, match="order must be an int >= 1"):
        jax2tf_native.check_grads_tf(jnp.sin, [np.ones(2, np.float32)], order=0)
