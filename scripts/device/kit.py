#!/usr/bin/env python3
"""Packs the files the GPU shards carry into `.device/`, and sizes what each shard carries (docs/GPU.md, "When what
you may copy is limited"); the standard library only, so that it runs before any environment is made.

A lent device takes the repository and what a shard names (`shard.sh SHARD --carry`), 64 MiB in all. Wheels are
zip files deflated file by file: the transformers wheel is 13 MiB as downloaded, 3.5 MiB when its files are stored
uncompressed and the wheels travel in one xz archive, so `wheels.tar.xz` holds the wheels rewritten that way (the
same files, valid wheels pip installs as they are). The data travel as xz archives too; the float16 MiniLM
(`minilm_fp16.py`) travels as it is (xz takes 5 of its 44 MiB, in 20 s).

    python3 scripts/device/kit.py wheels DOWNLOADED .device/wheels.tar.xz   # each wheel stored, then xz
    python3 scripts/device/kit.py glue SHARED/glue .device/glue.tar.xz      # the GLUE files the teaching study reads
    python3 scripts/device/kit.py folder SHARED/mt/multi30k .device/multi30k.tar.xz
    python3 scripts/device/kit.py size speed translation glue              # what each carries, against LIMIT_MIB
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path


REPOSITORY = Path(__file__).resolve().parents[2]
SHARDS = ("speed", "translation", "glue")
# The first training sentences of SST-2 the teaching study reads (its recipes' largest --max_train_samples).
SST2_TRAIN_LINES = 20_000
# xz's preset: 9 packs the wheels smallest; the test packs with a faster one, an upper bound of the size.
PRESET = 9


def archive(folder, target, preset=PRESET):
    """`target` (.tar.xz) holding `folder` as one top-level folder named after the archive (`glue.tar.xz`: `glue/`)."""
    name = Path(target).name.removesuffix(".tar.xz")
    with tempfile.TemporaryDirectory() as staging:
        shutil.copytree(folder, Path(staging) / name)
        (Path(staging) / name).chmod(0o755)  # a temporary folder's own mode is 0700
        environment = {**os.environ, "XZ_OPT": f"-{preset} -T0"}
        subprocess.run(["tar", "-C", staging, "-cJf", str(Path(target).resolve()), name], check=True, env=environment)


def store_wheel(wheel, target):
    """`wheel` rewritten to `target` with its files stored, not deflated: the same files and RECORD."""
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as stored:
        for entry in source.infolist():
            stored.writestr(entry.filename, source.read(entry), compress_type=zipfile.ZIP_STORED)


def pack_wheels(downloaded, target, preset=PRESET):
    wheels = sorted(Path(downloaded).glob("*.whl"))
    if not wheels:
        raise SystemExit(f"kit.py: error: no .whl file in {downloaded}")
    with tempfile.TemporaryDirectory() as staging:
        for wheel in wheels:
            store_wheel(wheel, Path(staging) / wheel.name)
        archive(staging, target, preset)


def pack_glue(glue, target, preset=PRESET):
    """RTE and MRPC whole, SST-2's dev set and its first `SST2_TRAIN_LINES` training sentences."""
    glue = Path(glue)
    with tempfile.TemporaryDirectory() as staging:
        for task in ("RTE", "MRPC"):
            shutil.copytree(glue / task, Path(staging) / task)
        (Path(staging) / "SST-2").mkdir()
        shutil.copy2(glue / "SST-2" / "dev.tsv", Path(staging) / "SST-2" / "dev.tsv")
        with open(glue / "SST-2" / "train.tsv") as lines:
            head = [line for _, line in zip(range(SST2_TRAIN_LINES + 1), lines, strict=False)]  # the header too
        (Path(staging) / "SST-2" / "train.tsv").write_text("".join(head))
        archive(staging, target, preset)


def tree_bytes(path):
    path = Path(path)
    return path.stat().st_size if path.is_file() else sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def repository_bytes():
    """The repository's tracked files, which a lent device copies with every shard."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPOSITORY, capture_output=True, check=True).stdout
    return sum((REPOSITORY / name).stat().st_size for name in listed.decode().split("\0") if name)


def shard_paths(shard):
    """What `shard.sh SHARD --carry` names, relative to the repository."""
    carried = subprocess.run(
        ["bash", str(REPOSITORY / "scripts/device/shard.sh"), shard, "--carry"], capture_output=True, check=True
    )
    return carried.stdout.decode().split()


def carried_bytes(shard, kit=None):
    """The repository and the shard's files of `kit` (the `.device` folder; another, such as a test's, by its path)."""
    kit = Path(kit) if kit else REPOSITORY / ".device"
    return repository_bytes() + sum(tree_bytes(kit / Path(path).name) for path in shard_paths(shard))


def size(shards, kit=None, limit_mib=None):
    """Prints what each shard carries and stops if one carries more than `limit_mib` (LIMIT_MIB, 64)."""
    limit_mib = limit_mib or int(os.environ.get("LIMIT_MIB", 64))
    over = []
    for shard in shards:
        mib = carried_bytes(shard, kit) / 2**20
        print(f"{shard:<12} carries {mib:5.1f} MiB (limit {limit_mib})")
        if mib >= limit_mib:
            over.append(shard)
    if over:
        raise SystemExit(f"kit.py: error: {', '.join(over)} would carry more than {limit_mib} MiB")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("wheels", "glue", "folder"):
        command = commands.add_parser(name)
        command.add_argument("source", type=Path)
        command.add_argument("target", type=Path)
    commands.add_parser("size").add_argument("shards", nargs="+", choices=SHARDS)
    args = parser.parse_args(argv)
    if args.command == "size":
        size(args.shards)
    else:
        {"wheels": pack_wheels, "glue": pack_glue, "folder": archive}[args.command](args.source, args.target)


if __name__ == "__main__":
    sys.exit(main())
