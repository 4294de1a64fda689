"""The map in docs/architecture.md stays true: imports only point down its layer table, and modules stay small."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "cascade"
MAX_LINES = 400
# Over the limit, with the reason and who takes it down (remove the entry when done).
OVERSIZED: dict[str, str] = {}


def layer_table() -> dict[str, int]:
    """Package or module name → layer, from the 'Packages and layers' table of docs/architecture.md."""
    text = (ROOT / "docs/architecture.md").read_text(encoding="utf-8")
    layers: dict[str, int] = {"cascade": 0}
    for number, units in re.findall(r"^\| (\d+) \| ([^|]+) \|", text, flags=re.M):
        for unit in re.findall(r"`([\w.]+)`", units):
            layers[unit] = int(number)
    return layers


def unit_of(module: str) -> str:
    """'cascade.stages.probes.session' → 'stages'; 'cascade.models' → 'models'; 'cascade' → 'cascade'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of a cascade module in ``path``, lazy and TYPE_CHECKING imports included."""
    found: list[tuple[int, str]] = []
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "cascade"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the importing module's package
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            if base.split(".")[0] == "cascade":
                found.append((node.lineno, base))
    return found


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def unit_of_path(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return unit_of(".".join(parts[:-1] if parts[-1] == "__init__" else parts))


def test_every_package_of_cascade_has_a_layer() -> None:
    layers = layer_table()
    units = {unit_of_path(p) for p in modules()}
    assert units - set(layers) == set(), "add them to the layer table of docs/architecture.md"


def test_imports_only_point_down_the_layers() -> None:
    layers = layer_table()
    upward: list[str] = []
    for path in modules():
        own = unit_of_path(path)
        for line, module in imports(path):
            target = unit_of(module)
            if target != own and layers.get(target, 99) >= layers.get(own, -1):
                rel = path.relative_to(ROOT)
                where = f"{rel}:{line} ({own}, layer {layers.get(own)})"
                upward.append(f"{where} imports {module} (layer {layers.get(target)})")
    assert upward == [], "imports from the same or a higher layer:\n" + "\n".join(upward)


def test_no_module_grows_past_the_limit() -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines()) for p in modules()}
    over = {path: n for path, n in sizes.items() if n > MAX_LINES and path not in OVERSIZED}
    assert over == {}, f"split these modules (limit {MAX_LINES} lines): {over}"
    assert all(sizes.get(path, 0) > MAX_LINES for path in OVERSIZED), "an exception is no longer needed: remove it"


def test_no_test_module_imports_another_test_module() -> None:
    """What tests share lives in support modules (tests/support.py, …) or conftest fixtures: importing a test module
    runs its collection-time code twice and hides which module owns a fixture."""
    offenders: list[str] = []
    for path in sorted((ROOT / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            for name in names:
                leaf = name.split(".")[-1]
                if name.startswith("tests.") and (leaf.startswith("test_") or leaf == "conftest"):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert offenders == [], "move the shared code into a support module:\n" + "\n".join(offenders)


def _import_graph() -> dict[str, set[str]]:
    """Module → the cascade modules it imports (a name imported from a module counts as that module)."""
    graph: dict[str, set[str]] = {}
    for path in modules():
        parts = path.relative_to(ROOT).with_suffix("").parts
        graph[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = {m for _, m in imports(path)}

    def module(name: str) -> str:
        while name and name not in graph:
            name = name.rpartition(".")[0]
        return name

    return {m: {module(n) for n in names} - {"", m} for m, names in graph.items()}


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, edges = work[-1]
            nxt = next((e for e in edges if e not in index or e in stack), None)
            if nxt is not None and nxt not in index:
                index[nxt] = low[nxt] = len(index)
                stack.append(nxt)
                work.append((nxt, iter(sorted(graph[nxt]))))
                continue
            if nxt is not None:
                low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(group)
    return found


# Circles known and not yet cut, with the reason (remove the entry when done).
KNOWN_CIRCLES: dict[frozenset[str], str] = {
    frozenset({"cascade.execution.envs", "cascade.execution.resolved"}): "envs.py imports resolved.py lazily to "
    "resolve a commit's CI dependencies, and resolved.py builds on envs.py's specs (the environments' owner splits it)",
}


def test_no_import_circle_beyond_a_package_and_its_own_modules() -> None:
    """A package's __init__ may import its modules and they the package's names; any other circle (such as the
    benchmark's driver and its executors once formed) is a design knot."""
    knots = []
    for group in _circles(_import_graph()):
        top = min(group, key=len)
        if not all(m == top or m.startswith(top + ".") for m in group) and frozenset(group) not in KNOWN_CIRCLES:
            knots.append(sorted(group))
    assert knots == [], f"import circles: {knots}"


# The published SWE-bench dev data's own file and folder names (its README): only cascade/bench/data.py knows them.
SWEBENCH_NAMES = re.compile(
    r"(?:lite|verified)\.(?:tasks|preds)\.jsonl|all_preds\.jsonl|(?:coder|moatless-\w+)-lite\b|resolved-submissions"
)


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a Python file that are not docstrings (a docstring may show a command line)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_only_cascade_bench_reads_the_swebench_data_files() -> None:
    """Scripts and tests reach the dev data through cascade.bench.data (DevData, the loaders): one reader of its
    layout, so a change of the data's files is one change."""
    own = ROOT / "cascade" / "bench"
    files = [*PACKAGE.rglob("*.py"), *(ROOT / "benchmarks").glob("*.py"), *(ROOT / "tests").glob("*.py")]
    readers = [
        f"{path.relative_to(ROOT)}:{line}: {text[:60]!r}"
        for path in sorted(files)
        if own not in path.parents and path != Path(__file__).resolve()
        for line, text in _code_strings(path)
        if SWEBENCH_NAMES.search(text)
    ]
    assert readers == [], "read the SWE-bench data through cascade.bench.data:\n" + "\n".join(readers)


def test_comments_point_into_the_docs_not_at_tracker_issues() -> None:
    """A comment citing a tracker issue by number means nothing to a reader of this repository: say why, or point
    into docs/."""
    cited = re.compile(r"\bissues? #?\d+", re.I)
    files = [*PACKAGE.rglob("*.py"), *(ROOT / "benchmarks").glob("*.py"), *(ROOT / "tests").glob("*.py")]
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}"
        for path in sorted(files)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if cited.search(line.replace("linked issue #", ""))
    ]
    assert found == [], "\n".join(found)
