"""What the two image browsers show: one page of images at a time.

    _sample_page         a page of a Fashion-MNIST split, optionally of one class (lesson 00's sample browser)
    _disagreement_page   a page of the images where two models' answers differ, sorted (lesson 04's
                        disagreement browser)

Plain functions; course_lib.explorers.widgets binds controls to them and draws.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .. import data


def _clamp_page(page: int, n: int, per_page: int) -> tuple[int, int]:
    """(page, pages): a page number past either end becomes the first or the last page."""
    pages = max(1, -(-n // per_page))
    return int(np.clip(page, 0, pages - 1)), pages


def _sample_page(
    split: str = "test", class_id: int | None = None, page: int = 0, per_page: int = 24
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """One page of a split's images, optionally of one class: (images, labels, indices, n_matching)."""
    images, labels = data.load_split(split)
    indices = np.arange(len(labels)) if class_id is None else np.flatnonzero(labels == class_id)
    page, _ = _clamp_page(page, len(indices), per_page)
    chosen = indices[page * per_page : (page + 1) * per_page]
    return images[chosen], labels[chosen], chosen, len(indices)


DISAGREEMENT_ORDERS = ("fp32 margin", "int8 margin", "index")


def _disagreement_page(
    reference_logits: ArrayLike,
    candidate_logits: ArrayLike,
    order: str = "fp32 margin",
    page: int = 0,
    per_page: int = 12,
) -> tuple[np.ndarray, int, int]:
    """The disagreements between two models' top-1 answers, sorted, one page of them.

    Returns (indices on this page, number of disagreements, number of pages). `order`: "fp32
    margin" (least sure first), "int8 margin" or "index".
    """
    from .. import measure

    ref, cand = np.asarray(reference_logits), np.asarray(candidate_logits)
    idx = np.flatnonzero(ref.argmax(1) != cand.argmax(1))
    keys = {"fp32 margin": measure.margin(ref[idx]), "int8 margin": measure.margin(cand[idx]), "index": idx}
    if order not in keys:
        raise ValueError(f"order must be one of {', '.join(keys)}; got {order!r}.")
    idx = idx[np.argsort(keys[order], kind="stable")]
    page, pages = _clamp_page(page, len(idx), per_page)
    return idx[page * per_page : (page + 1) * per_page], len(idx), pages
