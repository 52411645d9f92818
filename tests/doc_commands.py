"""The shell commands of a Markdown page, as a user would type them: each fenced bash block and each indented block
(four spaces, after a blank line) read line by line, continuation lines joined, comments dropped, `&&` chains cut
into their commands, shell loops (`for x in a b; do ... done`) unrolled over their values, variables filled from
the block's own assignments and from `variables`, leading `NAME=value` assignments (and `env`'s) taken as the
command's environment, and what only the shell reads (`nohup`, redirections, a trailing `&`, a pipe into `tee`)
left out. Only the commands of casan-hf's programs are kept (`is_ours`): Python, make, bash scripts and the
launchers; `git`, `cd` and the like are the user's own."""

import itertools
import re
import shlex
import textwrap
from dataclasses import dataclass, field


# A fenced bash block, an indented block (four spaces, after a blank line), or another fenced block (skipped whole,
# so that its indented lines are not taken for commands).
BLOCK = re.compile(r"```bash\n(?P<fenced>.*?)```|```\w*\n.*?```|\n\n(?P<indented>(?:    [^\n]*\n)+)", re.S)
LOOP = re.compile(r"^\s*for (?P<name>\w+) in (?P<values>[^;]+); do\s*")
DONE = re.compile(r"(?:^|;)\s*done\s*;?\s*$")
VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")
ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
PLACEHOLDER = re.compile(r"<[A-Za-z][\w .-]*>")
OPTIONAL = re.compile(r"\[(--[^\[\]]+)\]")
LAUNCHERS = ("torchrun", "accelerate", "make", "bash")
SHELL_ONLY = ("nohup",)
REDIRECTIONS = re.compile(r"^(?:\d?>>?|<|\d?>&\d|&>)")


@dataclass(frozen=True)
class Command:
    """One command of a page: its `argv` and `env` as the shell would run them, and `line`, the text it came from."""

    page: str
    line: str
    argv: tuple
    env: dict = field(default_factory=dict, hash=False)

    @property
    def program(self):
        return self.argv[0]

    def __str__(self):
        environment = " ".join(f"{name}={value}" for name, value in self.env.items())
        return f"{self.page}: {environment + ' ' if environment else ''}{shlex.join(self.argv)}"


def is_python(word):
    return word == "python" or word.endswith("/python")


def is_ours(argv):
    return bool(argv) and (is_python(argv[0]) or argv[0] in LAUNCHERS)


def blocks(text):
    """The page's shell blocks, each as its lines (continuations joined)."""
    for block in BLOCK.finditer(text):
        body = block["fenced"] or (textwrap.dedent(block["indented"]) if block["indented"] else "")
        if body:
            yield body.replace("\\\n", " ").splitlines()


def fill_placeholders(text, placeholders):
    for placeholder, value in placeholders.items():
        text = text.replace(placeholder, value)
    return OPTIONAL.sub(r"\1", text)


def fill(line, variables):
    """`line` with its `$NAME` and `${NAME}` filled; a variable the page does not set is an error naming it."""

    def value(match):
        name = match[1] or match[2]
        if name not in variables:
            raise KeyError(f"{line!r} reads ${name}, which neither its block nor the test sets: {sorted(variables)}")
        return variables[name]

    return VARIABLE.sub(value, line)


def split_command(words):
    """A command's environment and argv: its leading assignments (and `env`'s) apart, the shell's own words out."""
    env = {}
    words = list(words)
    while words and (ASSIGNMENT.match(words[0]) or words[0] == "env" or words[0] in SHELL_ONLY):
        word = words.pop(0)
        if ASSIGNMENT.match(word):
            name, _, value = word.partition("=")
            env[name] = value
    argv = []
    skip_next = False
    for word in words:
        if skip_next:
            skip_next = False
        elif word in ("|", "&"):
            break
        elif REDIRECTIONS.match(word):
            skip_next = word in (">", ">>", "<", "&>", "2>", "1>")
        else:
            argv.append(word)
    return env, tuple(argv)


def page_commands(page, text, variables, placeholders):
    """The commands of casan-hf's programs on a page, in order (`page` names them): each `<placeholder>` and
    synopsis word of `placeholders` filled with its value (a command's unknown `<placeholder>` is an error naming
    it), and a synopsis's optional flags (`[--flag VALUE]`) given."""
    commands = []
    for lines in blocks(fill_placeholders(text, placeholders)):
        known = dict(variables)
        loops = []  # (name, values) of the loops open at this line
        for line in lines:
            while match := LOOP.match(line):
                loops.append((match["name"], match["values"].split()))
                line = line[match.end() :]
            closing = 0
            while (body := DONE.sub("", line.rstrip())) != line.rstrip():
                line, closing = body, closing + 1
            for combination in itertools.product(*(values for _, values in loops)):
                bound = dict(zip((name for name, _ in loops), combination, strict=True))
                commands += line_commands(page, line, known, bound)
            del loops[len(loops) - closing :]
    return commands


def line_commands(page, line, known, bound):
    """The commands of one line (an `&&` chain), with the loops' `bound` variables; the block's assignments are
    recorded in `known`."""
    try:
        words = shlex.split(fill(line, {**known, **bound}), comments=True)
    except ValueError:  # a formula or an error message quoted in an indented block
        return []
    commands = []
    for part in split_chain(words):
        if len(part) == 1 and ASSIGNMENT.match(part[0]):
            name, _, value = part[0].partition("=")
            if not value.startswith("$("):  # a command's output: the test sets it (`variables`)
                known[name] = value
            continue
        env, argv = split_command(part)
        if is_ours(argv):
            if unknown := PLACEHOLDER.findall(shlex.join(argv)):
                raise KeyError(f"{line.strip()!r}: placeholders without a value: {unknown}")
            commands.append(Command(page, line.strip(), argv, env))
    return commands


def split_chain(words):
    part = []
    for word in words:
        if word in ("&&", ";"):
            yield part
            part = []
        else:
            part.append(word)
    yield part
