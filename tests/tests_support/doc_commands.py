"""Find the `cua-rl ...` command lines in Markdown and check them against the CLI.

A mention is a code span or a code-block line that starts with (or contains)
`cua-rl`; its words are walked down the click command tree: each subcommand must
exist, and each `--option` must be an option of the command reached (a group's
own options count while the walk is at the group). Words that are placeholders
(`COMMAND`, `<id>`, `...`, `[--x]` brackets are dropped but the option inside is
checked) end the walk without a verdict. Used by tests/unit/test_doc_commands.py.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

import click

SPAN = re.compile(r"`([^`\n]*cua-rl [^`\n]*)`")
LEAD = re.compile(r"^(?:\$ )?(?:[A-Z_][A-Z0-9_]*=\S* |sudo (?:-E )?|\S*/)*cua-rl ")
"""What may come before `cua-rl` in a command line: a prompt, VAR=value, sudo, a path."""
FENCE = re.compile(r"^```")
STOP = {"|", "||", "&&", ";", ">", ">>", "2>", "2>&1", "#", "<"}


@dataclass(frozen=True)
class Mention:
    where: str
    line: str


def mentions(text: str, where: str) -> Iterator[Mention]:
    """Every `cua-rl ...` mention of a Markdown text (continuation lines joined)."""
    in_block = False
    pending = ""
    for number, raw in enumerate(text.splitlines(), 1):
        if FENCE.match(raw.strip()):
            in_block = not in_block
            pending = ""
            continue
        if in_block:
            line = pending + raw.strip()
            if line.endswith("\\"):
                pending = line[:-1] + " "
                continue
            pending = ""
            if LEAD.match(line):
                yield Mention(f"{where}:{number}", line[line.index("cua-rl ") :])
            continue
        for span in SPAN.findall(raw):
            if LEAD.match(span.strip()):
                yield Mention(f"{where}:{number}", span[span.index("cua-rl ") :])


def _words(line: str) -> list[str]:
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        words = line.split()
    out = []
    for word in words[1:]:
        if word in STOP or word.startswith(("|", ">", "2>")):
            break
        out.extend(w for w in re.split(r"[\[\]|]", word) if w)
    return out


def _placeholder(word: str) -> bool:
    return (
        word.isupper()
        or word.startswith(("<", "{", "$"))
        or "..." in word
        or word in {"…"}
        or not re.match(r"^[a-z][a-z0-9-]*$", word)
    )


def problems(mention: Mention, root: click.Group) -> list[str]:
    """What in `mention` the CLI does not have: unknown commands and options."""
    ctx = click.Context(root, info_name="cua-rl")
    command: click.Command = root
    out = []
    for word in _words(mention.line):
        if word.startswith("--"):
            name = word.split("=", 1)[0]
            if name in ("--help", "--version"):
                continue
            known = {
                o
                for p in command.params
                if isinstance(p, click.Option)
                for o in (*p.opts, *p.secondary_opts)
            }
            if name not in known:
                out.append(
                    f"{mention.where}: `{mention.line}`: {command.name or 'cua-rl'} "
                    f"has no option {name}"
                )
            continue
        if word.startswith("-"):
            continue
        if isinstance(command, click.Group):
            sub = command.get_command(ctx, word)
            if sub is None:
                if not _placeholder(word) and "=" not in word:
                    out.append(
                        f"{mention.where}: `{mention.line}`: no command "
                        f"{word!r} under {command.name or 'cua-rl'}"
                    )
                break
            command = sub
            continue
        # an argument of a leaf command (a path, an override): options may follow
    return out
