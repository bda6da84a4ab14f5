"""Stateful controllers with ``init``/``update`` and array state (no recompiles).

``TECHNIQUES`` are the catalog rows, declared in ``rljax.control._controllers`` beside each controller, with the
stage that runs it in the RL loop (``stage=``).
"""
from rljax.control import _controllers
from rljax.control._controllers import *  # noqa: F401,F403

TECHNIQUES = _controllers.TECHNIQUES
