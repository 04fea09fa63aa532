"""SPEC 10.4 inside the sandbox: the credential locations and ``DSH_HOME`` are empty.

Each attack is a ``bash`` call a prompt-injected model asks for under ``--allow shell`` to read
secrets that would then go to the model (and whoever steers it); the check is that its result
holds none of them. On dsh 0.2.0 each result held the secret.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_core.testing import StubServer
from tests.dsh_stdio.test_agent_pipe import data_of, read_events
from tests.security._support_sandbox import (  # noqa: F401 (fixtures are found by name)
    NEXT,
    base_fixture,
    bash_calls,
    dsh_home_fixture,
    env_fixture,
    marker_fixture,
    needs_bwrap,
    results,
    run_dsh,
    stub_fixture,
    user_home_fixture,
    went_on,
    work_fixture,
)

pytestmark = [pytest.mark.slow, needs_bwrap]

SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- dsh-test-secret"


def plant_secrets(home: Path) -> None:
    """A secret in every kind of credential location: directories and files."""
    for name in (".ssh/id_ed25519", ".aws/credentials", ".config/gh/hosts.yml", ".kube/config"):
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(f"{SECRET} {name}\n")
    for name in (".netrc", ".git-credentials", ".pypirc", ".npmrc", ".pgpass"):
        (home / name).write_text(f"{SECRET} {name}\n")


def read_by_the_model(
    command: str, env: dict[str, str], work: Path, stub: StubServer
) -> tuple[str, str]:
    """dsh runs ``command``; what its result gives the model, and the transcript's call line."""
    stub.enqueue(bash_calls(command))
    result = run_dsh(env, work, "--allow", "shell", stdin=f"look\n{NEXT}\n")
    went_on(result)
    (content,) = [str(r["content"]) for r in results(Path(env["DSH_HOME"]))]
    (line,) = [x for x in result.stderr.split("\n") if x.startswith("dsh: [tool bash]")]
    return content, line


def test_sandboxed_cat_of_ssh_keys_and_tokens_reads_nothing(
    env: dict[str, str], stub: StubServer, work: Path, user_home: Path
) -> None:
    plant_secrets(user_home)
    command = (
        "cat ~/.ssh/id_ed25519 ~/.aws/credentials ~/.config/gh/hosts.yml ~/.kube/config "
        "~/.netrc ~/.git-credentials ~/.pypirc ~/.npmrc ~/.pgpass; "
        'echo "listed: $(ls -A ~/.ssh ~/.aws ~/.kube | grep -v : | tr -d "\\n")"; '
        'echo "found: $(grep -r dsh-test-secret ~ 2>/dev/null | wc -l)"'
    )
    content, line = read_by_the_model(command, env, work, stub)
    assert SECRET not in content
    assert "\nlisted: \n" in content  # the directories are there, and empty
    assert "\nfound: 0\n" in content  # nowhere in the home directory
    note = f"(sandboxed: writes only {work}, reads all but your credentials, no network)"
    assert line.endswith(note)


def test_credentials_reached_through_a_symlink_are_hidden_where_they_lead(
    env: dict[str, str], stub: StubServer, work: Path, user_home: Path
) -> None:
    # Dotfiles kept in a repository, ~/.ssh a link into it: hidden is the place, not the name.
    keys = user_home / "dotfiles" / "ssh"
    keys.mkdir(parents=True)
    (keys / "id_ed25519").write_text(f"{SECRET}\n")
    (user_home / ".ssh").symlink_to(keys)
    command = "cat ~/dotfiles/ssh/id_ed25519 ~/.ssh/id_ed25519"
    content, _ = read_by_the_model(command, env, work, stub)
    assert SECRET not in content
    assert content.count("No such file or directory") == 2


def test_sandboxed_grep_of_dsh_home_finds_no_session(
    env: dict[str, str], stub: StubServer, work: Path, dsh_home: Path
) -> None:
    # DSH_HOME holds every session: what the user said, what tools returned, elsewhere too.
    earlier = "my earlier secret line"
    went_on(run_dsh(env, work, stdin=f"{earlier}\n{NEXT}\n"))
    assert any(earlier in path.read_text() for path in dsh_home.rglob("session.jsonl"))
    command = f'grep -r {earlier.split()[-2]!r} "$DSH_HOME"; ls -A "$DSH_HOME"; echo end'
    stub.enqueue(bash_calls(command))
    went_on(run_dsh(env, work, "--allow", "shell", stdin=f"look\n{NEXT}\n"))
    logs = sorted(dsh_home.rglob("session.jsonl"), key=os.path.getmtime)
    (looked,) = data_of(read_events(logs[-1]), "tool/result")
    assert looked["content"] == "end\n"  # nothing found, nothing listed: an empty directory
