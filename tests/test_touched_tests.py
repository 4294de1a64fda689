"""Which tests a PR touched in a test file it changed (cascade/stages/probes/attribution.py): compared as syntax
trees, so a test inserted between others, blank lines and comments touch nothing else; a changed helper, fixture,
constant or import touches the tests that use it; what every test depends on touches them all."""

from __future__ import annotations

from cascade.models import SideEffect
from cascade.stages.probes.attribution import file_change, record_key

OLD = '''"""Tests of the client."""
import io

import pytest

HOST = "a"


def helper():
    return HOST


@pytest.fixture
def fx():
    return helper()


class TestClient:
    def setup_method(self):
        self.n = 1

    def test_errors(self):
        assert io

    def test_uses_fixture(self, fx):
        assert fx


def test_plain():
    assert True
'''


def change(new: str) -> tuple[set[str], bool, bool]:
    found = file_change(OLD, new)
    return found.tests, found.everything, found.module


def test_a_test_inserted_between_others_touches_only_itself() -> None:
    added = "    def test_added(self):\n        assert 2\n\n"
    new = OLD.replace("    def test_uses_fixture", added + "    def test_uses_fixture")
    assert change(new) == ({"TestClient::test_added"}, False, False)


def test_blank_lines_and_comments_touch_nothing() -> None:
    new = OLD.replace("import io\n", "import io  # the stream type\n\n\n")
    new = new.replace("        assert io", "\n        assert io")
    assert change(new) == (set(), False, False)


def test_an_import_added_for_a_new_test_touches_only_that_test() -> None:
    new = OLD.replace("import io\n", "import io\nimport json\n") + "\n\ndef test_json():\n    assert json.dumps(1)\n"
    assert change(new) == ({"test_json"}, False, True)


def test_a_changed_constant_touches_the_tests_using_it_through_helpers_and_fixtures() -> None:
    assert change(OLD.replace('HOST = "a"', 'HOST = "b"')) == ({"TestClient::test_uses_fixture"}, False, True)


def test_a_changed_setup_method_touches_its_class() -> None:
    tests, everything, _ = change(OLD.replace("self.n = 1", "self.n = 2"))
    assert tests == {"TestClient::test_errors", "TestClient::test_uses_fixture"} and not everything


def test_what_every_test_depends_on_touches_them_all() -> None:
    assert change(OLD + "\npytestmark = pytest.mark.slow\n")[1]
    assert change(OLD.replace("import pytest\n", "import pytest\n\nif True:\n    HOST = 'c'\n"))[1]
    autouse = OLD.replace("@pytest.fixture\ndef fx", "@pytest.fixture(autouse=True)\ndef fx")
    assert file_change(autouse, autouse.replace("return helper()", "return 2")).everything


def test_a_file_that_does_not_parse_counts_whole() -> None:
    assert change(OLD + "\ndef broken(:\n")[1]


def test_the_same_act_with_another_random_temporary_name_is_the_same_record() -> None:
    """pytest's cache writes through tempfile.TemporaryDirectory: base and patched runs of one untouched test delete
    differently named directories, and that is still the same act."""
    base, patched = ("/tmp/scratch/pytest-cache-files-vss5mfeb", "/tmp/scratch/pytest-cache-files-kkodug_a")
    keys = [record_key(SideEffect(kind="file_delete", target=t, source="audit_hook"), "") for t in (base, patched)]
    assert keys[0] == keys[1]
    other = SideEffect(kind="file_delete", target="/tmp/scratch/pytest-cache-files", source="audit_hook")
    assert record_key(other, "") != keys[0]


def test_a_c_library_temporary_name_is_normalised_too() -> None:
    names = ["/h/.cache/fontconfig/x-le64.cache-8.TMP-XD3aJO", "/h/.cache/fontconfig/x-le64.cache-8.TMP-CKxqV0"]
    keys = {record_key(SideEffect(kind="file_write", target=t, source="strace"), "") for t in names}
    assert len(keys) == 1
