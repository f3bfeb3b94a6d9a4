"""The human-readable text of an inspect report (`jax2tf-native inspect` without --json)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from saved_model_tools.inspect_tf_versions import TF_VERSION_MATRIX_FILE

if TYPE_CHECKING:  # annotations only: the records module imports this one
    from saved_model_tools.inspect_records import SavedModelReport

# TF's Python MLIR reader lacks the Shardy dialect of sharded modules (XlaCallModule reads it).
SHARDY_UNKNOWN = "dialect 'sdy' is unknown"


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n:,} bytes ({n / scale:.1f} {unit})"
    return f"{n:,} bytes"


def format_lines(report: SavedModelReport) -> list[str]:
    """The lines of the human-readable report (`SavedModelReport.format`)."""
    lines = [f"SavedModel {report.path}  (tags {list(report.tags)}, saved_model.pb "
             f"{_size(report.saved_model_pb_bytes)})"]
    m = report.manifest
    if m is None:
        lines.append("  no jax2tf-native manifest (not written by saved_model_tools.save): no "
                     "reference data")
    else:
        producer = ", ".join(f"{k} {v}" for k, v in sorted(m.producer.items()))
        scope = "" if m.input_gradients else ", parameters only"
        lines.append(f"  written by jax2tf-native at {m.created_utc} ({producer}); gradients: "
                     f"{m.with_gradient} ({m.gradient_mode}{scope})")
        if m.target_tf is not None:
            lines.append(f"  written for TF {m.target_tf} (target_tf; StableHLO "
                         f"{m.stablehlo_version})")
    lines.append(f"Signatures ({len(report.signatures)}):")
    for sig in report.signatures:
        lines.append(f"  {sig.name}  [{sig.method_name or 'no method name'}]")
        for t in sig.inputs:
            lines.append(f"    in   {t.describe()}")
        for t in sig.outputs:
            lines.append(f"    out  {t.describe()}")
        poly = sig.polymorphic_inputs
        if poly:
            lines.append("    polymorphic dims: " + ", ".join(
                f"{k}{list(v)}" for k, v in sorted(poly.items())))
        if sig.reference_batch_sizes:
            lines.append(f"    references at batch sizes {list(sig.reference_batch_sizes)} "
                         f"(outputs computed by {sig.reference_source})")
    lines.append(f"Variables: {report.variable_count}, {_size(report.variable_bytes)}")
    if report.lowering != "XlaCallModule":
        needs = (f"needs XLA: {', '.join(report.xla_op_types)}" if report.xla_op_types
                 else "nothing needs XLA")
        lines.append(f"Lowering: {report.lowering} ({len(report.op_types)} op types, {needs})")
        lines.append(f"  op types: {', '.join(report.op_types)}")
    else:
        lines.append("Lowering: XlaCallModule (runs where TF has XLA)")
    lines.append(f"XlaCallModule: {len(report.modules)} distinct module(s) in "
                 f"{report.xla_call_module_ops} op(s)")
    for i, mod in enumerate(report.modules, 1):
        version = mod.stablehlo_version or f"unknown ({mod.producer or 'not bytecode'})"
        lines.append(f"  [{i}] sha256 {mod.sha256[:16]}  {_size(mod.size_bytes)}, calling "
                     f"convention {mod.calling_convention_version}, platforms "
                     f"{list(mod.platforms)}, StableHLO {version}, {mod.copies} cop"
                     f"{'y' if mod.copies == 1 else 'ies'}")
        lines.append(f"      functions: {', '.join(mod.functions) or '(top-level graph)'}")
        callers = ", ".join(mod.signatures) or "none (e.g. a gradient function)"
        lines.append(f"      called by signatures: {callers}")
        if mod.main_signature:
            lines.append(f"      {mod.main_signature}")
        if mod.disabled_checks:
            lines.append(f"      disabled checks: {list(mod.disabled_checks)}")
        if mod.devices != 1 or any(mod.input_shardings) or any(mod.output_shardings):
            multi = (f"; needs them partitioned: {', '.join(mod.multi_device_ops)}"
                     if mod.multi_device_ops else "")
            lines.append(f"      devices: {mod.devices}{multi}")
            lines.extend(f"      in  [{k}] sharding {s or 'unspecified'}"
                         for k, s in enumerate(mod.input_shardings))
            lines.extend(f"      out [{k}] sharding {s or 'unspecified'}"
                         for k, s in enumerate(mod.output_shardings))
        if mod.not_runnable_here:
            lines.append(f"      cannot run on this host: {mod.not_runnable_here}")
        if not mod.deserializes_in_installed_tf and SHARDY_UNKNOWN in (mod.deserialize_error
                                                                        or ""):
            lines.append("      StableHLO text: not shown (TF's Python MLIR reader lacks the "
                         "Shardy dialect of this sharded module; XlaCallModule reads it)")
        elif not mod.deserializes_in_installed_tf:
            lines.append(f"      the installed TF cannot read it: {mod.deserialize_error}")
        if mod.custom_calls:
            lines.append("      custom calls:")
            for call in mod.custom_calls:
                status = ("allowed" if call.allowed else "NOT ALLOWED") + ", " + (
                    f"runs in TF on {', '.join(call.tf_runnable_platforms)}"
                    if call.runs_in_tf else "does NOT run in TF")
                lines.append(f"        {call.target}: {status}")
        else:
            lines.append("      custom calls: none")
        if mod.rewritten_lapack:
            lines.append(f"      LAPACK calls rewritten to portable StableHLO: "
                         f"{', '.join(mod.rewritten_lapack)}")
        lines.append(f"      oldest TF: {mod.tf_support.oldest_tf or 'none'} "
                     f"({mod.tf_support.reason})")
        if mod.mlir is not None:
            lines.append("      StableHLO:")
            lines.extend("        " + line for line in mod.mlir.rstrip().splitlines())
    lines.append(f"Oldest TF that runs the signatures: {report.tf_support.oldest_tf or 'none'} "
                 f"({report.tf_support.reason}; from {TF_VERSION_MATRIX_FILE.name}, inspected "
                 f"with TF {report.tensorflow_version})")
    if report.warmup_requests is None:
        lines.append("Warmup requests: none (TF Serving compiles on the first request)")
    else:
        lines.append(f"Warmup requests: {len(report.warmup_requests)}")
        lines.extend(f"  {line}" for line in report.warmup_requests)
    for note in report.notes:
        lines.append(f"Note: {note}")
    return lines
