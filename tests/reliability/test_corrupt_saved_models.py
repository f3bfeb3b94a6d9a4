"""Corrupt and hostile SavedModel directories through `inspect`, `verify` and `tflite`.

Each variant of one real model (flipped bytes in saved_model.pb, missing or truncated
variables, a corrupt checkpoint index, a manifest or reference file that lies, symlinks
leading outside the directory, a reference whose header declares a huge array) must end in
one error line and a non-zero exit from the command line, write nothing (no .tflite file, no
change in the directory), and never read outside the directory.
"""
from __future__ import annotations

import io
import json
import os
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

import jax.numpy as jnp
import saved_model_tools
from saved_model_tools import cli
from saved_model_tools import manifest as manifest_lib

RECORDS = manifest_lib.RECORD_DIR
DATA = Path("variables") / "variables.data-00000-of-00001"


def dense(params, x):
    return jnp.tanh(x @ params["w"])


@pytest.fixture(scope="module")
def base_model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corrupt") / "model"
    saved_model_tools.save(path, dense, {"w": np.linspace(-1, 1, 12, dtype=np.float32)
                                         .reshape(4, 3)},
                           [np.ones((2, 4), np.float32)], polymorphic_shapes=["(b, 4)"],
                           input_names=["x"])
    return path


def _flip(path: Path, seed: int, flips: int) -> None:
    data = bytearray(path.read_bytes())
    rng = np.random.default_rng(seed)
    for _ in range(flips):
        i = int(rng.integers(len(data)))
        data[i] ^= 1 << int(rng.integers(8))
    path.write_bytes(bytes(data))


def _garble_proto(path: Path, seed: int, flips: int) -> None:
    """`_flip`, and a first byte of 0: a tag of field number 0, which no protobuf parser takes.
    Flips alone may land in a string or float field and leave a proto that still parses (where
    they land depends on the file's bytes, and saved_model.pb's bytes depend on how many
    functions the process traced before: on the order the tests ran in)."""
    _flip(path, seed, flips)
    data = bytearray(path.read_bytes())
    data[0] = 0
    path.write_bytes(bytes(data))


def _edit_manifest(d: Path, edit) -> None:
    path = d / manifest_lib.MANIFEST_FILE
    raw = json.loads(path.read_text())
    edit(raw)
    path.write_text(json.dumps(raw))


def _huge_npz(d: Path) -> None:
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000, 4), }"
    header = header + " " * (118 - len(header)) + "\n"
    member = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + bytes(16)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("inputs/x.npy", member)
        archive.writestr("outputs/output_0.npy", member)
    (d / RECORDS / "serving_default_0.npz").write_bytes(buffer.getvalue())


def _signature_dtype(d: Path, enum_value: int) -> None:
    """Sets input 'x' of serving_default to a dtype enum TF does not know (proto3 keeps it)."""
    from tensorflow.core.protobuf import saved_model_pb2
    proto = saved_model_pb2.SavedModel.FromString((d / "saved_model.pb").read_bytes())
    proto.meta_graphs[0].signature_def["serving_default"].inputs["x"].dtype = enum_value
    (d / "saved_model.pb").write_bytes(proto.SerializeToString())


def _link_outside(d: Path, relative: Path, outside: Path) -> None:
    (d / relative).unlink()
    (d / relative).symlink_to(outside)


# (name, how to corrupt the copy, commands that must fail, exit code, message pattern)
VARIANTS = [
    ("saved_model_pb_flipped_bytes", lambda d, o: _garble_proto(d / "saved_model.pb", 2, 20),
     ("inspect", "verify", "tflite"), 2, r"saved_model\.pb is corrupt: it does not parse"),
    ("checkpoint_index_corrupt", lambda d, o: _flip(d / "variables/variables.index", 4, 8),
     ("inspect", "verify", "tflite"), 2, r"variables\.index is corrupt"),
    ("variables_data_missing", lambda d, o: (d / DATA).unlink(),
     ("inspect", "verify", "tflite"), 2, r"has 0 of the checkpoint's 1 data file"),
    ("variables_data_truncated", lambda d, o: (d / DATA).write_bytes(b""),
     ("inspect", "verify", "tflite"), 2, r"hold 0 bytes but its variables need 48 \(truncated\)"),
    ("manifest_not_json", lambda d, o: (d / manifest_lib.MANIFEST_FILE).write_text("{oops"),
     ("inspect", "verify", "tflite"), 2, r"manifest\.json is not valid JSON"),
    ("manifest_field_missing", lambda d, o: _edit_manifest(d, lambda m: m.pop("signatures")),
     ("inspect", "verify", "tflite"), 2, r"manifest\.json is malformed \(KeyError"),
    ("manifest_unknown_dtype", lambda d, o: _edit_manifest(
        d, lambda m: m["signatures"][0]["inputs"][0].update(dtype="floaty")),
     ("inspect", "verify", "tflite"), 2, r"the dtype of 'x' is 'floaty'"),
    ("manifest_lies_about_shape", lambda d, o: _edit_manifest(
        d, lambda m: m["signatures"][0]["inputs"][0].update(shape=[None, 7])),
     ("verify", "tflite"), 2, r"records input 'x' of 'serving_default' as float32\[None, 7\]; "
                              r"the graph has float32\[None, 4\]"),
    ("signature_dtype_unknown_enum", lambda d, o: _signature_dtype(d, 999),
     ("verify", "tflite"), 2, r"records input 'x' of 'serving_default' as float32\[None, 4\]; "
                              r"the graph has <dtype enum 999>\[None, 4\]"),
    ("manifest_lies_about_names", lambda d, o: _edit_manifest(
        d, lambda m: m["signatures"][0]["inputs"][0].update(name="y")),
     ("verify", "tflite"), 2, r"lists inputs \['y'\] for signature 'serving_default'"),
    ("manifest_reference_path_traversal", lambda d, o: _edit_manifest(
        d, lambda m: m["signatures"][0]["references"][0].update(file=f"../../../../{o.name}")),
     ("inspect", "verify", "tflite"), 2, r"not a plain file name"),
    ("manifest_reference_absolute_path", lambda d, o: _edit_manifest(
        d, lambda m: m["signatures"][0]["references"][0].update(file=str(o))),
     ("inspect", "verify", "tflite"), 2, r"not a plain file name"),
    ("reference_declares_huge_array", lambda d, o: _huge_npz(d),
     ("tflite",), 2, r"declares shape \(100000000000, 4\) of float32 \(1600000000000 bytes\)"),
    ("reference_not_a_zip", lambda d, o: (d / RECORDS / "serving_default_0.npz")
     .write_bytes(b"PK\x03\x04 truncated"),
     ("tflite",), 2, r"serving_default_0\.npz is not a readable \.npz file"),
    ("symlink_reference_outside", lambda d, o: _link_outside(
        d, RECORDS / "serving_default_0.npz", o),
     ("inspect", "verify", "tflite"), 2, r"serving_default_0\.npz is a symlink to .*outside"),
    ("symlink_variables_outside", lambda d, o: _link_outside(d, DATA, o),
     ("inspect", "verify", "tflite"), 2, r"variables\.data-00000-of-00001 is a symlink to "
                                         r".*outside the SavedModel directory"),
    ("symlink_directory_outside", lambda d, o: (shutil.rmtree(d / "assets.extra"),
                                                (d / "assets.extra").symlink_to(o.parent)),
     ("inspect", "verify", "tflite"), 2, r"assets\.extra is a symlink to .*outside"),
]


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.is_symlink() or p.is_dir(),
                                       0 if p.is_dir() or p.is_symlink() else p.stat().st_size,
                                       p.lstat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("corrupt, commands, code, pattern",
                         [pytest.param(*v[1:], id=v[0]) for v in VARIANTS])
def test_corrupt_saved_model_fails_clearly_and_writes_nothing(tmp_path, base_model, capsys,
                                                              corrupt, commands, code, pattern):
    model = tmp_path / "model"
    shutil.copytree(base_model, model)
    outside = tmp_path / "outside_secret.npz"
    outside.write_bytes((base_model / RECORDS / "serving_default_0.npz").read_bytes())
    corrupt(model, outside)
    before = _snapshot(tmp_path)
    for command in commands:
        extra = ["--out", str(tmp_path / "m.tflite")] if command == "tflite" else []
        got = cli.main([command, str(model), *extra])
        err = capsys.readouterr().err
        assert got == code, (command, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"jax2tf-native {command}: error: "), err
        assert re.search(pattern, lines[0]), (command, lines[0])
        assert "Traceback" not in err
        assert "Fix" in lines[0], lines[0]
        assert _snapshot(tmp_path) == before, f"{command} wrote or changed files"


def test_inspect_reports_a_lying_manifest(tmp_path, base_model, capsys):
    """inspect still describes the graph, and notes where the manifest disagrees with it."""
    model = tmp_path / "model"
    shutil.copytree(base_model, model)
    _edit_manifest(model, lambda m: m["signatures"][0]["inputs"][0].update(shape=[None, 7]))
    assert cli.main(["inspect", str(model)]) == 0
    out = capsys.readouterr().out
    assert ("the manifest records input 'x' of 'serving_default' as float32[None, 7]; the graph "
            "has float32[None, 4]") in out


def test_load_npz_refuses_pickles(tmp_path):
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with zipfile.ZipFile(tmp_path / "r.npz", "w") as archive:
        archive.write(tmp_path / "o.npy", "inputs/x.npy")
    with pytest.raises(manifest_lib.ManifestError, match="Object arrays cannot be loaded"):
        manifest_lib.load_npz(tmp_path / "r.npz")


def test_debug_shows_the_traceback(tmp_path, base_model, capsys):
    model = tmp_path / "model"
    shutil.copytree(base_model, model)
    (model / DATA).unlink()
    from saved_model_tools.inspect import SavedModelReadError
    with pytest.raises(SavedModelReadError, match="data file"):
        cli.main(["inspect", str(model), "--debug"])
