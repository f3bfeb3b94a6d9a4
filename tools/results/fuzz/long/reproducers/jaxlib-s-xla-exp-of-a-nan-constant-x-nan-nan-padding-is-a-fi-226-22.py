"""lax_fuzz reproducer (jaxlib's XLA: exp of a NaN constant (x + NaN, NaN padding) is a finite value, not NaN).

convert(f, enable_xla=False) vs jax.jit, value check, nan: 4 non-finite element(s) differ; first at (0, 0): got nan, expected 1.83671e-40
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
    v0 = lax.pad(x1, jnp.array(nan, x1.dtype), ((2, 0, 0), (0, -2, 0)))
    v3 = lax.cosh(v0)
    return (v3,)


def f_scale(x1):
    v0 = lax.pad(x1, jnp.array(nan, x1.dtype), ((2, 0, 0), (0, -2, 0)))
    v3 = lax.cosh(v0)
    return (None,)


args = [
    np.array([[1.0, 1.0, 1.0, 1.0]], jnp.bfloat16),  # x1
]
converted = jax2tf_native.convert(f, enable_xla=False)
got = [t.numpy() for t in converted(*[tf.constant(a) for a in args])]
want = jax.jit(f)(*args)
scales = jax.jit(f_scale)(*args)
families = [('libm',)]
for w, g, s, fam in zip(want, got, scales, families):
    w, g = np.asarray(w), np.asarray(g)
    print('jax.jit:', w)
    print('converted:', g)
    print(exactness.compare(g, w, exactness.tolerance(*fam), None if s is None else np.asarray(s)).detail or 'equal under the contract')
