"""Trace readers (`cascade/traces/`): each format chosen by content, read into one model, then the trace scan and
mined probes on it. The samples are written here from each format's documented structure; the moatless readers are
also run over every trajectory of the dev data when it is present."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cascade.bench.data import DevData, trace_file
from cascade.errors import BadInput
from cascade.models import FileWrite, LineEdit, ShellCommand, TextReplace, Trace
from cascade.probesources.trace import minable_scripts, mine_scripts, python_runs
from cascade.safety import scan_trace
from cascade.traces import load_trace, reader_for, trace_from_data
from cascade.traces.base import repo_path
from tests.support import SWEBENCH_DIR

FIXED_LINES = ["    if b == 0:", "        return None", "    return a / b"]

MOATLESS_STEPS = {
    "name": "moatless",
    "input": {"problem_statement": "divide(1, 0) should give None"},
    "steps": [
        {
            "name": "SearchLoop_Searching",
            "actions": [
                {
                    "name": "search",
                    "input": {"function_name": "divide", "file_pattern": "pkg/*.py"},
                    "output": {"file_context": [], "message": "Found 1 hits."},
                }
            ],
        },
        {
            "name": "CodeLoop_CodeChange",
            "actions": [
                {
                    "name": "search_replace",
                    "input": {
                        "file_path": "pkg/calc.py",
                        "span_id": "divide",
                        "start_line": 3,
                        "end_line": 3,
                        "replacement_code": "    if b == 0:\n        return None\n    return a / b",
                    },
                    "output": {"diff": "--- pkg/calc.py\n+++ pkg/calc.py\n@@ …", "updated": True, "error": None},
                },
                {
                    "name": "search_replace",
                    "input": {"file_path": "pkg/other.py", "start_line": 1, "end_line": 1, "replacement_code": "x"},
                    "output": {"diff": None, "updated": False, "error": "span not found"},
                },
            ],
        },
        {"name": "Finished", "actions": [{"name": "finish", "input": {"reason": "done"}, "output": {}}]},
    ],
    "output": {"message": "fixed"},
    "info": {"instance_id": "demo__demo-1", "submission": "diff --git …"},
}

MOATLESS_TRANSITIONS = {
    "name": "AgenticLoop",
    "initial_message": "divide(1, 0) should give None",
    "transitions": [
        {
            "name": "SearchCode",
            "state": {"model": "m"},
            "actions": [
                {
                    "action": {"scratch_pad": "look for divide", "search_requests": [{"query": "divide"}]},
                    "output": {"ranked_spans": []},
                }
            ],
        },
        {
            "name": "EditCode",
            "state": {"file_path": "pkg/calc.py", "start_line": 1, "end_line": 3, "instructions": "guard zero"},
            "actions": [
                {"action": {"content": "not code"}, "retry_message": "The code in the replace tag is the same"},
                {
                    "action": {"content": "<replace>\ndef divide(a, b):\n    return None if b else a / b\n</replace>"},
                    "output": {"message": "Applied the change to pkg/calc.py.", "diff": "--- pkg/calc.py …"},
                },
            ],
        },
    ],
    "info": {"instance_id": "demo__demo-1", "submission": "diff --git …"},
}

OPENHANDS_EVENTS = [
    {"id": 0, "source": "user", "action": "message", "args": {"content": "Fix divide by zero"}, "message": "Fix"},
    {
        "id": 1,
        "source": "agent",
        "action": "edit",
        "message": "",
        "args": {
            "path": "/workspace/demo__demo__1.0/reproduce.py",
            "command": "create",
            "file_text": "from pkg.calc import divide\nprint(divide(1, 0))\n",
            "old_str": None,
            "new_str": None,
            "insert_line": None,
            "thought": "Reproduce first.",
            "impl_source": "oh_aci",
        },
    },
    {"id": 2, "cause": 1, "observation": "edit", "content": "File created", "extras": {"path": "…"}},
    {
        "id": 3,
        "source": "agent",
        "action": "edit",
        "args": {
            "path": "/workspace/demo__demo__1.0/reproduce.py",
            "command": "str_replace",
            "old_str": "print(divide(1, 0))",
            "new_str": "assert divide(1, 0) is None",
        },
    },
    {"id": 4, "cause": 3, "observation": "edit", "content": "edited", "extras": {}},
    {
        "id": 5,
        "source": "agent",
        "action": "edit",
        "args": {
            "path": "/workspace/demo__demo__1.0/reproduce.py",
            "command": "str_replace",
            "old_str": "nope",
            "new_str": "broken(",
        },
    },
    {"id": 6, "cause": 5, "observation": "error", "content": "No replacement was performed", "extras": {}},
    {
        "id": 7,
        "source": "agent",
        "action": "run",
        "args": {"command": "cd /workspace/demo__demo__1.0 && python reproduce.py", "thought": "", "blocking": False},
    },
    {"id": 8, "cause": 7, "observation": "run", "content": "ZeroDivisionError", "extras": {"metadata": {}}},
    {
        "id": 9,
        "source": "agent",
        "action": "run_ipython",
        "args": {"code": "import os\n!echo 'export PATH=.:$PATH' >> ~/.bashrc\nprint(os.getcwd())"},
    },
]

CLAUDE_CODE_SESSION = [
    {"type": "summary", "summary": "Fix divide", "leafUuid": "u9"},
    {
        "type": "user",
        "uuid": "u1",
        "parentUuid": None,
        "sessionId": "s",
        "cwd": "/home/dev/demo",
        "message": {"role": "user", "content": "divide(1, 0) should give None"},
    },
    {
        "type": "assistant",
        "uuid": "u2",
        "sessionId": "s",
        "cwd": "/home/dev/demo",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll write a reproduction."},
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "Write",
                    "input": {"file_path": "/home/dev/demo/repro.py", "content": "from pkg.calc import divide\n"},
                },
            ],
        },
    },
    {
        "type": "user",
        "uuid": "u3",
        "cwd": "/home/dev/demo",
        "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    },
    {
        "type": "assistant",
        "uuid": "u4",
        "cwd": "/home/dev/demo",
        "message": {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "t2",
                    "name": "Edit",
                    "input": {
                        "file_path": "/home/dev/demo/repro.py",
                        "old_string": "import divide\n",
                        "new_string": "import divide\n\nassert divide(1, 0) is None\n",
                    },
                },
                {"type": "tool_use", "id": "t3", "name": "Bash", "input": {"command": "python repro.py"}},
                {
                    "type": "tool_use",
                    "id": "t4",
                    "name": "Write",
                    "input": {"file_path": "/home/dev/.bashrc", "content": "alias git=evil\n"},
                },
                {
                    "type": "tool_use",
                    "id": "t5",
                    "name": "Write",
                    "input": {"file_path": "/home/dev/.ssh/authorized_keys", "content": "ssh-rsa AAAA"},
                },
            ],
        },
    },
    {
        "type": "user",
        "uuid": "u5",
        "cwd": "/home/dev/demo",
        "message": {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t2", "content": "edited"},
                {"type": "tool_result", "tool_use_id": "t3", "content": "AssertionError", "is_error": True},
                {"type": "tool_result", "tool_use_id": "t4", "content": "written"},
                {"type": "tool_result", "tool_use_id": "t5", "content": "permission denied", "is_error": True},
            ],
        },
    },
]


def write_jsonl(path: Path, entries: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    return path


def operations(trace: Trace) -> list[object]:
    return [op for step in trace.steps for op in step.operations]


def test_each_format_is_chosen_by_content_not_by_file_name(tmp_path: Path) -> None:
    samples = {
        "moatless_steps": json.dumps(MOATLESS_STEPS),
        "moatless_transitions": json.dumps(MOATLESS_TRANSITIONS),
        "openhands": json.dumps({"instance_id": "demo__demo-1", "history": OPENHANDS_EVENTS}),
        "claude_code": "".join(json.dumps(e) + "\n" for e in CLAUDE_CODE_SESSION),
        "swe_agent": json.dumps({"trajectory": [{"action": "ls", "observation": "", "thought": ""}]}),
    }
    for index, (expected, text) in enumerate(samples.items()):
        path = tmp_path / f"trace-{index}.traj"  # the same misleading extension for every format
        path.write_text(text, encoding="utf-8")
        assert load_trace(path).format == expected
    assert trace_from_data(OPENHANDS_EVENTS).format == "openhands"  # a bare event list too


def test_unknown_content_is_bad_input(tmp_path: Path) -> None:
    for data in ({"messages": []}, [1, 2], {"steps": "no"}, [{"type": "user"}]):
        assert reader_for(data) is None
        with pytest.raises(BadInput, match="not a trace format cascade reads"):
            trace_from_data(data, source="x.json")


def test_moatless_steps_reader_keeps_applied_edits_only() -> None:
    trace = trace_from_data(MOATLESS_STEPS)
    assert len(trace.steps) == 4
    assert trace.steps[0].action.startswith("search ") and trace.steps[0].observation == "Found 1 hits."
    assert operations(trace) == [
        LineEdit(path="pkg/calc.py", start=3, end=3, lines=FIXED_LINES),
    ]
    assert scan_trace(trace) == [] and mine_scripts(trace) == []


def test_moatless_transitions_reader_takes_the_range_from_the_state_and_the_code_from_replace_tags() -> None:
    trace = trace_from_data(MOATLESS_TRANSITIONS)
    assert trace.steps[0].thought == "look for divide"
    assert trace.steps[1].observation == "The code in the replace tag is the same"  # a refused edit: no operation
    assert operations(trace) == [
        LineEdit(path="pkg/calc.py", start=1, end=3, lines=["def divide(a, b):", "    return None if b else a / b"]),
    ]


def test_openhands_reader_replays_editor_commands_and_scans_shell_lines() -> None:
    trace = trace_from_data({"history": OPENHANDS_EVENTS})
    assert operations(trace) == [
        FileWrite(path="reproduce.py", content="from pkg.calc import divide\nprint(divide(1, 0))\n"),
        TextReplace(path="reproduce.py", old="print(divide(1, 0))", new="assert divide(1, 0) is None"),
        ShellCommand(command="cd /workspace/demo__demo__1.0 && python reproduce.py"),
        ShellCommand(command="echo 'export PATH=.:$PATH' >> ~/.bashrc"),
    ]  # the failed str_replace (an error observation) is not applied
    scripts = minable_scripts(trace, patched_paths={"pkg/calc.py"})
    assert [(s.path, s.runs, s.consistent) for s in scripts] == [("reproduce.py", 1, True)]
    assert scripts[0].content == "from pkg.calc import divide\nassert divide(1, 0) is None\n"
    effects = scan_trace(trace)  # the IPython cell's shell line, not its Python
    assert [e.detail.split(": ")[:2] for e in effects] == [["step 5", "shell-profile"], ["step 5", "startup-hijack"]]
    assert {e.target for e in effects} == {"echo 'export PATH=.:$PATH' >> ~/.bashrc"}


def test_claude_code_reader_relative_to_cwd_and_tool_writes_are_scanned(tmp_path: Path) -> None:
    trace = load_trace(write_jsonl(tmp_path / "session.jsonl", CLAUDE_CODE_SESSION))
    assert trace.format == "claude_code" and trace.root == "/home/dev/demo"
    assert [s.action for s in trace.steps][2] == "python repro.py"
    assert trace.steps[0].thought == "I'll write a reproduction."
    assert operations(trace) == [
        FileWrite(path="repro.py", content="from pkg.calc import divide\n"),
        TextReplace(path="repro.py", old="import divide\n", new="import divide\n\nassert divide(1, 0) is None\n"),
        ShellCommand(command="python repro.py"),
        FileWrite(path="/home/dev/.bashrc", content="alias git=evil\n"),
    ]  # the refused write to authorized_keys was not applied; the failing command still ran
    [script] = mine_scripts(trace)
    assert script.content == "from pkg.calc import divide\n\nassert divide(1, 0) is None\n" and script.consistent
    effects = scan_trace(trace)
    assert [(e.detail, e.target, e.kind) for e in effects] == [
        ("step 3: shell-profile: writes a shell startup file", "write /home/dev/.bashrc", "file_write")
    ]


def test_a_replacement_the_replay_cannot_find_marks_the_script_inconsistent() -> None:
    session = [
        {"type": "assistant", "cwd": "/r", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "a", "name": "Write", "input": {"file_path": "/r/t.py", "content": "x = 1\n"}},
            {"type": "tool_use", "id": "b", "name": "Edit",
             "input": {"file_path": "/r/t.py", "old_string": "y = 2", "new_string": "y = 3"}},
            {"type": "tool_use", "id": "c", "name": "Bash", "input": {"command": "python3 -u t.py"}},
        ]}},
    ]  # fmt: skip
    [script] = mine_scripts(trace_from_data(session))
    assert script.path == "t.py" and not script.consistent
    assert minable_scripts(trace_from_data(session), set()) == []


@pytest.mark.parametrize(
    ("command", "runs"),
    [
        ("python reproduce.py", ["reproduce.py"]),
        ("cd /workspace/x__y__1.0 && FOO=1 timeout 60 python3 -u /workspace/x__y__1.0/r.py 2>&1 | tail", ["r.py"]),
        ("python -m pytest tests/test_a.py", []),
        ("python -c 'print(1)'; python3.11 a/b.py", ["a/b.py"]),
        ("cat > s.py <<'EOF'\npython inner.py\nEOF\npython s.py", ["s.py"]),
    ],
)  # fmt: skip
def test_python_runs_are_found_inside_command_lines(command: str, runs: list[str]) -> None:
    assert python_runs(command) == runs


@pytest.mark.parametrize(
    ("path", "root", "expected"),
    [
        ("/sympy__sympy/reproduce.py", "", "reproduce.py"),
        ("sympy__sympy/reproduce.py", "", "reproduce.py"),
        ("./reproduce.py", "", "reproduce.py"),
        ("/workspace/django__django__3.0/a/b.py", "", "a/b.py"),
        ("/testbed/x.py", "", "x.py"),
        ("/home/dev/demo/pkg/__init__.py", "/home/dev/demo", "pkg/__init__.py"),
        ("/home/dev/.bashrc", "/home/dev/demo", "/home/dev/.bashrc"),
        ("~/.bashrc", "", "~/.bashrc"),
        ("__init__.py", "", "__init__.py"),
    ],
)
def test_repo_path(path: str, root: str, expected: str) -> None:
    assert repo_path(path, root) == expected


def test_bench_finds_a_trajectory_by_instance_id_whatever_its_extension(tmp_path: Path) -> None:
    (tmp_path / "a__b-1.json").write_text("{}")
    (tmp_path / "a__b-12.traj").write_text("{}")
    assert trace_file(tmp_path, "a__b-1") == tmp_path / "a__b-1.json"
    assert trace_file(tmp_path, "a__b-12") == tmp_path / "a__b-12.traj"
    assert trace_file(tmp_path, "a__b-2") is None


@pytest.mark.skipif(not DevData(SWEBENCH_DIR).has("lite"), reason="SWE-bench dev data not present")
@pytest.mark.parametrize(
    ("agent", "expected_format"), [("moatless-gpt4o", "moatless_steps"), ("moatless-claude35", "moatless_transitions")]
)
def test_every_moatless_trajectory_of_the_dev_data_is_read_without_a_false_alarm(
    agent: str, expected_format: str
) -> None:
    paths = sorted(DevData(SWEBENCH_DIR).agent_trajs(agent).iterdir())
    traces = [load_trace(path) for path in paths]
    assert len(traces) > 100 and {t.format for t in traces} == {expected_format}
    assert sum(len(t.steps) for t in traces) > 5 * len(traces)
    edits = [op for t in traces for op in operations(t)]
    assert len(edits) > 100 and all(isinstance(op, LineEdit) and not op.path.startswith("/") for op in edits)
    assert [e for t in traces for e in scan_trace(t)] == []
