"""`memcompile eval` end to end on small benchmark files written for the tests (tests/data): real stores, real
embeddings, report.json / report.md / PNGs, resuming, flags, bad input, and the model path over a real HTTP server."""

import json
import re
import shutil
from pathlib import Path

import pytest
from support.openai_server import Status

from memcompile_langgraph.cli import main
from memcompile_langgraph.eval.metrics import bleu1, gold_recall, token_f1

DATA = Path(__file__).parent / "data"
LOCOMO_MINI = str(DATA / "locomo_mini.json")
LME_MINI = str(DATA / "longmemeval_s_mini.json")
CATEGORIES = ["single-hop", "multi-hop", "temporal", "open-domain"]
OVERALL_KEYS = {
    "gold_recall",
    "pool_recall",
    "frontier_pool_recall",
    "dbr",
    "unique_sources",
    "normalized_dbr",
    "normalized_unique_sources",
    "full_coverage",
    "full_coverage_count",
    "questions",
    "questions_with_gold",
    "mean_packets",
    "mean_pool_packets",
    "mean_frontier_pool_packets",
    "mean_context_tokens",
    "context_tokens_by_view",
    "query_ms_p50",
    "query_ms_p95",
    "stage_ms",
    "k10",
    "gold_ids_missing_from_dialogue",
}
PNG = b"\x89PNG\r\n\x1a\n"


def run_eval(*args: str) -> int:
    return main(["eval", *args, "--quiet"])


def results_file(out: Path, variant: str = "A0") -> Path:
    (path,) = out.glob(f"results-{variant}-*.jsonl")
    return path


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def locomo_run(tmp_path_factory, embeddings):
    out = tmp_path_factory.mktemp("eval") / "out"
    assert run_eval("locomo", LOCOMO_MINI, "--out", str(out), "--ablations", "A1,A7") == 0
    return out


def test_report_has_every_key_and_agrees_with_the_results(locomo_run):
    report = json.loads((locomo_run / "report.json").read_text())
    o = report["overall"]
    assert OVERALL_KEYS <= set(o)
    # D9:9 is not in mini-1: the loader leaves it out of the gold and counts it
    assert (o["questions"], o["questions_with_gold"], o["gold_ids_missing_from_dialogue"]) == (13, 12, 0)
    assert report["skipped"] == {"adversarial": 2, "gold_id_not_in_dialogue": 1} and report["pending"] == 0
    assert list(report["by_category"]) == CATEGORIES
    assert all(
        report["by_category"][c]["questions"] > 0 and 0 <= report["by_category"][c]["gold_recall"] <= 1
        for c in CATEGORIES
    )
    assert sum(report["by_category"][c]["questions"] for c in CATEGORIES) == 13
    assert set(report["baselines"]) == {"bm25_top10", "bm25_top12", "dense_top10", "dense_top12"}
    assert set(report["ablations"]) == {"A0", "A1", "A7"} and report["config"]["variant"] == "A0"
    assert report["tokenizer"] and report["config"]["tokenizer"] == report["tokenizer"]
    assert report["config"]["config"]["spread_depth"] == 0  # settled as the memory runs it: the reader loaded
    assert set(report["budget_curve"]) == {"k", "system", "bm25", "dense"}
    assert report["dialogues"]["mini-1"]["packets"] == 11 and report["dialogues"]["mini-2"]["ingest_seconds"] > 0
    # Table 3: normalization leaves no duplicate slot; the selection never exceeds K0 + K_delta distinct packets
    assert o["normalized_dbr"] == 0.0 and o["k10"]["anchors"]["dbr"] == 0.0
    assert 0 <= o["dbr"] < 1 and o["unique_sources"] <= 10
    records = lines(results_file(locomo_run))
    assert len(records) == 13 and len({r["qid"] for r in records}) == 13
    for r in records:
        assert len(r["selected"]) == len(set(r["selected"])) <= 12
        assert set(r["tokens"]) == {"bundle", "raw", "claim"}
    with_gold = [r for r in records if r["gold"]]
    assert o["gold_recall"] == pytest.approx(
        sum(gold_recall(r["gold"], r["selected"]) for r in with_gold) / 12, abs=1e-6
    )
    assert o["mean_context_tokens"] == report["overall"]["context_tokens_by_view"]["bundle"]
    # the ablation rows are runs of their own: A7 selects the dense top-10 and nothing else
    assert report["ablations"]["A7"]["mean_packets"] <= 10 and report["ablations"]["A1"]["mean_packets"] <= 10
    assert len(lines(results_file(locomo_run, "A7"))) == 13
    # the retrievers find the obvious turn: the dog's name is in D1:3 of mini-1
    dog = next(r for r in records if r["question"] == "What is the name of Tom's dog?")
    assert "D1:3" in dog["selected"] and "D1:3" in dog["baselines"]["bm25"][:3]


def test_report_md_and_plots(locomo_run):
    md = (locomo_run / "report.md").read_text()
    run, paper = md.split("## Reported by the paper, LLM stages, gpt-4o-mini")
    headings = (
        "This run",
        "Gold Recall by category",
        "Pipeline paths",
        "Controlled selection",
        "Reader views",
        "Pools and latency",
    )
    for heading in headings:
        assert f"## {heading}" in run
    assert "- measured on: `" in run and "2 dialogues (mini-1, mini-2), 13 questions" in run
    assert "- weights tuned on these questions: no:" in run  # the mini file is none of the dev split's conversations
    assert "| raw-turn bm25 top-12 |" in run and "| raw-turn dense top-10 |" in run
    assert "| A7 | Dense SourcePacket Top-10 |" in run and "| Unnormalized claim top-K | " in run
    # the paper's figures are in their own section, never in a row or column beside this run's
    for published in ("85.50", "65.69", "| 7.690 | 23.08 | 48.89 |", "(paper"):
        assert published not in run
    assert "85.50" in paper and "| A7 | Dense SourcePacket Top-10 | 48.80 | 42.23 | 65.69 | 70.91 |" in paper
    assert "| Unnormalized claim top-K | 7.690 | 23.08 | 48.89 |" in paper and "not measured here" in paper
    for name in ("recall_by_category.png", "recall_by_budget.png"):
        assert (locomo_run / name).read_bytes().startswith(PNG) and f"]({name})" in run


def test_report_says_when_the_run_is_on_the_split_the_weights_were_tuned_on(locomo_run):
    from memcompile_langgraph.eval.markdown import tuned_on

    report = json.loads((locomo_run / "report.json").read_text())
    report["config"]["dialogues"] = ["conv-26", "held-out-1"]
    assert tuned_on(report).startswith("**yes** (1 of 2 dialogues)")
    report["config"]["dialogues"] = ["conv-26"]
    assert tuned_on(report).startswith("**yes** (all dialogues)")
    report["config"]["config"]["fusion"] = False
    assert tuned_on(report).startswith("no: fusion off")


def test_interrupted_run_resumes_without_redoing_finished_questions(locomo_run, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(locomo_run, out)
    path = results_file(out)
    kept = path.read_text().splitlines()[:5]
    path.write_text("\n".join(kept) + '\n{"qid": "mini-2#0", "dial')  # killed in the middle of a line

    def builds():
        return {
            u: (d["ingest_seconds"], d["ingest_counts"])
            for u, d in json.loads((out / "dialogues.json").read_text()).items()
        }

    before = builds()
    assert run_eval("locomo", LOCOMO_MINI, "--out", str(out), "--ablations", "A1,A7") == 0
    text = path.read_text().splitlines()
    assert text[:5] == kept  # finished records untouched
    records = [json.loads(x) for x in text if x.startswith("{") and x.endswith("}")]
    assert len(records) == 13 and {r["qid"] for r in records} == {r["qid"] for r in lines(results_file(locomo_run))}
    assert builds() == before  # the stores were reused, not rebuilt
    report = json.loads((out / "report.json").read_text())
    assert report["overall"]["questions"] == 13 and report["pending"] == 0
    original = json.loads((locomo_run / "report.json").read_text())
    assert report["overall"]["gold_recall"] == original["overall"]["gold_recall"]
    # nothing left to do: nothing is appended
    size = path.stat().st_size
    assert run_eval("locomo", LOCOMO_MINI, "--out", str(out)) == 0
    assert path.stat().st_size == size


def test_flags_select_settings_and_reuse_stores(locomo_run, tmp_path):
    out = tmp_path / "raw"
    args = ["locomo", LOCOMO_MINI, "--out", str(out), "--store", str(locomo_run / "stores"), "--samples", "mini-1"]
    assert run_eval(*args, "--view", "raw", "--no-frontier") == 0
    report = json.loads((out / "report.json").read_text())
    o = report["overall"]
    assert report["config"]["variant"] == "A1" and report["config"]["view"] == "raw"
    assert report["config"]["config"]["use_frontier"] is False and o["questions"] == 8
    assert o["mean_context_tokens"] == o["context_tokens_by_view"]["raw"] and o["mean_packets"] <= 10
    assert "ingest_seconds" not in report["dialogues"]["mini-1"]  # the store was already there
    assert run_eval(*args, "--no-frontier", "--no-scheduler") == 0
    assert json.loads((out / "report.json").read_text())["config"]["variant"] == "A2"


@pytest.mark.parametrize(
    "args, message",
    [
        (["locomo", "missing.json"], "cannot read"),
        (["locomo", LOCOMO_MINI, "--samples", "conv-99"], "no sample named conv-99"),
        (["locomo", LOCOMO_MINI, "--cells-only", "--bm25-only"], "exclude each other"),
        (["locomo", LOCOMO_MINI, "--ablations", "A9"], "unknown --ablations A9"),
        (["locomo", LOCOMO_MINI, "--judge-model", "gpt-x"], "needs an answer model"),
        (["longmemeval", LOCOMO_MINI], "LongMemEval"),
        (["locomo", LOCOMO_MINI, "--records-url", "mysql://h/db"], "postgresql://"),
        (["locomo", LOCOMO_MINI, "--records-url", "postgresql://memcompile@127.0.0.1:1/postgres"], "127.0.0.1:1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path, capsys):
    assert run_eval(*args, "--out", str(tmp_path / "o")) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "o" / "report.json").exists()


def test_longmemeval_file_runs_end_to_end(tmp_path, embeddings):
    out = tmp_path / "lme"
    assert run_eval("longmemeval", LME_MINI, "--out", str(out)) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["benchmark"] == "longmemeval" and report["overall"]["questions"] == 3
    assert report["overall"]["questions_with_gold"] == 2
    assert report["skipped"] == {"bad_haystack": 1, "duplicate_question_id": 1, "not_an_object": 1}
    assert report["by_category"]["single-session-user"]["questions"] == 2
    assert report["by_category"]["temporal-reasoning"]["questions"] == 1
    assert (out / "report.md").is_file() and (out / "recall_by_budget.png").read_bytes().startswith(PNG)


GOLD = {
    "What is the name of Tom's dog?": "Biscuit",
    "Where does Priya work?": "at Northwind Labs",
    "Who did Ana travel to Lisbon with?": "Luis",
    "Is Ben a runner?": "Yes",
}


def _answer(body: dict) -> str:
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    question = re.search(r"^Question: (.*)$", user, re.M).group(1)
    return GOLD.get(question, "Unknown")


def _judge(body: dict) -> str:
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    gold = re.search(r"^Gold answer: (.*)$", user, re.M).group(1).lower()
    generated = re.search(r"^Generated answer: (.*)$", user, re.M).group(1).lower()
    return json.dumps(
        {"label": "CORRECT" if generated != "unknown" and generated.removeprefix("at ") in gold else "WRONG"}
    )


def test_model_path_answers_judges_scores_and_accounts(locomo_run, tmp_path, openai_server):
    out = tmp_path / "answers"
    openai_server.script("answer", *[_answer] * 13)
    openai_server.script("judge", *[_judge] * 13)
    args = [
        "locomo",
        LOCOMO_MINI,
        "--out",
        str(out),
        "--store",
        str(locomo_run / "stores"),
        "--answer-model",
        "fake-answer",
        "--llm-base-url",
        openai_server.base_url,
    ]
    assert run_eval(*args) == 0
    assert openai_server.count("answer") == 13 and openai_server.count("judge") == 13
    report = json.loads((out / "report.json").read_text())
    records = lines(results_file(out))
    o = report["overall"]
    assert sum(r["judge"] for r in records) == 4 and o["judge"] == pytest.approx(4 / 13, abs=1e-6)
    work = next(r for r in records if r["question"] == "Where does Priya work?")
    assert work["generated"] == "at Northwind Labs" and work["f1"] == pytest.approx(
        token_f1("at Northwind Labs", "Northwind Labs")
    )
    assert work["bleu1"] == pytest.approx(bleu1("at Northwind Labs", "Northwind Labs"))
    scored = [r for r in records if r["category"] != "open-domain"]
    assert o["f1"] == pytest.approx(sum(r["f1"] for r in scored) / len(scored), abs=1e-6)  # open-domain left out
    assert report["by_category"]["open-domain"]["judge"] == pytest.approx(
        1 / 3, abs=1e-6
    )  # only "Is Ben a runner?" right
    usage = report["usage"]
    assert usage["stages"]["answer"]["calls"] == 13 and usage["stages"]["judge"]["phase"] == "evaluation"
    assert usage["stages"]["answer"]["prompt_tokens"] > 0 and usage["total_tokens"] > 0
    md = (out / "report.md").read_text()
    assert "## Answers (%), this run" in md and "## LLM tokens per stage" in md
    assert md.index("| this run |") < md.index("## Reported by the paper") < md.index("Table 1 (answers, %)")
    # a rerun after losing the results answers from the store's cache: the model is not paid twice
    results_file(out).unlink()
    assert run_eval(*args) == 0
    assert openai_server.count("answer") == 13 and openai_server.count("judge") == 13
    assert json.loads((out / "report.json").read_text())["overall"]["judge"] == o["judge"]


def test_unreachable_model_stops_with_one_line_and_keeps_results(locomo_run, tmp_path, openai_server, capsys):
    out = tmp_path / "down"
    openai_server.script("answer", *[Status(400)] * 13)
    args = [
        "locomo",
        LOCOMO_MINI,
        "--out",
        str(out),
        "--store",
        str(locomo_run / "stores"),
        "--samples",
        "mini-2",
        "--answer-model",
        "fake-answer",
        "--llm-base-url",
        openai_server.base_url,
    ]
    assert run_eval(*args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "answer request failed" in err[0] and "rerun to resume" in err[0]
    report = json.loads((out / "report.json").read_text())
    assert report["pending"] == 5 - report["overall"]["questions"] > 0


def test_plots_have_titles_and_legends_that_cover_no_bar_or_curve(locomo_run):
    from memcompile_langgraph.eval.plots import budget_figure, category_figure

    report = json.loads((locomo_run / "report.json").read_text())
    for make in (category_figure, budget_figure):
        fig, ax = make(report)
        fig.canvas.draw()
        assert "this run" in ax.get_title()
        legend = ax.get_legend().get_window_extent()
        drawn = [p.get_window_extent() for p in ax.patches] + [line.get_window_extent() for line in ax.get_lines()]
        assert drawn and not any(legend.overlaps(box) for box in drawn), make.__name__
        assert ax.get_window_extent().y0 > legend.y1  # below the axes
        import matplotlib.pyplot as plt

        plt.close(fig)


@pytest.mark.parametrize("damaged", [b'{"mini-1": 1}', b'{"mini-1": [], "mini-2": "x"}', b"\xff\xfe{}", b"[]"])
def test_a_damaged_dialogues_file_is_made_again(locomo_run, tmp_path, damaged):
    out = tmp_path / "out"
    shutil.copytree(locomo_run, out)
    (out / "dialogues.json").write_bytes(damaged)
    assert run_eval("locomo", LOCOMO_MINI, "--out", str(out)) == 0
    report = json.loads((out / "report.json").read_text())
    original = json.loads((locomo_run / "report.json").read_text())
    assert report["overall"]["questions"] == original["overall"]["questions"]
    assert set(json.loads((out / "dialogues.json").read_text())) == set(original["dialogues"])


def _tiny_locomo(path: Path, evidence: str) -> None:
    turns = ["I adopted a beagle named Biscuit.", "Biscuit chewed my running shoes.", "I play the cello on Sundays."]
    sample = {
        "sample_id": "tiny",
        "conversation": {
            "speaker_a": "Tom",
            "speaker_b": "Ana",
            "session_1_date_time": "1:00 pm on 8 May, 2023",
            "session_1": [{"speaker": "Tom", "dia_id": f"D1:{i}", "text": t} for i, t in enumerate(turns, 1)],
        },
        "qa": [
            {"question": "What is Tom's dog called?", "answer": "Biscuit", "evidence": [evidence], "category": 4},
            {"question": "What does Tom play?", "answer": "cello", "evidence": ["D1:3"], "category": 4},
        ],
    }
    path.write_text(json.dumps([sample]))


def test_a_rerun_redoes_questions_whose_gold_changed(tmp_path, embeddings):
    data, out = tmp_path / "tiny.json", tmp_path / "out"
    _tiny_locomo(data, "D1:1")
    assert run_eval("locomo", str(data), "--out", str(out)) == 0
    _tiny_locomo(data, "D1:1; D1:2")  # the same question, its gold corrected
    assert run_eval("locomo", str(data), "--out", str(out)) == 0
    records = lines(results_file(out))
    assert len(records) == 3  # the unchanged question was not redone
    report = json.loads((out / "report.json").read_text())
    assert {r["qid"]: r["gold"] for r in records}["tiny#0"] == ["D1:1", "D1:2"]
    assert report["overall"]["questions_with_gold"] == 2 and report["pending"] == 0


def test_results_files_are_named_after_the_embedding_model_not_its_class(tmp_path):
    from langchain_core.embeddings import Embeddings

    from memcompile_langgraph.eval.dataset import Benchmark
    from memcompile_langgraph.eval.runner import EvalOptions, EvalRun

    class Model(Embeddings):
        def __init__(self, identity: str):
            self.identity = identity

        def embed_documents(self, texts):
            return [[1.0] for _ in texts]

        def embed_query(self, text):
            return [1.0]

    bench = Benchmark("locomo", (), [])
    names = {
        EvalRun(bench, EvalOptions(out=tmp_path / m, store=tmp_path / "s"), Model(m)).main.log.path.name
        for m in ("all-MiniLM-L6-v2/int8", "all-MiniLM-L6-v2/fp32")
    }
    assert len(names) == 2  # int8 records are not resumed by an fp32 run
