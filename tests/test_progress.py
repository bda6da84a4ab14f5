"""The loops' progress bar: plain tqdm (no "IProgress not found" warning) unless a notebook can show widgets."""
import importlib.util
import sys
import types
import warnings

import tqdm.std

from rljax.train._progress import progress_bar


def test_text_bar_outside_a_kernel_and_when_disabled():
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    for kwargs in ({"total": 3, "disable": True}, {"total": 3, "disable": False}):
      bar = progress_bar(**kwargs)
      assert type(bar) is tqdm.std.tqdm  # pylint: disable=unidiomatic-typecheck
      bar.close()


def test_kernel_without_ipywidgets_gets_the_text_bar_without_a_warning(monkeypatch):
  monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
  monkeypatch.setitem(sys.modules, "ipykernel.zmqshell", types.ModuleType("ipykernel.zmqshell"))
  real = importlib.util.find_spec
  monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ipywidgets" else real(name, *a))
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    bar = progress_bar(total=2, disable=False)
  assert type(bar) is tqdm.std.tqdm  # pylint: disable=unidiomatic-typecheck
  bar.close()


def test_kernel_with_ipywidgets_gets_the_widget_bar(monkeypatch):
  monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
  real = importlib.util.find_spec
  monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "ipywidgets" else real(name, *a))
  fake = types.ModuleType("tqdm.notebook")
  fake.tqdm = lambda **kw: ("widget", kw)
  monkeypatch.setitem(sys.modules, "tqdm.notebook", fake)
  assert progress_bar(total=2) == ("widget", {"total": 2})
