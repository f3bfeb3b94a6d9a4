"""`Signature`: one named serving entry point of a SavedModel (like orbax-export's
ServingConfig), and the tf.function built for it."""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Sequence

import jax
import numpy as np
import tensorflow as tf

import jax2tf_native

PREDICT_METHOD = "tensorflow/serving/predict"
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclasses.dataclass(frozen=True)
class Signature:
    """A named serving entry point that shares the model's Variables.

    Attributes:
      name: the signature key, e.g. "classify".
      fn: the JAX function `fn(params, *args)`; None means the model's main function.
      example_args: example positional arguments after params; None means the main ones.
      polymorphic_shapes: one spec per example argument (e.g. ["(b, 28, 28, 1)"]); None means
        the main ones when `example_args` is None, else static shapes.
      input_names: names of the signature inputs; default from `preprocess`'s specs, else
        "input_0", "input_1", ... (or the main `input_names`).
      output_names: names of the outputs when the result is not a dict; default "output_0"...
      preprocess: a TF function from the signature's inputs to the JAX function's args
        (e.g. uint8 images -> float32); runs in the SavedModel, before the XlaCallModule.
      input_signature: the `tf.TensorSpec`s of the signature's inputs when `preprocess` takes
        other dtypes/shapes than the JAX function (required with `preprocess`).
      postprocess: a TF function from the JAX result to the signature's outputs (e.g. logits ->
        top class); a dict result keeps its keys.
      method_name: the SignatureDef method name.

    Example:
        >>> classify = Signature(
        ...     "classify_uint8",
        ...     preprocess=lambda images: (tf.cast(images, tf.float32) / 255.0,),
        ...     input_signature=[tf.TensorSpec([None, 28, 28, 1], tf.uint8, "images")],
        ...     postprocess=lambda logits: {"class": tf.argmax(logits, -1)})
        >>> classify.name
        'classify_uint8'
    """
    name: str
    fn: Callable | None = None
    example_args: Sequence[Any] | None = None
    polymorphic_shapes: Sequence[str | None] | None = None
    input_names: Sequence[str] | None = None
    output_names: Sequence[str] | None = None
    preprocess: Callable | None = None
    input_signature: Sequence[tf.TensorSpec] | None = None
    postprocess: Callable | None = None
    method_name: str = PREDICT_METHOD

    def __post_init__(self):
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise ValueError(f"signature name must be an identifier, got {self.name!r}. Fix: "
                             f"use letters, digits and underscores, e.g. 'classify'.")
        if self.preprocess is not None and self.input_signature is None:
            raise ValueError(f"signature {self.name!r}: preprocess needs input_signature (the "
                             f"tf.TensorSpecs of the raw inputs it takes).")
        for label, fn in (("fn", self.fn), ("preprocess", self.preprocess),
                          ("postprocess", self.postprocess)):
            if fn is not None and not callable(fn):
                raise TypeError(f"signature {self.name!r}: {label} must be callable, got "
                                f"{type(fn).__name__}.")


def check_names(names: Sequence[str], what: str) -> list[str]:
    names = list(names)
    bad = [n for n in names if not isinstance(n, str) or not _NAME_RE.match(n)]
    if bad:
        raise ValueError(f"{what} must be identifiers (letters, digits, _), got {bad}.")
    if len(set(names)) != len(names):
        raise ValueError(f"{what} must be distinct, got {names}.")
    return names


def name_outputs(result: Any, output_names: Sequence[str] | None, where: str) -> dict:
    """A dict result keeps its keys; anything else becomes output_0, output_1, ... (or names)."""
    if isinstance(result, dict) and all(isinstance(k, str) for k in result) and output_names is None:
        leaves = [jax.tree_util.tree_leaves(v) for v in result.values()]
        if all(len(l) == 1 for l in leaves):
            return {k: v[0] for k, v in zip(result, leaves)}
    flat = jax.tree_util.tree_leaves(result)
    names = (check_names(output_names, f"{where}: output_names") if output_names is not None
             else [f"output_{i}" for i in range(len(flat))])
    if len(names) != len(flat):
        raise ValueError(f"{where}: {len(names)} output_names for {len(flat)} outputs. Fix: "
                         f"give one name per output ({len(flat)}).")
    return dict(zip(names, flat))


def example_input_specs(example_args: Sequence[Any], polymorphic_shapes,
                        input_names: Sequence[str]) -> list[tf.TensorSpec]:
    """Named TensorSpecs (None where symbolic) for flat array example arguments."""
    for i, arg in enumerate(example_args):
        if not (hasattr(arg, "shape") and hasattr(arg, "dtype")) and not np.isscalar(arg):
            raise TypeError(f"example_args[{i}] is {type(arg).__name__}; signature inputs must "
                            f"be arrays. Fix: pass one array per input (put pytrees of arrays "
                            f"in params, or flatten them into separate inputs).")
    specs = jax2tf_native.input_signature(list(example_args), polymorphic_shapes)
    return [tf.TensorSpec(s.shape, s.dtype, name=n) for s, n in zip(specs, input_names)]
