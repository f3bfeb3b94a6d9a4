"""lax_fuzz reproducer (TF's XLA: max/min drop NaN (fast min/max)).

convert(f) (XlaCallModule) vs jax.jit, value check, nan: 1 non-finite element(s) differ; first at (7, 1, 0, 0): got -0.0122452, expected nan
Run: python {this file} (prints both results and the contract's verdict).
"""
import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf
from jax import lax

import jax2tf_native
from tf_ops import exactness

inf, nan = np.inf, np.nan


def complex_array(real, imag):
    z = np.empty(real.shape, np.result_type(real.dtype, np.complex64))
    z.real, z.imag = real, imag
    return z


def wide(x):  # magnitudes (for the contract's scale), in the widest float enabled
    return jnp.abs(x).astype(jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)


def f(x1, x2, x3):
    v0 = lax.digamma(x1)
    v1 = lax.clamp(x2, v0, x3)
    return (v1,)


def f_scale(x1, x2, x3):
    v0 = lax.digamma(x1)
    m_v0 = 1 + wide(lax.digamma(x1))
    v1 = lax.clamp(x2, v0, x3)
    m_v1 = jnp.broadcast_to(jnp.maximum(jnp.maximum(jnp.zeros_like(wide(x2)), m_v0), jnp.zeros_like(wide(x3))), (8, 2, 1, 2))
    return (m_v1,)


args = [
    np.array([[[[1.0, 1.0]], [[1.0, 1.0]]], [[[1.0, 1.0]], [[1.0, 1.0]]], [[[1.0, 1.0]], [[1.0, 1.0]]], [[[1.0, 1.0]], [[1.0, 1.0]]], [[[1.0, 1.0]], [[1.0, 1.0]]], [[[1.0, 1.0]], [[1.0, 1.0]]], [[[1.0, 1.0]], [[1.0, 1.0]]], [[[2.652, 2.652]], [[nan, -0.9453]]]], np.float16),  # x1
    np.array(-0.012245, np.float16),  # x2
    np.array(0.2983, np.float16),  # x3
]
converted = jax2tf_native.convert(f, enable_xla=True)
got = [t.numpy() for t in converted(*[tf.constant(a) for a in args])]
want = jax.jit(f)(*args)
scales = jax.jit(f_scale)(*args)
families = [('special',)]
for w, g, s, fam in zip(want, got, scales, families):
    w, g = np.asarray(w), np.asarray(g)
    print('jax.jit:', w)
    print('converted:', g)
    print(exactness.compare(g, w, exactness.tolerance(*fam), None if s is None else np.asarray(s)).detail or 'equal under the contract')
