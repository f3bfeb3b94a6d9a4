"""griffe extensions (mkdocs.yml, mkdocstrings' `extensions:`) that adjust how our docstrings parse.

`ExampleSections`: `Example:` is an Examples section. `GroupedParameters`: an entry documenting
several parameters (`rtol, atol: ...`) becomes one entry per parameter (see
`split_grouped_entries`).

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


_SECTION = re.compile(r"^(\s*)(Args|Arguments|Parameters|Attributes|Keyword Args):\s*$")
_ENTRY = re.compile(r"^(\s*)(\**\w+(?:,\s*\**\w+)+)(\s*\([^)]*\))?:(.*)$")


def split_grouped_entries(docstring: str) -> str:
    """`rtol, atol: the tolerances.` in an Args or Attributes section becomes one entry per name,
    each with the description, so that each shows its own type from the signature.

    Our docstrings document parameters that go together on one line; griffe's Google parser
    reads "rtol, atol" as one parameter that matches no annotation, and the API page showed it
    without a type. The source is unchanged (the parsed copy only, as above).

    Example:
      >>> print(split_grouped_entries("Args:\\n  rtol, atol: tolerances.\\n    More.\\n"))
      Args:
        rtol: tolerances.
          More.
        atol: tolerances.
          More.
      <BLANKLINE>
    """
    lines, out, i = docstring.split("\n"), [], 0
    section_indent = entry_indent = None
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        header = _SECTION.match(line)
        if header:
            section_indent, entry_indent = len(header.group(1)), None
        elif section_indent is not None and line.strip() and indent <= section_indent:
            section_indent = None
        elif section_indent is not None and line.strip() and entry_indent is None:
            entry_indent = indent
        grouped = _ENTRY.match(line) if section_indent is not None else None
        if grouped and indent == entry_indent:
            body = []
            while (i + 1 < len(lines) and lines[i + 1].strip()
                   and len(lines[i + 1]) - len(lines[i + 1].lstrip()) > entry_indent):
                i += 1
                body.append(lines[i])
            for name in (n.strip() for n in grouped.group(2).split(",")):
                out.append(f"{grouped.group(1)}{name}{grouped.group(3) or ''}:{grouped.group(4)}")
                out += body
        else:
            out.append(line)
        i += 1
    return "\n".join(out)


class GroupedParameters(griffe.Extension):
    def on_instance(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = split_grouped_entries(obj.docstring.value)
