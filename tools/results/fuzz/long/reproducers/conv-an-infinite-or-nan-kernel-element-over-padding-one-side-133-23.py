"""lax_fuzz reproducer (conv: an infinite or NaN kernel element over padding: one side multiplies the padding's zeros (NaN), the other skips them).

convert(f, enable_xla=False) vs jax.jit, value check, nan: 3 non-finite element(s) differ; first at (0, 0, 0, 0): got -9.29543e+18, expected nan
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


def f(x1, x2):
    v0 = lax.conv_general_dilated(x1, x2, (1, 2), 'SAME', (1, 1), (1, 1), ('NHWC', 'HWIO', 'NHWC'), feature_group_count=1)
    return (v0,)


def f_scale(x1, x2):
    v0 = lax.conv_general_dilated(x1, x2, (1, 2), 'SAME', (1, 1), (1, 1), ('NHWC', 'HWIO', 'NHWC'), feature_group_count=1)
    m_v0 = 12 * lax.conv_general_dilated(wide(x1), wide(x2), (1, 2), 'SAME', (1, 1), (1, 1), ('NHWC', 'HWIO', 'NHWC'), feature_group_count=1)
    return (m_v0,)


args = [
    np.array([[[[1.0], [1.0], [1.0], [1.0], [1.0]]]], jnp.bfloat16),  # x1
    np.array([[[[2.5]]], [[[-9.295429630892704e+18]]], [[[-inf]]]], jnp.bfloat16),  # x2
]
converted = jax2tf_native.convert(f, enable_xla=False)
got = [t.numpy() for t in converted(*[tf.constant(a) for a in args])]
want = jax.jit(f)(*args)
scales = jax.jit(f_scale)(*args)
families = [('reassociation',)]
for w, g, s, fam in zip(want, got, scales, families):
    w, g = np.asarray(w), np.asarray(g)
    print('jax.jit:', w)
    print('converted:', g)
    print(exactness.compare(g, w, exactness.tolerance(*fam), None if s is None else np.asarray(s)).detail or 'equal under the contract')
