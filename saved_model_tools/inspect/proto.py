"""Reading a SavedModel directory with TF's protos, no JAX: saved_model.pb and the checkpoint.

The graph's SignatureDefs and function library (which function calls which), and the variables
of `variables/variables.index` with a check that their data shards are complete.
"""
from __future__ import annotations

import math
import os
import re
from pathlib import Path

import tensorflow as tf
from google.protobuf import message, text_format
from tensorflow.core.protobuf import saved_model_pb2

from saved_model_tools.inspect.report import SavedModelReadError, TensorReport, VariableReport

_VARIABLE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


def check_contained(directory: Path) -> None:
    """Refuses a SavedModel with a symlink leading outside it (or a cycle), before any read.

    TF and our readers follow symlinks; one pointing outside would make `inspect`/`verify`
    read (and report on) files the directory's owner did not ship.

    Raises:
      SavedModelReadError: naming the link and where it leads.
    """
    root = directory.resolve()
    for current, dirs, files in os.walk(directory, followlinks=False):
        for name in dirs + files:
            path = Path(current) / name
            if not path.is_symlink():
                continue
            try:
                target = path.resolve(strict=True)
            except (OSError, RuntimeError):
                raise SavedModelReadError(
                    f"{path} is a broken or looping symlink. Fix: copy the SavedModel with its "
                    f"files (cp -rL), not with links.") from None
            if not target.is_relative_to(root):
                raise SavedModelReadError(
                    f"{path} is a symlink to {target}, outside the SavedModel directory {root}; "
                    f"refusing to read it. Fix: copy the files into the directory (cp -rL).")


def _no_saved_model_message(directory: Path) -> str:
    """Why `directory` is no SavedModel, and which directory to pass instead: TF Serving's
    layout puts each version in a numbered folder (models/m/1), so a parent holding versions
    names its newest."""
    found = sorted(p.name for p in directory.iterdir())
    holding = [p for p in directory.iterdir()
               if (p / "saved_model.pb").is_file() or (p / "saved_model.pbtxt").is_file()]
    versions = sorted((p for p in holding if p.name.isdigit()), key=lambda p: int(p.name))
    if versions:
        return (f"{directory} has no saved_model.pb: it holds TF Serving version folders "
                f"{[p.name for p in versions]}. Fix: pass a version's folder, e.g. "
                f"{versions[-1]} (the newest).")
    if holding:
        return (f"{directory} has no saved_model.pb; {sorted(p.name for p in holding)} "
                f"hold(s) one. Fix: pass that folder, e.g. {holding[0]}.")
    if directory.name == "variables" and (directory.parent / "saved_model.pb").is_file():
        return (f"{directory} is the variables/ folder of a SavedModel. Fix: pass "
                f"{directory.parent}.")
    return (f"{directory} has no saved_model.pb (found: {found[:10]}). Fix: pass the SavedModel "
            f"directory itself, the one given to saved_model_tools.save or "
            f"tf.saved_model.save.")


def read_saved_model_proto(saved_model_dir: str | Path):
    """The parsed `SavedModel` proto of a directory.

    Raises:
      SavedModelReadError: the directory or saved_model.pb(txt) is missing, or does not parse.
    """

    directory = Path(saved_model_dir)
    if not directory.exists():
        raise SavedModelReadError(
            f"{directory} does not exist. Fix: pass the directory that contains saved_model.pb "
            f"(the one given to saved_model_tools.save or tf.saved_model.save).")
    if not directory.is_dir():
        raise SavedModelReadError(
            f"{directory} is a file, not a SavedModel directory. Fix: pass the directory that "
            f"contains saved_model.pb.")
    check_contained(directory)
    proto = saved_model_pb2.SavedModel()
    binary, text = directory / "saved_model.pb", directory / "saved_model.pbtxt"
    try:
        if binary.is_file():
            proto.ParseFromString(binary.read_bytes())
        elif text.is_file():
            text_format.Parse(text.read_text(), proto)
        else:
            raise SavedModelReadError(_no_saved_model_message(directory))
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError) as e:
        raise SavedModelReadError(
            f"{directory}/saved_model.pb is corrupt: it does not parse as a SavedModel proto "
            f"({e}). Fix: re-export the model; a partial copy or a truncated download leaves "
            f"such a file.") from None
    if not proto.meta_graphs:
        raise SavedModelReadError(
            f"{directory}/saved_model.pb holds no MetaGraph (empty or truncated). Fix: re-export "
            f"the model.")
    return proto


def select_meta_graph(proto, tag: str = "serve"):
    """The MetaGraph tagged `tag` (TF Serving loads "serve"), else the only one."""
    for meta_graph in proto.meta_graphs:
        if tag in meta_graph.meta_info_def.tags:
            return meta_graph
    if len(proto.meta_graphs) == 1:
        return proto.meta_graphs[0]
    tags = [list(m.meta_info_def.tags) for m in proto.meta_graphs]
    raise SavedModelReadError(f"no MetaGraph tagged {tag!r}; the model has tag sets {tags}. "
                              f"Fix: re-export with tags=['serve'] for TF Serving.")


def dtype_name(enum_value: int) -> str:
    """TF's name of a DataType enum value; "<dtype enum N>" for one TF does not know (a
    corrupt proto keeps unknown values)."""
    try:
        return tf.dtypes.as_dtype(enum_value).name
    except TypeError:
        return f"<dtype enum {enum_value}>"


def tensor_report(name: str, info, polymorphic_shape: str | None) -> TensorReport:
    """The `TensorReport` of a signature's TensorInfo (None shape for an unknown rank)."""
    if info.tensor_shape.unknown_rank:
        shape = None
    else:
        shape = tuple(None if d.size < 0 else int(d.size) for d in info.tensor_shape.dim)
    return TensorReport(name, dtype_name(info.dtype), shape, info.name, polymorphic_shape)


def function_edges(meta_graph) -> dict[str, set[str]]:
    """{function: functions it calls} from func-valued attributes and direct calls by op name."""
    library = {f.signature.name for f in meta_graph.graph_def.library.function}
    edges: dict[str, set[str]] = {}
    for fn in meta_graph.graph_def.library.function:
        called = edges.setdefault(fn.signature.name, set())
        for node in fn.node_def:
            called |= called_functions(node, library)
    return edges


def called_functions(node, library: set[str]) -> set[str]:
    """The library functions a graph node calls: by op name, or in func-valued attributes."""
    called = {node.op} & library
    for attr in node.attr.values():
        if attr.HasField("func"):
            called.add(attr.func.name)
        elif attr.HasField("list"):
            called.update(f.name for f in attr.list.func)
    return called & library


def signature_functions(meta_graph, signature_def, edges) -> tuple[str, ...]:
    """Functions reachable from the graph nodes that compute the signature's outputs."""
    library = set(edges)
    nodes = {n.name: n for n in meta_graph.graph_def.node}
    pending = [t.name.split(":")[0].lstrip("^") for t in signature_def.outputs.values()]
    seen_nodes: set[str] = set()
    functions: set[str] = set()
    while pending:
        name = pending.pop()
        if name in seen_nodes or name not in nodes:
            continue
        seen_nodes.add(name)
        node = nodes[name]
        functions |= called_functions(node, library)
        pending.extend(i.split(":")[0].lstrip("^") for i in node.input)
    reached, stack = set(), list(functions)
    while stack:
        fn = stack.pop()
        if fn not in reached:
            reached.add(fn)
            stack.extend(edges.get(fn, ()))
    return tuple(sorted(reached))



def read_variables(saved_model_dir: Path) -> tuple[VariableReport, ...]:
    """Name, dtype and shape of each variable in the SavedModel's checkpoint (() if none)."""
    prefix = saved_model_dir / "variables" / "variables"
    index = Path(str(prefix) + ".index")
    if not index.is_file():
        return ()
    try:
        reader = tf.train.load_checkpoint(str(prefix))
        shapes = reader.get_variable_to_shape_map()
        dtypes = reader.get_variable_to_dtype_map()
    except (tf.errors.OpError, ValueError) as e:
        raise SavedModelReadError(
            f"{index} is corrupt: TF cannot read the checkpoint index "
            f"({' '.join(str(getattr(e, 'message', e)).split())[:200]}). Fix: re-export the "
            f"model; a partial copy or a truncated download leaves such a file.") from None
    keys = [k for k in shapes if k != _OBJECT_GRAPH_KEY]
    if any(k.endswith(_VARIABLE_SUFFIX) for k in keys):  # TF2 object-based checkpoint
        keys = [k for k in keys if k.endswith(_VARIABLE_SUFFIX)]
    check_data_shards(prefix, sum(
        0 if dtypes[k] == tf.string else math.prod(int(d) for d in shapes[k]) * dtypes[k].size
        for k in keys))
    out = []
    for key in sorted(keys):
        dtype = dtypes[key]
        shape = tuple(int(d) for d in shapes[key])
        count = 1
        for d in shape:
            count *= d
        size = 0 if dtype == tf.string else count * dtype.size
        out.append(VariableReport(key.removesuffix(_VARIABLE_SUFFIX), dtype.name, shape, size))
    return tuple(out)



def check_data_shards(prefix: Path, needed_bytes: int) -> None:
    """The checkpoint's data shards exist and hold at least the variables' bytes."""
    shards = sorted(prefix.parent.glob(prefix.name + ".data-*-of-*"))
    expected = 1
    if shards:
        match = re.search(r"-of-(\d+)$", shards[0].name)
        expected = int(match.group(1)) if match else 1
    if len(shards) < expected or not shards:
        raise SavedModelReadError(
            f"{prefix.parent} has {len(shards)} of the checkpoint's {expected} data file(s) "
            f"({prefix.name}.data-*-of-{expected:05d} missing). Fix: copy the complete "
            f"variables/ directory.")
    held = sum(p.stat().st_size for p in shards)
    if held < needed_bytes:
        raise SavedModelReadError(
            f"{prefix.parent}: the checkpoint's data files hold {held} bytes but its variables "
            f"need {needed_bytes} (truncated). Fix: copy the complete variables/ directory.")
