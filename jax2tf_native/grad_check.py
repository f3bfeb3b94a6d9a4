"""`check_grads_tf`: TF tape gradients of a converted function vs JAX and vs finite differences.

For order k, the checked quantity is the k-th derivative contracted with fixed random vectors:
`s_0(x) = sum_j <c_j, f(x)_j>` over the float outputs, `g_k = d s_{k-1} / dx`, and
`s_k = sum_i <v_ki, g_k,i>`. TF computes `g_k` with nested `tf.GradientTape`s through the
converted function; JAX with nested `jax.grad` of the same contraction. The numeric check runs
`tf.test.compute_gradient` on `t -> s_{k-1}(x + t * d_i)` for a random direction `d_i` of each
argument: two evaluations per argument, whatever its size.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf

from jax2tf_native import flat_function
from jax2tf_native.converter import convert


class GradientCheckError(AssertionError):
    """A TF gradient disagrees with JAX's or with finite differences beyond tolerance."""


@dataclasses.dataclass(frozen=True)
class GradientCheckRow:
    """One compared quantity: `argument` at derivative `order`, against `reference`."""
    argument: str
    order: int
    reference: str        # "jax" or "numeric"
    max_error: float
    tolerance: float


_TOLERANCES = {  # (vs JAX, vs finite differences), relative to the reference's magnitude
    np.dtype(np.float16): (1e-2, 1e-1),
    np.dtype(jnp.bfloat16): (2e-2, 1e-1),
    np.dtype(np.float32): (2e-5, 2e-2),
    np.dtype(np.float64): (1e-10, 1e-5),
    np.dtype(np.complex64): (2e-5, 2e-2),
    np.dtype(np.complex128): (1e-10, 1e-5),
}


def _inner(a, b, lib):
    """Real part of <a, b>, in JAX (lib=jnp) or TF (lib=tf.math)."""
    if lib is jnp:
        return jnp.sum(jnp.real(a * b))
    product = a * b
    return tf.reduce_sum(tf.math.real(product) if product.dtype.is_complex else product)


def check_grads_tf(fun: Callable, args: Sequence[Any], *, order: int = 2,
                   polymorphic_shapes=None, rtol: float | None = None,
                   atol: float | None = None, gradient_mode: str = "residuals",
                   numeric: bool = True, seed: int = 0) -> list[GradientCheckRow]:
    """Checks TF gradients of `convert(fun)` up to `order` against JAX and finite differences.

    Args:
      fun: the JAX function; positional arguments only (pytrees allowed).
      args: example arguments (numpy arrays or pytrees of them).
      order: highest derivative order to check (1 = gradients, 2 = Hessian-vector products).
      polymorphic_shapes: passed to `convert`.
      rtol, atol: override the dtype's tolerances (relative to the reference's magnitude).
      gradient_mode: passed to `convert`.
      numeric: whether to compare with `tf.test.compute_gradient` too.
      seed: seed of the random contraction vectors and directions.

    Returns:
      One `GradientCheckRow` per (argument, order, reference), all within tolerance.

    Raises:
      GradientCheckError: naming the argument path, the order, the reference and the max error.

    Example:
        >>> rows = check_grads_tf(lambda w, x: jnp.tanh(x @ w).sum(),
        ...                       [np.ones((3, 2), np.float32), np.ones((4, 3), np.float32)],
        ...                       order=2)
        >>> sorted({(r.argument, r.order, r.reference) for r in rows})[:2]
        [('args[0]', 1, 'jax'), ('args[0]', 1, 'numeric')]
        >>> all(r.max_error <= r.tolerance for r in rows)
        True
    """
    if not isinstance(order, int) or order < 1:
        raise ValueError(f"order must be an int >= 1, got {order!r}.")
    args = tuple(args)
    leaves_with_path, treedef = jax.tree_util.tree_flatten_with_path(args)
    paths = ["args" + jax.tree_util.keystr(p) for p, _ in leaves_with_path]
    leaves = [np.asarray(leaf) for _, leaf in leaves_with_path]
    diff = [i for i, leaf in enumerate(leaves) if flat_function.is_differentiable(leaf.dtype)]
    if not diff:
        raise ValueError("check_grads_tf needs at least one float or complex argument; got "
                         f"dtypes {[str(l.dtype) for l in leaves]}.")
    rng = np.random.default_rng(seed)
    random_like = lambda x: _random(rng, np.shape(x), np.asarray(x).dtype)
    out_shapes = jax.tree_util.tree_leaves(jax.eval_shape(fun, *args))
    out_vectors = [random_like(np.zeros(o.shape, o.dtype)) if flat_function.is_differentiable(o.dtype)
                   else None for o in out_shapes]
    level_vectors = [[random_like(leaves[i]) for i in diff] for _ in range(order)]
    directions = [random_like(leaves[i]) for i in diff]

    f_tf = convert(fun, polymorphic_shapes=polymorphic_shapes,
                                  gradient_mode=gradient_mode)

    def unflatten(flat):
        return jax.tree_util.tree_unflatten(treedef, flat)

    # JAX reference: s_k as a function of the differentiable leaves.
    def jax_scalar(k, diff_values):
        if k == 0:
            full = list(leaves)
            for i, v in zip(diff, diff_values):
                full[i] = v
            outs = jax.tree_util.tree_leaves(fun(*unflatten(full)))
            return sum(_inner(o, c, jnp) for o, c in zip(outs, out_vectors) if c is not None)
        grads = jax.grad(lambda dv: jax_scalar(k - 1, dv))(list(diff_values))
        return sum(_inner(g, v, jnp) for g, v in zip(grads, level_vectors[k - 1]))

    def tf_scalar(k, diff_values):
        if k == 0:
            full = [tf.constant(l) for l in leaves]
            for i, v in zip(diff, diff_values):
                full[i] = v
            outs = jax.tree_util.tree_leaves(f_tf(*unflatten(full)))
            return tf.add_n([_inner(o, tf.constant(c), tf.math) for o, c in zip(outs, out_vectors)
                             if c is not None])
        grads = tf_grads(k, diff_values)
        return tf.add_n([_inner(g, tf.constant(v), tf.math)
                         for g, v in zip(grads, level_vectors[k - 1])])

    def tf_grads(k, diff_values):
        with tf.GradientTape() as tape:
            tape.watch(diff_values)
            s = tf_scalar(k - 1, diff_values)
        grads = tape.gradient(s, diff_values)
        return [tf.zeros_like(v) if g is None else g for g, v in zip(grads, diff_values)]

    diff_np = [leaves[i] for i in diff]
    rows: list[GradientCheckRow] = []
    for k in range(1, order + 1):
        want = jax.grad(lambda dv: jax_scalar(k - 1, dv))(list(diff_np))
        got = tf_grads(k, [tf.constant(v) for v in diff_np])
        for pos, i in enumerate(diff):
            tol = _tolerance(leaves[i].dtype, 0, rtol, atol)
            rows.append(_compare(paths[i], k, "jax", got[pos].numpy(), np.asarray(want[pos]), tol))
        if numeric:
            for pos, i in enumerate(diff):
                theoretical, numerical = _directional(tf_scalar, k - 1, diff_np, pos,
                                                      directions[pos])
                tol = _tolerance(leaves[i].dtype, 1, rtol, atol)
                rows.append(_compare(paths[i], k, "numeric", theoretical, numerical, tol))
    return rows


def _directional(tf_scalar, k, diff_np, pos, direction):
    """(tape, finite-difference) derivative of t -> s_k(x + t*d) at t=0, via compute_gradient."""
    dtype = diff_np[pos].dtype
    real_dtype = np.finfo(dtype).dtype if dtype.kind != "c" else np.dtype(np.float32 if dtype == np.complex64 else np.float64)

    def along(t):
        values = [tf.constant(v) for v in diff_np]
        values[pos] = values[pos] + tf.cast(t, values[pos].dtype) * tf.constant(direction)
        return tf_scalar(k, values)

    t0 = tf.zeros((), tf.dtypes.as_dtype(real_dtype if real_dtype != np.float16 else np.float32))
    delta = 1e-2 if real_dtype in (np.float16, np.dtype(jnp.bfloat16)) else (
        1e-3 if real_dtype == np.float32 else 1e-6)
    theoretical, numerical = tf.test.compute_gradient(along, [t0], delta=delta)
    return np.asarray(theoretical[0]).ravel(), np.asarray(numerical[0]).ravel()


def _random(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _tolerance(dtype, which: int, rtol, atol) -> tuple[float, float]:
    default = _TOLERANCES.get(np.dtype(dtype), (1e-5, 1e-2))[which]
    return (rtol if rtol is not None else default, atol if atol is not None else default)


def _compare(path, order, reference, got, want, tol) -> GradientCheckRow:
    got, want = np.asarray(got, np.complex128), np.asarray(want, np.complex128)
    rtol, atol = tol
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    error = float(np.max(np.abs(got - want))) / scale if want.size else 0.0
    bound = rtol + atol / scale
    if not np.isfinite(error) or error > bound:
        raise GradientCheckError(
            f"check_grads_tf: order-{order} gradient w.r.t. {path} differs from {reference}: "
            f"max error {error:.3g} (relative to max |{reference}| {scale:.3g}) > tolerance "
            f"{bound:.3g}. Pass rtol=/atol= to relax if this is expected numerical noise.")
    return GradientCheckRow(path, order, reference, error, bound)
