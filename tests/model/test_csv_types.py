"""A CSV column's type is decided once, from the whole file: every batch holds the values one
read of the file gives, so ``puicl predict`` writes the bytes of the in-memory call for any
``--batch-rows``; an input that can be read only once, or never ends, is refused."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from puicl_model.files.cli import main
from puicl_model.files.table_io import read_batches, scan_table
from tests.expected_scores import in_memory_scores_csv

# cells a CSV column may hold, grouped so that a batch of one group reads as one pandas type
TOKENS = {"int": ["1", "7"], "negative": ["-3"], "float": ["1.5"], "blank": [""],
          "bool": ["True", "False"], "text": ["maybe"], "zero_one": ["0", "1"],
          "NA": ["NA"], "lower": ["true", "FALSE"], "huge": ["18446744073709551615"]}


def test_every_batch_holds_what_one_read_of_the_file_gives(tmp_path) -> None:
    rng = np.random.default_rng(0)
    for case in range(80):
        groups = rng.choice(list(TOKENS), size=rng.integers(1, 4))
        cells = [str(rng.choice(TOKENS[group])) for group in groups for _ in range(3)]
        if "huge" in groups and {"blank", "NA"} & set(groups):
            continue  # pandas reads those missing cells as text (a quirk of its own), not NaN
        path = tmp_path / f"case{case}.csv"
        path.write_text("g,f\n" + "".join(f"0,{cell}\n" for cell in cells))
        whole = pd.read_csv(path, low_memory=False)
        for rows in (1, 2, 3, 100):
            read = pd.concat(list(read_batches(scan_table(path, batch_rows=rows), rows)))
            pd.testing.assert_frame_equal(read.reset_index(drop=True), whole, check_exact=True,
                                          obj=f"{list(groups)} in batches of {rows}")
            # bools stay bools, never the text 'True' beside them
            assert [type(v) for v in read["f"]] == [type(v) for v in whole["f"]], list(groups)


def flags_table(kind: str, n: int = 400) -> pd.DataFrame:
    """A PU table whose column ``f`` holds True/False in its first 250 rows and, after them,
    ``kind``: "maybe", 1/0, or blanks."""
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n)})
    flags = rng.random(n) < 0.5
    later = {"maybe": np.where(flags, "maybe", "False"), "one_zero": flags.astype(int).astype(str),
             "blanks": np.where(flags, "", "True")}[kind]
    frame["f"] = np.r_[np.where(flags[:250], "True", "False"), later[250:]]
    frame["s"] = (rng.random(n) < 0.25).astype(int)
    frame.loc[frame.s == 1, "a"] += 1.0
    return frame


@pytest.mark.parametrize("kind", ["maybe", "one_zero", "blanks"])
def test_csv_scores_are_the_in_memory_bytes_for_every_batch_size(small_weights, tmp_path,
                                                                  kind) -> None:
    path = tmp_path / "t.csv"
    flags_table(kind).to_csv(path, index=False)
    before = path.read_bytes()
    written = []
    for rows in ("100000", "100", "50", "7"):  # 50: a batch ends where the column changes
        out = tmp_path / f"scores_{rows}.csv"
        assert main(["predict", "--input", str(path), "--label-column", "s", "--weights",
                     str(small_weights), "--no-progress", "--batch-rows", rows,
                     "-o", str(out)]) == 0
        written.append(out.read_bytes())
    # the in-memory call on the file read in one piece, written as puicl predict writes
    expected = in_memory_scores_csv(path, small_weights)
    assert written == [expected] * 4
    assert path.read_bytes() == before


@pytest.fixture
def fifo_fed(tmp_path):
    """A named pipe fed a small CSV by a thread, once, as ``<(cat table.csv)`` is."""
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    text = "x,s\n" + "".join(f"{i / 10},{int(i < 5)}\n" for i in range(20))
    done = threading.Event()

    def feed() -> None:
        while not done.is_set():  # no blocking open: the test may end without a reader
            try:
                handle = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                done.wait(0.05)
                continue
            with contextlib.suppress(OSError):  # the reader went away
                os.write(handle, text.encode())
            os.close(handle)
            return

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    yield fifo
    done.set()
    feeder.join(5)


@pytest.mark.timeout(60)  # before the check, the second open of the pipe waited forever
def test_a_named_pipe_as_input_is_refused_in_one_line(fifo_fed, small_weights, tmp_path,
                                                      capsys) -> None:
    out = tmp_path / "scores.csv"
    assert main(["predict", "--input", str(fifo_fed), "--label-column", "s", "--weights",
                 str(small_weights), "-o", str(out)]) == 2
    error = capsys.readouterr().err
    assert error == (f"puicl predict: error: {fifo_fed} is not a regular file (a named pipe, a "
                     "device or a process substitution?): the table is read more than once; "
                     "save it to a file and give that\n")
    assert not out.exists()


@pytest.mark.parametrize("option", ["--input", "--unlabeled"])
def test_a_device_as_input_is_refused_before_it_is_read(small_weights, tmp_path, capsys,
                                                        option) -> None:
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    pd.DataFrame({"x": [1.0, 2.0, 3.0]}).to_csv(tmp_path / "p.csv", index=False)
    layout = (["--input", "/dev/zero", "--label-column", "s"] if option == "--input" else
              ["--positives", str(tmp_path / "p.csv"), "--unlabeled", "/dev/zero"])
    assert main(["predict", *layout, "--weights", str(small_weights)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("puicl predict: error: /dev/zero is not a regular file")
    assert error.count("\n") == 1
