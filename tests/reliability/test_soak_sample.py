"""A sample of the soak (tools/soak_harnesses.py): JAX's primitive harnesses through `convert`.

Every 250th of the ~5,600 harness cases (sorted by name) runs in one worker process through
`convert`, eagerly and in `tf.function(jit_compile=True)`, against `jax.jit`. Each case must
be ok, or a mismatch whose primitive group docs/compat.md lists with its reason; none may
time out, crash, or flood the log. The full soak's summary is tools/results/soak/soak.md.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def documented_groups() -> set[str]:
    text = (PROJECT_ROOT / "docs" / "compat.md").read_text()
    section = text[text.index("## Soak: primitive harnesses"):]
    return set(re.findall(r"^\| `([a-z_0-9]+)` \|", section, re.M))


def test_soak_sample_matches_jax_or_is_documented(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "tools" / "soak_harnesses.py"), "--every", "250",
         "--bound", "300", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=1200, cwd=PROJECT_ROOT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = [json.loads(l) for l in (tmp_path / "soak.jsonl").read_text().splitlines()]
    assert [r["index"] for r in records] == list(range(0, 250 * len(records), 250))
    assert len(records) >= 20, records
    ran = [r for r in records if r["status"] != "skip"]
    assert len(ran) >= 18, records
    known = documented_groups()
    undocumented = [(r["name"], r["status"], r.get("detail")) for r in ran
                    if r["status"] != "ok" and r["group"] not in known]
    assert not undocumented, undocumented
    assert (tmp_path / "soak.md").read_text().startswith("# Soak: JAX's primitive harnesses")
