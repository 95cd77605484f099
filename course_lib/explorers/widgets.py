"""The explorers' widgets: each binds ipywidgets controls to the plain, tested functions of its
sibling modules and draws what they return, as ipywidgets' `interactive` model has it.

    sample_browser                 lesson 00   computes with pages._sample_page
    quantization_error_explorer    lesson 01   quantization_error.sample_values, error_study, _error_curve
    granularity_explorer           lesson 01   granularity.weight_tensors, granularity_study
    calibration_explorer           lesson 03   ranges._clipped_shares, _describe_ranges
    disagreement_browser           lesson 04   pages._disagreement_page

Each shows and returns its box (controls, a status line, the plot output); the CSS class on a box
is what the browser test finds it by. ipywidgets and matplotlib are imported only when a widget is made.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import data
from .granularity import GRANULARITIES, granularity_study, weight_tensors
from .pages import DISAGREEMENT_ORDERS, _disagreement_page, _sample_page
from .quantization_error import (
    DISTRIBUTIONS,
    RANGE_METHODS,
    _error_curve,
    _thin_levels,
    error_study,
    sample_values,
)
from .ranges import _clipped_shares, _describe_ranges

Predictor = Callable[[np.ndarray], np.ndarray]  # uint8 images (N, 28, 28) -> predicted class ids


def _panel(rows: list, status, out, css_class: str = ""):
    """Rows of controls, a status line and the plot output in one box, shown and returned.

    The CSS class lets a browser test find the explorer; returning the box lets a notebook keep it.
    """
    import ipywidgets as widgets
    from IPython.display import display

    box = widgets.VBox([*(widgets.HBox(row) for row in rows), status, out])
    if css_class:
        box.add_class(css_class)
    display(box)
    return box


def _plot_samples(images, labels, indices, predictions=None, columns: int = 8, title: str = ""):
    """A grid of images titled with their label (and prediction, red when wrong)."""
    import matplotlib.pyplot as plt

    rows = max(1, -(-len(images) // columns))
    fig, axes = plt.subplots(rows, columns, figsize=(1.45 * columns, 1.7 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for k, (img, label, idx) in enumerate(zip(images, labels, indices, strict=True)):
        ax = axes.flat[k]
        ax.imshow(img, cmap="gray_r", vmin=0, vmax=255)
        text, color = f"#{idx}\n{data.CLASS_NAMES[label]}", "black"
        if predictions is not None:
            pred = int(predictions[k])
            text = f"#{idx} {data.CLASS_NAMES[label]}\n→ {data.CLASS_NAMES[pred]}"
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

    split = widgets.Dropdown(
        options=["test", "validation", "calibration", "train"], value="test", description="split"
    )
    cls = widgets.Dropdown(
        options=[("all classes", -1)] + [(name, i) for i, name in enumerate(data.CLASS_NAMES)],
        value=-1,
        description="class",
    )
    page = widgets.IntSlider(value=0, min=0, max=0, description="page", continuous_update=False)
    status = widgets.HTML()

    def update_page_range(*_):
        _, _, _, n = _sample_page(split.value, None if cls.value < 0 else cls.value, 0, per_page)
        page.max = max(0, -(-n // per_page) - 1)

    def draw(split_name: str, class_id: int, page_no: int):
        class_id = None if class_id < 0 else class_id
        images, labels, indices, n = _sample_page(split_name, class_id, page_no, per_page)
        preds = predict(images) if predict is not None else None
        what = "all classes" if class_id is None else data.CLASS_NAMES[class_id]
        line = f"{split_name}: {what}, images {page_no * per_page + 1}–{page_no * per_page + len(images)} of {n:,}"
        if preds is not None:
            wrong = int((preds != labels).sum())
            line += f"; model wrong on {wrong} of {len(images)} shown (red titles)"
        status.value = f"<b>{line}</b>"
        _plot_samples(images, labels, indices, preds)  # the status line above says what is shown
        plt.show()

    split.observe(update_page_range, "value")
    cls.observe(update_page_range, "value")
    update_page_range()
    out = widgets.interactive_output(draw, {"split_name": split, "class_id": cls, "page_no": page})
    return _panel([[split, cls, page]], status, out)


# ---------------------------------------------------------------------------------------------------
# Lesson 01: the quantization error explorer and the granularity explorer
# ---------------------------------------------------------------------------------------------------


def _plot_error_study(study, title: str = ""):
    """Histogram of the tensor with the grid's levels and the clipped regions, above the quantizer's error."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True, height_ratios=[3, 2])
    grid, err = _error_curve(study)
    left, right = float(grid[0]), float(grid[-1])
    pad = 0.02 * (right - left)
    top.hist(study.x, bins=200, range=(left, right), color="steelblue", log=True)
    shown, every = _thin_levels(study.levels)
    label = "representable levels" + (f" (every {every}th shown)" if every > 1 else "")
    for k, level in enumerate(shown):
        top.axvline(level, color="darkorange", lw=0.6, alpha=0.7, label=label if k == 0 else None)
    for ax in (top, bottom):
        ax.axvspan(left - pad, study.clip_low, color="crimson", alpha=0.12)
        ax.axvspan(study.clip_high, right + pad, color="crimson", alpha=0.12)
        ax.set_xlim(left - pad, right + pad)
    handles, _ = top.get_legend_handles_labels()
    handles.append(Patch(color="crimson", alpha=0.12, label="clipped region"))
    top.set(ylabel="count (log scale)", title=title or "The tensor and the grid")
    top.legend(handles=handles, fontsize=8, loc="upper right")
    bottom.plot(grid, err, color="black", lw=0.7)
    for sign in (-1, 1):
        bottom.axhline(sign * study.scale / 2, color="darkorange", ls="--", lw=0.8)
    bottom.set(
        xlabel="real value x", ylabel="error x̂ − x", title="Reconstruction error (dashed: ± scale / 2)"
    )
    fig.tight_layout()
    return fig


def quantization_error_explorer(
    weights=None, weights_name: str = "ResNet weights", n: int = 20_000, seed: int = 0
):
    """Quantize a tensor on a grid you choose and see the error: bits, signed or unsigned, symmetric or
    asymmetric, the range (min/max, a percentile, or by hand), the data and its outliers.

    weights: optionally one real weight tensor, offered as the distribution "ResNet weights".
    Returns the widget; its `.children` are the controls, a status line and the plot output.
    """
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    slider = {"continuous_update": False, "style": {"description_width": "initial"}}
    options = [d for d in DISTRIBUTIONS if weights is not None or d != "ResNet weights"]
    distribution = widgets.Dropdown(options=options, value=options[0], description="data")
    outliers = widgets.IntSlider(value=0, min=0, max=50, description="outliers", **slider)
    magnitude = widgets.FloatSlider(value=10, min=2, max=50, step=1, description="outlier size (σ)", **slider)
    bits = widgets.IntSlider(value=8, min=2, max=8, description="bits", **slider)
    signed = widgets.Dropdown(
        options=[("signed", True), ("unsigned", False)], value=True, description="integers"
    )
    symmetric = widgets.Dropdown(
        options=[("asymmetric", False), ("symmetric", True)], value=False, description="scheme"
    )
    method = widgets.Dropdown(options=list(RANGE_METHODS), value="min/max", description="range")
    percentile = widgets.FloatSlider(
        value=99.9, min=95, max=100, step=0.01, description="percentile", readout_format=".2f", **slider
    )
    low = widgets.FloatText(value=-3.0, description="low", layout={"width": "160px"})
    high = widgets.FloatText(value=3.0, description="high", layout={"width": "160px"})
    status = widgets.HTML()

    def draw(distribution, outliers, magnitude, bits, signed, symmetric, method, percentile, low, high):
        x = sample_values(distribution, n, outliers, magnitude, seed, weights)
        try:
            study = error_study(x, bits, signed, symmetric, method, percentile, low, high)
        except ValueError as exc:
            status.value = f"<b style='color:crimson'>{exc}</b>"
            return
        status.value = f"<b>{study.describe()}</b>"
        what = weights_name if distribution == "ResNet weights" else distribution
        _plot_error_study(
            study, title=f"{what}: {x.size:,} values, {outliers} outliers on a {study.dtype} grid"
        )
        plt.show()

    controls = {
        "distribution": distribution,
        "outliers": outliers,
        "magnitude": magnitude,
        "bits": bits,
        "signed": signed,
        "symmetric": symmetric,
        "method": method,
        "percentile": percentile,
        "low": low,
        "high": high,
    }
    out = widgets.interactive_output(draw, controls)
    rows = [[distribution, outliers, magnitude], [bits, signed, symmetric], [method, percentile, low, high]]
    return _panel(rows, status, out, "quantization-error-explorer")


def plot_granularity(study, reference, name: str = ""):
    """Error per output channel for one granularity, with per-tensor as the reference."""
    import matplotlib.pyplot as plt

    channels = np.arange(len(study.channel_sqnr_db))
    fig, ax = plt.subplots(figsize=(10, 3.8))
    ax.plot(channels, reference.channel_sqnr_db, color="gray", lw=0.8, label="per-tensor")
    if study.granularity != "per-tensor":
        label = study.granularity + (f" (block {study.block_size})" if study.block_size else "")
        ax.plot(channels, study.channel_sqnr_db, color="steelblue", lw=0.9, label=label)
    ax.set(
        xlabel="output channel",
        ylabel="SQNR (dB, higher is better)",
        title=f"{name}: {study.dtype} error per output channel",
    )
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    return fig


def granularity_explorer(weights, layer: str | None = None):
    """Compare per-tensor, per-channel and block-wise scales on a model's real weights.

    weights: a state_dict (or name -> array mapping); its conv and linear weights are offered.
    layer: the one shown first (default: the first weight).
    Returns the widget; its `.children` are the controls, a status line and the plot output.
    """
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    tensors = weight_tensors(weights)
    if layer is not None and layer not in tensors:
        raise ValueError(f"layer {layer!r} is not one of the weights offered: {', '.join(tensors)}.")
    layer = widgets.Dropdown(options=list(tensors), value=layer or next(iter(tensors)), description="layer")
    granularity = widgets.Dropdown(
        options=list(GRANULARITIES), value="per-channel", description="granularity"
    )
    block = widgets.SelectionSlider(
        options=[8, 16, 32, 64, 128, 256], value=32, description="block size", continuous_update=False
    )
    dtype = widgets.Dropdown(options=["int8", "int4"], value="int8", description="type")
    status = widgets.HTML()

    def draw(layer, granularity, block, dtype):
        w = tensors[layer]
        study = granularity_study(w, granularity, block, dtype)
        reference = granularity_study(w, "per-tensor", block, dtype)
        status.value = (
            f"<b>{study.describe(layer, w.shape)}</b> (per-tensor: {reference.error.sqnr_db:.1f} dB)"
        )
        plot_granularity(study, reference, layer)
        plt.show()

    out = widgets.interactive_output(
        draw, {"layer": layer, "granularity": granularity, "block": block, "dtype": dtype}
    )
    return _panel([[layer, granularity, block, dtype]], status, out, "granularity-explorer")


METHOD_COLORS = {"MinMax": "tab:blue", "Entropy": "tab:orange", "Percentile": "tab:green"}


def plot_ranges(name: str, values: np.ndarray, ranges: dict[str, tuple[float, float]], log: bool = True):
    """The tensor's histogram with each method's range drawn as a pair of vertical lines."""
    import matplotlib.pyplot as plt

    v = np.asarray(values).ravel()
    shares = _clipped_shares(v, ranges)
    fig, ax = plt.subplots(figsize=(9, 3.4))
    ax.hist(v, bins=200, color="0.55", log=log)
    for k, (method, (low, high)) in enumerate(ranges.items()):
        color = METHOD_COLORS.get(method, f"C{k + 3}")
        label = f"{method}: [{low:.3g}, {high:.3g}], clips {shares[method]:.2%}"
        ax.axvline(low, color=color, linestyle=("-", "--", ":")[k % 3], label=label)
        ax.axvline(high, color=color, linestyle=("-", "--", ":")[k % 3])
    ax.set_xlabel("activation value")
    ax.set_ylabel("count (log)" if log else "count")
    ax.set_title(f"{name}: where each calibration method puts the range", fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def calibration_explorer(
    values: dict[str, np.ndarray],
    ranges: dict[str, dict[str, tuple[float, float]]],
    tensor: str | None = None,
):
    """Pick an activation tensor; see its histogram on real inputs and the range each calibration
    method chose, with the share of values each would clip.

    values: {tensor: real activation values} (e.g. from `calibration.activation_values`);
    ranges: {tensor: {method: (low, high)}} (from `calibration.calibration_ranges`).
    Returns the widget; its `.children` are the controls, a status line and the plot output.
    """
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    names = [n for n in values if n in ranges]
    if not names:
        raise ValueError("No tensor has both values and ranges: pass the same names to both.")
    if tensor is not None and tensor not in names:
        raise ValueError(f"tensor {tensor!r} is not one of {', '.join(names)}.")
    pick = widgets.Dropdown(options=names, value=tensor or names[0], description="tensor")
    methods = widgets.SelectMultiple(options=list(next(iter(ranges.values()))), description="methods", rows=3)
    methods.value = tuple(methods.options)
    log = widgets.Checkbox(value=True, description="log counts")
    status = widgets.HTML()

    def draw(name, chosen, log_scale):
        shown = {m: r for m, r in ranges[name].items() if m in chosen}
        status.value = _describe_ranges(name, values[name], shown)
        plot_ranges(name, values[name], shown, log=log_scale)
        plt.show()

    out = widgets.interactive_output(draw, {"name": pick, "chosen": methods, "log_scale": log})
    return _panel([[pick, methods, log]], status, out, "calibration-explorer")


def _plot_disagreements(images, labels, indices, reference_logits, candidate_logits, columns: int = 6):
    """Each image with its label, fp32's answer and int8's, and how sure each was (margin)."""
    import matplotlib.pyplot as plt

    from .. import measure

    rows = max(1, -(-len(indices) // columns))
    fig, axes = plt.subplots(rows, columns, figsize=(2.1 * columns, 2.45 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for k, i in enumerate(indices):
        ref, cand = reference_logits[i], candidate_logits[i]
        r, c = int(ref.argmax()), int(cand.argmax())
        ax = axes.flat[k]
        ax.imshow(images[i], cmap="gray_r", vmin=0, vmax=255)
        names = data.CLASS_NAMES
        ax.set_title(
            f"#{i} true: {names[labels[i]]}\nfp32: {names[r]} ({measure.margin(ref):.2f})\nint8: {names[c]} ({measure.margin(cand):.2f})",
            fontsize=7,
            color="black" if c == labels[i] else "crimson",
        )
    fig.tight_layout()
    return fig


def disagreement_browser(images, labels, reference_logits, candidates: dict, per_page: int = 12):
    """Browse the images where fp32 and an INT8 variant disagree: both answers and margins
    (probability of the top class minus the runner-up's; the title is red when int8 is wrong).

    candidates: {variant name: its logits on the same images}.
    Returns the widget; its `.children` are the controls, a status line and the plot output.
    """
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    if not candidates:
        raise ValueError("Pass at least one variant: candidates={'int8': logits}.")
    variant = widgets.Dropdown(options=list(candidates), description="variant")
    order = widgets.Dropdown(options=list(DISAGREEMENT_ORDERS), description="sort by")
    page = widgets.IntSlider(value=0, min=0, max=0, description="page", continuous_update=False)
    status = widgets.HTML()

    def draw(name, sort_by, page_no):
        cand = candidates[name]
        shown, n, pages = _disagreement_page(reference_logits, cand, sort_by, page_no, per_page)
        page.max = pages - 1
        wrong = int(np.sum(np.asarray(cand).argmax(1)[shown] != np.asarray(labels)[shown]))
        status.value = (
            f"<b>{name}</b>: {n:,} disagreements with fp32 in {len(labels):,} images "
            f"({n / len(labels):.2%}); page {min(page_no, pages - 1) + 1} of {pages}, sorted by {sort_by}; "
            f"int8 wrong on {wrong} of the {len(shown)} shown"
        )
        if len(shown):
            _plot_disagreements(images, labels, shown, reference_logits, cand)
            plt.show()

    out = widgets.interactive_output(draw, {"name": variant, "sort_by": order, "page_no": page})
    return _panel([[variant, order, page]], status, out, "disagreement-browser")
