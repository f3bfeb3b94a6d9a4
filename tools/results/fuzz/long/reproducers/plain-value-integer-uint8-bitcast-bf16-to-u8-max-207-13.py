"""lax_fuzz reproducer (plain value integer uint8: bitcast_bf16_to_u8+max).

convert(f, enable_xla=False) vs jax.jit, value check, integer: 1 element(s) differ; first at (0, 0, 1): got 127, expected 255
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


def f(x0):
    v0 = lax.max(x0, x0)
    v3 = lax.bitcast_convert_type(v0, jnp.uint8)
    return (v3,)


def f_scale(x0):
    v0 = lax.max(x0, x0)
    v3 = lax.bitcast_convert_type(v0, jnp.uint8)
    return (None,)


args = [
    np.array([[nan]], jnp.bfloat16),  # x0
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
