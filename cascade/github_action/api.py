"""The GitHub REST API calls the action makes (stdlib HTTP; one attempt per call, a timeout on each)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from pydantic import SecretStr

from cascade.github_action.event import Issue, IssueComment, PullReview, PullReviewComment

HTTP_TIMEOUT_SECONDS = 20.0
MAX_COMMENT_PAGES = 30  # 3,000 comments at 100 a page: enough for any PR, and a bound on API calls


class GitHubError(Exception):
    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status


class GitHub:
    def __init__(self, api_url: str, repository: str, token: SecretStr) -> None:
        self.api_url = api_url.rstrip("/")
        self.repository = repository
        self._token = token

    def url(self, path: str) -> str:
        return f"{self.api_url}/repos/{self.repository}{path}"

    def request(self, method: str, url: str, body: dict[str, Any] | None = None) -> tuple[Any, str]:
        """The decoded JSON answer and the `Link` header; only URLs under the API base ever get the token."""
        if not url.startswith(self.api_url + "/"):
            raise GitHubError(None, f"refusing to send the token outside {self.api_url}")
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "cascade-gate",
        }
        if self._token.get_secret_value():
            headers["Authorization"] = f"Bearer {self._token.get_secret_value()}"
        data = json.dumps(body).encode() if body is not None else None
        if data is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_SECONDS) as response:
                raw = response.read()
                return (json.loads(raw) if raw else None), response.headers.get("Link", "")
        except urllib.error.HTTPError as exc:
            raise GitHubError(exc.code, _api_message(exc)) from None
        except (urllib.error.URLError, TimeoutError, OSError, json.JSONDecodeError) as exc:
            raise GitHubError(None, f"{method} {urllib.parse.urlsplit(url).path} failed: {exc}") from None

    def get_issue(self, number: int) -> Issue:
        data, _ = self.request("GET", self.url(f"/issues/{number}"))
        return Issue.model_validate(data)

    def _pages(self, path: str) -> list[Any]:
        """Every item of a paginated listing, following the `Link` header (at most MAX_COMMENT_PAGES pages)."""
        items: list[Any] = []
        url: str | None = self.url(f"{path}?per_page=100")
        for _ in range(MAX_COMMENT_PAGES):
            if url is None:
                break
            data, link = self.request("GET", url)
            items += list(data or [])
            url = next_page(link)
        return items

    def list_comments(self, number: int) -> list[IssueComment]:
        return [IssueComment.model_validate(item) for item in self._pages(f"/issues/{number}/comments")]

    def list_reviews(self, number: int) -> list[PullReview]:
        return [PullReview.model_validate(item) for item in self._pages(f"/pulls/{number}/reviews")]

    def list_review_comments(self, number: int, review_id: int) -> list[PullReviewComment]:
        items = self._pages(f"/pulls/{number}/reviews/{review_id}/comments")
        return [PullReviewComment.model_validate(item) for item in items]

    def create_review(self, number: int, body: dict[str, Any]) -> PullReview:
        """One submitted review (``event: COMMENT``) with its line comments, in one request."""
        data, _ = self.request("POST", self.url(f"/pulls/{number}/reviews"), body)
        return PullReview.model_validate(data)

    def update_review(self, number: int, review_id: int, body: str) -> PullReview:
        data, _ = self.request("PUT", self.url(f"/pulls/{number}/reviews/{review_id}"), {"body": body})
        return PullReview.model_validate(data)

    def update_review_comment(self, comment_id: int, body: str) -> PullReviewComment:
        data, _ = self.request("PATCH", self.url(f"/pulls/comments/{comment_id}"), {"body": body})
        return PullReviewComment.model_validate(data)

    def create_comment(self, number: int, body: str) -> IssueComment:
        data, _ = self.request("POST", self.url(f"/issues/{number}/comments"), {"body": body})
        return IssueComment.model_validate(data)

    def update_comment(self, comment_id: int, body: str) -> IssueComment:
        data, _ = self.request("PATCH", self.url(f"/issues/comments/{comment_id}"), {"body": body})
        return IssueComment.model_validate(data)


def _api_message(exc: urllib.error.HTTPError) -> str:
    try:
        message = json.loads(exc.read() or b"{}").get("message")
    except (ValueError, AttributeError, OSError):
        message = None
    return str(message or exc.reason)


def next_page(link_header: str) -> str | None:
    """The `rel="next"` URL of a GitHub `Link` header, if any."""
    for part in link_header.split(","):
        match = re.match(r'\s*<([^>]+)>\s*;\s*rel="next"', part)
        if match:
            return match.group(1)
    return None


def short_error(exc: Exception) -> str:
    """The first line of an error, bounded: for notes shown on the PR."""
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
