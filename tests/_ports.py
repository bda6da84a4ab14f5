"""A free local TCP port (the multi-process tests' coordinator and transfer-server addresses)."""
import socket


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]
