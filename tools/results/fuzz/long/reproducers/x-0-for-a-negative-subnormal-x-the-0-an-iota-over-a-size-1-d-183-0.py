"""lax_fuzz reproducer (x + 0 for a negative subnormal x, the 0 an iota over a size-1 dimension or a scan's initial carry: XLA's x + 0 -> x keeps its sign, TF's add (denormals-are-zero) gives +0).

convert(f, enable_xla=False) vs jax.jit, value check, value: 1 element(s) outside the bound; worst at (0, 0, 0): got 0, expected -1.4013e-45 (1 ulps)
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


def f(x1):
    v0 = lax.add(x1, lax.broadcasted_iota(x1.dtype, x1.shape, 0))
    return (v0,)


def f_scale(x1):
    v0 = lax.add(x1, lax.broadcasted_iota(x1.dtype, x1.shape, 0))
    return (None,)


args = [
    np.array([[[-1e-45]]], np.float32),  # x1
]
converted = jax2tf_native.convert(f, enable_xla=False, polymorphic_shapes=['(a, a, a)'])
signature = [tf.TensorSpec([None if not d.strip().isdigit() else int(d) for d in s.strip('()').split(',') if d.strip()] if s else a.shape, tf.as_dtype(a.dtype)) for s, a in zip(['(a, a, a)'], args)]
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
