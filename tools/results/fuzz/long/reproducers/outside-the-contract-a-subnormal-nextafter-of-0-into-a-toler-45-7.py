"""lax_fuzz reproducer (outside the contract: a subnormal (nextafter of 0) into a tolerated function (TF's kernels treat it as 0, atan2(1e-45, 0) = pi/4)).

convert(f, enable_xla=False) vs jax.jit, value check, value: 1 element(s) outside the bound; worst at (3, 0): got 0.785398, expected 1.5708 (6.59e+06 ulps)
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
    v0 = lax.nextafter(x3, x2)
    v1 = lax.atan2(v0, x3)
    return (v1,)


def f_scale(x2, x3):
    v0 = lax.nextafter(x3, x2)
    v1 = lax.atan2(v0, x3)
    return (None,)


args = [
    np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]], np.float32),  # x2
    np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [0.0, 0.75]], np.float32),  # x3
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
