"""SPEC 10.6: without ``--allow network`` a sandboxed command cannot connect to a unix socket
outside the working directory (with it neither: the filter is the same).

Each attack is a ``bash`` call a prompt-injected model asks for under ``--allow shell``: connect
to a socket the test listens on, as ``docker.sock``, an ssh or gpg agent or a ``screen`` session
would; the check is that the server saw no connection. On dsh 0.2.0 each of them connected:
0.2.0 hid a list of known socket paths, and ``/var/tmp`` or an abstract socket were not on it.
"""

from __future__ import annotations

import shlex
import socket
import threading
import uuid
from collections.abc import Iterator

import pytest

from tests.security._support_sandbox import (  # noqa: F401 (the fixture is found by name)
    Scene,
    needs_bwrap,
    scene_fixture,
)
from tests.support import HANG_GUARD, sandbox_python, wait_until

pytestmark = [pytest.mark.slow, needs_bwrap]

CONNECT = """
import socket, sys
address = sys.argv[1].replace("@", "\\0", 1)  # @name: an abstract socket
try:
    client = socket.socket(socket.AF_UNIX)
    client.connect(address)
    client.sendall(b"hello from the sandbox")
    print("connected")
except OSError as exc:
    print("refused:", exc.strerror)
"""


class UnixServer:
    """A unix socket server in a thread, recording what each connection sent."""

    def __init__(self, address: str) -> None:
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(address.replace("@", "\0", 1))
        self.listener.listen()
        self.address = address
        self.received: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:  # shut down: the test is over
                return
            with connection:
                self.received.append(connection.recv(1024))

    def mark(self) -> None:
        """Connect from the test itself, and wait until that is recorded: connections are
        accepted in order, so every earlier one is recorded by then."""
        with socket.socket(socket.AF_UNIX) as own:
            own.settimeout(HANG_GUARD)
            own.connect(self.address.replace("@", "\0", 1))
            own.sendall(b"the test's own")
        wait_until(lambda: b"the test's own" in self.received, "the test's own connection")

    def close(self) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (Linux)
        self.listener.close()
        self._thread.join(HANG_GUARD)


@pytest.fixture
def agent_socket(scene: Scene) -> Iterator[UnixServer]:
    """A socket outside the working directory, where ``screen`` or an agent keeps one."""
    server = UnixServer(str(scene.base / "agent.sock"))
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def abstract_socket() -> Iterator[UnixServer]:
    """An abstract socket (no file at all): D-Bus and X11 listen on these."""
    server = UnixServer(f"@dsh-test-{uuid.uuid4().hex}")
    try:
        yield server
    finally:
        server.close()


def connect_from_the_sandbox(server: UnixServer, scene: Scene, allow: str) -> str:
    """dsh runs a command that connects to ``server``; its result for the model."""
    command = f"{sandbox_python()} -c {shlex.quote(CONNECT)} {shlex.quote(server.address)}"
    content = scene.content(command, allow=allow)
    server.mark()
    return content


@pytest.mark.parametrize("allow", ["shell", "shell,network"], ids=["no-network", "network"])
def test_connect_to_an_agent_socket_in_var_tmp_is_refused(
    agent_socket: UnixServer, scene: Scene, allow: str
) -> None:
    content = connect_from_the_sandbox(agent_socket, scene, allow)
    assert agent_socket.received == [b"the test's own"]
    assert content.startswith("refused: Address family not supported by protocol\n")


def test_connect_to_an_abstract_socket_with_network_allowed_is_refused(
    abstract_socket: UnixServer, scene: Scene
) -> None:
    # With the network kept, the host's abstract sockets are in reach of a namespace-blind
    # connect(): the filter, not the namespace, stops it.
    content = connect_from_the_sandbox(abstract_socket, scene, "shell,network")
    assert abstract_socket.received == [b"the test's own"]
    assert content.startswith("refused: Address family not supported by protocol\n")
