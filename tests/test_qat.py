"""course_lib.qat: BatchNorm folding, fake-quantized twins, export; and lesson 06c's two checks.

The end-to-end test is the lesson's claim: a fake quantizer written like lesson 06c's rounds every
weight to the code that ONNX Runtime's `quantize_static` writes into the file.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from course_lib import qat  # noqa: E402
from course_machinery import checks, models  # noqa: E402


def _resnet(seed: int = 0) -> nn.Module:
    """The course's ResNet18 (1-channel stem), random weights and non-trivial BatchNorm statistics."""
    torch.manual_seed(seed)
    model = models.build_resnet18()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    return model.eval()


def int4_scale(w: torch.Tensor) -> torch.Tensor:
    return (2 * w.detach().abs().max().double() / 7).float()


def fake_quant(w: torch.Tensor) -> torch.Tensor:
    scale = int4_scale(w)
    return w + (torch.clamp(torch.round(w / scale), -8, 7) * scale - w).detach()


def test_fold_batchnorm_keeps_the_outputs_and_removes_every_batchnorm():
    model = _resnet()
    x = torch.randn(4, 1, 32, 32)
    folded = qat.fold_batchnorm(model)
    assert not any(isinstance(m, nn.BatchNorm2d) for m in folded.modules())
    assert any(isinstance(m, nn.BatchNorm2d) for m in model.modules()), "the original is left alone"
    with torch.no_grad():
        assert torch.allclose(folded(x), model(x), atol=1e-4, rtol=1e-4)


def test_fold_batchnorm_names_what_it_expected():
    with pytest.raises(TypeError, match="torchvision ResNet"):
        qat.fold_batchnorm(nn.Sequential(nn.Conv2d(1, 2, 3)))


def test_the_twins_compute_with_the_fake_quantized_weights_and_pass_the_gradient_through():
    folded = qat.fold_batchnorm(_resnet())
    student = qat.with_fake_quant(folded, fake_quant)
    assert isinstance(student.layer4[0].conv1, qat.FakeQuantConv2d)
    assert isinstance(student.fc, qat.FakeQuantLinear)
    # The same as the folded model with every weight replaced by its rounded value.
    snapped = qat.without_fake_quant(student)
    with torch.no_grad():
        for m in snapped.modules():
            if isinstance(m, nn.Conv2d | nn.Linear):
                m.weight.copy_(fake_quant(m.weight))
    x = torch.randn(3, 1, 32, 32)
    with torch.no_grad():
        assert torch.allclose(student(x), snapped(x), atol=1e-4, rtol=1e-4)
        assert not torch.allclose(student(x), folded(x), atol=1e-3), "4 bits must change the outputs"
    # Straight-through: the latent weight's gradient is the gradient at the rounded weight.
    student.zero_grad()
    student(x).sum().backward()
    snapped.zero_grad()
    snapped(x).sum().backward()
    assert torch.allclose(student.fc.weight.grad, snapped.fc.weight.grad, atol=1e-4)
    assert torch.allclose(student.conv1.weight.grad, snapped.conv1.weight.grad, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("size", [1, 2, 3])
def test_cutting_the_taps_that_see_only_padding_changes_nothing(size):
    conv = nn.Conv2d(4, 5, 3, stride=1, padding=1)
    twin = qat.with_fake_quant(nn.Sequential(conv), lambda w: w)[0]
    x = torch.randn(2, 4, size, size)
    with torch.no_grad():
        assert torch.allclose(twin(x), conv(x), atol=1e-5)


def test_without_fake_quant_gives_plain_modules_with_the_latent_weights():
    student = qat.with_fake_quant(qat.fold_batchnorm(_resnet()), fake_quant)
    plain = qat.without_fake_quant(student)
    kinds = {type(m) for m in plain.modules()}
    assert qat.FakeQuantConv2d not in kinds and qat.FakeQuantLinear not in kinds
    assert torch.equal(plain.layer2[1].conv2.weight, student.layer2[1].conv2.weight)
    with pytest.raises(TypeError, match="function of a weight tensor"):
        qat.with_fake_quant(plain, "int4")


@pytest.fixture(scope="module")
def int4_files(tmp_path_factory):
    """A folded ResNet18 with fake-quantized weights, exported and quantized as lesson 06c does: one
    file with one scale per tensor, and one with one scale per output channel (its exercises)."""
    import logging

    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from course_lib import calibration

    logging.getLogger().addFilter(lambda record: "pre-process" not in record.getMessage())
    folder = tmp_path_factory.mktemp("qat")
    student = qat.with_fake_quant(qat.fold_batchnorm(_resnet(1)), fake_quant)
    exported = qat.export_onnx(qat.without_fake_quant(student), folder / "qat.onnx")
    pre = folder / "qat.pre.onnx"
    quant_pre_process(exported, pre)
    x = np.random.default_rng(0).normal(size=(20, 1, 32, 32)).astype(np.float32)
    files = {}
    for per_channel in (False, True):
        files[per_channel] = folder / f"qat.int4.{'per_channel' if per_channel else 'per_tensor'}.onnx"
        quantize_static(
            pre,
            files[per_channel],
            calibration.ArrayReader(x, pre, batch_size=10),
            quant_format=QuantFormat.QDQ,
            per_channel=per_channel,
            reduce_range=True,
            weight_type=QuantType.QInt4,
            activation_type=QuantType.QUInt8,
        )
    return SimpleNamespace(student=student, path=files[False], per_channel=files[True], fp32=pre, x=x)


def test_onnx_runtime_writes_the_codes_the_fake_quantizer_trained_with(int4_files):
    import onnx

    student, path = int4_files.student, int4_files.path
    stored = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}
    compared = 0
    for name, w in student.named_parameters():
        if name.endswith("weight") and w.ndim > 1:
            codes = torch.clamp(torch.round(w / int4_scale(w)), -8, 7).detach().numpy()
            np.testing.assert_array_equal(codes, stored[f"{name}_quantized"].astype(np.int8), err_msg=name)
            assert np.float32(stored[f"{name}_scale"]) == int4_scale(w).item(), name
            compared += 1
    assert compared == 21  # 20 convolutions and the classifier


# ---------------------------------------------------------------------------------------------------
# Lesson 06c's exercises: one scale per output channel
# ---------------------------------------------------------------------------------------------------
def per_channel(w: torch.Tensor) -> torch.Tensor:
    """The solution of exercise B: each output channel rounded with its own scale, 2·max|w| / 7."""
    scale = (2 * w.detach().abs().amax(dim=tuple(range(1, w.ndim)), keepdim=True).double() / 7).float()
    return w + (torch.clamp(torch.round(w / scale), -8, 7) * scale - w).detach()


def test_check_per_channel_fake_quant_passes_the_per_channel_twin(int4_files):
    right = checks.check_per_channel_fake_quant(per_channel, int4_files.per_channel, int4_files.fp32)
    assert right and "gradient passes straight through" in right.message


def test_check_per_channel_fake_quant_names_each_slip(int4_files):
    files = (int4_files.per_channel, int4_files.fp32)
    tensor = checks.check_per_channel_fake_quant(fake_quant, *files)  # one scale for the whole tensor
    assert not tensor and "one scale for the whole tensor" in tensor.message

    def codes_only(w):
        scale = (2 * w.detach().abs().amax(dim=tuple(range(1, w.ndim)), keepdim=True).double() / 7).float()
        return torch.clamp(torch.round(w / scale), -8, 7)

    assert "it returns the codes" in checks.check_per_channel_fake_quant(codes_only, *files).message

    def no_gradient(w):
        return per_channel(w).detach() * torch.ones_like(w)  # the right values, the gradient cut

    assert (
        "does not pass straight through" in checks.check_per_channel_fake_quant(no_gradient, *files).message
    )
    assert (
        "pass the function itself"
        in checks.check_per_channel_fake_quant(per_channel(torch.ones(2)), *files).message
    )
    assert (
        "do exercise A first"
        in checks.check_per_channel_fake_quant(per_channel, None, int4_files.fp32).message
    )
    per_tensor_file = checks.check_per_channel_fake_quant(per_channel, int4_files.path, int4_files.fp32)
    assert not per_tensor_file and "do exercise A first" in per_tensor_file.message
    assert "No answer yet" in checks.check_per_channel_fake_quant(None, *files).message


def test_check_per_channel_int4_scores_the_file_and_compares_the_guess(int4_files):
    from course_lib import scoring

    labels = np.arange(len(int4_files.x)) % 10
    test = scoring.TestSet.of(int4_files.fp32, int4_files.x, labels)
    from course_lib.measure import acceptance, logits, parity

    found = parity(test.fp32_logits, logits(int4_files.per_channel, {"input": test.x}), labels)
    actual = "passes" if acceptance(found).passes else "fails"
    other = "fails" if actual == "passes" else "passes"
    right = checks.check_per_channel_int4(actual, int4_files.per_channel, test)
    assert right and "as you predicted" in right.message and "One scale per channel" in right.message
    guessed_wrong = checks.check_per_channel_int4(other, int4_files.per_channel, test)
    assert guessed_wrong and f"not as you predicted ({other})" in guessed_wrong.message
    per_tensor = checks.check_per_channel_int4(actual, int4_files.path, test)
    assert not per_tensor and "pass per_channel=True" in per_tensor.message
    assert (
        "does not exist"
        in checks.check_per_channel_int4(actual, int4_files.fp32.with_name("no.onnx"), test).message
    )
    assert "no INT4 weight" in checks.check_per_channel_int4(actual, int4_files.fp32, test).message
    assert "one word" in checks.check_per_channel_int4("maybe", int4_files.per_channel, test).message
    assert "Write your guess" in checks.check_per_channel_int4(None, int4_files.per_channel, test).message
