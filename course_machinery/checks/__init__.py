"""Self-checks for the exercises: each compares a learner's answer with one computed here and
says what passed or exactly what differed, with a hint that teaches.

One module per lesson (`lesson00` ... `lesson07`, the checks of that lesson's exercises); every
check is importable from here, so a lesson reads `cl.checks.check_reader(...)` whichever module
holds it.
"""

from .lesson00 import (
    check_classifier,
    check_confident_mistakes,
    check_fp32_file_bytes,
    check_normalised_pixel,
    check_unnormalised_accuracy,
)
from .lesson01 import (
    check_blocked_int4_bytes,
    check_clipping_crossover,
    check_codes,
    check_codes_used,
    check_corrected_accumulator,
    check_fake_quantize,
)
from .lesson02 import (
    check_conv_kernel_swap,
    check_cosine_pass_share,
    check_dynamic_quantize_prediction,
    check_float_copy,
    check_per_channel_drift,
)
from .lesson03 import (
    check_clipping_prediction,
    check_integer_kernels,
    check_memory_estimate,
    check_most_saturated_tensor,
    check_reader,
    check_saturated_share,
    check_unprocessed_quantization,
)
from .lesson04 import (
    FAILURE_REASONS,
    check_capstone,
    check_failing_variants,
    check_unpaired_images,
)
from .lesson04b import check_edge_calibration, check_low_margin_share
from .lesson05 import (
    check_bootstrap_interval,
    check_careless_swap,
    check_float_island_time,
    check_fused_s8s8,
    check_intensity,
)
from .lesson05c import check_batch_one_gain, check_pinned_integer_convs
from .lesson06 import (
    check_activation_share,
    check_asymmetric_decode,
    check_nbits_bytes,
    check_per_channel_fake_quant,
    check_per_channel_int4,
    check_pick_without_size_target,
)
from .lesson07 import (
    check_int8_share,
    check_matmul_ceiling,
    check_rule_against_perplexity,
    check_serve_batch,
    check_speed_rule,
)
from .result import CheckResult

__all__ = [
    "CheckResult",
    "check_normalised_pixel",
    "check_confident_mistakes",
    "check_fp32_file_bytes",
    "check_classifier",
    "check_unnormalised_accuracy",
    "check_fake_quantize",
    "check_codes_used",
    "check_codes",
    "check_clipping_crossover",
    "check_corrected_accumulator",
    "check_blocked_int4_bytes",
    "check_dynamic_quantize_prediction",
    "check_per_channel_drift",
    "check_conv_kernel_swap",
    "check_cosine_pass_share",
    "check_float_copy",
    "check_integer_kernels",
    "check_reader",
    "check_saturated_share",
    "check_unprocessed_quantization",
    "check_clipping_prediction",
    "check_memory_estimate",
    "check_most_saturated_tensor",
    "check_failing_variants",
    "check_capstone",
    "check_unpaired_images",
    "check_low_margin_share",
    "check_edge_calibration",
    "FAILURE_REASONS",
    "check_float_island_time",
    "check_fused_s8s8",
    "check_bootstrap_interval",
    "check_careless_swap",
    "check_intensity",
    "check_pinned_integer_convs",
    "check_batch_one_gain",
    "check_nbits_bytes",
    "check_activation_share",
    "check_pick_without_size_target",
    "check_asymmetric_decode",
    "check_per_channel_int4",
    "check_per_channel_fake_quant",
    "check_matmul_ceiling",
    "check_speed_rule",
    "check_int8_share",
    "check_rule_against_perplexity",
    "check_serve_batch",
]
