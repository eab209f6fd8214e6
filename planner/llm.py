"""The LLM backend: any OpenAI-compatible server through the `openai` client (Chat Completions).

`--base-url` and `--model` pick the server and model; the key comes from the environment
(OPENAI_API_KEY by default, `api_key_env` names another). Transient failures (connection errors,
timeouts, 429 and 5xx answers) are retried with exponential back-off; every call's prompt and
completion tokens are counted (the server's usage when it reports one, else an estimate).
"""

from __future__ import annotations

import os
import time

import attrs

__all__ = ["ChatBackend", "Reply", "LLMError"]


class LLMError(Exception):
    """The server could not be reached or kept failing after the retries."""


@attrs.define
class Reply:
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    attempts: int = 1


class ChatBackend:
    def __init__(self, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 timeout_s: float = 120.0, max_retries: int = 4, backoff_s: float = 1.0, max_tokens: int = 4096,
                 temperature: float = 0.2, sleep=time.sleep):
        import openai

        self.model = model
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.sleep = sleep
        self._openai = openai
        self.client = openai.OpenAI(base_url=base_url, api_key=os.environ.get(api_key_env) or "not-needed",
                                    timeout=timeout_s, max_retries=0)

    def _transient(self, e: Exception) -> bool:
        o = self._openai
        if isinstance(e, o.APIConnectionError | o.APITimeoutError | o.RateLimitError | o.InternalServerError):
            return True
        return isinstance(e, o.APIStatusError) and getattr(e, "status_code", 0) >= 500

    def chat(self, messages: list[dict]) -> Reply:
        last: Exception | None = None
        for attempt in range(1, self.max_retries + 2):
            try:
                resp = self.client.chat.completions.create(model=self.model, messages=messages,
                                                           max_tokens=self.max_tokens, temperature=self.temperature)
            except Exception as e:  # classified below: transient ones are retried
                if not self._transient(e):
                    raise LLMError(f"{type(e).__name__}: {e}") from None
                last = e
                if attempt <= self.max_retries:
                    self.sleep(self.backoff_s * 2 ** (attempt - 1))
                continue
            choice = resp.choices[0] if resp.choices else None
            text = (choice.message.content or "") if choice is not None else ""
            usage = getattr(resp, "usage", None)
            pt = getattr(usage, "prompt_tokens", None) if usage else None
            ct = getattr(usage, "completion_tokens", None) if usage else None
            if pt is None:
                pt = sum(len(m.get("content", "")) for m in messages) // 4
            if ct is None:
                ct = len(text) // 4
            return Reply(text, getattr(choice, "finish_reason", None), int(pt), int(ct), attempt)
        raise LLMError(f"gave up after {self.max_retries + 1} attempts: {type(last).__name__}: {last}")
