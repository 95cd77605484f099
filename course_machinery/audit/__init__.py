"""Audit a model you bring: the course's method as one call, or `python -m course_lib audit`.

    from course_lib import audit  # or course_machinery.audit, where it lives
    result = audit.audit("model.onnx", "samples.npz", labels="labels.npy", batch=(1, 32), serve_batch=1)

It checks the model and the samples (errors say what was expected, what was found and the fix),
splits the samples into a calibration part and a disjoint evaluation part, pre-processes the model
(`quant_pre_process`), builds the INT8 variants that fit this model and this CPU with ONNX
Runtime's own calls (a static variant keeps attention's MatMuls of two activations in float, as
lesson 06b does), measures each against fp32 (quality and its interval, file size, peak memory,
speed at each batch size with its interval, the share of compute on integer kernels), debugs a
static variant that fails (`qdq_loss_debug`) and tries it once more with its worst layers in float,
then recommends the fastest variant that passes and is clearly faster, meaning at least 5 % over
the whole interval of its speed ratio (`decide.MIN_SPEEDUP`), at the batch you serve (`serve_batch`,
`--serve-batch`) or else the largest batch timed; or none, saying why.

The quality rule, in order: your own task metric when you give one (`metric=`, `--metric
module:function`, within `metric_tolerance` of fp32's value; see `evaluate` for how it is called);
else lesson 04's acceptance rule with labels; else the cosine with fp32's outputs, on the first
float output, the ones named (`output=`, `--output NAME`) or every one (`output="all"`), with padded
positions left out where an attention-mask input says which they are. Where OpenVINO is installed
(and not switched off: `openvino=False`, `--runtimes onnxruntime`), the fp32 file and the best static
files also run there, judged by the same rule and timed against ONNX Runtime's fp32, and the audit
recommends a runtime and a file. The report (audit.md, audit.html, audit.json) explains each
verdict with a link to the lesson that teaches it, says which rule decided and at which batch, and
gives the Python calls that rebuild the recommended file from the fp32 model.

    inputs    reading and checking the model, samples and labels; the calibration/evaluation split
    variants  where the work is, which variants fit, each quantizer call as a `Recipe`, qdq_loss_debug
    evaluate  quality (labels, cosine with masks, your metric), speed, the quality rule
    decide    the decision, a pure function of the measurements
    second_runtime  OpenVINO beside ONNX Runtime, and the decision across both
    report    markdown, HTML and JSON
    run       `audit` itself
"""

from .decide import MIN_SPEEDUP, Decision, Measured, decide
from .evaluate import MIN_MEAN_COSINE, MIN_WORST_COSINE, Metric
from .findings import AuditResult, VariantResult
from .inputs import AuditError, Split, read_labels, read_model, read_samples, split_samples
from .run import audit

__all__ = [
    "MIN_MEAN_COSINE",
    "MIN_SPEEDUP",
    "MIN_WORST_COSINE",
    "AuditError",
    "AuditResult",
    "Decision",
    "Measured",
    "Metric",
    "Split",
    "VariantResult",
    "audit",
    "decide",
    "read_labels",
    "read_model",
    "read_samples",
    "split_samples",
]
