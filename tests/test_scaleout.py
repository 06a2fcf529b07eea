"""Scale-out through joblib: a sweep and replays on a real Dask LocalCluster (scheduler and
worker processes on this machine) give exactly the serial results; progress reaches a
callback at the same points a tqdm bar would."""

import sys
import types

import joblib
import pandas as pd
import pytest

from vxmem.workbench.replay.run import replay, replay_many
from vxmem.workbench.sweep.run import sweep
from vxmem.workbench.synth import generate

GRID = {"half_life_days": [1, 7, 30], "recency_weight": [0.0, 0.5, 1.0], "limit": [5, 10]}


@pytest.fixture(scope="module")
def convs():
    return [generate("many_users", users=2), generate("feedback_loop"), generate("preference_drift", weeks=4)]


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")  # in the dev extra: make test always has it
    # Worker processes are spawned, and spawn re-runs the parent's __main__ from its path: after
    # streamlit's AppTest that is app.py. A bare __main__ makes the workers start clean.
    mp = pytest.MonkeyPatch()
    mp.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       worker_dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()
    mp.undo()


@pytest.mark.slow
def test_a_sweep_and_replays_on_a_dask_cluster_equal_the_serial_ones(client, convs):
    import distributed

    settings = {"pool_limit": 10}
    serial = replay_many(convs, settings, progress=False)
    with distributed.get_task_stream(client) as stream, joblib.parallel_config(backend="dask"):
        remote = replay_many(convs, settings, progress=False)
        res = sweep(remote, GRID, chunk_elements=2_000)  # small chunks: several tasks
    assert len(stream.data) >= len(convs) + 2, "the work did not run on the cluster's workers"
    workers = {t["worker"] for t in stream.data}
    assert len(workers) == 2

    def seen(reps):  # memory ids are fresh in every replay; labels and metrics are not
        frames = [pd.DataFrame(r.probes).drop(columns=["recalled_ids", "ranked_ids", "recall_ms", "meta"])
                  for r in reps]  # timings differ from run to run
        return pd.concat(frames, ignore_index=True).astype({"recalled_labels": str})

    pd.testing.assert_frame_equal(seen(remote), seen(serial))
    local = sweep(serial, GRID, chunk_elements=2_000)
    pd.testing.assert_frame_equal(res.per_point, local.per_point)
    pd.testing.assert_frame_equal(res.per_probe, local.per_probe)


def test_sweep_in_threads_equals_the_serial_sweep(convs):
    reps = replay_many(convs[:2], {"pool_limit": 10}, progress=False)
    one = sweep(reps, GRID, chunk_elements=2_000, n_jobs=1)
    two = sweep(reps, GRID, chunk_elements=2_000, n_jobs=2)
    pd.testing.assert_frame_equal(one.per_probe, two.per_probe)


def test_progress_callbacks_hear_every_event_and_every_chunk(convs):
    heard = []
    reps = replay_many(convs[:2], progress=lambda done, total, desc: heard.append((done, total, desc)))
    total = sum(len(c.events) for c in convs[:2])
    assert heard[-1][:2] == (total, total)
    assert [d for d, _, _ in heard] == sorted(d for d, _, _ in heard)
    assert {desc for _, _, desc in heard} == {f"replay {c.name}" for c in convs[:2]}
    chunks = []
    sweep(reps, GRID, chunk_elements=2_000, progress=lambda d, t, desc: chunks.append((d, t, desc)))
    assert chunks[-1][0] == chunks[-1][1] > 1 and chunks[-1][2] == "sweep"


def test_a_single_replay_reports_its_events(convs):
    heard = []
    replay(convs[1], progress=lambda d, t, desc: heard.append(d))
    assert heard[-1] == len(convs[1].events) and len(heard) <= 101
