"""Why an LLM call produced no answer. Stages turn each `LLMError` into a defined `uncertain` with the message as
reason; a cassette replay miss instead ends the review (exit 3).
"""

from __future__ import annotations

from cascade.errors import EXIT_BAD_INPUT, CascadeError
from cascade.models import Cost


class LLMError(CascadeError):
    """No answer from the model; ``cost`` is what the failed attempt spent (calls made, tokens used)."""

    def __init__(self, message: str, cost: Cost | None = None) -> None:
        super().__init__(message)
        self.cost = cost or Cost()


class BudgetExhausted(LLMError):
    """The per-run budget (calls, tokens or dollars) is used up; checked before every request."""


class LLMCallFailed(LLMError):
    """Every model (primary, then fallbacks) failed after its retries, or a non-retryable error."""


class LLMNotConfigured(LLMError):
    """The model cannot be called as configured (no model, missing key variable)."""

    exit_code = EXIT_BAD_INPUT


class CassetteMiss(CascadeError):
    """Replay found no recorded reply for a request; a replay never falls through to a live call.

    Not an `LLMError`: stages turn those into a defined verdict, but a replay that cannot reproduce its recording
    has no verdict to give. It ends the review (`cascade.pipeline.run_stage` lets it through) with exit 3, like
    any input that cannot be reviewed as given — here, a cassette that does not hold this run.
    """

    exit_code = EXIT_BAD_INPUT
