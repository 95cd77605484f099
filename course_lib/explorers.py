"""ipywidgets explorers: thin shells that bind controls to plain, tested functions and draw.

Nothing in course_lib imports this module; notebooks do.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import data as _data

Predictor = Callable[[np.ndarray], np.ndarray]  # uint8 images (N, 28, 28) -> predicted class ids


def sample_page(split: str = "test", class_id: int | None = None, page: int = 0, per_page: int = 24):
    """One page of a split's images, optionally of one class: (images, labels, indices, n_matching)."""
    images, labels = _data.load_split(split)
    indices = np.arange(len(labels)) if class_id is None else np.flatnonzero(labels == class_id)
    n = len(indices)
    pages = max(1, -(-n // per_page))
    page = int(np.clip(page, 0, pages - 1))
    chosen = indices[page * per_page : (page + 1) * per_page]
    return images[chosen], labels[chosen], chosen, n


def plot_samples(images, labels, indices, predictions=None, columns: int = 8, title: str = ""):
    """A grid of images titled with their label (and prediction, red when wrong)."""
    import matplotlib.pyplot as plt

    rows = max(1, -(-len(images) // columns))
    fig, axes = plt.subplots(rows, columns, figsize=(1.45 * columns, 1.7 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for k, (img, label, idx) in enumerate(zip(images, labels, indices, strict=True)):
        ax = axes.flat[k]
        ax.imshow(img, cmap="gray_r", vmin=0, vmax=255)
        text, color = f"#{idx}\n{_data.CLASS_NAMES[label]}", "black"
        if predictions is not None:
            pred = int(predictions[k])
            text = f"#{idx} {_data.CLASS_NAMES[label]}\n→ {_data.CLASS_NAMES[pred]}"
            color = "black" if pred == label else "crimson"
        ax.set_title(text, fontsize=7, color=color)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def sample_browser(predict: Predictor | None = None, per_page: int = 24):
    """Browse Fashion-MNIST by split, class and page; with `predict`, show the model's answers.

    Returns the widget; its `.children` are the controls, a status line and the plot output.
    """
    import ipywidgets as widgets
    import matplotlib.pyplot as plt
    from IPython.display import display

    split = widgets.Dropdown(
        options=["test", "validation", "calibration", "train"], value="test", description="split"
    )
    cls = widgets.Dropdown(
        options=[("all classes", -1)] + [(name, i) for i, name in enumerate(_data.CLASS_NAMES)],
        value=-1,
        description="class",
    )
    page = widgets.IntSlider(value=0, min=0, max=0, description="page", continuous_update=False)
    status = widgets.HTML()

    def update_page_range(*_):
        _, _, _, n = sample_page(split.value, None if cls.value < 0 else cls.value, 0, per_page)
        page.max = max(0, -(-n // per_page) - 1)

    def draw(split_name: str, class_id: int, page_no: int):
        class_id = None if class_id < 0 else class_id
        images, labels, indices, n = sample_page(split_name, class_id, page_no, per_page)
        preds = predict(images) if predict is not None else None
        what = "all classes" if class_id is None else _data.CLASS_NAMES[class_id]
        line = f"{split_name}: {what}, images {page_no * per_page + 1}–{page_no * per_page + len(images)} of {n:,}"
        if preds is not None:
            wrong = int((preds != labels).sum())
            line += f"; model wrong on {wrong} of {len(images)} shown (red titles)"
        status.value = f"<b>{line}</b>"
        plot_samples(images, labels, indices, preds, title=line)
        plt.show()

    split.observe(update_page_range, "value")
    cls.observe(update_page_range, "value")
    update_page_range()
    out = widgets.interactive_output(draw, {"split_name": split, "class_id": cls, "page_no": page})
    box = widgets.VBox([widgets.HBox([split, cls, page]), status, out])
    display(box)
    return box
