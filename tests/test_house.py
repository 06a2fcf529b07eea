"""The house rules hold: small rooms, short functions, small folders, and no reach into another module's privates."""

import pytest

from house import MAX_FILE_LINES, MAX_FOLDER_MODULES, MAX_FUNCTION_LINES, breaches


@pytest.fixture(scope="module")
def found():
    return breaches()


def test_no_module_of_vxmem_is_over_the_file_limit(found):
    assert found[f"files over {MAX_FILE_LINES} lines"] == []


def test_no_function_of_vxmem_is_over_the_function_limit(found):
    assert found[f"functions over {MAX_FUNCTION_LINES} lines"] == []


def test_no_folder_of_vxmem_holds_more_than_the_folder_limit(found):
    assert found[f"folders of more than {MAX_FOLDER_MODULES} modules"] == []


def test_nothing_reaches_into_another_modules_private_names(found):
    assert found["reaches into another module's private names"] == []


def test_no_fixture_under_tests_data_is_ignored_by_git(found):
    assert found["test fixtures git ignores"] == []


def test_an_ignored_fixture_is_reported(tmp_path, monkeypatch):
    import subprocess

    import house

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("*.vxdb\n")
    (tmp_path / "tests" / "data").mkdir(parents=True)
    (tmp_path / "tests" / "data" / "old.vxdb").write_bytes(b"x")
    (tmp_path / "tests" / "data" / "kept.json").write_text("{}")
    monkeypatch.setattr(house, "ROOT", tmp_path)
    assert house.ignored_fixtures() == ["tests/data/old.vxdb"]
