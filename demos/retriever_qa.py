"""MemCompileRetriever inside a plain LangChain chain: retrieve -> prompt -> chat model -> answer with sources.

Offline by default (a scripted reader quotes the best-matching retrieved claim); ChatOpenAI when OPENAI_API_KEY
is set.

    python demos/retriever_qa.py [--k 6]
"""

from __future__ import annotations

import argparse

from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableParallel, RunnablePassthrough

from memcompile_langgraph import MemCompile
from memcompile_langgraph.cli.demo_data import QUESTIONS, demo_turns
from memcompile_langgraph.integrations.offline_model import default_chat_model

PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "Answer the question from these remembered conversation turns, citing dia_ids.\n\n{context}"),
        ("human", "{question}"),
    ]
)


def joined(docs: list[Document]) -> str:
    return "\n\n".join(d.page_content for d in docs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=6, help="documents per question")
    args = parser.parse_args(argv)
    mem = MemCompile(None)  # in memory: the demo conversation between Tom and Priya
    mem.add_turns(demo_turns(), user_id="demo")
    retriever = mem.as_retriever(user_id="demo", k=args.k)
    answer = (
        {"context": lambda x: joined(x["docs"]), "question": lambda x: x["question"]}
        | PROMPT
        | default_chat_model(mem.embeddings)
        | StrOutputParser()
    )
    chain = RunnableParallel(docs=retriever, question=RunnablePassthrough()).assign(answer=answer)
    for question in QUESTIONS:
        out = chain.invoke(question)
        print(f"Q: {question}\nA: {out['answer']}")
        print(
            "   sources: " + ", ".join(f"{d.metadata['dia_id']} ({d.metadata['source']})" for d in out["docs"]) + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
