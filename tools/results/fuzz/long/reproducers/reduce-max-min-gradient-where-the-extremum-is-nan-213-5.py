"""lax_fuzz reproducer (reduce_max/min gradient where the extremum is NaN).

convert(f, enable_xla=False) vs jax.jit, grad1 check, nan: 1 non-finite element(s) differ; first at (0, 0, 0): got nan, expected 0
Run: python {this file} (prints both results and the contract's verdict).
"""
import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf
from jax import lax

import jax2tf_native
from tf_ops import exactness

jax.config.update("jax_enable_x64", True)
inf, nan = np.inf, np.nan


def complex_array(real, imag):
    z = np.empty(real.shape, np.result_type(real.dtype, np.complex64))
    z.real, z.imag = real, imag
    return z


def wide(x):  # magnitudes (for the contract's scale), in the widest float enabled
    return jnp.abs(x).astype(jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)


def f(x1):
    v3 = lax.reduce_min(x1, ())
    return (v3,)


def f_scale(x1):
    v3 = lax.reduce_min(x1, ())
    return (None,)


args = [
    np.array([[[nan]]], np.float32),  # x1
]
FLOATS = [0]  # the arguments derivatives are taken for
KEEP = [0]  # the float32/64 results


def g(*xs):  # f of its float arguments, the others fixed
    full = list(args)
    for i, x in zip(FLOATS, xs):
        full[i] = x
    outs = f(*full)
    return tuple(outs[i] for i in KEEP)


primals = [args[i] for i in FLOATS]
tangents = [
    np.array([[[0.25]]], np.float32),
]
cts = [
    np.array([[[-0.25]]], np.float32),
]
cts2 = [
    np.array([[[0.75]]], np.float32),
]
first = lambda *xs: jax.vjp(g, *xs)[1](tuple(cts))
want = jax.jit(first)(*primals)
converted = jax2tf_native.convert(g, enable_xla=False)
xs = [tf.constant(p) for p in primals]
with tf.GradientTape() as outer:
    outer.watch(xs)
    with tf.GradientTape() as inner:
        inner.watch(xs)
        outs = converted(*xs)
    grads = inner.gradient(list(outs), xs, output_gradients=[tf.constant(c) for c in cts])
    grads = [tf.zeros_like(x) if d is None else d for d, x in zip(grads, xs)]
got = [d.numpy() for d in grads]
for w, g_ in zip(want, got):
    w = np.asarray(w)
    print('jax:', w)
    print('converted:', g_)
    scale = float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0))
    print(exactness.compare(g_, w, exactness.tolerance('derivative'), scale).detail or 'equal under the contract')
