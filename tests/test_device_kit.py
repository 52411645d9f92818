"""What each GPU shard of docs/GPU.md carries fits the lent device's 64 MiB: the kit built as
scripts/device/prepare.sh builds it (kit.py's archives of the data, minilm_fp16.py's float16 MiniLM, the wheels
packed by kit.py), sized with the repository as prepare.sh sizes it. Offline, the wheels are rebuilt from the
installed distributions of the packages prepare.sh downloads (the same files, less the bytecode pip compiled), and
packed with a faster xz preset than prepare.sh's: an upper bound of what it packs."""

import importlib.metadata
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import MULTI30K, load_script


LIMIT_MIB = 64
# What prepare.sh downloads for the node (constraints.txt's versions; .venv has the same).
WHEEL_PACKAGES = ("transformers", "datasets", "evaluate", "dill", "multiprocess")


def installed_wheel(name, folder):
    """A wheel of the installed distribution `name`, its files stored: those pip unpacked from the wheel."""
    distribution = importlib.metadata.distribution(name)
    path = folder / f"{name}-{distribution.version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as wheel:
        for file in distribution.files:
            if "__pycache__" not in file.parts and not str(file).startswith(".."):
                wheel.write(file.locate(), str(file))
    return path


@pytest.fixture(scope="module")
def kit(tmp_path_factory, glue_dir, minilm_path):
    kit_module = load_script("device/kit")
    kit = tmp_path_factory.mktemp("device")
    downloaded = tmp_path_factory.mktemp("wheels")
    for name in WHEEL_PACKAGES:
        installed_wheel(name, downloaded)
    kit_module.pack_wheels(downloaded, kit / "wheels.tar.xz", preset=3)
    kit_module.pack_glue(glue_dir, kit / "glue.tar.xz")
    kit_module.archive(MULTI30K, kit / "multi30k.tar.xz")
    load_script("device/minilm_fp16").pack(Path(minilm_path), kit / "minilm")
    return kit_module, kit


@pytest.mark.parametrize("shard", ["speed", "translation", "glue"])
def test_every_shard_carries_less_than_the_devices_limit(kit, shard):
    kit_module, folder = kit
    carried = kit_module.shard_paths(shard)
    assert carried and all((folder / path.removeprefix(".device/")).exists() for path in carried), carried
    mib = kit_module.carried_bytes(shard, folder) / 2**20
    print(f"{shard} carries {mib:.1f} MiB")
    assert mib < LIMIT_MIB, f"the {shard} shard carries {mib:.1f} MiB, over the device's {LIMIT_MIB} MiB"


def test_the_archives_unpack_into_what_the_shards_read(kit, tmp_path):
    """Each archive holds one folder of its name: `.device/glue.tar.xz` unpacks into `.device/glue`, as shard.sh
    reads it; the wheels are valid zip files of stored entries."""
    _, folder = kit
    for name in ("wheels", "glue", "multi30k"):
        with tarfile.open(folder / f"{name}.tar.xz") as archive:
            assert {member.name.split("/")[0] for member in archive.getmembers()} == {name}
            archive.extractall(tmp_path, filter="data")
    assert {path.name for path in (tmp_path / "glue").iterdir()} == {"RTE", "MRPC", "SST-2"}
    assert len((tmp_path / "glue" / "SST-2" / "train.tsv").read_text().splitlines()) == 20_001
    for wheel in (tmp_path / "wheels").glob("*.whl"):
        with zipfile.ZipFile(wheel) as entries:
            assert {entry.compress_type for entry in entries.infolist()} == {zipfile.ZIP_STORED}
