"""A griffe extension (mkdocs.yml, mkdocstrings' `extensions:`): `Example:` is an Examples section.

Our docstrings head their doctests `Example:` (the Google style guide's spelling, which the
suite's doctest collection does not care about). griffe's Google parser reads `Example:` as an
admonition and `Examples:` as the section that renders `>>>` lines as code; as an admonition,
a doctest's output such as `[TensorShape([4, 2])]` is read as a Markdown link and breaks the
strict build. This renames the heading in the parsed copy only; the source is unchanged.
"""
from __future__ import annotations

import re

import griffe

_EXAMPLE_HEADING = re.compile(r"^(\s*)Example:[ \t]*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    def on_instance(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _EXAMPLE_HEADING.sub(r"\1Examples:", obj.docstring.value)
