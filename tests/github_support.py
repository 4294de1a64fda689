"""What the Action's tests share: a local server speaking the GitHub REST endpoints the action uses, the secrets
that must never show, and the README's workflow."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cascade.github_action.publish import MARKER

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "github"
TOKEN = "ghs_" + "5e3c7a" * 6  # looks like an Actions token; must never show up anywhere
LLM_KEY = "sk-" + "9d41f0" * 8  # the LLM key the README says to pass in the step's env; never printed either
OWNER_REPO = "acme/widgets"
PR_NUMBER = 42


# --------------------------------------------------------------------------------------------------------------------
# A local stand-in for the GitHub REST API


@dataclass
class FakeGitHub:
    """Issue comments and issues of one repository, with the requests it received."""

    read_only: bool = False
    page_size: int = 2  # small, so listing has to follow the Link header
    comments: list[dict[str, Any]] = field(default_factory=list)
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, body)
    next_id: int = 9000
    url: str = ""
    reviews: list[dict[str, Any]] = field(default_factory=list)
    review_comments: list[dict[str, Any]] = field(default_factory=list)
    # (pr, path) → the lines its diff shows; as on GitHub, a review with a comment elsewhere is refused whole
    diff_lines: dict[str, set[int]] | None = None

    def writes(self) -> list[tuple[str, str, str]]:
        return [r for r in self.requests if r[0] in {"POST", "PATCH", "PUT"}]

    def handle(self, method: str, target: str, body: str, auth: str | None) -> tuple[int, Any, dict[str, str]]:
        self.requests.append((method, target, body))
        if auth != f"Bearer {TOKEN}":
            return 401, {"message": "Bad credentials"}, {}
        path, query = urlsplit(target).path, parse_qs(urlsplit(target).query)
        prefix = f"/repos/{OWNER_REPO}"
        if method == "GET" and (m := re.fullmatch(rf"{prefix}/issues/(\d+)/comments", path)):
            return self._list(int(m.group(1)), int(query.get("page", ["1"])[0]))
        if method == "GET" and (m := re.fullmatch(rf"{prefix}/issues/(\d+)", path)):
            issue = self.issues.get(int(m.group(1)))
            return (200, issue, {}) if issue else (404, {"message": "Not Found"}, {})
        if self.read_only and method in {"POST", "PATCH", "PUT"}:
            return 403, {"message": "Resource not accessible by integration"}, {}
        if method == "POST" and (m := re.fullmatch(rf"{prefix}/issues/(\d+)/comments", path)):
            return 201, self._create(int(m.group(1)), json.loads(body)["body"]), {}
        if method == "PATCH" and (m := re.fullmatch(rf"{prefix}/issues/comments/(\d+)", path)):
            return self._update(int(m.group(1)), json.loads(body)["body"])
        return self._pulls(method, path, query, body)

    # -- pull-request reviews (POST /pulls/N/reviews takes the line comments; PUT edits only the body) ----------

    def _pulls(self, method: str, path: str, query: dict[str, list[str]], body: str) -> tuple[int, Any, dict[str, str]]:
        prefix = f"/repos/{OWNER_REPO}/pulls"
        page = int(query.get("page", ["1"])[0])
        if method == "GET" and (m := re.fullmatch(rf"{prefix}/(\d+)/reviews", path)):
            return self._paged([self._review_out(r) for r in self.reviews if r["pr"] == int(m.group(1))], page, path)
        if method == "GET" and (m := re.fullmatch(rf"{prefix}/(\d+)/reviews/(\d+)/comments", path)):
            mine = [c for c in self.review_comments if c["review"] == int(m.group(2))]
            return self._paged([self._comment_out(c) for c in mine], page, path)
        if method == "POST" and (m := re.fullmatch(rf"{prefix}/(\d+)/reviews", path)):
            return self._create_review(int(m.group(1)), json.loads(body))
        if method == "PUT" and (m := re.fullmatch(rf"{prefix}/(\d+)/reviews/(\d+)", path)):
            review = next((r for r in self.reviews if r["id"] == int(m.group(2))), None)
            if review is None:
                return 404, {"message": "Not Found"}, {}
            review["body"] = json.loads(body)["body"]
            return 200, self._review_out(review), {}
        if method == "PATCH" and (m := re.fullmatch(rf"{prefix}/comments/(\d+)", path)):
            comment = next((c for c in self.review_comments if c["id"] == int(m.group(1))), None)
            if comment is None:
                return 404, {"message": "Not Found"}, {}
            comment["body"] = json.loads(body)["body"]
            return 200, self._comment_out(comment), {}
        return 404, {"message": "Not Found"}, {}

    def _create_review(self, number: int, data: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        if data.get("event") not in {"COMMENT", "APPROVE", "REQUEST_CHANGES"} or not data.get("commit_id"):
            return 422, {"message": "Unprocessable Entity: event and commit_id are required"}, {}
        for comment in data.get("comments", []):
            shown = (self.diff_lines or {}).get(comment["path"], set())
            if self.diff_lines is not None and (comment.get("side") != "RIGHT" or comment["line"] not in shown):
                return 422, {"message": "Unprocessable Entity", "errors": ["Line could not be resolved"]}, {}
        self.next_id += 1
        review = {"id": self.next_id, "pr": number, "body": data.get("body", ""), "commit_id": data["commit_id"],
                  "user": {"login": "github-actions[bot]", "type": "Bot"}}  # fmt: skip
        self.reviews.append(review)
        for comment in data.get("comments", []):
            self.next_id += 1
            self.review_comments.append({"id": self.next_id, "review": review["id"], **comment})
        return 200, self._review_out(review), {}

    def _paged(self, items: list[dict[str, Any]], page: int, path: str) -> tuple[int, Any, dict[str, str]]:
        chunk = items[(page - 1) * self.page_size : page * self.page_size]
        headers = {}
        if page * self.page_size < len(items):
            nxt = f"{self.url}{path}?per_page=100&page={page + 1}"
            headers["Link"] = f'<{nxt}>; rel="next"'
        return 200, chunk, headers

    def _review_out(self, review: dict[str, Any]) -> dict[str, Any]:
        html_url = f"https://github.com/{OWNER_REPO}/pull/{review['pr']}#pullrequestreview-{review['id']}"
        return {**{k: v for k, v in review.items() if k != "pr"}, "html_url": html_url, "state": "COMMENTED"}

    def _comment_out(self, comment: dict[str, Any]) -> dict[str, Any]:
        html_url = f"https://github.com/{OWNER_REPO}/pull/{PR_NUMBER}#discussion_r{comment['id']}"
        return {**{k: v for k, v in comment.items() if k != "review"}, "html_url": html_url}

    def review_writes(self) -> list[tuple[str, str, str]]:
        return [r for r in self.requests if r[0] in {"POST", "PUT", "PATCH"} and "/pulls/" in r[1]]

    def _list(self, number: int, page: int) -> tuple[int, Any, dict[str, str]]:
        mine = [c for c in self.comments if c["issue"] == number]
        chunk = mine[(page - 1) * self.page_size : page * self.page_size]
        headers = {}
        if page * self.page_size < len(mine):
            nxt = f"{self.url}/repos/{OWNER_REPO}/issues/{number}/comments?per_page=100&page={page + 1}"
            headers["Link"] = f'<{nxt}>; rel="next", <{nxt}>; rel="last"'
        return 200, [self._public(c) for c in chunk], headers

    def _create(self, number: int, body: str, login: str = "github-actions[bot]", kind: str = "Bot") -> dict[str, Any]:
        self.next_id += 1
        comment = {"id": self.next_id, "issue": number, "body": body, "user": {"login": login, "type": kind}}
        self.comments.append(comment)
        return self._public(comment)

    def _update(self, comment_id: int, body: str) -> tuple[int, Any, dict[str, str]]:
        for comment in self.comments:
            if comment["id"] == comment_id:
                comment["body"] = body
                return 200, self._public(comment), {}
        return 404, {"message": "Not Found"}, {}

    def _public(self, comment: dict[str, Any]) -> dict[str, Any]:
        html_url = f"https://github.com/{OWNER_REPO}/pull/{comment['issue']}#issuecomment-{comment['id']}"
        return {**{k: v for k, v in comment.items() if k != "issue"}, "html_url": html_url, "node_id": "IC_x"}

    def seed(self, body: str, login: str, kind: str = "User") -> None:
        self._create(PR_NUMBER, body, login, kind)

    def gate_comments(self) -> list[dict[str, Any]]:
        return [c for c in self.comments if MARKER in c["body"] and c["user"]["type"] == "Bot"]


def serve(fake: FakeGitHub) -> Iterator[FakeGitHub]:
    class Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            status, payload, headers = fake.handle(self.command, self.path, body, self.headers.get("Authorization"))
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_PUT = _any

        def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------------------------------------------------
# The README's workflow


def readme_workflow() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Gate agent pull requests (GitHub Action)", 1)[1]
    match = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert match, "the README section has a yaml workflow"
    return match.group(1)
