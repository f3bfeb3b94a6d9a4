"""The API reference grouped by what a user does: convert, save, inspect and verify, export to
TFLite / TF.js, then the errors.

One table for both places that list the API: the index page (tools/api_pages.py writes
docs/api/index.md from it) and the site's navigation (tools/mkdocs_hooks.py). Every generated
API page must sit in exactly one group: `group_pages` raises for a page no group names, so a
new public name gets its place on purpose rather than at the end of an alphabetical list.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ApiGroup:
    """One section of the API reference.

    Attributes:
      title: the section's heading, a task ("Save for TF Serving").
      summary: one sentence under the heading: when a user needs these names.
      pages: the page names (`jax2tf_native.convert`), in the order a user meets them.
    """
    title: str
    summary: str
    pages: tuple[str, ...]


API_GROUPS = (
    ApiGroup("Convert", "Turn a JAX function into a TensorFlow one, and call it.", (
        "jax2tf_native.convert",
        "jax2tf_native.input_signature",
        "jax2tf_native.PolyShape",
        "jax2tf_native.eval_polymorphic_shape",
        "jax2tf_native.dtype_of_val",
        "jax2tf_native.check_grads_tf",
        "jax2tf_native.call_tf",
        "jax2tf_native.linalg_portable",
    )),
    ApiGroup("Models from frameworks",
             "Flax, Equinox and Keras models, their parameters as TF Variables.", (
                 "jax2tf_native.convert_model",
                 "jax2tf_native.JaxLayer",
                 "jax2tf_native.frameworks",
                 "jax2tf_native.tf_variables.to_variables",
                 "jax2tf_native.example_model",
             )),
    ApiGroup("Exported artifacts",
             "Run or save a `jax.export` artifact you already have, without its Python source.", (
                 "jax2tf_native.call_exported",
                 "jax2tf_native.deserialize",
                 "jax2tf_native.DisabledSafetyCheck",
                 "jax2tf_native.lapack_rewrite",
             )),
    ApiGroup("Save for TF Serving", "Write SavedModels: Variables, signatures, references, warmup.", (
        "saved_model_tools.save",
        "saved_model_tools.save_model",
        "saved_model_tools.save_exported",
        "saved_model_tools.Signature",
        "saved_model_tools.manifest",
        "saved_model_tools.warmup",
    )),
    ApiGroup("Inspect and verify",
             "Read a SavedModel and check it against JAX's outputs, on a host without JAX.", (
                 "saved_model_tools.inspect.inspect_saved_model",
                 "saved_model_tools.inspect.SavedModelReport",
                 "saved_model_tools.inspect.check_readable",
                 "saved_model_tools.verify.verify",
                 "saved_model_tools.verify.VerifyReport",
             )),
    ApiGroup("Export to TFLite and TF.js",
             "Models for phones, microcontrollers, browsers and Node (plain TF ops).", (
                 "saved_model_tools.tflite.convert_to_tflite",
                 "saved_model_tools.tflite.TfliteReport",
                 "saved_model_tools.tflite.quantize_int8",
                 "saved_model_tools.tflite.Int8Report",
                 "saved_model_tools.save_tfjs",
                 "saved_model_tools.save_model_tfjs",
                 "saved_model_tools.tfjs.convert_to_tfjs",
                 "saved_model_tools.tfjs.TfjsReport",
             )),
    ApiGroup("Errors", "What a bad input or an impossible request raises; each names the fix.", (
        "jax2tf_native.ArgumentShapeError",
        "jax2tf_native.ArgumentTypeError",
        "jax2tf_native.PolymorphicShapeError",
        "jax2tf_native.JaxTransformationError",
        "jax2tf_native.GradientSpecError",
        "jax2tf_native.GradientCheckError",
        "jax2tf_native.CustomCallNotAllowedError",
        "jax2tf_native.NonPortableLinalgError",
        "jax2tf_native.PlainLoweringError",
        "jax2tf_native.CallTfShapeError",
        "jax2tf_native.ExportedModuleError",
        "jax2tf_native.ModuleNotRunnableHereError",
        "jax2tf_native.errors.TargetTfError",
        "saved_model_tools.inspect.SavedModelReadError",
        "saved_model_tools.verify.VerifyError",
        "saved_model_tools.tfjs.TfjsExportError",
    )),
)


def group_pages(pages) -> list[tuple[ApiGroup, list[str]]]:
    """[(group, its pages among `pages`)] in the table's order; raises for an ungrouped page.

    Example:
      >>> [(g.title, p) for g, p in group_pages(["jax2tf_native.convert"])][:1]
      [('Convert', ['jax2tf_native.convert'])]
    """
    pages = set(pages)
    grouped = [page for group in API_GROUPS for page in group.pages]
    twice = sorted({page for page in grouped if grouped.count(page) > 1})
    if twice:
        raise ValueError(f"tools/api_groups.py lists these pages twice: {twice}")
    ungrouped = sorted(pages - set(grouped))
    if ungrouped:
        raise ValueError(f"API pages in no group of tools/api_groups.py: {ungrouped}; add each "
                         "to the group of the task it serves (errors to 'Errors')")
    return [(group, [p for p in group.pages if p in pages]) for group in API_GROUPS]


def short_name(page: str) -> str:
    """The name a nav entry shows: the page's last component (`verify.verify` -> `verify`)."""
    return page.rsplit(".", 1)[-1]
