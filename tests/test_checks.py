"""Bad input: TypeError for a wrong type, ValueError for a bad value, the argument named."""

import math

import numpy as np
import pytest

from vxmem import Vectrix
from vxmem.core.checks import check_bool, check_choice, check_int, check_kinds, check_number, check_session
from vxmem.workbench.replay.run import check_settings
from vxmem.workbench.sweep.policies import check_param, get_policy

from helpers import T0


@pytest.mark.parametrize("call, exc, names", [
    (lambda: check_int("3", "n"), TypeError, "n must be an int"),
    (lambda: check_int(True, "n"), TypeError, "n must be an int"),
    (lambda: check_int(-1, "n", minimum=0), ValueError, "n must be an int >= 0"),
    (lambda: check_number("0.5", "w"), TypeError, "w must be a number"),
    (lambda: check_number(math.nan, "w"), ValueError, "w must be in"),
    (lambda: check_number(2.0, "w", 0.0, 1.0), ValueError, r"w must be in [0, 1]"),
    (lambda: check_bool(1, "flag"), TypeError, "flag must be True or False"),
    (lambda: check_choice(3, "mode", ("dense",)), TypeError, "mode must be one of"),
    (lambda: check_choice("sparse", "mode", ("dense",)), ValueError, "unknown mode 'sparse'"),
    (lambda: check_session(5), TypeError, "session must be a str or None"),
    (lambda: check_kinds(5), TypeError, "kinds must be a kind"),
    (lambda: check_kinds((1,)), TypeError, "kind must be one of"),
    (lambda: check_kinds(()), ValueError, "kinds must name at least one"),
])
def test_each_check_raises_the_right_error_and_names_the_argument(call, exc, names):
    with pytest.raises(exc) as info:
        call()
    assert names in str(info.value)


def test_checks_return_the_canonical_value():
    assert check_int(np.int64(3), "n") == 3 and type(check_int(np.int64(3), "n")) is int
    assert check_number(1, "w") == 1.0 and isinstance(check_number(1, "w"), float)
    assert check_kinds(["fact", "turn", "fact"]) == ("fact", "turn")
    assert check_bool(np.bool_(True), "flag") is True


@pytest.mark.parametrize("call, exc", [
    (lambda: Vectrix(exact_threshold="many"), TypeError),
    (lambda: Vectrix(exact_threshold=-1), ValueError),
    (lambda: Vectrix(judge_candidates="5"), TypeError),
    (lambda: Vectrix(judge_candidates=0), ValueError),
    (lambda: Vectrix(hybrid_weight="half"), TypeError),
    (lambda: Vectrix(hybrid_weight=2.0), ValueError),
    (lambda: get_policy(3), TypeError),
    (lambda: get_policy("nope"), ValueError),
    (lambda: check_param("half_life_days", "7"), TypeError),
    (lambda: check_settings({"limit": "10"}), TypeError),
    (lambda: check_settings({"limit": 0}), ValueError),
])
def test_settings_of_the_wrong_type_are_type_errors(call, exc):
    with pytest.raises(exc):
        call()


@pytest.mark.parametrize("call, exc", [
    (lambda db, i: db.remember("x", role=""), ValueError),
    (lambda db, i: db.remember("x", role=3), TypeError),
    (lambda db, i: db.remember("x", kind=3), TypeError),
    (lambda db, i: db.remember("x", pinned="yes"), TypeError),
    (lambda db, i: db.recall("x", mode=5), TypeError),
    (lambda db, i: db.recall("x", include_superseded="no"), TypeError),
    (lambda db, i: db.feedback(i, 3), TypeError),
    (lambda db, i: db.forget(superseded=1), TypeError),
    (lambda db, i: db.search("x", filter={"": 1}), ValueError),
    (lambda db, i: db.search("x", filter={3: 1}), TypeError),
])
def test_memory_arguments_of_the_wrong_type_are_type_errors_and_change_nothing(call, exc):
    db = Vectrix()
    i = db.remember("known", session="s", timestamp=T0)
    before = [(r.id, r.metadata) for r in db.scan()]
    with pytest.raises(exc):
        call(db, i)
    assert [(r.id, r.metadata) for r in db.scan()] == before


def test_read_only_must_be_true_or_false(tmp_path):
    with pytest.raises(TypeError, match="read_only must be True or False"):
        Vectrix(str(tmp_path / "x.vxdb"), embedder="hashing", read_only="no")
    assert not (tmp_path / "x.vxdb").exists()


def test_recall_request_refuses_anything_but_a_request():
    db = Vectrix(embedder="hashing")
    with pytest.raises(TypeError, match="request must be a RecallRequest, not str"):
        db.memory.recall_request("alpha")
