"""lax_fuzz reproducer (1/x runs TF's approximate vectorized Reciprocal).

convert(f, enable_xla=False) vs jax.jit, value check, value: 1 element(s) outside the bound; worst at (2, 0, 0): got 632.809, expected 632.809 (1 ulps)
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


def f(x1):
    v0 = lax.imag(x1)
    v2 = lax.div(jnp.ones_like(v0), v0)
    return (v2,)


def f_scale(x1):
    v0 = lax.imag(x1)
    v2 = lax.div(jnp.ones_like(v0), v0)
    return (None,)


args = [
    complex_array(np.array([[[1.0, 1.0, 1.0]], [[1.0, 1.0, 1.0]], [[88.75, 1.0, 1.0]], [[1.0, 1.0, 1.0]]], np.float32), np.array([[[0.0, 0.0, 0.0]], [[0.0, 0.0, 0.0]], [[0.0015802564, 0.0, 0.0]], [[0.0, 0.0, 0.0]]], np.float32)),  # x1
]
converted = jax2tf_native.convert(f, enable_xla=False)
got = [t.numpy() for t in converted(*[tf.constant(a) for a in args])]
want = jax.jit(f)(*args)
scales = jax.jit(f_scale)(*args)
families = [()]
for w, g, s, fam in zip(want, got, scales, families):
    w, g = np.asarray(w), np.asarray(g)
    print('jax.jit:', w)
    print('converted:', g)
    print(exactness.compare(g, w, exactness.tolerance(*fam), None if s is None else np.asarray(s)).detail or 'equal under the contract')
