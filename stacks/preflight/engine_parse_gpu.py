"""Runs INSIDE a parser environment, imported by engine_parse_child.py (stdlib plus the installed
vLLM only): the GPU-dependent check vLLM's CPU platform never fires, asked of vLLM's own code at
the worker's GPU.

The attention backend a worker chose (`--attention-backend`, AttentionConfig.backend) goes
through vLLM's CUDA platform itself: `CudaPlatformBase.get_attn_backend_cls` validates a
selected backend with `backend_class.validate_configuration(device_capability=...,
**attn_selector_config._asdict())` and raises "Selected backend ... is not valid for this
configuration. Reason: [...]" (vllm/platforms/cuda.py:448-464, vLLM 0.31.0). What stands in for
the GPU, and nothing more:
- the device: a subclass of the CUDA platform whose get_device_capability answers the worker's
  compute capability (stacks.catalog.instances), and the CPU platform's answering the same while
  the backends run, since they ask the platform object, not their argument
  (vllm/v1/attention/backends/fa_utils.py get_flash_attn_version /
  flash_attn_supports_kv_cache_dtype);
- CUDA libraries that cannot load without a GPU: cuda.py's import of the custom-op library
  (`vllm._C_stable_libtorch`, it needs libcuda) and FlashAttention's extensions (the ones this
  vLLM wheel ships, _vllm_fa2_C and _vllm_fa3_C; FA4 is its cute/ sources) are registered as
  present, which is what they are on the GPU image;
- the selector config: the one vLLM builds for the model's attention layers
  (vllm/v1/attention/selector.py get_attn_backend), captured at the platform call; its dtype is
  the checkpoint's (as CUDA resolves "auto" on sm80+), not whatever the CPU platform chose.
A backend whose module the parser environment cannot load (FlashInfer's) is not judged: said,
not guessed. Without a selected backend vLLM picks a valid one itself; nothing is checked then.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import sys
import types

_FA_EXTENSIONS = ("_vllm_fa2_C", "_vllm_fa3_C")


def register_fa_extensions() -> None:
    """Let vllm.vllm_flash_attn import on CPU with the extensions the wheel ships."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return
    folder = os.path.join(list(spec.submodule_search_locations)[0], "vllm_flash_attn")
    for ext in _FA_EXTENSIONS:
        name = f"vllm.vllm_flash_attn.{ext}"
        if glob.glob(os.path.join(folder, f"{ext}*.so")) and name not in sys.modules:
            sys.modules[name] = types.ModuleType(name)


class _Captured(LookupError):
    pass


class _CapturePlatform:
    """Stands in for current_platform during one get_attn_backend call: keeps the backend,
    selector config and head count vLLM built, and stops there."""

    def __init__(self, real):
        self.real, self.got = real, None

    def __getattr__(self, name):
        return getattr(self.real, name)

    def get_attn_backend_cls(self, selected_backend, attn_selector_config, num_heads=None):
        self.got = (selected_backend, attn_selector_config, num_heads)
        raise _Captured


def _selection(vllm_config):
    """(selected backend, AttentionSelectorConfig, num_heads) as vLLM builds them for the
    model's decoder attention layers."""
    import vllm.platforms as platforms
    from vllm.config import set_current_vllm_config
    from vllm.v1.attention import selector

    mc, cc = vllm_config.model_config, vllm_config.cache_config
    capture, real = _CapturePlatform(platforms.current_platform), platforms.current_platform
    platforms.current_platform = capture
    selector._cached_get_attn_backend.cache_clear()
    try:
        with set_current_vllm_config(vllm_config), contextlib.suppress(_Captured):
            selector.get_attn_backend(mc.get_head_size(), mc.dtype, cc.cache_dtype,
                                      use_mla=mc.use_mla,
                                      has_sliding_window=mc.get_sliding_window() is not None)
    finally:
        platforms.current_platform = real
        selector._cached_get_attn_backend.cache_clear()
    return capture.got


def _checkpoint_dtype(vllm_config, dtype):
    """The dtype CUDA runs with `--dtype auto`: the checkpoint's fp16/bf16 (the CPU platform
    may have chosen another)."""
    import torch

    if vllm_config.model_config.dtype not in (torch.float16, torch.bfloat16):
        hf = vllm_config.model_config.hf_config
        declared = getattr(hf, "torch_dtype", None) or getattr(hf, "dtype", None)
        declared = getattr(torch, declared, None) if isinstance(declared, str) else declared
        if declared in (torch.float16, torch.bfloat16):
            return declared
    return dtype


def _cuda_platform_at(major: int, minor: int):
    """vLLM's own CUDA platform, answering the worker's compute capability."""
    sys.modules.setdefault("vllm._C_stable_libtorch", types.ModuleType("vllm._C_stable_libtorch"))
    from vllm.platforms.cuda import CudaPlatformBase
    from vllm.platforms.interface import DeviceCapability

    class AtTheWorkersGpu(CudaPlatformBase):
        @classmethod
        def get_device_capability(cls, device_id: int = 0):
            return DeviceCapability(major, minor)

    return AtTheWorkersGpu


@contextlib.contextmanager
def _cpu_platform_at(major: int, minor: int):
    import vllm.platforms as platforms
    from vllm.platforms.interface import DeviceCapability

    cls = type(platforms.current_platform)
    old = cls.__dict__.get("get_device_capability")
    cls.get_device_capability = classmethod(
        lambda c, device_id=0: DeviceCapability(major, minor))
    try:
        yield DeviceCapability(major, minor)
    finally:
        if old is None:
            del cls.get_device_capability
        else:
            cls.get_device_capability = old


def check_attention(vllm_config, gpu: dict) -> tuple[dict | None, str | None]:
    """(a refusal, None), (None, None) when the chosen backend validates or none was chosen, or
    (None, why it could not be checked)."""
    major, minor = gpu["capability"]
    where = f"{gpu['name']} (compute capability {major}.{minor})"
    try:
        register_fa_extensions()
        got = _selection(vllm_config)
        if got is None or got[0] is None:
            return None, None
        backend, config, num_heads = got
        try:
            backend.get_class()
        except (ImportError, OSError) as exc:
            return None, f"{backend.name} does not load here ({type(exc).__name__}: {exc})"
        config = config._replace(dtype=_checkpoint_dtype(vllm_config, config.dtype))
        platform = _cuda_platform_at(major, minor)
        with _cpu_platform_at(major, minor) as capability:
            try:
                platform.get_attn_backend_cls(backend, config, num_heads)
                return None, None
            except ValueError as exc:
                refused = " ".join(str(exc).split())
            valid, invalid = platform.get_valid_backends(
                device_capability=capability, attn_selector_config=config, num_heads=num_heads)
    except Exception as exc:  # noqa: BLE001 - an API this release lacks: said, not guessed
        return None, f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    unloaded = [b.name for b, (_, why) in invalid.items()
                if any(r.startswith(("ImportError", "OSError", "ModuleNotFound")) for r in why)]
    ok = ", ".join(c.backend.name for c in valid) or "none"
    also = f"; not loadable in the parser environment, so not judged: {', '.join(unloaded)}" \
        if unloaded else ""
    return ({"stage": "gpu",
             "message": f"{refused} (on {where}: vllm/platforms/cuda.py:448-464, the selected "
                        "backend's validate_configuration)",
             "fix": (f"choose an attention backend that runs there (serving.kernels."
                     f"attentionBackend; valid for this configuration on {where}: {ok}{also}), "
                     "or change the setting the reason names (serving.kvCacheDtype, "
                     "serving.blockSize)")},
            None)
