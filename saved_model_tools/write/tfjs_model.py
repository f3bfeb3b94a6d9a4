"""A JAX function or a framework model as a TF.js graph model (writing side: needs JAX).

Both write a plain-ops SavedModel (`enable_xla=False`) into a temporary directory and convert
it with `saved_model_tools.tfjs.convert_to_tfjs`; the SavedModel is discarded. docs/tfjs.md.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, Sequence

from saved_model_tools import tfjs
from saved_model_tools.write import framework_models
from saved_model_tools.write import saved_model as writer


def save_tfjs(out_dir: str | os.PathLike, fn: Callable, params: Any,
              example_args: Sequence[Any], *, overwrite: bool = False,
              **save_kwargs) -> tfjs.TfjsReport:
    """Writes `fn(params, *args)` as a TF.js graph model (model.json + weight shards).

    Args:
      out_dir: the directory to write, atomically; nothing is written when a check fails.
      fn, params, example_args: as for `saved_model_tools.save`.
      overwrite: replace an existing `out_dir`.
      **save_kwargs: as for `saved_model_tools.save` (polymorphic_shapes keeps a `None`
        batch, input_names, ...); `enable_xla` is always False.

    Returns:
      `saved_model_tools.tfjs.TfjsReport`.

    Raises:
      PlainLoweringError: a JAX op with no exact plain-TF lowering.
      saved_model_tools.tfjs.TfjsExportError: ops or dtypes TF.js does not run (each named).

    Example:
        >>> import tempfile, numpy as np
        >>> from saved_model_tools.write.tfjs_model import save_tfjs
        >>> out = tempfile.mkdtemp() + "/js"
        >>> report = save_tfjs(out, lambda w, x: np.float32(2) * x @ w,
        ...                    np.ones((3, 2), np.float32), [np.ones((1, 3), np.float32)],
        ...                    polymorphic_shapes=["(b, 3)"])
        >>> report.inputs, report.outputs
        ({'input_0': ('float32', [None, 3])}, {'output_0': ('float32', [None, 2])})
    """
    _refuse_existing(out_dir, overwrite)
    save_kwargs["enable_xla"] = False
    with tempfile.TemporaryDirectory(prefix="jax2tf_tfjs_") as tmp:
        writer.save(os.path.join(tmp, "saved_model"), fn, params, example_args,
                    **save_kwargs)
        return tfjs.convert_to_tfjs(os.path.join(tmp, "saved_model"), out_dir,
                                    overwrite=overwrite, model_name=_name(fn, "function"))


def save_model_tfjs(out_dir: str | os.PathLike, model: Any, example_args: Sequence[Any], *,
                    overwrite: bool = False, **save_model_kwargs) -> tfjs.TfjsReport:
    """Writes a framework model (Flax NNX / Linen, Equinox, Keras 3 on JAX) as a TF.js model.

    Args:
      out_dir: the directory to write, atomically.
      model, example_args: as for `saved_model_tools.save_model`.
      overwrite: replace an existing `out_dir`.
      **save_model_kwargs: as for `saved_model_tools.save_model` (variables, method,
        polymorphic_shapes, ...); `enable_xla` is always False.

    Returns:
      `saved_model_tools.tfjs.TfjsReport`.
    """
    _refuse_existing(out_dir, overwrite)
    save_model_kwargs["enable_xla"] = False
    with tempfile.TemporaryDirectory(prefix="jax2tf_tfjs_") as tmp:
        framework_models.save_model(os.path.join(tmp, "saved_model"), model, example_args,
                                    **save_model_kwargs)
        return tfjs.convert_to_tfjs(os.path.join(tmp, "saved_model"), out_dir,
                                    overwrite=overwrite, model_name=_name(model, "model"))


def _name(target: Any, kind: str) -> str:
    """How errors name what is converted: its temporary SavedModel means nothing to the user."""
    name = getattr(target, "__name__", None) or type(target).__name__
    return f"the {kind} {name} (as plain TF ops)"


def _refuse_existing(out_dir, overwrite: bool) -> None:
    # Before the (slow) SavedModel write; convert_to_tfjs checks again when it writes.
    if not overwrite and os.path.exists(out_dir):
        raise FileExistsError(f"{out_dir} already exists. Fix: pass overwrite=True to replace "
                              f"it (atomically), or choose a new directory.")
