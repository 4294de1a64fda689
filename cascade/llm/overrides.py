"""Command-line overrides of the `llm` config section (`--model`, `--api-base`, `--llm-cassette`, `--llm-mode`)."""

from __future__ import annotations

from pathlib import Path

from cascade.config import CascadeConfig, parse_config
from cascade.errors import BadInput

LLM_MODES = ("off", "record", "replay")


def with_llm_overrides(
    config: CascadeConfig,
    model: str | None,
    cassette: str | None = None,
    mode: str | None = None,
    *,
    api_base: str | None = None,
) -> CascadeConfig:
    """The config with the given options applied (None = keep the config's value), checked before any work:
    a replay needs an existing cassette, and record/replay need a path."""
    data = config.model_dump()
    llm = data["llm"]
    if model is not None:
        llm["model"] = model
    if api_base is not None:
        llm["api_base"] = api_base
    if cassette is not None:
        llm["cassette"] = cassette
        if mode is None and llm["cassette_mode"] == "off":
            # no guessing: a mistyped path in a replay must not turn into live, recorded calls
            raise BadInput("--llm-cassette needs --llm-mode record or --llm-mode replay")
    if mode is not None:
        llm["cassette_mode"] = mode
    updated = parse_config(data, source="command line")
    _check_cassette(updated)
    return updated


def _check_cassette(config: CascadeConfig) -> None:
    llm = config.llm
    if llm.cassette_mode == "off":
        return
    if not llm.cassette:
        raise BadInput(f"--llm-mode {llm.cassette_mode} needs a cassette path (--llm-cassette PATH or llm.cassette)")
    if llm.cassette_mode == "replay" and not Path(llm.cassette).is_file():
        raise BadInput(f"LLM cassette not found for replay: {llm.cassette}")
