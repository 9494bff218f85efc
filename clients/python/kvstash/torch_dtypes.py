"""torch, imported on first use, and the mapping between its dtypes and kvstash's (docs/PROTOCOL.md §6.3).

torch is optional: importing ``kvstash`` never imports it; the first call that needs it does, and says how to
install it when it is missing (``pip install 'kvstash[torch]'``).
"""

from types import ModuleType
from typing import Any, Optional, Union

from .types import Dtype

_TORCH_DTYPE_NAMES = {Dtype.FLOAT32: "float32", Dtype.FLOAT16: "float16", Dtype.BFLOAT16: "bfloat16",
                      Dtype.FLOAT8_E4M3FN: "float8_e4m3fn", Dtype.FLOAT8_E5M2: "float8_e5m2",
                      Dtype.INT8: "int8", Dtype.UINT8: "uint8"}

_torch: Optional[ModuleType] = None


def torch_module() -> ModuleType:
    """The torch module, imported on first use; ImportError with the install line when it is missing."""
    global _torch
    if _torch is None:
        try:
            import torch
        except ImportError as ex:
            raise ImportError("kvstash tensor calls need torch: pip install 'kvstash[torch]' "
                              "(or pip install torch)") from ex
        _torch = torch
    return _torch


def torch_dtype(dtype: Union[Dtype, int, str]) -> Any:
    """The torch dtype of a kvstash dtype (a Dtype, its wire code or its name)."""
    return getattr(torch_module(), _TORCH_DTYPE_NAMES[Dtype.of(dtype)])


def kvstash_dtype(dtype: Any) -> Dtype:
    """The kvstash Dtype of a torch dtype; ValueError for a dtype the wire has no code for."""
    torch = torch_module()
    for code, name in _TORCH_DTYPE_NAMES.items():
        if getattr(torch, name, None) == dtype:
            return code
    raise ValueError("torch dtype %s has no kvstash dtype (supported: %s)"
                     % (dtype, ", ".join(_TORCH_DTYPE_NAMES.values())))
