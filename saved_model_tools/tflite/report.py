"""The record `convert_to_tflite` returns (`TfliteReport`) and the exit codes of
`jax2tf-native tflite` (verify's, plus `EXIT_NOT_CONVERTED`).
"""
from __future__ import annotations

import dataclasses
import json

from saved_model_tools.verify.report import (EXIT_FAILED, EXIT_NO_REFERENCES, EXIT_PASSED,
                                             OutputCheck)

# verify's exit codes, plus one of tflite's own.
EXIT_NOT_CONVERTED = 4

BUILTINS = "TFLITE_BUILTINS"
BUILTINS_AND_SELECT = "TFLITE_BUILTINS+SELECT_TF_OPS"

@dataclasses.dataclass(frozen=True)
class TfliteReport:
    """The result of `convert_to_tflite`.

    Attributes:
      saved_model_dir: the SavedModel converted.
      signature: the signature key converted.
      out_file: the .tflite file written; None when conversion failed or the interpreter
        failed the check (a failing model is not written, and an older file is kept).
      status: "passed" (converted; every output matched), "failed" (converted; a mismatch or an
        interpreter error), "not-converted" (the converter refused: see `conversion_errors`), or
        "no-references" (converted and ran, but there was nothing recorded to compare with).
      ops_set: the op sets the written model needs: "TFLITE_BUILTINS" or
        "TFLITE_BUILTINS+SELECT_TF_OPS" (needs the Flex delegate at run time); None if none.
      size_bytes: size of the .tflite flatbuffer.
      tflite_ops: the distinct TFLite operators in the model (from tf.lite's Analyzer).
      input_shape_signatures: {input: shape with -1 for dimensions left dynamic}.
      fixed_batch: the batch size the model was converted for, None when the batch stays
        dynamic (the default).
      conversion_errors: the converter's distinct error lines ("location: message") for the
        builtins-only attempt, when it failed.
      select_tf_ops: what SELECT_TF_OPS changes: "not needed", "converts with SELECT_TF_OPS",
        or "also fails: ..." (diagnosed when the builtins-only attempt fails).
      checks: one per output per batch size.
      seconds: wall time.
    """
    saved_model_dir: str
    signature: str
    out_file: str | None  # None: not written (not converted, or failed its check)
    status: str
    ops_set: str | None
    size_bytes: int
    tflite_ops: tuple[str, ...]
    input_shape_signatures: dict
    fixed_batch: int | None
    conversion_errors: tuple[str, ...]
    select_tf_ops: str
    checks: tuple[OutputCheck, ...]
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "passed"

    @property
    def exit_code(self) -> int:
        return {"passed": EXIT_PASSED, "failed": EXIT_FAILED, "not-converted": EXIT_NOT_CONVERTED,
                "no-references": EXIT_NO_REFERENCES}[self.status]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"

    def format(self) -> str:
        lines = [f"tflite {self.saved_model_dir} [{self.signature}]"]
        if self.status == "not-converted":
            lines.append("NOT CONVERTED with TFLITE_BUILTINS; the converter reported:")
            lines.extend(f"  {e}" for e in self.conversion_errors)
            lines.append(f"SELECT_TF_OPS: {self.select_tf_ops}")
            if any("hlo." in e for e in self.conversion_errors):
                # A StableHLO op inside XlaCallModule without a TFLite legalization.
                lines.append("Fix: save with enable_xla=False (export --no-xla): as plain TF "
                             "ops, sort, top_k and argmax convert with TFLITE_BUILTINS; or "
                             "replace the ops named above in the JAX function (each line "
                             "points at the JAX source), or serve with TF Serving.")
            else:
                lines.append("Fix: replace the ops named above in the JAX function (each line "
                             "points at the JAX source), or serve with TF Serving instead of "
                             "TFLite.")
            return "\n".join(lines) + "\n"
        batch = (f"batch fixed at {self.fixed_batch}" if self.fixed_batch is not None
                 else "dynamic batch")
        what = (f"wrote {self.out_file}" if self.out_file is not None else
                "converted, NOT WRITTEN (the interpreter's results fail the check below)")
        lines.append(f"{what}: {self.size_bytes:,} bytes, ops set {self.ops_set}, "
                     f"{batch}; inputs {self.input_shape_signatures}")
        if self.conversion_errors:
            lines.append("  (builtins only failed: " + "; ".join(self.conversion_errors) + ")")
        lines.append(f"TFLite ops: {', '.join(self.tflite_ops)}")
        lines.extend(c.line() for c in self.checks)
        failed = sum(not c.passed for c in self.checks)
        lines.append({
            "passed": f"PASSED: the TFLite interpreter matches all {len(self.checks)} checked "
                      f"outputs",
            "failed": f"FAILED: {failed} of {len(self.checks)} checks",
            "no-references": "NO REFERENCES: converted and ran, nothing recorded to compare "
                             "with. Fix: save with saved_model_tools.save to record references.",
        }[self.status] + f" ({self.seconds:.1f} s)")
        return "\n".join(lines) + "\n"
