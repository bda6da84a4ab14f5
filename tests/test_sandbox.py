"""rljax.sandbox: a fuzz test of hostile snippets, each layer alone against its threat, refusal, the config.

The fuzz test runs every snippet through ``run_python`` with the real layers and checks, for each one, that it
was contained (its hostile action failed, seen from inside *and* from the host), that nothing it started is
still running, and that the next call works (every snippet first prints ``START``; a last call follows). It
prints ``sandbox fuzz: N snippets tried, N contained``. The layer tests apply one layer at a time
(``_namespaces``, ``_landlock``, ``_seccomp``, ``_limits`` in a plain subprocess) with a positive control, so a
broken layer fails its own test even where another layer would have stopped the snippet.
Tests skip, naming the layer and the kernel's reason, where the host lacks a layer.
"""
import dataclasses
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid

import pytest

from rljax import sandbox
from rljax.sandbox import SandboxConfig, SandboxUnavailable, run_python

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux only")

_SANDBOX_DIR = os.path.dirname(sandbox.__file__)
_REPO = os.path.dirname(os.path.dirname(_SANDBOX_DIR))
# Tight limits: the whole fuzz test runs in a few seconds.
_CFG = SandboxConfig(wall_time_s=3.0, cpu_time_s=1, memory_bytes=256 << 20, output_bytes=4096, max_tasks=16,
                     file_size_bytes=1 << 20, disk_bytes=8 << 20, disk_files=64, site_packages=False)
_GRACE = 2.5  # the runner's grace after a kill, plus slack for a loaded 2-core machine


def _missing(layers, names=sandbox.REQUIRED_LAYERS):
  return {k: layers.get(k, "not reported") for k in names if layers.get(k, "not reported")}


@pytest.fixture(scope="module")
def layers():
  got = sandbox.probe()
  missing = _missing(got)
  if missing:
    pytest.skip(f"this host lacks sandbox layers (the sandbox refuses here): {missing}")
  return got


@pytest.fixture
def listener():
  """A TCP listener on the host's loopback; yields (port, accepted()): how many connections came (accepts them)."""
  srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
  srv.bind(("127.0.0.1", 0))
  srv.listen(8)
  srv.setblocking(False)

  def accepted(wait_s=0.2):
    n = 0
    while select.select([srv], [], [], wait_s)[0]:
      srv.accept()[0].close()
      n += 1
    return n

  yield srv.getsockname()[1], accepted
  srv.close()


def _leftovers():
  """Host processes still running for a sandbox directory that its runner has already removed: leaked from a
  finished run (the fork bomb's children, a stuck launcher). The directory is the launcher's working directory
  or, inside the sandbox (whose tmpfs hides the path from the host's view), the code's ``TMPDIR``. A run in
  progress elsewhere (another test worker) still has its directory, so it is not counted."""
  prefix = os.path.join(tempfile.gettempdir(), "rljax-sandbox-")
  out = []
  for p in os.listdir("/proc"):
    if not p.isdigit():
      continue
    dirs = []
    try:
      dirs.append(os.readlink(f"/proc/{p}/cwd").split(" (deleted)")[0])
      with open(f"/proc/{p}/environ", "rb") as f:
        dirs += [v.decode(errors="replace")[7:] for v in f.read().split(b"\0") if v.startswith(b"TMPDIR=")]
    except OSError:
      pass
    if any(d.startswith(prefix) and not os.path.isdir(d) for d in dirs):
      out.append(int(p))
  return out


def _snippets(ctx):
  """(name, code, config, contained(result) -> bool). Snippets print ESCAPED when their hostile action works."""
  cfg = _CFG
  return [
      ("fork_bomb", """
        import os
        for _ in range(100000):
          try:
            os.fork()
          except OSError as e:
            print("refused", e.errno); break
        """, cfg, lambda r: "refused 1" in r.stdout),
      ("subprocess", """
        import subprocess
        try:
          subprocess.run(["/bin/sh", "-c", "echo ESCAPED"]); print("ESCAPED-run")
        except OSError:
          print("refused")
        """, cfg, lambda r: "refused" in r.stdout),
      ("thread_bomb", """
        import threading, time
        n = 0
        try:
          while n < 100000:
            threading.Thread(target=time.sleep, args=(30,), daemon=True).start(); n += 1
        except (RuntimeError, MemoryError) as e:
          print("stopped at", n, flush=True)
        import os; os._exit(0)
        """, cfg, lambda r: "stopped at" in r.stdout),
      ("infinite_loop", "while True: pass", dataclasses.replace(cfg, wall_time_s=30.0),  # RLIMIT_CPU stops it
       lambda r: r.signal == signal.SIGXCPU and r.limits_hit == ("cpu_time",) and not r.timed_out),
      ("sleep_forever", "import time; time.sleep(1000)", dataclasses.replace(cfg, wall_time_s=1.0),
       lambda r: r.timed_out and r.limits_hit == ("wall_time",) and r.duration_s < 1.0 + _GRACE),
      ("alloc_10gb", "b = bytearray(10 * 2**30); print('ESCAPED', len(b))", cfg,
       lambda r: "MemoryError" in r.stderr),
      ("write_outside_tmp", f"""
        for path in {ctx['markers']!r}:
          try:
            open(path, "w").write("x"); print("ESCAPED", path)
          except OSError:
            pass
        open("inside.txt", "w").write("ok"); print("inside", open("inside.txt").read())
        """, cfg, lambda r: "inside ok" in r.stdout and not any(os.path.exists(p) for p in ctx["markers"])),
      ("read_files_outside", f"""
        import os
        for path in ("/etc/shadow", {ctx['secret']!r}, "/proc/self/environ", "/proc/1/environ",
                     "/proc/{ctx['pytest_pid']}/environ", os.path.expanduser("~root/.bash_history")):
          try:
            print("ESCAPED", path, open(path, "rb").read()[:20])
          except OSError:
            pass
        for d in ({ctx['outside_dir']!r}, "/", "/proc", "/etc", "/dev/shm"):
          try:
            print("ESCAPED listed", d, os.listdir(d)[:3])
          except OSError:
            pass
        """, cfg, lambda r: ctx["secret_text"] not in r.stdout),
      ("links_to_outside", f"""
        import os
        for i, target in enumerate(("/etc/shadow", {ctx['secret']!r})):
          try:
            os.symlink(target, f"s{{i}}"); print("ESCAPED", open(f"s{{i}}").read()[:20])
          except OSError:
            pass
          try:
            os.link(target, f"h{{i}}"); print("ESCAPED", open(f"h{{i}}").read()[:20])
          except OSError:
            pass
        """, cfg, lambda r: True),
      ("loopback_socket", f"""
        import socket
        for fam, addr in ((socket.AF_INET, ("127.0.0.1", {ctx['port']})), (socket.AF_INET6, ("::1", {ctx['port']}))):
          try:
            s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(1); s.connect(addr); print("ESCAPED", addr)
          except OSError as e:
            print("refused", e.errno)
        try:
          u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.sendto(b"x", ("127.0.0.1", {ctx['port']}))
          print("ESCAPED udp")
        except OSError:
          pass
        """, cfg, lambda r: r.stdout.count("refused") == 2 and not ctx["accepted"]()),
      ("network_interfaces", f"""
        import fcntl, socket, struct
        s = socket.socket(socket.AF_UNIX)
        for name in {ctx['host_interfaces']!r}:
          try:
            fcntl.ioctl(s, 0x8933, struct.pack("16sI", name.encode(), 0)); print("ESCAPED sees", name)  # SIOCGIFINDEX
          except OSError:
            pass
        fcntl.ioctl(s, 0x8933, struct.pack("16sI", b"lo", 0)); print("lo only")
        """, cfg, lambda r: "lo only" in r.stdout),
      ("huge_stdout", "import sys\nwhile True: sys.stdout.write('x' * 65536)", cfg,
       lambda r: r.stdout_truncated and len(r.stdout) == cfg.output_bytes and r.limits_hit == ("output",)),
      ("huge_stderr", "import sys\nwhile True: sys.stderr.write('y' * 65536)", cfg,
       lambda r: r.stderr_truncated and len(r.stderr) == cfg.output_bytes and r.limits_hit == ("output",)),
      ("huge_file", """
        try:
          with open("big", "wb") as f:
            for _ in range(100):
              f.write(b"z" * (1 << 20))
          print("ESCAPED")
        except OSError as e:
          print("refused", e.errno)
        """, cfg, lambda r: "refused 27" in r.stdout),  # EFBIG
      ("disk_fill", """
        import os
        n = 0
        try:
          while n < 64:  # 64 MiB at most, should the quota fail
            with open(f"f{n}", "wb") as f:
              f.write(b"z" * (1 << 20))
            n += 1
        except OSError as e:
          print("refused after", n, "MiB", e.errno)
        try:
          for i in range(1000):
            os.mkdir(f"d{i}")
        except OSError as e:
          print("refused after", i, "dirs", e.errno)
        """, cfg, lambda r: "refused after 7 MiB 28" in r.stdout and "dirs 28" in r.stdout),  # ENOSPC
      ("many_files", """
        fs = []
        try:
          while len(fs) < 100000:
            fs.append(open("/dev/null"))
        except OSError as e:
          print("refused at", len(fs), e.errno)
        """, cfg, lambda r: "refused at" in r.stdout and r.stdout.split()[-1] == "24"),  # EMFILE
      ("kill_parent", f"""
        import os, signal
        if (os.getpid(), os.getppid()) != (2, 1):
          print("ESCAPED: not in a fresh PID namespace", os.getpid(), os.getppid())
        try:
          os.kill(os.getppid(), signal.SIGKILL)  # PID 1 of the namespace: refused (Landlock scope) or ignored
        except OSError:
          pass
        for pid in ({ctx['pytest_pid']}, {ctx['pytest_ppid']}):
          try:
            os.kill(pid, 0); print("ESCAPED can signal", pid)
          except OSError:
            pass
        print("alive")
        """, cfg, lambda r: "alive" in r.stdout and r.exit_code == 0),
      ("kill_parent_by_proc_scan", """
        import os
        found = []
        try:
          for p in os.listdir("/proc"):
            if p.isdigit() and int(p) != os.getpid():
              try:
                if b"pytest" in open(f"/proc/{p}/cmdline", "rb").read():
                  found.append(int(p))
              except OSError:
                pass
        except OSError:
          print("no /proc")
        for pid in found:
          try:
            os.kill(pid, 0); print("ESCAPED can signal", pid)
          except OSError:
            pass
        print("alive")
        """, cfg, lambda r: "alive" in r.stdout),
      ("env_secrets", "import os; print(sorted(os.environ.items()))", cfg,
       lambda r: ctx["env_secret"] not in r.stdout and "HOME" in r.stdout),
      ("raise_rlimits", """
        import resource
        for lim in (resource.RLIMIT_CPU, resource.RLIMIT_AS, resource.RLIMIT_NPROC, resource.RLIMIT_NOFILE,
                    resource.RLIMIT_FSIZE):
          try:
            resource.setrlimit(lim, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)); print("ESCAPED", lim)
          except (ValueError, OSError):
            print("refused")
        print(resource.getrlimit(resource.RLIMIT_CPU))
        """, cfg, lambda r: r.stdout.count("refused") == 5 and "(1, 2)" in r.stdout),
      ("nested_namespaces", """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        for flag in (0x10000000, 0x40000000, 0x20000000, 0x00020000):  # NEWUSER, NEWNET, NEWPID, NEWNS
          print("refused" if libc.unshare(flag) != 0 else f"ESCAPED {flag:#x}")
        print("refused" if libc.mount(b"none", b"/", None, 1 << 14 | 1 << 18, None) != 0 else "ESCAPED mount")
        """, cfg, lambda r: r.stdout.count("refused") == 5),
      ("ptrace_and_signals_out", f"""
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        print("refused" if libc.ptrace(16, {ctx['pytest_pid']}, None, None) != 0 else "ESCAPED ptrace")
        params = ctypes.create_string_buffer(120)
        print("refused" if libc.syscall(425, 4, params) < 0 else "ESCAPED io_uring")  # io_uring_setup
        try:
          os.kill(-1, 0); print("signal -1 reaches only the sandbox")
        except OSError:
          print("refused")
        """, cfg, lambda r: r.stdout.count("refused") >= 2),
  ]


def test_fuzz_hostile_snippets(layers, listener, tmp_path, monkeypatch, capsys):
  port, accepted = listener
  secret_text = "top-secret-" + uuid.uuid4().hex
  secret = tmp_path / "secret.txt"
  secret.write_text(secret_text)
  env_secret = "envsecret-" + uuid.uuid4().hex
  monkeypatch.setenv("RLJAX_TEST_API_KEY", env_secret)
  tag = uuid.uuid4().hex
  markers = [str(tmp_path / "written.txt"), os.path.join(tempfile.gettempdir(), f"rljax-escape-{tag}"),
             f"/dev/shm/rljax-escape-{tag}", f"/etc/rljax-escape-{tag}", os.path.expanduser(f"~/rljax-escape-{tag}")]
  ctx = {"port": port, "accepted": accepted, "secret": str(secret), "secret_text": secret_text,
         "outside_dir": str(tmp_path), "env_secret": env_secret, "pytest_pid": os.getpid(),
         "pytest_ppid": os.getppid(), "markers": markers,
         "host_interfaces": [n for _, n in socket.if_nameindex() if n != "lo"]}
  snippets = _snippets(ctx)
  escaped = []
  try:
    _run_snippets(snippets, escaped)
  finally:  # an escape must not leave files behind on the host
    for m in markers:
      if os.path.exists(m):
        os.remove(m)
  assert secret.read_text() == secret_text and sorted(os.listdir(tmp_path)) == ["secret.txt"]
  last = run_python("print(6 * 7)", config=_CFG)
  assert last.stdout == "42\n" and last.ok, last
  with capsys.disabled():
    print(f"\nsandbox fuzz: {len(snippets)} snippets tried, {len(snippets) - len(escaped)} contained")
  assert not escaped, "\n".join(f"{n}: {p}\n  {r}" for n, p, r in escaped)


def _run_snippets(snippets, escaped):
  for name, code, cfg, contained in snippets:
    code = "print('START', flush=True)\n" + textwrap.dedent(code)
    t0 = time.monotonic()
    res = run_python(code, config=cfg)
    took = time.monotonic() - t0
    problems = []
    if not res.stdout.startswith("START"):
      problems.append("the call did not work (no START)")
    if "ESCAPED" in res.stdout:
      problems.append("ESCAPED printed")
    if not contained(res):
      problems.append("its containment check failed")
    if took > cfg.wall_time_s + _GRACE:
      problems.append(f"took {took:.1f} s")
    if _leftovers():
      time.sleep(0.5)  # the kernel tears a PID namespace down asynchronously
      if left := _leftovers():
        problems.append(f"processes left running: {left}")
        for pid in left:
          os.kill(pid, signal.SIGKILL)
    if problems:
      escaped.append((name, problems, res))


def test_results_of_plain_runs(layers, tmp_path):
  allowed = tmp_path / "data.txt"
  allowed.write_text("shared")
  read = f"print(open({str(allowed)!r}).read())"
  assert run_python(read, config=dataclasses.replace(_CFG, extra_read_paths=(str(allowed),))).stdout == "shared\n"
  assert "PermissionError" in run_python(read, config=_CFG).stderr
  res = run_python("import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)", config=_CFG)
  assert (res.stdout, res.stderr, res.exit_code, res.signal, res.timed_out) == ("out\n", "err\n", 3, None, False)
  assert not res.ok and res.limits_hit == () and _missing(res.layers) == {}
  assert set(res.layers) == set(sandbox.REQUIRED_LAYERS) | set(sandbox.OPTIONAL_LAYERS)
  ok = run_python("print('é' * 3)", config=dataclasses.replace(_CFG, site_packages=True))
  assert ok.ok and ok.stdout == "ééé\n"
  cut = run_python("print('a' * 10)", config=dataclasses.replace(_CFG, output_bytes=4))
  assert cut.stdout == "aaaa" and cut.stdout_truncated and not cut.stderr_truncated and cut.limits_hit == ("output",)
  sig = run_python("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", config=_CFG)
  assert sig.exit_code is None and sig.signal == signal.SIGTERM and sig.limits_hit == ()


# ---- each layer alone, against the threat it is there for (a plain subprocess, no other layer) ----

def _layer_script(body: str, timeout: float = 20.0) -> str:
  prelude = f"import sys; sys.path.insert(0, {_SANDBOX_DIR!r})\n"
  out = subprocess.run([sys.executable, "-I", "-S", "-c", prelude + textwrap.dedent(body)], capture_output=True,
                       text=True, timeout=timeout)
  assert out.returncode == 0, out.stderr
  return out.stdout


def _require(layers, *names):
  missing = _missing(layers, names)
  if missing:
    pytest.skip(f"this host lacks {missing}")


def test_network_namespace_alone_cuts_loopback(layers, listener):
  _require(layers, "user_namespace", "network_namespace")
  port, accepted = listener
  out = _layer_script(f"""
    import socket, _namespaces
    def connect():
      s = socket.socket(); s.settimeout(2)
      try:
        s.connect(("127.0.0.1", {port})); return "connected"
      except OSError as e:
        return f"failed {{e.errno}}"
      finally:
        s.close()
    print(connect())  # positive control: the host's loopback is reachable before
    _namespaces.enter_user_namespace(); _namespaces.unshare(_namespaces.CLONE_NEWNET)
    print(connect())
    """)
  assert out.split("\n")[:2] == ["connected", "failed 101"], out  # ENETUNREACH: the new namespace's lo is down
  assert accepted() == 1  # the control's connection only


def test_pid_namespace_alone_hides_host_and_kills_leftovers(layers):
  _require(layers, "user_namespace", "pid_namespace")
  out = _layer_script(f"""
    import os, time, _namespaces
    _namespaces.enter_user_namespace(); _namespaces.unshare(_namespaces.CLONE_NEWPID)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
      os.close(r)
      try:
        os.kill({os.getpid()}, 0); print("host pid visible", flush=True)
      except ProcessLookupError:
        print("host pid invisible", flush=True)
      print("me", os.getpid(), "parent", os.getppid(), flush=True)
      if os.fork() == 0:      # a grandchild that would outlive its parent and holds w open
        time.sleep(30); os._exit(0)
      os._exit(0)             # PID 1 exits: the kernel kills the grandchild, w closes
    os.close(w)
    t = time.monotonic(); os.read(r, 1); os.waitpid(pid, 0)
    print("pipe closed after", round(time.monotonic() - t))
    """)
  assert out.split("\n")[:3] == ["host pid invisible", "me 1 parent 0", "pipe closed after 0"], out


def test_landlock_alone_limits_files_and_tcp(layers, tmp_path, listener):
  _require(layers, "landlock_fs", "landlock_net", "landlock_scope")
  port, accepted = listener
  secret = tmp_path / "secret.txt"
  secret.write_text("s3cret")
  box = tmp_path / "box"
  box.mkdir()
  out = _layer_script(f"""
    import ctypes, os, socket, _landlock
    def attempt(fn):
      try:
        fn(); return "ok"
      except OSError as e:
        return f"denied {{e.errno}}"
    read = lambda: open({str(secret)!r}).read()
    print(attempt(read))  # positive control
    assert ctypes.CDLL(None).prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
    _landlock.restrict_self(read_paths=[sys.base_prefix, sys.prefix], write_paths=[{str(box)!r}])
    print(attempt(read), attempt(lambda: open("/etc/shadow").read()), attempt(lambda: os.listdir("/proc")))
    print(attempt(lambda: open({str(box / 'f')!r}, "w").write("x")),
          attempt(lambda: open({str(tmp_path / 'g')!r}, "w")))
    s = socket.socket(); s.settimeout(2)
    print(attempt(lambda: s.connect(("127.0.0.1", {port}))))
    print(attempt(lambda: os.kill({os.getpid()}, 0)))
    """)
  lines = out.split("\n")
  assert lines[:5] == ["ok", "denied 13 denied 13 denied 13", "ok denied 13", "denied 13", "denied 1"], out
  assert not accepted()


def test_seccomp_alone(layers):
  _require(layers, "seccomp")
  script = """
    import ctypes, os, socket, threading, _seccomp
    def attempt(fn):
      try:
        fn(); return "ok"
      except OSError as e:
        return f"denied {e.errno}"
    def fork():
      pid = os.fork()
      if pid == 0:
        os._exit(0)
      os.waitpid(pid, 0)
    libc = ctypes.CDLL(None, use_errno=True)
    def unshare():
      if libc.unshare(0x10000000) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
    print(attempt(fork), attempt(unshare), attempt(lambda: socket.socket().close()))  # positive control
    assert ctypes.CDLL(None).prctl(38, 1, 0, 0, 0) == 0
    _seccomp.install(allow_fork=ALLOW)
    t = threading.Thread(target=print, args=("thread",)); t.start(); t.join()
    print(attempt(fork), attempt(unshare), attempt(lambda: socket.socket().close()),
          attempt(lambda: socket.socket(socket.AF_UNIX).close()))
    """
  out = _layer_script(script.replace("ALLOW", "False"))
  assert out.split("\n")[:3] == ["ok ok ok", "thread", "denied 1 denied 1 denied 97 ok"], out
  out = _layer_script(script.replace("ALLOW", "True"))
  assert out.split("\n")[1:3] == ["thread", "ok denied 1 denied 97 ok"], out


def test_rlimits_alone():
  out = _layer_script("""
    import resource, _limits
    _limits.apply(cpu_time_s=3, memory_bytes=256 << 20, open_files=16, file_size_bytes=1000, processes=500)
    try:
      b = bytearray(1 << 30); print("allocated")
    except MemoryError:
      print("MemoryError")
    try:
      resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31)); print("raised")
    except ValueError:
      print("not raised")
    print(resource.getrlimit(resource.RLIMIT_CPU), resource.getrlimit(resource.RLIMIT_NOFILE))
    """)
  assert out.split("\n")[:3] == ["MemoryError", "not raised", "(3, 4) (16, 16)"], out


def test_nested_namespaces_forbidden(layers):
  _require(layers, "user_namespace", "nested_namespaces")
  out = _layer_script("""
    import ctypes, _namespaces
    libc = ctypes.CDLL(None, use_errno=True)
    _namespaces.enter_user_namespace()
    _namespaces.forbid_nested_namespaces()
    print(libc.unshare(0x10000000), ctypes.get_errno(), libc.unshare(0x40000000), ctypes.get_errno())
    """)
  assert out.split("\n")[0] == "-1 28 -1 28", out  # ENOSPC: the namespace count limit is 0


# ---- refusal where a layer is missing, and the opt-out ----

def test_refuses_without_user_namespaces_unless_allow_unsafe(layers):
  """A host without unprivileged user namespaces, made for real: the run happens inside a user namespace whose
  ``user.max_user_namespaces`` is 0, so the launcher's ``unshare(CLONE_NEWUSER)`` fails."""
  _require(layers, "user_namespace", "nested_namespaces")
  out = _layer_script(f"""
    import sys, types
    pkg = types.ModuleType("rljax"); pkg.__path__ = [{os.path.join(_REPO, 'rljax')!r}]
    sys.modules["rljax"] = pkg          # rljax.sandbox without the package's __init__ (no JAX import)
    import _namespaces
    _namespaces.enter_user_namespace(); _namespaces.forbid_nested_namespaces()
    from rljax.sandbox import SandboxConfig, SandboxUnavailable, run_python, check
    try:
      run_python("print('ran')"); print("ran without layers")
    except SandboxUnavailable as e:
      print("refused", sorted(e.missing))
      print(str(e).split(":")[0])
    try:
      check(); print("check passed")
    except SandboxUnavailable as e:
      print("check refused", "user_namespace" in str(e))
    res = run_python("print('ran')", config=SandboxConfig(allow_unsafe=True, site_packages=False))
    print(res.stdout.strip(), bool(res.layers["user_namespace"]), res.layers["pid_namespace"])
    """)
  lines = out.split("\n")
  assert lines[0] == "refused ['network_namespace', 'pid_namespace', 'private_tmpfs', 'user_namespace']", out
  assert lines[1] == "the sandbox refuses to run untrusted code", out
  assert lines[2:4] == ["check refused True", "ran True needs the user namespace"], out


def test_allow_fork_needs_an_enforced_process_limit(layers):
  cfg = dataclasses.replace(_CFG, allow_fork=True, max_tasks=8)
  bomb = "import os\nwhile True:\n  try:\n    os.fork()\n  except OSError:\n    pass\n"
  if os.geteuid() == 0:
    with pytest.raises(SandboxUnavailable, match="process_limit: RLIMIT_NPROC is not enforced for host uid 0"):
      run_python(bomb, config=cfg)
    with pytest.raises(SandboxUnavailable, match="process_limit"):
      sandbox.check(cfg)
    assert sandbox.check(_CFG)["process_limit"] == ""
    return
  assert sandbox.check(cfg)["process_limit"] == ""
  res = run_python("import os\nprint(os.fork() > 0 or 0)", config=cfg)  # a fork is allowed
  assert res.ok, res
  res = run_python(bomb, config=dataclasses.replace(cfg, wall_time_s=1.5))
  assert res.timed_out, res
  if _leftovers():
    time.sleep(0.5)  # the kernel tears a PID namespace down asynchronously
    assert not _leftovers()


@pytest.mark.parametrize("field,value,allowed", [
    ("wall_time_s", 0, "seconds in (0, 3600]"), ("cpu_time_s", 0.5, "an int >= 1"),
    ("memory_bytes", 1 << 20, "an int >= 33554432"), ("allow_fork", 1, "True or False"),
    ("extra_read_paths", ["/x"], "a tuple of absolute paths"), ("python", "python3", "None or an absolute path"),
])
def test_config_errors_name_the_field(field, value, allowed):
  with pytest.raises(ValueError, match=rf"SandboxConfig\.{field}=.* is invalid: expected {allowed[:10]}"):
    SandboxConfig(**{field: value})


def test_bad_arguments():
  with pytest.raises(TypeError, match="needs the program's source as str"):
    run_python(b"print(1)")
  with pytest.raises(ValueError, match="extra_read_paths holds '/no/such/path', which does not exist"):
    run_python("pass", config=SandboxConfig(extra_read_paths=("/no/such/path",)))


# ---- rljax.rewards.code_tests: a verifier on top of the sandbox ----

def test_code_tests_reward(layers):
  from rljax.rewards import code_tests  # pylint: disable=import-outside-toplevel
  good = "```python\ndef add(a, b):\n  return a + b\n```"
  cases = [  # (completion, tests, expected reward) -- by hand
      ("Here:\n" + good + "\nDone.", "assert add(2, 3) == 5", 1.0),
      ("```python\ndef add(a, b):\n  return a - b\n```", "assert add(2, 3) == 5", 0.0),  # a failing assert
      ("def add(a, b): return a + b", "assert add(2, 3) == 5", 0.0),  # no fenced block: a parse failure
      ("```python\nimport sys\nsys.exit(0)\n```", "assert add(2, 3) == 5", 0.0),  # exits before the tests
      ("```python\nimport os\ndef add(a, b): os._exit(0)\n```", "assert add(2, 3) == 5", 0.0),
      ("```py\ndef add(a, b):\n  while True: pass\n```", "assert add(2, 3) == 5", 0.0),  # stopped by a limit
      (good + "\n```\ndef add(a, b): return 0\n```", "assert add(2, 3) == 5", 0.0),  # the last block counts
      ("```python\nprint(open('/etc/shadow').read())\n" + good[10:], "assert add(2, 3) == 5", 0.0),
      (12345, "assert add(2, 3) == 5", 0.0),  # not text: a parse failure
      (good, None, 0.0),  # no tests
      (good, ["assert add(1, 1) == 2", "assert add(-1, 1) == 0"], 1.0),
  ]
  cfg = dataclasses.replace(_CFG, wall_time_s=3.0)
  r, info = code_tests([c for c, _, _ in cases], [t for _, t, _ in cases], config=cfg, workers=2,
                       return_info=True)
  assert r.dtype == "float32" and r.tolist() == [e for _, _, e in cases]
  assert info == {"parse_failures": 2, "timeouts": 1, "runs": 8}
  assert code_tests(["def add(a, b): return a + b"], ["assert add(2, 3) == 5"], config=cfg,
                    extract="whole").tolist() == [1.0]


def test_code_tests_bad_input():
  from rljax.rewards import code_tests  # pylint: disable=import-outside-toplevel
  with pytest.raises(ValueError, match="references must have one entry per completion"):
    code_tests(["x"], [])
  with pytest.raises(ValueError, match=r"references\[0\] must be the test code"):
    code_tests(["```python\npass\n```"], [3])
  with pytest.raises(ValueError, match="extract must be one of"):
    code_tests(["x"], ["pass"], extract="last")
  with pytest.raises(ValueError, match="workers must be an int >= 1"):
    code_tests(["x"], ["pass"], workers=0)


def test_code_tests_as_a_recipe_stage(layers):
  """The catalog row: a Reward stage whose tests are each problem's answer (its asserts)."""
  from rljax import recipes  # pylint: disable=import-outside-toplevel
  from rljax.envs._task import Problem  # pylint: disable=import-outside-toplevel
  reward = recipes.stage("code_tests", config=_CFG).fn
  problem = Problem("Write sq(x).", "assert sq(3) == 9\nassert sq(-2) == 4")
  got = reward(["```python\ndef sq(x):\n  return x * x\n```", "```python\ndef sq(x):\n  return 2 * x\n```"],
               [problem, problem])
  assert got.tolist() == [1.0, 0.0]
