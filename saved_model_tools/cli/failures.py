"""How a command ends: one `jax2tf-native CMD: error: ...` line on stderr and an exit code.

Every failure prints one `PROG: error: ...` line on stderr and no traceback; `--debug`
(anywhere on the command line) re-raises instead, with the traceback. An exception no handler
anticipated is one line too, exit 1; Ctrl-C is exit 130.
"""
from __future__ import annotations

import argparse
import sys

EXIT_UNREADABLE = 2


def one_line(text: str, limit: int = 2000) -> str:
    """`text` on one line (multi-line messages joined), at most `limit` characters."""
    joined = " ".join(str(text).split())
    return joined if len(joined) <= limit else joined[:limit - 3] + "..."


def fail(args: argparse.Namespace, message: str, code: int, *, listed: bool = False) -> int:
    """Prints one error line for `args.prog` and returns `code`; re-raises under --debug.

    With `listed`, a message whose later lines list several problems ("  - ...") keeps one
    line per problem (at most 20), the first line being the error line."""
    if getattr(args, "debug", False) and sys.exc_info()[0] is not None:
        raise
    prog = getattr(args, "prog", None) or f"jax2tf-native {getattr(args, 'command', '')}".strip()
    head, *items = str(message).split("\n  - ") if listed else [message]
    print(f"{prog}: error: {one_line(head)}", file=sys.stderr)
    for item in items[:20]:
        print(f"  - {one_line(item, 1000)}", file=sys.stderr)
    if len(items) > 20:
        print(f"  ... and {len(items) - 20} more", file=sys.stderr)
    return code


def split_debug(argv: list[str] | None) -> tuple[list[str], bool]:
    """(argv without `--debug`, whether it was there): --debug may follow any sub-command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return [a for a in argv if a != "--debug"], "--debug" in argv


def run_handler(args: argparse.Namespace, prog: str, debug: bool) -> int:
    """Runs the sub-command; any exception it lets escape becomes one error line, exit 1."""
    args.prog, args.debug = f"{prog} {args.command}", debug
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print(f"{args.prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        return fail(args, f"{type(e).__name__}: {e} (run with --debug for the traceback)", 1)
