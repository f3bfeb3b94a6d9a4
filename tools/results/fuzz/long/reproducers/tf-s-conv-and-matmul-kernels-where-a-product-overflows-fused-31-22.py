"""lax_fuzz reproducer (TF's Conv and MatMul kernels: where a product overflows, fused multiply-adds decide between NaN, an infinity and a finite value).

convert(f, enable_xla=False) vs jax.jit, value check, infinity: 1 non-finite element(s) differ; first at (0, 0, 3, 0): got inf, expected 6.01839e+305
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


def f(x4, x5):
    v2 = lax.conv_general_dilated(x4, x5, (1, 1), ((0, 1), (2, 2)), (1, 1), (2, 2), ('NHWC', 'HWIO', 'NHWC'), feature_group_count=1)
    return (v2,)


def f_scale(x4, x5):
    v2 = lax.conv_general_dilated(x4, x5, (1, 1), ((0, 1), (2, 2)), (1, 1), (2, 2), ('NHWC', 'HWIO', 'NHWC'), feature_group_count=1)
    m_v2 = 12 * lax.conv_general_dilated(wide(x4), wide(x5), (1, 1), ((0, 1), (2, 2)), (1, 1), (2, 2), ('NHWC', 'HWIO', 'NHWC'), feature_group_count=1)
    return (m_v2,)


args = [
    np.array([[[[1.0, 1.0], [1.0, -1.0033478404309726]]]], np.float64),  # x4
    np.array([[[[-1.7976931348623157e+308], [-1.7976931348623157e+308]]]], np.float64),  # x5
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
