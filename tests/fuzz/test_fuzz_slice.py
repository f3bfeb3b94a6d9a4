"""The differential fuzzer's CI slice: a fixed-seed run of generated programs compared on
`jax.jit`, `convert(f)` (XlaCallModule) and `convert(f, enable_xla=False)` (plain TF ops),
values, jvp and first- and second-order TF gradients, under the exactness contract
(docs/exactness.md). A mismatch that no known class explains fails the test with the
program's reproducer; known ones are printed (run with -rA to see them) until their fixes
merge and their entries leave tools/lax_fuzz/known.py. The long runs are
`python -m tools.lax_fuzz run` (tools/results/fuzz/)."""
import collections

from tools.lax_fuzz import batch, known, reproducer

SEED = 35
BATCHES = 8
SETTINGS = batch.Settings(pack=20)


def test_fixed_seed_slice_has_no_unexplained_mismatch():
    explained = collections.Counter()
    unexplained = []
    ran = collections.Counter()
    for index in range(BATCHES):
        drawn = batch.draw(SEED, index, SETTINGS)
        outcome = batch.run(drawn)
        ran["programs"] += len(drawn.programs) - outcome.skipped
        ran["symbolic"] += sum(p.polymorphic for p in drawn.programs)
        ran["derivatives"] += sum(p.grad for p in drawn.programs)
        ran["x64"] += drawn.x64
        for key in outcome.stats:
            ran[key.split("|")[1]] += outcome.stats[key]["results"]
        for k, mismatch in outcome.mismatches:
            program = drawn.programs[k]
            name = known.classify(mismatch, program.ops)
            if name:
                explained[name] += 1
            else:
                unexplained.append(f"batch {index} program {k}: {mismatch.path} "
                                   f"{mismatch.check}: {mismatch.detail}\n"
                                   + reproducer.script(program, mismatch, "CI slice"))
        for k, path, check, text in outcome.errors:
            unexplained.append(f"batch {index} program {k}: {path} {check} raised {text}\n"
                               + drawn.programs[k].source())
    for name, count in sorted(explained.items()):
        print(f"known, not failing the slice: {name} ({count})")
    assert not unexplained, "\n\n".join(unexplained[:3])
    # The slice is not vacuous: programs of every kind ran and were compared on both paths.
    assert ran["programs"] >= BATCHES * SETTINGS.pack * 0.9, ran
    assert ran["symbolic"] >= 5 and ran["derivatives"] >= 10 and ran["x64"] >= 1, ran
    assert ran["value"] >= 150 and ran["jvp"] >= 10 and ran["grad1"] >= 10, ran
    assert ran["grad2"] >= 1, ran
