"""Test environments of the SWE-bench repositories: Python and packages per repository and task version (data).

Transcribed from the harness's specs (swebench 4.1.0, ``swebench/harness/constants/python.py``:
MAP_REPO_VERSION_TO_SPECS_PY; 5.x no longer ships them, and the package imports docker, datasets and modal at import
time). Its ``pre_install`` sed edits of setup.py (sphinx) become version bounds here: uv resolves them together with
the project's own requirements, which has the same effect. Verified with `cascade bench scan fidelity` and
`fidelity-files` (a task's FAIL_TO_PASS on base + test_patch and with gold; benchmarks/results/scans/fidelity-*);
deviations from the harness are commented where they are made.
"""

from __future__ import annotations

from cascade.execution.envs import EnvSpec

_SYMPY = EnvSpec(repo="sympy/sympy", python="3.9", packages=["mpmath==1.3.0"])
_FLASK_2_0 = ["Werkzeug==2.3.7", "Jinja2==3.0.1", "itsdangerous==2.1.2", "click==8.0.1", "MarkupSafe==2.1.3"]
_FLASK_PYTEST = "pytest<8"  # the harness installs requirements/dev.txt (pytest 7); flask's conftest needs it
_FLASK_2_1 = ["Werkzeug==2.3.7", "Jinja2==3.1.2", "itsdangerous==2.1.2", "click==8.1.3", "MarkupSafe==2.1.1"]
_PYTEST_PINS = {
    "4.6": ["atomicwrites==1.4.1", "attrs==23.1.0", "more-itertools==10.1.0", "packaging==23.1", "pluggy==0.13.1",
            "py==1.11.0", "six==1.16.0", "wcwidth==0.2.6"],
    "5.4": ["py==1.11.0", "packaging==23.1", "attrs==23.1.0", "more-itertools==10.1.0", "pluggy==0.13.1"],
    "6.0": ["attrs==23.1.0", "iniconfig==2.0.0", "more-itertools==10.1.0", "packaging==23.1", "pluggy==0.13.1",
            "py==1.11.0", "toml==0.10.2"],
}  # fmt: skip
_SEABORN_PINS = [
    "contourpy==1.1.0", "cycler==0.11.0", "fonttools==4.42.1", "importlib-resources==6.0.1", "kiwisolver==1.4.5",
    "matplotlib==3.7.2", "numpy==1.25.2", "packaging==23.1", "pillow==10.0.0", "pyparsing==3.0.9",
    "python-dateutil==2.8.2", "pytz==2023.3.post1", "scipy==1.11.2", "six==1.16.0", "tzdata==2023.1", "zipp==3.16.2",
]  # fmt: skip
_XARRAY_PINS = [
    "numpy==1.23.0", "packaging==23.1", "pandas==1.5.3", "python-dateutil==2.8.2", "pytz==2023.3", "six==1.16.0",
    "scipy==1.11.1", "setuptools==68.0.0", "dask==2022.8.1",
]  # fmt: skip
# sphinx 3.x: the harness seds setup.py to these bounds (newer sphinxcontrib-* need Sphinx 5).
_SPHINX_3 = [
    "Jinja2<3.0", "markupsafe<=2.0.1", "sphinxcontrib-applehelp<=1.0.7", "sphinxcontrib-devhelp<=1.0.5",
    "sphinxcontrib-qthelp<=1.0.6", "alabaster>=0.7,<0.7.12", "sphinxcontrib-htmlhelp<=2.0.4",
    "sphinxcontrib-serializinghtml<=1.1.9",
    "docutils<0.17",  # Sphinx 3.5.4's own bound; newer docutils no longer ships the `roman` module sphinx 3 imports
]  # fmt: skip


def _sphinx(version: str) -> EnvSpec:
    pins = _SPHINX_3 if version.startswith("3.") else ["Jinja2==3.0.3"]
    # sphinx.registry imports pkg_resources; the harness's conda env has setuptools, a uv venv has none.
    packages = [*pins, "setuptools==68.0.0"]
    return EnvSpec(repo="sphinx-doc/sphinx", python="3.9", packages=packages, install_project=True, extras=["test"])


_REPO_SPECS: dict[str, EnvSpec] = {
    "sympy/sympy": _SYMPY,
    "psf/requests": EnvSpec(repo="psf/requests", python="3.9", packages=["pytest<8"], install_project=True),
    "pallets/flask": EnvSpec(
        repo="pallets/flask", python="3.11", packages=[*_FLASK_2_1, _FLASK_PYTEST], install_project=True
    ),
    "pylint-dev/pylint": EnvSpec(repo="pylint-dev/pylint", python="3.9", install_project=True),
    "sphinx-doc/sphinx": _sphinx("5.0"),
    "mwaskom/seaborn": EnvSpec(
        repo="mwaskom/seaborn", python="3.9", packages=[*_SEABORN_PINS, "pandas==2.0.0"], install_project=True
    ),
    "pydata/xarray": EnvSpec(repo="pydata/xarray", python="3.10", packages=_XARRAY_PINS, install_project=True),
    "pytest-dev/pytest": EnvSpec(
        repo="pytest-dev/pytest", python="3.9", packages=_PYTEST_PINS["6.0"], install_project=True
    ),
    "astropy/astropy": EnvSpec(
        repo="astropy/astropy",
        python="3.9",
        unsupported="only astropy versions built with extension-helpers (4.3 here) are configured; older ones need "
        "Python 3.6-era numpy and the astropy_helpers submodule",
    ),
}
# astropy 4.3: the harness's pins (its `pip install -e .[test]` compiles the C extensions in place; here the build
# step in cascade.execution.extensions does that once per environment) plus what setup.py build_ext needs.
_ASTROPY_4_3 = [
    "attrs==23.1.0", "exceptiongroup==1.1.3", "execnet==2.0.2", "hypothesis==6.82.6", "iniconfig==2.0.0",
    "numpy==1.25.2", "packaging==23.1", "pluggy==1.3.0", "psutil==5.9.5", "pyerfa==2.0.0.3",
    "pytest-arraydiff==0.5.0", "pytest-astropy-header==0.2.2", "pytest-astropy==0.10.0", "pytest-cov==4.1.0",
    "pytest-doctestplus==1.0.0", "pytest-filter-subpackage==0.1.2", "pytest-mock==3.11.1", "pytest-openfiles==0.5.0",
    "pytest-remotedata==0.4.0", "pytest-xdist==3.3.1", "pytest==7.4.0", "PyYAML==6.0.1", "setuptools==68.0.0",
    "sortedcontainers==2.4.0", "tomli==2.0.1",
    "cython==0.29.22", "extension-helpers==1.0.0", "setuptools_scm==7.1.0", "wheel==0.41.2",  # build_ext
]  # fmt: skip
# Where a version differs from its repository's default above.
_VERSION_SPECS: dict[tuple[str, str], EnvSpec] = {
    ("pallets/flask", "2.0"): EnvSpec(
        repo="pallets/flask", python="3.9", packages=[*_FLASK_2_0, _FLASK_PYTEST], install_project=True
    ),
    ("mwaskom/seaborn", "0.11"): EnvSpec(
        repo="mwaskom/seaborn", python="3.9", packages=[*_SEABORN_PINS, "pandas==1.3.5"], install_project=True
    ),
    **{("pytest-dev/pytest", v): EnvSpec(repo="pytest-dev/pytest", python="3.9", packages=pins, install_project=True)
       for v, pins in _PYTEST_PINS.items()},
    **{("sphinx-doc/sphinx", v): _sphinx(v) for v in ("3.0", "3.1", "3.2", "3.3", "3.4", "3.5")},
    ("astropy/astropy", "4.3"): EnvSpec(
        repo="astropy/astropy", python="3.9", packages=_ASTROPY_4_3, build_extensions=True
    ),
}  # fmt: skip


def spec_for_repo(repo: str, version: str | None = None) -> EnvSpec | None:
    """The table's spec for a SWE-bench repository name (owner/name) and task version, if any."""
    if version is not None and (repo, version) in _VERSION_SPECS:
        return _VERSION_SPECS[(repo, version)]
    return _REPO_SPECS.get(repo)


def supported_repos() -> list[str]:
    return sorted(r for r, s in _REPO_SPECS.items() if s.unsupported is None)
