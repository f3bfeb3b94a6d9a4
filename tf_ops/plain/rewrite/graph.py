"""Def-use facts of one region, for the rewrite passes."""
from __future__ import annotations

import collections
import dataclasses
import re

from tf_ops.plain.program import Op, Region

_NAME = re.compile(r'loc\("([^"]*)"')


def primitive_of(op: Op) -> str:
    """The JAX primitive an op was lowered from: the last part of its location's name
    ("jit(f)/erfc" -> "erfc"); "" when the location has none."""
    m = _NAME.match(op.location)
    return m.group(1).rsplit("/", 1)[-1] if m else ""


@dataclasses.dataclass
class RegionGraph:
    """Who defines and who uses each value of one region (uses from nested regions and the
    region's own returns count as uses by `None`: outside any op of the region)."""
    region: Region
    producer: dict      # value -> index of its op in region.ops
    users: dict         # value -> list of op indices (None: a return or a nested region)

    @classmethod
    def of(cls, region: Region) -> "RegionGraph":
        producer = {v: i for i, op in enumerate(region.ops) for v in op.results}
        users = collections.defaultdict(list)
        for i, op in enumerate(region.ops):
            for v in op.operands:
                users[v].append(i)
            for nested in op.regions:
                for v in _captured(nested):
                    users[v].append(None)
        for v in region.returns:
            users[v].append(None)
        return cls(region, producer, users)

    def op(self, value) -> Op | None:
        """The op of this region that defines `value` (None: an argument or a capture)."""
        i = self.producer.get(value)
        return self.region.ops[i] if i is not None else None

    def single_user(self, value) -> int | None:
        """The index of the only op that uses `value`, or None."""
        users = self.users.get(value, [])
        return users[0] if len(users) == 1 else None


def _captured(region: Region) -> set:
    """Values a nested region (and the regions inside it) uses without defining them."""
    defined = set(region.args)
    used = set()
    for op in region.ops:
        used.update(op.operands)
        for nested in op.regions:
            used.update(_captured(nested))
        defined.update(op.results)
    used.update(region.returns)
    return used - defined


def replace_ops(region: Region, replacements: dict, removed: set) -> Region:
    """A copy of `region` with op i replaced by `replacements[i]` and the ops in `removed`
    dropped."""
    ops = tuple(replacements.get(i, op) for i, op in enumerate(region.ops) if i not in removed)
    return dataclasses.replace(region, ops=ops)


def map_regions(program, fn):
    """`program` with `fn(region)` applied to every region, innermost first."""

    def visit(region: Region) -> Region:
        ops = []
        for op in region.ops:
            if op.regions:
                op = dataclasses.replace(op, regions=tuple(visit(r) for r in op.regions))
            ops.append(op)
        return fn(dataclasses.replace(region, ops=tuple(ops)))

    functions = {name: dataclasses.replace(f, body=visit(f.body))
                 for name, f in program.functions.items()}
    return dataclasses.replace(program, functions=functions)
