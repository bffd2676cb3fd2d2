"""Lexical retrieval shared by the multihop domain and the Bamboogle evaluation: BM25 (Okapi, the rank_bm25
package) over texts tokenised with the QA normalisation (lower case, no punctuation or articles)."""

from __future__ import annotations

from rank_bm25 import BM25Okapi

from genenv.domains.multihop.bamboogle import normalize_answer


def tokens(text: str) -> list[str]:
    return normalize_answer(text).split()


class Bm25Index:
    """``search(query, k)``: the ``k`` best-scoring texts, ties in the order the texts were given."""

    def __init__(self, texts: list[str]):
        self.texts = list(texts)
        self._bm25 = BM25Okapi([tokens(t) or [""] for t in self.texts]) if self.texts else None

    def search(self, query: str, k: int) -> list[str]:
        if self._bm25 is None:
            return []
        scores = self._bm25.get_scores(tokens(query))
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        return [self.texts[i] for i in order[:k]]
