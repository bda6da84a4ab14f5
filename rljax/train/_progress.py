"""The progress bar of the SFT and RL loops: tqdm's widget bar in a notebook that can show it, else plain text."""
from __future__ import annotations

import importlib.util
import sys

__all__ = ["progress_bar"]


def progress_bar(**kwargs):
  """A ``tqdm`` bar (``kwargs`` as for ``tqdm``).

  ``tqdm.notebook`` inside a Jupyter/Colab kernel (``ipykernel`` loaded) where ``ipywidgets`` is installed;
  the plain text bar everywhere else, and for a disabled bar. Unlike ``tqdm.auto``, a kernel without
  ``ipywidgets`` gets no "IProgress not found" warning, just the text bar.
  """
  widgets = (not kwargs.get("disable") and "ipykernel" in sys.modules
             and importlib.util.find_spec("ipywidgets") is not None)
  if widgets:
    from tqdm.notebook import tqdm  # pylint: disable=import-outside-toplevel
  else:
    from tqdm.std import tqdm  # pylint: disable=import-outside-toplevel
  return tqdm(**kwargs)
