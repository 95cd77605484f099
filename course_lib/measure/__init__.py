"""Measuring an fp32 ONNX model against its INT8 variants: facts, latency, memory, parity.

Every lesson compares models with these functions, so that "smaller", "faster" and "as accurate"
always mean the same measurement. One module per idea, each readable top to bottom:

    facts         model_facts: what is in the file (bytes by dtype, op types, quantized nodes);
                  weight_work: the multiply-adds its weights do in one run (arithmetic intensity)
    sessions      make_session (fixed threads), logits (a classifier's scores, in batches)
    latency       measure_latency (median / p10 / p90 of one session), compare_latency (two
                  models timed in turn, with the ratio of their medians and its interval)
    load          other_load: the share of the CPU other processes used while something was timed
    memory        peak_memory, peak_memory_of: peak resident memory, in a fresh process
    parity_check  parity (drift, agreement, who is right, with intervals), paired differences between
                  two variants (signal or noise), acceptance (the acceptance rule)
    tables        markdown_table: a table without pandas

Every name is imported here, so a lesson reads `measure.parity(...)` whichever module holds it.
Results are small dataclasses with `to_dict()`.
"""

from .facts import (
    INTEGER_OPS,
    QUANTIZATION_OPS,
    STRUCTURAL_OPS,
    ModelFacts,
    WeightWork,
    model_facts,
    tensor_bytes,
    weight_work,
)
from .latency import (
    Latency,
    LatencyComparison,
    TorchRunner,
    bootstrap_ratio_interval,
    compare_in_turn,
    compare_latency,
    measure_latency,
)
from .load import OtherLoad, other_load
from .memory import CallMemory, Memory, peak_memory, peak_memory_of
from .parity_check import (
    RELATIVE_DRIFT_EPS,
    Difference,
    Parity,
    Verdict,
    acceptance,
    margin,
    parity,
    softmax,
)
from .sessions import Feed, MakeInputs, logits, make_session, physical_cores
from .tables import markdown_table

__all__ = [
    "INTEGER_OPS",
    "QUANTIZATION_OPS",
    "RELATIVE_DRIFT_EPS",
    "STRUCTURAL_OPS",
    "CallMemory",
    "Difference",
    "Feed",
    "Latency",
    "LatencyComparison",
    "MakeInputs",
    "Memory",
    "OtherLoad",
    "ModelFacts",
    "Parity",
    "TorchRunner",
    "Verdict",
    "WeightWork",
    "acceptance",
    "bootstrap_ratio_interval",
    "compare_in_turn",
    "compare_latency",
    "logits",
    "make_session",
    "margin",
    "markdown_table",
    "other_load",
    "measure_latency",
    "model_facts",
    "parity",
    "peak_memory",
    "peak_memory_of",
    "physical_cores",
    "softmax",
    "tensor_bytes",
    "weight_work",
]
