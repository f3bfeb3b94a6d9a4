"""tf_ops.known_downgrades: a module whose write for TF changes only the header is not rewritten,
and what it is given instead is byte for byte what the write gives."""
import jax
import jax.interpreters.mlir as jax_mlir
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import mlir as jax_extend_mlir

from tf_ops import known_downgrades, mlir_walk, module_for_tf, versions

TARGET = versions.tf_stablehlo_version()


@pytest.fixture(autouse=True)
def _empty_table():
    known_downgrades.forget()
    yield
    known_downgrades.forget()


def _export(fn, *args):
    return jax.export.export(jax.jit(fn))(*args).mlir_module_serialized


def _written(blob, target=TARGET):
    """The full write of `blob` at `target`, as reserialize does it without the table."""
    with jax_mlir.make_ir_context():
        module = jax_extend_mlir.deserialize_portable_artifact(blob)
        return bytes(jax_extend_mlir.serialize_portable_artifact(module, target, True))


def _kind(blob):
    with jax_mlir.make_ir_context():
        module = jax_extend_mlir.deserialize_portable_artifact(blob)
        return known_downgrades.module_kind(mlir_walk.walk(module.operation))


def _model(offset):
    def f(w, x):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.tanh(y).sum(axis=(1, 2)) @ jnp.ones((4, 3)) + offset
    return f


ARGS = (np.ones((3, 3, 2, 4), np.float32), np.ones((1, 8, 8, 2), np.float32))


def test_second_module_of_a_kind_gets_the_bytes_the_write_gives():
    first, second = _export(_model(1.0), *ARGS), _export(_model(2.0), *ARGS)
    assert first != second and _kind(first) == _kind(second)
    assert module_for_tf.reserialize(first, TARGET, written_here=True) == _written(first)
    assert known_downgrades.header_only(second, TARGET, _kind(second)) is not None, (
        "the write of a module without rewrites no longer changes only its header: JAX's serialization "
        "and ours differ now (an upgrade?), and every conversion pays the write again")
    got = module_for_tf.reserialize(second, TARGET, written_here=True)
    assert got == _written(second)
    assert got[:40].count(f"StableHLO_v{TARGET}".encode()) == 1


def test_a_new_element_type_is_a_new_kind_and_is_written():
    f32 = _export(_model(1.0), *ARGS)
    module_for_tf.reserialize(f32, TARGET, written_here=True)
    with jax.enable_x64(True):
        f64 = _export(_model(1.0), *(a.astype(np.float64) for a in ARGS))
    assert _kind(f64) != _kind(f32)
    assert known_downgrades.header_only(f64, TARGET, _kind(f64)) is None
    assert module_for_tf.reserialize(f64, TARGET, written_here=True) == _written(f64)


def test_a_write_that_changes_ops_is_never_skipped():
    # StableHLO 1.0.0 has older forms of these ops: the write changes more than the header.
    blob = _export(_model(1.0), *ARGS)
    written = module_for_tf.reserialize(blob, "1.0.0", written_here=True)
    assert written == _written(blob, "1.0.0")
    assert known_downgrades.with_version(blob, "1.0.0") != written
    assert known_downgrades.header_only(blob, "1.0.0", _kind(blob)) is None
    assert module_for_tf.reserialize(_export(_model(3.0), *ARGS), "1.0.0",
                                     written_here=True) != \
        known_downgrades.with_version(_export(_model(3.0), *ARGS), "1.0.0")


def test_modules_with_composites_are_rewritten_every_time():
    blob = _export(lambda x: jax.lax.erf(x) + 1.0, np.zeros(3, np.float32))
    for _ in range(2):
        out = module_for_tf.reserialize(blob, TARGET, written_here=True)
        with jax_mlir.make_ir_context():
            text = str(jax_extend_mlir.deserialize_portable_artifact(out))
        assert "stablehlo.composite" not in text and "call @" in text


def test_bytes_read_from_elsewhere_are_always_written_anew():
    # An artifact from outside this process: TF must parse only what our writer produced,
    # even when its kind is known to change only the header.
    mine, theirs = _export(_model(1.0), *ARGS), _export(_model(2.0), *ARGS)
    module_for_tf.reserialize(mine, TARGET, written_here=True)
    assert known_downgrades.header_only(theirs, TARGET, _kind(theirs)) is not None
    want = _written(theirs)
    calls = []
    real = module_for_tf.jax_extend_mlir.serialize_portable_artifact

    def counting(*args):
        calls.append(args[1])
        return real(*args)

    module_for_tf.jax_extend_mlir.serialize_portable_artifact = counting
    try:
        assert module_for_tf.reserialize(theirs, TARGET) == want
        assert module_for_tf.reserialize(theirs, TARGET, written_here=True) == want
    finally:
        module_for_tf.jax_extend_mlir.serialize_portable_artifact = real
    assert calls == [TARGET], calls  # the first wrote; the second took the header path


def test_header_parsing():
    blob = _export(lambda x: x * 2, np.zeros(3, np.float32))
    start, end = known_downgrades.producer_span(blob)
    assert blob[start:end].startswith(b"StableHLO_v")
    patched = known_downgrades.with_version(blob, "1.2.3")
    assert patched[start:start + 17] == b"StableHLO_v1.2.3\0"
    assert patched[start + 17:] == blob[end + 1:]
    assert known_downgrades.producer_span(b"not an artifact") is None
    assert known_downgrades.with_version(b"ML\xefR\x01garbage", "1.2.3") is None
