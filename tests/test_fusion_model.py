"""The fitted evidence fusion (evidence/fusion_model.py, eval/fusion_fit.py): the model is the fused score, its file
is checked on load, fitting learns from gold, and a fold's model never sees that fold's questions."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memcompile_langgraph.config import MemCompileConfig
from memcompile_langgraph.eval import fusion_fit
from memcompile_langgraph.eval.crossval import make_folds
from memcompile_langgraph.evidence.fusion import BONUS_SIGNALS, FUSION_WEIGHTS, fused_scores, weights_of
from memcompile_langgraph.evidence.fusion_model import (
    Example,
    FusionModelError,
    example,
    example_scores,
    fit_weights,
    load_weights,
    save_model,
    with_fusion_model,
)
from memcompile_langgraph.index.user import UserIndex
from memcompile_langgraph.model import Intent
from memcompile_langgraph.text.terms import terms
from tests.test_fusion import _claim, make_packet

HAND = weights_of(MemCompileConfig())


TURNS = [
    (0, "A", "Do you like hiking in the mountains?"),
    (0, "B", "I went hiking in the Alps last summer with my sister."),
    (0, "A", "That sounds wonderful, the weather was great."),
    (1, "B", "My new job at the bakery starts on Monday."),
    (1, "A", "Congratulations on the bakery job!"),
    (2, "B", "We hiked again near the lake and camped overnight."),
    (2, "A", "Camping by a lake is my favourite."),
]


def _index(turns: list[tuple[int, str, str]] = TURNS) -> UserIndex:
    """Three sessions; the asking turn and the speaker differ, so every signal but dense has something to say."""
    index = UserIndex("u", MemCompileConfig())
    for seq, (session, speaker, text) in enumerate(turns):
        p = make_packet(text, speaker, f"D{session}:{seq}", session, f"p{seq}", seq)
        index.add_packet(p)
        d = _claim(p, 0, text)
        index.layout.place(d)
        index.register([d])
        index.index_packet_text([p.packet_id])
    return index


def test_the_model_under_the_hand_set_weights_is_the_fused_score():
    index = _index()
    cfg = MemCompileConfig(feedback_min_packets=1)
    intent = Intent(query="Where did B go hiking?", terms=tuple(terms("Where did B go hiking?")), people=("B",))
    candidates = list(index.packet_order)
    ex = example(index, intent, [], [], candidates, {"D0:1"}, cfg)
    fused = fused_scores(index, intent, [], [], cfg)
    assert example_scores(ex, weights_of(cfg)) == pytest.approx(fused, abs=1e-9)
    # feedback off: its terms come from the ranking of the weights the example was collected under
    other = {
        **weights_of(cfg),
        "fusion_speaker": 0.0,
        "fusion_previous": 0.7,
        "fusion_lexical": 2.0,
        "fusion_feedback": 0.0,
    }
    assert example_scores(ex, other) == pytest.approx(
        fused_scores(index, intent, [], [], cfg.with_overrides(**other)), abs=1e-9
    )
    assert ex.gold.tolist() == [c == "p1" for c in candidates]


def test_the_model_reproduces_a_hand_computed_score():
    ex = Example(
        base=np.array([[1.0, 0, 0, 2.0, -1.0]]),
        previous=np.array([[0.5, 0, 0, 1.0, 0.0]]),
        following=np.array([[-3.0, 0, 0, 0.0, 0.0]]),  # a negative neighbour lends nothing
        bonus=np.array([[-1.0, 0.5, 1.0, 1.0, 0.0, 1.0]]),
        feedback=np.array([2.0]),
        gold=np.array([True]),
    )
    # every weight the sum uses, set here: the hand computation must not follow the defaults
    w = {
        **HAND,
        "fusion_lexical": 1.0,
        "fusion_dense": 1.0,
        "fusion_dense_question": 0.5,
        "fusion_previous": 0.2,
        "fusion_next": 0.2,
        "fusion_asking": 1.5,
        "fusion_recency": 0.0,
        "fusion_temporal": 0.3,
        "fusion_date": 3.0,
        "fusion_addressed": 3.0,
        "fusion_feedback": 0.2,
    }
    # base: 1*1 + 1*2 + 0.5*(-1) = 2.5; previous: 0.2 * (0.5 + 1) = 0.3; next: 0; asking -1.5, recency 0,
    # temporal 0.3, date 3.0, addressed 3.0; feedback 0.2 * 2
    expected = 2.5 + 0.3 + 0.0 - 1.5 + 0.0 + 0.3 + 3.0 + 3.0 + 0.4
    assert example_scores(ex, w)[0] == pytest.approx(expected, abs=1e-12)


def _planted(seed: int, n: int = 40, m: int = 30) -> list[Example]:
    """Gold packets have a high passage signal and nothing else tells them apart."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        base = rng.normal(size=(m, 5))
        gold = np.zeros(m, dtype=bool)
        gold[rng.integers(m)] = True
        base[gold, 1] += 3.0
        out.append(
            Example(base, np.zeros((m, 5)), np.zeros((m, 5)), np.zeros((m, len(BONUS_SIGNALS))), np.zeros(m), gold)
        )
    return out


def test_fitting_raises_the_weight_of_the_signal_that_marks_gold_and_is_deterministic():
    examples = _planted(1)
    fitted = fit_weights(examples, HAND)
    assert fitted["fusion_passage"] > HAND["fusion_passage"] + 0.5
    assert fit_weights(examples, HAND) == fitted

    def mean_gold_rank(w):
        return np.mean([(example_scores(e, w) > example_scores(e, w)[e.gold].max()).sum() for e in _planted(2)])

    assert mean_gold_rank(fitted) < mean_gold_rank(HAND)  # better on questions it was not fitted on


def test_fitting_without_a_gold_candidate_keeps_the_prior():
    none = [
        Example(np.ones((3, 5)), np.zeros((3, 5)), np.zeros((3, 5)), np.zeros((3, 5)), np.zeros(3), np.zeros(3, bool))
    ]
    assert fit_weights(none, HAND) == HAND


def test_each_folds_model_is_fitted_without_that_folds_questions(monkeypatch):
    dialogues = [f"d{i}" for i in range(7)]
    examples = {d: _planted(i, n=2) for i, d in enumerate(dialogues)}
    owner = {id(e): d for d, found in examples.items() for e in found}
    seen: list[set[str]] = []

    def spy(training, prior, l2):
        seen.append({owner[id(e)] for e in training})
        return dict(prior)

    monkeypatch.setattr(fusion_fit, "fit_weights", spy)
    folds = make_folds(dialogues, 3)
    fitted = fusion_fit.fold_weights(examples, folds, HAND)
    assert [f["fold"] for f in fitted] == [1, 2, 3]
    for held, used, f in zip(folds, seen, fitted):
        assert used == set(dialogues) - set(held)
        assert f["questions"] == 2 * len(used)


def test_a_saved_model_loads_and_its_weights_reach_the_config(tmp_path):
    weights = {**HAND, "fusion_passage": 0.4, "fusion_lexical": 0.8}
    path = save_model(tmp_path / "m" / "fusion.json", weights, {"fitted_on": {"benchmark": "x"}})
    assert load_weights(path) == pytest.approx(weights)
    cfg = with_fusion_model(MemCompileConfig(fusion_model=str(path)))
    assert cfg.fusion_passage == pytest.approx(0.4) and cfg.fusion_lexical == pytest.approx(0.8)
    assert with_fusion_model(MemCompileConfig()) == MemCompileConfig()


def _valid() -> dict:
    return {
        "format": "memcompile-fusion-model",
        "version": 1,
        "weights": dict(HAND),
        "manifest": {"features": list(FUSION_WEIGHTS)},
    }


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.update(format="other"), "not a memcompile-fusion-model file"),
        (lambda d: d.update(version=2), "version 2"),
        (lambda d: d["weights"].pop("fusion_dense"), "weights must name exactly"),
        (lambda d: d["weights"].update(fusion_extra=1.0), "weights must name exactly"),
        (lambda d: d["weights"].update(fusion_dense="high"), "not a finite number"),
        (lambda d: d["weights"].update(fusion_dense=True), "not a finite number"),
        (lambda d: d["manifest"].update(features=["fusion_dense"]), "manifest"),
        (lambda d: d.pop("manifest"), "manifest"),
    ],
)
def test_a_bad_model_file_is_one_line_naming_the_file(tmp_path, change, message):
    data = _valid()
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(FusionModelError, match=message) as err:
        load_weights(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_a_missing_or_unreadable_model_file_is_one_line(tmp_path):
    with pytest.raises(FusionModelError, match="no such file"):
        load_weights(tmp_path / "none.json")
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(FusionModelError, match="unreadable") as err:
        load_weights(tmp_path / "broken.json")
    assert "\n" not in str(err.value)
    (tmp_path / "inf.json").write_text(json.dumps(_valid()).replace('"fusion_dense": 1.0', '"fusion_dense": Infinity'))
    with pytest.raises(FusionModelError, match="finite"):
        load_weights(tmp_path / "inf.json")


@settings(max_examples=60, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=8),
        lambda kids: (
            st.lists(kids, max_size=3)
            | st.dictionaries(st.sampled_from([*FUSION_WEIGHTS, "format", "x"]), kids, max_size=4)
        ),
        max_leaves=10,
    )
)
def test_any_json_loads_as_finite_weights_or_fails_with_the_models_error(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("m") / "any.json"
    path.write_text(json.dumps(data))
    try:
        weights = load_weights(path)
    except FusionModelError as exc:
        assert "\n" not in str(exc)
    else:
        assert set(weights) == set(FUSION_WEIGHTS) and all(math.isfinite(v) for v in weights.values())


def test_a_memory_configured_with_a_bad_model_file_refuses_to_open(tmp_path):
    from memcompile_langgraph.memory import MemCompile

    with pytest.raises(FusionModelError, match="no such file"):
        MemCompile(tmp_path / "store", config=MemCompileConfig(fusion_model=str(tmp_path / "missing.json")))
