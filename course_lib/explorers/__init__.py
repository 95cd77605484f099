"""The course's interactive explorers, built as ipywidgets' `interactive` model has it: what an explorer
computes is a plain function that tests call without a browser; its widget only binds controls to
that function and draws what it returns.

    explorer (lesson)                   computes in                      widget (in widgets)
    sample browser (00)                 pages._sample_page                sample_browser
    quantization error explorer (01)    quantization_error.error_study   quantization_error_explorer
    granularity explorer (01)           granularity.granularity_study    granularity_explorer
    calibration explorer (03)           ranges._describe_ranges           calibration_explorer
    disagreement browser (04)           pages._disagreement_page          disagreement_browser

Every name is available from here: `from course_lib import explorers`, then
`explorers.granularity_study(w, "per-channel")` or `explorers.granularity_explorer(state_dict)`.
The rest of course_lib never imports this package; the notebooks do.
"""

from .granularity import GRANULARITIES, GranularityStudy, granularity_study, outlier_ratio, weight_tensors
from .pages import DISAGREEMENT_ORDERS
from .quantization_error import (
    DISTRIBUTIONS,
    RANGE_METHODS,
    ErrorStudy,
    clipping_sweep,
    error_study,
    sample_values,
)
from .widgets import (
    METHOD_COLORS,
    Predictor,
    calibration_explorer,
    disagreement_browser,
    granularity_explorer,
    plot_granularity,
    plot_ranges,
    quantization_error_explorer,
    sample_browser,
)

__all__ = [
    "DISAGREEMENT_ORDERS",
    "DISTRIBUTIONS",
    "GRANULARITIES",
    "METHOD_COLORS",
    "RANGE_METHODS",
    "ErrorStudy",
    "GranularityStudy",
    "Predictor",
    "calibration_explorer",
    "clipping_sweep",
    "disagreement_browser",
    "error_study",
    "granularity_explorer",
    "granularity_study",
    "outlier_ratio",
    "plot_granularity",
    "plot_ranges",
    "quantization_error_explorer",
    "sample_browser",
    "sample_values",
    "weight_tensors",
]
