"""The eval on PostgreSQL records selects what it selects on SQLite: one LoCoMo dev conversation, every question."""

from __future__ import annotations

import uuid

import pytest
from support.paths import LOCOMO

from memcompile_langgraph.eval.locomo import load_locomo
from memcompile_langgraph.eval.runner import EvalOptions, EvalRun


@pytest.mark.slow
def test_one_conversation_selects_the_same_packets_on_postgres_as_on_sqlite(
    tmp_path, locomo_samples, embeddings, postgres_url
):
    shortest = min(locomo_samples, key=lambda s: len(str(s["conversation"])))["sample_id"]
    bench = load_locomo(LOCOMO, [shortest])
    runs = {}
    for name, url in (("sqlite", ""), ("postgres", f"{postgres_url}?schema=t_{uuid.uuid4().hex[:12]}")):
        opts = EvalOptions(out=tmp_path / name, store=tmp_path / name / "stores", records_url=url, progress=False)
        run = EvalRun(bench, opts, embeddings)
        run.run()
        runs[name] = {r["qid"]: r for r in run.records(run.main)}
    sqlite, postgres = runs["sqlite"], runs["postgres"]
    assert not list((tmp_path / "postgres").rglob("memcompile.sqlite3"))  # the records were in PostgreSQL
    assert len(sqlite) == len(bench.dialogues[0].questions) > 50 and sqlite.keys() == postgres.keys()
    differ = [q for q in sqlite if sqlite[q]["selected"] != postgres[q]["selected"]]
    assert differ == [], f"{len(differ)} of {len(sqlite)} questions select differently, e.g. {differ[:3]}"
    assert sum(bool(r["selected"]) for r in sqlite.values()) == len(sqlite)  # every question selected something
    for key in ("pool_gold", "frontier_pool_gold", "baselines", "tokens"):
        assert [r[key] for r in sqlite.values()] == [r[key] for r in postgres.values()], key
