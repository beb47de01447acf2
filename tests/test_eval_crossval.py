"""Cross-validation over dialogues (`memcompile eval ... --folds K`): folds, selection that never reads the held
fold, the figures, and the report end to end on the small LoCoMo file."""

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memcompile_langgraph.cli import main
from memcompile_langgraph.config import MemCompileConfig
from memcompile_langgraph.eval.crossval import (
    SEARCH_SPACE,
    choices,
    cross_validate,
    joint_selection,
    make_folds,
    parse_space,
    select_choice,
)

LOCOMO_MINI = str(Path(__file__).parent / "data" / "locomo_mini.json")
DIALOGUES = [f"d{i}" for i in range(1, 8)]


def rec(dialogue: str, n: int, hit: bool, category: str = "single-hop") -> dict:
    return {
        "qid": f"{dialogue}#{n}",
        "dialogue": dialogue,
        "category": category,
        "gold": ["g"],
        "selected": ["g", "x"] if hit else ["x"],
    }


def records(hits: dict[str, int], per_dialogue: int = 4) -> list[dict]:
    """`hits[d]` of each dialogue's questions have their gold selected."""
    return [rec(d, n, n < hits.get(d, 0)) for d in DIALOGUES for n in range(per_dialogue)]


@pytest.mark.parametrize("k", [2, 3, 5, 7])
def test_folds_partition_the_dialogues_and_never_share_one(k):
    folds = make_folds(DIALOGUES, k)
    assert len(folds) == k and all(folds)
    flat = [d for f in folds for d in f]
    assert sorted(flat) == sorted(DIALOGUES) and len(flat) == len(set(flat))
    assert max(map(len, folds)) - min(map(len, folds)) <= 1
    assert make_folds(DIALOGUES, k) == folds  # deterministic


@pytest.mark.parametrize("k", [0, 1, 8])
def test_fold_count_outside_two_to_the_dialogues_is_refused(k):
    with pytest.raises(ValueError, match="folds"):
        make_folds(DIALOGUES, k)


def test_a_choice_best_on_the_dev_total_is_selected_only_where_the_training_folds_show_it():
    base = {d: 2 for d in DIALOGUES}
    by_choice = {
        "default": records(base),
        # planted: perfect on d1, one question worse everywhere else; over all dialogues it wins
        "planted": records({**{d: 1 for d in DIALOGUES}, "d1": 4}),
        "worse": records({d: 1 for d in DIALOGUES}),
    }
    assert select_choice(by_choice, set(DIALOGUES)) == "default"  # 7 x 2 = 14 hits vs 6 + 4 = 10
    by_choice["planted"] = records({**{d: 1 for d in DIALOGUES}, "d1": 4, "d2": 4, "d3": 4})
    assert select_choice(by_choice, set(DIALOGUES)) == "planted"  # 3 x 4 + 4 = 16 hits: best on the dev total
    cv = cross_validate(by_choice, DIALOGUES, 7)
    for fold in cv["per_fold"]:
        (held,) = fold["dialogues"]
        training = set(DIALOGUES) - {held}
        assert fold["selected"] == select_choice(by_choice, training)
        assert fold["selected"] != "worse"
        if held in ("d1", "d2", "d3"):  # 2 of the 3 planted dialogues left: 12 hits vs the default's 12: a tie
            assert fold["selected"] == "default"
            assert fold["gold_recall"] == pytest.approx(0.5)
        else:
            assert fold["selected"] == "planted"
            assert fold["gold_recall"] == pytest.approx(0.25)


def test_a_choice_that_only_helps_the_held_fold_is_never_selected_for_it():
    by_choice = {"default": records({d: 2 for d in DIALOGUES}), "other": records({d: 2 for d in DIALOGUES})}
    before = cross_validate(by_choice, DIALOGUES, 7)
    assert [f["selected"] for f in before["per_fold"]] == ["default"] * 7  # a tie keeps the default
    # "other" becomes perfect on d4 only: only folds that train on d4 may pick it; the fold holding d4 may not
    by_choice["other"] = [dict(r, selected=["g"]) if r["dialogue"] == "d4" else r for r in by_choice["other"]]
    after = cross_validate(by_choice, DIALOGUES, 7)
    for fold in after["per_fold"]:
        assert fold["selected"] == ("default" if fold["dialogues"] == ["d4"] else "other")


def test_figures_mean_spread_pooled_and_categories():
    hits = {"d1": 4, "d2": 0, "d3": 2, "d4": 2, "d5": 2, "d6": 2, "d7": 2}
    rs = records(hits)
    rs.append(rec("d1", 9, False, category="temporal"))
    cv = cross_validate({"default": rs, "alt": records({d: 3 for d in DIALOGUES})}, DIALOGUES, 7, ["single-hop"])
    default = cv["per_choice"]["default"]
    folds = default["fold_gold_recall"]
    assert folds[0] == pytest.approx(4 / 5) and folds[1] == pytest.approx(0.0) and folds[2] == pytest.approx(0.5)
    expected = [4 / 5, 0.0, 0.5, 0.5, 0.5, 0.5, 0.5]
    assert default["gold_recall"]["mean"] == pytest.approx(sum(expected) / 7, abs=1e-6)
    assert default["gold_recall"]["min"] == pytest.approx(0.0) and default["gold_recall"]["max"] == pytest.approx(0.8)
    assert default["gold_recall"]["pooled"] == pytest.approx(14 / 29, abs=1e-6)
    assert default["gold_recall"]["sd"] > 0.2
    # a category present in one fold only: its mean is over that fold, its sd 0
    assert default["by_category"]["temporal"]["folds"] == 1
    assert default["by_category"]["temporal"]["mean"] == pytest.approx(0.0)
    assert list(default["by_category"]) == ["single-hop", "temporal"]
    # alt beats the default on every fold but d1's: paired deltas
    alt = cv["per_choice"]["alt"]
    assert (alt["folds_better"], alt["folds_worse"]) == (6, 1)
    assert alt["delta_vs_default"]["mean"] == pytest.approx(sum(0.75 - e for e in expected) / 7, abs=1e-6)
    assert cv["all_dev"]["selected"] == "alt"


def test_search_space_choices_change_one_query_field_each():
    cfg = MemCompileConfig()
    named = choices(SEARCH_SPACE, cfg)
    assert next(iter(named)) == "default" and named["default"] == {}
    for name, overrides in list(named.items())[1:]:
        ((field, value),) = overrides.items()
        assert name == f"{field}={value}" and value != getattr(cfg, field)
    assert parse_space("fusion_feedback=0,0.5 dense_top=30", cfg) == {"fusion_feedback": (0.0, 0.5), "dense_top": (30,)}
    assert parse_space("none", cfg) == {}
    with pytest.raises(ValueError, match="nonexistent"):
        parse_space("nonexistent=1", cfg)
    # the configured value is the default choice, not a second one
    assert choices({"dense_top": (cfg.dense_top, 30)}, cfg) == {"default": {}, "dense_top=30": {"dense_top": 30}}


@pytest.fixture(scope="module")
def cv_run(tmp_path_factory, embeddings):
    out = tmp_path_factory.mktemp("cv") / "out"
    args = ["eval", "locomo", LOCOMO_MINI, "--out", str(out), "--folds", "2", "--space", "k0=4", "--quiet"]
    assert main(args) == 0
    return out


def test_report_has_the_cross_validation_section(cv_run):
    report = json.loads((cv_run / "report.json").read_text())
    cv = report["cross_validation"]
    assert cv["folds"] == 2 and cv["choices"] == ["default", "k0=4"]
    assert sorted(d for f in cv["fold_dialogues"] for d in f) == ["mini-1", "mini-2"]
    assert [f["dialogues"] for f in cv["per_fold"]] == cv["fold_dialogues"]
    assert sum(f["questions"] for f in cv["per_fold"]) == report["overall"]["questions"]
    default = cv["per_choice"]["default"]
    # the default choice is the run's own setting: its pooled figure is the report's overall one
    assert default["gold_recall"]["pooled"] == pytest.approx(report["overall"]["gold_recall"], abs=1e-6)
    # four anchors instead of ten select fewer packets: never more recall on any fold
    assert cv["per_choice"]["k0=4"]["folds_better"] == 0
    assert set(default["by_category"]) >= {"single-hop", "multi-hop", "temporal", "open-domain"}
    assert "cv-k0=4" not in report["ablations"]  # choices are not Table 2 settings
    (choice_file,) = cv_run.glob("results-cv-k0=4-*.jsonl")
    light = [json.loads(x) for x in choice_file.read_text().splitlines()]
    assert len(light) == report["overall"]["questions"]
    assert {"qid", "dialogue", "gold", "selected", "replaced"} <= set(light[0]) and "k10" not in light[0]
    md = (cv_run / "report.md").read_text()
    assert "2-fold cross-validation over dialogues" in md and "k0=4" in md


def test_folds_reuse_the_choices_records_on_a_rerun(cv_run, capsys):
    results = sorted(cv_run.glob("results-*.jsonl"))
    sizes = [p.stat().st_size for p in results]
    args = ["eval", "locomo", LOCOMO_MINI, "--out", str(cv_run), "--folds", "2", "--space", "k0=4", "--quiet"]
    assert main(args) == 0
    assert [p.stat().st_size for p in sorted(cv_run.glob("results-*.jsonl"))] == sizes  # nothing ran again
    assert re.search(r"2-fold CV Gold Recall: default \d+\.\d\d ± \d+\.\d\d", capsys.readouterr().out)


def test_fit_fusion_reports_each_folds_held_out_model_and_writes_the_whole_fit(tmp_path, embeddings):
    from memcompile_langgraph.evidence.fusion_model import load_weights

    out, model = tmp_path / "out", tmp_path / "fusion.json"
    args = ["eval", "locomo", LOCOMO_MINI, "--out", str(out), "--folds", "2", "--space", "none", "--quiet"]
    assert main([*args, "--fit-fusion", str(model)]) == 0
    report = json.loads((out / "report.json").read_text())
    cv = report["cross_validation"]
    fitted, default = cv["per_choice"]["fitted-fusion"], cv["per_choice"]["default"]
    assert len(fitted["fold_gold_recall"]) == 2 and fitted["delta_vs_default"]["folds"] == 2
    assert all(f["selected"] == "default" for f in cv["per_fold"])  # reported beside the choices, never selected
    assert [f["fold"] for f in cv["fitted_fusion"]["per_fold"]] == [1, 2]
    # with two folds each dialogue's questions train exactly the other fold's model
    assert all(f["questions"] > 0 for f in cv["fitted_fusion"]["per_fold"])
    assert (
        sum(f["questions"] for f in cv["fitted_fusion"]["per_fold"])
        == json.loads(model.read_text())["manifest"]["fitted_on"]["questions"]
    )
    manifest = json.loads(model.read_text())["manifest"]
    assert manifest["fitted_on"]["dialogues"] == ["mini-1", "mini-2"] and manifest["features"]
    assert set(load_weights(model)) == set(cv["fitted_fusion"]["weights"])
    assert default["fold_gold_recall"] != [None, None]


def test_joint_selection_needs_every_benchmarks_other_folds_and_never_reads_the_held_fold():
    base = records({d: 2 for d in DIALOGUES})
    # "tuned" is perfect on one benchmark's d4 and one question worse on the other's d4: the other folds of both
    # benchmarks decide, so it is picked wherever d4 trains (4/4 - 2/4 beats the 1/4 lost) and never for d4's fold
    first = {"default": base, "tuned": [dict(r, selected=["g"]) if r["dialogue"] == "d4" else r for r in base]}
    second = {"default": base, "tuned": records({**{d: 2 for d in DIALOGUES}, "d4": 1}), "only-here": base}
    sections = {"a": cross_validate(first, DIALOGUES, 7), "b": cross_validate(second, DIALOGUES, 7)}
    joint = joint_selection(sections)
    assert joint["choices"] == ["default", "tuned"]  # a choice one benchmark did not run cannot compete
    for fold in joint["per_fold"]:
        held = DIALOGUES[fold["fold"] - 1]
        assert fold["selected"] == ("default" if held == "d4" else "tuned")
        assert fold["a"] == pytest.approx(0.5) and fold["b"] == pytest.approx(0.5)
    assert joint["selected"]["a"]["mean"] == pytest.approx(0.5)
    assert joint["per_choice"]["tuned"]["a"]["mean"] == pytest.approx((6 * 0.5 + 1.0) / 7, abs=1e-6)
    # where the loss on the second benchmark outweighs the gain on the first, nothing is tuned anywhere
    second["tuned"] = records({**{d: 2 for d in DIALOGUES}, "d4": 0, "d5": 0})
    joint = joint_selection({"a": cross_validate(first, DIALOGUES, 7), "b": cross_validate(second, DIALOGUES, 7)})
    assert {f["selected"] for f in joint["per_fold"]} == {"default"}
    with pytest.raises(ValueError, match="different fold counts"):
        joint_selection({"a": cross_validate(first, DIALOGUES, 7), "b": cross_validate(second, DIALOGUES, 3)})


def test_eval_joint_joins_two_reports_and_refuses_bad_input_in_one_line(cv_run, tmp_path, capsys):
    other = tmp_path / "other"
    other.mkdir()
    report = json.loads((cv_run / "report.json").read_text())
    (other / "report.json").write_text(json.dumps({**report, "benchmark": "copy"}))
    assert main(["eval", "joint", str(cv_run), str(other / "report.json"), "--json", str(tmp_path / "j.json")]) == 0
    out = capsys.readouterr().out
    assert "2-fold cross-validation over locomo, copy together" in out and "| k0=4 |" in out
    joint = json.loads((tmp_path / "j.json").read_text())
    # the same figures twice: each fold picks what the report's own selection picks on its other fold
    fold_pick = [f["selected"] for f in report["cross_validation"]["per_fold"]]
    assert [f["selected"] for f in joint["per_fold"]] == fold_pick
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    no_cv = tmp_path / "no_cv.json"
    no_cv.write_text(json.dumps({"benchmark": "locomo"}))
    for args, message in (
        ([str(cv_run), str(bad)], "not a readable eval report"),
        ([str(cv_run), str(no_cv)], "no cross-validation section"),
        ([str(cv_run), str(cv_run)], "given twice"),
        ([str(cv_run), str(tmp_path / "missing")], "not a readable eval report"),
    ):
        assert main(["eval", "joint", *args]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 9) | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
KEYS = st.sampled_from(["folds", "choices", "per_choice", "default", "fold_gold_recall", "k0=4"])


def _mutated(section: dict, path: list[str], value) -> dict:
    out = json.loads(json.dumps(section))
    node = out
    for key in path[:-1]:
        if not isinstance(node, dict) or not isinstance(node.get(key), dict):
            return out
        node = node[key]
    if isinstance(node, dict):
        node[path[-1]] = value
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.lists(KEYS, min_size=1, max_size=3), value=JSON)
def test_eval_joint_of_any_malformed_section_is_one_line_or_a_table(cv_run, tmp_path, capsys, path, value):
    report = json.loads((cv_run / "report.json").read_text())
    broken = {**report, "benchmark": "other", "cross_validation": _mutated(report["cross_validation"], path, value)}
    other = tmp_path / "broken.json"
    other.write_text(json.dumps(broken))
    capsys.readouterr()
    code = main(["eval", "joint", str(cv_run), str(other)])
    captured = capsys.readouterr()
    if code == 2:
        err = captured.err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err
    else:
        assert code == 0 and "cross-validation over locomo, other together" in captured.out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--folds", "3"], "needs 2 to 2 folds"),
        (["--folds", "1"], "needs 2 to 2 folds"),
        (["--space", "k0=4"], "--space needs --folds"),
        (["--folds", "2", "--space", "k0"], "bad search axis"),
        (["--fit-fusion", "model.json"], "--fit-fusion needs --folds"),
    ],
)
def test_bad_cv_flags_are_one_line_and_exit_2(extra, message, tmp_path, capsys):
    assert main(["eval", "locomo", LOCOMO_MINI, "--out", str(tmp_path / "o"), *extra, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


class CountingEmbeddings:
    identity = "counting-model"

    def __init__(self):
        self.calls: list[str] = []

    def embed_query(self, text):
        self.calls.append(text)
        return [float(len(text)), 1.0]

    def embed_documents(self, texts):
        self.calls += texts
        return [[float(len(t)), 1.0] for t in texts]


def test_choices_share_each_querys_vectors_and_the_models_identity():
    from memcompile_langgraph.eval.runner import QueryVectors
    from memcompile_langgraph.runtime.engine import embedding_identity

    inner = CountingEmbeddings()
    memo = QueryVectors(inner, size=2)
    assert embedding_identity(memo) == "counting-model"  # stores it built stay the model's
    assert memo.embed_documents(["what did I say?", "say"]) == [[15.0, 1.0], [3.0, 1.0]]
    assert memo.embed_query("say") == [3.0, 1.0] and inner.calls == ["what did I say?", "say"]
    assert memo.embed_documents(["a", "bb", "ccc"]) == [[1.0, 1.0], [2.0, 1.0], [3.0, 1.0]]  # a batch passes through
    memo.embed_query("new")  # over `size`, the least recently used query goes
    memo.embed_query("what did I say?")
    assert inner.calls.count("what did I say?") == 2 and inner.calls.count("say") == 1


def test_the_model_path_runs_through_the_folds(tmp_path, monkeypatch, embeddings):
    from support.openai_server import FakeOpenAI

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "llm"
    with FakeOpenAI() as server:
        args = ["eval", "locomo", LOCOMO_MINI, "--out", str(out), "--folds", "2", "--space", "k0=4", "--quiet"]
        assert main([*args, "--llm-model", "fake", "--llm-base-url", server.base_url]) == 0
        report = json.loads((out / "report.json").read_text())
        questions = report["overall"]["questions"]
        assert server.count("answer") == questions  # choices are compared on retrieval: only the main setting answers
        # both settings scheduled with the model: the choice asks for its own K0 anchors
        assert any(
            "Return exactly 4 distinct labels" in m["content"] for b in server.of("schedule") for m in b["messages"]
        )
    cv = report["cross_validation"]
    assert report["config"]["llm"] == "fake" and cv["choices"] == ["default", "k0=4"]
    assert len(cv["per_fold"]) == 2 and all(f["questions"] for f in cv["per_fold"])
    (choice_file,) = out.glob("results-cv-k0=4-*.jsonl")
    records = [json.loads(x) for x in choice_file.read_text().splitlines()]
    assert len(records) == questions and max(len(r["selected"]) for r in records) <= 4 + 2
