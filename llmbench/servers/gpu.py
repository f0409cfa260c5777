"""GPUs: NVIDIA's DCGM exporter page (pure parsing), the local NVIDIA management library
through its Python bindings (``pynvml``, the ``gpu`` extra), and AMD's ``amdsmi`` where it is
installed. Each gives one list of per-GPU readings a sample, named the same whatever the source:

  gpu, uuid, name, driver          which GPU (labels; NVML and amdsmi: asked once)
  util_pct                         busy share of the last sample period (DCGM_FI_DEV_GPU_UTIL)
  fb_used_mib, fb_free_mib         framebuffer memory (DCGM_FI_DEV_FB_USED / _FREE)
  power_w                          power draw (DCGM_FI_DEV_POWER_USAGE)
  energy_mj                        energy since boot or driver load, a counter
                                   (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, in mJ)
  sm_clock_mhz, mem_clock_mhz      clocks (DCGM_FI_DEV_SM_CLOCK / _MEM_CLOCK)
  temp_c                           GPU temperature (DCGM_FI_DEV_GPU_TEMP)
  xid                              the last XID error's code, 0 for none (DCGM_FI_DEV_XID_ERRORS)

The names are DCGM exporter's default counters (etc/default-counters.csv in dcgm-exporter). A
field the GPU does not support is absent, never 0: DCGM's "blank" sentinels (_BLANK_*) are dropped.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from llmbench.servers.prometheus import parse_prometheus

DCGM_FIELDS = {
    "DCGM_FI_DEV_GPU_UTIL": "util_pct",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "mem_copy_util_pct",
    "DCGM_FI_DEV_FB_USED": "fb_used_mib",
    "DCGM_FI_DEV_FB_FREE": "fb_free_mib",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "energy_mj",
    "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz",
    "DCGM_FI_DEV_MEM_CLOCK": "mem_clock_mhz",
    "DCGM_FI_DEV_GPU_TEMP": "temp_c",
    "DCGM_FI_DEV_XID_ERRORS": "xid",
}
# DCGM's blank values (dcgm_structs.h): DCGM_INT32_BLANK 0x7ffffff0, DCGM_FP64_BLANK 2^47,
# DCGM_INT64_BLANK 0x7ffffffffffffff0. Energy (mJ) is 64-bit: a GPU drawing 1 kW for a year
# counts 3e13, far under 2^47.
_BLANK_32 = 2147483632.0
_BLANK_64 = 140737488355328.0


class NotDcgm(ValueError):
    """The page has none of DCGM exporter's GPU fields."""


def _blank(field: str, v: float) -> bool:
    if v != v or v < 0:
        return True
    return v >= (_BLANK_64 if field == "energy_mj" else _BLANK_32)


def extract_dcgm(text: str) -> list[dict[str, Any]]:
    """One DCGM exporter page -> one reading per GPU, in the order of their index. A GPU split
    into MIG instances is one GPU here (its device-level fields, read once); raises NotDcgm
    when the page has no DCGM field at all."""
    m = parse_prometheus(text, DCGM_FIELDS)
    if not m:
        raise NotDcgm("none of DCGM exporter's GPU fields on the page")
    gpus: dict[str, dict[str, Any]] = {}
    for name, field in DCGM_FIELDS.items():
        for labels, v in m.get(name, ()):
            key = labels.get("gpu") or labels.get("UUID") or "0"
            g = gpus.get(key)
            if g is None:
                g = gpus[key] = {"gpu": key}
                if labels.get("UUID"):
                    g["uuid"] = labels["UUID"]
                if labels.get("modelName"):
                    g["name"] = labels["modelName"]
                if labels.get("DCGM_FI_DRIVER_VERSION"):
                    g["driver"] = labels["DCGM_FI_DRIVER_VERSION"]
                if labels.get("Hostname"):
                    g["host"] = labels["Hostname"]
            if field in g or _blank(field, v):
                continue                        # a MIG instance repeats the device's value
            g[field] = int(v) if field in ("xid", "energy_mj") else v
    return [gpus[k] for k in sorted(gpus, key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0, k))]


# -- local libraries (optional; each import is guarded) ---------------------------------------

class GpuUnavailable(Exception):
    """No GPU can be read this way; the message says why (for the run folder's note)."""


class NvmlReader:
    """NVIDIA's management library, through ``pynvml`` (package nvidia-ml-py). Blocking calls:
    the sampler makes them in a thread."""

    via = "nvml"

    def __init__(self) -> None:
        try:
            import pynvml  # type: ignore[import-not-found]
        except ImportError:
            raise GpuUnavailable("pynvml is not installed (pip install 'llmbench[gpu]')") from None
        self.nv = pynvml
        try:
            pynvml.nvmlInit()
        except Exception as exc:                # NVMLError_LibraryNotFound, _DriverNotLoaded...
            raise GpuUnavailable(f"NVML did not start ({_nvml_why(exc)})") from None
        try:
            n = pynvml.nvmlDeviceGetCount()
        except Exception as exc:
            self.close()
            raise GpuUnavailable(f"NVML lists no GPU ({_nvml_why(exc)})") from None
        if n < 1:
            self.close()
            raise GpuUnavailable("NVML found no GPU")
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        self.static: list[dict[str, Any]] = []
        driver = _text(_try(pynvml.nvmlSystemGetDriverVersion))
        for i, h in enumerate(self.handles):
            info = {"gpu": str(i), "name": _text(_try(pynvml.nvmlDeviceGetName, h)),
                    "uuid": _text(_try(pynvml.nvmlDeviceGetUUID, h)), "driver": driver}
            self.static.append({k: v for k, v in info.items() if v})
        self._energy_ok = [True] * n

    def read(self) -> list[dict[str, Any]]:
        nv = self.nv
        out = []
        for i, h in enumerate(self.handles):
            g = dict(self.static[i])
            util = _try(nv.nvmlDeviceGetUtilizationRates, h)
            if util is not None:
                g["util_pct"] = float(util.gpu)
            mem = _try(nv.nvmlDeviceGetMemoryInfo, h)
            if mem is not None:
                g["fb_used_mib"] = mem.used / 2**20
                g["fb_free_mib"] = mem.free / 2**20
            power = _try(nv.nvmlDeviceGetPowerUsage, h)          # mW
            if power is not None:
                g["power_w"] = power / 1000.0
            if self._energy_ok[i]:
                energy = _try(nv.nvmlDeviceGetTotalEnergyConsumption, h)   # mJ (Volta+)
                if energy is None:
                    self._energy_ok[i] = False      # not supported: not asked again
                else:
                    g["energy_mj"] = int(energy)
            for key, fn, which in (("sm_clock_mhz", nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_SM),
                                   ("mem_clock_mhz", nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_MEM),
                                   ("temp_c", nv.nvmlDeviceGetTemperature,
                                    nv.NVML_TEMPERATURE_GPU)):
                v = _try(fn, h, which)
                if v is not None:
                    g[key] = float(v)
            out.append(g)
        return out

    def close(self) -> None:
        with suppress(Exception):
            self.nv.nvmlShutdown()


def _try(fn: Any, *args: Any) -> Any:
    """A library call, None when it fails (NVMLError_NotSupported and kin: the value is absent)."""
    try:
        return fn(*args)
    except Exception:
        return None


def _nvml_why(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__)[:120]


def _text(v: Any) -> str | None:
    if v is None:
        return None
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


class AmdReader:
    """AMD's ``amdsmi`` Python bindings (shipped with ROCm). Blocking, as NVML."""

    via = "amdsmi"

    def __init__(self) -> None:
        try:
            import amdsmi  # type: ignore[import-not-found]
        except ImportError:
            raise GpuUnavailable("amdsmi is not installed (it comes with ROCm)") from None
        self.amd = amdsmi
        try:
            amdsmi.amdsmi_init()
            self.handles = list(amdsmi.amdsmi_get_processor_handles())
        except Exception as exc:
            raise GpuUnavailable(f"amdsmi did not start ({_nvml_why(exc)})") from None
        if not self.handles:
            self.close()
            raise GpuUnavailable("amdsmi found no GPU")
        self.static = []
        for i, h in enumerate(self.handles):
            info: dict[str, Any] = {"gpu": str(i)}
            asic = _try(amdsmi.amdsmi_get_gpu_asic_info, h) or {}
            if asic.get("market_name"):
                info["name"] = str(asic["market_name"])
            drv = _try(amdsmi.amdsmi_get_gpu_driver_info, h) or {}
            if drv.get("driver_version"):
                info["driver"] = str(drv["driver_version"])
            self.static.append(info)

    def read(self) -> list[dict[str, Any]]:
        amd = self.amd
        out = []
        for i, h in enumerate(self.handles):
            g = dict(self.static[i])
            act = _try(amd.amdsmi_get_gpu_activity, h) or {}
            if _num(act.get("gfx_activity")) is not None:
                g["util_pct"] = _num(act["gfx_activity"])
            vram = _try(amd.amdsmi_get_gpu_vram_usage, h) or {}
            used, total = _num(vram.get("vram_used")), _num(vram.get("vram_total"))   # MB
            if used is not None:
                g["fb_used_mib"] = used
                if total is not None:
                    g["fb_free_mib"] = max(total - used, 0.0)
            power = _try(amd.amdsmi_get_power_info, h) or {}
            watts = next((_num(power.get(k)) for k in ("current_socket_power",
                                                       "average_socket_power", "socket_power")
                          if _num(power.get(k)) not in (None, 0.0)), None)
            if watts is not None:
                g["power_w"] = watts
            energy = _try(amd.amdsmi_get_energy_count, h) or {}
            acc = _num(energy.get("energy_accumulator", energy.get("power")))
            res = _num(energy.get("counter_resolution"))              # microjoules per count
            if acc is not None and res:
                g["energy_mj"] = int(acc * res / 1000.0)
            out.append(g)
        return out

    def close(self) -> None:
        with suppress(Exception):
            self.amd.amdsmi_shut_down()


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f else None


def open_local(kind: str) -> Any:
    """A reader for ``nvml``, ``amd`` or ``auto`` (NVML, then amdsmi); raises GpuUnavailable
    with every reason tried."""
    kinds = {"nvml": (NvmlReader,), "amd": (AmdReader,), "auto": (NvmlReader, AmdReader)}[kind]
    why = []
    for cls in kinds:
        try:
            return cls()
        except GpuUnavailable as exc:
            why.append(str(exc))
    raise GpuUnavailable("; ".join(why))
