"""Device, dtype, quantization and attention selection, every branch, no GPU needed."""

from __future__ import annotations

import pytest

from nbstream.sources.transformers import devices
from nbstream.sources.transformers.devices import FLASH_ATTENTION, Plan, Probes


def fake(
    *,
    cuda: bool = False,
    capability: tuple[int, int] = (9, 0),
    bf16: bool = True,
    modules: tuple[str, ...] = (),
) -> Probes:
    return Probes(
        cuda_available=lambda: cuda,
        capability=lambda device: capability,
        bf16_supported=lambda device: bf16,
        has_module=lambda name: name in modules,
    )


CPU = fake()
H100 = fake(cuda=True, capability=(9, 0), modules=("flash_attn", "bitsandbytes"))
T4 = fake(cuda=True, capability=(7, 5), bf16=False, modules=("flash_attn",))


# -- device -------------------------------------------------------------------


def test_device_is_cuda_when_available() -> None:
    assert devices.select_device(probes=fake(cuda=True)) == "cuda"


def test_device_is_cpu_without_cuda() -> None:
    assert devices.select_device(probes=CPU) == "cpu"
    assert devices.select_device("auto", probes=CPU) == "cpu"


def test_explicit_device_wins() -> None:
    assert devices.select_device("cpu", probes=fake(cuda=True)) == "cpu"
    assert devices.select_device("cuda:1", probes=fake(cuda=True)) == "cuda:1"
    assert devices.select_device("mps", probes=CPU) == "mps"


def test_explicit_cuda_without_cuda_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="CUDA is not available"):
        devices.select_device("cuda", probes=CPU)


def test_real_probes_answer_on_this_machine() -> None:
    # The default probes must at least run (and agree with torch) here.
    import torch

    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert devices.select_device() == expected


# -- dtype --------------------------------------------------------------------


def test_dtype_cpu_is_float32() -> None:
    assert devices.select_dtype("cpu", probes=CPU) == "float32"


def test_dtype_gpu_with_bf16_is_bfloat16() -> None:
    assert devices.select_dtype("cuda", probes=H100) == "bfloat16"


def test_dtype_gpu_without_bf16_is_float16() -> None:
    assert devices.select_dtype("cuda:0", probes=T4) == "float16"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("bf16", "bfloat16"),
        ("fp16", "float16"),
        ("half", "float16"),
        ("float32", "float32"),
        ("torch.bfloat16", "bfloat16"),
        ("auto", "float32"),
        (None, "float32"),
    ],
)
def test_dtype_override(given: str | None, expected: str) -> None:
    assert devices.select_dtype("cpu", given, probes=CPU) == expected


def test_dtype_override_accepts_torch_dtypes() -> None:
    import torch

    assert devices.select_dtype("cuda", torch.float16, probes=H100) == "float16"


def test_dtype_unknown_is_an_error() -> None:
    with pytest.raises(ValueError, match="float32, float16, bfloat16"):
        devices.select_dtype("cpu", "int4", probes=CPU)


# -- quantization -------------------------------------------------------------


def test_no_quantization_by_default() -> None:
    assert devices.select_quantization(probes=CPU) is None


def test_quantization_4bit_and_8bit() -> None:
    probes = fake(modules=("bitsandbytes",))
    assert devices.select_quantization(load_in_4bit=True, probes=probes) == "4bit"
    assert devices.select_quantization(load_in_8bit=True, probes=probes) == "8bit"


def test_quantization_both_is_an_error() -> None:
    with pytest.raises(ValueError, match="not both"):
        devices.select_quantization(True, True, probes=H100)


@pytest.mark.parametrize("flag", ["load_in_4bit", "load_in_8bit"])
def test_quantization_without_bitsandbytes_names_the_package(flag: str) -> None:
    with pytest.raises(ImportError, match="pip install bitsandbytes") as info:
        devices.select_quantization(**{flag: True}, probes=CPU)
    assert info.value.name == "bitsandbytes"
    assert flag in str(info.value)


@pytest.mark.transformers  # imports transformers and torch
def test_quantization_config_is_a_bitsandbytes_config() -> None:
    from transformers import BitsAndBytesConfig

    four = Plan("cuda", "bfloat16", "sdpa", quantization="4bit").quantization_config()
    assert isinstance(four, BitsAndBytesConfig)
    assert four.load_in_4bit and four.bnb_4bit_quant_type == "nf4"
    import torch

    assert four.bnb_4bit_compute_dtype == torch.bfloat16
    eight = Plan("cuda", "float16", "sdpa", quantization="8bit").quantization_config()
    assert isinstance(eight, BitsAndBytesConfig) and eight.load_in_8bit
    assert Plan("cpu", "float32", "sdpa").quantization_config() is None


# -- attention ----------------------------------------------------------------


def test_attention_auto_picks_flash_on_ampere_or_newer_with_flash_attn() -> None:
    attn, _ = devices.select_attention("cuda", "bfloat16", "auto", probes=H100)
    assert attn == FLASH_ATTENTION
    ampere = fake(cuda=True, capability=(8, 0), modules=("flash_attn",))
    assert devices.select_attention("cuda", "float16", probes=ampere)[0] == FLASH_ATTENTION


@pytest.mark.parametrize(
    ("device", "dtype", "probes", "why"),
    [
        ("cpu", "float32", CPU, "CUDA GPU"),
        ("cuda", "bfloat16", fake(cuda=True), "flash-attn package"),
        ("cuda", "float16", T4, "compute capability 8.0"),
        ("cuda", "float32", H100, "float16 or bfloat16"),
    ],
)
def test_attention_auto_falls_back_to_sdpa(
    device: str, dtype: str, probes: Probes, why: str
) -> None:
    attn, reason = devices.select_attention(device, dtype, "auto", probes=probes)
    assert attn == "sdpa"
    assert why in reason


def test_attention_none_means_auto() -> None:
    assert devices.select_attention("cpu", "float32", None, probes=CPU)[0] == "sdpa"


def test_attention_explicit_flash_without_package_names_flash_attn() -> None:
    with pytest.raises(ImportError, match="pip install flash-attn") as info:
        devices.select_attention("cuda", "bfloat16", FLASH_ATTENTION, probes=fake(cuda=True))
    assert info.value.name == "flash_attn"


@pytest.mark.parametrize(
    ("device", "dtype", "probes", "why"),
    [
        ("cpu", "float32", fake(modules=("flash_attn",)), "CUDA GPU"),
        ("cuda", "float16", T4, "7.5"),
        ("cuda", "float32", H100, "float16 or bfloat16"),
    ],
)
def test_attention_explicit_flash_where_it_cannot_run_is_an_error(
    device: str, dtype: str, probes: Probes, why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        devices.select_attention(device, dtype, FLASH_ATTENTION, probes=probes)


@pytest.mark.parametrize("name", ["sdpa", "eager", "flex_attention"])
def test_attention_other_explicit_choices_pass_through(name: str) -> None:
    assert devices.select_attention("cpu", "float32", name, probes=CPU) == (name, "as requested")


# -- plan ---------------------------------------------------------------------


def test_plan_on_cpu() -> None:
    chosen = devices.plan(probes=CPU)
    assert (chosen.device, chosen.dtype, chosen.attn_implementation, chosen.quantization) == (
        "cpu",
        "float32",
        "sdpa",
        None,
    )
    import torch

    kwargs = chosen.from_pretrained_kwargs()
    assert kwargs == {
        "dtype": torch.float32,
        "attn_implementation": "sdpa",
        "local_files_only": True,
    }


def test_plan_on_a_big_gpu_with_everything() -> None:
    chosen = devices.plan(load_in_4bit=True, probes=H100)
    assert (chosen.device, chosen.dtype, chosen.attn_implementation, chosen.quantization) == (
        "cuda",
        "bfloat16",
        FLASH_ATTENTION,
        "4bit",
    )
    kwargs = chosen.from_pretrained_kwargs()
    assert kwargs["device_map"] == {"": "cuda"}
    assert kwargs["quantization_config"].load_in_4bit
    assert kwargs["local_files_only"] is True


def test_plan_on_an_old_gpu() -> None:
    chosen = devices.plan(probes=T4)
    assert (chosen.dtype, chosen.attn_implementation) == ("float16", "sdpa")
    assert any("7.5" in reason for reason in chosen.reasons)


def test_plan_overrides() -> None:
    chosen = devices.plan(device="cpu", dtype="bf16", attn_implementation="eager", probes=H100)
    assert (chosen.device, chosen.dtype, chosen.attn_implementation) == ("cpu", "bfloat16", "eager")


def test_plans_compare_without_reasons() -> None:
    assert Plan("cpu", "float32", "sdpa", reasons=("a",)) == Plan("cpu", "float32", "sdpa")
    assert hash(Plan("cpu", "float32", "sdpa", reasons=("a",))) == hash(
        Plan("cpu", "float32", "sdpa")
    )


def test_bitsandbytes_and_flash_attn_probe_reads_the_environment() -> None:
    # find_spec-based: answers without importing, True for something installed.
    probes = Probes()
    assert probes.has_module("torch")
    assert not probes.has_module("nbstream_no_such_package")
