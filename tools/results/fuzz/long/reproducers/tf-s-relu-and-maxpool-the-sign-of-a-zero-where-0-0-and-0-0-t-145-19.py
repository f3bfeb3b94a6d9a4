"""lax_fuzz reproducer (TF's Relu and MaxPool: the sign of a zero where -0.0 and +0.0 tie).

convert(f, enable_xla=False) vs jax.jit, value check, signed_zero: 1 signed-zero element(s) differ; first at (0, 2): got -0, expected 0
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


def f(x0):
    v0 = lax.max(x0, np.array(0, np.float32))
    return (v0,)


def f_scale(x0):
    v0 = lax.max(x0, np.array(0, np.float32))
    return (None,)


args = [
    np.array([[1.0, 1.0, -0.0, 1.0, 1.0]], np.float32),  # x0
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
