"""lax_fuzz reproducer (plain value error -: reduce_window_sum).

convert(f, enable_xla=False) vs jax.jit, value check, error: InvalidArgumentError: Graph execution error:
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
    v2 = lax.reduce_window(x2, jnp.array(0, x2.dtype), lax.add, (3, 3, 1, 3), (1, 2, 1, 1), ((0, 1), (1, 2), (0, 2), (2, 0)), (2, 1, 1, 1), (1, 1, 2, 2))
    return (v2,)


def f_scale(x2):
    v2 = lax.reduce_window(x2, jnp.array(0, x2.dtype), lax.add, (3, 3, 1, 3), (1, 2, 1, 1), ((0, 1), (1, 2), (0, 2), (2, 0)), (2, 1, 1, 1), (1, 1, 2, 2))
    return (None,)


args = [
    np.zeros((1, 1, 1, 0), np.uint32),  # x2
]
converted = jax2tf_native.convert(f, enable_xla=False, polymorphic_shapes=['(a, 1, 1, 0)'])
signature = [tf.TensorSpec([None if not d.strip().isdigit() else int(d) for d in s.strip('()').split(',') if d.strip()] if s else a.shape, tf.as_dtype(a.dtype)) for s, a in zip(['(a, 1, 1, 0)'], args)]
call = tf.function(converted, input_signature=signature, autograph=False)
got = [t.numpy() for t in call(*[tf.constant(a) for a in args])]
want = jax.jit(f)(*args)
scales = jax.jit(f_scale)(*args)
families = [()]
for w, g, s, fam in zip(want, got, scales, families):
    w, g = np.asarray(w), np.asarray(g)
    print('jax.jit:', w)
    print('converted:', g)
    print(exactness.compare(g, w, exactness.tolerance(*fam), None if s is None else np.asarray(s)).detail or 'equal under the contract')
