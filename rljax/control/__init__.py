"""Stateful controllers with ``init``/``update`` and array state (no recompiles)."""
from rljax.control import _controllers
from rljax.control._controllers import *  # noqa: F401,F403

from rljax.control._stages import with_stages as _with_stages

TECHNIQUES = _with_stages(_controllers.TECHNIQUES)
