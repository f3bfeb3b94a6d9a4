"""One `Signature` of `save`, resolved and traced: the tf.function the SavedModel serves and
what the manifest records about it (`build_signature`)."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import tensorflow as tf

import jax2tf_native
from saved_model_tools import manifest
from saved_model_tools.write import pytree_inputs
from saved_model_tools.write import signature as signature_lib
from saved_model_tools.write.signature import Signature


@dataclasses.dataclass(frozen=True)
class ConvertOptions:
    """What `save` passes through to `jax2tf_native.convert` for every signature."""
    with_gradient: bool
    gradient_mode: str
    input_gradients: bool
    platforms: Sequence[str] | None
    jit_compile: bool
    polymorphic_constraints: tuple[str, ...] = ()
    stablehlo_version: str | None = None
    linalg: str = "portable"
    target_tf: str | None = None
    enable_xla: bool = True


def as_specs(polymorphic_shapes, n_args: int) -> list:
    if polymorphic_shapes is None or isinstance(polymorphic_shapes, str):
        return [polymorphic_shapes] * n_args
    specs = list(polymorphic_shapes)
    if len(specs) != n_args:
        raise ValueError(f"polymorphic_shapes has {len(specs)} entries for {n_args} example "
                         f"argument(s). Fix: one spec (or None) per argument after params, e.g. "
                         f"{['(b, ...)'] * n_args}.")
    return specs


@dataclasses.dataclass(frozen=True)
class BuiltSignature:
    """One signature, resolved and traced.

    Attributes:
      spec: the user's signature.
      function: the tf.function saved for it.
      input_specs: its named `tf.TensorSpec`s.
      info: what the manifest records about it (references added when written).
      jax_fn: `fn(params, *args)`, for the JAX reference outputs.
      example_args: example arguments of `jax_fn` (after params).
      polymorphic_shapes: one spec per example argument.
      output_names: names for a non-dict result, or None.
    """
    spec: Signature
    function: Any
    input_specs: list
    info: manifest.SignatureInfo
    jax_fn: Callable
    example_args: list
    polymorphic_shapes: list
    output_names: Sequence[str] | None


def _output_infos(outputs: dict) -> tuple[manifest.TensorInfo, ...]:
    return tuple(manifest.TensorInfo(n, tf.dtypes.as_dtype(t.dtype).name,
                                     tuple(t.shape.as_list())) for n, t in outputs.items())


def build_signature(spec: Signature, main: Signature, params_tree, options: ConvertOptions) -> BuiltSignature:
    fn = spec.fn or main.fn
    uses_main_args = spec.example_args is None
    where = f"signature {spec.name!r}"
    if uses_main_args:
        example_args, poly = main.example_args, (
            main.polymorphic_shapes if spec.polymorphic_shapes is None
            else as_specs(spec.polymorphic_shapes, len(main.example_args)))
        leaf_names = None
    else:
        if (spec.preprocess is None and spec.input_names is not None
                and len(spec.input_names) != len(spec.example_args)):
            raise ValueError(f"{where}: {len(spec.input_names)} input names for "
                             f"{len(spec.example_args)} example arguments.")
        flat = pytree_inputs.flatten(
            spec.example_args, as_specs(spec.polymorphic_shapes, len(spec.example_args)),
            spec.input_names, where=f"{where}: example_args")
        fn, example_args, poly, leaf_names = (flat.wrap(fn), flat.arrays,
                                              flat.polymorphic_shapes, flat.names)
    if spec.preprocess is not None:
        input_specs = [tf.TensorSpec(s.shape, s.dtype, name=n) for s, n in zip(
            spec.input_signature,
            spec.input_names or [s.name or f"input_{i}" for i, s in enumerate(spec.input_signature)])]
    else:
        names = (main.input_names if uses_main_args and spec.input_names is None
                 else spec.input_names if uses_main_args else leaf_names)
        names = signature_lib.check_names(names, f"{where}: input_names")
        if len(names) != len(example_args):
            raise ValueError(f"{where}: {len(names)} input names for {len(example_args)} inputs.")
        input_specs = signature_lib.example_input_specs(example_args, poly, names)
    signature_lib.check_names([s.name for s in input_specs], f"{where}: input names")
    converted = jax2tf_native.convert(
        fn, polymorphic_shapes=[None, *poly], with_gradient=options.with_gradient,
        gradient_mode=options.gradient_mode,
        # TF saves a custom gradient but not the gradient of its backward pass: first order.
        gradient_order=1, platforms=options.platforms,
        gradient_argnums=None if options.input_gradients else 0,
        polymorphic_constraints=options.polymorphic_constraints,
        stablehlo_version=options.stablehlo_version, linalg=options.linalg,
        target_tf=options.target_tf, enable_xla=options.enable_xla)
    output_names = spec.output_names if spec.output_names is not None else (
        main.output_names if spec.fn is None and spec.postprocess is None else None)

    def serve(*inputs):
        args = spec.preprocess(*inputs) if spec.preprocess is not None else inputs
        args = tuple(args) if isinstance(args, (list, tuple)) else (args,)
        result = converted(params_tree, *args)
        if spec.postprocess is not None:
            result = spec.postprocess(result)
        return signature_lib.name_outputs(result, output_names, where)

    serve.__name__ = spec.name
    function = tf.function(serve, input_signature=input_specs, autograph=False,
                           jit_compile=options.jit_compile)
    concrete = function.get_concrete_function()  # traces and exports now, inside this phase
    info = manifest.SignatureInfo(
        name=spec.name, method_name=signature_lib.PREDICT_METHOD,
        inputs=tuple(manifest.TensorInfo(s.name, s.dtype.name, tuple(s.shape.as_list()),
                                         None if spec.preprocess is not None else p)
                     for s, p in zip(input_specs, poly if spec.preprocess is None
                                     else [None] * len(input_specs))),
        outputs=_output_infos(concrete.structured_outputs))
    return BuiltSignature(spec, function, input_specs, info, fn, list(example_args), list(poly),
                  output_names)


