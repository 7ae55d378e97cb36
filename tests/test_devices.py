"""One grammar for `validate --devices` and `run --gpus`, parsed once into typed devices and
resolved once against the host's GPUs (on Gpu records as the probe builds them)."""
from __future__ import annotations

import pytest

from envcheck.errors import UsageError
from envcheck.host.probe import Gpu, HostState
from envcheck.host.visibility import mark_visible
from envcheck.validation.devices import DEVICES, GPUS, Device, parse, resolve

UUID = "GPU-fa4e0000-0000-0000-0000-00000000000{}"


def host(count: int = 3, cvd: str | None = None) -> HostState:
    gpus = [Gpu(i, uuid=UUID.format(i)) for i in range(count)]
    mark_visible(gpus, cvd)
    return HostState("ok", gpus=gpus, cuda_visible_devices=cvd)


@pytest.mark.parametrize(("spec", "word", "devices"), [
    ("all", "all", ()),
    (" CPU ", "cpu", ()),
    ("gpu", "gpu", ()),
    ("cpu:0,cpu:1", None, (Device("cpu", 0, 0), Device("cpu", 1, 1))),
    ("gpu:0", None, (Device("gpu", 0),)),
    ("0,2", None, (Device("gpu", 0), Device("gpu", 2))),
    ("2, gpu:2,,cpu:0", None, (Device("gpu", 2), Device("cpu", 0, 0))),  # each once, in order
    (UUID.format(1).upper(), None, (Device("gpu", None, uuid=UUID.format(1)),)),
])
def test_the_grammar_for_devices(spec, word, devices):
    selection = parse(spec, DEVICES)
    assert (selection.word, selection.devices, selection.text) == (word, devices, spec)


@pytest.mark.parametrize(("spec", "word", "devices"), [
    ("none", "none", ()),
    ("all", "all", ()),
    ("1,0", None, (Device("gpu", 1), Device("gpu", 0))),
    ("gpu:1", None, (Device("gpu", 1),)),
    (UUID.format(0), None, (Device("gpu", None, uuid=UUID.format(0)),)),
])
def test_the_same_grammar_for_gpus(spec, word, devices):
    selection = parse(spec, GPUS)
    assert (selection.word, selection.devices) == (word, devices)


@pytest.mark.parametrize(("spec", "grammar", "message"), [
    ("tpu:0", DEVICES, "bad device list 'tpu:0'"),
    ("", DEVICES, "bad device list ''"),
    ("gpu:\uff11", DEVICES, "bad device list"),
    ("1" * 5000, GPUS, "bad GPU list"),
    ("GPU-1234", GPUS, "bad GPU list 'GPU-1234'"),  # not a UUID
    ("none", DEVICES, "bad device list 'none': none is not allowed in a device list"),
    ("cpu", GPUS, "bad GPU list 'cpu': cpu is not allowed in a GPU list"),
    ("0,cpu:1", GPUS, "bad GPU list '0,cpu:1': cpu:1 is not allowed in a GPU list"),
])
def test_what_an_option_does_not_allow_is_one_line_saying_what_it_does(spec, grammar, message):
    with pytest.raises(UsageError) as caught:
        parse(spec, grammar)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert caught.value.fix == grammar.fix


def test_resolved_gpus_carry_nvml_index_framework_index_and_uuid():
    """Under CUDA_VISIBLE_DEVICES=2,1 the framework sees GPU 2 as its 0 and GPU 1 as its 1."""
    here = host(cvd="2,1")
    selection = resolve(parse(f"cpu:0,2,{UUID.format(1)}", DEVICES), here)
    assert selection.devices == (Device("cpu", 0, 0), Device("gpu", 2, 0, UUID.format(2)),
                                 Device("gpu", 1, 1, UUID.format(1)))
    assert [d.runner_name for d in selection.devices] == ["cpu:0", "gpu:0", "gpu:1"]
    assert [str(d) for d in selection.devices] == ["cpu:0", "gpu:2", "gpu:1"]
    assert [d.nvml_index for d in selection.devices] == [None, 2, 1]
    assert resolve(selection, None) is selection  # resolved once: no host needed again


def test_a_gpu_named_twice_by_index_and_uuid_is_one_device():
    selection = resolve(parse(f"1,{UUID.format(1)}", GPUS), host())
    assert selection.devices == (Device("gpu", 1, 1, UUID.format(1)),)


@pytest.mark.parametrize(("spec", "grammar", "cvd", "message"), [
    ("5", GPUS, None, "unknown GPU 5: this host's GPUs (NVML indices) are: 0, 1, 2"),
    ("gpu:9", DEVICES, None, "unknown GPU gpu:9: this host's GPUs (NVML indices) are: gpu:0, gpu:1, gpu:2"),
    (UUID.format(7), GPUS, None, f"unknown GPU {UUID.format(7)}"),
    ("0", GPUS, "2", "GPU 0 is hidden by CUDA_VISIBLE_DEVICES='2'"),
    ("gpu:0", DEVICES, "2", "GPU gpu:0 is hidden by CUDA_VISIBLE_DEVICES='2'"),
])
def test_a_gpu_this_host_cant_use_is_a_usage_error_naming_it_as_written(spec, grammar, cvd, message):
    with pytest.raises(UsageError) as caught:
        resolve(parse(spec, grammar), host(cvd=cvd))
    assert caught.value.message.startswith(message), caught.value.message


def test_a_failed_gpu_is_not_usable():
    here = host()
    here.gpus[1].status, here.gpus[1].problem, here.gpus[1].fix = "lost", "fell off the bus", "reboot"
    with pytest.raises(UsageError) as caught:
        resolve(parse("1", GPUS), here)
    assert caught.value.message == "GPU 1 is not usable: fell off the bus" and caught.value.fix == "reboot"
