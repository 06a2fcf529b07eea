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
