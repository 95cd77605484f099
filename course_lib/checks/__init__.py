"""Self-checks for the exercises: each compares a learner's answer with one computed here and
says what passed or exactly what differed, with a hint that teaches.

One module per lesson (`lesson00` ... `lesson07`, the checks of that lesson's exercises); every
check is importable from here, so a lesson reads `cl.checks.check_reader(...)` whichever module
holds it.
"""

from .lesson00 import (
    check_classifier,
    check_confident_mistakes,
    check_confusion_pair,
    check_fp32_file_bytes,
    check_normalised_pixel,
)
from .lesson01 import (
    check_accumulator,
    check_clipping_crossover,
    check_codes,
    check_decoded_value,
    check_packed_int4_bytes,
    check_scale_zero_point,
)
from .lesson02 import (
    check_conv_kernel_swap,
    check_cosine_pass_share,
    check_dynamic_quantize_prediction,
    check_float_copy,
    check_max_abs_drift,
)
from .lesson03 import (
    check_integer_kernels,
    check_memory_estimate,
    check_most_saturated_tensor,
    check_percentile_beats_minmax,
    check_reader,
    check_saturated_share,
    check_unprocessed_quantization,
)
from .lesson04 import (
    FAILURE_REASONS,
    check_capstone,
    check_failing_variants,
    check_paired_interval,
)
from .lesson04b import check_calibration_cause, check_edge_calibration
from .lesson05 import (
    check_bootstrap_interval,
    check_careless_swap,
    check_float_island_time,
    check_fused_s8s8,
    check_intensity,
)
from .lesson06 import (
    check_a16w8_integer_kernels,
    check_int4_scale,
    check_nbits_bytes,
    check_pick_without_size_target,
    check_ship_prediction,
    check_ship_verdicts,
)
from .lesson07 import (
    check_audit_lessons,
    check_int8_floor,
    check_nanogpt_prediction,
    check_rule_against_perplexity,
    check_serve_batch,
)
from .result import CheckResult

__all__ = [
    "CheckResult",
    "check_normalised_pixel",
    "check_confident_mistakes",
    "check_fp32_file_bytes",
    "check_classifier",
    "check_confusion_pair",
    "check_scale_zero_point",
    "check_decoded_value",
    "check_codes",
    "check_accumulator",
    "check_clipping_crossover",
    "check_packed_int4_bytes",
    "check_dynamic_quantize_prediction",
    "check_max_abs_drift",
    "check_conv_kernel_swap",
    "check_cosine_pass_share",
    "check_float_copy",
    "check_integer_kernels",
    "check_reader",
    "check_saturated_share",
    "check_unprocessed_quantization",
    "check_percentile_beats_minmax",
    "check_memory_estimate",
    "check_most_saturated_tensor",
    "check_failing_variants",
    "check_capstone",
    "check_paired_interval",
    "check_calibration_cause",
    "check_edge_calibration",
    "FAILURE_REASONS",
    "check_float_island_time",
    "check_fused_s8s8",
    "check_bootstrap_interval",
    "check_careless_swap",
    "check_intensity",
    "check_nbits_bytes",
    "check_int4_scale",
    "check_a16w8_integer_kernels",
    "check_ship_verdicts",
    "check_pick_without_size_target",
    "check_ship_prediction",
    "check_nanogpt_prediction",
    "check_audit_lessons",
    "check_int8_floor",
    "check_rule_against_perplexity",
    "check_serve_batch",
]
