"""The dashboard renders and reacts (streamlit's AppTest, no browser)."""

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def test_app_renders_a_ranking_without_exceptions():
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert len(at.dataframe) == 1
    frame = at.dataframe[0].value
    assert "light mode" in frame.iloc[0]["text"]


def test_moving_the_half_life_slider_changes_the_scores():
    at = AppTest.from_file(APP, default_timeout=60).run()
    before = at.dataframe[0].value["score"].tolist()
    at.slider[0].set_value(60.0).run()
    assert not at.exception
    assert at.dataframe[0].value["score"].tolist() != before
