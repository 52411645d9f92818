#!/usr/bin/env bash
# One group of the GPU commands of docs/GPU.md as one job, for a GPU node that takes only the files
# scripts/device/prepare.sh packs (docs/GPU.md, "When what you may copy is limited"):
#
#   OUT=DIR bash scripts/device/shard.sh SHARD     on the node, with the repository and what `--carry` prints
#   bash scripts/device/shard.sh SHARD --carry     the files of .device/ the shard needs, one a line
#   bash scripts/device/shard.sh SHARD --dry-run   on this machine's CPU, with .venv: the same steps at a toy size
#
# SHARD: speed (dynamo's graph breaks and recompiles logged throughout; the fused mixer's cases whole and the other
# CUDA tests; the benchmark in bf16 at 128 x 32, eager with each kind fused and on the mixer's PyTorch path; compiled
# with reduce-overhead, the fused operator inside the graphs (CASAN_FUSED_MIXER=compiled), then the graphs tracing the
# PyTorch path (the default mode); the profile of an eager training step of BERT, global and deep_global, both paths
# (kernels a step, the fused function's host time); then, as the budget allows, bf16 at 512 x 8, the compiled
# profile, compiled with inductor's default mode and the fp32 pair), translation (the study at the
# small preset, four runs at a time), glue (the teaching study's cheap recipes on RTE and MRPC). Each sweep skips
# the runs that have a record in its results file in docs/results/, so a shard stopped at BUDGET_S goes on in the
# next job; a translation run cut off resumes from its last epoch's checkpoint, a GLUE run is redone. The results
# files are written to $OUT: copy them over docs/results/.
set -euo pipefail
cd "$(dirname "$0")/../.."
SHARD=${1:-}
MODE=${2:-run}
# The wall time a shard's work may take, so that its results are written before the job's own time limit.
BUDGET_S=${BUDGET_S:-540}

carry() {
	case $SHARD in
	speed) echo .device/wheels.tar.xz ;;
	translation) printf '%s\n' .device/wheels.tar.xz .device/multi30k.tar.xz ;;
	glue) printf '%s\n' .device/wheels.tar.xz .device/minilm .device/glue.tar.xz ;;
	*)
		echo "shard.sh: error: unknown shard '$SHARD'; choose speed, translation or glue" >&2
		exit 2
		;;
	esac
}

if [[ $MODE == --carry ]]; then
	carry
	exit
fi
carry >/dev/null # an unknown shard stops here (inside $(carry) below its exit would not end the script)
for carried in $(carry); do
	[[ -e $carried ]] || { echo "shard.sh: error: $carried is missing: run scripts/device/prepare.sh first" >&2; exit 2; }
done
# Each archive unpacks beside itself into the folder of its name (.device/glue.tar.xz: .device/glue).
for carried in $(carry); do
	if [[ $carried == *.tar.xz ]]; then
		rm -rf "${carried%.tar.xz}"
		python3 -m tarfile -e "$carried" .device # Python's tarfile: a node's image may lack xz
	fi
done

if [[ $MODE == --dry-run ]]; then
	PY=.venv/bin/python
	OUT=${OUT:-runs/device-dry-run/$SHARD}
	RUNS=runs/device-dry-run/$SHARD
	RESULTS=$RUNS/results
	DEVICE=cpu
	rm -rf "$RUNS"
	mkdir -p "$OUT" "$RESULTS"
	MINILM=$RUNS/minilm
elif [[ $MODE == run ]]; then
	PY=python3
	: "${OUT:?set OUT to the folder for the results (on the GPU node), or use --dry-run here}"
	RUNS=/tmp/runs
	RESULTS=docs/results
	DEVICE=cuda
	MINILM=/tmp/minilm
	# The image has torch; the carried wheels (transformers and the data tools at constraints.txt's versions) go
	# first on the path, over any older transformers it has.
	$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .device/wheels/*.whl
	export PYTHONPATH=/tmp/site:$PWD
else
	echo "shard.sh: error: unknown mode '$MODE'; choose --carry, --dry-run or nothing (run on the device)" >&2
	exit 2
fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 PYTHONUNBUFFERED=1
# The whole output is kept beside the results.
exec > >(tee "$OUT/$SHARD.log") 2>&1
$PY - <<'PY'
import torch, transformers
print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
      f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}")
PY

# Runs a step within what is left of the budget; a step cut off still lets the results be copied to $OUT.
START=$SECONDS
within_budget() {
	local left=$((BUDGET_S - (SECONDS - START)))
	((left > 0)) || { echo "shard.sh: no time left for: $*"; return 0; }
	timeout "$left" "$@" || echo "shard.sh: stopped or failed ($?): $*"
}

benchmark() {
	if [[ $MODE == --dry-run ]]; then
		set -- "$@" --sizes minilm --seq-lens 16 --batch-size 2 --warmup 3 --repeats 1 --threads 1
	else
		set -- "$@" --sizes bert-base --warmup 3 --repeats 10
	fi
	within_budget $PY scripts/benchmark.py --device "$DEVICE" --rank 64 "$@"
}

# Compiled: the dry run traces with dynamo's eager backend (inductor would compile for minutes on a CPU). A second
# argument is the mixers' mode (CASAN_FUSED_MIXER; "compiled": the fused operator inside the graphs). Every record
# carries its `mixer` and `compile_mode`.
compiled() {
	local backend=() suffix=""
	[[ $MODE == --dry-run ]] && backend=(--compile-backend eager)
	[[ -n ${2:-} ]] && suffix="_fused_$2"
	(
		export CASAN_FUSED_MIXER=${2:-eager}
		benchmark --dtype bfloat16 --seq-lens 128 --batch-size 32 --context-types global deep_global --rank 0 \
			--compile "$1" "${backend[@]}" --json "$OUT/compiled_$1$suffix.json"
	)
}

# A training step of BERT and CASAN global under torch.profiler: GPU busy time against wall time, into the log (no
# chrome traces: with them the shard would write more than the 8 files a lent device machine hands back). Extra
# arguments go to the script (`--compile default`: the dry run compiles with dynamo's eager backend).
profile_step() {
	local size=()
	[[ $MODE == --dry-run ]] && size=(--size small --seq-len 8 --batch-size 2 --steps 1)
	[[ $MODE == --dry-run && $* == *--compile* ]] && size+=(--compile-backend eager)
	within_budget $PY scripts/profile_training_step.py --device "$DEVICE" "${size[@]}" "$@"
}

case $SHARD in
speed)
	# Dynamo's graph breaks and recompiles go to the log: a compiled model with the fused operator should show none.
	export TORCH_LOGS=graph_breaks,recompiles
	# The fused mixer against the formulas and its PyTorch path, eager and compiled (the dry run's kernels run through
	# Triton's interpreter), the context kernels against the paper's formulas (float64) and under bf16 autocast, then
	# sdpa's flash kernel.
	interpreter=()
	[[ $MODE == --dry-run ]] && interpreter=(env TRITON_INTERPRET=1)
	within_budget "${interpreter[@]}" $PY -m pytest -q -p no:cacheprovider tests/fused_mixer_cases.py --device "$DEVICE"
	within_budget $PY -m pytest -q -p no:cacheprovider tests/test_context_kernels.py tests/test_cuda_attention.py \
		--device "$DEVICE"
	# The fused function's host time a layer against nn.Linear's, launches made (through the compiled kernels), and the
	# host work it counts with the launches stubbed.
	within_budget $PY -m casan_hf.benchmark.fused_host_work --time --device "$DEVICE"
	# Eager, each CASAN kind with context fused and on the mixer's PyTorch path; compiled with the fused operator, then
	# on the PyTorch path; then kernels a step and the fused function's host time under the profiler.
	benchmark --dtype bfloat16 --seq-lens 128 --batch-size 32 --context-types none global deep_global --rank 0 \
		--pytorch-mixer --json "$OUT/speed_bfloat16_128x32.json"
	compiled reduce-overhead compiled
	compiled reduce-overhead
	profile_step --models bert global deep_global --pytorch-mixer
	benchmark --dtype bfloat16 --seq-lens 512 --batch-size 8 --context-types none global deep_global --rank 0 \
		--pytorch-mixer --json "$OUT/speed_bfloat16_512x8.json"
	profile_step --models bert global --compile default --rows 40
	compiled default
	benchmark --dtype float32 --seq-lens 128 --batch-size 32 --json "$OUT/speed_float32_128x32.json"
	benchmark --dtype float32 --seq-lens 512 --batch-size 8 --json "$OUT/speed_float32_512x8.json"
	;;
translation)
	# The study's grid is its row of tooling/catalog.py; --dry-run runs a toy grid of the same sweep.
	grid=(--study translation-small-gpu --parallel "${PARALLEL:-4}")
	[[ $MODE == --dry-run ]] && grid=(--model_size micro --seeds 1 --num_train_epochs 1 --parallel 2 --max_steps 2
		--max_train_samples 64 --max_eval_samples 16 --max_predict_samples 16
		--arms none deep_global deep_global:gate_bias_init=0,gate_per_head global:gate_bias_init=0,gate_per_head)
	within_budget $PY scripts/translation_sweep.py "${grid[@]}" --data_dir .device/multi30k \
		--output_dir "$RUNS/translation" --results "$RESULTS/translation_small_gpu.json"
	cp "$RESULTS"/translation_small_gpu.{json,md} "$OUT/" 2>/dev/null || true
	;;
glue)
	$PY scripts/device/minilm_fp16.py unpack .device/minilm "$MINILM"
	grid=(--study glue-minilm-gpu-teaching --parallel "${PARALLEL:-12}")
	[[ $MODE == --dry-run ]] && grid=(--tasks rte --seeds 42 --parallel 2 --max_train_samples rte=32
		--num_train_epochs 0.1 --arms none global deep_global:context_rank=64 deep --recipes finetune context_lr
		--classifier_pooling mean --base_model sentence-transformers/all-MiniLM-L6-v2)
	within_budget $PY scripts/glue_sweep.py "${grid[@]}" --model_name_or_path "$MINILM" --glue_dir .device/glue \
		--output_dir "$RUNS/glue" --results "$RESULTS/glue_minilm_gpu_teaching.json"
	cp "$RESULTS"/glue_minilm_gpu_teaching.{json,md} "$OUT/" 2>/dev/null || true
	;;
esac
echo "shard.sh: $SHARD done in $((SECONDS - START)) s; results in $OUT:"
ls -la "$OUT"
