"""Command line: `cascade review`, `cascade bench`. Bad input ends in one line and exit 3, never a traceback."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

import click

from cascade import __version__
from cascade.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, BadInput, CascadeError, check_output_path, read_input_text
from cascade.interrupt import (
    EXIT_INTERRUPTED,
    await_worker_cleanup,
    stop_children_on_interrupt,
    terminate_descendants,
)
from cascade.options import FILE, PATH, config_option, quiet_option

if TYPE_CHECKING:
    from cascade.config import CascadeConfig
    from cascade.models import Verdict
    from cascade.report import Format

F = TypeVar("F", bound=Callable[..., Any])
# The formats of cascade.report, repeated here so `--help` needs no import of the report models (pydantic): start-up
# time is most of a `cascade --help` (tests/test_cli_startup.py keeps the two lists equal).
FORMATS = ("text", "json", "markdown", "sarif", "github")


def fail(message: str, code: int) -> None:
    click.echo(f"cascade: error: {message}", err=True)
    sys.exit(code)


def _read_patch(
    patch: str | None, git_range: str | None, repo: str, max_bytes: int
) -> tuple[str, tuple[str, str] | None]:
    """The patch text and, for --git, the (base, head) commits it goes between."""
    from cascade.patch import decode_patch_bytes

    if git_range is not None:
        if patch is not None:
            raise BadInput("give either a PATCH file or --git BASE..HEAD, not both")
        return _diff_of_range(repo, git_range, max_bytes)
    if patch is None:
        raise BadInput("no patch given: pass a PATCH file, '-' for stdin, or --git BASE..HEAD")
    if patch == "-":
        data = sys.stdin.buffer.read()
    else:
        path = Path(patch)
        if not path.is_file():
            raise BadInput(f"patch file not found: {patch}")
        data = path.read_bytes()
    if not data.strip():
        raise BadInput(f"patch {patch!r} is empty: nothing to review")
    return decode_patch_bytes(data, max_bytes, source=f"patch {patch!r}"), None


def _diff_of_range(repo: str, git_range: str, max_bytes: int) -> tuple[str, tuple[str, str]]:
    from cascade.git import git
    from cascade.patch import decode_patch_bytes
    from cascade.workspace import resolve_commit, resolve_repo

    symmetric = "..." in git_range
    base, _, head = git_range.partition("..." if symmetric else "..")
    if not base or not head:
        raise BadInput(f"--git expects BASE..HEAD, got {git_range!r}")
    root = resolve_repo(repo)
    base_sha, head_sha = resolve_commit(root, base), resolve_commit(root, head)
    if symmetric:
        base_sha = git(root, "merge-base", base_sha, head_sha).strip()
    text = git(root, "diff", "--no-color", "--no-ext-diff", "--binary", base_sha, head_sha)
    if not text.strip():
        raise BadInput(f"{git_range} has no changes: nothing to review")
    return decode_patch_bytes(text.encode("utf-8"), max_bytes, source=f"diff {git_range}"), (base_sha, head_sha)


def with_cache_options(config: CascadeConfig, cache_dir: str | None, *, no_cache: bool) -> CascadeConfig:
    """``--cache-dir`` and ``--no-cache`` applied to the ``cache`` section."""
    update: dict[str, object] = {}
    if cache_dir is not None:
        update["dir"] = cache_dir
    if no_cache:
        update.update(enabled=False, checkouts=False)
    return config.model_copy(update={"cache": config.cache.model_copy(update=update)}) if update else config


@contextmanager
def stage_progress(*, enabled: bool) -> Iterator[Callable[[str], None] | None]:
    """A rich status line on stderr saying what the review is doing (preparing the trees, running a stage, removing
    the trees), so it never names a stage that has ended — only on a terminal, and never with --quiet, so
    redirected output and CI logs stay clean."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console

    console = Console(stderr=True, highlight=False)
    with console.status("cascade: starting") as status:
        yield lambda message: status.update(f"cascade: {message}")


def _emit(verdict: Verdict, fmt: Format, output: str | None) -> None:
    from cascade.report import render

    text = render(verdict, fmt, color=False if output else None)  # no ANSI codes in a file
    if output:
        Path(output).write_text(text, encoding="utf-8")
        if fmt != "text":
            click.echo(f"{verdict.decision.value}: {verdict.reason}", err=True)
    else:
        click.echo(text, nl=False)


class LazyGroup(click.Group):
    """A group whose subcommands named in ``lazy`` are imported only when invoked; ``--help`` lists them with the
    help text given here, so listing the commands imports nothing (tests/test_cli_startup.py keeps it equal to the
    command's own)."""

    lazy: ClassVar[dict[str, tuple[str, str]]] = {}  # name → ("module:attribute", help text)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, _, attribute = self.lazy[cmd_name][0].partition(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows: list[tuple[str, str]] = []
        for name in self.list_commands(ctx):
            limit = formatter.width - 6 - len(name)
            if name in self.lazy and name not in self.commands:
                stand_in = click.Command(name, help=self.lazy[name][1])  # its help line, as click would cut it
                rows.append((name, stand_in.get_short_help_str(limit)))
            else:
                command = super().get_command(ctx, name)
                if command is not None and not command.hidden:
                    rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class CascadeGroup(LazyGroup):
    # the benchmark pulls in numpy, matplotlib and the pipeline: loaded when `cascade bench …` runs
    lazy: ClassVar[dict[str, tuple[str, str]]] = {
        "bench": (
            "cascade.bench.cli:bench",
            "Replay SWE-bench-format predictions through the gate and score it against execution labels.",
        )
    }


@click.group(cls=CascadeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cascade")
def cli() -> None:
    """Decide whether an agent-written patch should be accepted, rejected, or left uncertain.

    Exit codes: 0 accept, 1 reject, 2 uncertain, 3 bad input or usage, 4 internal error.
    """


REVIEW_HELP = """Review PATCH (a unified diff file, or '-' for stdin) against --repo.

\b
Exit codes:
  0  accept
  1  reject
  2  uncertain (no stage could decide; a human should look)
  3  bad input or usage (one line on stderr: patch, repository, config, output path, a required tool missing)
  4  internal error
\b
Formats (--format):
  text      a readable report (colour on a terminal)
  json      the full report: every stage, its evidence and commands to re-run them
  markdown  a pull-request comment
  sarif     SARIF 2.1.0 for code scanning; every reject has an error result
  github    GitHub Actions annotations (::error file=…::)
"""


@cli.command(help=REVIEW_HELP)
@click.argument("patch", required=False, type=click.Path(dir_okay=False, allow_dash=True, path_type=str))
@click.option("--repo", default=".", show_default=True, type=PATH, help="Git repository the patch applies to.")
@click.option("--base", "base_ref", default=None, help="Ref the patch applies to [default: HEAD or the range's base].")
@click.option("--git", "git_range", default=None, metavar="BASE..HEAD", help="Review a commit range instead of a file.")
@click.option("--issue", "issue_file", default=None, type=FILE, help="File with the task/issue text.")
@click.option(
    "--trace",
    "trace_file",
    default=None,
    type=FILE,
    help="Agent trace: SWE-agent .traj, moatless, OpenHands or Claude Code (format read from content).",
)
@config_option()
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True, help="Report format.")
@click.option("--output", default=None, type=FILE, help="Write the report here instead of stdout (checked first).")
@click.option("--model", default=None, help="litellm model string for the LLM stages (overrides llm.model).")
@click.option("--api-base", default=None, help="OpenAI-compatible server URL for --model (overrides llm.api_base).")
@click.option("--llm-cassette", default=None, type=FILE, help="Record/replay LLM answers here (llm.cassette).")
@click.option("--llm-mode", type=click.Choice(["off", "record", "replay"]), default=None, help="llm.cassette_mode.")
@click.option(
    "--reproducible/--no-reproducible",
    default=None,
    help="Leave wall-clock times out of the report, so identical runs give identical reports "
    "[default: on with an LLM cassette (record or replay), off otherwise].",
)
@click.option(
    "--require-tools",
    is_flag=True,
    default=None,
    help="Exit 3 when a checker (ruff, pyright) is missing or crashes, instead of a verdict from the remaining "
    "checks (static.require_tools).",
)
@click.option(
    "--cache-dir",
    default=None,
    type=PATH,
    help="Where reused base-tree results and pristine checkouts live (cache.dir) "
    "[default: $CASCADE_CACHE_DIR, else ~/.cache/cascade].",
)
@click.option(
    "--no-cache", is_flag=True, help="Reuse nothing: compute every result and check out fresh worktrees (cache.*)."
)
@quiet_option("No progress on stderr (shown only on a terminal anyway).")
def review(
    patch: str | None,
    repo: str,
    base_ref: str | None,
    git_range: str | None,
    issue_file: str | None,
    trace_file: str | None,
    config_file: str | None,
    fmt: str,
    output: str | None,
    model: str | None,
    api_base: str | None,
    llm_cassette: str | None,
    llm_mode: str | None,
    reproducible: bool | None,
    require_tools: bool | None,
    cache_dir: str | None,
    no_cache: bool,
    quiet: bool,
) -> None:
    from cascade.config import load_config
    from cascade.llm.overrides import with_llm_overrides
    from cascade.models import ReviewRequest
    from cascade.pipeline import review as run_review
    from cascade.stable import reproducible as without_times
    from cascade.stages import check_names
    from cascade.traces import load_trace

    if output is not None:
        check_output_path(output)
    config = with_llm_overrides(load_config(config_file), model, llm_cassette, llm_mode, api_base=api_base)
    check_names(config, config_file or "config")
    if require_tools:
        config = config.model_copy(update={"static": config.static.model_copy(update={"require_tools": True})})
    config = with_cache_options(config, cache_dir, no_cache=no_cache)
    patch_text, commits = _read_patch(patch, git_range, repo, config.limits.max_patch_bytes)
    request = ReviewRequest(
        repo=repo,
        base_ref=base_ref or (commits[0] if commits else "HEAD"),
        head_commit=commits[1] if commits else None,
        patch_text=patch_text,
        issue_text=read_input_text(issue_file, "issue") if issue_file else None,
        trace=load_trace(trace_file) if trace_file else None,
        config=config,
    )
    with stop_children_on_interrupt(), stage_progress(enabled=not quiet) as on_progress:
        verdict = run_review(request, on_progress=on_progress)
    if reproducible is None:  # a cassette run exists to be reproduced: its recording and replay must match
        reproducible = config.llm.cassette_mode != "off"
    if reproducible:
        verdict = without_times(verdict)
    _emit(verdict, cast("Format", fmt), output)
    sys.exit(verdict.exit_code)


@cli.command("config")
@config_option("YAML config to validate and show merged with the defaults.")
def show_config(config_file: str | None) -> None:
    """Validate a config and print it merged with the defaults (configs/default.yaml is this, for no file)."""
    import yaml

    from cascade.config import load_config
    from cascade.stages import check_names

    config = load_config(config_file)
    check_names(config, config_file or "config")
    click.echo(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False), nl=False)


def interrupted() -> None:
    """Ctrl-C: the review's cleanup has run while the exception unwound; end what is left, give the worker threads
    of killed tools a moment to remove their temporary directories, and exit 130 (a worker thread still stuck must
    not hold the exit up: bounded by CLEANUP_SECONDS)."""
    terminate_descendants()
    await_worker_cleanup()
    click.echo("cascade: interrupted", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


def main() -> None:
    """Entry point: map every failure to its documented exit code and one line on stderr. The command runs outside
    click's own ``main`` so that Ctrl-C reaches ``interrupted`` (click would print a blank line and call it an
    abort)."""
    try:
        with cli.make_context("cascade", sys.argv[1:]) as ctx:
            cli.invoke(ctx)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        fail("aborted", EXIT_BAD_INPUT)
    except click.ClickException as exc:
        fail(exc.format_message(), EXIT_BAD_INPUT)
    except BadInput as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    except CascadeError as exc:
        fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        interrupted()
    except OSError as exc:
        if exc.filename is None:
            fail(f"internal error: {type(exc).__name__}: {exc}", EXIT_INTERNAL)
        # a path the user gave that cannot be read or written (a missing directory, no permission, a full disk)
        fail(f"cannot use {exc.filename}: {exc.strerror or type(exc).__name__}", EXIT_BAD_INPUT)
    except Exception as exc:
        fail(f"internal error: {type(exc).__name__}: {exc}", EXIT_INTERNAL)
