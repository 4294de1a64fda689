"""Parse a unified diff (via unidiff) into the `Patch` model and classify its files."""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import PurePosixPath
from posixpath import basename

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchedFile, PatchSet

from cascade.config import NoChangeConfig
from cascade.errors import BadInput
from cascade.models import FileKind, FilePatch, Hunk, Patch

_DEV_NULL = "/dev/null"
# Lines whose form the diff format fixes: when these end in CR, the whole patch went through a CRLF conversion
_HEADER_PREFIXES = ("diff --git ", "--- ", "+++ ", "@@ ", "index ")


def matches_glob(path: str, pattern: str) -> bool:
    """fnmatch semantics (``*`` crosses ``/``); a pattern without ``/`` is matched against the basename."""
    if "/" not in pattern:
        return fnmatchcase(basename(path), pattern)
    if pattern.endswith("/**"):
        pattern = pattern[:-1]  # "tests/**" ≡ "tests/*" because * already crosses "/"
    return fnmatchcase(path, pattern)


def classify(path: str, config: NoChangeConfig) -> FileKind:
    if any(matches_glob(path, g) for g in config.test_globs):
        return FileKind.TEST
    if path.endswith(".py") or path.endswith(".pyi"):
        return FileKind.CODE
    if any(matches_glob(path, g) for g in config.docs_globs):
        return FileKind.DOCS
    return FileKind.CODE if "." in basename(path) else FileKind.OTHER


def _strip_prefix(path: str | None) -> str | None:
    if path is None or path == _DEV_NULL:
        return None
    for prefix in ("a/", "b/"):
        if path.startswith(prefix):
            return path[len(prefix) :]
    return path


def check_inside_repository(path: str | None) -> None:
    """A patch path must name a file of the repository: an absolute path or a ``..`` step leaves it (git apply
    refuses both; saying "does not exist" would send the user looking for the wrong problem)."""
    if path is None:
        return
    parts = PurePosixPath(path).parts
    if path.startswith("/") or ".." in parts:
        kind = "is absolute" if path.startswith("/") else "goes up with '..'"
        raise BadInput(f"patch path {path!r} leaves the repository: it {kind}; paths must be relative to its root")


def _hunks(pf: PatchedFile) -> list[Hunk]:
    hunks: list[Hunk] = []
    for h in pf:
        hunks.append(
            Hunk(
                source_start=h.source_start,
                source_length=h.source_length,
                target_start=h.target_start,
                target_length=h.target_length,
                removed=[ln.value.rstrip("\n") for ln in h if ln.is_removed],
                added=[ln.value.rstrip("\n") for ln in h if ln.is_added],
                before=[ln.value.rstrip("\n") for ln in h if ln.is_context or ln.is_removed],
                after=[ln.value.rstrip("\n") for ln in h if ln.is_context or ln.is_added],
                changed_target_lines=[ln.target_line_no for ln in h if ln.is_added and ln.target_line_no],
            )
        )
    return hunks


def _file_patch(pf: PatchedFile, config: NoChangeConfig) -> FilePatch:
    source = _strip_prefix(pf.source_file)
    target = _strip_prefix(pf.target_file)
    if pf.is_added_file:
        source = None
    if pf.is_removed_file:
        target = None
    for named in (source, target):
        check_inside_repository(named)
    path = target or source or ""
    return FilePatch(
        source_path=source,
        target_path=target,
        kind=classify(path, config),
        is_binary=pf.is_binary_file,
        is_rename=bool(getattr(pf, "is_rename", False)),
        is_added=pf.is_added_file,
        is_removed=pf.is_removed_file,
        hunks=_hunks(pf),
    )


def normalize_line_endings(text: str) -> str:
    """The patch with LF line endings when a CRLF conversion (Windows agents, some APIs) touched its diff headers.

    Otherwise unchanged: a ``git diff`` of files that themselves have CRLF lines keeps those CRs in its content
    lines but not in its headers, and the CRs are then part of the change."""
    lines = text.splitlines(keepends=True)
    if not any(ln.startswith(_HEADER_PREFIXES) and ln.endswith("\r\n") for ln in lines):
        return text
    return "".join(ln[:-2] + "\n" if ln.endswith("\r\n") else ln for ln in lines)


def parse_patch(text: str, config: NoChangeConfig | None = None) -> Patch:
    """Parse diff text. Empty text is a valid, empty patch (Stage 0 rejects it); anything else must parse.
    Every reader of a patch goes through here, so a CRLF patch is normalised once, for every stage and for applying
    it, and gets the verdict of its LF twin."""
    config = config or NoChangeConfig()
    text = normalize_line_endings(text)
    if not text.strip():
        return Patch(text=text, files=[])
    try:
        patch_set = PatchSet(text)
    except UnidiffParseError as exc:
        raise BadInput(f"malformed diff: {exc}") from None
    if len(patch_set) == 0:
        raise BadInput("malformed diff: no file sections ('--- a/…' / '+++ b/…') found")
    files = [_file_patch(pf, config) for pf in patch_set]
    # Binary files are part of a normal pull request: the text part is reviewed, the binary files are listed as
    # evidence (the hygiene stage) and applied only when the diff carries their data (``git diff --binary``).
    text_part = "".join(str(pf) for pf in patch_set if not pf.is_binary_file) if any(f.is_binary for f in files) else ""
    return Patch(text=text, files=files, text_part=text_part)


def decode_patch_bytes(data: bytes, max_bytes: int, source: str = "patch") -> str:
    """Decode a patch file's bytes, enforcing the size cap and UTF-8."""
    if len(data) > max_bytes:
        raise BadInput(f"{source} is {len(data)} bytes, over the {max_bytes}-byte cap (limits.max_patch_bytes)")
    if b"\0" in data:
        raise BadInput(f"{source} contains NUL bytes: binary data, not a unified diff")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{source} is not valid UTF-8 (byte {exc.start}): re-encode it as UTF-8") from None
