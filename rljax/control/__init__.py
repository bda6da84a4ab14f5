"""Stateful controllers with ``init``/``update`` and array state (no recompiles)."""
from rljax.control import _controllers
from rljax.control._controllers import *  # noqa: F401,F403

TECHNIQUES = _controllers.TECHNIQUES
