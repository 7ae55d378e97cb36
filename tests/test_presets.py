"""Presets: the built-ins carry the facts of compat.md, and every defect in a file is exit 2."""
from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from envcheck.errors import UsageError
from envcheck.paths import Home
from envcheck.envs.presets import available_presets, load_preset_file, parse_requirement, resolve_preset

GOOD = """\
title = "PyTorch, CPU"
description = "torch on the CPU"
kind = "cpu"
framework = "torch"
requires-python = ">=3.10"
packages = ["torch>=2.3", "numpy"]
"""

GPU = """\
title = "PyTorch, CUDA 12.4"
kind = "gpu"
framework = "torch"
requires-python = ">=3.10,<3.14"
packages = ["torch==2.5.1"]

[gpu]
cuda = "12.4"
cudnn = "9.1"
libraries = []
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


# --- built-ins ---------------------------------------------------------------------------

BUILTINS = ["jax-cpu", "jax-cuda12", "pytorch-cpu", "pytorch-cuda11", "pytorch-cuda12", "tensorflow-cpu", "tensorflow-gpu-cuda11-wheels",
            "tensorflow-gpu-cuda11.2", "tensorflow-gpu-cuda12"]


def test_builtins_load(home: Path):
    presets = available_presets(Home(home))
    assert list(presets) == BUILTINS
    assert all(p.origin == "builtin" for p in presets.values())



@pytest.mark.parametrize("name", [n for n in BUILTINS if "cpu" not in n])
def test_each_gpu_preset_says_the_cuda_its_framework_build_was_made_for(home: Path, name: str):
    """[gpu] cuda/cudnn agree with the compat table's build of what the packages install."""
    from envcheck import frameworks
    from envcheck.frameworks.base import major_minor

    preset = resolve_preset(Home(home), name)
    build = frameworks.build_for_requirements(preset.requirements)
    assert build is not None and build.gpu_capable and build.framework == preset.framework
    assert (preset.cuda, preset.cudnn) == (major_minor(build.cuda), major_minor(build.cudnn))


def test_pytorch_cpu_is_the_cpu_build_from_its_upstream_index(home: Path):
    from envcheck import frameworks

    preset = resolve_preset(Home(home), "pytorch-cpu")
    build = frameworks.build_for_requirements(preset.requirements)
    assert (preset.kind, preset.framework, build.gpu_capable, build.cuda) == ("cpu", "torch", False, None)
    assert preset.indexes == ("https://download.pytorch.org/whl/cpu",)
    assert "download.pytorch.org/whl/cpu" in preset.description


def test_the_cuda11_wheels_preset_is_the_cuda11_2_tensorflow_with_its_libraries_from_pip(home: Path):
    wheels = resolve_preset(Home(home), "tensorflow-gpu-cuda11-wheels")
    system = resolve_preset(Home(home), "tensorflow-gpu-cuda11.2")
    assert wheels.libraries == system.libraries and wheels.requires_python == system.requires_python
    assert [str(r) for r in wheels.requirements[:2]] == [str(r) for r in system.requirements]
    assert wheels.wheel_libraries and not system.wheel_libraries
    assert {r.name for r in wheels.requirements if r.name.startswith("nvidia-")} == {
        f"nvidia-{part}-cu11" for part in ("cuda-runtime", "cublas", "cufft", "curand", "cusolver", "cusparse", "cudnn")}


@pytest.mark.parametrize("value", ['"https://download.pytorch.org/whl/cpu"', '["ftp://mirror/simple"]',
                                   '["https://user:token@host/simple"]', '["https://host/simple with space"]'])
def test_a_preset_index_must_be_a_list_of_plain_http_urls(home: Path, tmp_path: Path, value: str):
    path = tmp_path / "p.toml"
    path.write_text(f'title = "x"\nkind = "cpu"\nframework = "torch"\npackages = ["torch"]\nindexes = {value}\n')
    with pytest.raises(UsageError) as info:
        load_preset_file(path)
    assert "'indexes" in str(info.value)


def test_tensorflow_cpu_is_the_current_line(home: Path):
    preset = resolve_preset(Home(home), "tensorflow-cpu")
    assert (preset.kind, preset.framework) == ("cpu", "tensorflow")
    assert preset.packages == ["tensorflow-cpu~=2.21.0"]
    assert preset.cuda is None and preset.cudnn is None and preset.libraries == []
    # TF 2.21 supports Python 3.10-3.13
    assert all(v in preset.requires_python for v in ("3.10.0", "3.13.5"))
    assert not any(v in preset.requires_python for v in ("3.9.18", "3.14.0"))


def test_tensorflow_cuda11_2_facts(home: Path):
    preset = resolve_preset(Home(home), "tensorflow-gpu-cuda11.2")
    assert preset.title == "TensorFlow, CPU and GPU with CUDA 11.2 + cuDNN 8.1"
    assert (preset.kind, preset.cuda, preset.cudnn) == ("gpu", "11.2", "8.1")
    tf = next(Requirement(p) for p in preset.packages if Requirement(p).name == "tensorflow")
    # TF 2.5 ... 2.11 are the CUDA 11.2 builds; the newest in range (the default) is 2.11.x
    assert all(v in tf.specifier for v in ("2.5.0", "2.11.1"))
    assert not any(v in tf.specifier for v in ("2.4.4", "2.12.0"))
    assert "3.10.13" in preset.requires_python and "3.11.0" not in preset.requires_python
    assert {"libcudart.so.11.0", "libcudnn.so.8", "libcusolver.so.11"} <= set(preset.libraries)
    for lib in ("libcublas", "libcufft", "libcurand", "libcusparse"):
        assert any(name.startswith(lib + ".so.") for name in preset.libraries), lib


def test_tensorflow_cuda12_uses_pip_wheels(home: Path):
    preset = resolve_preset(Home(home), "tensorflow-gpu-cuda12")
    req = Requirement(preset.packages[0])
    assert (req.name, req.extras) == ("tensorflow", {"and-cuda"})
    assert "2.21.0" in req.specifier and "2.22.0" not in req.specifier
    assert (preset.kind, preset.cuda, preset.cudnn, preset.libraries) == ("gpu", "12.5", "9.3", [])


# --- bad input: each names the file and the key, or the line -----------------------------

BAD = [
    pytest.param(GOOD + 'pakages = ["x"]\n', ["unknown key 'pakages'", "did you mean 'packages'"], id="unknown-key"),
    pytest.param(GPU.replace("cudnn =", "cudnnn ="), ["unknown key 'gpu.cudnnn'"], id="unknown-gpu-key"),
    pytest.param(GOOD.replace('["torch>=2.3", "numpy"]', '"torch"'),
                 ["'packages' must be a list of strings", "'torch'"], id="packages-not-list"),
    pytest.param(GOOD.replace('"numpy"', "3"), ["'packages' must be a list of strings"], id="packages-item-int"),
    pytest.param(GOOD.replace('kind = "cpu"', 'kind = "tpu"'), ["key 'kind'", "'tpu'"], id="kind-not-cpu-gpu"),
    pytest.param(GOOD.replace('title = "PyTorch, CPU"', "title = 3"), ["key 'title' must be a string"], id="title-int"),
    pytest.param(GOOD.replace('"numpy"', '"numpy>>1"'),
                 ["key 'packages[1]'", "invalid requirement 'numpy>>1'"], id="bad-requirement"),
    pytest.param(GOOD.replace('">=3.10"', '">=three"'),
                 ["key 'requires-python'", "invalid specifier '>=three'"], id="bad-specifier"),
    pytest.param(GOOD.replace('framework = "torch"\n', ""), ["missing key 'framework'"], id="missing-key"),
    pytest.param(GOOD.replace('packages = ["torch>=2.3", "numpy"]', "packages = []"),
                 ["'packages' is empty"], id="no-packages"),
    pytest.param(GOOD + '[gpu]\ncuda = "12.4"\n', ["key 'gpu'", "kind 'cpu'"], id="gpu-table-on-cpu"),
    pytest.param(GPU.replace('cuda = "12.4"\n', ""), ["missing key 'gpu.cuda'"], id="gpu-without-cuda"),
    pytest.param(GPU.replace('"12.4"', '"twelve"'), ["key 'gpu.cuda'", "'twelve'"], id="bad-cuda-version"),
    pytest.param(GOOD.replace('kind = "cpu"', 'kind = "cpu'), ["line 3:", "fix the TOML syntax"], id="toml-syntax"),
]


@pytest.mark.parametrize("text, expected", BAD)
def test_bad_preset_file_is_a_usage_error(tmp_path: Path, text: str, expected: list[str]):
    path = write(tmp_path, "broken", text)
    with pytest.raises(UsageError) as info:
        load_preset_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") or "preset file" in message
    for part in expected:
        assert part in message
    assert info.value.exit_code == 2


def test_missing_preset_file(tmp_path: Path):
    with pytest.raises(UsageError, match="not found"):
        resolve_preset(Home(tmp_path), file=tmp_path / "nope.toml")


def test_unknown_preset_name_lists_the_available_ones(home: Path):
    with pytest.raises(UsageError) as info:
        resolve_preset(Home(home), "tensorflow-tpu")
    message = str(info.value)
    assert "unknown preset 'tensorflow-tpu'" in message
    assert ", ".join(BUILTINS) in message
    assert message.endswith("fix: envcheck presets list")


def test_parse_requirement():
    assert parse_requirement("numpy>=1.24").name == "numpy"
    with pytest.raises(UsageError) as info:
        parse_requirement("numpy>>1")
    assert "invalid requirement 'numpy>>1'" in str(info.value)
    assert "PEP 508" in str(info.value)


# --- user presets and the content hash ---------------------------------------------------

def test_user_preset_is_listed_and_overrides_a_builtin(home: Path):
    write(home / "presets", "torch-cpu", GOOD)
    write(home / "presets", "tensorflow-cpu", GOOD.replace("torch>=2.3", "tensorflow-cpu==2.20.0"))
    presets = available_presets(Home(home))
    assert presets["torch-cpu"].origin == "user"
    assert presets["tensorflow-cpu"].origin == "user"
    assert presets["tensorflow-cpu"].packages[0] == "tensorflow-cpu==2.20.0"
    assert resolve_preset(Home(home), "tensorflow-cpu") == presets["tensorflow-cpu"]
    assert presets["tensorflow-gpu-cuda12"].origin == "builtin"


def test_preset_file_takes_its_name_from_the_stem(tmp_path: Path):
    preset = resolve_preset(Home(tmp_path), file=write(tmp_path, "my-torch", GOOD))
    assert (preset.name, preset.origin, preset.requires_python) == ("my-torch", "file", SpecifierSet(">=3.10"))


def test_content_hash_ignores_formatting_and_tracks_content(tmp_path: Path):
    original = load_preset_file(write(tmp_path / "a", "p", GPU))
    reordered = """\
# the same preset, keys reordered, comments and spacing changed
packages = [ "torch == 2.5.1" ]
framework   = "torch"
[gpu]
libraries = []
cudnn = "9.1"
cuda = '12.4'
"""
    header = 'kind = "gpu"\ntitle = "PyTorch, CUDA 12.4"\nrequires-python = "<3.14, >=3.10"\n'
    same = load_preset_file(write(tmp_path / "b", "p", header + reordered))
    assert same.content_hash == original.content_hash
    changed = load_preset_file(write(tmp_path / "c", "p", GPU.replace("2.5.1", "2.5.0")))
    assert changed.content_hash != original.content_hash
    assert len(original.content_hash) == 64


def test_requirements_are_parsed_once_into_the_preset(tmp_path: Path):
    preset = load_preset_file(write(tmp_path, "p", GOOD))
    assert preset.requirements == (Requirement("torch>=2.3"), Requirement("numpy"))
    assert [str(r) for r in preset.requirements] == preset.packages


# --- limits and names: hostile files cost no memory and reach no output -------------------

@pytest.mark.parametrize("text, needle", [
    (GOOD.replace('"numpy"', ", ".join(['"numpy"'] * 500)), "lists 501 entries (limit 'packages': 500)"),
    (GOOD.replace('"torch on the CPU"', '"' + "x" * 4001 + '"'), "'description' is 4001 characters long (limit 'description': 4000)"),
    (GOOD.replace('"PyTorch, CPU"', '"' + "x" * 201 + '"'), "(limit 'title': 200)"),
    (GOOD.replace('"numpy"', '"numpy' + " " * 1000 + '"'), "'packages[1]' is 1005 characters long (limit 'text': 1000)"),
    (GOOD + "x = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
    (GOOD + "# " + "x" * (1 << 20) + "\n", "(limit 'file bytes')"),
], ids=["packages", "description", "title", "requirement", "depth", "size"])
def test_limits_are_named_when_exceeded(tmp_path: Path, text: str, needle: str):
    with pytest.raises(UsageError) as err:
        load_preset_file(write(tmp_path, "big", text))
    assert needle in err.value.message and err.value.fix


@pytest.mark.parametrize("stem", ["x\nevilpkg==6.6.6\n#", "tab\there", "bell\a", " lead", "x" * 101],
                         ids=["newline", "tab", "bell", "space", "long"])
def test_a_preset_file_name_that_would_reach_outputs_badly_is_refused(tmp_path: Path, stem: str):
    path = tmp_path / f"{stem}.toml"
    path.write_text(GOOD)
    with pytest.raises(UsageError) as err:
        load_preset_file(path)
    assert "name" in err.value.message and err.value.fix


def test_cli_newline_preset_name_and_dev_zero_exit_2_and_create_nothing(cli, home: Path, tmp_path: Path):
    evil = tmp_path / "x\nevilpkg==6.6.6\n#.toml"
    evil.write_text(GOOD)
    for source in (str(evil), "/dev/zero"):
        result = cli("env", "create", "dl", "--preset-file", source)
        assert result.code == 2, result.err
        (line,) = result.err.splitlines()
        assert line.startswith("envcheck: error:") and "; fix:" in line
    assert list(home.iterdir()) == []


# --- CLI ---------------------------------------------------------------------------------

def test_cli_list_json(cli):
    result = cli("presets", "list", "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["schema"] == "envcheck.presets/1"
    by_name = {p["name"]: p for p in data["presets"]}
    assert set(by_name) == set(BUILTINS)
    cpu, cu11 = by_name["tensorflow-cpu"], by_name["tensorflow-gpu-cuda11.2"]
    for key in ("name", "title", "kind", "framework", "requires_python", "packages", "cuda", "cudnn"):
        assert key in cpu
    assert (cpu["kind"], cpu["cuda"], cpu["cudnn"]) == ("cpu", None, None)
    assert (cu11["cuda"], cu11["cudnn"], cu11["requires_python"]) == ("11.2", "8.1", ">=3.7,<3.11")


def test_cli_list_table(cli):
    result = cli("presets", "list")
    assert result.code == 0, result.err
    header, *rows = result.out.splitlines()
    assert header.split() == ["NAME", "KIND", "FRAMEWORK", "PYTHON", "TITLE"]
    assert any(r.split()[:4] == ["tensorflow-gpu-cuda11.2", "gpu", "tensorflow", ">=3.7,<3.11"] for r in rows)


def test_cli_show_json(cli):
    result = cli("presets", "show", "tensorflow-gpu-cuda12", "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["schema"] == "envcheck.preset/1"
    assert data["preset"]["packages"] == ["tensorflow[and-cuda]~=2.21.0"]
    assert data["preset"]["cuda"] == "12.5"


def test_cli_show_preset_file(cli, tmp_path: Path):
    path = write(tmp_path, "mine", GOOD)
    result = cli("presets", "show", "--preset-file", str(path), "--json")
    assert result.code == 0, result.err
    assert result.json()["preset"]["name"] == "mine"


def test_cli_unknown_preset_exits_2(cli):
    result = cli("presets", "show", "nope")
    assert result.code == 2
    assert "unknown preset 'nope'" in result.err and "Traceback" not in result.err
    assert result.out == ""


def test_cli_broken_user_preset_fails_list(cli, home: Path):
    path = write(home / "presets", "broken", GOOD.replace('"numpy"', '"numpy>>1"'))
    for args in (("presets", "list"), ("presets", "list", "--json")):
        result = cli(*args)
        assert result.code == 2
        assert str(path) in result.err and "packages[1]" in result.err
        assert "Traceback" not in result.err


def test_cli_toml_syntax_error_names_line(cli, home: Path):
    write(home / "presets", "broken", GOOD.replace('framework = "torch"', "framework = torch"))
    result = cli("presets", "show", "broken")
    assert result.code == 2
    assert "broken.toml: line 4:" in result.err and "Traceback" not in result.err
