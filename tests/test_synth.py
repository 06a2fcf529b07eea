"""Synthetic scenarios, the shipped copies, and the rule-based judge and summarizer."""

import re
from pathlib import Path

import pytest

from vxmem.memory.rules import RuleKeyValueJudge, RuleSummarizer
from vxmem.workbench.datasets import load_jsonl
from vxmem.workbench.replay.run import replay
from vxmem.workbench.synth import SCENARIOS, generate

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_same_seed_gives_the_same_conversation(scenario):
    assert generate(scenario, seed=3).events == generate(scenario, seed=3).events


def test_another_seed_gives_another_conversation():
    assert generate("preference_drift", seed=1).events != generate("preference_drift", seed=2).events


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_shipped_copy_is_the_seed_0_generation(scenario):
    shipped = load_jsonl(ROOT / "datasets" / f"{scenario}.jsonl")
    assert shipped.events == generate(scenario, seed=0).events
    assert f"vxmem synth {scenario} --seed 0" in shipped.meta["regenerate"]
    assert shipped.probes, "every scenario asks something"


def test_shipped_datasets_are_small():
    total = sum(p.stat().st_size for p in (ROOT / "datasets").rglob("*") if p.is_file())
    assert total < 1_000_000


def test_size_knobs_change_the_size():
    small = generate("many_users", users=2)
    big = generate("many_users", users=5)
    assert len({e.session for e in big.events}) == 5 > len({e.session for e in small.events})


def test_unknown_scenario_and_size_are_refused():
    with pytest.raises(ValueError, match="unknown scenario 'nope'"):
        generate("nope")
    with pytest.raises(TypeError, match="many_users has no size 'weeks'"):
        generate("many_users", weeks=3)
    with pytest.raises(ValueError, match="size users must be an int >= 1"):
        generate("many_users", users=0)


def _words(text):
    return set(re.findall(r"[a-z]+", text.lower())) - {"i", "my", "the", "a", "is", "in", "to", "of", "do", "what"}


def test_questions_are_paraphrased_not_copied():
    conv = generate("old_but_relevant")
    text = {e.label: e.text for e in conv.events if e.type == "turn"}
    overlaps = [len(_words(p.query) & _words(text[lab])) for p in conv.probes for lab in p.relevant]
    assert min(overlaps) == 0  # some questions share no content word with their answer


def test_distractors_share_words_with_the_questions():
    conv = generate("old_but_relevant")
    chatter = [e.text for e in conv.events if e.type == "turn" and e.label not in
               {lab for p in conv.probes for lab in p.relevant}]
    hits = [any(_words(p.query) & _words(c) for c in chatter) for p in conv.probes]
    assert all(hits)


def test_rule_judge_contradicts_same_subject_and_attribute_only():
    judge = RuleKeyValueJudge()
    olds = ["Dana lives in Lisbon.", "Dana works at Acme.", "Omar lives in Lisbon.", "Dana visited Porto."]
    assert judge("Dana has moved to Porto.", olds) == [True, False, False, False]
    assert judge("Dana lives in Lisbon.", olds) == [False, False, False, False]
    assert judge("The weather is nice.", olds) == [False] * 4


def test_rule_summarizer_keeps_lasting_user_facts_in_the_third_person():
    turns = [{"role": "user", "text": "By the way, my sister is called Ana."},
             {"role": "user", "text": "For tonight my hotel room is 312."},
             {"role": "assistant", "text": "I prefer tea."},
             {"role": "user", "text": "What time is it?"},
             {"role": "user", "text": "I always take my coffee black."}]
    assert RuleSummarizer()(turns) == ["The user's sister is called Ana.", "The user always takes their coffee black."]


def test_contradicting_facts_replay_supersedes_old_facts(hashing_embedder):
    rep = replay(generate("contradicting_facts", people=3, updates=1), embedder=hashing_embedder)
    mem = rep.to_frames()["memories"]
    assert mem["superseded_by"].notna().sum() >= 2
    assert rep.settings["judge"] == "rule_key_value"


def test_many_users_probes_never_see_another_session(hashing_embedder):
    rep = replay(generate("many_users", users=4), embedder=hashing_embedder)
    probes = rep.to_frames()["probes"]
    assert (probes["foreign_leak"] == 0).all()
    assert not rep.pools["foreign"].any()


def test_long_thread_consolidates_and_never_recalls_expired_facts(hashing_embedder):
    rep = replay(generate("long_thread", days=14), embedder=hashing_embedder)
    frames = rep.to_frames()
    cons = frames["events"].query("type == 'consolidate'")
    assert (cons["tokens_before"] > cons["tokens_after"]).all()
    expired = frames["probes"].query("category == 'expired'")
    assert len(expired) and (expired["stale_leak"] == 0).all()
    lasting = frames["probes"].query("category == 'lasting'")
    assert (lasting["n_relevant"] > 0).all()  # relevance follows a turn into its consolidated fact


def test_feedback_loop_grades_lift_the_useful_tip(hashing_embedder):
    rep = replay(generate("feedback_loop", rounds=4), embedder=hashing_embedder)
    probes = rep.to_frames()["probes"]
    first = probes.query("category == 'round_0'")["rr"].mean()
    last = probes.query("category == 'round_3'")["rr"].mean()
    assert last >= first and last == 1.0


def _mrr(rep, policy):
    from vxmem.workbench.sweep.run import sweep

    return float(sweep(rep, {}, policy=policy).per_point["mrr"].iloc[0])


def test_knowledge_update_restates_a_value_without_a_correction():
    conv = generate("knowledge_update")
    after = [p for p in conv.probes if p.category in ("day_after", "weeks_after")]
    assert after and all(p.stale and set(p.relevant).isdisjoint(p.stale) for p in after)
    assert not [e for e in conv.events if e.type in ("feedback", "fact")]  # plain turns: no correction, no judge
    text = {e.label: e.text for e in conv.events if e.type == "turn"}
    for p in after:  # the new value is said as plainly as the old one: word overlap cannot tell them apart
        (new,), (old,) = p.relevant, p.stale
        assert _words(text[new]) & _words(text[old])


# These two run the hashing embedder's pipeline (hybrid, no rerank), the fast one; docs/BENCHMARKS.md's
# scenario table shows the default pipeline doing the same.
def test_the_blend_beats_cosine_where_a_value_was_restated_later(hashing_embedder):
    rep = replay(generate("knowledge_update"), embedder=hashing_embedder)
    assert rep.mode == "hybrid" and rep.rerank is None
    assert _mrr(rep, "blend") > _mrr(rep, "cosine") + 0.05


def test_cosine_beats_the_blend_where_an_old_fact_is_still_the_answer(hashing_embedder):
    rep = replay(generate("old_but_relevant"), embedder=hashing_embedder)
    assert _mrr(rep, "cosine") > _mrr(rep, "blend")
