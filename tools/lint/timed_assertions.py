"""Refuse a test that asserts a measured duration against an upper bound (``make lint``).

On a busy machine everything is slower (CI runs nine lanes on two cores at a load near 15; a cold run
failed on "shown 6.8 s after the report"), so ``assert took < 5`` tests the machine, not the code. A test
waits for the outcome with tests/waiting.py's deadline and checks order from the objects' own timestamps;
speed is measured in bench/ and written down in docs/benchmarks.md (docs/development.md, "Time in tests").

A measured duration is a name or attribute with took, elapsed, delay, duration, latency or lag among its
word parts (``reporting_took``, ``take_over_delay``), a clock reading minus something
(``time.monotonic() - started``; ``end - start`` where ``end = time.perf_counter()``), or a name assigned
from either. A lower bound (``took >= 10``) passes: load only makes things slower.

Usage: python tools/lint/timed_assertions.py PATH [PATH...]   (directories are searched for *.py)
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

DURATION_WORDS = frozenset(
    {"took", "elapsed", "delay", "delays", "duration", "durations", "latency", "latencies", "lag", "lags"}
)
# time.X(), or X() imported from time; loop.time() is asyncio's monotonic clock.
TIME_CLOCKS = frozenset({"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns"})
DATETIME_CLOCKS = frozenset({"now", "utcnow"})
# Calls that keep a duration a duration: round(took, 1), (end - start).total_seconds(), max(latencies).
DURATION_PRESERVING_CALLS = frozenset({"abs", "float", "int", "round", "max", "min", "sum", "mean", "median"})
UNITTEST_UPPER_BOUNDS = {"assertLess": 0, "assertLessEqual": 0, "assertGreater": 1, "assertGreaterEqual": 1}

WHY_AND_FIX = (
    "a measured duration under a bound fails on a busy machine: wait for the outcome with tests/waiting.py's "
    "eventually() (PATIENCE), check order from the objects' timestamps or events, and measure the speed in "
    'bench/ with its figure in docs/benchmarks.md (docs/development.md, "Time in tests")'
)

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    source: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.source} — {WHY_AND_FIX}"


def word_parts(identifier: str) -> list[str]:
    """``take_overDelay`` -> take, over, delay."""
    return [
        part.lower()
        for chunk in identifier.split("_")
        for part in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+", chunk)
    ]


def names_a_duration(identifier: str) -> bool:
    # An ALL_CAPS name is a configured constant (LEASE_DURATION), not something measured.
    return not identifier.isupper() and not DURATION_WORDS.isdisjoint(word_parts(identifier))


def _dotted(node: ast.expr) -> str | None:
    """``time.monotonic`` for that callee, ``asyncio.get_running_loop().time`` for that one, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        owner = _dotted(node.value)
        return None if owner is None else f"{owner}.{node.attr}"
    if isinstance(node, ast.Call):
        callee = _dotted(node.func)
        return None if callee is None else f"{callee}()"
    return None


def is_clock_call(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    callee = _dotted(node.func)
    if callee is None:
        return False
    owner, _, function = callee.rpartition(".")
    if function in TIME_CLOCKS:
        return owner in ("", "time") or (function == "time" and owner.lower().endswith(("loop", "loop()")))
    return function in DATETIME_CLOCKS and owner.endswith("datetime")


class Scope:
    """What the names assigned in a function (and the functions around it) hold: clock readings, durations."""

    def __init__(self, assignments: Sequence[tuple[str, ast.expr]]) -> None:
        self.clock_names: set[str] = set()
        self.duration_names: set[str] = set()
        # `took = end - start` is a duration only once `end = time.monotonic()` is known: to a fixed point.
        changed = True
        while changed:
            changed = False
            for name, value in assignments:
                if name not in self.clock_names and self.is_clock_reading(value):
                    self.clock_names.add(name)
                    changed = True
                if name not in self.duration_names and self.is_duration(value):
                    self.duration_names.add(name)
                    changed = True

    def is_clock_reading(self, node: ast.expr) -> bool:
        return is_clock_call(node) or (isinstance(node, ast.Name) and node.id in self.clock_names)

    def is_duration(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.duration_names or names_a_duration(node.id)
        if isinstance(node, ast.Attribute):
            return names_a_duration(node.attr)
        if isinstance(node, ast.Subscript):
            return self.is_duration(node.value)
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Sub):
                return self.is_clock_reading(node.left) or self.is_duration(node.left)
            if isinstance(node.op, ast.Add | ast.Mult):
                return self.is_duration(node.left) or self.is_duration(node.right)
            if isinstance(node.op, ast.Div | ast.FloorDiv):
                return self.is_duration(node.left)
            return False
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr == "total_seconds":
                return self.is_duration(node.func.value)
            callee = _dotted(node.func)
            preserving = callee is not None and callee.rpartition(".")[2] in DURATION_PRESERVING_CALLS
            return preserving and bool(node.args) and self.is_duration(node.args[0])
        return False


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a scope, without those of the functions and classes defined in it."""
    for child in ast.iter_child_nodes(scope):
        yield child
        if not isinstance(child, _SCOPES):
            yield from _own_nodes(child)


def _assignments(scope: ast.AST) -> list[tuple[str, ast.expr]]:
    found: list[tuple[str, ast.expr]] = []
    for node in _own_nodes(scope):
        if isinstance(node, ast.Assign):
            found += [(target.id, node.value) for target in node.targets if isinstance(target, ast.Name)]
        elif (
            isinstance(node, ast.AnnAssign | ast.NamedExpr)
            and isinstance(node.target, ast.Name)
            and node.value
        ):
            found.append((node.target.id, node.value))
    return found


def _upper_bounded(test: ast.expr) -> Iterator[ast.expr]:
    """The operands of ``test`` that it asserts are below something: ``a`` in ``a < b`` and in ``b >= a``."""
    if isinstance(test, ast.BoolOp):
        for value in test.values:
            yield from _upper_bounded(value)
    elif isinstance(test, ast.Compare):
        operands = [test.left, *test.comparators]
        for position, operator in enumerate(test.ops):
            if isinstance(operator, ast.Lt | ast.LtE):
                yield operands[position]
            elif isinstance(operator, ast.Gt | ast.GtE):
                yield operands[position + 1]


def _unittest_upper_bounded(call: ast.Call) -> Iterator[ast.expr]:
    """``a`` of ``self.assertLess(a, b)`` and of ``self.assertGreater(b, a)``."""
    if not isinstance(call.func, ast.Attribute) or call.func.attr not in UNITTEST_UPPER_BOUNDS:
        return
    position = UNITTEST_UPPER_BOUNDS[call.func.attr]
    if len(call.args) > position:
        yield call.args[position]
    keyword = ("first", "second")[position]
    yield from (argument.value for argument in call.keywords if argument.arg == keyword)


class _Checker(ast.NodeVisitor):
    def __init__(self, path: str, source: str) -> None:
        self.path = path
        self.source = source
        self.findings: list[Finding] = []
        self._assignment_stack: list[list[tuple[str, ast.expr]]] = []
        self._scope_stack: list[Scope] = []

    def visit_Module(self, node: ast.Module) -> None:
        self._within(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._within(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._within(node)

    def _within(self, scope: ast.Module | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        # A function sees the names of the functions around it (closures) as well as its own.
        outer = self._assignment_stack[-1] if self._assignment_stack else []
        assignments = outer + _assignments(scope)
        self._assignment_stack.append(assignments)
        self._scope_stack.append(Scope(assignments))
        self.generic_visit(scope)
        self._scope_stack.pop()
        self._assignment_stack.pop()

    def visit_Assert(self, node: ast.Assert) -> None:
        self._check(node, _upper_bounded(node.test))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        self._check(node, _unittest_upper_bounded(node))
        self.generic_visit(node)

    def _check(self, node: ast.stmt | ast.expr, bounded: Iterable[ast.expr]) -> None:
        scope = self._scope_stack[-1]
        if any(scope.is_duration(operand) for operand in bounded):
            text = ast.get_source_segment(self.source, node) or ast.unparse(node)
            self.findings.append(Finding(self.path, node.lineno, " ".join(text.split())))


def check_source(source: str, path: str = "<source>") -> list[Finding]:
    checker = _Checker(path, source)
    checker.visit(ast.parse(source, filename=path))
    return checker.findings


def python_files(paths: Iterable[Path]) -> Iterator[Path]:
    for path in paths:
        yield from sorted(path.rglob("*.py")) if path.is_dir() else [path]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("paths", nargs="+", type=Path, help="files, or directories to search for *.py")
    arguments = parser.parse_args(argv)
    findings: list[Finding] = []
    unparsed: list[str] = []
    for path in python_files(arguments.paths):
        try:
            findings += check_source(path.read_text(encoding="utf-8"), str(path))
        except SyntaxError as error:
            # What does not parse cannot be vouched for; ruff names the error as well.
            unparsed.append(f"{path}:{error.lineno}: not checked, it does not parse ({error.msg})")
    for line in [*map(str, findings), *unparsed]:
        print(line)
    if findings:
        print(f"{len(findings)} timed assertion(s)")
    return 1 if findings or unparsed else 0


if __name__ == "__main__":
    sys.exit(main())
