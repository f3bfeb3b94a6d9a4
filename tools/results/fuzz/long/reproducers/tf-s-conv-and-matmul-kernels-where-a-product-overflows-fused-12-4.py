"""lax_fuzz reproducer (TF's Conv and MatMul kernels: where a product overflows, fused multiply-adds decide between NaN, an infinity and a finite value).

convert(f, enable_xla=False) vs jax.jit, value check, nan: 1 non-finite element(s) differ; first at (0, 2, 1, 0): got inf, expected nan
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


def f(x2, x3, x4):
    v1 = lax.conv_general_dilated(x2, x3, (1, 1), 'SAME', dimension_numbers=('NHWC', 'HWIO', 'NHWC')) + x4
    return (v1,)


def f_scale(x2, x3, x4):
    v1 = lax.conv_general_dilated(x2, x3, (1, 1), 'SAME', dimension_numbers=('NHWC', 'HWIO', 'NHWC')) + x4
    m_v1 = 27 * lax.conv_general_dilated(wide(x2), wide(x3), (1, 1), 'SAME', dimension_numbers=('NHWC', 'HWIO', 'NHWC')) + wide(x4)
    return (m_v1,)


args = [
    np.array([[[[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], [[-inf, -0.6953125, -0.5], [-9.295429630892704e+18, 1.0, 1.0], [1.0, 1.0, 1.0]], [[1.0, 1.0, 1.0], [1.0, 1.0, -1.1875], [-3.3895313892515355e+38, 1.578125, 1.0]]]], jnp.bfloat16),  # x2
    np.array([[[[-1.0], [0.25], [-0.5]], [[-0.25], [-1.25], [-1.25]], [[-2.0], [-0.0], [0.75]]], [[[0.5], [0.5], [1.25]], [[0.25], [1.75], [-1.0]], [[1.75], [0.75], [-0.25]]], [[[0.0], [0.5], [-0.75]], [[-0.25], [-0.25], [0.25]], [[1.0], [1.5], [-1.75]]]], jnp.bfloat16),  # x3
    np.array([-0.80078125], jnp.bfloat16),  # x4
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
