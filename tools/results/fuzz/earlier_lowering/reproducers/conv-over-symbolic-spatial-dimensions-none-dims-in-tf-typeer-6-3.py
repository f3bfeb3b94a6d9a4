"""lax_fuzz reproducer (conv over symbolic spatial dimensions (None dims in TF): TypeError in the lowering).

convert(f, enable_xla=False) vs jax.jit, value check, error: TypeError: unsupported operand type(s) for -: 'NoneType' and 'int'
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


def f(x1, x2):
    v0 = lax.conv_general_dilated(x1, x2, (1,), 'SAME', (1,), (2,), ('NWC', 'WIO', 'NWC'), feature_group_count=1)
    return (v0,)


def f_scale(x1, x2):
    v0 = lax.conv_general_dilated(x1, x2, (1,), 'SAME', (1,), (2,), ('NWC', 'WIO', 'NWC'), feature_group_count=1)
    return (None,)


args = [
    np.array([[[1]]], np.int8),  # x1
    np.array([[[1]]], np.int8),  # x2
]
converted = jax2tf_native.convert(f, enable_xla=False, polymorphic_shapes=['(a, 1, 1)', '(a, 1, 1)'])
signature = [tf.TensorSpec([None if not d.strip().isdigit() else int(d) for d in s.strip('()').split(',') if d.strip()] if s else a.shape, tf.as_dtype(a.dtype)) for s, a in zip(['(a, 1, 1)', '(a, 1, 1)'], args)]
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
