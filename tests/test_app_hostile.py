"""The workbench under hostile input: URL parameters and session values of the wrong type, huge,
unknown or script-like; uploads that are huge, zipped, binary or mislabelled. Each gets a clear
message on the page: no traceback, nothing written, no HTML let through (streamlit's AppTest;
tests/test_browser.py opens such a URL in Chromium)."""

import hashlib
import io
import json
import re
import zipfile

import pytest
from streamlit.testing.v1 import AppTest
from test_app import APP, OPENAI_CHAT, ROOT, page, shown

from vxmem.workbench import views
from vxmem.workbench.views import inputs

# Every chart these pages draw is built from channel objects (conftest's fixture says why).
pytestmark = pytest.mark.usefixtures("charts_from_channel_objects")

SCRIPT = "<script>alert(1)</script>"
IMAGE = "![x](http://attacker.invalid/pixel.png)"
HOSTILE_QUERY = {
    "limit": "abc", "half_life_days": "1e400", "recency_weight": "nan", "feedback_weight": "-inf",
    "token_budget": "9" * 5000, "mode": SCRIPT, "embedder": "x" * 100_000, "recency_from": IMAGE,
    "hybrid_weight": "<img src=x onerror=alert(1)>", "evil": SCRIPT, SCRIPT: "1", "dataset": SCRIPT,
    "pg": "../../../etc/passwd",
}


@pytest.fixture(autouse=True)
def sessions_dir(tmp_path, monkeypatch):
    """Saved playgrounds go to a temporary directory, not the home directory (as in test_app.py)."""
    from app_pages import config

    monkeypatch.setattr(config, "SESSIONS_DIR", tmp_path / "sessions")
    return tmp_path / "sessions"


PAGES = ("playground", "replay", "tune", "sweep", "ab", "budget", "compare", "importer", "qa")


def all_text(at) -> list[str]:
    """Every string a page draws as Markdown (headings, text, captions, alerts), sidebar included."""
    kinds = ("markdown", "caption", "warning", "error", "info", "success", "title", "header", "subheader")
    return [e.value for kind in kinds for e in at.get(kind)] + [e.value for kind in kinds for e in at.sidebar.get(kind)]


def injected(at) -> list[str]:
    """The drawn strings that let HTML or a Markdown image through: ``<`` or ``![`` not escaped."""
    return [t for t in all_text(at) if re.search(r"(?<!\\)<(script|img)|(?<!\\)!(?<!\\)\[", t)]


def fingerprint(*dirs) -> dict:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for d in dirs if d.exists() for p in sorted(d.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("name", PAGES)
def test_a_hostile_url_opens_every_page_at_the_defaults_and_names_each_bad_value(name):
    at = page(name if name != "playground" else None, query=HOSTILE_QUERY)
    assert not at.exception
    s = at.session_state["settings"]
    assert s["limit"] == 10 and s["half_life_days"] == 7.0 and s["mode"] == "hybrid" and s["embedder"] == "default"
    warned = shown(at.sidebar.warning)
    for key in ("limit", "half_life_days", "recency_weight", "feedback_weight", "token_budget", "mode", "embedder",
                "recency_from", "hybrid_weight", "unknown parameter 'evil'", "dataset"):
        assert key in warned, (key, warned[:2000])
    assert SCRIPT in warned  # shown as the characters it is...
    assert not injected(at), injected(at)  # ...never as HTML or an image
    assert max(len(w.value) for w in at.sidebar.warning) < 1000  # a 100,000-character value is quoted short
    assert "evil" not in at.query_params and SCRIPT not in at.query_params.values()  # the URL is rewritten clean


def test_a_hostile_saved_playground_name_is_refused_and_nothing_is_read_or_written(sessions_dir):
    at = page(query={"pg": SCRIPT})
    assert not at.exception
    assert "is not on this machine" in shown(at.error) and not injected(at)
    assert all(p.name.startswith("playground-") for p in sessions_dir.glob("*"))  # only its own session file


@pytest.mark.parametrize("key, value", [
    ("settings", "junk"), ("settings", {"limit": SCRIPT, "half_life_days": 1e308, "mode": ["hybrid"], "x": 1}),
    ("pg_events", "not events"), ("pg_events", [{"time": "yesterday", "type": SCRIPT}]), ("pg_now", float("inf")),
    ("pg_now", "noon"), ("pg_kept", None), ("pg_kept", {"query": 3}), ("dataset_kept", 42), ("imported", SCRIPT),
    ("pg_message", 7), ("url_problems", SCRIPT), ("pg_saved", "../x"),
])
def test_session_values_of_the_wrong_type_are_reset_and_named(key, value):
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state[key] = value
    at.run()
    assert not at.exception
    assert not at.error, shown(at.error)
    assert "Reset in this session" in shown(at.sidebar.warning) and key in shown(at.sidebar.warning)
    assert not injected(at)
    assert at.dataframe[0].value is not None  # the Playground drew its ranking from the defaults


def test_a_value_no_page_can_use_is_a_sentence_and_a_fresh_session_not_a_traceback(monkeypatch):
    # What a session value that passes every check and still breaks a page does (here: the page's
    # first frame refuses it): one sentence on the page, the traceback in the server's log.
    def refuse(*args, **kwargs):
        raise TypeError(f"cannot use {SCRIPT}")

    monkeypatch.setattr(views, "conversation_summary", refuse)
    at = page()
    at.switch_page("app_pages/replay.py").run()
    assert not at.exception
    assert "The Replay page could not be drawn: TypeError" in shown(at.error) and not injected(at)
    at.button(key="fresh_session").click().run()
    assert not at.exception
    assert at.session_state["settings"]["limit"] == 10


def _zip(name: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(name, data)
    return buf.getvalue()


DATASET = (ROOT / "datasets" / "pinned_profile.jsonl").read_bytes()
BAD_UPLOADS = [
    ("dataset.jsonl", _zip("dataset.jsonl", DATASET), "zip archive"),
    ("dataset.jsonl", b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4, "gzip"),
    ("data.jsonl", bytes(range(256)) * 64, "binary"),
    ("picture.json", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "PNG image"),
    ("latin1.jsonl", "caf\u00e9 ol\u00e9".encode("latin-1"), "not UTF-8"),
    ("empty.jsonl", b"   \n", "empty"),
    (f"{SCRIPT}.jsonl", b'{"not": "a dataset"}\n', "Cannot"),
]


@pytest.mark.parametrize("name, data, said", BAD_UPLOADS)
def test_a_bad_dataset_upload_is_named_and_changes_nothing(name, data, said):
    before = fingerprint(ROOT / "datasets")
    at = page("tune", dataset="Upload a file...")
    at.file_uploader(key="dataset_upload").upload(name, data).run()
    assert not at.exception
    assert said in shown(at.error) and not injected(at), shown(at.error)
    assert fingerprint(ROOT / "datasets") == before


@pytest.mark.parametrize("name, data, said", BAD_UPLOADS)
def test_a_bad_chat_upload_is_named_and_changes_nothing(name, data, said, sessions_dir):
    at = page("importer")
    at.file_uploader(key="import_upload").upload(name, data).run()
    assert not at.exception
    assert said in shown(at.error) and not injected(at), shown(at.error)
    assert "imported" not in at.session_state


def test_a_huge_upload_is_refused_before_it_is_read(monkeypatch):
    monkeypatch.setattr(inputs, "MAX_UPLOAD_BYTES", 1000)
    at = page("importer")
    at.file_uploader(key="import_upload").upload("chats.jsonl", OPENAI_CHAT * 10).run()
    assert not at.exception
    assert "over the workbench's 1,000 bytes" in shown(at.error) and "CLI" in shown(at.error)
    at = page("tune", dataset="Upload a file...")
    at.file_uploader(key="dataset_upload").upload("big.jsonl", DATASET * 10).run()
    assert "over the workbench's 1,000 bytes" in shown(at.error)


def test_a_mislabelled_upload_says_what_it_is():
    locomo = (ROOT / "datasets" / "fixtures" / "locomo_sample.json").read_bytes()
    at = page("importer")
    at.selectbox(key="import_format").set_value("vxmem JSONL dataset (edit its probes)").run()
    at.file_uploader(key="import_upload").upload("locomo.jsonl", locomo).run()
    assert not at.exception and at.error and "locomo.jsonl" in shown(at.error)
    at = page("tune", dataset="Upload a file...")
    at.file_uploader(key="dataset_upload").upload("chat.json", OPENAI_CHAT).run()  # a chat log, not a dataset
    assert not at.exception and "Import page" in shown(at.error)


@pytest.mark.parametrize("data, said", [
    (b"[" * 100_000, "not a settings file"),
    (_zip("s.json", b"{}"), "zip archive"),
    (json.dumps({"mode": SCRIPT, "limit": 10**400, "half_life_days": True}).encode(), "Not imported"),
    (b"\xff\xfe\x00\x01", "not a settings file"),
])
def test_a_hostile_settings_file_is_named_and_not_applied(data, said):
    at = page("tune")
    at.file_uploader(key="settings_upload").upload("settings.json", data).run()
    assert not at.exception
    assert said in shown(at.sidebar.error) + shown(at.sidebar.warning)
    assert not injected(at)
    assert at.session_state["settings"]["mode"] == "hybrid" and at.session_state["settings"]["limit"] == 10


@pytest.mark.parametrize("data, said", [
    (_zip("playground.jsonl", b"{}"), "zip archive"), (bytes(range(256)) * 8, "binary"),
    (b'{"format": "vxmem-conversation/1", "name": "x"}\n{"time": "' + SCRIPT.encode() + b'", "type": "turn"}\n',
     "Cannot restore"),
])
def test_a_hostile_playground_upload_is_named_and_the_playground_kept(data, said, sessions_dir):
    at = page()
    events = at.session_state["pg_events"]
    saved = fingerprint(sessions_dir)
    at.file_uploader(key="pg_upload").upload(f"{SCRIPT}.jsonl", data).run()
    assert not at.exception
    assert said in shown(at.error) and not injected(at), shown(at.error)
    assert at.session_state["pg_events"] == events
    assert fingerprint(sessions_dir) == saved  # nothing new written


def test_no_page_lets_html_through():
    for path in [ROOT / "app.py", *(ROOT / "app_pages").glob("*.py")]:
        source = path.read_text()
        assert "unsafe_allow_html" not in source and "st.html" not in source and "components.v1" not in source, path


def test_plain_escapes_what_markdown_would_interpret():
    assert views.plain(SCRIPT) == "\\<script\\>alert(1)\\</script\\>"
    assert views.plain(IMAGE).startswith("\\!\\[x\\]")
    assert views.plain("1. not a list") == "1\\. not a list" and views.plain("- nor this") == "\\- nor this"
    assert views.plain("x" * 500).endswith("(500 characters)") and len(views.plain("x" * 500)) < 160
