"""Size limits of the library: files under 600 lines (Python data tables under 800), functions
under 60 lines of code (from the first statement after the docstring to the end). Prints each
breach; exits 1 if there is one."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agentgym", "envs", "baselines", "leaderboard")
FILE_LINES, TABLE_LINES, FUNCTION_LINES = 600, 800, 60


def is_table(tree: ast.Module) -> bool:
    """A module of data: no function or class definitions, only assignments."""
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return not any(isinstance(n, defs) for n in ast.walk(tree))


def breaches(path: Path) -> list[str]:
    text = path.read_text()
    tree = ast.parse(text)
    lines = text.count("\n")
    limit = TABLE_LINES if is_table(tree) else FILE_LINES
    out = []
    rel = path.relative_to(ROOT)
    if lines >= limit:
        out.append(f"{rel}: {lines} lines (limit {limit})")
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                len(body) > 1
                and isinstance(body[0], ast.Expr)
                and isinstance(getattr(body[0], "value", None), ast.Constant)
            ):
                body = body[1:]
            n = (node.end_lineno or node.lineno) - body[0].lineno + 1
            if n >= FUNCTION_LINES:
                out.append(
                    f"{rel}:{node.lineno}: {node.name} is {n} lines (limit {FUNCTION_LINES})"
                )
    return out


def main() -> int:
    found = [b for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py")) for b in breaches(p)]
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
