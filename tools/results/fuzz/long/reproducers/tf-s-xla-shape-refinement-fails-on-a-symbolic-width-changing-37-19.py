"""lax_fuzz reproducer (TF's XLA: shape refinement fails on a symbolic width-changing bitcast).

convert(f) (XlaCallModule) vs jax.jit, value check, error: InvalidArgumentError: Graph execution error:
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


def f(x0):
    v1 = lax.bitcast_convert_type(x0, jnp.uint8)
    return (v1,)


def f_scale(x0):
    v1 = lax.bitcast_convert_type(x0, jnp.uint8)
    return (None,)


args = [
    np.array([1.0], np.float32),  # x0
]
converted = jax2tf_native.convert(f, enable_xla=True, polymorphic_shapes=['(a,)'])
signature = [tf.TensorSpec([None if not d.strip().isdigit() else int(d) for d in s.strip('()').split(',') if d.strip()] if s else a.shape, tf.as_dtype(a.dtype)) for s, a in zip(['(a,)'], args)]
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
