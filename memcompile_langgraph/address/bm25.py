"""Incremental BM25 with rank-bm25's BM25Okapi scores (App. B.3: k1=1.5, b=0.75).

rank-bm25 rebuilds from the whole corpus and scores every document per query term in Python; this
index appends documents in O(|doc|) and scores a query through its posting lists only. The scores are
the same numbers BM25Okapi computes (tests keep rank-bm25 as the reference).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from ..growarray import GrowArray


class BM25Index:
    def __init__(self, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25):
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self._term_ids: dict[str, int] = {}
        self._df: list[int] = []
        self._post_docs: list[GrowArray] = []  # ascending document ids per term
        self._post_tfs: list[GrowArray] = []
        self._doc_len = GrowArray(np.float64, 1024)
        self._total_len = 0
        self._avg_idf: float | None = None
        self._owned: set[int] | None = None  # in a fork: the terms whose posting arrays are its own

    def fork(self) -> BM25Index:
        """An index equal to this one that can be extended without changing this one (copy-on-write)."""
        out = object.__new__(BM25Index)
        out.__dict__.update(self.__dict__)
        out._term_ids, out._df = dict(self._term_ids), list(self._df)
        out._post_docs, out._post_tfs = list(self._post_docs), list(self._post_tfs)
        out._doc_len, out._owned = self._doc_len.fork(), set()
        return out

    def _postings(self, tid: int) -> tuple[GrowArray, GrowArray]:
        if self._owned is not None and tid not in self._owned:
            self._owned.add(tid)
            self._post_docs[tid], self._post_tfs[tid] = self._post_docs[tid].fork(), self._post_tfs[tid].fork()
        return self._post_docs[tid], self._post_tfs[tid]

    def __len__(self) -> int:
        return len(self._doc_len)

    def _new_term(self, term: str) -> int:
        tid = self._term_ids[term] = len(self._df)
        self._df.append(0)
        self._post_docs.append(GrowArray(np.int64))
        self._post_tfs.append(GrowArray(np.float64))
        if self._owned is not None:
            self._owned.add(tid)
        return tid

    def add(self, tokens: list[str]) -> int:
        doc = len(self._doc_len)
        self.add_many([tokens])
        return doc

    def add_many(self, documents: list[list[str]]) -> None:
        """Appends documents in order; each posting array grows once per call (a cold load adds ~60k documents)."""
        start = len(self._doc_len)
        lengths = [len(tokens) for tokens in documents]
        self._doc_len.extend(lengths)
        self._total_len += sum(lengths)
        grouped: dict[int, tuple[list[int], list[int]]] = {}
        for doc, tokens in enumerate(documents, start):
            for term, tf in Counter(tokens).items():
                tid = self._term_ids.get(term)
                if tid is None:
                    tid = self._new_term(term)
                entry = grouped.get(tid)
                if entry is None:
                    entry = grouped[tid] = ([], [])
                entry[0].append(doc)
                entry[1].append(tf)
        for tid, (docs, tfs) in grouped.items():
            self._df[tid] += len(docs)
            post_docs, post_tfs = self._postings(tid)
            post_docs.extend(docs)
            post_tfs.extend(tfs)
        self._avg_idf = None

    def replace(self, doc: int, old_tokens: list[str], tokens: list[str]) -> None:
        """Give document `doc` new tokens (it was added with old_tokens); scores equal a rebuild."""
        old, new = Counter(old_tokens), Counter(tokens)
        for term in old.keys() | new.keys():
            if old[term] == new[term]:
                continue
            tid = self._term_ids.get(term)
            if tid is None:  # a term new to the whole index
                tid = self._new_term(term)
            docs, tfs = self._postings(tid)
            i = int(np.searchsorted(docs.view(), doc))  # postings stay sorted by document id
            present = i < len(docs) and docs.data[i] == doc
            if new[term] and present:
                tfs.writable()[i] = new[term]
            elif new[term]:
                docs.insert(i, doc)
                tfs.insert(i, new[term])
                self._df[tid] += 1
            elif present:
                docs.delete(i)
                tfs.delete(i)
                self._df[tid] -= 1
        self._total_len += len(tokens) - int(self._doc_len.data[doc])
        self._doc_len.writable()[doc] = len(tokens)
        self._avg_idf = None

    def idf(self, term: str) -> float:
        """The idf BM25 weighs a term with (0 for a term no document holds)."""
        tid = self._term_ids.get(term)
        return self._idf(self._df[tid]) if tid is not None and self._df[tid] else 0.0

    def _idf(self, df: int) -> float:
        n = len(self._doc_len)
        idf = math.log(n - df + 0.5) - math.log(df + 0.5)
        if idf < 0:  # BM25Okapi floors negative idf at epsilon * mean idf
            return self.epsilon * self._average_idf()
        return idf

    def _average_idf(self) -> float:
        if self._avg_idf is None:
            df = np.asarray(self._df, dtype=np.float64)
            df = np.sort(df[df > 0])  # a term replaced away is no longer in the vocabulary; sorted, the mean does
            n = len(self._doc_len)  # not depend on the order terms arrived in (a bulk load equals one add at a time)
            self._avg_idf = float(np.sum(np.log(n - df + 0.5) - np.log(df + 0.5)) / len(df)) if len(df) else 0.0
        return self._avg_idf

    def scores(self, query: list[str]) -> np.ndarray:
        n = len(self._doc_len)
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
            out[docs] += self._idf(self._df[tid]) * (
                tfs * (self.k1 + 1) / (tfs + self.k1 * (1 - self.b + self.b * dl / avgdl))
            )
        return out

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
