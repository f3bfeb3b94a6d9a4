"""jax2tf-native: run JAX functions in TensorFlow as single XlaCallModule ops, via jax.export.

Public API, each name imported on first use by `__getattr__` below: `import jax2tf_native`
imports neither JAX nor TensorFlow, so it loads no framework either (TF's import brings Keras,
which must come after the user chose its backend;
tests/jax2tf_native/frameworks/test_optional_imports.py),
and a submodule such as `jax2tf_native.example_model` imports only what it needs:
  convert              -- drop-in for jax.experimental.jax2tf.convert.
  input_signature      -- tf.TensorSpec pytree for tf.function, None where symbolic.
  call_exported        -- run a jax.export.Exported (or its bytes) as a TF function.
  deserialize          -- Exported from serialized bytes, with a clear error when corrupt.
  check_grads_tf       -- TF tape gradients (any order) vs JAX and finite differences.
  call_tf, PolyShape, eval_polymorphic_shape, dtype_of_val, DisabledSafetyCheck
                       -- jax2tf's own objects, re-exported for drop-in use (docs/compat.md).
  convert_model        -- a Flax NNX / Linen, Equinox or Keras 3 (JAX backend) model as a
                          tf.Module: Variables (trainable as the framework says) + converted call.
  frameworks           -- the adapters behind convert_model (FunctionalModel, ...).
  JaxLayer             -- a JAX function + params as a Keras 3 layer on the TF backend.
  errors               -- PolymorphicShapeError, ArgumentShapeError, ArgumentTypeError,
                          ExportedModuleError, JaxTransformationError, CustomCallNotAllowedError,
                          GradientCheckError, GradientSpecError, NonPortableLinalgError,
                          ModuleNotRunnableHereError, CallTfShapeError,
                          PlainLoweringError (enable_xla=False).

Inside, a convert's path in module order (docs/gradient_path.md follows one call):
  converter            -- `convert`: options, then per call `tf_args` (the TF arguments as
                          leaves), `arg_specs` (polymorphic_shapes -> specs for jax.export) and
                          `flat_function` (the user's function on flat leaves).
  function_node        -- the gradient node of a converted function: its exports, made lazily
                          (`exporting`, with `vjp_functions`: forward with residuals, backward,
                          recomputed VJP); `exported_node` is the node of a `jax.export`
                          artifact; both hand `gradient_plans` to `gradients`.
  gradients            -- what runs for a call, from the tapes recording now, and TF's gradient.
  prepared_export      -- an export made ready for TF, the argument checks (`arg_shape_check`,
                          on `dim_expressions`) and the XlaCallModule call (tf_ops).
  exported_call        -- `call_exported` / `deserialize`: an artifact checked in a sandbox
                          child (`artifact_sandbox`, `sandbox_server`), refined to its
                          declared shapes (`declared_shapes`), run through the same layers.
  call_tf_split, call_tf_result_shapes -- a symbolic `call_tf`: the function split at it, and
                          its result shapes from TF's shape inference.
  linalg (linalg_portable), lapack_rewrite -- linear algebra TF can run: portable lowering
                          rules, and LAPACK custom calls rewritten in existing artifacts.
  shardings, export_cache, tf_variables, keras_layer, grad_check, frameworks, example_model,
  errors, _jax_internals (the only JAX internals, each pinned by a test).
"""
import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "convert": "jax2tf_native.converter",
    "input_signature": "jax2tf_native.arg_specs",
    "call_exported": "jax2tf_native.exported_call",
    "deserialize": "jax2tf_native.exported_call",
    "check_grads_tf": "jax2tf_native.grad_check",
    "convert_model": "jax2tf_native.frameworks.functional",
    "JaxLayer": "jax2tf_native.keras_layer",
    "GradientCheckError": "jax2tf_native.grad_check",
    "ArgumentShapeError": "jax2tf_native.errors",
    "ArgumentTypeError": "jax2tf_native.errors",
    "CustomCallNotAllowedError": "jax2tf_native.errors",
    "ExportedModuleError": "jax2tf_native.errors",
    "ModuleNotRunnableHereError": "jax2tf_native.errors",
    "GradientSpecError": "jax2tf_native.errors",
    "PolymorphicShapeError": "jax2tf_native.errors",
    "NonPortableLinalgError": "jax2tf_native.errors",
    "JaxTransformationError": "jax2tf_native.errors",
    "CallTfShapeError": "jax2tf_native.errors",
    "PlainLoweringError": "jax2tf_native.errors",
    # jax2tf's public names that a drop-in keeps (docs/compat.md): the same objects, so code
    # written for `from jax.experimental import jax2tf` works with `import jax2tf_native as
    # jax2tf`. call_tf's modules run under convert (inlined or call_tf_graph=True).
    "call_tf": "jax.experimental.jax2tf",
    "PolyShape": "jax.experimental.jax2tf",
    "eval_polymorphic_shape": "jax.experimental.jax2tf",
    "dtype_of_val": "jax.experimental.jax2tf",
    "DisabledSafetyCheck": "jax.export",
}

__all__ = list(_EXPORTS)


def __getattr__(name):
    if name == "frameworks":
        return importlib.import_module("jax2tf_native.frameworks")
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'jax2tf_native' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
