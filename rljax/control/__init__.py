"""Stateful controllers with ``init``/``update`` and array state (no recompiles)."""
from rljax.control import _controllers
from rljax.control._controllers import *  # noqa: F401,F403

from rljax._technique import attach_stages as _attach_stages
from rljax.control._stages import STAGES as _STAGES

TECHNIQUES = _attach_stages(_controllers.TECHNIQUES, _STAGES, "control")
