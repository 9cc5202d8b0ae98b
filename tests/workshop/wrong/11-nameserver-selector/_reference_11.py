"""The reference NamesrvSelector, for the known-wrong answers below to change one rule each."""

import importlib.util
from pathlib import Path

_path = Path(__file__).resolve().parents[4] / "lab/workshop/solutions/11-nameserver-selector.py"
_spec = importlib.util.spec_from_file_location("workshop_reference_11", _path)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
Reference = _module.NamesrvSelector
