"""``vxmem serve --config vxmem.toml``, for real: a child server configured by a file, driven
with httpx; a file it cannot take is refused by name before anything serves."""

from pathlib import Path

import httpx
import pytest

from vxmem import Vectrix

from helpers import DAY, T0
from servers import free_port, llm_stub, rest_server


@pytest.fixture
def llm():
    with llm_stub() as base:
        yield f"{base}/v1"


def test_the_file_sets_the_blend_the_ttls_the_user_the_log_and_the_summarizer(tmp_path, llm):
    config = tmp_path / "vxmem.toml"
    config.write_text(f"""
[server]
user = "fromfile"
access_log = false

[memory]
recency_weight = 0.0
preset = "fast"

[memory.ttl_days]
turn = 1

[summarizer]
model = "summarizer-recorded"
url = "{llm}"
timeout = 5
""")
    path = tmp_path / "cfg.vxdb"
    with open(tmp_path / "err.log", "w+") as log, rest_server(path, "--config", str(config), log=log) as url, \
            httpx.Client(base_url=url, timeout=60) as c:
        c.post("/v1/remember_many", json={"session": "chat", "timestamp": T0, "memories": [
            "I can't eat peanuts", "I moved to Lisbon", "what's the weather"]})
        hits = c.post("/v1/recall", json={"query": "peanuts", "now": T0 + DAY / 2}).json()
        consolidated = c.post("/v1/consolidate", json={"session": "chat", "keep_recent": 1, "now": T0 + DAY / 2})
        expired = c.post("/v1/expire", json={"now": T0 + 2 * DAY}).json()
        log.flush()
        said = Path(log.name).read_text()
    assert hits["blend"]["recency_weight"] == 0.0 and hits["results"]
    assert consolidated.status_code == 200 and len(consolidated.json()["facts"]) == 2
    assert expired == {"deleted": 1}  # the turn consolidate kept: turns live a day, facts for ever
    assert "/v1/recall" not in said  # access_log = false
    with Vectrix(path, read_only=True) as db:
        assert {r.metadata["_vx_user"] for r in db.scan()} == {"fromfile"} and len(db) == 2


def test_a_flag_given_wins_over_the_file(tmp_path):
    config = tmp_path / "vxmem.toml"
    config.write_text('[server]\nuser = "fromfile"\n')
    path = tmp_path / "flag.vxdb"
    with rest_server(path, "--config", str(config), "--user", "fromflag") as url:
        assert httpx.post(f"{url}/v1/remember", json={"text": "x"}).status_code == 200
    with Vectrix(path, read_only=True) as db:
        assert [r.metadata["_vx_user"] for r in db.scan()] == ["fromflag"]


@pytest.mark.parametrize("text, said", [
    ("[surprise]\nx = 1\n", "unknown table or not a table: 'surprise'"),
    ("[server]\nprot = 1\n", "unknown [server] setting 'prot'"),
    ("[server]\nport = '8765'\n", "[server] port must be a int"),
    ("[memory]\nrecency_wieght = 0.5\n", "--config [memory]"),
    ("[memory]\npreset = 'fastest'\n", "--config [memory]"),
    ("[judge]\nmodel = 'm'\n", "[judge] needs model and url"),
    ("[judge]\nmodel = 'm'\nurl = 'http://127.0.0.1:9/v1'\napi_key = 's'\n", "OPENAI_API_KEY"),
    ("not toml at all [", "not TOML"),
])
@pytest.mark.timeout(60)  # in this process: a file taken by mistake would serve until the timeout fails it
def test_a_file_it_cannot_take_is_refused_by_name(tmp_path, capsys, text, said):
    from vxmem.cli import main

    config = tmp_path / "bad.toml"
    config.write_text(text)
    # In this process: the refusal is the command's own code, and an interpreter start per file
    # added about a second each. (The [memory] settings are refused as the database opens, after
    # the port is bound, so the port must be free.)
    code = main(["serve", "--db", str(tmp_path / "bad.vxdb"), "--config", str(config), "--port", str(free_port())])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("vxmem: error:") and said in err, err
