"""lax_fuzz reproducer (TF's XLA: complex abs/sign/sqrt of infinite and NaN parts differ from jaxlib).

convert(f) (XlaCallModule) vs jax.jit, value check, nan: 1 non-finite element(s) differ; first at (0, 0): got 1.41421, expected nan
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


def f(x2):
    v1 = lax.abs(x2)
    return (v1,)


def f_scale(x2):
    v1 = lax.abs(x2)
    m_v1 = wide(x2)
    return (m_v1,)


args = [
    complex_array(np.array([[1.0]], np.float32), np.array([[nan]], np.float32)),  # x2
]
converted = jax2tf_native.convert(f, enable_xla=True)
got = [t.numpy() for t in converted(*[tf.constant(a) for a in args])]
want = jax.jit(f)(*args)
scales = jax.jit(f_scale)(*args)
families = [('complex_arith',)]
for w, g, s, fam in zip(want, got, scales, families):
    w, g = np.asarray(w), np.asarray(g)
    print('jax.jit:', w)
    print('converted:', g)
    print(exactness.compare(g, w, exactness.tolerance(*fam), None if s is None else np.asarray(s)).detail or 'equal under the contract')
