"""The pool reader (evidence/reader.py, eval/fusion_fit.py's --fit-reader): zero weights are today's ranking, the fit
learns what marks gold and is deterministic, a fold's reader never reads that fold's questions (of any benchmark),
its file is checked on load, and a memory without a usable file keeps the fused order."""

import json
import logging
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memcompile_langgraph.cli import main
from memcompile_langgraph.config import SPREAD_DEPTH_FUSED, MemCompileConfig
from memcompile_langgraph.eval import fusion_fit
from memcompile_langgraph.eval.crossval import make_folds
from memcompile_langgraph.eval.fusion_fit import ReaderExamples
from memcompile_langgraph.evidence.fusion import fused_scores
from memcompile_langgraph.evidence.fusion_model import FusionModelError
from memcompile_langgraph.evidence.pool import closed_pool
from memcompile_langgraph.evidence.reader import (
    FEATURES,
    OWN_FEATURES,
    PoolReader,
    features,
    fit_reader,
    load_reader,
    open_reader,
    save_reader,
)
from memcompile_langgraph.model import DenseHit, Intent, PacketScore
from memcompile_langgraph.text.terms import terms
from tests.test_fusion_model import TURNS, _index

LOCOMO_MINI = str(Path(__file__).parent / "data" / "locomo_mini.json")
K = len(FEATURES)
MARK = FEATURES.index("claim_cover")


def _intent(query: str, people=()) -> Intent:
    return Intent(query=query, terms=tuple(terms(query)), people=tuple(people))


def _planted(seed: int, n: int = 40, m: int = 30):
    """Per question: fused scores that do not tell gold apart and one feature that does."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        x = rng.normal(size=(m, K))
        gold = np.zeros(m, dtype=bool)
        gold[rng.integers(m)] = True
        x[gold, MARK] += 3.0
        out.append((rng.normal(size=m), x, gold))
    return out


def _mean_gold_rank(reader: PoolReader | None, examples) -> float:
    ranks = []
    for f, x, g in examples:
        s = f if reader is None else reader.scores(f, x)
        ranks.append((s > s[g].max()).sum())
    return float(np.mean(ranks))


def test_fitting_learns_the_feature_that_marks_gold_and_is_deterministic():
    examples = _planted(1)
    reader = fit_reader(examples, 0.01)
    assert reader.weights[MARK] > 0.5 and reader.weights[MARK] == reader.weights.max()
    again = fit_reader(examples, 0.01)
    assert np.array_equal(again.weights, reader.weights) and np.array_equal(again.mean, reader.mean)
    assert _mean_gold_rank(reader, _planted(2)) < _mean_gold_rank(None, _planted(2)) - 5  # on other questions too


def test_without_a_gold_candidate_the_reader_is_todays_ranking():
    none = [(np.arange(3.0), np.ones((3, K)), np.zeros(3, bool)), (np.zeros(1), np.ones((1, K)), np.ones(1, bool))]
    reader = fit_reader(none, 0.01)
    assert not reader.weights.any()
    f = np.array([0.3, 2.0, -1.0])
    assert np.array_equal(reader.scores(f, np.random.default_rng(0).normal(size=(3, K))), f)


def test_a_stronger_pull_keeps_the_weights_nearer_today():
    examples = _planted(3)
    assert np.abs(fit_reader(examples, 1.0).weights).sum() < np.abs(fit_reader(examples, 0.001).weights).sum()


def test_each_folds_reader_reads_no_question_of_that_fold_of_any_benchmark(monkeypatch):
    mine = ReaderExamples(
        "a", {f"a{i}": _planted(i, n=2) for i in range(6)}, make_folds([f"a{i}" for i in range(6)], 3)
    )
    other = ReaderExamples("b", {f"b{i}": _planted(10 + i, n=3) for i in range(3)}, [["b0"], ["b1"], ["b2"]])
    owner = {id(e): d for s in (mine, other) for d, found in s.examples.items() for e in found}
    seen: list[set[str]] = []

    def spy(training, l2):
        seen.append({owner[id(e)] for e in training})
        return fit_reader([], l2)

    monkeypatch.setattr(fusion_fit, "fit_reader", spy)
    for i, held in enumerate(mine.folds):
        _, count = fusion_fit._joint_fit([(mine, held), (other, other.folds[i])])
        assert seen[-1] == (set(mine.examples) - set(held)) | (set(other.examples) - {f"b{i}"})
        assert count == 2 * (6 - len(held)) + 3 * 2
    fusion_fit._joint_fit([(mine, None), (other, None)])
    assert seen[-1] == set(mine.examples) | set(other.examples)


def test_a_planted_fold_only_signal_does_not_reach_that_folds_reader():
    """The held dialogue's questions mark gold by a feature no other dialogue's do: its fold's reader learns nothing
    of it, the reader fitted with it does."""
    plain = {f"d{i}": _planted(i, n=30) for i in range(3)}
    rng = np.random.default_rng(9)
    leaky = []
    for f, x, g in _planted(20, n=30):
        x = x.copy()
        x[:, MARK] = rng.normal(size=len(g))  # the shared mark is gone here
        x[g, 0] += 4.0  # and the held dialogue's own one is feature 0
        leaky.append((f, x, g))
    found = ReaderExamples("a", {**plain, "held": leaky}, [["d0"], ["d1"], ["d2", "held"]])
    without, _ = fusion_fit._joint_fit([(found, ["d2", "held"])])
    with_it, _ = fusion_fit._joint_fit([(found, None)])
    # against the largest weight a pure noise feature got: within it without the dialogue, far above it with it
    noise = lambda r: np.delete(np.abs(r.weights), [0, MARK]).max()  # noqa: E731
    assert abs(without.weights[0]) < noise(without)
    assert with_it.weights[0] > 3 * noise(with_it)


def test_examples_survive_their_file_and_a_bad_file_is_one_line(tmp_path):
    found = ReaderExamples("a", {"d0": _planted(0, n=2), "d1": _planted(1, n=1)}, [["d0"], ["d1"]])
    back = ReaderExamples.load(found.save(tmp_path / "ex.npz"))
    assert back.benchmark == "a" and back.folds == [["d0"], ["d1"]]
    for name, mine in found.examples.items():
        for (f, x, g), (f2, x2, g2) in zip(mine, back.examples[name], strict=True):
            assert np.array_equal(f, f2) and np.array_equal(x, x2) and np.array_equal(g, g2)
    (tmp_path / "bad.npz").write_text("not numpy")
    with pytest.raises(ValueError, match="unreadable") as err:
        ReaderExamples.load(tmp_path / "bad.npz")
    assert "\n" not in str(err.value)


def test_the_features_read_the_pool_and_zero_weights_keep_the_fused_pool():
    index = _index()
    cfg = MemCompileConfig(feedback_min_packets=1)
    intent = _intent("Where did B go hiking?", ["B"])
    signals: dict = {}
    fused = fused_scores(index, intent, [], [], cfg, keep=signals)
    assert np.allclose(fused, fused_scores(index, intent, [], [], cfg))  # every signal kept, the same score
    window = list(index.packet_order)
    x = features(index, intent, window, fused, [], [], signals, cfg)
    assert x.shape == (len(window), K) and np.isfinite(x).all()
    cover = x[:, FEATURES.index("query_cover")]
    assert cover[window.index("p1")] > cover[window.index("p3")]  # "hiking" in p1, not in the bakery turn
    assert x[:, FEATURES.index("fusion_speaker")][window.index("p1")] == 1.0
    assert x[:, FEATURES.index("fused_rank")].max() == 1.0  # the best fused packet, rank 0
    # A is not the person asked about; sessions are 3, 2 and 2 turns long; nothing was found by any channel here
    assert list(x[:, FEATURES.index("other_named")]) == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    assert list(x[:, FEATURES.index("session_position")]) == pytest.approx([0.0, 0.5, 1.0, 0.0, 1.0, 0.0, 1.0])
    assert not x[:, FEATURES.index("channels")].any()
    own, again = x[:, : len(OWN_FEATURES)], x[:, len(OWN_FEATURES) :]
    assert own.any() and not again.any()  # not a question about the whole history: its own weights read nothing
    history = _intent("In what order did B bring up hiking across our conversations?", ["B"])
    over = features(index, history, window, fused, [], [], signals, cfg)
    assert np.array_equal(over[:, len(OWN_FEATURES) :], over[:, : len(OWN_FEATURES)])
    assert FEATURES[len(OWN_FEATURES) :] == tuple(f"history_{f}" for f in OWN_FEATURES)
    hit = PacketScore("p5", 1.0, index.by_packet["p5"][0].descriptor_id, 0, 1.0, ("c1",))
    found = features(index, intent, window, fused, [hit], [DenseHit("p5", 0.9)], signals, cfg)
    assert found[window.index("p5"), FEATURES.index("channels")] == 3.0  # address, a Cell and D_q
    assert not _intent("What did they cook?").people  # no person asked about: nobody is another one
    unnamed = features(index, _intent("What did they cook?"), window, fused, [], [], signals, cfg)
    assert not unnamed[:, FEATURES.index("other_named")].any()
    zero = PoolReader(np.zeros(K), np.ones(K), np.zeros(K))
    today = closed_pool(index, intent, [], [], [], cfg)
    read = closed_pool(index, intent, [], [], [], cfg, reader=zero)
    assert [p.packet_id for p in read[0]] == [p.packet_id for p in today[0]]
    assert read[1] == pytest.approx(today[1])


def test_novelty_is_the_share_of_a_packets_terms_no_earlier_claim_held():
    """The first turn brings up all it says, a turn repeating an earlier one nothing, others a share in between."""
    index = _index([*TURNS, (3, "B", "My new job at the bakery starts on Monday.")])
    cfg = MemCompileConfig(feedback_min_packets=1)
    intent = _intent("When did B start at the bakery?", ["B"])
    signals: dict = {}
    fused = fused_scores(index, intent, [], [], cfg, keep=signals)
    window = list(index.packet_order)
    novelty = features(index, intent, window, fused, [], [], signals, cfg)[:, FEATURES.index("novelty")]
    assert novelty[window.index("p0")] == pytest.approx(1.0)
    assert novelty[window.index("p7")] == 0.0  # p3 said it first
    assert novelty[window.index("p3")] == pytest.approx(1.0)  # job, bakery, monday: new at p3
    assert 0.0 < novelty[window.index("p4")] < 1.0  # "bakery" and "job" were p3's, "congratulations" is new
    assert ((novelty >= 0.0) & (novelty <= 1.0)).all()


def test_a_reader_that_favours_a_feature_reorders_the_pool():
    index = _index()
    cfg = MemCompileConfig(feedback_min_packets=1)
    intent = _intent("Where did B go hiking?", ["B"])
    weights = np.zeros(K)
    weights[FEATURES.index("fusion_asking")] = 100.0  # the asking turn (p0) first, whatever the fused score says
    pool, scores, _ = closed_pool(index, intent, [], [], [], cfg, reader=PoolReader(np.zeros(K), np.ones(K), weights))
    assert [p.packet_id for p in pool] == sorted(scores, key=lambda p: -scores[p])[: len(pool)]
    assert pool[-1].packet_id == "p0"  # asking is a penalty signal: favouring it with +100 puts the asker last


def test_a_saved_reader_loads_and_a_bad_one_is_one_line(tmp_path):
    reader = fit_reader(_planted(4), 0.01)
    path = save_reader(tmp_path / "r" / "reader.json", reader, {"fitted_on": {"benchmarks": ["x"]}})
    back = load_reader(path)
    assert np.allclose(back.weights, reader.weights, atol=1e-6) and np.allclose(back.scale, reader.scale, atol=1e-6)
    data = json.loads(path.read_text())
    for change, message in [
        (lambda d: d.update(format="other"), "not a memcompile-pool-reader file"),
        (lambda d: d["weights"].pop("fused"), "weights must name exactly"),
        (lambda d: d["scale"].update(fused=0.0), "scale is not positive"),
        (lambda d: d["mean"].update(fused="x"), "not a finite number"),
        (lambda d: d["mean"].update(fused=10**400), "not a finite number"),
        (lambda d: d["manifest"].update(features=["fused"]), "manifest"),
    ]:
        bad = json.loads(json.dumps(data))
        change(bad)
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        with pytest.raises(FusionModelError, match=message) as err:
            load_reader(tmp_path / "bad.json")
        assert str(tmp_path / "bad.json") in str(err.value) and "\n" not in str(err.value)


JSON = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=5),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.sampled_from(FEATURES), kids, max_size=3),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["format", "version", "mean", "scale", "weights", "manifest"]),
    st.sampled_from([None, *FEATURES]),
    JSON,
)
def test_a_reader_file_with_any_one_value_changed_loads_finite_or_fails_in_one_line(tmp_path_factory, key, name, value):
    """A valid file with one field, or one feature's entry of it, replaced by any JSON value."""
    folder = tmp_path_factory.mktemp("r")
    data = json.loads(save_reader(folder / "ok.json", fit_reader(_planted(5, n=4), 0.01), {}).read_text())
    if name is not None and isinstance(data[key], dict):
        data[key][name] = value
    else:
        data[key] = value
    path = folder / "any.json"
    path.write_text(json.dumps(data))
    try:
        reader = load_reader(path)
    except FusionModelError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
    else:
        assert all(math.isfinite(v) for v in (*reader.weights, *reader.mean, *reader.scale))
        assert (reader.scale > 0).all()


def test_memories_without_their_reader_file_warn_once_and_keep_the_fused_order(tmp_path, caplog):
    from memcompile_langgraph.memory import MemCompile

    assert open_reader(None) is None
    config = MemCompileConfig(pool_reader=str(tmp_path / "missing.json"))
    with caplog.at_level(logging.WARNING):
        # a second memory of the same process (an eval opens one per dialogue) does not repeat the warning
        MemCompile(tmp_path / "other", config=config).close()
        mem = MemCompile(tmp_path / "store", config=config)
    try:
        assert mem.engine.reader is None
        assert mem.config.spread_depth == SPREAD_DEPTH_FUSED  # the fused order stands, with its session spread
        assert [r.message for r in caplog.records if "pool reader" in r.message] == [
            f"pool reader {tmp_path / 'missing.json'}: no such file: the fused order stands"
        ]
    finally:
        mem.close()


def test_fit_reader_cli_reports_each_folds_held_out_reader_and_joins_another_benchmark(tmp_path, embeddings):
    out, model = tmp_path / "out", tmp_path / "reader.json"
    args = ["eval", "locomo", LOCOMO_MINI, "--out", str(out), "--folds", "2", "--space", "none", "--quiet"]
    assert main([*args, "--fit-reader", str(model)]) == 0
    first = json.loads((out / "report.json").read_text())
    assert first["config"]["config"]["pool_reader"] is None  # fitted and compared against the fused order
    cv = first["cross_validation"]
    fitted = cv["per_choice"]["fitted-reader"]
    assert len(fitted["fold_gold_recall"]) == 2 and all(f["selected"] == "default" for f in cv["per_fold"])
    assert [f["fold"] for f in cv["fitted_reader"]["per_fold"]] == [1, 2]
    for f in cv["fitted_reader"]["per_fold"]:
        assert load_reader(f["file"]) is not None and f["questions"] > 0
    manifest = json.loads(model.read_text())["manifest"]
    assert manifest["fitted_on"]["sets"] == [{"benchmark": "locomo", "dialogues": ["mini-1", "mini-2"]}]
    examples = tmp_path / "reader-examples.npz"
    assert examples.exists()
    # the same examples as another benchmark's: every fold's reader trains on twice its own questions
    assert (
        main(
            [
                *args,
                "--out",
                str(tmp_path / "out2"),
                "--fit-reader",
                str(tmp_path / "r2.json"),
                "--reader-with",
                str(examples),
            ]
        )
        == 0
    )
    joint = json.loads((tmp_path / "out2" / "report.json").read_text())["cross_validation"]["fitted_reader"]
    assert [f["questions"] for f in joint["per_fold"]] == [2 * f["questions"] for f in cv["fitted_reader"]["per_fold"]]
    # each set lists the dialogues it gave: fold 1's reader held fold 1 of both
    held = json.loads(Path(joint["per_fold"][0]["file"]).read_text())["manifest"]["fitted_on"]["sets"]
    assert len(held) == 2 and held[0] == held[1] and len(held[0]["dialogues"]) == 1
    # an eval under the fitted reader: the setting is the evaluated config's
    plain = ["eval", "locomo", LOCOMO_MINI, "--out", str(tmp_path / "out3"), "--quiet", "--pool-reader", str(model)]
    assert main(plain) == 0
    report = json.loads((tmp_path / "out3" / "report.json").read_text())
    assert report["config"]["config"]["pool_reader"] == str(model)
    for flags, setting in (([], "shipped"), (["--pool-reader", "none"], None)):
        assert main(["eval", "locomo", LOCOMO_MINI, "--out", str(tmp_path / "out4"), "--quiet", *flags]) == 0
        assert json.loads((tmp_path / "out4" / "report.json").read_text())["config"]["config"]["pool_reader"] == setting


def test_reader_with_needs_a_readable_file_and_fit_reader(tmp_path, capsys):
    args = ["eval", "locomo", LOCOMO_MINI, "--out", str(tmp_path / "o"), "--folds", "2", "--space", "none", "--quiet"]
    (tmp_path / "bad.npz").write_text("x")
    assert main([*args, "--fit-reader", str(tmp_path / "r.json"), "--reader-with", str(tmp_path / "bad.npz")]) != 0
    assert "unreadable" in capsys.readouterr().err
    three = ReaderExamples("b", {"x": _planted(0, n=1)}, [["x"], [], []]).save(tmp_path / "three.npz")
    assert main([*args, "--reader-with", str(three)]) != 0
    assert "--reader-with needs --fit-reader" in capsys.readouterr().err
    assert not (tmp_path / "o" / "report.json").exists()  # refused before any work


def test_leave_one_chat_out_reads_another_fold_count_whole(tmp_path, embeddings):
    """Folds as many as the dialogues, another benchmark cut three ways: no fold of theirs pairs with this run's,
    so every fold's reader reads all of theirs and none of the held dialogue."""
    others = {f"x{i}": _planted(i, n=2) for i in range(3)}
    three = ReaderExamples("b", others, [["x0"], ["x1"], ["x2"]]).save(tmp_path / "three.npz")
    out, model = tmp_path / "o", tmp_path / "r.json"
    args = ["eval", "locomo", LOCOMO_MINI, "--out", str(out), "--folds", "2", "--space", "none", "--quiet"]
    assert main([*args, "--fit-reader", str(model), "--reader-with", str(three)]) == 0
    per_fold = json.loads((out / "report.json").read_text())["cross_validation"]["fitted_reader"]["per_fold"]
    assert len(per_fold) == 2
    fitted_on = []
    for fold in per_fold:
        mine, theirs = json.loads(Path(fold["file"]).read_text())["manifest"]["fitted_on"]["sets"]
        assert theirs == {"benchmark": "b", "dialogues": ["x0", "x1", "x2"]}
        assert len(mine["dialogues"]) == 1  # the held dialogue is the other one
        fitted_on += mine["dialogues"]
    assert sorted(fitted_on) == ["mini-1", "mini-2"]


def test_the_shipped_reader_is_the_default_reads_this_codes_features_and_ships_in_the_wheel(embeddings):
    import tomllib

    from memcompile_langgraph import MemCompile
    from memcompile_langgraph.evidence.reader import SHIPPED, SHIPPED_FILE

    shipped = load_reader(SHIPPED_FILE)  # a feature added or renamed without a new fit fails here
    assert np.isfinite(shipped.weights).all() and shipped.weights.any()
    package_data = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "evidence/pool_reader.json" in package_data["package-data"]["memcompile_langgraph"]
    assert MemCompileConfig().pool_reader == SHIPPED and MemCompileConfig.paper().pool_reader is None
    mem = MemCompile(embeddings=embeddings)
    again = MemCompile(embeddings=embeddings)
    off = MemCompile(embeddings=embeddings, config=MemCompileConfig(pool_reader=None))
    chosen = MemCompile(embeddings=embeddings, config=MemCompileConfig(spread_depth=7))
    paper = MemCompile(embeddings=embeddings, config=MemCompileConfig.paper())
    try:
        assert mem.engine.reader is not None and np.allclose(mem.engine.reader.weights, shipped.weights)
        assert again.engine.reader is mem.engine.reader  # the package's file is read once per process
        assert off.engine.reader is None
        # the session spread is left to the reader when it loads and taken by the fused order; a set depth stays
        assert MemCompileConfig().spread_depth is None
        assert (mem.config.spread_depth, off.config.spread_depth, chosen.config.spread_depth) == (0, 60, 7)
        assert paper.engine.reader is None and paper.config.spread_depth == 0  # no fusion: the paper has no spread
        assert mem.engine.config is mem.config and SPREAD_DEPTH_FUSED == 60
    finally:
        mem.close()
        again.close()
        off.close()
        chosen.close()
        paper.close()


def test_an_unset_spread_keeps_the_snapshot_files_of_the_depth_it_settles_on(tmp_path, embeddings):
    from memcompile_langgraph import MemCompile

    # the files are named after the config a memory runs with, so a store written before the depth was left unset
    # (when the default was 0 under the reader) is read again rather than rebuilt
    paths = []
    for cfg in (MemCompileConfig(), MemCompileConfig(spread_depth=0), MemCompileConfig(spread_depth=60)):
        mem = MemCompile(tmp_path / "store", embeddings=embeddings, config=cfg)
        try:
            assert mem.host.cache.files is not None
            paths.append(mem.host.cache.files.path("u"))
        finally:
            mem.close()
    assert paths[0] == paths[1] != paths[2]


def test_a_deleted_turn_no_longer_counts_as_where_something_was_first_said(tmp_path):
    """Novelty is read from the memory as it stands: once the turn that first said a thing is deleted (a file store,
    opened again), the later turn saying it scores as in a memory that was never told the deleted one."""
    from memcompile_langgraph import MemCompile

    said = [
        (1, "I adopted a beagle named Biscuit."),
        (1, "The weather was grey all week."),
        (1, "My sister painted the kitchen yellow."),
        (2, "We booked a cabin near the lake."),
        (2, "Our choir sang at the town hall."),
        (2, "Biscuit the beagle chewed my slippers."),
    ]
    intent = _intent("What did Biscuit chew?")
    cfg = MemCompileConfig()

    def novelty(path, turns, delete=()):
        mem = MemCompile(path, dense=False)
        try:
            if turns:
                mem.add_turns([{"speaker": "Ana", "text": t, "session": s} for s, t in turns], user_id="u")
            if delete:
                assert mem.delete_turns("u", list(delete)) == len(delete)
            index = mem.index("u")
            window = list(index.packet_order)
            x = features(index, intent, window, np.zeros(len(window)), [], [], {}, cfg)
            return float(x[window.index(index.by_dia["D2:3"]), FEATURES.index("novelty")])
        finally:
            mem.close()

    told = novelty(tmp_path / "m", said)
    novelty(tmp_path / "m", [], delete=["D1:1"])
    after = novelty(tmp_path / "m", [])
    never = novelty(tmp_path / "other", said[1:])
    assert after == pytest.approx(never)
    assert after > told + 0.2  # "biscuit" and "beagle" are said first here now


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=8), st.text(min_size=1, max_size=30))
def test_novelty_of_any_memory_is_a_share(texts, query):
    """Whatever was said (repeats, symbols, one word, nothing a term), every novelty is a finite share in [0, 1]."""
    from memcompile_langgraph import MemCompile

    mem = MemCompile(None, dense=False)
    try:
        mem.add_turns([{"speaker": "Ana", "text": t} for t in texts], user_id="u")
        index = mem.index("u")
        window = list(index.packet_order)
        x = features(index, _intent(query), window, np.zeros(len(window)), [], [], {}, MemCompileConfig())
        novelty = x[:, FEATURES.index("novelty")]
        assert np.isfinite(x).all() and ((novelty >= 0.0) & (novelty <= 1.0)).all()
    finally:
        mem.close()
