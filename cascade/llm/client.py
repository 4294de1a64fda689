"""One LLM client over litellm: retries with backoff, fallback models, a per-run budget, cost accounting.

Model strings are passed to litellm as they are (``openai/…``, ``anthropic/…``, ``ollama/…``; ``openai/<name>``
plus ``llm.api_base`` for any OpenAI-compatible server such as vLLM or llama.cpp's). The API key is read only from
the environment variable named by ``llm.api_key_env``; it is never written to a cassette or a report, and it is
redacted from error messages. litellm is imported on the first live call (it takes seconds to import), with
``LITELLM_LOCAL_MODEL_COST_MAP=True`` so the import fetches nothing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cascade.config import LLMConfig
from cascade.llm.cassette import (
    CallParams,
    Cassette,
    ChatMessage,
    RecordedReply,
    RecordedRequest,
    open_cassette,
    request_key,
)
from cascade.llm.errors import BudgetExhausted, LLMCallFailed, LLMNotConfigured
from cascade.models import Cost

MAX_BACKOFF_SECONDS = 30.0
ERROR_EXCERPT_CHARS = 300
# Providers that need no key; everything else without llm.api_key_env and without api_base is a config error.
_KEYLESS_PREFIXES = ("ollama/", "ollama_chat/")
_CONNECTION_MARKERS = ("Connection error", "Connection refused", "Name or service not known", "nodename nor servname")
_KEYLESS_PLACEHOLDER = "no-key"  # OpenAI-compatible local servers ignore it, but the OpenAI SDK insists on one


class LLMReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str
    answered_by: str = Field(description="The model that answered: the primary or a fallback.")
    cost: Cost = Field(default_factory=Cost)
    replayed: bool = False


def import_litellm() -> ModuleType:
    """Import litellm without network access at import time and without its console chatter."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    litellm.suppress_debug_info = True
    return litellm


class Budget:
    """Per-run limits on calls, tokens and dollars; ``spent`` starts at what earlier stages used."""

    def __init__(self, config: LLMConfig, spent: Cost) -> None:
        self.config = config
        self.spent = spent

    def check(self) -> None:
        cfg, spent = self.config, self.spent
        tokens = spent.prompt_tokens + spent.completion_tokens
        if spent.llm_calls >= cfg.max_calls:
            raise BudgetExhausted(f"budget exhausted: {spent.llm_calls} of {cfg.max_calls} LLM calls used")
        if tokens >= cfg.max_tokens_total:
            raise BudgetExhausted(f"budget exhausted: {tokens} of {cfg.max_tokens_total} tokens used")
        if spent.dollars >= cfg.max_dollars:  # 0 forbids every call: prices are unknown for local models
            raise BudgetExhausted(f"budget exhausted: ${spent.dollars:.4f} of ${cfg.max_dollars:.4f} used")


def _is_retryable(exc: Exception, litellm: ModuleType) -> bool:
    """429, 5xx, timeouts and connection errors are worth retrying; auth/bad-request/not-found are not."""
    if isinstance(exc, (litellm.Timeout, litellm.APIConnectionError, litellm.RateLimitError)):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status == 429 or status >= 500)


def _is_unreachable(exc: Exception, litellm: ModuleType) -> bool:
    """No connection to the server at all (refused, unknown host): litellm reports it as a connection error, or
    wraps the OpenAI SDK's "Connection error." in an InternalServerError."""
    if isinstance(exc, litellm.APIConnectionError):
        return True
    return any(marker in str(exc) for marker in _CONNECTION_MARKERS)


class LLMClient:
    """Makes chat calls for one review run and accounts for them in ``cost``."""

    def __init__(
        self,
        config: LLMConfig,
        spent: Cost | None = None,
        *,
        extra_params: dict[str, Any] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not config.model:
            raise LLMNotConfigured("no LLM configured (llm.model)")
        self.config = config
        self.model: str = config.model
        self.cost = Cost()
        self._earlier = spent or Cost()
        self._extra = dict(extra_params or {})  # e.g. litellm's mock_response in unit tests; not part of the key
        self._sleep = sleep
        self._cassette: Cassette | None = open_cassette(config.cassette, config.cassette_mode)
        self._api_key: str | None = None
        if self._cassette is None or self._cassette.mode == "record":
            self._api_key = self._read_key()

    def _read_key(self) -> str | None:
        env = self.config.api_key_env
        if env:
            key = os.environ.get(env)
            if not key:
                raise LLMNotConfigured(f"llm.api_key_env names {env}, but that environment variable is not set")
            return key
        if self.config.api_base:
            return _KEYLESS_PLACEHOLDER
        if self.model.startswith(_KEYLESS_PREFIXES):
            return None
        raise LLMNotConfigured(
            "no API key: set llm.api_key_env to the name of the environment variable holding the key "
            "(or llm.api_base for a keyless OpenAI-compatible server)"
        )

    @property
    def budget(self) -> Budget:
        return Budget(self.config, self._earlier + self.cost)

    def complete(self, messages: list[ChatMessage], params: CallParams) -> LLMReply:
        """One logical call (retries and fallbacks included); raises an `LLMError` subclass if no answer."""
        self.budget.check()
        key = request_key(self.model, messages, params)
        if self._cassette is not None and self._cassette.mode == "replay":
            recorded = self._cassette.replay(key, self._cassette.next_index(key))
        else:
            recorded = self._live(messages, params)
            if self._cassette is not None:
                request = RecordedRequest(model=self.model, params=params, messages=messages)
                self._cassette.record(key, self._cassette.next_index(key), request, recorded)
        self.cost = self.cost + recorded.cost
        if recorded.error is not None or recorded.content is None:
            raise LLMCallFailed(recorded.error or "the model returned no content", recorded.cost)
        return LLMReply(
            content=recorded.content,
            answered_by=recorded.answered_by or self.model,
            cost=recorded.cost,
            replayed=self._cassette is not None and self._cassette.mode == "replay",
        )

    def _live(self, messages: list[ChatMessage], params: CallParams) -> RecordedReply:
        """Try the primary model, then each fallback, each with retries; the reply records every attempt's cost."""
        litellm = import_litellm()
        spent = Cost()
        errors: list[str] = []
        unreachable: list[bool] = []
        for model in [self.model, *self.config.fallback_models]:
            for attempt in range(self.config.max_retries + 1):
                try:
                    Budget(self.config, self._earlier + self.cost + spent).check()
                except BudgetExhausted as exc:
                    return RecordedReply(error=f"{exc} (after {'; '.join(errors[-1:]) or 'no answer'})", cost=spent)
                spent = spent + Cost(llm_calls=1)
                try:
                    response = self._call(litellm, model, messages, params)
                except Exception as exc:  # litellm raises many types; classified just below
                    errors.append(f"{model}: {self._describe(exc)}")
                    unreachable.append(_is_unreachable(exc, litellm))
                    if not _is_retryable(exc, litellm):
                        break
                    if attempt < self.config.max_retries:
                        self._sleep(min(self.config.retry_backoff_seconds * 2**attempt, MAX_BACKOFF_SECONDS))
                    continue
                return self._reply_of(litellm, response, model, spent)
        return RecordedReply(error=self._failure(errors, unreachable), cost=spent)

    def _failure(self, errors: list[str], unreachable: list[bool]) -> str:
        """One line: the server named when nothing could connect, otherwise the distinct last errors."""
        if unreachable and all(unreachable):
            where = self.config.api_base or "the provider's default endpoint"
            return f"LLM server unreachable at {where} ({len(errors)} attempt(s); {self.model}: connection failed)"
        return "LLM call failed: " + "; ".join(dict.fromkeys(errors[-3:]))

    def _call(self, litellm: ModuleType, model: str, messages: list[ChatMessage], params: CallParams) -> Any:
        return litellm.completion(
            model=model,
            messages=[m.model_dump() for m in messages],
            temperature=params.temperature,
            max_tokens=params.max_tokens,
            timeout=self.config.timeout_seconds,
            api_base=self.config.api_base,
            api_key=self._api_key,
            max_retries=0,  # the OpenAI SDK would otherwise retry on its own, hidden from the budget
            **self._extra,
        )

    def _reply_of(self, litellm: ModuleType, response: Any, model: str, spent: Cost) -> RecordedReply:
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        try:
            dollars = float(litellm.completion_cost(completion_response=response) or 0.0)
        except Exception:  # unknown price (local models): free as far as we know
            dollars = 0.0
        cost = spent + Cost(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, dollars=dollars)
        content = response.choices[0].message.content if response.choices else None
        return RecordedReply(content=content, answered_by=model, cost=cost)

    def _describe(self, exc: Exception) -> str:
        text = " ".join(f"{type(exc).__name__}: {exc}".split())[:ERROR_EXCERPT_CHARS]
        return redact(text, self._api_key)


def redact(text: str, secret: str | None) -> str:
    """Never let the key reach a report: providers and proxies sometimes echo it in error bodies."""
    if secret and secret != _KEYLESS_PLACEHOLDER and len(secret) >= 4:
        return text.replace(secret, "***")
    return text
