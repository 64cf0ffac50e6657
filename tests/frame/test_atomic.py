"""Atomic writes never change what kind of thing stands at the target path: a link stays a
link, a device a device, a FIFO a FIFO, and a file keeps its permission bits."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from puicl_common.atomic import atomic_output, atomic_write_bytes, atomic_write_text


def leftovers(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if ".tmp-" in name)


def test_a_new_file_gets_the_permissions_of_a_plain_open(tmp_path) -> None:
    atomic_write_text(tmp_path / "sub" / "new.txt", "data")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(tmp_path / "sub" / "new.txt").st_mode) == 0o666 & ~mask
    assert (tmp_path / "sub" / "new.txt").read_text() == "data"


def test_an_existing_file_keeps_its_mode(tmp_path) -> None:
    target = tmp_path / "scores.csv"
    target.write_text("old")
    os.chmod(target, 0o640)
    atomic_write_text(target, "new")
    assert target.read_text() == "new"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert leftovers(tmp_path) == []


def test_a_symlink_is_followed_and_its_target_replaced(tmp_path) -> None:
    (tmp_path / "data").mkdir()
    real = tmp_path / "data" / "real.csv"
    real.write_text("old")
    os.chmod(real, 0o600)
    link = tmp_path / "link.csv"
    link.symlink_to(Path("data") / "real.csv")  # relative, as links usually are
    atomic_write_text(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(Path("data") / "real.csv")
    assert real.read_text() == "new"
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o600
    assert leftovers(tmp_path) == [] and leftovers(tmp_path / "data") == []


def test_a_dangling_symlink_creates_its_target(tmp_path) -> None:
    link = tmp_path / "link.csv"
    link.symlink_to(tmp_path / "later.csv")
    atomic_write_text(link, "new")
    assert link.is_symlink()
    assert (tmp_path / "later.csv").read_text() == "new"


def test_a_symlink_to_dev_null_leaves_dev_null_a_device(tmp_path) -> None:
    link = tmp_path / "discard"
    link.symlink_to("/dev/null")
    atomic_write_text(link, "scores\n")
    assert link.is_symlink()
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert leftovers(tmp_path) == []


def test_a_character_device_is_written_through(tmp_path) -> None:
    """The same as /dev/null (major 1, minor 3) under another name, so that a regression can
    never turn the machine's own /dev/null into a file."""
    null = tmp_path / "null"
    try:
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError) as err:
        pytest.skip(f"cannot create a device node here: {err}")
    atomic_write_bytes(null, b"x" * 100_000)
    with atomic_output(null, suffix=".png") as temporary:
        assert temporary.suffix == ".png"  # writers that infer the format still can
        temporary.write_bytes(b"image")
    assert stat.S_ISCHR(os.stat(null).st_mode)
    assert os.stat(null).st_rdev == os.makedev(1, 3)
    assert leftovers(tmp_path) == []


def test_a_fifo_is_written_through_to_its_reader(tmp_path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    # a reader already waiting (non-blocking, so a writer that never comes reads as end of
    # file instead of hanging the test)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        atomic_write_text(fifo, "row,p_positive\n")
        received = os.read(reader, 1 << 16)
    finally:
        os.close(reader)
    assert received == b"row,p_positive\n"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert leftovers(tmp_path) == []


def test_a_directory_is_refused_and_left_alone(tmp_path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    with pytest.raises(IsADirectoryError):
        atomic_write_text(folder, "data")
    assert folder.is_dir() and leftovers(tmp_path) == []


def test_a_socket_is_refused_in_one_line(tmp_path) -> None:
    where = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(where))
        with pytest.raises(OSError, match="is a socket; refusing to write to it") as caught:
            atomic_write_text(where, "data")
    finally:
        server.close()
    assert "\n" not in str(caught.value)
    assert stat.S_ISSOCK(os.stat(where).st_mode) and leftovers(tmp_path) == []


def test_a_failed_write_leaves_the_file_and_no_temporary(tmp_path) -> None:
    target = tmp_path / "kept.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_output(target) as temporary:
        temporary.write_text("half")
        raise RuntimeError("writer failed")
    assert target.read_text() == "old" and leftovers(tmp_path) == []


@pytest.mark.parametrize("spelling", ["new/../kept.txt", "new/deeper/../../kept.txt",
                                      "kept.txt/../other.txt"])
def test_a_path_up_out_of_a_missing_folder_is_refused_and_creates_nothing(
        tmp_path, monkeypatch, spelling) -> None:
    # the kernel refuses such a path; creating "new" first would let the write reach kept.txt
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kept.txt").write_text("old")
    with pytest.raises(FileNotFoundError, match=r"goes up \(\.\.\) out of") as caught:
        atomic_write_text(spelling, "new")
    assert "\n" not in str(caught.value)
    assert (tmp_path / "kept.txt").read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["kept.txt"]


def test_a_path_up_out_of_an_existing_folder_is_written(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "there").mkdir()
    atomic_write_text("there/../new/file.txt", "data")
    assert (tmp_path / "new" / "file.txt").read_text() == "data"


def test_a_group_that_fails_midway_leaves_none_of_its_files(tmp_path, monkeypatch) -> None:
    from puicl_common.atomic import atomic_write_files

    first, second = tmp_path / "page.html", tmp_path / "figure.png"
    first.write_text("old page")
    real_fsync = os.fsync

    def full_disk(descriptor: int) -> None:
        if os.readlink(f"/proc/self/fd/{descriptor}").startswith(str(tmp_path / ".figure")):
            raise OSError(28, "No space left on device")
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_files({first: b"new page", second: b"figure"})
    assert first.read_text() == "old page" and not second.exists()
    assert leftovers(tmp_path) == []
    monkeypatch.setattr(os, "fsync", real_fsync)
    atomic_write_files({first: b"new page", second: b"figure"})
    assert first.read_bytes() == b"new page" and second.read_bytes() == b"figure"


def test_a_dangling_link_through_a_missing_folder_is_refused(tmp_path, monkeypatch) -> None:
    # the link leads nowhere the kernel can reach; resolved by its spelling it is kept.txt
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kept.txt").write_text("old")
    (tmp_path / "out.txt").symlink_to("new/../kept.txt")
    with pytest.raises(FileNotFoundError, match=r"goes up \(\.\.\) out of new"):
        atomic_write_text("out.txt", "new")
    assert (tmp_path / "kept.txt").read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["kept.txt", "out.txt"]


def test_a_place_that_refuses_files_is_named_by_the_path_asked_for(read_only_place) -> None:
    target = read_only_place / "out.txt"
    with pytest.raises(OSError) as caught:
        atomic_write_text(target, "data")
    assert caught.value.filename == str(target) and ".tmp-" not in str(caught.value)
