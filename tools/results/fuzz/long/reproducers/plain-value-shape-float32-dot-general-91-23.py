"""lax_fuzz reproducer (plain value shape float32: dot_general).

convert(f, enable_xla=False) vs jax.jit, value check, shape: shape [0, 2, 0], expected [0, 2, 1]
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
    v0 = lax.dot_general(x1, x2, (((), ()), ((), ())))
    return (v0,)


def f_scale(x1, x2):
    v0 = lax.dot_general(x1, x2, (((), ()), ((), ())))
    m_v0 = 1 * lax.dot_general(wide(x1), wide(x2), (((), ()), ((), ())))
    return (m_v0,)


args = [
    np.zeros((0, 2), np.float32),  # x1
    np.array([1.0], np.float32),  # x2
]
converted = jax2tf_native.convert(f, enable_xla=False, polymorphic_shapes=[None, '(a,)'])
signature = [tf.TensorSpec([None if not d.strip().isdigit() else int(d) for d in s.strip('()').split(',') if d.strip()] if s else a.shape, tf.as_dtype(a.dtype)) for s, a in zip([None, '(a,)'], args)]
call = tf.function(converted, input_signature=signature, autograph=False)
got = [t.numpy() for t in call(*[tf.constant(a) for a in args])]
want = jax.jit(f)(*args)
scales = jax.jit(f_scale)(*args)
families = [('reassociation',)]
for w, g, s, fam in zip(want, got, scales, families):
    w, g = np.asarray(w), np.asarray(g)
    print('jax.jit:', w)
    print('converted:', g)
    print(exactness.compare(g, w, exactness.tolerance(*fam), None if s is None else np.asarray(s)).detail or 'equal under the contract')
