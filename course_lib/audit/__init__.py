"""Audit a model you bring: the course's method as one call, or `python -m course_lib audit`.

    from course_lib.audit import audit
    result = audit("model.onnx", "samples.npz", labels="labels.npy", batch=(1, 32))

It checks the model and the samples (errors say what was expected, what was found and the fix),
splits the samples into a calibration part and a disjoint evaluation part, pre-processes the model
(`quant_pre_process`), builds the INT8 variants that fit this model and this CPU with ONNX
Runtime's own calls, measures each against fp32 (quality and its interval, file size, peak
memory, speed at each batch size with its interval, the share of compute on integer kernels),
debugs a static variant that fails (`qdq_loss_debug`) and tries it once more with its worst layers
in float, then recommends the fastest variant that passes at the largest batch, or none, saying
why. The report (audit.md, audit.html, audit.json) explains each verdict with a link to the lesson
that teaches it.

    inputs    reading and checking the model, samples and labels; the calibration/evaluation split
    variants  where the work is, which variants fit, building them, qdq_loss_debug
    evaluate  quality (with or without labels), speed, the quality rule
    decide    the decision, a pure function of the measurements
    report    markdown, HTML and JSON
    run       `audit` itself
"""

from .decide import Decision, Measured, decide
from .inputs import AuditError, Split, read_labels, read_model, read_samples, split_samples
from .run import AuditResult, VariantResult, audit

__all__ = [
    "AuditError",
    "AuditResult",
    "Decision",
    "Measured",
    "Split",
    "VariantResult",
    "audit",
    "decide",
    "read_labels",
    "read_model",
    "read_samples",
    "split_samples",
]
