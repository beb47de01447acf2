"""Incremental BM25 with rank-bm25's BM25Okapi scores (App. B.3: k1=1.5, b=0.75).

rank-bm25 rebuilds from the whole corpus and scores every document per query term in Python; this
index appends documents in O(|doc|) and scores a query through its posting lists only. The scores are
the same numbers BM25Okapi computes (tests keep rank-bm25 as the reference).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from ..config import MemCompileConfig
from ..index.growarray import GrowArray
from ..index.payload import FormatError, Reader, Writer
from ..index.persistent import Forkable


class BM25Index(Forkable):
    """The newest document stays open: its term counts are kept beside the posting arrays, so replace_last (a
    packet's document gains the next turn of its session) changes no row a published snapshot reads. The next
    add_many closes it by appending its postings (its id is the highest, so postings stay sorted).

    A fork shares the vocabulary, the document frequencies and the posting lists with its snapshot (persistent after
    the first fork, see index/persistent.py) and makes a term's posting arrays its own the first time it appends to them."""

    SHARED = ("_term_ids", "_df", "_post_docs", "_post_tfs")
    CHILDREN = ("_doc_len",)
    OWN = {"_post_docs": GrowArray.fork, "_post_tfs": GrowArray.fork}

    def __init__(self, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25):
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self._term_ids: dict[str, int] = {}
        self._df: list[int] = []  # the open document's terms included
        # ascending document ids per term (closed documents) and the term's count in each: int32 halves the
        # postings, the largest part of an index, and the scores are the same (counts widen to float64 exactly)
        self._post_docs: list[GrowArray] = []
        self._post_tfs: list[GrowArray] = []
        self._doc_len = GrowArray(np.float64, 1024)  # closed documents
        self._open: dict[str, int] | None = None  # term counts of the newest document
        self._open_len = 0
        self._total_len = 0
        self._avg_idf = 0.0  # BM25Okapi's mean idf, made by each write (a query only reads)

    def __len__(self) -> int:
        return len(self._doc_len) + (self._open is not None)

    def _tid(self, term: str) -> int:
        tid = self._term_ids.get(term)
        if tid is None:
            tid = len(self._df)
            self._put("_term_ids", term, tid)
            self._push("_df", 0)
            self._push("_post_docs", GrowArray(np.int32))
            self._push("_post_tfs", GrowArray(np.int32))
            self._adopt("_post_docs", tid)
            self._adopt("_post_tfs", tid)
        return tid

    def add(self, tokens: list[str]) -> int:
        doc = len(self)
        self.add_many([tokens])
        return doc

    def add_many(self, documents: list[list[str]]) -> None:
        """Appends documents in order; each posting array grows once per call, as a cold load adds every document."""
        if not documents:
            return
        closed = [] if self._open is None else [self._open]
        closed += [self._count(tokens) for tokens in documents[:-1]]
        start = len(self._doc_len)
        self._doc_len.extend([sum(c.values()) for c in closed])
        grouped: dict[int, tuple[list[int], list[int]]] = {}
        for doc, counts in enumerate(closed, start):
            for term, tf in counts.items():
                tid = self._term_ids[term]
                entry = grouped.get(tid)
                if entry is None:
                    entry = grouped[tid] = ([], [])
                entry[0].append(doc)
                entry[1].append(tf)
        self._own_many("_post_docs", grouped)
        self._own_many("_post_tfs", grouped)
        for tid, (docs, tfs) in grouped.items():
            self._post_docs[tid].extend(docs)
            self._post_tfs[tid].extend(tfs)
        self._open, self._open_len = self._count(documents[-1]), len(documents[-1])
        self._avg_idf = self._average_idf()

    def _count(self, tokens: list[str]) -> dict[str, int]:
        """Term counts of a new document, added to the totals and document frequencies."""
        counts = Counter(tokens)
        tids = [self._tid(term) for term in counts]
        df = self._df
        self._put_many("_df", {tid: df[tid] + 1 for tid in tids})
        self._total_len += len(tokens)
        return counts

    def replace_last(self, tokens: list[str]) -> None:
        """Give the newest document new tokens; scores equal a rebuild."""
        if self._open is None:
            raise IndexError("replace_last on an empty index")
        df = self._df
        self._put_many("_df", {tid: df[tid] - 1 for tid in map(self._term_ids.__getitem__, self._open)})
        self._total_len -= self._open_len
        self._open, self._open_len = self._count(tokens), len(tokens)
        self._avg_idf = self._average_idf()

    def idf(self, term: str) -> float:
        """The idf BM25 weighs a term with (0 for a term no document holds)."""
        tid = self._term_ids.get(term)
        return self._idf(self._df[tid]) if tid is not None and self._df[tid] else 0.0

    def first_document(self, term: str) -> int | None:
        """The first document that held the term (ids follow the order documents came in); None for none."""
        tid = self._term_ids.get(term)
        if tid is None or not self._df[tid]:
            return None
        docs = self._post_docs[tid]
        return int(docs.view()[0]) if len(docs) else len(self) - 1  # only the open document holds it

    def _idf(self, df: int) -> float:
        n = len(self)
        idf = math.log(n - df + 0.5) - math.log(df + 0.5)
        if idf < 0:  # BM25Okapi floors negative idf at epsilon * mean idf
            return self.epsilon * self._avg_idf
        return idf

    def _average_idf(self) -> float:
        df = np.fromiter(self._df, np.float64, len(self._df))
        df = np.sort(df[df > 0])  # a term replaced away is no longer in the vocabulary; sorted, the mean does
        n = len(self)  # not depend on the order terms arrived in (a bulk load equals one add at a time)
        return float(np.sum(np.log(n - df + 0.5) - np.log(df + 0.5)) / len(df)) if len(df) else 0.0

    def scores(self, query: list[str]) -> np.ndarray:
        n = len(self)
        out = np.zeros(n)
        if not n:
            return out
        doc_len = self._doc_len.view()
        avgdl = self._total_len / n
        for term in query:  # duplicates count twice, as in BM25Okapi
            tid = self._term_ids.get(term)
            if tid is None:
                continue
            docs, tfs = self._post_docs[tid].view(), self._post_tfs[tid].view()
            dl = doc_len[docs]
            idf = self._idf(self._df[tid])
            out[docs] += idf * self._tf_weight(tfs, dl, avgdl)
            tf = self._open.get(term, 0) if self._open is not None else 0
            if tf:
                out[-1] += idf * self._tf_weight(tf, self._open_len, avgdl)
        return out

    def _tf_weight(self, tf, dl, avgdl: float):
        """BM25's saturated term frequency, for posting arrays and for the open document alike."""
        return tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * dl / avgdl))

    def top(self, query: list[str], k: int) -> list[tuple[int, float]]:
        """Positive-scoring documents, best first; ties keep corpus order."""
        s = self.scores(query)
        hits = np.flatnonzero(s > 0)
        if len(hits) > k:
            part = np.argpartition(-s[hits], k - 1)[:k]
            cutoff = s[hits[part]].min()
            hits = hits[s[hits] >= cutoff]
        order = np.lexsort((hits, -s[hits]))[:k]
        return [(int(hits[i]), float(s[hits[i]])) for i in order]

    def encode(self, w: Writer, name: str) -> None:
        """Into a payload under `name`: vocabulary, frequencies, postings (flat, cut by offsets), lengths."""
        vocab: list[str] = [""] * len(self._df)
        for term, tid in self._term_ids.items():  # a persistent map does not iterate in id order
            vocab[tid] = term
        w.arrays[f"{name}.terms"] = w.code(vocab)
        w.arrays[f"{name}.df"] = np.fromiter(self._df, np.int64, len(vocab))
        docs, tfs = [g.view() for g in self._post_docs], [g.view() for g in self._post_tfs]
        w.arrays[f"{name}.docs"] = np.concatenate([np.zeros(0, np.int32), *docs])
        w.arrays[f"{name}.docs.offsets"] = np.cumsum([0, *map(len, docs)], dtype=np.int64)
        w.arrays[f"{name}.tfs"] = np.concatenate([np.zeros(0, np.int32), *tfs])
        w.arrays[f"{name}.doc_len"] = self._doc_len.view()
        w.doc[name] = {"open": self._open, "open_len": self._open_len, "total_len": self._total_len}

    @classmethod
    def decode(cls, r: Reader, name: str, cfg: MemCompileConfig, documents: int) -> BM25Index:
        """The index `encode` wrote under `name`, holding `documents` documents; else FormatError."""
        bm25 = cls(cfg.bm25_k1, cfg.bm25_b, cfg.bm25_epsilon)
        vocab = r.texts(f"{name}.terms", None)
        term_ids = dict(zip(vocab, range(len(vocab))))
        if len(term_ids) != len(vocab):
            raise FormatError(f"{name}: a term twice")
        df = r.array(f"{name}.df", np.int64, (len(vocab),), 0)
        doc_len = r.array(f"{name}.doc_len", np.float64, (None,)).copy()
        doc = r.value(name, dict)
        open_, open_len, total_len = doc.get("open"), doc.get("open_len"), doc.get("total_len")
        if open_ is not None and (
            not isinstance(open_, dict)
            or not set(map(type, open_.values())) <= {int}
            or not all(map(term_ids.__contains__, open_))
            or min(open_.values(), default=1) < 1
        ):
            raise FormatError(f"{name}: open document")
        closed = len(doc_len)
        docs = r.array(f"{name}.docs", np.int32, (None,), 0, closed).copy()  # GrowArrays hold them: their own memory
        tfs = r.array(f"{name}.tfs", np.int32, (len(docs),), 1).copy()
        offsets = r.offsets(f"{name}.docs", len(vocab), len(docs))
        first = np.zeros(len(docs), dtype=bool)  # each posting list ascends
        first[offsets[:-1][offsets[:-1] < len(docs)]] = True
        in_open = np.zeros(len(vocab), dtype=np.int64)
        in_open[[term_ids[t] for t in open_ or ()]] = 1
        if (
            closed + (open_ is not None) != documents
            or not np.all(np.diff(docs)[~first[1:]] > 0)
            or not np.array_equal(np.bincount(docs, tfs, closed), doc_len)  # a document's counts add up to its length
            or not np.array_equal(np.diff(offsets) + in_open, df)
            or type(open_len) is not int
            or type(total_len) is not int
            or open_len != sum((open_ or {}).values())
            or total_len != int(doc_len.sum()) + open_len
        ):
            raise FormatError(f"{name}: postings, frequencies and lengths disagree")
        bounds = offsets.tolist()
        spans = list(map(slice, bounds[:-1], bounds[1:]))
        bm25._term_ids, bm25._df = term_ids, df.tolist()
        bm25._post_docs = list(map(GrowArray.of, map(docs.__getitem__, spans)))
        bm25._post_tfs = list(map(GrowArray.of, map(tfs.__getitem__, spans)))
        bm25._doc_len = GrowArray.of(doc_len)
        bm25._open, bm25._open_len, bm25._total_len = open_, open_len, total_len
        bm25._avg_idf = bm25._average_idf()
        return bm25
