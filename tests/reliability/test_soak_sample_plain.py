"""A lean sample of the plain-TF-ops soak (`tools/soak_harnesses.py --converter plain`).

Every 700th of JAX's ~5,600 primitive harness cases (sorted by name, the soak's order) is
exported, lowered to plain TF ops (`enable_xla=False`, issue 27) and run eagerly and in a
`tf.function` in this process, against `jax.jit` on the same inputs. Each must match JAX or be
refused at conversion with our error: never a wrong value or a raw TF error. The full table is
tools/results/plain_coverage.md.
"""
from tools import soak_harnesses

EVERY = 700


def test_plain_sample_matches_jax_or_is_refused():
    harnesses = sorted(soak_harnesses.load_harnesses(), key=lambda h: h.fullname)
    sample = harnesses[::EVERY]
    records = {h.fullname: soak_harnesses._run_case(h, "plain") for h in sample}
    ran = {name: r for name, r in records.items() if r["status"] != "skip"}
    assert len(ran) >= 6, records
    bad = {name: r for name, r in ran.items() if r["status"] not in ("ok", "refused")}
    assert not bad, bad
    for name, r in ran.items():
        if r["status"] == "refused" and r.get("stage") != "export":  # our error, naming the op
            assert r["detail"].startswith("enable_xla=False cannot lower `"), (name, r)
        elif r["status"] == "refused":  # the portable export's own error (e.g. eig)
            assert r["detail"].startswith("jax2tf_native."), (name, r)
    assert sum(r["status"] == "ok" for r in ran.values()) >= len(ran) // 2, records
