"""MemCompileRetriever: LangChain's standard retriever suite, plus the documents it must return."""

import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests
from pydantic import ValidationError

from memcompile_langgraph import MemCompile
from memcompile_langgraph.cli.demo_data import demo_turns
from memcompile_langgraph.evidence.render import render_block
from memcompile_langgraph.integrations.retriever import MemCompileRetriever
from memcompile_langgraph.model import SelectedPacket

QUESTION = "What kind of dog did Tom adopt and what is its name?"


class TestMemCompileRetrieverStandard(RetrieversIntegrationTests):
    @pytest.fixture(autouse=True)
    def _memory(self, make_mem):
        self.memory = make_mem("store", turns=demo_turns(), user_id="demo")

    @property
    def retriever_constructor(self) -> type[MemCompileRetriever]:
        return MemCompileRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"memory": self.memory, "user_id": "demo"}

    @property
    def retriever_query_example(self) -> str:
        return QUESTION


def test_one_document_per_packet_in_schedule_order(make_mem):
    mem = make_mem("store", turns=demo_turns(), user_id="demo")
    ctx = mem.compile(QUESTION, user_id="demo")
    docs = mem.as_retriever(user_id="demo").invoke(QUESTION)
    assert 3 <= len(docs) == len(ctx.packets) <= 12
    index = mem.index("demo")
    for rank, (doc, packet) in enumerate(zip(docs, ctx.packets), 1):
        assert isinstance(doc, Document) and doc.id == packet.packet_id
        assert doc.metadata == packet.to_dict() and doc.metadata["rank"] == packet.rank == rank
        assert SelectedPacket.from_dict(doc.metadata) == packet
        assert doc.page_content == render_block(index, packet.packet_id)
        assert doc.page_content.startswith(f"[{packet.dia_id}] {packet.speaker} | ")
    assert "\n\n".join(d.page_content for d in docs) == ctx.text
    assert "Biscuit" in docs[0].page_content


async def test_async_matches_sync_and_k_truncates(make_mem):
    mem = make_mem("store", turns=demo_turns(), user_id="demo")
    retriever = mem.as_retriever(user_id="demo", k=12)
    full = retriever.invoke(QUESTION)
    assert [d.id for d in await retriever.ainvoke(QUESTION)] == [d.id for d in full]
    assert [d.id for d in mem.as_retriever(user_id="demo", k=2).invoke(QUESTION)] == [d.id for d in full[:2]]
    assert [d.id for d in await retriever.ainvoke(QUESTION, k=1)] == [full[0].id]


def test_users_are_separate_and_blank_query_matches_nothing(make_mem):
    mem = make_mem("store", turns=demo_turns(), user_id="demo")
    assert mem.as_retriever(user_id="someone-else").invoke(QUESTION) == []
    assert mem.as_retriever(user_id="demo").invoke("   ") == []


@pytest.mark.parametrize("params", [{"k": 0}, {"k": -3}, {"user_id": ""}, {"user_id": "bad\x00id"}])
def test_bad_parameters_are_rejected(make_mem, params):
    mem = make_mem("store", turns=demo_turns(), user_id="demo")
    with pytest.raises(ValidationError):
        MemCompileRetriever(memory=mem, **params)


def test_bad_k_at_invoke_and_wrong_memory_type(make_mem):
    mem = make_mem("store", turns=demo_turns(), user_id="demo")
    with pytest.raises(ValueError, match="k must be a positive integer"):
        mem.as_retriever(user_id="demo").invoke(QUESTION, k=0)
    with pytest.raises(ValidationError):
        MemCompileRetriever(memory="not a MemCompile")


def test_a_superseded_statement_says_which_turn_replaced_it(tmp_path):
    mem = MemCompile(tmp_path / "m", dense=False)
    turns = [{"speaker": "User", "text": f"Let me tell you about my {x}.", "session": 1} for x in ("lake", "garden")]
    turns += [
        {"speaker": "User", "text": "My weekly writing target is 1,200 words for the novel draft.", "session": 1},
        {"speaker": "User", "text": "My weekly writing target for the novel draft is now 1,500 words.", "session": 2},
    ]
    mem.add_turns(turns, user_id="u")
    docs = mem.as_retriever(user_id="u").invoke("How many words is my weekly writing target for the novel draft?")
    marks = {d.metadata["dia_id"]: d.metadata.get("superseded_by") for d in docs}
    assert marks["D1:3"] == "D2:1" and marks["D2:1"] is None
    assert all(SelectedPacket.from_dict(d.metadata).to_dict() == d.metadata for d in docs)
    mem.close()
