"""`verify`: the model runs without JAX through both TF load paths and matches JAX's outputs."""
import json

import numpy as np
import pytest

from saved_model_tools import manifest, verify, warmup
from saved_model_tools import cli
from saved_model_tools.cli.failures import EXIT_UNREADABLE
from saved_model_tools.inspect import SavedModelReadError
from tests.saved_model_tools.conftest import run_without_jax


def _references(model, signature="serving_default"):
    record = manifest.read(model).signature(signature)
    return record, [(r, np.load(model / manifest.RECORD_DIR / r.file)) for r in record.references]


def test_verify_passes_without_jax_on_both_paths(cnn_model):
    report = verify.verify(cnn_model)
    assert report.status == "passed" and report.ok and report.exit_code == 0, report.format()
    assert report.jax_imported is False
    # TF 2.21 itself tries to import JAX (keras, tf.lite); the finder must have refused it.
    assert report.blocked_jax_imports, "no import of jax was attempted, so none was blocked"
    record, refs = _references(cnn_model)
    assert report.batch_sizes == tuple(sorted(r.batch_size for r, _ in refs))
    compared = {(c.signature, c.path, c.batch_size, c.output) for c in report.checks
                if c.expected == "jax reference"}
    for signature in ("serving_default", "classify"):
        outputs = [t.name for t in manifest.read(cnn_model).signature(signature).outputs]
        for path in ("tf2", "tf1-session"):
            for ref, _ in refs:
                for output in outputs:
                    assert (signature, path, ref.batch_size, output) in compared
    # The writer's warmup requests were replayed through TF Serving's session path.
    assert sum(c.path == "warmup" for c in report.checks) == len(
        warmup.read_warmup_requests(cnn_model / manifest.WARMUP_FILE))
    assert "PASSED" in report.format()
    # Issue 37: the refused imports read as a failure in the headline ("2 attempt(s) blocked:
    # jax from .../site-packages/..."); they are the check working, said after the checks.
    lines = report.format().splitlines()
    assert lines[0].startswith(f"verify {report.path} with TF {report.tensorflow_version}, "
                               f"without JAX") and "blocked" not in lines[0], lines[0]
    note = f"(JAX stayed out, as intended: {len(report.blocked_jax_imports)} optional import(s)"
    (kept_out,) = [l for l in lines if l.startswith(note)]
    assert "tensorflow/" in kept_out and "site-packages" not in kept_out, kept_out
    assert lines[-1].startswith("PASSED")


def test_mismatch_and_bad_warmup_fail_with_per_output_lines(cnn_model, model_copy, capsys):
    broken = model_copy(cnn_model)
    record, refs = _references(broken)
    ref, data = refs[-1]
    arrays = {k: data[k] for k in data.files}
    arrays["outputs/logits"] = arrays["outputs/logits"].copy()
    arrays["outputs/logits"][0, 3] += 0.5
    np.savez(broken / manifest.RECORD_DIR / ref.file, **arrays)
    good = arrays["inputs/images"][:1]
    warmup.write_warmup_requests(broken / manifest.WARMUP_FILE, [
        ("serving_default", {"images": good}),
        ("serving_default", {"pixels": good})])  # TF Serving would refuse to load this

    recorded = sorted(r.batch_size for r, _ in refs)
    unrecorded = max(recorded) + 1
    sizes = [str(b) for b in recorded + [unrecorded]]
    assert cli.main(["verify", str(broken), "--batch-sizes", *sizes]) == verify.EXIT_FAILED
    out = capsys.readouterr().out
    failed = [line for line in out.splitlines() if line.startswith("FAIL ")]
    assert len(failed) == 3, out
    for path in ("tf2", "tf1-session"):
        assert any(f"batch {ref.batch_size:>4}  {path:<11}  logits" in line
                   and "max|diff| 0.5" in line and "worst at (0, 3)" in line
                   for line in failed), out
    assert any("warmup #1" in line and "pixels" in line for line in failed), out
    assert sum(line.startswith("PASS") and "warmup #0" in line for line in out.splitlines()) == 1
    assert "FAILED: 3 of" in out
    # A batch size without a reference: both paths run it and must agree with each other.
    assert any(line.startswith("PASS ") and f"batch {unrecorded:>4}  tf1-session  logits" in line
               and "vs tf2 path" in line for line in out.splitlines()), out


def test_model_without_manifest_gets_a_smoke_run(peer_model, capsys):
    code = cli.main(["verify", str(peer_model), "--allow-no-references", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["status"] == "no-references" and not report["has_manifest"]
    assert report["batch_sizes"] == list(verify.SMOKE_BATCH_SIZES)
    assert report["checks"] and all(c["passed"] for c in report["checks"])
    assert {(c["path"], c["expected"]) for c in report["checks"]} == {
        ("tf2", "runs"), ("tf1-session", "tf2 path")}
    assert not report["jax_imported"]
    assert verify.VerifyReport(**{**report, "checks": ()}).exit_code == verify.EXIT_NO_REFERENCES


def test_unreadable_models_raise_clear_errors(tmp_path):
    with pytest.raises(SavedModelReadError, match="does not exist.*Fix"):
        verify.verify(tmp_path / "missing")
    with pytest.raises(SavedModelReadError, match="no saved_model.pb.*Fix"):
        verify.verify(tmp_path)
    (tmp_path / "saved_model.pb").write_bytes(b"\x0a\xff\xff\xff truncated")
    with pytest.raises(SavedModelReadError, match="corrupt.*Fix"):
        verify.verify(tmp_path)
    assert cli.main(["verify", str(tmp_path / "missing")]) == EXIT_UNREADABLE
    with pytest.raises(ValueError, match="positive ints"):
        verify.verify(tmp_path, batch_sizes=[0])


def test_saved_model_cli_runs_the_model_without_jax(cnn_model, tmp_path):
    """TF's own `saved_model_cli run` (TF1 session path) matches the recorded JAX outputs."""
    record, refs = _references(cnn_model)
    ref, data = refs[-1]
    np.save(tmp_path / "images.npy", data["inputs/images"])
    proc = run_without_jax(
        "import runpy\n"
        "sys.argv = ['saved_model_cli', 'run', '--dir', sys.argv[1], '--tag_set', 'serve',\n"
        "            '--signature_def', 'serving_default', '--inputs', sys.argv[2],\n"
        "            '--outdir', sys.argv[3]]\n"
        "runpy.run_module('tensorflow.python.tools.saved_model_cli', run_name='__main__')\n"
        "assert 'jax' not in sys.modules\n",
        str(cnn_model), f"images={tmp_path / 'images.npy'}", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = np.load(tmp_path / "out" / "logits.npy")
    want = data["outputs/logits"]
    assert got.shape == want.shape == (ref.batch_size, 10)
    np.testing.assert_allclose(got, want, rtol=ref.rtol, atol=ref.atol)
