"""The progress bar of the SFT and RL loops: tqdm's widget bar in a notebook that can show it, plain text in a
terminal, and none when the output goes to a file or a pipe (a log gets no carriage-return updates)."""
from __future__ import annotations

import importlib.util
import sys

__all__ = ["progress_bar"]


def progress_bar(**kwargs):
  """A ``tqdm`` bar (``kwargs`` as for ``tqdm``).

  ``tqdm.notebook`` inside a Jupyter/Colab kernel (``ipykernel`` loaded) where ``ipywidgets`` is installed;
  the plain text bar everywhere else, and for a disabled bar. Outside a kernel the bar is disabled unless
  stderr (tqdm's stream) is a terminal. Unlike ``tqdm.auto``, a kernel without
  ``ipywidgets`` gets no "IProgress not found" warning, just the text bar.
  """
  notebook = "ipykernel" in sys.modules
  if not notebook and not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty()):
    kwargs["disable"] = True  # nobody watches: a log file or a pipe
  widgets = not kwargs.get("disable") and notebook and importlib.util.find_spec("ipywidgets") is not None
  if widgets:
    from tqdm.notebook import tqdm  # pylint: disable=import-outside-toplevel
  else:
    from tqdm.std import tqdm  # pylint: disable=import-outside-toplevel
  return tqdm(**kwargs)
