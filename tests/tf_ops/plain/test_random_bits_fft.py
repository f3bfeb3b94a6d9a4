"""Random bits and FFTs in the plain lowering: `rng_bit_generator` bit for bit as XLA's CPU
backend (THREE_FRY, PHILOX, DEFAULT), jax.random's threefry through plain integer ops, and
`stablehlo.fft` (all four kinds, 1-3 dimensions) against jnp.fft."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from tests.tf_ops.plain.lowering_check import assert_lowers_like_jax, lowered
from tf_ops import plain

RNG = np.random.RandomState(0)
KEY = np.array([0x12345678, 0xFFFFFFFF, 0xFFFFFFFE, 7], np.uint32)  # counter near a carry
# (shape, dtype): a scalar, an odd-only shape (split on its largest dimension), a size-1
# dimension, narrow and 64-bit words.
OUTPUTS = [((), jnp.uint32), ((5, 7), jnp.uint32), ((4, 1, 3), jnp.uint8),
           ((3, 2), jnp.uint64)]


@pytest.mark.parametrize("algorithm", [lax.RandomAlgorithm.RNG_THREE_FRY,
                                       lax.RandomAlgorithm.RNG_PHILOX])
def test_rng_bit_generator_matches_xla_bit_for_bit(algorithm):
    def bits(key):
        return [lax.rng_bit_generator(key, shape, dtype=dtype, algorithm=algorithm)
                for shape, dtype in OUTPUTS]
    with jax.enable_x64(True):
        assert_lowers_like_jax(bits, KEY, rtol=0, atol=0)


def test_rng_default_is_philox_as_on_xla_cpu():
    assert_lowers_like_jax(lambda key: lax.rng_bit_generator(
        key, (2, 3), dtype=jnp.uint16, algorithm=lax.RandomAlgorithm.RNG_DEFAULT), KEY,
        rtol=0, atol=0)


def test_jax_random_lowers_through_integer_ops():
    def draws(key_data):
        key = jax.random.wrap_key_data(key_data)
        k1, k2 = jax.random.split(key)
        return (jax.random.bits(k1, (3, 4), jnp.uint32), jax.random.uniform(k2, (50,)),
                jax.random.key_data(jax.random.split(key, 3)))
    key = np.asarray(jax.random.key_data(jax.random.key(42)))
    assert_lowers_like_jax(draws, key, rtol=0, atol=0)
    # A batch of keys of symbolic size.
    keys = np.asarray(jax.random.key_data(jax.random.split(jax.random.key(1), 4)))
    assert_lowers_like_jax(jax.vmap(lambda k: jax.random.uniform(jax.random.wrap_key_data(k),
                                                                 (3,))),
                           keys, polymorphic_shapes=["b, 2"], rtol=0, atol=0)


def test_jax_random_normal_within_an_ulp():
    # Bits and uniforms are exact; the normal's erf_inv differs from XLA's by at most an ulp
    # (XLA's CPU backend fuses multiply-adds and has its own log1p).
    key = np.asarray(jax.random.key_data(jax.random.key(0)))
    assert_lowers_like_jax(lambda k: jax.random.normal(jax.random.wrap_key_data(k), (200,)),
                           key, rtol=1e-6, atol=1e-6)


def test_xla_rng_is_refused():
    program = plain.read_program(jax.export.export(
        jax.jit(lambda a: lax.rng_uniform(a, a + 1, (3,))), platforms=["cpu"])(
            jax.ShapeDtypeStruct((), np.float32)).mlir_module())
    with pytest.raises(plain.PlainLoweringError, match=r"stablehlo.rng.*use jax.random"):
        plain.check_program(program)


def _complex(*shape, dtype=np.complex64):
    return (RNG.randn(*shape) + 1j * RNG.randn(*shape)).astype(dtype)


def test_fft_kinds_and_ranks():
    z = _complex(2, 4, 6)
    x = RNG.randn(2, 4, 6).astype(np.float32)
    # Transforms over the trailing dimensions only: JAX cannot export one over a symbolic size.
    assert_lowers_like_jax(lambda z, x: (jnp.fft.fft(z), jnp.fft.ifft2(z), jnp.fft.rfft(x),
                                         jnp.fft.rfft2(x), jnp.fft.irfft(z),
                                         jnp.fft.irfft(z, n=7), jnp.fft.irfft2(z, s=(4, 9)),
                                         jnp.fft.fft(x, n=5, axis=1, norm="ortho")),
                           z, x, polymorphic_shapes=["b, 4, 6", "b, 4, 6"], rtol=1e-5,
                           atol=1e-5)


def test_three_dimensional_and_double_precision_ffts():
    with jax.enable_x64(True):
        assert_lowers_like_jax(lambda z, x: (jnp.fft.fftn(z), jnp.fft.ifftn(z),
                                             jnp.fft.rfftn(x), jnp.fft.irfftn(z, s=(2, 3, 7)),
                                             jnp.fft.fft2(z[0]), jnp.fft.rfft(x[0, 0])),
                               _complex(2, 3, 4, dtype=np.complex128), RNG.randn(2, 3, 4),
                               rtol=1e-12, atol=1e-12)


def test_fft_program_uses_stablehlo_fft():
    program = lowered(jnp.fft.rfft, [np.ones((8,), np.float32)])
    assert [op.attr("fft_type") for op in program.ops() if op.name == "stablehlo.fft"] == \
        ["RFFT"]
