"""Device names (puicl_common.runtime.resolve_device): a name torch knows but puicl does not run
on, or a GPU this machine lacks, is one line that lists only the names that work here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from puicl_common.runtime import resolve_device


@pytest.fixture
def no_accelerator(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with neither a CUDA GPU nor Apple's GPU, whatever this one has."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    mps = getattr(torch.backends, "mps", None)
    if mps is not None:
        monkeypatch.setattr(mps, "is_available", lambda: False)


@pytest.mark.parametrize("name", ["xla", "hpu", "meta", "ipu", "cpu:1", "tpu", ""])
def test_a_device_puicl_does_not_run_on_is_refused(no_accelerator, name: str) -> None:
    with pytest.raises(ValueError) as refused:
        resolve_device(name, training=False)
    assert str(refused.value) == f"device must be 'auto' or 'cpu', got {name!r}"


@pytest.mark.parametrize(("name", "words"), [
    ("mps", "torch sees no Apple GPU (MPS) here"), ("mps:0", "torch sees no Apple GPU (MPS) here"),
    ("cuda", "torch sees no GPU here"), ("cuda:3", "torch sees no GPU here")])
def test_a_gpu_this_machine_lacks_is_refused_without_listing_it(no_accelerator, name: str,
                                                                words: str) -> None:
    with pytest.raises(ValueError) as refused:
        resolve_device(name, training=False)
    message = str(refused.value)
    assert message.startswith(f"device {name!r} was asked for but {words}")
    assert message.endswith("; use 'auto' or 'cpu'") and "\n" not in message


def test_the_names_that_work_are_listed_where_they_work(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(ValueError) as refused:
        resolve_device("cuda:2")
    assert str(refused.value) == ("device 'cuda:2' was asked for but torch sees 2 GPU(s) here; "
                                  "use 'auto', 'cpu', 'cuda' or 'cuda:N' (N < 2)")
    assert resolve_device("cuda:1") == torch.device("cuda", 1)


def test_puicl_predict_and_load_refuse_a_device_in_one_line(no_accelerator, tmp_path,
                                                            capsys) -> None:
    from puicl_model import PUICLClassifier
    from puicl_model.files.cli import main
    from puicl_model.net.config import ModelConfig
    from puicl_model.net.model import PUICLModel

    rng = np.random.default_rng(0)
    table = pd.DataFrame({"x": rng.normal(size=30), "s": np.r_[np.ones(10), np.zeros(20)]})
    table.to_csv(tmp_path / "t.csv", index=False)
    for name in ("meta", "mps", "xla"):
        assert main(["predict", "--input", str(tmp_path / "t.csv"), "--label-column", "s",
                     "--device", name, "-o", str(tmp_path / "o.csv")]) == 2
        error = capsys.readouterr().err
        assert error.startswith("puicl predict: error: device ") and error.count("\n") == 1
        assert "'mps'" not in error.split("; use")[-1] and not (tmp_path / "o.csv").exists()
    model = PUICLModel(ModelConfig(embed_dim=16, num_layers=1, num_heads=2, ff_dim=16)).eval()
    fitted = PUICLClassifier(weights=model, device="cpu", portfolio="none")
    fitted.fit(table[["x"]], table["s"]).save(tmp_path / "saved")
    for name in ("meta", "hpu"):
        with pytest.raises(ValueError, match=f"device must be 'auto' or 'cpu', got '{name}'"):
            PUICLClassifier.load(tmp_path / "saved", device=name)
