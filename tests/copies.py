"""The check behind tests/test_copies.py, as transformers' `utils/check_copies.py`: code copied from transformers is
marked where it stands, and fails the suite when the installed transformers no longer has it.

A block is opened by `# Copied from transformers.<dotted path>` and closed by `# End of copy` at the same
indentation; blocks do not nest. `with old->new,old2->new2` after the path applies each replacement, in order, to
transformers' source before comparing. The block's lines (trailing whitespace stripped, common indentation removed)
must be a run of consecutive lines of the named object's source, with the same indentation relative to each other.
Blank lines are left out on both sides: they change nothing a copy does, and copies drop or add them (DeBERTa-v2's
encoder drops four of transformers'), while every other line, comments included, counts. Only the exact form is a
marker (a comment that goes on after the path, such as `..., after its layers`, is not), and an `# End of copy`
that closes no block is an error, so a mistyped marker is caught by its orphaned end rather than skipped."""

import difflib
import importlib
import inspect
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import transformers


MARKER = re.compile(
    r"^(?P<indent>[ \t]*)# Copied from (?P<target>transformers(?:\.[A-Za-z_]\w*)+)"
    r"(?: with (?P<replacements>\S.*?))?\s*$"
)
END = re.compile(r"^(?P<indent>[ \t]*)# End of copy\s*$")


@dataclass(frozen=True)
class Copy:
    """One marked block: where its marker stands, what it names, its replacements and its lines."""

    path: str  # relative to the scanned tree's root
    line: int  # of the marker, 1-based
    target: str
    replacements: tuple[tuple[str, str], ...]
    lines: tuple[str, ...]  # from the line after the marker


def parse_replacements(text):
    """`old->new,old2->new2` as pairs; None where a pair has no `->` or nothing to replace."""
    pairs = tuple(tuple(part.strip() for part in pair.split("->", 1)) for pair in text.split(","))
    return None if any(len(pair) != 2 or not pair[0] for pair in pairs) else pairs


def scan(path, root):
    """The file's marked blocks and the errors of its markers (an end missing or closing nothing, bad `with`)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    name = path.relative_to(root).as_posix()
    copies, errors = [], []
    opened = None  # (line number, marker match) of the block being read
    for number, line in enumerate(lines, 1):
        marker, end = MARKER.match(line), END.match(line)
        if opened is not None and end and end["indent"] == opened[1]["indent"]:
            start, match = opened
            replacements = parse_replacements(match["replacements"]) if match["replacements"] else ()
            if replacements is None:
                errors.append(
                    f"{name}:{start}: `with {match['replacements']}` is not `old->new` pairs joined by commas"
                )
            else:
                block = tuple(lines[start : number - 1])
                copies.append(Copy(name, start, match["target"], replacements, block))
            opened = None
        elif marker or end:
            if opened is not None:
                errors.append(
                    f"{name}:{opened[0]}: `# Copied from {opened[1]['target']}` has no `# End of copy` at its "
                    f"indentation before line {number}"
                )
            elif end:
                errors.append(f"{name}:{number}: `# End of copy` closes no `# Copied from transformers...` marker")
            opened = (number, marker) if marker else None
    if opened is not None:
        errors.append(
            f"{name}:{opened[0]}: `# Copied from {opened[1]['target']}` has no `# End of copy` at its indentation"
        )
    return copies, errors


def resolve(target):
    """The object a dotted path names: the longest prefix that imports as a module, then attributes. Raises
    LookupError naming what is missing; a module that exists but fails to import raises its own error."""
    parts = target.split(".")
    for split in range(len(parts), 0, -1):
        module_name = ".".join(parts[:split])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name and (module_name == error.name or module_name.startswith(error.name + ".")):
                continue
            raise
        break
    for attribute in parts[split:]:
        if not hasattr(obj, attribute):
            raise LookupError(f"{module_name} has no `{attribute}`")
        obj, module_name = getattr(obj, attribute), f"{module_name}.{attribute}"
    return obj


def dedented(lines):
    """Trailing whitespace stripped and the common indentation removed: equal for two runs of lines exactly when
    they agree up to one indentation shift of them all."""
    return textwrap.dedent("\n".join(line.rstrip() for line in lines)).split("\n")


def drift(copy):
    """None if the block is in its object's source; otherwise the failure, with a diff against the nearest run."""
    head = f"{copy.path}:{copy.line}: `# Copied from {copy.target}` (transformers {transformers.__version__})"
    try:
        obj = resolve(copy.target)
    except LookupError as error:
        return f"{head} names no object: {error}"
    try:
        source_lines, source_start = inspect.getsourcelines(obj)
        source_file = Path(inspect.getsourcefile(obj))
    except (OSError, TypeError) as error:
        return f"{head} names an object without source code: {error}"
    text = "".join(source_lines)
    for old, new in copy.replacements:
        text = text.replace(old, new)
    # Blank lines are left out on both sides, each kept with its line number in its file for the diff's header.
    source = [(number, line) for number, line in enumerate(text.splitlines(), source_start) if line.strip()]
    block = [(number, line) for number, line in enumerate(copy.lines, copy.line + 1) if line.strip()]
    if not block:
        return f"{head} copies no lines"
    copied = dedented(line for _, line in block)
    size = len(copied)

    def run(start, size):
        return dedented(line for _, line in source[start : start + size])

    def likeness(start):
        return difflib.SequenceMatcher(None, run(start, size), copied, autojunk=False).ratio()

    starts = range(max(len(source) - size + 1, 1))
    if any(source[start][1].strip() == copied[0].strip() and run(start, size) == copied for start in starts):
        return None
    # The nearest run: found by the likeness of runs as long as the copy, then aligned line by line with the copy
    # around there, so that lines added to or removed from the source show as such.
    start = max(starts, key=likeness)
    around = range(max(start - size, 0), min(start + 2 * size, len(source)))
    stripped = [line.strip() for line in copied]
    aligned = difflib.SequenceMatcher(None, [source[i][1].strip() for i in around], stripped, autojunk=False)
    matches = [match for match in aligned.get_matching_blocks() if match.size]
    if matches:
        first, last = matches[0], matches[-1]
        end = around.start + min(last.a + size - last.b, len(around))
        start = around.start + max(first.a - first.b, 0)
        size = end - start
    try:
        shown_file = source_file.relative_to(Path(transformers.__file__).parents[1]).as_posix()
    except ValueError:
        shown_file = source_file.as_posix()
    replaced = " with " + ",".join(f"{old}->{new}" for old, new in copy.replacements) if copy.replacements else ""
    diff = difflib.unified_diff(
        copied,
        run(start, size),
        fromfile=f"{copy.path}:{block[0][0]}-{block[-1][0]} (the copy)",
        tofile=f"{shown_file}:{source[start][0]}-{source[start + size - 1][0]} (the source's nearest run{replaced})",
        lineterm="",
    )
    return (
        f"{head} drifted from its source: update the copy to the source's lines (+), or the replacements, or mark "
        "it no longer a copy\n" + "\n".join(diff)
    )


def check_copies(folder, root):
    """Every failure of the marked copies in the `.py` files under `folder`, paths named relative to `root`."""
    failures = []
    for path in sorted(Path(folder).rglob("*.py")):
        copies, errors = scan(path, Path(root))
        failures += errors
        failures += [failure for copy in copies if (failure := drift(copy)) is not None]
    return failures
