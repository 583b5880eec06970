"""Which sudo steps a local desktop's rootless sudo carries out (`rootless_sudo`),
read as the desktop's script would run them, on OSWorld's own commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from cua_rl.tasks.rootless_sudo import host_has_package, rootless_problem

HOST = {"jq", "unzip", "sysstat", "xsel"}.__contains__


@pytest.mark.parametrize(
    "command",
    [
        "echo {CLIENT_PASSWORD} | sudo -S apt update -y && "
        "echo {CLIENT_PASSWORD} | sudo -S apt install jq -y",
        "echo {CLIENT_PASSWORD} | sudo -S apt-get update -y && echo {CLIENT_PASSWORD} | sudo -S "
        "apt-get install unzip -y && unzip /home/user/Desktop/a.zip -d /home/user/Desktop/",
        "echo {CLIENT_PASSWORD} | sudo -S apt install xsel && xsel -bc",
        "echo {CLIENT_PASSWORD} | sudo -S mkdir ~/Desktop/todo_list_Jan_1",
        "ls ~/Desktop",
    ],
)
def test_commands_the_rootless_sudo_carries_out(command: str) -> None:
    assert rootless_problem(command, HOST) is None


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ("echo {CLIENT_PASSWORD} | sudo -S apt-get install -y expect", "lacks: expect"),
        ("echo {CLIENT_PASSWORD} | sudo -S pip install pysrt", "needs root"),
        ("echo {CLIENT_PASSWORD} | sudo -S su - charles", "needs root"),
        ("echo x | sudo -S mkdir /opt/thing", "needs root"),
        ("echo x | sudo -S mkdir ~root/thing /tmpfoo", "needs root"),
        ("sudo -u root mkdir ~/x", "cannot read"),
        ("echo x | sudo -S apt remove jq", "needs root"),
    ],
)
def test_commands_that_need_real_root(command: str, said: str) -> None:
    problem = rootless_problem(command, HOST)
    assert problem is not None and said in problem


def test_host_packages_come_from_the_package_database(tmp_path: Path) -> None:
    (tmp_path / "jq.list").write_text("")
    (tmp_path / "libfoo1:amd64.list").write_text("")
    assert host_has_package("jq", tmp_path) and host_has_package("libfoo1", tmp_path)
    assert not host_has_package("sysstat", tmp_path)
    assert not host_has_package("../etc/passwd", tmp_path)
