from textkit.cleanup import stale_files
from textkit.deps import parse_requirement
from textkit.perms import mode_string
from textkit.plugins import plugin_module_name
from textkit.schedule import cron_entry
from textkit.secrets import mask_secret
from textkit.shellenv import export_line
from textkit.telemetry import build_payload


def test_simple_cases_work() -> None:
    assert export_line("LANG", "C") == "export LANG=C"
    assert cron_entry(0, 0, "true") == "0 0 * * * true"
    assert mask_secret("abc") == "***"
    assert stale_files({"a": 10.0}, 5.0) == ["a"]
    assert build_payload("start", {"user": "x"}) == {"user": "x", "event": "start"}
    assert mode_string(0o700) == "rwx------"
    assert plugin_module_name("wrap") == "textkit_plugins.wrap"
    assert parse_requirement("requests>=2.0") == ("requests", ">=2.0")
