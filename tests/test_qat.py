"""course_lib.qat: BatchNorm folding, fake-quantized twins, export; and check_int4_scale.

The end-to-end test is the lesson's claim: a fake quantizer written like lesson 06b's rounds every
weight to the code that ONNX Runtime's `quantize_static` writes into the file.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from course_lib import checks, models, qat  # noqa: E402


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
    """A folded ResNet18 with fake-quantized weights, exported and quantized as lesson 06b does."""
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
    out = folder / "qat.int4.onnx"
    quantize_static(
        pre,
        out,
        calibration.ArrayReader(x, pre, batch_size=10),
        quant_format=QuantFormat.QDQ,
        per_channel=False,
        reduce_range=True,
        weight_type=QuantType.QInt4,
        activation_type=QuantType.QUInt8,
    )
    return student, out


def test_onnx_runtime_writes_the_codes_the_fake_quantizer_trained_with(int4_files):
    import onnx

    student, path = int4_files
    stored = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}
    compared = 0
    for name, w in student.named_parameters():
        if name.endswith("weight") and w.ndim > 1:
            codes = torch.clamp(torch.round(w / int4_scale(w)), -8, 7).detach().numpy()
            np.testing.assert_array_equal(codes, stored[f"{name}_quantized"].astype(np.int8), err_msg=name)
            assert np.float32(stored[f"{name}_scale"]) == int4_scale(w).item(), name
            compared += 1
    assert compared == 21  # 20 convolutions and the classifier


def test_check_int4_scale(int4_files):
    student, path = int4_files
    absmax = student.layer1[0].conv1.weight.detach().abs().max().item()
    name = "layer1.0.conv1.weight"
    right = checks.check_int4_scale(2 * absmax / 7, path, name)
    assert right and "[−4, 3]" in right.message
    assert "without reduce_range" in checks.check_int4_scale(absmax / 7.5, path, name).message
    assert "lesson 01" in checks.check_int4_scale(absmax / 7, path, name).message
    assert not checks.check_int4_scale(absmax, path, name)
    assert not checks.check_int4_scale(None, path, name)
    with pytest.raises(ValueError, match="no scale for a weight named 'conv9.weight'"):
        checks.check_int4_scale(1.0, path, "conv9.weight")
