"""The built-in rule lists: what each list in the config holds by default (cascade/config.py). A user's config
replaces a list (``static.reject_rules``) or adds to it (``static.extend_reject_rules``)."""

from __future__ import annotations

DEFAULT_TEST_GLOBS = [
    "tests/**",
    "test/**",
    "testing/**",
    "**/tests/**",
    "**/test/**",
    "test_*.py",
    "**/test_*.py",
    "*_test.py",
    "**/*_test.py",
    "conftest.py",
    "**/conftest.py",
]

DEFAULT_DOCS_GLOBS = ["docs/**", "doc/**", "*.md", "*.rst", "*.txt", "**/*.rst"]

DEFAULT_RUFF_SELECT = ["F", "E9", "T10"]  # T10: debugger calls and imports (ruff:T100 below)

# Rule classes that may reject. Each one earned its place by zero rejections of the gold and
# officially-resolved SWE-bench patches measured so far; see `cascade bench scan static-soundness` and its results in
# benchmarks/results/static_soundness.md (per-class counts of new diagnostics on acceptable and defect patches).
DEFAULT_REJECT_RULES = [
    "ruff:E999",  # syntax error (older ruff name)
    "ruff:syntax-error",  # syntax error (ruff >= 0.5 reports it without a code)
    # an undefined name on a line the patch added: a crash waiting for its branch to run, blocked by every human
    # reviewer. Measured (benchmarks/results/scans/undefined-names/summary.md): it also rejects label-acceptable
    # patches whose tests never reach the branch (e.g. marscode-agent on sympy-21614 returns `MatrixKind(...)` never
    # imported); each such case is listed there with its line. The same rules on unchanged lines stay evidence.
    "ruff:F821:added-line",
    "pyright:reportUndefinedVariable:added-line",
    "ruff:F822",  # undefined name in __all__
    "ruff:F823",  # local variable referenced before assignment
    "ruff:F706",  # return outside function
    "ruff:F704",  # yield outside function
    "ruff:F701",  # break outside loop
    "ruff:F702",  # continue outside loop
    # not F631/F632 (assert on a tuple, `is` with a literal): suspicious, but the code runs, so not an error class
    "pyright:reportMissingImports:in-repo",  # unresolved import of a module of the repository itself
    "pyright:reportAttributeAccessIssue:in-repo-module",  # `from pkg import name` where the in-repo module lacks it
    "pyright:reportCallIssue:in-repo",  # wrong arity / unknown keyword for an in-repo callee
    # Measured on the acceptable dev controls (benchmarks/results/new_user_rules.md: 54 gold and 72 resolved
    # patches of the fetchable repositories, rules-only arm): 0 rejects each. Not here, each for the acceptable
    # patch it rejected there: pyright:reportCallIssue:stdlib (gold sympy-12171, str.join's overloads) and
    # ruff:T201:added-library-line (a resolved astropy-12907 patch prints in library code).
    "ruff:T100",  # a debugger left in: breakpoint(), pdb.set_trace(), import pdb
    "pyright:reportCallIssue:third-party",  # wrong arity / unknown keyword for a callee of a stubbed package
]

ARTIFACT_FILES: dict[str, str] = {  # basename glob → what it is (cascade/stages/hygiene.py)
    "*.pyc": "Python bytecode",
    "*.pyo": "Python bytecode",
    "*.so": "compiled extension",
    "*.pyd": "compiled extension",
    "*.dll": "compiled library",
    "*.dylib": "compiled library",
    "*.o": "object file",
    "*.obj": "object file",
    "*.sqlite": "database",
    "*.sqlite3": "database",
    "*.db": "database",
    "*.pickle": "pickle",
    "*.pkl": "pickle",
    ".coverage": "coverage data",
    ".coverage.*": "coverage data",
    "*.orig": "merge/patch leftover",
    "*.rej": "merge/patch leftover",
    "*~": "editor backup",
    "*.swp": "editor swap file",
    "*.swo": "editor swap file",
    ".#*": "editor lock file",
    "#*#": "editor autosave",
    "*.bak": "backup file",
    ".DS_Store": "OS metadata",
}
ARTIFACT_DIRS: dict[str, str] = {  # directory name glob (any depth) → what it holds
    "__pycache__": "Python bytecode cache",
    "*.egg-info": "packaging metadata",
    ".eggs": "packaging cache",
    "build": "build output",
    "dist": "build output",
    "_build": "Sphinx build output",
    ".pytest_cache": "pytest cache",
    ".mypy_cache": "mypy cache",
    ".ruff_cache": "ruff cache",
    ".tox": "tox environments",
    ".nox": "nox environments",
    "htmlcov": "coverage report",
    ".ipynb_checkpoints": "notebook checkpoints",
}
