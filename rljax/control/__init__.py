"""Stateful controllers with ``init``/``update`` and array state (no recompiles).

``TECHNIQUES`` are the catalog rows, declared in ``rljax.control._controllers`` beside each controller, with the
stage that runs it in the RL loop (``stage=``).
"""
from rljax._technique import gather_room as _gather_room
from rljax.control import _controllers
from rljax.control._controllers import *  # noqa: F401,F403

# a module of the room not named here is found by gather_room (its rows follow these, its ``__all__`` joins)
TECHNIQUES = _gather_room(globals(), _controllers.TECHNIQUES)[0]
