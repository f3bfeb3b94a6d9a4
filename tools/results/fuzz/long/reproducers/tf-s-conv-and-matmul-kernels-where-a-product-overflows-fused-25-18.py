"""lax_fuzz reproducer (TF's Conv and MatMul kernels: where a product overflows, fused multiply-adds decide between NaN, an infinity and a finite value).

convert(f, enable_xla=False) vs jax.jit, value check, nan: 1 non-finite element(s) differ; first at (0, 0, 1, 0): got nan, expected inf
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


def f(x2, x3):
    v0 = lax.conv_general_dilated(x2, x3, (1, 1), 'SAME', (1, 1), (1, 2), ('NCHW', 'OIHW', 'NCHW'), feature_group_count=2)
    return (v0,)


def f_scale(x2, x3):
    v0 = lax.conv_general_dilated(x2, x3, (1, 1), 'SAME', (1, 1), (1, 2), ('NCHW', 'OIHW', 'NCHW'), feature_group_count=2)
    m_v0 = 6 * lax.conv_general_dilated(wide(x2), wide(x3), (1, 1), 'SAME', (1, 1), (1, 2), ('NCHW', 'OIHW', 'NCHW'), feature_group_count=2)
    return (m_v0,)


args = [
    np.array([[[[1.0], [1.0], [1.0]], [[1.0], [88.75], [16777217.0]], [[1.0], [1.0], [1.0]], [[1.0], [1.0], [1.0]]]], np.float64),  # x2
    np.array([[[[-0.0010330738004676616], [0.007203320116785583], [0.0022557502659312947]], [[-0.024852889122351753], [8.988465674311579e+307], [-1.7976931348623157e+308]]], [[[1.0], [1.0], [1.0]], [[1.0], [1.0], [1.0]]]], np.float64),  # x3
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
