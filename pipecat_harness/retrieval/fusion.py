"""Reciprocal rank fusion of the lexical and embedding rankings, whose scores (BM25, cosine) share no scale."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["reciprocal_rank_fusion"]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[tuple[str, float]]], *, k: float = 60.0,
                           weights: Sequence[float] | None = None) -> list[tuple[str, float]]:
    """Fuse best-first ``(doc_id, score)`` rankings by ``sum(weight / (k + rank))`` (default weights 1), ties by id."""
    weights = list(weights) if weights is not None else [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, (doc_id, _score) in enumerate(ranking, start=1):
            fused[doc_id] = fused.get(doc_id, 0.0) + weight / (k + rank)
    return sorted(fused.items(), key=lambda pair: (-pair[1], pair[0]))
